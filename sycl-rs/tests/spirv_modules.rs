//! The SPIR-V modules sycl-rs builds for `#[sycl::kernel]` kernels, without a driver: their
//! structure (entry point, work-group size, parameters in the OpenCL C form's layout), and
//! `spirv-val` (Debian's `spirv-tools`) on each. Without `spirv-val` the validation is skipped
//! with the reason; `SYCL_RS_REQUIRE_SPIRV_VAL=1` (CI) makes that a failure.
//!
//! The kernels cover the language: arithmetic of every type, casts, math, helpers (nested,
//! failing), every loop form with `break`/`continue`/`return`, short-circuits, `if` values,
//! local arrays, barriers in uniform loops, group reductions, atomics (32 and 64 bits, local
//! and global), sub-group queries and collectives, and bounds proofs of every kind. Also the
//! C programs' side of the run-time bounds guards (`program_source_of`).

use std::path::{Path, PathBuf};
use std::process::Command;

use rspirv::dr::{load_words, Instruction, Module, Operand};
use rspirv::spirv::{BuiltIn, Capability, Decoration, ExecutionMode, Op, StorageClass};
use sycl::kernel::__rt::spirv_of;
use sycl::Range;

#[sycl::kernel_fn]
fn halve(x: f32) -> f32 {
    x * 0.5
}

#[sycl::kernel_fn]
fn safe_div(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    a / b
}

#[sycl::kernel_fn]
fn scaled_div(a: i32, b: i32) -> i32 {
    safe_div(a, b) * 2 + a % b
}

#[sycl::kernel]
fn arithmetic(flag: bool, k: i32, x: &[f32], n: &[i64], y: &mut [f32], m: &mut [u32]) {
    let i = global_id(0);
    let mut acc = 0.0f32;
    for j in 0..4usize {
        if j == 2 {
            continue;
        }
        acc += halve(x[(i + j) % x.len()]);
    }
    let mut w = 0u32;
    while w < 10 {
        w += 3;
        if w > 7 {
            break;
        }
    }
    let mut t = 0i64;
    loop {
        t += 1;
        if t >= 3 {
            break;
        }
    }
    for s in (0..=k).step_by(2) {
        t += s as i64;
    }
    if i >= y.len() {
        return;
    }
    let big = if flag && n[i] > 0 {
        n[i] << 3
    } else {
        -n[i] >> 1u32
    };
    let f = (acc.sqrt() + acc.exp().ln() + acc.sin() * acc.cos()).powf(2.0);
    let g = f.mul_add(2.0, 1.0).min(100.0).max(-100.0).abs().floor() + f.ceil();
    let q: i32 = scaled_div(k, (i as i32) - 3);
    y[i] = g + (q as f32) + (big as f32) + (t as f32) + (w as f32);
    m[i] = (g as u32) ^ (k as u32 / 3) ^ (k as u32).min(7) ^ (k.abs() as u32);
}

#[sycl::kernel]
fn doubles(x: &[f64], y: &mut [f64], z: &mut [u64]) {
    let i = global_id(0);
    let v = x[i] * 2.0 - (x[i] as f32) as f64;
    y[i] = v.sqrt();
    let old = atomic_fetch_add(z, 0, v as u64);
    let _m = atomic_fetch_max(z, 1, old);
    let _c = atomic_compare_exchange(z, 2, 0, 1);
}

#[sycl::kernel]
fn groups(x: &[u32], out: &mut [u32], f: &mut [f32]) {
    let tile = local_array::<u32, 256>();
    let counts = local_array::<u32, 16>();
    let l = local_id(0);
    let g = group_id(0);
    if l < 16 {
        counts[l] = 0;
    }
    tile[l] = x[global_id(0)];
    barrier();
    for step in 0..4 {
        let k = (l + step) % local_range(0);
        let v = tile[k];
        barrier();
        tile[l] = v + 1;
        barrier();
    }
    if tile[l] == 7 {
        return;
    }
    let _c = atomic_fetch_add(counts, (tile[l] % 16) as usize, 1);
    let s = group_sum(tile[l]);
    let lo = group_min(tile[l]);
    let hi = group_max(f[global_id(0)]);
    if l == 0 {
        let _o = atomic_fetch_add(out, g, s + lo);
        let _p = atomic_fetch_add(f, g, hi);
    }
}

