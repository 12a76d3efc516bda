//! Tests of the OpenCL backend against every OpenCL device present.
//!
//! Each test iterates all devices of all OpenCL platforms. With no OpenCL loader or no
//! device the tests print why and pass, unless `SYCL_RS_REQUIRE_BACKENDS` names `opencl`, in
//! which case they fail. `backends/opencl/ci-setup.sh` makes PoCL and Intel's CPU runtime
//! visible together.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sycl_backend::{
    Aspect, Context, Device, Errc, EventProperties, EventStatus, KernelArg, KernelSource,
    LaunchRange, Platform, Queue, QueueProperties, UsmKind,
};

struct Dev {
    platform: Arc<dyn Platform>,
    device: Arc<dyn Device>,
}

impl Dev {
    fn label(&self) -> String {
        format!(
            "[{} / {}]",
            self.platform.info().name,
            self.device.info().name
        )
    }
    fn context(&self) -> Arc<dyn Context> {
        self.platform
            .create_context(std::slice::from_ref(&self.device))
            .expect("create_context")
    }
}

fn required() -> bool {
    std::env::var("SYCL_RS_REQUIRE_BACKENDS")
        .is_ok_and(|v| v.split(',').any(|b| b.trim() == "opencl"))
}

fn devices(test: &str) -> Vec<Dev> {
    let backend = match sycl_backend_opencl::load() {
        Ok(b) => b,
        Err(e) => {
            assert!(
                !required(),
                "SYCL_RS_REQUIRE_BACKENDS has opencl but the backend did not load: {e}"
            );
            eprintln!("{test}: skipped: OpenCL backend not loaded: {e}");
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for platform in backend.platforms() {
        for device in platform.devices() {
            out.push(Dev {
                platform: platform.clone(),
                device,
            });
        }
    }
    if out.is_empty() {
        assert!(
            !required(),
            "SYCL_RS_REQUIRE_BACKENDS has opencl but no OpenCL device was found"
        );
        eprintln!("{test}: skipped: no OpenCL device");
    }
    for d in &out {
        eprintln!("{test}: running on {}", d.label());
    }
    out
}

fn host_accessible(d: &Dev) -> Vec<UsmKind> {
    let mut kinds = Vec::new();
    if d.device.has(Aspect::UsmHostAllocations) {
        kinds.push(UsmKind::Host);
    }
    if d.device.has(Aspect::UsmSharedAllocations) {
        kinds.push(UsmKind::Shared);
    }
    kinds
}

fn usm_kinds(d: &Dev) -> Vec<UsmKind> {
    let mut kinds = host_accessible(d);
    if d.device.has(Aspect::UsmDeviceAllocations) {
        kinds.push(UsmKind::Device);
    }
    kinds
}

fn alloc(ctx: &Arc<dyn Context>, d: &Dev, kind: UsmKind, size: usize) -> u64 {
    let dev = (kind != UsmKind::Host).then_some(&d.device);
    ctx.usm_alloc(kind, dev, size, 0)
        .unwrap_or_else(|e| panic!("{} usm_alloc({kind}, {size}): {e}", d.label()))
}

/// Copies `size` bytes from USM to a fresh host vector.
fn read_back(q: &Arc<dyn Queue>, ptr: u64, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; size];
    // SAFETY: `ptr` is a live allocation of at least `size` bytes; `out` outlives the wait.
    unsafe { q.memcpy(out.as_mut_ptr() as u64, ptr, size, &[]) }
        .expect("memcpy")
        .wait()
        .expect("wait");
    out
}

fn write(q: &Arc<dyn Queue>, ptr: u64, data: &[u8]) {
    // SAFETY: as in `read_back`.
    unsafe { q.memcpy(ptr, data.as_ptr() as u64, data.len(), &[]) }
        .expect("memcpy")
        .wait()
        .expect("wait");
}

fn build(ctx: &Arc<dyn Context>, d: &Dev, src: &str) -> Arc<dyn sycl_backend::KernelBundle> {
    ctx.build_kernel_bundle(
        std::slice::from_ref(&d.device),
        &KernelSource::OpenClC(src),
        "",
    )
    .unwrap_or_else(|e| panic!("{} build: {e}", d.label()))
}

fn range1(global: usize, local: Option<usize>) -> LaunchRange {
    LaunchRange {
        dims: 1,
        global: [global, 1, 1],
        local: local.map(|l| [l, 1, 1]),
    }
}

#[test]
fn enumeration_and_aspects() {
    for d in devices("enumeration_and_aspects") {
        let info = d.device.info();
        let l = d.label();
        eprintln!(
            "{l}: {} {}, aspects {:?}",
            info.version, info.driver_version, info.aspects
        );
        assert!(!info.name.is_empty(), "{l}");
        assert!(
            info.version.starts_with("OpenCL"),
            "{l}: version {}",
            info.version
        );
        assert!(
            info.max_compute_units > 0 && info.global_mem_size > 0 && info.max_mem_alloc_size > 0,
            "{l}"
        );
        assert!(
            info.max_work_group_size > 0 && info.max_work_item_sizes[0] > 0,
            "{l}"
        );
        let type_aspects = [
            Aspect::Cpu,
            Aspect::Gpu,
            Aspect::Accelerator,
            Aspect::Custom,
        ];
        assert_eq!(
            type_aspects.iter().filter(|a| d.device.has(**a)).count(),
            1,
            "{l}: exactly one type aspect"
        );
        assert!(d.device.has(Aspect::ExtOneapiReusableEvents), "{l}");
        for a in [
            Aspect::ExtOneapiIpcPhysicalMemory,
            Aspect::ExtOneapiVirtualMem,
            Aspect::ExtSyclRsClosureKernels,
        ] {
            assert!(!d.device.has(a), "{l}: unexpected aspect {a}");
        }
        // IPC events are shared pages of host memory: every device has them.
        assert!(d.device.has(Aspect::ExtOneapiIpcEvent), "{l}");
        // The two drivers this repository's CI sets up: check what they are known to offer.
        if d.platform
            .info()
            .name
            .contains("Portable Computing Language")
        {
            // PoCL: USM on fine-grain SVM, no SPIR-V, no fine-grained system SVM (so no IPC
            // memory: spec/backends.md).
            assert!(
                d.device.has(Aspect::UsmDeviceAllocations)
                    && d.device.has(Aspect::UsmSharedAllocations),
                "{l}"
            );
            assert!(!d.device.has(Aspect::ExtOneapiIpcMemory), "{l}");
            assert!(!d.device.has(Aspect::ExtOneapiKernelCompilerSpirv), "{l}");
            assert!(d.device.has(Aspect::OnlineCompiler), "{l}");
        }
        if d.platform.info().name.contains("Intel(R) OpenCL") {
            for a in [
                Aspect::UsmDeviceAllocations,
                Aspect::UsmHostAllocations,
                Aspect::UsmSharedAllocations,
                Aspect::ExtOneapiKernelCompilerSpirv,
                Aspect::Fp64,
                Aspect::Atomic64,
                // Fine-grained system SVM: device USM is shared memfd memory.
                Aspect::ExtOneapiIpcMemory,
            ] {
                assert!(d.device.has(a), "{l}: missing {a}");
            }
            assert!(info.uuid.is_some(), "{l}: cl_khr_device_uuid is advertised");
        }
        // IPC memory: only with fine-grained system SVM; virtual memory: never.
        let ctx = d.context();
        let want = if d.device.has(Aspect::ExtOneapiIpcMemory) {
            Errc::Invalid // 0 is no allocation
        } else {
            Errc::FeatureNotSupported
        };
        assert_eq!(ctx.ipc_get_mem(0).unwrap_err().code(), want, "{l}");
        let phys = ctx
            .create_physical_mem(&d.device, 1 << 21, Default::default())
            .err()
            .expect("no physical memory on OpenCL");
        assert_eq!(phys.code(), Errc::FeatureNotSupported, "{l}");
        let e = ctx.reserve_virtual_mem(0, 1 << 21).unwrap_err();
        assert_eq!(e.code(), Errc::FeatureNotSupported, "{l}");
        assert!(e.message().contains("ext_oneapi_virtual_mem"), "{l}: {e}");
        // A context on a device of another platform is refused.
        assert_eq!(ctx.devices().len(), 1);
    }
}

#[test]
fn usm_alloc_memcpy_fill() {
    for d in devices("usm_alloc_memcpy_fill") {
        let ctx = d.context();
        let q = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: true,
                    enable_profiling: false,
                },
            )
            .unwrap();
        let kinds = usm_kinds(&d);
        if kinds.is_empty() {
            let e = ctx
                .usm_alloc(UsmKind::Device, Some(&d.device), 16, 0)
                .unwrap_err();
            assert_eq!(e.code(), Errc::FeatureNotSupported);
            continue;
        }
        let patterns: [&[u8]; 5] = [&[0xAB], &[1, 2], &[1, 2, 3, 4], &[9, 8, 7], &[0x10; 16]];
        for kind in kinds {
            for size in [1usize, 3, 4096 + 5, 1 << 20] {
                // Round-trip memcpy of distinct bytes.
                let ptr = alloc(&ctx, &d, kind, size);
                let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
                write(&q, ptr, &data);
                assert_eq!(
                    read_back(&q, ptr, size),
                    data,
                    "{} {kind} memcpy of {size}",
                    d.label()
                );
                // USM to USM copy.
                let other = alloc(&ctx, &d, kind, size);
                // SAFETY: both allocations hold `size` bytes.
                unsafe { q.memcpy(other, ptr, size, &[]) }
                    .unwrap()
                    .wait()
                    .unwrap();
                assert_eq!(
                    read_back(&q, other, size),
                    data,
                    "{} {kind} usm->usm of {size}",
                    d.label()
                );
                // SAFETY: nothing pending uses them.
                unsafe {
                    ctx.usm_free(other).unwrap();
                    ctx.usm_free(ptr).unwrap();
                }

                for pattern in patterns {
                    let n = size * pattern.len();
                    let ptr = alloc(&ctx, &d, kind, n);
                    // SAFETY: the allocation holds `n` bytes.
                    let ev = unsafe { q.fill(ptr, pattern, n, &[]) }.unwrap();
                    ev.wait().unwrap();
                    let got = read_back(&q, ptr, n);
                    let want: Vec<u8> = pattern.iter().copied().cycle().take(n).collect();
                    assert!(
                        got == want,
                        "{} {kind} fill of {n} bytes with {pattern:?}",
                        d.label()
                    );
                    // SAFETY: nothing pending uses it.
                    unsafe { ctx.usm_free(ptr).unwrap() };
                }
            }
        }
        // A pattern that does not divide the size is refused.
        let ptr = alloc(&ctx, &d, UsmKind::Device, 8);
        // SAFETY: refused before any access.
        let e = unsafe { q.fill(ptr, &[1, 2, 3], 8, &[]) }.err().unwrap();
        assert_eq!(e.code(), Errc::Invalid);
        // Prefetch orders like any command.
        // SAFETY: live allocation.
        unsafe { q.prefetch(ptr, 8, &[]) }.unwrap().wait().unwrap();
        // SAFETY: nothing pending.
        unsafe { ctx.usm_free(ptr).unwrap() };
    }
}

