//! SPIR-V for `#[sycl::kernel]` kernels (Level Zero; OpenCL devices with IL support), built at
//! run time from the checked IR the macros encode for every kernel and helper (a helper is a
//! separate macro invocation, so only the runtime sees a whole program): one module per
//! definition, variant and `f64` use, as the C programs.
//!
//! `SYCL_RS_SPIRV_DUMP=<dir>` writes every module built to `<dir>` (for `spirv-val`: CI
//! validates all of them).

mod emit;

use super::{on_deep_stack, Bound, Program};
use crate::kernel::__rt::{Definition, HelperDef};
use crate::Result;

/// What a module is specialised for.
pub(crate) struct Target {
    /// Launch dimensions.
    pub dims: u8,
    /// Work-group size in device order (`OpExecutionMode LocalSize`).
    pub local: [usize; 3],
}

/// A built module.
pub(crate) struct Module {
    /// The module.
    pub bytes: Vec<u8>,
    /// The run-time bounds guards of the entry point `ENTRY_GUARDED` (none: the module has
    /// only `ENTRY`): the launch evaluates them on the host and picks that entry point when
    /// they all hold.
    pub guards: Vec<Bound>,
}

/// The SPIR-V module of `def` with its resolved helpers (callees first).
pub(crate) fn module(
    def: &'static Definition,
    helpers: &[&'static HelperDef],
    target: &Target,
) -> Result<Module> {
    on_deep_stack(|| build_module(def, helpers, target))
}

fn build_module(
    def: &'static Definition,
    helpers: &[&'static HelperDef],
    target: &Target,
) -> Result<Module> {
    let p = &def.parts;
    let program = Program::decode(def, helpers)?;
    let local = target.local.map(|l| l as u32);
    // `SYCL_RS_KERNEL_GUARDS=0`: no guarded entry point, every access the guards would cover
    // stays checked (to compare).
    let guarded_entry = !std::env::var_os("SYCL_RS_KERNEL_GUARDS").is_some_and(|v| v == "0")
        && !program.kernel.guards().is_empty();
    let emitted = emit::build(&emit::Program {
        kernel: &program.kernel,
        kernel_calls: program.kernel_calls.clone(),
        helpers: program
            .helpers
            .iter()
            .map(|(f, c)| (f, c.clone()))
            .collect(),
        dims: target.dims,
        local,
        scratch_param: p.info.reduce_bytes > 0,
        guarded_entry,
    })?;
    let bytes: Vec<u8> = emitted.words.iter().flat_map(|w| w.to_le_bytes()).collect();
    dump(p.name, target, &bytes);
    Ok(Module {
        bytes,
        guards: emitted.guards,
    })
}

/// Writes the module under `SYCL_RS_SPIRV_DUMP`, if set (for validation: CI validates every
/// module the tests built).
fn dump(name: &str, target: &Target, bytes: &[u8]) {
    let [x, y, z] = target.local;
    let stem = format!("{name}-d{}-{x}x{y}x{z}", target.dims);
    super::dump("SYCL_RS_SPIRV_DUMP", &stem, "spv", bytes);
}

#[cfg(test)]
mod tests {
    use super::emit;
    use crate::kernel::__rt::{GeneratedKernel, KernelFn};
    use crate::kernel::codegen::decode;
    use sycl_kernel_ir::validate::Role;

    #[sycl::kernel_fn]
    fn twice(x: u32) -> u32 {
        if x > 100 {
            return x;
        }
        x * 2
    }

    #[sycl::kernel]
    fn sample(k: u32, x: &[u32], y: &mut [u32]) {
        let tile = local_array::<u32, 64>();
        let l = local_id(0);
        tile[l] = x[global_id(0)] / k;
        barrier();
        let mut acc = 0u32;
        for j in (0..64usize).step_by(3) {
            acc += twice(tile[j]);
        }
        let s = group_sum(acc);
        if s == 7 {
            return;
        }
        let t = sub_group_shuffle(s, sub_group_local_id() + 1);
        let u = sub_group_max(t);
        y[global_id(0)] = s + u;
    }

    /// Decodes and builds `words` (the kernel's) with the helper `twice`; a malformed input
    /// must give an error, never a panic.
    fn build(words: &[u32]) -> crate::Result<emit::Emitted> {
        let helper = decode(
            <twice as KernelFn<()>>::definition().parts.ir,
            Role::Helper,
            0,
        )?;
        let kernel = decode(words, Role::Kernel, 1)?;
        emit::build(&emit::Program {
            kernel: &kernel,
            kernel_calls: vec![0],
            helpers: vec![(&helper, Vec::new())],
            dims: 1,
            local: [64, 1, 1],
            scratch_param: true,
            guarded_entry: !kernel.guards().is_empty(),
        })
    }

    #[sycl::kernel]
    fn scaled(k: u32, y: &mut [u32]) {
        y[global_id(0)] = k * 5;
    }

    /// A `u32` `*` carries a no-signed-wrap proof, which is never a run-time guard: the
    /// kernel's guards would not cover it, so the decoder refuses one.
    #[test]
    fn no_signed_wrap_by_guard_is_refused() {
        let words = scaled::definition().parts.ir;
        assert!(
            decode(words, Role::Kernel, 0).is_ok(),
            "the real words decode"
        );
        // `k * 5`: tag 6, type u32 (2), operator `*` (2), proof "no" (0).
        let at = words
            .windows(4)
            .position(|w| w == [6, 2, 2, 0])
            .expect("the u32 multiplication and its proof");
        let mut guarded = words[..at + 3].to_vec();
        // Proof 3 (a guard) with the condition "1" (a number: tag 0, two words).
        guarded.extend([3, 0, 1, 0]);
        guarded.extend(&words[at + 4..]);
        let e = decode(&guarded, Role::Kernel, 0).expect_err("a guard is refused");
        assert_eq!(e.code(), crate::Errc::Build);
    }

    #[test]
    fn malformed_ir_is_an_error_not_a_panic() {
        let words = sample::definition().parts.ir;
        assert!(build(words).is_ok(), "the real words build");
        for n in 0..words.len() {
            let e = build(&words[..n]).expect_err("a truncated encoding is refused");
            assert_eq!(e.code(), crate::Errc::Build);
        }
        // Every word replaced by values that are wrong somewhere: errors or modules, no panic.
        let mut refused = 0;
        for i in 0..words.len() {
            for v in [0, 1, 2, 7, 13, 64, 0xFFFF, 0xFFFF_FFFF] {
                let mut w = words.to_vec();
                w[i] = v;
                if let Err(e) = build(&w) {
                    assert_eq!(e.code(), crate::Errc::Build);
                    refused += 1;
                }
            }
        }
        assert!(
            refused > words.len(),
            "most corruptions are caught: {refused}"
        );
    }
}