#[sycl::kernel]
fn tiles_2d(a: &[f32], c: &mut [f32], w: usize) {
    let tile = local_array::<f32, 256>();
    let row = group_id(0) * local_range(0) + local_id(0);
    let col = group_id(1) * local_range(1) + local_id(1);
    tile[local_id(0) * 16 + local_id(1)] = a[row * w + col];
    barrier();
    c[row * w + col] = tile[local_id(1) * 16 + local_id(0)];
}

#[sycl::kernel]
fn sub_groups(x: &[f64], k: usize, out: &mut [f64], ids: &mut [u64]) {
    let i = global_id(0);
    let v = x[i];
    if v < 0.0 {
        return;
    }
    let b = sub_group_broadcast(v, k);
    let s = sub_group_shuffle(v, sub_group_local_id() + 1);
    let l = sub_group_shift_left(v, 1);
    let r = sub_group_shift_right(v, k);
    let m = sub_group_shuffle_xor(v, 3);
    let sum = sub_group_sum(v);
    let lo = sub_group_min(i as i32);
    let hi = sub_group_max(i as u32);
    out[i] = b + s + l + r + m + sum + (lo as f64) + (hi as f64);
    let q = sub_group_id() * sub_group_range() + sub_group_local_range();
    ids[i] = (q * sub_group_max_local_range()) as u64;
}

#[sycl::kernel]
fn element_copies(
    v: &[[f32; 4]],
    vo: &mut [[f32; 4]],
    h: &[[sycl::half::bf16; 8]],
    ho: &mut [[sycl::half::bf16; 8]],
    t: &[[u32; 3]],
    to: &mut [[u32; 3]],
    k: &[u64],
) {
    let i = global_id(0);
    let j = k[i] as usize;
    if j > 1 << 30 {
        kernel_fail(Failure::Mismatched);
    }
    let a = v[i];
    vo[j] = a;
    let b = h[j];
    ho[i] = b;
    let c = t[i];
    to[i] = c;
}

/// Every instruction in the module's functions.
fn function_instructions(m: &Module) -> impl Iterator<Item = &Instruction> {
    m.functions
        .iter()
        .flat_map(|f| &f.blocks)
        .flat_map(|b| &b.instructions)
}

fn module_of(name: &str, words: &[u8]) -> (Vec<u32>, Module) {
    assert_eq!(words.len() % 4, 0, "{name}: not whole words");
    let w: Vec<u32> = words
        .chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(w[0], 0x0723_0203, "{name}: SPIR-V magic");
    let module = load_words(&w).unwrap_or_else(|e| panic!("{name}: does not parse: {e}"));
    (w, module)
}

/// The kernel's entry points (`sycl_kernel`, and `sycl_kernel_guarded` where the kernel has
/// run-time bounds guards), each with the work-group size and the parameter list launch.rs
/// passes.
fn check_structure(name: &str, module: &Module, local: [u32; 3], params: &[&str]) {
    let names: Vec<&Operand> = module.entry_points.iter().map(|e| &e.operands[2]).collect();
    assert_eq!(
        names,
        [
            &Operand::LiteralString("sycl_kernel".into()),
            &Operand::LiteralString("sycl_kernel_guarded".into())
        ],
        "{name}: entry points"
    );
    for entry in &module.entry_points {
        let kernel_id = entry.operands[1].unwrap_id_ref();
        let size = module
            .execution_modes
            .iter()
            .find(|m| {
                m.operands[1] == Operand::ExecutionMode(ExecutionMode::LocalSize)
                    && m.operands[0].unwrap_id_ref() == kernel_id
            })
            .unwrap_or_else(|| panic!("{name}: no LocalSize"));
        assert_eq!(
            &size.operands[2..],
            &local.map(Operand::LiteralBit32)[..],
            "{name}: LocalSize"
        );
        let f = module
            .functions
            .iter()
            .find(|f| f.def_id() == Some(kernel_id))
            .expect("the kernel function");
        let kinds: Vec<String> = f
            .parameters
            .iter()
            .map(|p| describe(module, p.result_type.expect("typed")))
            .collect();
        assert_eq!(kinds, params, "{name}: parameters");
    }
}