#[test]
fn usm_pointer_info() {
    for d in devices("usm_pointer_info") {
        let ctx = d.context();
        for kind in usm_kinds(&d) {
            let size = 4096 + 5;
            let ptr = alloc(&ctx, &d, kind, size);
            for probe in [ptr, ptr + 1, ptr + size as u64 - 1] {
                let info = ctx.usm_pointer_info(probe);
                assert_eq!(info.kind, kind, "{} {kind} at +{}", d.label(), probe - ptr);
                assert_eq!(info.base, ptr, "{}", d.label());
                assert!(info.size >= size, "{}: size {}", d.label(), info.size);
                let want_dev = if kind == UsmKind::Host { None } else { Some(0) };
                assert_eq!(info.device_index, want_dev, "{} {kind}", d.label());
            }
            // SAFETY: nothing pending.
            unsafe { ctx.usm_free(ptr).unwrap() };
        }
        let local = 5u64;
        assert_eq!(
            ctx.usm_pointer_info(&local as *const u64 as u64).kind,
            UsmKind::Unknown
        );
        assert_eq!(ctx.usm_pointer_info(0).kind, UsmKind::Unknown);
        // Alignment is honoured, for every kind, and the pointer is known at its own address.
        for kind in usm_kinds(&d) {
            for align in [64usize, 4096] {
                let dev = (kind != UsmKind::Host).then_some(&d.device);
                let p = ctx.usm_alloc(kind, dev, 100, align).unwrap();
                assert_eq!(p % align as u64, 0, "{} {kind} align {align}", d.label());
                let info = ctx.usm_pointer_info(p + 99);
                assert_eq!((info.kind, info.base), (kind, p), "{}", d.label());
                // SAFETY: nothing pending.
                unsafe { ctx.usm_free(p).unwrap() };
            }
        }
    }
}

