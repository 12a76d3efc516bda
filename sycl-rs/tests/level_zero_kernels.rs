//! `#[sycl::kernel]` kernels on Level Zero, against the mock driver of the Level Zero backend
//! (`backends/level-zero/tests/mock/mock_ze_driver.c`, loaded by the real loader through
//! `ZE_ENABLE_ALT_DRIVERS`): the launch builds the SPIR-V module sycl-rs makes (the same bytes
//! as `spirv_of` for the launch's work-group size) with `zeModuleCreate`, sets the arguments
//! in the layout of the OpenCL C form, and picks the entry point without the checks that the
//! run-time bounds guards cover exactly when they hold. The mock reads the kernel's parameter count
//! from the module and keeps what it received; it runs nothing, so this proves the module and
//! the argument layout, not the kernel's results (those are proved on Intel's CPU OpenCL
//! runtime from the same modules: spec/level-zero.md).
//!
//! Skips with a message without `cc`, the loader or its headers; fails instead when
//! `SYCL_RS_REQUIRE_LEVEL_ZERO_LOADER=1` (CI).

#[path = "../../backends/level-zero/tests/common/mod.rs"]
mod common;

use std::process::Command;

use sycl::kernel::KernelIr;
use sycl::{Aspect, BackendKind, Device, Queue, Range};

#[sycl::kernel]
fn scale(a: f32, flag: bool, x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = if flag { a * x[i] } else { x[i] };
}

#[sycl::kernel]
fn sums(x: &[u32], out: &mut [u32]) {
    let s = group_sum(x[global_id(0)]);
    if local_id(0) == 0 {
        let _old = atomic_fetch_add(out, group_id(0), s);
    }
}

#[sycl::kernel]
fn lane_sums(x: &[u32], out: &mut [u32]) {
    let v = x[global_id(0)];
    let s = sub_group_sum(v);
    let next = sub_group_shuffle(v, sub_group_local_id() + 1);
    out[global_id(0)] = s + next;
}

/// Device-side signalling: data, a fence, then a flag released at system scope.
#[sycl::kernel]
fn publish(data: &mut [u32], flag: &mut [u32], v: u32) {
    let i = global_id(0);
    data[i] = v;
    atomic_fence(Ordering::Release, MemoryScope::Device);
    atomic_store(flag, i, v, Ordering::Release, MemoryScope::System);
}

/// Halves: a bf16 scalar (16 bits), f16 in, bf16 out.
#[sycl::kernel]
fn scale_halves(a: sycl::half::bf16, x: &[sycl::half::f16], y: &mut [sycl::half::bf16]) {
    let i = global_id(0);
    y[i] = sycl::half::bf16::from_f32(a.to_f32() * x[i].to_f32());
}

/// Group scans, votes and a broadcast (scratch-based and core forms), and sub-group scans by
/// shuffles.
/// A helper taking a slice.
#[sycl::kernel_fn]
fn first_of(x: &[f32], k: usize) -> f32 {
    x[k % x.len()]
}

/// A const-generic kernel with a private array (a template instantiated at launch), calling
/// a helper that takes a slice, with the slice and with the array (the helper's `Function`
/// storage-class variant).
#[sycl::kernel]
fn tiled<const K: usize>(x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    let mut acc = [0.0f32; K];
    for k in 0..K {
        acc[k] = first_of(x, i + k);
    }
    y[i] = acc[K - 1] + first_of(&acc, i);
}

/// A generic kernel: one instance per float type.
#[sycl::kernel]
fn axpy<T: sycl::Float>(a: T, x: &[T], y: &mut [T]) {
    let i = global_id(0);
    y[i] = a * x[i] + y[i];
}

/// A kernel struct (16 bytes), by value and in slices.
#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Body {
    pos: [f32; 3],
    mass: f32,
}

/// A generic helper (its `f32` instance is linked into `drift`).
#[sycl::kernel_fn]
fn twice_of<T: sycl::Float>(x: T) -> T {
    x + x
}

#[sycl::kernel]
fn drift(b: &mut [Body], shift: Body) {
    let i = global_id(0);
    let mut q = b[i];
    for k in 0..3 {
        q.pos[k] += twice_of(shift.pos[k]) * shift.mass;
    }
    b[i] = q;
}