/// `u64`, `ptr global`, `ptr local`, `u8`, `f32`... of a type id.
fn describe(module: &Module, ty: u32) -> String {
    let inst = module
        .types_global_values
        .iter()
        .find(|i| i.result_id == Some(ty))
        .expect("a type");
    match inst.class.opcode {
        Op::TypeInt => format!("i{}", inst.operands[0].unwrap_literal_bit32()),
        Op::TypeFloat => format!("f{}", inst.operands[0].unwrap_literal_bit32()),
        Op::TypeBool => "bool".into(),
        Op::TypePointer => match inst.operands[0] {
            Operand::StorageClass(StorageClass::CrossWorkgroup) => "global*".into(),
            Operand::StorageClass(StorageClass::Workgroup) => "local*".into(),
            ref other => format!("{other:?}*"),
        },
        other => format!("{other:?}"),
    }
}

/// `spirv-val` on `file`: with the module's own version's rules, and OpenCL 2.2's where the
/// module has no 64-bit atomics (which that environment lists as an extension's).
fn validate(file: &Path, words: &[u32]) -> Result<(), String> {
    let int64_atomics = words.windows(2).any(|w| w == [0x0002_0011, 12]);
    let mut envs = vec!["spv1.0"];
    if !int64_atomics {
        envs.push("opencl2.2");
    }
    for env in envs {
        let out = Command::new("spirv-val")
            .arg("--target-env")
            .arg(env)
            .arg(file)
            .output()
            .map_err(|e| format!("running spirv-val: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{} ({env}): {}{}",
                file.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(())
}

fn spirv_val_present() -> bool {
    Command::new("spirv-val").arg("--version").output().is_ok()
}

#[test]
fn modules_are_valid_spirv_with_the_launch_layout() {
    let d1 = Range::d1(256).with_local([64, 1, 1]);
    let g1 = Range::d1(1024).with_local([256, 1, 1]);
    let d2 = Range::d2(64, 64).with_local([16, 16, 1]);
    let slice = ["global*", "i64"];
    let tail = ["global*", "i64", "i64", "i64"];
    let cat = |parts: &[&[&'static str]]| -> Vec<&'static str> { parts.concat() };
    let modules = [
        (
            "arithmetic",
            spirv_of::<arithmetic>(d1),
            [64, 1, 1],
            cat(&[&["i8", "i32"], &slice, &slice, &slice, &slice, &tail]),
        ),
        (
            "doubles",
            spirv_of::<doubles>(d1),
            [64, 1, 1],
            cat(&[&slice, &slice, &slice, &tail]),
        ),
        (
            "groups",
            spirv_of::<groups>(g1),
            [256, 1, 1],
            cat(&[&slice, &slice, &slice, &tail, &["local*"]]),
        ),
        (
            "tiles_2d",
            spirv_of::<tiles_2d>(d2),
            [16, 16, 1],
            cat(&[&slice, &slice, &["i64"], &tail]),
        ),
        (
            "sub_groups",
            spirv_of::<sub_groups>(d1),
            [64, 1, 1],
            cat(&[&slice, &["i64"], &slice, &slice, &tail]),
        ),
        (
            "element_copies",
            spirv_of::<element_copies>(d1),
            [64, 1, 1],
            cat(&[
                &slice, &slice, &slice, &slice, &slice, &slice, &slice, &tail,
            ]),
        ),
    ];
    let dir = std::env::temp_dir().join(format!("sycl-rs-spirv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let present = spirv_val_present();
    let required = std::env::var("SYCL_RS_REQUIRE_SPIRV_VAL").is_ok_and(|v| v == "1");
    if !present {
        assert!(
            !required,
            "SYCL_RS_REQUIRE_SPIRV_VAL=1 but spirv-val is not on PATH (Debian: spirv-tools)"
        );
        eprintln!("skip spirv-val: not on PATH (Debian package spirv-tools); structure only");
    }
    let mut failures = Vec::new();
    for (name, bytes, local, params) in modules {
        let bytes = bytes.unwrap_or_else(|e| panic!("{name}: {e}"));
        let (words, module) = module_of(name, &bytes);
        check_structure(name, &module, local, &params);
        if present {
            let file: PathBuf = dir.join(format!("{name}.spv"));
            std::fs::write(&file, &bytes).expect("write the module");
            if let Err(e) = validate(&file, &words) {
                failures.push(e);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "spirv-val failed:\n{}",
        failures.join("\n")
    );
}

/// The sub-group form: `Groups` and `SPV_INTEL_subgroups` (what Intel's OpenCL and Level
/// Zero drivers take), the five sub-group built-ins, and the instructions of each collective.
#[test]
fn sub_groups_use_group_instructions_and_intel_shuffles() {
    let bytes = spirv_of::<sub_groups>(Range::d1(256).with_local([64, 1, 1])).expect("built");
    let (_, module) = module_of("sub_groups", &bytes);
    let caps: Vec<Capability> = module
        .capabilities
        .iter()
        .map(|c| match c.operands[0] {
            Operand::Capability(c) => c,
            ref other => panic!("a capability operand: {other:?}"),
        })
        .collect();
    for c in [Capability::Groups, Capability::SubgroupShuffleINTEL] {
        assert!(caps.contains(&c), "{c:?} in {caps:?}");
    }
    assert!(
        module
            .extensions
            .iter()
            .any(|e| e.operands[0] == Operand::LiteralString("SPV_INTEL_subgroups".into())),
        "the SPV_INTEL_subgroups extension"
    );
    let builtins: Vec<BuiltIn> = module
        .annotations
        .iter()
        .filter(|a| a.operands.get(1) == Some(&Operand::Decoration(Decoration::BuiltIn)))
        .map(|a| match a.operands[2] {
            Operand::BuiltIn(b) => b,
            ref other => panic!("a built-in operand: {other:?}"),
        })
        .collect();
    for b in [
        BuiltIn::SubgroupLocalInvocationId,
        BuiltIn::SubgroupSize,
        BuiltIn::SubgroupMaxSize,
        BuiltIn::SubgroupId,
        BuiltIn::NumSubgroups,
    ] {
        assert!(builtins.contains(&b), "{b:?} in {builtins:?}");
    }
    let count = |op: Op| {
        function_instructions(&module)
            .filter(|i| i.class.opcode == op)
            .count()
    };
    // Two entry points (checked and guarded), each with every collective once: a broadcast,
    // four shuffles (shuffle, both shifts, xor), three reductions.
    assert_eq!(count(Op::GroupBroadcast), 2);
    assert_eq!(count(Op::SubgroupShuffleINTEL), 8);
    for op in [Op::GroupFAdd, Op::GroupSMin, Op::GroupUMax] {
        assert_eq!(count(op), 2, "{op:?}");
    }
}

#[test]
fn spirv_needs_an_nd_range() {
    let e = spirv_of::<arithmetic>(Range::d1(256)).unwrap_err();
    assert_eq!(e.code(), sycl::Errc::NdRange);
}

/// The C forms get the same run-time guards: `tiles_2d`'s `row * w + col` is in bounds when
/// `(group_range(0) * 16 - 1) * w + ... < a.len()`, a condition the macro encodes and the
/// runtime decodes (an unreadable one would leave the program without guards, every check
/// kept). The program launches get when it holds is built with `SYCL_GUARDED` 1 and uses it.
#[test]
fn c_programs_carry_the_run_time_guards() {
    use sycl::kernel::__rt::program_source_of;
    let d2 = Range::d2(64, 64).with_local([16, 16, 1]);
    for backend in [
        sycl::kernel::KernelIr::OpenClC,
        sycl::kernel::KernelIr::CudaC,
    ] {
        let src = program_source_of::<tiles_2d>(backend, d2).expect("a C program");
        assert!(
            src.contains("#define SYCL_GUARDED 1\n"),
            "{backend:?}: tiles_2d's program is not the guarded form"
        );
        let kernel = &src[src.find("// kernel `tiles_2d`").expect("the kernel")..];
        assert!(
            kernel.contains(", SYCL_GUARDED)"),
            "{backend:?}: no access of tiles_2d is covered by the guard"
        );
    }
}

#[sycl::kernel]
fn rows_u32(src: &[f32], dst: &mut [f32]) {
    let w = global_range(1) as u32;
    let y = global_id(0) as u32;
    let x = global_id(1) as u32;
    dst[(y * w + x) as usize] = src[(y * w + x) as usize] + 1.0;
}

#[sycl::kernel]
fn strided_sum(x: &[u32], out: &mut [u32]) {
    let n = x.len();
    let mut acc = 0u32;
    for i in (local_id(0)..n).step_by(local_range(0)) {
        acc += x[i];
    }
    out[global_id(0)] = acc;
}

/// The ids a module decorates `NoSignedWrap`.
fn no_signed_wrap_ids(m: &Module) -> Vec<u32> {
    m.annotations
        .iter()
        .filter(|a| a.operands.get(1) == Some(&Operand::Decoration(Decoration::NoSignedWrap)))
        .filter_map(|a| match a.operands[0] {
            Operand::IdRef(id) => Some(id),
            _ => None,
        })
        .collect()
}

// A clamped tile load, as stencil2d's: a `u32` loop from the local id (its start proved
// below 2^31 for the work-group size), integer `max`/`min`, a local store.
#[sycl::kernel]
fn tile_clamped(src: &[f32], dst: &mut [f32]) {
    let tile = local_array::<f32, 80>();
    let n = src.len() as u32;
    let lx = local_id(0) as u32;
    for t in (lx..40).step_by(16) {
        let g = (t + 1).max(1).min(n) - 1;
        tile[(2 * t) as usize] = src[g as usize];
    }
    barrier();
    dst[global_id(0)] = tile[2 * local_id(0)];
}

/// What stencil2d needs through Intel's SPIR-V reader (spec/kernels.md, "Performance
/// notes"): integer `min`/`max` as compares and selects (an `OpExtInst` is a call it cannot see
/// through), a signed test at the top of a `u32` loop whose start is proved below 2^31, and
/// `NoSignedWrap` on its step and on narrowed index arithmetic (with the extension that
/// allows it in a 1.0 module); and no `OpVariable` initializers (older readers made such a
/// variable one global for all work-items).
#[test]
fn forms_for_intels_spirv_reader() {
    let range = Range::d1(64).with_local([16, 1, 1]);
    let (_, m) = module_of(
        "tile_clamped",
        &spirv_of::<tile_clamped>(range).expect("SPIR-V"),
    );
    let instructions: Vec<_> = function_instructions(&m).collect();
    assert!(
        !instructions.iter().any(|i| i.class.opcode == Op::ExtInst),
        "tile_clamped: an extended instruction (integer min/max?)"
    );
    assert!(
        instructions.iter().any(|i| i.class.opcode == Op::Select),
        "tile_clamped: no select for min/max"
    );
    assert!(
        instructions.iter().any(|i| i.class.opcode == Op::SLessThan),
        "tile_clamped: the u32 loop does not test signed"
    );
    assert!(
        instructions
            .iter()
            .filter(|i| i.class.opcode == Op::Variable)
            .all(|i| i.operands.len() == 1),
        "tile_clamped: an OpVariable with an initializer"
    );
    let no_wrap = no_signed_wrap_ids(&m);
    let decorated_op = |op: Op| {
        instructions
            .iter()
            .any(|i| i.class.opcode == op && i.result_id.is_some_and(|r| no_wrap.contains(&r)))
    };
    assert!(
        decorated_op(Op::IAdd),
        "tile_clamped: the loop step is not NoSignedWrap"
    );
    assert!(
        decorated_op(Op::IMul),
        "tile_clamped: the narrowed index is not NoSignedWrap"
    );
    assert!(
        m.extensions.iter().any(|e| e.operands
            == [Operand::LiteralString(
                "SPV_KHR_no_integer_wrap_decoration".into()
            )]),
        "tile_clamped: NoSignedWrap without its extension"
    );
}

// `u32` arithmetic in `let`s: from local ids (bounded by the work-group size) and from a
// parameter (unbounded).
#[sycl::kernel]
fn tile_neighbours(src: &[f32], dst: &mut [f32], k: u32) {
    let tile = local_array::<f32, 64>();
    let lx = local_id(0) as u32;
    tile[lx as usize] = src[global_id(0)];
    barrier();
    let c = (lx * 2 + 3) as usize;
    let far = k * 5 + lx;
    // Bounded through `>>`, which only the macro's bounds analysis follows.
    let half = (lx >> 1) * 7;
    dst[global_id(0)] = tile[c - 3] + tile[c + 1] + far as f32 + half as f32;
}

/// `u32` arithmetic that the macro's bounds keep below 2^31 (here from local ids and the
/// work-group size, also through `>>`) is `NoSignedWrap`, and `int` arithmetic in OpenCL C,
/// so that Intel's compilers can move a sign extension out of `c ± k` (stencil2d's five
/// tile reads share one address); arithmetic on a parameter, which may wrap, is not.
#[test]
fn bounded_u32_arithmetic_is_no_signed_wrap() {
    let range = Range::d1(64).with_local([16, 1, 1]);
    let (_, m) = module_of(
        "tile_neighbours",
        &spirv_of::<tile_neighbours>(range).expect("SPIR-V"),
    );
    let no_wrap = no_signed_wrap_ids(&m);
    // The ids of the 32-bit constants 2 and 5.
    let constant = |v: u32| -> Vec<u32> {
        m.types_global_values
            .iter()
            .filter(|i| i.class.opcode == Op::Constant && i.operands == [Operand::LiteralBit32(v)])
            .filter_map(|i| i.result_id)
            .collect()
    };
    let (two, five) = (constant(2), constant(5));
    assert!(!two.is_empty() && !five.is_empty(), "the constants 2 and 5");
    let muls_by = |c: &[u32]| -> Vec<u32> {
        function_instructions(&m)
            .filter(|i| {
                i.class.opcode == Op::IMul
                    && i.operands
                        .iter()
                        .any(|o| matches!(o, Operand::IdRef(id) if c.contains(id)))
            })
            .filter_map(|i| i.result_id)
            .collect()
    };
    let (lx_twice, k_five) = (muls_by(&two), muls_by(&five));
    assert!(
        !lx_twice.is_empty() && lx_twice.iter().all(|r| no_wrap.contains(r)),
        "tile_neighbours: lx * 2 (below 32) is not NoSignedWrap"
    );
    assert!(
        !k_five.is_empty() && !k_five.iter().any(|r| no_wrap.contains(r)),
        "tile_neighbours: k * 5 (k a parameter: it may wrap) is NoSignedWrap"
    );
    let half_seven = muls_by(&constant(7));
    assert!(
        !half_seven.is_empty() && half_seven.iter().all(|r| no_wrap.contains(r)),
        "tile_neighbours: (lx >> 1) * 7 (below 64) is not NoSignedWrap"
    );
    // OpenCL C computes the same proved trees in `int` (unsuffixed literals), the
    // parameter's in `uint`.
    let cl = sycl::kernel::__rt::program_source_of::<tile_neighbours>(
        sycl::kernel::KernelIr::OpenClC,
        range,
    )
    .expect("OpenCL C");
    for int_form in ["((int)(v1)) * 2) + 3)", ") * 7)"] {
        assert!(cl.contains(int_form), "OpenCL C: no `{int_form}` in\n{cl}");
    }
    assert!(
        cl.contains("(5u)") && !cl.contains(" * 5)"),
        "OpenCL C: k * 5 is not `uint` arithmetic in\n{cl}"
    );
}

/// The forms Intel's CPU vectorizer needs (spec/kernels.md, "Performance notes"; the kernel
/// bench measures them), present where the guards hold: `u32` index arithmetic in `int`,
/// sign-extended; `global_id(d) as u32` from 32-bit parts; a work-item-strided loop counted
/// with `v += step` in `int` instead of a trip count (CUDA too). CUDA keeps the written
/// index forms. (Conformance `kernels::index_forms` runs them on both sides of their guards.)
#[test]
fn index_and_loop_forms_for_intels_vectorizer() {
    use sycl::kernel::__rt::program_source_of;
    let d2 = Range::d2(64, 64).with_local([16, 16, 1]);
    let d1 = Range::d1(256).with_local([256, 1, 1]);
    let cl = program_source_of::<rows_u32>(sycl::kernel::KernelIr::OpenClC, d2).expect("OpenCL C");
    let kernel = &cl[cl.find("// kernel `rows_u32`").expect("the kernel")..];
    assert!(
        kernel.contains("sycl_global_id_u32(SYCL_AXIS(0))"),
        "{kernel}"
    );
    assert!(
        kernel.contains("(SYCL_GUARDED) ? ((sycl_u64)(")
            && kernel.contains("((int)v1) * ((int)v0)"),
        "no signed 32-bit index: {kernel}"
    );
    let cl =
        program_source_of::<strided_sum>(sycl::kernel::KernelIr::OpenClC, d1).expect("OpenCL C");
    let kernel = &cl[cl.find("// kernel `strided_sum`").expect("the kernel")..];
    assert!(
        kernel.contains("#if SYCL_GUARDED\n") && kernel.contains("for (int sycl_i"),
        "no 32-bit strided loop: {kernel}"
    );
    // CUDA: no Intel index form; the work-item-strided loop counted in `int`, guarded.
    let src = program_source_of::<rows_u32>(sycl::kernel::KernelIr::CudaC, d2).expect("CUDA");
    let kernel = &src[src.find("// kernel `").expect("the kernel")..];
    assert!(
        !kernel.contains("(int)v") && !kernel.contains("#if SYCL_GUARDED"),
        "rows_u32: CUDA got an Intel form: {kernel}"
    );
    let src = program_source_of::<strided_sum>(sycl::kernel::KernelIr::CudaC, d1).expect("CUDA");
    let kernel = &src[src.find("// kernel `").expect("the kernel")..];
    assert!(
        kernel.contains("#if SYCL_GUARDED\n")
            && kernel.contains("for (int sycl_i")
            && kernel.contains("int v")
            && !kernel.contains("for (uint v"),
        "strided_sum: CUDA's loop is not counted in `int`: {kernel}"
    );

    // SPIR-V: the guarded entry point has them, the other one does not.
    let ops = |module: &Module, guarded: bool| -> Vec<Op> {
        let name = if guarded {
            "sycl_kernel_guarded"
        } else {
            "sycl_kernel"
        };
        let entry = module
            .entry_points
            .iter()
            .find(|e| e.operands[2] == Operand::LiteralString(name.into()))
            .expect("the entry point");
        let Operand::IdRef(id) = entry.operands[1] else {
            panic!("entry point operand")
        };
        let f = module
            .functions
            .iter()
            .find(|f| f.def.as_ref().and_then(|d| d.result_id) == Some(id))
            .expect("the entry function");
        f.blocks
            .iter()
            .flat_map(|b| &b.instructions)
            .map(|i| i.class.opcode)
            .collect()
    };
    let (_, rows) = module_of("rows_u32", &spirv_of::<rows_u32>(d2).expect("SPIR-V"));
    let (plain, guarded) = (ops(&rows, false), ops(&rows, true));
    assert!(
        guarded.contains(&Op::SConvert),
        "rows_u32: no sign extension"
    );
    assert!(
        !plain.contains(&Op::SConvert),
        "rows_u32: sign extension unguarded"
    );
    let (_, sum) = module_of("strided_sum", &spirv_of::<strided_sum>(d1).expect("SPIR-V"));
    let (plain, guarded) = (ops(&sum, false), ops(&sum, true));
    assert!(
        plain.contains(&Op::UDiv),
        "strided_sum: no trip count unguarded"
    );
    assert!(
        !guarded.contains(&Op::UDiv),
        "strided_sum: a trip count where v += step fits"
    );
}

/// A whole array element moves as one vector where the form has one (`StmtKind::CopyField`):
/// SPIR-V loads and stores `<4 x f32>` and `<8 x i16>` (bf16 as bits) through
/// `CrossWorkgroup` pointers; OpenCL C `vload4`/`vstore8` (and `vload3`); CUDA 16-byte
/// `uint4` accesses behind the address test. (Conformance `kernels::vector_copies` runs them.)
#[test]
fn whole_elements_move_as_vectors() {
    use sycl::kernel::__rt::program_source_of;
    let d1 = Range::d1(256).with_local([64, 1, 1]);
    let bytes = spirv_of::<element_copies>(d1).expect("built");
    let (_, module) = module_of("element_copies", &bytes);
    let vectors: Vec<(u32, u32)> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeVector)
        .map(|i| match i.operands[1] {
            Operand::LiteralBit32(n) => (i.result_id.expect("an id"), n),
            ref other => panic!("OpTypeVector's count: {other:?}"),
        })
        .collect();
    let loads: Vec<u32> = function_instructions(&module)
        .filter(|i| i.class.opcode == Op::Load)
        .filter_map(|i| i.result_type)
        .filter_map(|t| vectors.iter().find(|v| v.0 == t).map(|v| v.1))
        .collect();
    assert!(
        loads.contains(&4) && loads.contains(&8),
        "SPIR-V: vector loads of {loads:?} items (wanted 4 and 8)"
    );
    let cl =
        program_source_of::<element_copies>(sycl::kernel::KernelIr::OpenClC, d1).expect("OpenCL C");
    for form in [
        "vstore4(vload4(0, ",
        "vstore8(vload8(0, ",
        "vstore3(vload3(0, ",
    ] {
        assert!(cl.contains(form), "OpenCL C: no `{form}` in\n{cl}");
    }
    let cuda =
        program_source_of::<element_copies>(sycl::kernel::KernelIr::CudaC, d1).expect("CUDA C");
    assert_eq!(
        cuda.matches("uint4 w").count(),
        4,
        "CUDA: not two 16-byte loads and stores in\n{cuda}"
    );
}