const VADD: &str = r"
kernel void vadd(global const float* a, global const float* b, global float* c, uint n) {
    size_t i = get_global_id(0);
    if (i < n) c[i] = a[i] + b[i];
}
";

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn f32_from(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn vector_add_kernel() {
    for d in devices("vector_add_kernel") {
        if !d.device.has(Aspect::UsmDeviceAllocations) || !d.device.has(Aspect::OnlineCompiler) {
            eprintln!("{}: skipped (no USM or no compiler)", d.label());
            continue;
        }
        let ctx = d.context();
        let q = ctx
            .create_queue(&d.device, QueueProperties::default())
            .unwrap();
        let bundle = build(&ctx, &d, VADD);
        assert_eq!(bundle.kernel_names(), vec!["vadd".to_string()]);
        let k = bundle.kernel("vadd").unwrap();
        assert_eq!(k.num_args(), Some(4));
        assert_eq!(k.name(), "vadd");
        assert_eq!(
            bundle.kernel("nope").err().map(|e| e.code()),
            Some(Errc::Invalid)
        );

        let n = 1000usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| (2 * i) as f32 + 0.5).collect();
        let pa = alloc(&ctx, &d, UsmKind::Device, n * 4);
        let pb = alloc(&ctx, &d, UsmKind::Device, n * 4);
        let pc = alloc(&ctx, &d, UsmKind::Device, n * 4);
        write(&q, pa, &f32_bytes(&a));
        write(&q, pb, &f32_bytes(&b));
        let nn = (n as u32).to_ne_bytes();
        for local in [None, Some(8)] {
            // Global rounded up to the local size; the kernel checks `n`.
            let global = n.div_ceil(8) * 8;
            let args = [
                KernelArg::Pointer(pa),
                KernelArg::Pointer(pb),
                KernelArg::Pointer(pc),
                KernelArg::Scalar(&nn),
            ];
            // SAFETY: the three allocations hold n floats until the wait.
            unsafe { q.launch(&k, range1(global, local), &args, &[]) }
                .unwrap()
                .wait()
                .unwrap();
            let c = f32_from(&read_back(&q, pc, n * 4));
            for i in 0..n {
                assert_eq!(c[i], a[i] + b[i], "{} local {local:?} at {i}", d.label());
            }
            // Same kernel, arguments swapped: the argument cache must notice.
            let args = [
                KernelArg::Pointer(pc),
                KernelArg::Pointer(pa),
                KernelArg::Pointer(pc),
                KernelArg::Scalar(&nn),
            ];
            // SAFETY: as above; c = c + a.
            unsafe { q.launch(&k, range1(global, local), &args, &[]) }
                .unwrap()
                .wait()
                .unwrap();
            let c2 = f32_from(&read_back(&q, pc, n * 4));
            for i in 0..n {
                assert_eq!(
                    c2[i],
                    2.0 * a[i] + b[i],
                    "{} second launch at {i}",
                    d.label()
                );
            }
        }
        // A partial `n` (scalar changed only).
        let half = ((n / 2) as u32).to_ne_bytes();
        write(&q, pc, &vec![0u8; n * 4]);
        let args = [
            KernelArg::Pointer(pa),
            KernelArg::Pointer(pb),
            KernelArg::Pointer(pc),
            KernelArg::Scalar(&half),
        ];
        // SAFETY: as above.
        unsafe { q.launch(&k, range1(n, None), &args, &[]) }
            .unwrap()
            .wait()
            .unwrap();
        let c3 = f32_from(&read_back(&q, pc, n * 4));
        assert_eq!(c3[n / 2 - 1], a[n / 2 - 1] + b[n / 2 - 1]);
        assert_eq!(
            c3[n / 2],
            0.0,
            "{}: scalar argument update ignored",
            d.label()
        );

        // Argument errors.
        // SAFETY: refused before launch.
        let e = unsafe { q.launch(&k, range1(n, None), &args[..3], &[]) }
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::KernelArgument, "{e}");
        let bad = [
            KernelArg::Pointer(pa),
            KernelArg::Pointer(pb),
            KernelArg::Pointer(pc),
            KernelArg::Scalar(&[1, 2]),
        ];
        // SAFETY: refused by the driver (wrong scalar size).
        let e = unsafe { q.launch(&k, range1(n, None), &bad, &[]) }
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::KernelArgument, "{e}");
        assert!(e.native().is_some(), "{e}");
        // Local range not dividing the global range.
        // SAFETY: refused before launch.
        let e = unsafe { q.launch(&k, range1(1000, Some(7)), &args, &[]) }
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::NdRange, "{e}");
        // A 2-D launch of a 1-D kernel still works (unused dimension of 1).
        let r2 = LaunchRange {
            dims: 2,
            global: [n, 1, 1],
            local: None,
        };
        // SAFETY: as above.
        unsafe { q.launch(&k, r2, &args, &[]) }
            .unwrap()
            .wait()
            .unwrap();
        q.wait().unwrap();
        for p in [pa, pb, pc] {
            // SAFETY: nothing pending.
            unsafe { ctx.usm_free(p).unwrap() };
        }
    }
}