#[sycl::kernel]
fn prefix_sums(x: &[u32], out: &mut [u32]) {
    let v = x[global_id(0)];
    let s = group_inclusive_sum(v);
    let p = group_exclusive_product(v);
    let b = group_broadcast(v, 0);
    let any = group_any(v == 0);
    let lane = sub_group_inclusive_bit_xor(v);
    out[global_id(0)] = if any { s + p + b + lane } else { s };
}

/// What the mock kept of the last launch.
struct Launch {
    name: String,
    sizes: Vec<usize>,
    nulls: Vec<bool>,
    values: Vec<u64>,
}

fn last_module(mock: &libloading::Library) -> Vec<u8> {
    // SAFETY: the signature the mock exports; it returns its own copy of the module (valid
    // until the next zeModuleCreate, and the test is single-threaded).
    unsafe {
        let f = mock
            .get::<unsafe extern "C" fn(*mut usize) -> *const u8>(b"mock_ze_last_module\0")
            .expect("mock_ze_last_module");
        let mut len = 0usize;
        let p = f(&mut len);
        assert!(!p.is_null(), "no module was created");
        std::slice::from_raw_parts(p, len).to_vec()
    }
}

fn last_launch(mock: &libloading::Library) -> Launch {
    let mut name = [0u8; 64];
    let mut sizes = [0usize; 32];
    let mut nulls = [0i32; 32];
    let mut values = [0u64; 32];
    // SAFETY: the signature the mock exports; the arrays have the 32 entries it may write.
    let n = unsafe {
        let f = mock
            .get::<unsafe extern "C" fn(*mut u8, *mut usize, *mut i32, *mut u64) -> i32>(
                b"mock_ze_last_launch\0",
            )
            .expect("mock_ze_last_launch");
        f(
            name.as_mut_ptr(),
            sizes.as_mut_ptr(),
            nulls.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    } as usize;
    let end = name.iter().position(|&b| b == 0).unwrap_or(64);
    Launch {
        name: String::from_utf8_lossy(&name[..end]).into_owned(),
        sizes: sizes[..n].to_vec(),
        nulls: nulls[..n].iter().map(|&v| v != 0).collect(),
        values: values[..n].to_vec(),
    }
}

/// Launches `kernel` (of definition `K`) over `range`, checks that the driver got exactly
/// `spirv_of::<K>(range)` and that it validates; returns what the mock kept of the launch.
fn launch_module<K: sycl::kernel::__rt::GeneratedKernel>(
    q: &Queue,
    mock: &libloading::Library,
    name: &str,
    range: Range,
    kernel: impl sycl::KernelFunctor,
) -> Launch {
    q.parallel_for(range, &[], kernel)
        .expect("submit")
        .wait()
        .expect("wait");
    let module = last_module(mock);
    assert_eq!(
        module,
        sycl::kernel::__rt::spirv_of::<K>(range).expect("spirv_of"),
        "{name}: zeModuleCreate got another module"
    );
    spirv_val(name, &module);
    last_launch(mock)
}

/// `spirv-val` on the module where it is installed (`SYCL_RS_REQUIRE_SPIRV_VAL=1`: it must be).
fn spirv_val(name: &str, bytes: &[u8]) {
    if Command::new("spirv-val").arg("--version").output().is_err() {
        assert!(
            !std::env::var("SYCL_RS_REQUIRE_SPIRV_VAL").is_ok_and(|v| v == "1"),
            "SYCL_RS_REQUIRE_SPIRV_VAL=1 but spirv-val is not on PATH"
        );
        eprintln!("skip spirv-val of {name}: not on PATH (Debian: spirv-tools)");
        return;
    }
    let file = std::env::temp_dir().join(format!("sycl-rs-l0-{name}-{}.spv", std::process::id()));
    std::fs::write(&file, bytes).expect("write the module");
    let out = Command::new("spirv-val")
        .args(["--target-env", "spv1.0"])
        .arg(&file)
        .output()
        .expect("spirv-val");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "{name}: spirv-val: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn generated_kernels_reach_level_zero_as_spirv_with_the_launch_layout() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../backends/level-zero/tests/mock/mock_ze_driver.c");
    let lib = match common::build_mock_from(&src) {
        Ok(p) => p,
        Err(e) => {
            assert!(!common::required(), "mock driver unavailable: {e}");
            eprintln!("SKIPPED: mock driver unavailable: {e}");
            return;
        }
    };
    // Before the first loader call of this process (the test binary has one test).
    std::env::set_var("ZE_ENABLE_ALT_DRIVERS", &lib);
    let Some(dev) = Device::all()
        .into_iter()
        .find(|d| d.backend() == BackendKind::LevelZero)
    else {
        assert!(
            !common::required(),
            "no Level Zero device with the mock driver"
        );
        eprintln!("SKIPPED: no Level Zero device (loader missing?)");
        return;
    };
    // SAFETY: the library the loader opened (same path: the same handle and globals); only
    // the mock's exported record functions are called, with their signatures.
    let mock = unsafe { libloading::Library::new(&lib) }.expect("reopen the mock");
    assert!(dev.has(Aspect::ExtSyclRsKernels));
    let q = Queue::in_order(&dev).expect("queue");
    assert_eq!(q.context().kernel_ir(), KernelIr::SpirV);

    // A flat kernel over a plain range: groups of 256, the range rounded up.
    let n = 1000usize;
    let x = sycl::malloc_device::<f32>(n, &q).expect("x");
    let y = sycl::malloc_device::<f32>(n, &q).expect("y");
    q.parallel_for(Range::d1(n), &[], scale(2.5, true, &x, &y))
        .expect("submit")
        .wait()
        .expect("wait");
    let module = last_module(&mock);
    let want = sycl::kernel::__rt::spirv_of::<scale>(Range::d1(1024).with_local([256, 1, 1]))
        .expect("spirv_of");
    assert_eq!(module, want, "zeModuleCreate got another module");
    assert_eq!(&module[..4], &0x0723_0203u32.to_le_bytes());
    spirv_val("scale", &module);
    let l = last_launch(&mock);
    // The run-time bounds guards (`global_range(0) <= len` of x and y) hold: the entry point
    // without those checks.
    assert_eq!(l.name, "sycl_kernel_guarded");
    // a, flag (one byte), x and its length, y and its length, the status word, the range.
    assert_eq!(l.sizes, [4, 1, 8, 8, 8, 8, 8, 8, 8, 8], "argument sizes");
    assert!(l.nulls.iter().all(|&z| !z));
    assert_eq!(l.values[0], 2.5f32.to_bits() as u64);
    assert_eq!(l.values[1], 1);
    assert_eq!(
        (l.values[2], l.values[3], l.values[4], l.values[5]),
        (x.as_ptr(), n as u64, y.as_ptr(), n as u64)
    );
    assert_ne!(l.values[6], 0, "the status word");
    assert_eq!(&l.values[7..], &[n as u64, 1, 1], "the range");

    // A shorter x: a guard fails, so the entry point with every check (the mock runs nothing:
    // on a device the out-of-bounds work-items would fail the launch).
    let short = sycl::malloc_device::<f32>(n - 1, &q).expect("short");
    q.parallel_for(Range::d1(n), &[], scale(2.5, false, &short, &y))
        .expect("submit")
        .wait()
        .expect("wait");
    let l = last_launch(&mock);
    assert_eq!(l.name, "sycl_kernel");
    assert_eq!((l.values[1], l.values[3]), (0, n as u64 - 1));

    // A work-group kernel with a reduction: the local scratch the OpenCL C form takes, too.
    let groups = 4usize;
    let xs = sycl::malloc_device::<u32>(groups * 64, &q).expect("xs");
    let out = sycl::malloc_device::<u32>(groups, &q).expect("out");
    let range = Range::d1(groups * 64).with_local([64, 1, 1]);
    let l = launch_module::<sums>(&q, &mock, "sums", range, sums(&xs, &out));
    assert_eq!(l.sizes, [8, 8, 8, 8, 8, 8, 8, 8, 64 * 8], "argument sizes");
    assert_eq!(
        l.nulls,
        [false, false, false, false, false, false, false, false, true]
    );
    assert_eq!(&l.values[5..8], &[(groups * 64) as u64, 1, 1], "the range");

    // Sub-groups: the mock lists one sub-group size, so the device has the aspect, and a
    // sub-group kernel reaches the driver as SPIR-V with the flat layout (no scratch).
    assert!(dev.has(Aspect::ExtSyclRsSubGroups));
    assert_eq!(dev.sub_group_sizes(), [16]);
    let out = sycl::malloc_device::<u32>(groups * 64, &q).expect("out");
    let l = launch_module::<lane_sums>(&q, &mock, "lane_sums", range, lane_sums(&xs, &out));
    assert_eq!(l.sizes, [8; 8], "argument sizes");
    assert!(l.nulls.iter().all(|&z| !z));
    assert_eq!(&l.values[5..8], &[(groups * 64) as u64, 1, 1], "the range");

    // Scans, votes and a broadcast: a group kernel with the scratch, and sub-groups.
    let l = launch_module::<prefix_sums>(&q, &mock, "prefix_sums", range, prefix_sums(&xs, &out));
    assert_eq!(l.sizes, [8, 8, 8, 8, 8, 8, 8, 8, 64 * 8], "argument sizes");
    assert_eq!(&l.values[5..8], &[(groups * 64) as u64, 1, 1], "the range");

    // Ordered atomics and a fence (the mock's device has every order and scope).
    let flat = Range::d1(256).with_local([256, 1, 1]);
    let data = sycl::malloc_device::<u32>(256, &q).expect("data");
    let flag = sycl::malloc_device::<u32>(256, &q).expect("flag");
    let l = launch_module::<publish>(&q, &mock, "publish", flat, publish(&data, &flag, 7));
    assert_eq!(l.sizes, [8, 8, 8, 8, 4, 8, 8, 8, 8], "argument sizes");
    assert_eq!(l.values[4], 7);

    // Halves: the bf16 scalar is passed as its 16 bits.
    let xh = sycl::malloc_device::<sycl::half::f16>(256, &q).expect("x");
    let yh = sycl::malloc_device::<sycl::half::bf16>(256, &q).expect("y");
    let a = sycl::half::bf16::from_f32(1.5);
    let l =
        launch_module::<scale_halves>(&q, &mock, "scale_halves", flat, scale_halves(a, &xh, &yh));
    assert_eq!(l.sizes, [2, 8, 8, 8, 8, 8, 8, 8, 8], "argument sizes");
    assert_eq!(l.values[0], a.to_bits() as u64);

    // A const-generic kernel (instantiated for K = 4) with a private array and a helper
    // taking a slice, and that array; its module is the instance's.
    let x = sycl::malloc_device::<f32>(256, &q).expect("x");
    let y = sycl::malloc_device::<f32>(256, &q).expect("y");
    let l = launch_module::<tiled<4>>(&q, &mock, "tiled", flat, tiled::<4>(&x, &y));
    assert_eq!(l.sizes, [8; 8], "argument sizes");
    assert_eq!((l.values[0], l.values[2]), (x.as_ptr(), y.as_ptr()));

    // A generic kernel's f32 and bf16 instances (the mock has no fp64): each its own module,
    // scalars at their width.
    let l = launch_module::<axpy<f32>>(&q, &mock, "axpy_f32", flat, axpy(2.0f32, &x, &y));
    assert_eq!(l.sizes, [4, 8, 8, 8, 8, 8, 8, 8, 8], "argument sizes");
    assert_eq!(l.values[0], 2.0f32.to_bits() as u64);
    let xb = sycl::malloc_device::<sycl::half::bf16>(256, &q).expect("x");
    let l =
        launch_module::<axpy<sycl::half::bf16>>(&q, &mock, "axpy_bf16", flat, axpy(a, &xb, &yh));
    assert_eq!(l.sizes, [2, 8, 8, 8, 8, 8, 8, 8, 8], "argument sizes");
    assert_eq!(l.values[0], a.to_bits() as u64);

    // A struct slice (pointer and length in structs) and a struct by value (a scalar
    // argument per scalar: pos[0..3], mass); a generic helper's instance linked in.
    let bodies = sycl::malloc_device::<Body>(256, &q).expect("bodies");
    let shift = Body {
        pos: [1.0, 2.0, 3.0],
        mass: 0.5,
    };
    let l = launch_module::<drift>(&q, &mock, "drift", flat, drift(&bodies, shift));
    assert_eq!(l.sizes, [8, 8, 4, 4, 4, 4, 8, 8, 8, 8], "argument sizes");
    assert_eq!((l.values[0], l.values[1]), (bodies.as_ptr(), 256));
    assert_eq!(l.values[3], 2.0f32.to_bits() as u64);
    assert_eq!(l.values[5], 0.5f32.to_bits() as u64);
}