const WGSUM: &str = r"
kernel void wgsum(global const int* in, global int* out, local int* scratch) {
    size_t lid = get_local_id(0);
    size_t n = get_local_size(0);
    scratch[lid] = in[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        int s = 0;
        for (size_t i = 0; i < n; ++i) s += scratch[i];
        out[get_group_id(0)] = s;
    }
}
";

#[test]
fn local_memory_kernel() {
    for d in devices("local_memory_kernel") {
        if !d.device.has(Aspect::UsmDeviceAllocations) || !d.device.has(Aspect::OnlineCompiler) {
            continue;
        }
        let ctx = d.context();
        let q = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: true,
                    enable_profiling: false,
                },
            )
            .unwrap();
        let k = build(&ctx, &d, WGSUM).kernel("wgsum").unwrap();
        let wg = 64usize.min(d.device.info().max_work_group_size);
        let groups = 16usize;
        let input: Vec<i32> = (0..(wg * groups) as i32).map(|i| i * 3 - 100).collect();
        let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let pin = alloc(&ctx, &d, UsmKind::Device, bytes.len());
        let pout = alloc(&ctx, &d, UsmKind::Device, groups * 4);
        write(&q, pin, &bytes);
        let args = [
            KernelArg::Pointer(pin),
            KernelArg::Pointer(pout),
            KernelArg::Local(wg * 4),
        ];
        // SAFETY: allocations live until the wait.
        unsafe { q.launch(&k, range1(wg * groups, Some(wg)), &args, &[]) }
            .unwrap()
            .wait()
            .unwrap();
        let out: Vec<i32> = read_back(&q, pout, groups * 4)
            .chunks_exact(4)
            .map(|c| i32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        for g in 0..groups {
            let want: i32 = input[g * wg..(g + 1) * wg].iter().sum();
            assert_eq!(out[g], want, "{} group {g}", d.label());
        }
        // SAFETY: nothing pending.
        unsafe {
            ctx.usm_free(pin).unwrap();
            ctx.usm_free(pout).unwrap();
        }
    }
}

#[test]
fn build_error_has_log() {
    for d in devices("build_error_has_log") {
        if !d.device.has(Aspect::OnlineCompiler) {
            continue;
        }
        let ctx = d.context();
        let src = "kernel void broken(global int* p) { p[0] = undeclared_identifier_xyz; }";
        let e = ctx
            .build_kernel_bundle(
                std::slice::from_ref(&d.device),
                &KernelSource::OpenClC(src),
                "",
            )
            .err()
            .expect("a broken kernel must not build");
        assert_eq!(e.code(), Errc::Build, "{} {e}", d.label());
        assert!(
            e.message().contains("undeclared_identifier_xyz"),
            "{}: log missing from {e}",
            d.label()
        );
        assert!(e.native().is_some());
        // Bad options are a build error too.
        let e = ctx
            .build_kernel_bundle(
                std::slice::from_ref(&d.device),
                &KernelSource::OpenClC(VADD),
                "-not-an-option",
            )
            .err()
            .expect("bad options");
        assert_eq!(e.code(), Errc::Build, "{} {e}", d.label());
        // Other languages are not for OpenCL.
        let e = ctx
            .build_kernel_bundle(
                std::slice::from_ref(&d.device),
                &KernelSource::CudaC("__global__ void f(){}"),
                "",
            )
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::FeatureNotSupported);
    }
}

/// A hand-assembled SPIR-V 1.0 module with one kernel: `kernel void k(global int* p) { *p = 42; }`.
fn spirv_store42() -> Vec<u8> {
    let op = |opcode: u32, operands: &[u32]| {
        let mut v = vec![((operands.len() as u32 + 1) << 16) | opcode];
        v.extend_from_slice(operands);
        v
    };
    let (void, int, ptr, fnty, c42, func, p, label) = (1, 2, 3, 4, 5, 6, 7, 8);
    let mut w = vec![0x0723_0203, 0x0001_0000, 0, 9, 0];
    w.extend(op(17, &[4])); // OpCapability Addresses
    w.extend(op(17, &[6])); // OpCapability Kernel
    w.extend(op(14, &[2, 2])); // OpMemoryModel Physical64 OpenCL
    w.extend(op(15, &[6, func, u32::from_le_bytes(*b"k\0\0\0")])); // OpEntryPoint Kernel %func "k"
    w.extend(op(19, &[void])); // OpTypeVoid
    w.extend(op(21, &[int, 32, 0])); // OpTypeInt 32 0
    w.extend(op(32, &[ptr, 5, int])); // OpTypePointer CrossWorkgroup %int
    w.extend(op(33, &[fnty, void, ptr])); // OpTypeFunction %void %ptr
    w.extend(op(43, &[int, c42, 42])); // OpConstant %int 42
    w.extend(op(54, &[void, func, 0, fnty])); // OpFunction
    w.extend(op(55, &[ptr, p])); // OpFunctionParameter
    w.extend(op(248, &[label])); // OpLabel
    w.extend(op(62, &[p, c42, 2, 4])); // OpStore %p %c42 Aligned 4
    w.extend(op(253, &[])); // OpReturn
    w.extend(op(56, &[])); // OpFunctionEnd
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn spirv_kernel() {
    let blob = spirv_store42();
    for d in devices("spirv_kernel") {
        let ctx = d.context();
        let res = ctx.build_kernel_bundle(
            std::slice::from_ref(&d.device),
            &KernelSource::SpirV(&blob),
            "",
        );
        if !d.device.has(Aspect::ExtOneapiKernelCompilerSpirv) {
            let e = res.err().expect("SPIR-V without IL support must fail");
            assert_eq!(e.code(), Errc::FeatureNotSupported, "{e}");
            assert!(
                e.message().contains("ext_oneapi_kernel_compiler_spirv"),
                "{e}"
            );
            eprintln!("{}: no IL support, checked the refusal only", d.label());
            continue;
        }
        let bundle = res.unwrap_or_else(|e| panic!("{}: {e}", d.label()));
        assert_eq!(bundle.kernel_names(), vec!["k".to_string()]);
        let k = bundle.kernel("k").unwrap();
        let q = ctx
            .create_queue(&d.device, QueueProperties::default())
            .unwrap();
        let p = alloc(&ctx, &d, UsmKind::Device, 4);
        // SAFETY: p holds 4 bytes until the wait.
        unsafe { q.launch(&k, range1(1, None), &[KernelArg::Pointer(p)], &[]) }
            .unwrap()
            .wait()
            .unwrap();
        assert_eq!(read_back(&q, p, 4), 42i32.to_ne_bytes());
        // Garbage IL is a build error.
        let e = ctx
            .build_kernel_bundle(
                std::slice::from_ref(&d.device),
                &KernelSource::SpirV(&[1, 2, 3, 4, 5, 6, 7, 8]),
                "",
            )
            .err()
            .unwrap();
        assert!(matches!(e.code(), Errc::Build | Errc::Invalid), "{e}");
        // SAFETY: nothing pending.
        unsafe { ctx.usm_free(p).unwrap() };
    }
}

const SPIN: &str = r"
kernel void spin(global int* p, int iters) {
    int acc = p[0];
    for (int i = 0; i < iters; ++i) acc = acc * 1664525 + 1013904223;
    if (get_global_id(0) == 0) p[1] = acc;
}
";

#[test]
fn profiling() {
    for d in devices("profiling") {
        if !d.device.has(Aspect::UsmDeviceAllocations) || !d.device.has(Aspect::OnlineCompiler) {
            continue;
        }
        let ctx = d.context();
        let k = build(&ctx, &d, SPIN).kernel("spin").unwrap();
        let p = alloc(&ctx, &d, UsmKind::Device, 8);
        let iters = 100_000i32.to_ne_bytes();
        let args = [KernelArg::Pointer(p), KernelArg::Scalar(&iters)];
        assert!(d.device.has(Aspect::QueueProfiling), "{}", d.label());
        for in_order in [true, false] {
            let qp = ctx
                .create_queue(
                    &d.device,
                    QueueProperties {
                        in_order,
                        enable_profiling: true,
                    },
                )
                .unwrap();
            // SAFETY: p lives until the wait.
            let ev = unsafe { qp.launch(&k, range1(64, None), &args, &[]) }.unwrap();
            let info = ev
                .profiling()
                .unwrap_or_else(|e| panic!("{}: {e}", d.label()));
            assert!(
                info.submit_ns <= info.start_ns && info.start_ns <= info.end_ns,
                "{} {info:?}",
                d.label()
            );
            assert!(
                info.end_ns > info.start_ns,
                "{}: kernel took no time? {info:?}",
                d.label()
            );
            // SAFETY: p lives until the wait.
            let ev2 = unsafe { qp.fill(p, &[0], 8, &[]) }.unwrap();
            ev2.wait().unwrap();
            assert!(ev2.profiling().is_ok());
        }
        let q = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: true,
                    enable_profiling: false,
                },
            )
            .unwrap();
        // SAFETY: as above.
        let ev = unsafe { q.launch(&k, range1(64, None), &args, &[]) }.unwrap();
        ev.wait().unwrap();
        assert_eq!(ev.status().unwrap(), EventStatus::Complete);
        assert_eq!(ev.profiling().unwrap_err().code(), Errc::Profiling);
        // SAFETY: nothing pending.
        unsafe { ctx.usm_free(p).unwrap() };
    }
}

#[test]
fn host_task_ordering() {
    for d in devices("host_task_ordering") {
        let Some(&kind) = host_accessible(&d).first() else {
            continue;
        };
        let ctx = d.context();
        for in_order in [true, false] {
            let q = ctx
                .create_queue(
                    &d.device,
                    QueueProperties {
                        in_order,
                        enable_profiling: false,
                    },
                )
                .unwrap();
            let n = 1 << 16;
            let ptr = alloc(&ctx, &d, kind, n);
            let addr = ptr as usize;
            // SAFETY: the allocation holds n bytes.
            let fill = unsafe { q.fill(ptr, &[5], n, &[]) }.unwrap();
            let saw = Arc::new(AtomicUsize::new(0));
            let saw2 = saw.clone();
            let deps = if in_order { vec![] } else { vec![fill.clone()] };
            let task = q
                .host_task(
                    Box::new(move || {
                        // SAFETY: host-accessible USM, written by the fill that completed first.
                        let s = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, n) };
                        saw2.store(s.iter().filter(|&&b| b == 5).count(), Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                        s.fill(7);
                    }),
                    &deps,
                )
                .unwrap();
            // A copy after the task must see its writes.
            let mut out = vec![0u8; n];
            let deps = if in_order { vec![] } else { vec![task.clone()] };
            // SAFETY: `out` outlives the wait.
            let copy = unsafe { q.memcpy(out.as_mut_ptr() as u64, ptr, n, &deps) }.unwrap();
            copy.wait().unwrap();
            assert_eq!(task.status().unwrap(), EventStatus::Complete);
            assert_eq!(
                saw.load(Ordering::SeqCst),
                n,
                "{} in_order={in_order}: task ran before the fill",
                d.label()
            );
            assert!(
                out.iter().all(|&b| b == 7),
                "{} in_order={in_order}: copy ran before the task",
                d.label()
            );
            // queue.wait covers host tasks.
            let done = Arc::new(AtomicBool::new(false));
            let done2 = done.clone();
            q.host_task(
                Box::new(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    done2.store(true, Ordering::SeqCst);
                }),
                &[],
            )
            .unwrap();
            q.wait().unwrap();
            assert!(
                done.load(Ordering::SeqCst),
                "{}: queue.wait returned before a host task",
                d.label()
            );
            // A panicking task makes its event fail instead of hanging.
            let bad = q
                .host_task(Box::new(|| panic!("expected test panic")), &[])
                .unwrap();
            let e = bad.wait().unwrap_err();
            assert_eq!(e.code(), Errc::Event, "{e}");
            assert!(bad.wait_timeout(Duration::from_secs(5)).is_err());
            // SAFETY: nothing pending uses it (copy waited, tasks done).
            unsafe { ctx.usm_free(ptr).unwrap() };
        }
    }
}

#[test]
fn standalone_events() {
    for d in devices("standalone_events") {
        let ctx = d.context();
        let e = ctx.create_event(EventProperties::default()).unwrap();
        assert_eq!(e.status().unwrap(), EventStatus::Complete);
        e.wait().unwrap();
        assert!(e.wait_timeout(Duration::ZERO).unwrap());
        assert_eq!(e.profiling().unwrap_err().code(), Errc::Profiling);
        // An IPC event: a shared page, complete until signalled, without timestamps.
        let ipc = ctx
            .create_event(EventProperties {
                enable_ipc: true,
                enable_profiling: false,
            })
            .unwrap();
        assert!(ipc.ipc_enabled());
        assert_eq!(ipc.status().unwrap(), EventStatus::Complete);
        assert_eq!(ipc.signal_count().unwrap(), 0);
        assert_eq!(ipc.profiling().unwrap_err().code(), Errc::Profiling);
        assert!(ctx.ipc_get_event(&ipc).is_ok());
        assert_eq!(ctx.ipc_get_event(&e).unwrap_err().code(), Errc::Invalid);
        let both = ctx
            .create_event(EventProperties {
                enable_ipc: true,
                enable_profiling: true,
            })
            .err()
            .unwrap();
        assert_eq!(both.code(), Errc::Invalid);

        let q1 = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: true,
                    enable_profiling: true,
                },
            )
            .unwrap();
        let q2 = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: false,
                    enable_profiling: false,
                },
            )
            .unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let o1 = order.clone();
        q1.host_task(
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(150));
                o1.lock().unwrap().push("first");
            }),
            &[],
        )
        .unwrap();
        // The event now stands for "everything on q1 so far".
        q1.enqueue_signal_event(&e).unwrap();
        assert!(
            !e.wait_timeout(Duration::from_millis(10)).unwrap(),
            "{}: signalled too early",
            d.label()
        );
        assert_ne!(e.status().unwrap(), EventStatus::Complete);
        // q2 waits for it.
        q2.enqueue_wait_events(std::slice::from_ref(&e)).unwrap();
        let o2 = order.clone();
        let second = q2
            .host_task(Box::new(move || o2.lock().unwrap().push("second")), &[])
            .unwrap();
        second.wait().unwrap();
        e.wait().unwrap();
        assert_eq!(e.status().unwrap(), EventStatus::Complete);
        assert_eq!(*order.lock().unwrap(), ["first", "second"], "{}", d.label());
        // A marker on a profiling queue has timestamps.
        let p = e.profiling().unwrap();
        assert!(p.start_ns <= p.end_ns);

        // Re-signal on a queue with nothing pending: completes at once.
        q2.wait().unwrap();
        q2.enqueue_signal_event(&e).unwrap();
        assert!(e.wait_timeout(Duration::from_secs(10)).unwrap());
        assert_eq!(e.profiling().unwrap_err().code(), Errc::Profiling);

        // Commands with a standalone event as a dependency.
        let gate = ctx.create_event(EventProperties::default()).unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        let f1 = flag.clone();
        q1.host_task(
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(100));
                f1.store(true, Ordering::SeqCst);
            }),
            &[],
        )
        .unwrap();
        q1.enqueue_signal_event(&gate).unwrap();
        let f2 = flag.clone();
        let checked = Arc::new(AtomicBool::new(false));
        let c2 = checked.clone();
        q2.host_task(
            Box::new(move || c2.store(f2.load(Ordering::SeqCst), Ordering::SeqCst)),
            std::slice::from_ref(&gate),
        )
        .unwrap()
        .wait()
        .unwrap();
        assert!(
            checked.load(Ordering::SeqCst),
            "{}: dependency on a standalone event ignored",
            d.label()
        );

        // An ordinary event cannot be signalled; events of another context are refused.
        let b = q1.barrier(&[]).unwrap();
        assert_eq!(
            q1.enqueue_signal_event(&b).unwrap_err().code(),
            Errc::Invalid
        );
        let other = d
            .context()
            .create_event(EventProperties::default())
            .unwrap();
        assert_eq!(
            q1.enqueue_signal_event(&other).unwrap_err().code(),
            Errc::Invalid
        );
        // ... but may be waited for (from the host).
        q1.enqueue_wait_events(&[other]).unwrap();
        q1.wait().unwrap();
        q2.wait().unwrap();
    }
}

#[test]
fn cross_queue_dependencies() {
    for d in devices("cross_queue_dependencies") {
        let Some(&kind) = host_accessible(&d).first() else {
            continue;
        };
        if !d.device.has(Aspect::OnlineCompiler) {
            continue;
        }
        let ctx = d.context();
        let k = build(&ctx, &d, SPIN).kernel("spin").unwrap();
        let q1 = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: false,
                    enable_profiling: false,
                },
            )
            .unwrap();
        let q2 = ctx
            .create_queue(
                &d.device,
                QueueProperties {
                    in_order: true,
                    enable_profiling: false,
                },
            )
            .unwrap();
        let p = alloc(&ctx, &d, kind, 8);
        // SAFETY: p holds 8 bytes.
        let fill = unsafe { q1.fill(p, &[0, 0, 0, 0, 0, 0, 0, 0], 8, &[]) }.unwrap();
        let iters = 1000i32.to_ne_bytes();
        // SAFETY: p lives until the waits below.
        let run = unsafe {
            q2.launch(
                &k,
                range1(1, None),
                &[KernelArg::Pointer(p), KernelArg::Scalar(&iters)],
                &[fill],
            )
        }
        .unwrap();
        // Polling with a time-out must make progress without anyone calling wait first.
        assert!(
            run.wait_timeout(Duration::from_secs(30)).unwrap(),
            "{}",
            d.label()
        );
        let mut want: i32 = 0;
        for _ in 0..1000 {
            want = want.wrapping_mul(1664525).wrapping_add(1013904223);
        }
        let got = read_back(&q2, p, 8);
        assert_eq!(
            i32::from_ne_bytes([got[4], got[5], got[6], got[7]]),
            want,
            "{}",
            d.label()
        );
        // Many submissions, one wait.
        for _ in 0..200 {
            // SAFETY: as above.
            unsafe {
                q2.launch(
                    &k,
                    range1(1, None),
                    &[KernelArg::Pointer(p), KernelArg::Scalar(&iters)],
                    &[],
                )
            }
            .unwrap();
        }
        q2.wait().unwrap();
        // SAFETY: nothing pending.
        unsafe { ctx.usm_free(p).unwrap() };
    }
}

#[test]
fn system_allocations() {
    for d in devices("system_allocations") {
        if !d.device.has(Aspect::UsmSystemAllocations) || !d.device.has(Aspect::OnlineCompiler) {
            eprintln!("{}: no usm_system_allocations, skipped", d.label());
            continue;
        }
        let ctx = d.context();
        let q = ctx
            .create_queue(&d.device, QueueProperties::default())
            .unwrap();
        let k = build(&ctx, &d, VADD).kernel("vadd").unwrap();
        let n = 257usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b = vec![1.0f32; n];
        let mut c = vec![0.0f32; n];
        let nn = (n as u32).to_ne_bytes();
        let args = [
            KernelArg::Pointer(a.as_ptr() as u64),
            KernelArg::Pointer(b.as_ptr() as u64),
            KernelArg::Pointer(c.as_mut_ptr() as u64),
            KernelArg::Scalar(&nn),
        ];
        // SAFETY: the vectors outlive the wait.
        unsafe { q.launch(&k, range1(n, None), &args, &[]) }
            .unwrap()
            .wait()
            .unwrap();
        for i in 0..n {
            assert_eq!(c[i], a[i] + 1.0, "{} at {i}", d.label());
        }
    }
}
