//! Tests of the CUDA backend on a real GPU. Without `libcuda` (or without a GPU) every test
//! prints why it skips and passes, unless `SYCL_RS_REQUIRE_BACKENDS` names `cuda`, in which
//! case a backend that cannot load fails the test.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sycl_backend::ipc::{acquire_remote_fd, ExporterId, IpcImport};
use sycl_backend::{
    AccessMode, Aspect, BackendKind, Context, Device, Errc, EventProperties, EventStatus,
    GranularityMode, KernelArg, KernelSource, LaunchRange, PhysicalMemProperties, Queue,
    QueueProperties, UsmKind,
};

struct Fx {
    devices: Vec<Arc<dyn Device>>,
    device: Arc<dyn Device>,
    ctx: Arc<dyn Context>,
}

fn required() -> bool {
    std::env::var("SYCL_RS_REQUIRE_BACKENDS")
        .map(|v| v.contains("cuda"))
        .unwrap_or(false)
}

/// Prints the backend's log records, so that fallbacks show up in the test output.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Debug
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("[{} {}] {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

static LOGGER: StderrLog = StderrLog;

fn setup(test: &str) -> Option<Fx> {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
    match sycl_backend_cuda::load() {
        Ok(backend) => {
            assert_eq!(backend.kind(), BackendKind::Cuda);
            let platforms = backend.platforms();
            assert_eq!(platforms.len(), 1);
            let devices = platforms[0].devices();
            assert!(!devices.is_empty());
            let device = devices[0].clone();
            let ctx = platforms[0].create_context(&devices).expect("context");
            Some(Fx {
                devices,
                device,
                ctx,
            })
        }
        Err(e) => {
            if required() {
                panic!("SYCL_RS_REQUIRE_BACKENDS requires cuda, but it failed to load: {e}");
            }
            eprintln!("skipping {test}: the CUDA backend is unavailable here ({e})");
            None
        }
    }
}

fn queue(fx: &Fx, profiling: bool) -> Arc<dyn Queue> {
    queue_on(fx, &fx.device, profiling).expect("queue")
}

/// An in-order queue on `device` of the fixture's context.
fn queue_on(
    fx: &Fx,
    device: &Arc<dyn Device>,
    profiling: bool,
) -> sycl_backend::Result<Arc<dyn Queue>> {
    fx.ctx.create_queue(
        device,
        QueueProperties {
            in_order: true,
            enable_profiling: profiling,
        },
    )
}

/// A 1-D launch of `n` work-items, work-group size left to the backend.
fn range1(n: usize) -> LaunchRange {
    LaunchRange {
        dims: 1,
        global: [n, 1, 1],
        local: None,
    }
}

fn read(q: &Arc<dyn Queue>, ptr: u64, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    // SAFETY: `ptr` is a live allocation of at least `n` bytes; `out` outlives the wait.
    let ev = unsafe { q.memcpy(out.as_mut_ptr() as u64, ptr, n, &[]) }.expect("memcpy to host");
    ev.wait().expect("wait");
    out
}

fn write(q: &Arc<dyn Queue>, ptr: u64, data: &[u8]) {
    // SAFETY: `ptr` is a live allocation of at least `data.len()` bytes.
    let ev =
        unsafe { q.memcpy(ptr, data.as_ptr() as u64, data.len(), &[]) }.expect("memcpy from host");
    ev.wait().expect("wait");
}

fn expected_fill(pattern: &[u8], n: usize) -> Vec<u8> {
    (0..n).map(|i| pattern[i % pattern.len()]).collect()
}

#[test]
fn enumeration_and_aspects() {
    let Some(fx) = setup("enumeration_and_aspects") else {
        return;
    };
    for d in &fx.devices {
        let info = d.info();
        eprintln!(
            "device {}: {} cc {} driver {} mem {} MiB, {} SMs, wg {} {:?}, uuid {:02x?}",
            d.index(),
            info.name,
            info.version,
            info.driver_version,
            info.global_mem_size >> 20,
            info.max_compute_units,
            info.max_work_group_size,
            info.max_work_item_sizes,
            info.uuid
        );
        eprintln!("  aspects: {:?}", info.aspects);
        assert_eq!(d.backend(), BackendKind::Cuda);
        assert!(!info.name.is_empty());
        assert_eq!(info.vendor_id, 0x10de);
        assert!(info.global_mem_size > 0);
        assert!(info.max_work_group_size >= 256);
        assert!(info.uuid.is_some());
        assert!(d.has(Aspect::Gpu));
        assert!(d.has(Aspect::UsmDeviceAllocations));
        assert!(d.has(Aspect::ExtOneapiReusableEvents));
        assert!(!d.has(Aspect::Cpu));
        assert!(d.can_access_peer(d), "a device reaches its own memory");
        for other in &fx.devices {
            eprintln!(
                "  can {} access {}: {}",
                other.index(),
                d.index(),
                d.can_access_peer(other)
            );
        }
    }
    assert_eq!(fx.ctx.devices().len(), fx.devices.len());
}

#[test]
fn usm_alloc_memcpy_fill_many_sizes() {
    let Some(fx) = setup("usm_alloc_memcpy_fill_many_sizes") else {
        return;
    };
    let q = queue(&fx, false);
    let sizes = [
        1usize,
        2,
        3,
        7,
        64,
        255,
        256,
        1000,
        4097,
        65536 + 5,
        (1 << 20) + 3,
    ];
    let patterns: [&[u8]; 9] = [
        &[0xAB],
        &[1, 2],
        &[1, 2, 3],
        &[9, 8, 7, 6],
        &[5, 5, 5, 5, 5],
        &[1, 2, 3, 4, 5, 6, 7, 8],
        &[
            0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0,
        ],
        &[0xFF; 17],
        &[0u8; 0],
    ];
    let long: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
    let mut patterns: Vec<&[u8]> = patterns.into_iter().filter(|p| !p.is_empty()).collect();
    patterns.push(&long);

    for kind in [UsmKind::Device, UsmKind::Shared, UsmKind::Host] {
        if kind == UsmKind::Shared && !fx.device.has(Aspect::UsmSharedAllocations) {
            continue;
        }
        if kind == UsmKind::Host && !fx.device.has(Aspect::UsmHostAllocations) {
            continue;
        }
        let dev = if kind == UsmKind::Host {
            None
        } else {
            Some(&fx.device)
        };
        let cap = (1 << 20) * 2 + 4096;
        let buf = fx.ctx.usm_alloc(kind, dev, cap, 0).expect("alloc");
        let info = fx.ctx.usm_pointer_info(buf + 10);
        assert_eq!(info.kind, kind);
        assert_eq!(info.base, buf);
        assert_eq!(info.size, cap);
        assert_eq!(
            info.device_index,
            if kind == UsmKind::Host { None } else { Some(0) }
        );

        for &size in &sizes {
            // memcpy round trip at an odd offset.
            let data: Vec<u8> = (0..size).map(|i| (i * 31 + size) as u8).collect();
            write(&q, buf + 1, &data);
            assert_eq!(
                read(&q, buf + 1, size),
                data,
                "{kind} memcpy of {size} bytes"
            );
            for p in &patterns {
                let n = size - size % p.len();
                if n == 0 {
                    continue;
                }
                for offset in [0u64, 1, 4] {
                    // SAFETY: `[buf+offset, +n)` lies inside the allocation.
                    let ev = unsafe { q.fill(buf + offset, p, n, &[]) }.expect("fill");
                    ev.wait().expect("wait fill");
                    let got = read(&q, buf + offset, n);
                    assert!(
                        got == expected_fill(p, n),
                        "{kind} fill of {n} bytes with a {}-byte pattern at offset {offset}",
                        p.len()
                    );
                }
            }
        }
        if kind != UsmKind::Device {
            // Host-accessible memory: the host sees what the device wrote.
            // SAFETY: the allocation is host-accessible and idle.
            let ev = unsafe { q.fill(buf, &[0x42, 0x43], 4096, &[]) }.unwrap();
            ev.wait().unwrap();
            // SAFETY: host and shared USM are readable from the host; no command is pending.
            let host = unsafe { std::slice::from_raw_parts(buf as *const u8, 4096) };
            assert_eq!(host, &expected_fill(&[0x42, 0x43], 4096)[..]);
        }
        // Zero-sized operations: no-ops with a completed event.
        // SAFETY: zero bytes.
        let e0 = unsafe { q.memcpy(buf, buf + 8, 0, &[]) }.unwrap();
        e0.wait().unwrap();
        assert_eq!(e0.status().unwrap(), EventStatus::Complete);
        // SAFETY: zero bytes.
        let e1 = unsafe { q.fill(buf, &[1, 2, 3], 0, &[]) }.unwrap();
        e1.wait().unwrap();
        // SAFETY: a live allocation.
        let e2 = unsafe { q.prefetch(buf, cap, &[]) }.unwrap();
        e2.wait().unwrap();
        // SAFETY: nothing is pending on `buf`.
        unsafe { fx.ctx.usm_free(buf) }.expect("free");
        assert_eq!(fx.ctx.usm_pointer_info(buf).kind, UsmKind::Unknown);
    }
    // Over-aligned allocation.
    let p = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), 100, 1 << 16)
        .unwrap();
    assert_eq!(p % (1 << 16), 0);
    write(&q, p, &[7u8; 100]);
    assert_eq!(read(&q, p, 100), vec![7u8; 100]);
    // SAFETY: idle.
    unsafe { fx.ctx.usm_free(p) }.unwrap();
    // Errors.
    // SAFETY: not an allocation; the backend must refuse it.
    let bad_free = unsafe { fx.ctx.usm_free(0x1234) };
    assert_eq!(bad_free.err().unwrap().code(), Errc::Invalid);
    assert!(fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), 0, 0)
        .is_err());
    let huge = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), 1 << 50, 0)
        .err()
        .unwrap();
    assert_eq!(huge.code(), Errc::MemoryAllocation, "{huge}");
    assert!(huge.native().is_some());
    // SAFETY: a size that is not a multiple of the pattern is refused before anything runs.
    let bad_fill = unsafe { q.fill(0, &[1, 2, 3], 10, &[]) };
    assert_eq!(bad_fill.err().unwrap().code(), Errc::Invalid);
    q.wait().unwrap();
}

#[test]
fn dependencies_and_host_tasks_keep_order() {
    let Some(fx) = setup("dependencies_and_host_tasks_keep_order") else {
        return;
    };
    let q1 = queue(&fx, false);
    let q2 = queue(&fx, false);
    let n = 1 << 22;
    let a = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), n, 0)
        .unwrap();
    let b = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), n, 0)
        .unwrap();
    let h = fx.ctx.usm_alloc(UsmKind::Host, None, n, 0).unwrap();
    // q1 fills a; q2 copies a -> b after it.
    // SAFETY: live allocations, idle.
    let e1 = unsafe { q1.fill(a, &[3, 1, 4, 1, 5, 9, 2, 6], n, &[]) }.unwrap();
    // SAFETY: as above; ordered after e1.
    let e2 = unsafe { q2.memcpy(b, a, n, std::slice::from_ref(&e1)) }.unwrap();
    e2.wait().unwrap();
    assert_eq!(read(&q2, b, n), expected_fill(&[3, 1, 4, 1, 5, 9, 2, 6], n));

    // A host task writes host USM; the next command on the queue must see it.
    let ran = Arc::new(AtomicBool::new(false));
    let ran2 = ran.clone();
    let hp = h as usize;
    let t = q1
        .host_task(
            Box::new(move || {
                std::thread::sleep(Duration::from_millis(100));
                // SAFETY: host USM of `n` bytes, not otherwise used until the task completes.
                unsafe { std::ptr::write_bytes(hp as *mut u8, 0x77, n) };
                ran2.store(true, Ordering::SeqCst);
            }),
            std::slice::from_ref(&e2),
        )
        .unwrap();
    // The task runs on another thread: submission returned before it finished.
    assert!(!ran.load(Ordering::SeqCst), "host_task ran synchronously");
    assert!(!t.wait_timeout(Duration::from_millis(1)).unwrap());
    assert_ne!(t.status().unwrap(), EventStatus::Complete);
    // SAFETY: ordered after the host task by the in-order queue.
    let e3 = unsafe { q1.memcpy(a, h, n, &[]) }.unwrap();
    e3.wait().unwrap();
    assert!(ran.load(Ordering::SeqCst));
    assert_eq!(t.status().unwrap(), EventStatus::Complete);
    assert!(
        read(&q1, a, n).iter().all(|&x| x == 0x77),
        "the copy ran before the host task"
    );

    // A host task that depends on another queue's command, and a command of another queue
    // that depends on the host task.
    // SAFETY: live, idle.
    let e4 = unsafe { q2.fill(b, &[0x11], n, &[]) }.unwrap();
    let t2 = q1
        .host_task(
            Box::new(move || {
                // SAFETY: host USM, idle.
                unsafe { std::ptr::write_bytes(hp as *mut u8, 0x22, 16) };
            }),
            &[e4],
        )
        .unwrap();
    // SAFETY: ordered after t2.
    let e5 = unsafe { q2.memcpy(b, h, 16, &[t2]) }.unwrap();
    e5.wait().unwrap();
    assert_eq!(read(&q2, b, 17), [vec![0x22u8; 16], vec![0x11]].concat());

    // Barrier and queue wait.
    let bar = q1.barrier(&[e5]).unwrap();
    bar.wait().unwrap();
    assert!(bar.wait_timeout(Duration::from_millis(1)).unwrap());
    q1.wait().unwrap();
    q2.wait().unwrap();
    // Dropping a queue with a host-task thread joins it cleanly.
    drop(q1);
    for p in [a, b, h] {
        // SAFETY: everything completed.
        unsafe { fx.ctx.usm_free(p) }.unwrap();
    }
}

const VADD: &str = r#"
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void scale2d(float* m, int w, int h, float f) {
    extern __shared__ float tile[];
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    if (x < w && y < h) tile[t] = m[y * w + x] * f;
    __syncthreads();
    if (x < w && y < h) m[y * w + x] = tile[t];
}
"#;

/// Command events answer from what their queue knows is complete (an idle stream, a
/// completed marker, a queue wait) and are then skipped as dependencies: every answer must
/// still be right, or the copies below would read data not yet written.
#[test]
fn command_events_answer_from_what_the_queue_knows() {
    let Some(fx) = setup("command_events_answer_from_what_the_queue_knows") else {
        return;
    };
    let (q1, q2) = (queue(&fx, false), queue(&fx, false));
    let n = 16 << 20;
    let big_n = 256 << 20;
    let alloc = |size| {
        fx.ctx
            .usm_alloc(UsmKind::Device, Some(&fx.device), size, 0)
            .unwrap()
    };
    let (a, b, big) = (alloc(n), alloc(n), alloc(big_n));
    // q2 copies a -> b after `dep` (skipped by q2 when known complete) and checks b.
    let copied_after = |dep: &Arc<dyn sycl_backend::Event>, value: u8, what: &str| {
        // SAFETY: live allocations of n bytes; q2 waits before the next use.
        let e = unsafe { q2.memcpy(b, a, n, std::slice::from_ref(dep)) }.unwrap();
        e.wait().unwrap();
        let got = read(&q2, b, n);
        let bad = got.iter().position(|&x| x != value);
        assert_eq!(
            bad,
            None,
            "{what}: b[{:?}] is not {value}",
            bad.map(|i| got[i])
        );
    };

    // An idle stream answers for a command no marker covers.
    // SAFETY: live allocations, used only by these queues in the order below.
    let e1 = unsafe { q1.fill(a, &[1], n, &[]) }.unwrap();
    while e1.status().unwrap() != EventStatus::Complete {
        std::hint::spin_loop();
    }
    copied_after(&e1, 1, "after polling status");

    // Queried while the stream is busy (a marker is recorded then), it still answers right.
    // SAFETY: as above.
    let e2 = unsafe { q1.fill(a, &[2], n, &[]) }.unwrap();
    let mut busy = Vec::new();
    for i in 0..64u8 {
        // SAFETY: as above.
        busy.push(unsafe { q1.fill(big, &[i], big_n, &[]) }.unwrap());
    }
    while e2.status().unwrap() != EventStatus::Complete {
        std::hint::spin_loop();
    }
    copied_after(&e2, 2, "after polling status behind a busy stream");
    // Every earlier command is complete once a later one is.
    busy.last().unwrap().wait().unwrap();
    for (i, e) in busy.iter().enumerate() {
        assert_eq!(e.status().unwrap(), EventStatus::Complete, "busy fill {i}");
        assert!(e.wait_timeout(Duration::ZERO).unwrap(), "busy fill {i}");
    }
    let last = read(&q1, big, 4096);
    assert!(last.iter().all(|&x| x == 63), "the last fill of `big` won");

    // A queue wait covers everything submitted before it.
    // SAFETY: as above.
    let e3 = unsafe { q1.fill(a, &[3], n, &[]) }.unwrap();
    q1.wait().unwrap();
    assert_eq!(e3.status().unwrap(), EventStatus::Complete);
    copied_after(&e3, 3, "after a queue wait");

    // Commands submitted after what is known complete are not taken for complete.
    for i in 0..16u8 {
        // SAFETY: as above.
        let e = unsafe { q1.fill(big, &[i], big_n, &[]) }.unwrap();
        // SAFETY: as above; ordered after the fill of `big` by the in-order queue.
        let e4 = unsafe { q1.fill(a, &[4 + i], n, std::slice::from_ref(&e)) }.unwrap();
        copied_after(&e4, 4 + i, "a new command after known-complete ones");
    }

    for p in [a, b, big] {
        // SAFETY: every command using them completed above.
        unsafe { fx.ctx.usm_free(p) }.unwrap();
    }
}

#[test]
fn nvrtc_kernels_launch_and_compute() {
    let Some(fx) = setup("nvrtc_kernels_launch_and_compute") else {
        return;
    };
    if !fx.device.has(Aspect::OnlineCompiler) {
        eprintln!("skipping nvrtc_kernels_launch_and_compute: NVRTC is not installed");
        let e = fx
            .ctx
            .build_kernel_bundle(&fx.devices[..1], &KernelSource::CudaC(VADD), "")
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::FeatureNotSupported);
        return;
    }
    let q = queue(&fx, false);
    let bundle = fx
        .ctx
        .build_kernel_bundle(&fx.devices[..1], &KernelSource::CudaC(VADD), "-lineinfo")
        .expect("build");
    let names = bundle.kernel_names();
    eprintln!("kernels: {names:?}");
    assert!(names.is_empty() || names.contains(&"vadd".to_string()));
    let k = bundle.kernel("vadd").unwrap();
    assert_eq!(k.name(), "vadd");
    if let Some(n) = k.num_args() {
        assert_eq!(n, 4);
    }
    assert_eq!(bundle.kernel("nope").err().unwrap().code(), Errc::Invalid);

    let n = 1000usize;
    let bytes = n * 4;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (2 * i) as f32 + 0.5).collect();
    let da = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), bytes, 0)
        .unwrap();
    let db = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), bytes, 0)
        .unwrap();
    let dc = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), bytes + 64, 0)
        .unwrap();
    let as_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    write(&q, da, &as_bytes(&a));
    write(&q, db, &as_bytes(&b));
    // SAFETY: canary beyond `n` to check the bounds check.
    unsafe { q.fill(dc, &[0xCD], bytes + 64, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let ni = (n as i32).to_le_bytes();
    for local in [None, Some([100, 1, 1]), Some([8, 1, 1])] {
        let range = LaunchRange {
            dims: 1,
            global: [n, 1, 1],
            local,
        };
        // SAFETY: the pointers are live device allocations of `n` floats.
        let ev = unsafe {
            q.launch(
                &k,
                range,
                &[
                    KernelArg::Pointer(da),
                    KernelArg::Pointer(db),
                    KernelArg::Pointer(dc),
                    KernelArg::Scalar(&ni),
                ],
                &[],
            )
        }
        .expect("launch");
        ev.wait().unwrap();
        let out = read(&q, dc, bytes + 64);
        for i in 0..n {
            let v = f32::from_le_bytes(out[i * 4..i * 4 + 4].try_into().unwrap());
            assert_eq!(v, a[i] + b[i], "element {i} with local {local:?}");
        }
        assert!(
            out[bytes..].iter().all(|&x| x == 0xCD),
            "kernel wrote past n"
        );
    }
    // Bad ranges and arguments.
    let bad = LaunchRange {
        dims: 1,
        global: [n, 1, 1],
        local: Some([3, 1, 1]),
    };
    // SAFETY: refused before launching.
    let e = unsafe { q.launch(&k, bad, &[KernelArg::Pointer(da)], &[]) }
        .err()
        .unwrap();
    assert_eq!(e.code(), Errc::NdRange);
    if k.num_args().is_some() {
        let r = range1(n);
        // SAFETY: refused before launching.
        let e = unsafe { q.launch(&k, r, &[KernelArg::Pointer(da)], &[]) }
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::KernelArgument);
        // SAFETY: refused before launching (a 2-byte scalar for an int).
        let e = unsafe {
            q.launch(
                &k,
                r,
                &[
                    KernelArg::Pointer(da),
                    KernelArg::Pointer(db),
                    KernelArg::Pointer(dc),
                    KernelArg::Scalar(&[1, 2]),
                ],
                &[],
            )
        }
        .err()
        .unwrap();
        assert_eq!(e.code(), Errc::KernelArgument);
    }

    // A packed launch runs again with patched 8-byte arguments (here the output pointer).
    let r = range1(n);
    let args = [
        KernelArg::Pointer(da),
        KernelArg::Pointer(db),
        KernelArg::Pointer(dc),
        KernelArg::Scalar(&ni),
    ];
    let packed = q
        .pack_launch(&k, r, &args)
        .unwrap()
        .expect("CUDA packs launches");
    let dc2 = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), bytes, 0)
        .unwrap();
    for (out, patches) in [(dc2, vec![(2, dc2)]), (dc, vec![]), (dc, vec![(0, db)])] {
        // SAFETY: canary: the launch below must overwrite every element.
        unsafe { q.fill(out, &[0xCD], bytes, &[]) }.unwrap();
        // SAFETY: every pointer, patched or not, is a live allocation of `n` floats.
        unsafe { q.launch_packed(&*packed, &patches, &[]) }
            .expect("packed launch")
            .wait()
            .unwrap();
        let got = read(&q, out, bytes);
        let first = if patches.iter().any(|p| p.0 == 0) {
            &b
        } else {
            &a
        };
        for i in 0..n {
            let v = f32::from_le_bytes(got[i * 4..i * 4 + 4].try_into().unwrap());
            assert_eq!(v, first[i] + b[i], "element {i} with patches {patches:?}");
        }
    }
    // Only 8-byte arguments can be patched, and only arguments the launch has.
    for arg in [3, 4] {
        // SAFETY: refused before launching.
        let e = unsafe { q.launch_packed(&*packed, &[(arg, 0)], &[]) }
            .err()
            .unwrap();
        assert_eq!(e.code(), Errc::KernelArgument, "argument {arg}");
    }
    // SAFETY: every launch using it completed above.
    unsafe { fx.ctx.usm_free(dc2) }.unwrap();

    // 2-D launch with dynamic shared memory.
    let (w, h) = (37usize, 19usize);
    let m: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
    let dm = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), w * h * 4, 0)
        .unwrap();
    write(&q, dm, &as_bytes(&m));
    let k2 = bundle.kernel("scale2d").unwrap();
    let range = LaunchRange {
        dims: 2,
        global: [w, h, 1],
        local: None,
    };
    let (wi, hi, f) = (
        (w as i32).to_le_bytes(),
        (h as i32).to_le_bytes(),
        3.0f32.to_le_bytes(),
    );
    // SAFETY: `dm` holds w*h floats; 16x16 floats of shared memory.
    unsafe {
        q.launch(
            &k2,
            range,
            &[
                KernelArg::Pointer(dm),
                KernelArg::Scalar(&wi),
                KernelArg::Scalar(&hi),
                KernelArg::Scalar(&f),
                KernelArg::Local(16 * 16 * 4),
            ],
            &[],
        )
    }
    .expect("2-D launch")
    .wait()
    .unwrap();
    let out = read(&q, dm, w * h * 4);
    for i in 0..w * h {
        assert_eq!(
            f32::from_le_bytes(out[i * 4..i * 4 + 4].try_into().unwrap()),
            m[i] * 3.0
        );
    }

    // The same source as a cubin, compiled ahead and loaded without NVRTC.
    let cubin = sycl_backend_cuda::compile_cubin(VADD, &fx.device, "").unwrap();
    assert!(cubin.starts_with(b"\x7fELF"), "a cubin is an ELF image");
    let from_cubin = fx
        .ctx
        .build_kernel_bundle(&fx.devices[..1], &KernelSource::Cubin(&cubin), "")
        .expect("cubin bundle");
    let kc = from_cubin.kernel("vadd").unwrap();
    // SAFETY: as for the launches above.
    unsafe { q.fill(dc, &[0], bytes, &[]) }.unwrap();
    let range = range1(n);
    // SAFETY: the pointers are live device allocations of `n` floats.
    unsafe {
        q.launch(
            &kc,
            range,
            &[
                KernelArg::Pointer(da),
                KernelArg::Pointer(db),
                KernelArg::Pointer(dc),
                KernelArg::Scalar(&ni),
            ],
            &[],
        )
    }
    .unwrap()
    .wait()
    .unwrap();
    let out = read(&q, dc, bytes);
    assert_eq!(
        f32::from_le_bytes(out[4 * 999..4 * 1000].try_into().unwrap()),
        a[999] + b[999]
    );
    let e = fx
        .ctx
        .build_kernel_bundle(
            &fx.devices[..1],
            &KernelSource::Cubin(b"\x7fELF not really"),
            "",
        )
        .err()
        .unwrap();
    assert_eq!(e.code(), Errc::Build, "{e}");

    // Build errors carry the compiler log.
    let e = fx
        .ctx
        .build_kernel_bundle(
            &fx.devices[..1],
            &KernelSource::CudaC("extern \"C\" __global__ void k() { undefined_thing(); }"),
            "",
        )
        .err()
        .unwrap();
    assert_eq!(e.code(), Errc::Build);
    assert!(e.message().contains("undefined_thing"), "{e}");
    let e = fx
        .ctx
        .build_kernel_bundle(
            &fx.devices[..1],
            &KernelSource::Ptx(".version 7.0\n.target sm_50\nnonsense"),
            "",
        )
        .err()
        .unwrap();
    assert_eq!(e.code(), Errc::Build, "{e}");
    eprintln!("PTX error: {e}");
    let e = fx
        .ctx
        .build_kernel_bundle(
            &fx.devices[..1],
            &KernelSource::OpenClC("kernel void k(){}"),
            "",
        )
        .err()
        .unwrap();
    assert_eq!(e.code(), Errc::FeatureNotSupported);
    for p in [da, db, dc, dm] {
        // SAFETY: idle.
        unsafe { fx.ctx.usm_free(p) }.unwrap();
    }
}

const PTX_INC: &str = r#"
.version 7.0
.target sm_50
.address_size 64
.visible .entry inc(.param .u64 p, .param .u32 n)
{
    .reg .pred %p1;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd2, %r5, 4;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r2, [%rd3];
    add.u32 %r2, %r2, 1;
    st.global.u32 [%rd3], %r2;
DONE:
    ret;
}
"#;

/// Runs the `inc` kernel on `fx.devices[1]` over `n` u32 at `ptr`; returns the queue used.
fn increment_on_second_device(fx: &Fx, ptr: u64, n: usize) -> sycl_backend::Result<Arc<dyn Queue>> {
    let q1 = queue_on(fx, &fx.devices[1], false)?;
    let bundle = fx
        .ctx
        .build_kernel_bundle(&fx.devices[1..2], &KernelSource::Ptx(PTX_INC), "")?;
    let k = bundle.kernel("inc")?;
    let nn = (n as u32).to_le_bytes();
    // SAFETY: the callers pass `n` u32 of live memory.
    unsafe {
        q1.launch(
            &k,
            range1(n),
            &[KernelArg::Pointer(ptr), KernelArg::Scalar(&nn)],
            &[],
        )
    }?
    .wait()?;
    Ok(q1)
}

/// Spins one thread until `ns` nanoseconds of the GPU's global timer have passed.
const PTX_SPIN: &str = r#"
.version 7.0
.target sm_50
.address_size 64
.visible .entry spin(.param .u64 ns)
{
    .reg .pred %p1;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
    add.u64 %rd2, %rd2, %rd1;
LOOP:
    mov.u64 %rd3, %globaltimer;
    setp.lt.u64 %p1, %rd3, %rd2;
    @%p1 bra LOOP;
    ret;
}
"#;

#[test]
fn ptx_kernel_and_profiling() {
    let Some(fx) = setup("ptx_kernel_and_profiling") else {
        return;
    };
    let q = queue(&fx, true);
    assert!(q.properties().enable_profiling);
    let bundle = fx
        .ctx
        .build_kernel_bundle(&fx.devices[..1], &KernelSource::Ptx(PTX_INC), "")
        .expect("PTX build");
    assert_eq!(bundle.kernel_names(), vec!["inc".to_string()]);
    let k = bundle.kernel("inc").unwrap();
    let n = 777usize;
    let d = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), n * 4, 0)
        .unwrap();
    // SAFETY: live, idle.
    unsafe { q.fill(d, &5u32.to_le_bytes(), n * 4, &[]) }.unwrap();
    let nn = (n as u32).to_le_bytes();
    let mut last = None;
    for _ in 0..3 {
        // SAFETY: `d` holds n u32.
        last = Some(
            unsafe {
                q.launch(
                    &k,
                    range1(n),
                    &[KernelArg::Pointer(d), KernelArg::Scalar(&nn)],
                    &[],
                )
            }
            .unwrap(),
        );
    }
    last.unwrap().wait().unwrap();
    let out = read(&q, d, n * 4);
    assert!(out
        .chunks(4)
        .all(|c| u32::from_le_bytes(c.try_into().unwrap()) == 8));

    // Profiling of a large copy.
    let big = 64 << 20;
    let a = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), big, 0)
        .unwrap();
    let b = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), big, 0)
        .unwrap();
    // SAFETY: live, idle.
    let e = unsafe { q.memcpy(b, a, big, &[]) }.unwrap();
    let p = e.profiling().expect("profiling");
    eprintln!(
        "64 MiB device copy: submit {} start {} end {} (took {} us)",
        p.submit_ns,
        p.start_ns,
        p.end_ns,
        (p.end_ns - p.start_ns) / 1000
    );
    assert!(p.submit_ns <= p.start_ns && p.start_ns <= p.end_ns);
    assert!(p.end_ns > p.start_ns, "a 64 MiB copy takes measurable time");
    assert!(p.end_ns - p.start_ns < 1_000_000_000);
    // SAFETY: live, idle.
    let e2 = unsafe { q.memcpy(a, b, big, &[]) }.unwrap();
    let p2 = e2.profiling().unwrap();
    assert!(p2.start_ns >= p.end_ns, "in-order commands do not overlap");

    // No profiling on a plain queue.
    let plain = queue(&fx, false);
    // SAFETY: live, idle.
    let e3 = unsafe { plain.memcpy(b, a, 1024, &[]) }.unwrap();
    assert_eq!(e3.profiling().err().unwrap().code(), Errc::Profiling);
    // A profiling standalone event signalled on a plain queue has timestamps.
    let se = fx
        .ctx
        .create_event(EventProperties {
            enable_ipc: false,
            enable_profiling: true,
        })
        .unwrap();
    plain.enqueue_signal_event(&se).unwrap();
    let sp = se.profiling().unwrap();
    assert!(sp.submit_ns <= sp.start_ns && sp.start_ns <= sp.end_ns);
    for ptr in [d, a, b] {
        // SAFETY: idle.
        unsafe { fx.ctx.usm_free(ptr) }.unwrap();
    }
}

#[test]
fn virtual_memory_reserve_map_access() {
    let Some(fx) = setup("virtual_memory_reserve_map_access") else {
        return;
    };
    if !fx.device.has(Aspect::ExtOneapiVirtualMem) {
        eprintln!("skipping: no virtual memory");
        return;
    }
    let q = queue(&fx, false);
    let g = fx
        .ctx
        .mem_granularity(&fx.device, GranularityMode::Recommended)
        .unwrap();
    let gmin = fx
        .ctx
        .mem_granularity(&fx.device, GranularityMode::Minimum)
        .unwrap();
    eprintln!("granularity: recommended {g}, minimum {gmin}");
    assert!(g >= gmin && gmin > 0 && g % gmin == 0);
    let va = fx.ctx.reserve_virtual_mem(0, 4 * g).unwrap();
    assert_eq!(va % gmin as u64, 0);
    let mem = fx
        .ctx
        .create_physical_mem(&fx.device, 2 * g, PhysicalMemProperties::default())
        .unwrap();
    assert_eq!(mem.size(), 2 * g);
    assert!(!mem.ipc_enabled());
    fx.ctx
        .map_physical(va + g as u64, 2 * g, &mem, 0, AccessMode::ReadWrite)
        .unwrap();
    assert_eq!(
        fx.ctx.get_access_mode(va + g as u64, 2 * g).unwrap(),
        AccessMode::ReadWrite
    );
    let p = va + g as u64;
    // SAFETY: the range is mapped read-write on this device.
    unsafe { q.fill(p, &[1, 2, 3, 4], 2 * g, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let data: Vec<u8> = (0..4096).map(|i| (i % 253) as u8).collect();
    write(&q, p + 12345, &data);
    assert_eq!(read(&q, p + 12345, 4096), data);
    assert_eq!(
        read(&q, p + 2 * g as u64 - 8, 8),
        vec![1, 2, 3, 4, 1, 2, 3, 4]
    );
    fx.ctx.set_access_mode(p, 2 * g, AccessMode::Read).unwrap();
    assert_eq!(fx.ctx.get_access_mode(p, 2 * g).unwrap(), AccessMode::Read);
    assert_eq!(read(&q, p + 12345, 16), data[..16].to_vec());
    fx.ctx
        .set_access_mode(p, 2 * g, AccessMode::ReadWrite)
        .unwrap();
    // An address outside any mapping is refused.
    assert_eq!(
        fx.ctx.get_access_mode(va, 16).err().unwrap().code(),
        Errc::Invalid
    );
    q.wait().unwrap();
    // SAFETY: idle.
    unsafe { fx.ctx.unmap(p, 2 * g) }.unwrap();
    drop(mem);
    fx.ctx.free_virtual_mem(va, 4 * g).unwrap();
}

fn import<'a>(payload: &'a [u8], fds: Vec<std::os::fd::OwnedFd>) -> IpcImport<'a> {
    IpcImport {
        payload,
        fds,
        exporter: ExporterId::current(),
        same_process: true,
    }
}

#[test]
fn ipc_memory_in_the_exporting_process() {
    let Some(fx) = setup("ipc_memory_in_the_exporting_process") else {
        return;
    };
    if !fx.device.has(Aspect::ExtOneapiIpcMemory) {
        eprintln!("skipping: no IPC memory");
        return;
    }
    let q = queue(&fx, false);
    let size = 1 << 20;
    let buf = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), size, 0)
        .unwrap();
    // SAFETY: live, idle.
    unsafe { q.fill(buf, &[0x5A, 0xA5], size, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let exp = fx.ctx.ipc_get_mem(buf + 4096).unwrap();
    assert!(exp.fds.is_empty());
    assert_eq!(exp.payload.len(), 96);
    let opened = fx
        .ctx
        .ipc_open_mem(&fx.device, import(&exp.payload, vec![]))
        .expect("open in the exporter");
    let p1 = opened.ptr;
    assert_eq!(p1, buf + 4096);
    assert!(
        opened.size >= size - 4096,
        "the opened size covers the rest of the allocation: {}",
        opened.size
    );
    let p2 = fx
        .ctx
        .ipc_open_mem(&fx.device, import(&exp.payload, vec![]))
        .expect("second open")
        .ptr;
    assert_eq!(p2, p1, "the open cache returns the same address");
    assert_eq!(read(&q, p1, 4), vec![0x5A, 0xA5, 0x5A, 0xA5]);
    // The raw handle goes through the same cache (offset 0 = the base), and is the one the
    // context's raw export gives.
    let raw_export = fx.ctx.ipc_get_raw_mem(buf + 4096 + 8).expect("raw export");
    assert_eq!(raw_export.handle, exp.payload[..64].to_vec());
    assert_eq!(raw_export.offset, 4096 + 8);
    let r = fx
        .ctx
        .ipc_open_raw_mem(&fx.device, &raw_export.handle)
        .unwrap()
        .ptr;
    assert_eq!(r, buf);
    assert_eq!(
        fx.ctx
            .ipc_open_raw_mem(&fx.device, &raw_export.handle[..63])
            .unwrap_err()
            .code(),
        sycl_backend::Errc::Invalid
    );
    // A payload that claims a larger allocation than the exporter's is refused.
    let mut forged = exp.payload.clone();
    forged[72..80].copy_from_slice(&(2 * size as u64).to_le_bytes());
    assert_eq!(
        fx.ctx
            .ipc_open_mem(&fx.device, import(&forged, vec![]))
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
    if fx.devices.len() >= 2 {
        // Opened for the second GPU: the allocation itself, which a kernel there reaches.
        let p3 = fx
            .ctx
            .ipc_open_mem(&fx.devices[1], import(&exp.payload, vec![]))
            .expect("open in the exporter for device 1")
            .ptr;
        assert_eq!(p3, p1);
        let q1 = increment_on_second_device(&fx, p3 + 64, 16)
            .expect("a kernel on device 1 reaches the exporter's allocation");
        let want = (0xA55A_A55Au32 + 1).to_le_bytes().repeat(16);
        assert_eq!(read(&q1, p3 + 64, 64), want);
        // SAFETY: idle.
        unsafe { fx.ctx.ipc_close_mem(p3).unwrap() };
    }
    // SAFETY: nothing pending on these addresses.
    unsafe {
        fx.ctx.ipc_close_mem(r).unwrap();
        fx.ctx.ipc_close_mem(p1).unwrap();
        fx.ctx.ipc_close_mem(p2).unwrap();
        assert_eq!(
            fx.ctx.ipc_close_mem(p1).err().unwrap().code(),
            Errc::Invalid,
            "one close too many"
        );
    }
    fx.ctx.ipc_put_mem(&exp.payload).unwrap();
    // Exporting host memory is refused.
    let h = fx.ctx.usm_alloc(UsmKind::Host, None, 4096, 0).unwrap();
    assert_eq!(fx.ctx.ipc_get_mem(h).err().unwrap().code(), Errc::Invalid);
    // Garbage payloads are refused.
    assert_eq!(
        fx.ctx
            .ipc_open_mem(&fx.device, import(&exp.payload[..50], vec![]))
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
    // Freed by its owner while opened in this process (where an open is the allocation
    // itself): the memory stays until the last close (it used to be freed under the opened
    // copy).
    let other = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), size, 0)
        .unwrap();
    // SAFETY: live, idle.
    unsafe { q.fill(other, &[0x3C], size, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    let oexp = fx.ctx.ipc_get_mem(other).unwrap();
    let held = fx
        .ctx
        .ipc_open_mem(&fx.device, import(&oexp.payload, vec![]))
        .unwrap()
        .ptr;
    // SAFETY: no command uses `other` (the opened copy keeps the memory).
    unsafe { fx.ctx.usm_free(other).unwrap() };
    assert_eq!(read(&q, held, 4), vec![0x3C; 4], "freed under an open");
    write(&q, held + 8, &[0x4D; 4]);
    assert_eq!(read(&q, held + 8, 4), vec![0x4D; 4]);
    // SAFETY: idle; the last close frees the allocation.
    unsafe { fx.ctx.ipc_close_mem(held).unwrap() };
    // SAFETY: idle.
    unsafe {
        fx.ctx.usm_free(h).unwrap();
        fx.ctx.usm_free(buf).unwrap();
    }
    // After the free, the in-process open no longer resolves.
    assert_eq!(
        fx.ctx
            .ipc_open_mem(&fx.device, import(&exp.payload, vec![]))
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
}

#[test]
fn ipc_events_in_the_exporting_process() {
    let Some(fx) = setup("ipc_events_in_the_exporting_process") else {
        return;
    };
    let bad = fx
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: true,
        })
        .err()
        .unwrap();
    assert_eq!(bad.code(), Errc::Invalid);
    let plain = fx.ctx.create_event(EventProperties::default()).unwrap();
    assert_eq!(
        plain.status().unwrap(),
        EventStatus::Complete,
        "a new event is complete"
    );
    plain.wait().unwrap();
    if !fx.device.has(Aspect::ExtOneapiIpcEvent) {
        eprintln!("skipping: no IPC events");
        return;
    }
    assert_eq!(
        fx.ctx.ipc_get_event(&plain).err().unwrap().code(),
        Errc::Invalid
    );
    let ev = fx
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    assert!(ev.ipc_enabled());
    let exp = fx.ctx.ipc_get_event(&ev).unwrap();
    assert_eq!(exp.payload.len(), 80);
    let opened = fx.ctx.ipc_open_event(import(&exp.payload, vec![])).unwrap();
    let a = ev
        .as_any()
        .downcast_ref::<sycl_backend_cuda::Event>()
        .unwrap();
    let b = opened
        .as_any()
        .downcast_ref::<sycl_backend_cuda::Event>()
        .unwrap();
    assert_eq!(a.native(), b.native(), "same process: the very same event");
    // Signal after a slow-ish command; wait through the opened event; a second queue waits on it.
    let q = queue(&fx, false);
    let q2 = queue(&fx, false);
    let n = 256 << 20;
    let x = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), n, 0)
        .unwrap();
    // SAFETY: live, idle.
    unsafe { q.fill(x, &[1, 2, 3], n - n % 3, &[]) }.unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    q2.enqueue_wait_events(std::slice::from_ref(&opened))
        .unwrap();
    let after = q2.barrier(&[]).unwrap();
    opened.wait().unwrap();
    assert_eq!(ev.status().unwrap(), EventStatus::Complete);
    after.wait().unwrap();
    assert!(opened.wait_timeout(Duration::from_millis(10)).unwrap());
    fx.ctx.ipc_put_event(&exp.payload).unwrap();
    drop(opened);
    drop(ev);
    // The exported event is gone: opening it in-process fails.
    assert_eq!(
        fx.ctx
            .ipc_open_event(import(&exp.payload, vec![]))
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
    // SAFETY: idle after the waits.
    unsafe { fx.ctx.usm_free(x) }.unwrap();
}

#[test]
fn ipc_physical_memory_in_the_exporting_process() {
    let Some(fx) = setup("ipc_physical_memory_in_the_exporting_process") else {
        return;
    };
    if !fx.device.has(Aspect::ExtOneapiIpcPhysicalMemory) {
        eprintln!("skipping: no IPC physical memory");
        return;
    }
    let q = queue(&fx, false);
    let g = fx
        .ctx
        .mem_granularity(&fx.device, GranularityMode::Recommended)
        .unwrap();
    let mem = fx
        .ctx
        .create_physical_mem(&fx.device, g, PhysicalMemProperties { enable_ipc: true })
        .unwrap();
    assert!(mem.ipc_enabled());
    let plain = fx
        .ctx
        .create_physical_mem(&fx.device, g, PhysicalMemProperties::default())
        .unwrap();
    assert_eq!(
        fx.ctx.ipc_get_physical_mem(&plain).err().unwrap().code(),
        Errc::Invalid
    );
    let exp = fx.ctx.ipc_get_physical_mem(&mem).unwrap();
    assert_eq!(exp.fds.len(), 1);
    let fd = acquire_remote_fd(&ExporterId::current(), exp.fds[0], BackendKind::Cuda).unwrap();
    let imported = fx
        .ctx
        .ipc_open_physical_mem(&fx.device, import(&exp.payload, vec![fd]))
        .unwrap();
    assert_eq!(imported.size(), g);
    let va = fx.ctx.reserve_virtual_mem(0, 2 * g).unwrap();
    fx.ctx
        .map_physical(va, g, &mem, 0, AccessMode::ReadWrite)
        .unwrap();
    fx.ctx
        .map_physical(va + g as u64, g, &imported, 0, AccessMode::ReadWrite)
        .unwrap();
    let data: Vec<u8> = (0..8192).map(|i| (i * 13 % 256) as u8).collect();
    write(&q, va + 100, &data);
    assert_eq!(
        read(&q, va + g as u64 + 100, 8192),
        data,
        "both mappings show the same memory"
    );
    fx.ctx.ipc_put_physical_mem(&exp.payload).unwrap();
    assert_eq!(
        fx.ctx
            .ipc_put_physical_mem(&exp.payload)
            .err()
            .unwrap()
            .code(),
        Errc::Invalid
    );
    q.wait().unwrap();
    // SAFETY: idle.
    unsafe {
        fx.ctx.unmap(va, g).unwrap();
        fx.ctx.unmap(va + g as u64, g).unwrap();
    }
    fx.ctx.free_virtual_mem(va, 2 * g).unwrap();
}

/// The peer side of `ipc_across_processes`; does nothing unless spawned by it.
#[test]
fn child_process_side() {
    let Ok(mem) = std::env::var("SYCL_RS_CUDA_CHILD_MEM") else {
        return;
    };
    let fx = setup("child_process_side").expect("the child needs CUDA");
    let ids: Vec<u64> = std::env::var("SYCL_RS_CUDA_CHILD_EXPORTER")
        .unwrap()
        .split(':')
        .map(|x| x.parse().unwrap())
        .collect();
    let exporter = ExporterId {
        pid: ids[0] as u32,
        start_time: ids[1],
        nonce: ids[2],
    };
    assert!(!exporter.is_current_process());
    let q = queue(&fx, false);

    // Event: wait for the parent's signal (recorded after its fill).
    let ev_payload = hex::decode(std::env::var("SYCL_RS_CUDA_CHILD_EVENT").unwrap()).unwrap();
    let ev = fx
        .ctx
        .ipc_open_event(IpcImport {
            payload: &ev_payload,
            fds: vec![],
            exporter,
            same_process: false,
        })
        .expect("child: open event");
    ev.wait().expect("child: wait event");

    // Memory: read, then write a marker the parent checks.
    let payload = hex::decode(&mem).unwrap();
    let imp = || IpcImport {
        payload: &payload,
        fds: vec![],
        exporter,
        same_process: false,
    };
    let opened = fx
        .ctx
        .ipc_open_mem(&fx.device, imp())
        .expect("child: open memory");
    let p = opened.ptr;
    // The parent exported at offset 8192 of a 1 MiB allocation: the driver's size bounds it.
    assert!(
        opened.size >= (1 << 20) - 8192,
        "child: opened size {}",
        opened.size
    );
    let p2 = fx
        .ctx
        .ipc_open_mem(&fx.device, imp())
        .expect("child: open memory twice")
        .ptr;
    assert_eq!(p, p2);
    // A payload claiming more than the exporter allocated is refused against the driver's
    // size, also across processes (a forged handle cannot widen the mapping).
    let mut forged = payload.clone();
    forged[72..80].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let err = fx
        .ctx
        .ipc_open_mem(
            &fx.device,
            IpcImport {
                payload: &forged,
                fds: vec![],
                exporter,
                same_process: false,
            },
        )
        .expect_err("child: a forged size is refused");
    assert_eq!(err.code(), Errc::Invalid, "{err}");
    let got = read(&q, p, 256);
    assert_eq!(
        got,
        (0..=255u8).collect::<Vec<u8>>(),
        "child sees the parent's data"
    );
    write(&q, p, &[0xEE; 16]);
    if fx.devices.len() >= 2 {
        // A queue of the second GPU depends on the event imported on the first: the driver
        // crashed (SIGSEGV) in cuStreamWaitEvent with such an event, so the backend waits for
        // it on the host.
        let q1w = queue_on(&fx, &fx.devices[1], false).unwrap();
        q1w.enqueue_wait_events(std::slice::from_ref(&ev))
            .expect("device 1 waits for the event imported on device 0");
        q1w.barrier(std::slice::from_ref(&ev))
            .and_then(|b| b.wait())
            .expect("a command of device 1 depends on the imported event");
        // The same handle opened for the second GPU gets that GPU's own mapping (a mapping of
        // the first GPU's context faults in a kernel there), reachable from a kernel there;
        // opened twice for it, the cache returns that mapping again.
        let p3 = fx
            .ctx
            .ipc_open_mem(&fx.devices[1], imp())
            .expect("child: open memory for device 1")
            .ptr;
        assert_ne!(p3, p, "each device gets its own mapping");
        let p4 = fx
            .ctx
            .ipc_open_mem(&fx.devices[1], imp())
            .expect("child: open memory for device 1 again")
            .ptr;
        assert_eq!(p4, p3, "the open cache reuses the device's mapping");
        let n = 64usize;
        let q1 = increment_on_second_device(&fx, p3 + 256, n)
            .expect("the kernel on device 1 reads the peer memory");
        let want: Vec<u8> = (0..n)
            .flat_map(|i| {
                (u32::from_le_bytes([0, 1, 2, 3].map(|b| (4 * i) as u8 + b)) + 1).to_le_bytes()
            })
            .collect();
        assert_eq!(
            read(&q1, p3 + 256, 4 * n),
            want,
            "device 1 incremented the words"
        );
        // SAFETY: idle.
        unsafe {
            fx.ctx.ipc_close_mem(p3).unwrap();
            fx.ctx.ipc_close_mem(p4).unwrap();
        }
        eprintln!("child: device 1 reached the memory through its own mapping");
    }
    // SAFETY: idle.
    unsafe {
        fx.ctx.ipc_close_mem(p).unwrap();
        fx.ctx.ipc_close_mem(p2).unwrap();
    }

    // Physical memory: take the descriptor from the parent and map it.
    let ph = hex::decode(std::env::var("SYCL_RS_CUDA_CHILD_PHYS").unwrap()).unwrap();
    let fdnum: i32 = std::env::var("SYCL_RS_CUDA_CHILD_PHYS_FD")
        .unwrap()
        .parse()
        .unwrap();
    let fd = acquire_remote_fd(&exporter, fdnum, BackendKind::Cuda).expect("child: pidfd_getfd");
    let mem = fx
        .ctx
        .ipc_open_physical_mem(
            &fx.device,
            IpcImport {
                payload: &ph,
                fds: vec![fd],
                exporter,
                same_process: false,
            },
        )
        .expect("child: import physical memory");
    let size = mem.size();
    let va = fx.ctx.reserve_virtual_mem(0, size).unwrap();
    fx.ctx
        .map_physical(va, size, &mem, 0, AccessMode::ReadWrite)
        .unwrap();
    assert_eq!(
        read(&q, va, 64),
        vec![0x3C; 64],
        "child sees the parent's physical memory"
    );
    write(&q, va + 64, &[0xEF; 8]);
    // SAFETY: idle.
    unsafe { fx.ctx.unmap(va, size) }.unwrap();
    fx.ctx.free_virtual_mem(va, size).unwrap();
    // A payload claiming twice the object's size: the import or the mapping is refused by the
    // driver (the importer cannot map more than was exported).
    let mut forged = ph.clone();
    forged[..8].copy_from_slice(&(2 * size as u64).to_le_bytes());
    let fd = acquire_remote_fd(&exporter, fdnum, BackendKind::Cuda).expect("child: pidfd_getfd");
    let imported = fx.ctx.ipc_open_physical_mem(
        &fx.device,
        IpcImport {
            payload: &forged,
            fds: vec![fd],
            exporter,
            same_process: false,
        },
    );
    match imported {
        Err(e) => eprintln!("child: forged physical size refused at import: {e}"),
        Ok(m) => {
            let va2 = fx.ctx.reserve_virtual_mem(0, 2 * size).unwrap();
            let mapped = fx
                .ctx
                .map_physical(va2, 2 * size, &m, 0, AccessMode::ReadWrite);
            let e = mapped.expect_err("child: a forged physical size must not map");
            eprintln!("child: forged physical size refused at map: {e}");
            fx.ctx.free_virtual_mem(va2, 2 * size).unwrap();
        }
    }
    eprintln!("child: all IPC checks passed");
}

#[test]
fn ipc_across_processes() {
    let Some(fx) = setup("ipc_across_processes") else {
        return;
    };
    if std::env::var("SYCL_RS_CUDA_CHILD_MEM").is_ok() {
        return;
    }
    for a in [
        Aspect::ExtOneapiIpcMemory,
        Aspect::ExtOneapiIpcEvent,
        Aspect::ExtOneapiIpcPhysicalMemory,
    ] {
        if !fx.device.has(a) {
            eprintln!("skipping ipc_across_processes: no {a}");
            return;
        }
    }
    let q = queue(&fx, false);
    let size = 1 << 20;
    let buf = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), size, 0)
        .unwrap();
    let pattern: Vec<u8> = (0..=255u8).collect();
    // SAFETY: live, idle.
    unsafe { q.fill(buf, &pattern, size, &[]) }.unwrap();
    let exp = fx.ctx.ipc_get_mem(buf + 8192).unwrap();
    let g = fx
        .ctx
        .mem_granularity(&fx.device, GranularityMode::Recommended)
        .unwrap();
    let mem = fx
        .ctx
        .create_physical_mem(&fx.device, g, PhysicalMemProperties { enable_ipc: true })
        .unwrap();
    let va = fx.ctx.reserve_virtual_mem(0, g).unwrap();
    fx.ctx
        .map_physical(va, g, &mem, 0, AccessMode::ReadWrite)
        .unwrap();
    // SAFETY: mapped read-write.
    unsafe { q.fill(va, &[0x3C], g, &[]) }.unwrap();
    let pexp = fx.ctx.ipc_get_physical_mem(&mem).unwrap();
    let ev = fx
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    let eexp = fx.ctx.ipc_get_event(&ev).unwrap();
    let me = ExporterId::current();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_side",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SYCL_RS_CUDA_CHILD_MEM", hex::encode(&exp.payload))
        .env("SYCL_RS_CUDA_CHILD_EVENT", hex::encode(&eexp.payload))
        .env("SYCL_RS_CUDA_CHILD_PHYS", hex::encode(&pexp.payload))
        .env("SYCL_RS_CUDA_CHILD_PHYS_FD", pexp.fds[0].to_string())
        .env(
            "SYCL_RS_CUDA_CHILD_EXPORTER",
            format!("{}:{}:{}", me.pid, me.start_time, me.nonce),
        )
        .status()
        .expect("spawn the child");
    assert!(status.success(), "the child process failed: {status}");
    assert_eq!(
        read(&q, buf + 8192, 17),
        [vec![0xEEu8; 16], vec![16u8]].concat(),
        "the child's write is visible"
    );
    assert_eq!(
        read(&q, va + 64, 9),
        [vec![0xEFu8; 8], vec![0x3C]].concat(),
        "the child's physical write is visible"
    );
    fx.ctx.ipc_put_mem(&exp.payload).unwrap();
    fx.ctx.ipc_put_physical_mem(&pexp.payload).unwrap();
    fx.ctx.ipc_put_event(&eexp.payload).unwrap();
    q.wait().unwrap();
    // SAFETY: idle.
    unsafe {
        fx.ctx.unmap(va, g).unwrap();
        fx.ctx.usm_free(buf).unwrap();
    }
    fx.ctx.free_virtual_mem(va, g).unwrap();
}

/// An event of another backend that completes at a given time.
struct ForeignEvent {
    at: std::time::Instant,
}

impl sycl_backend::Event for ForeignEvent {
    fn backend(&self) -> BackendKind {
        BackendKind::NativeCpu
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn status(&self) -> sycl_backend::Result<EventStatus> {
        Ok(if std::time::Instant::now() >= self.at {
            EventStatus::Complete
        } else {
            EventStatus::Submitted
        })
    }
    fn wait(&self) -> sycl_backend::Result<()> {
        std::thread::sleep(self.at.saturating_duration_since(std::time::Instant::now()));
        Ok(())
    }
    fn wait_timeout(&self, timeout: Duration) -> sycl_backend::Result<bool> {
        sycl_backend::poll_until(timeout, || Ok(std::time::Instant::now() >= self.at))
    }
    fn profiling(&self) -> sycl_backend::Result<sycl_backend::ProfilingInfo> {
        Err(sycl_backend::Error::new(Errc::Profiling, "none"))
    }
}

#[test]
fn foreign_dependencies_and_concurrent_submission() {
    let Some(fx) = setup("foreign_dependencies_and_concurrent_submission") else {
        return;
    };
    let q = queue(&fx, false);
    let h = fx.ctx.usm_alloc(UsmKind::Host, None, 4096, 0).unwrap();
    // A host task waits for a foreign event without blocking the submitter.
    let at = std::time::Instant::now() + Duration::from_millis(200);
    let foreign: Arc<dyn sycl_backend::Event> = Arc::new(ForeignEvent { at });
    let seen = Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let hp = h as usize;
    let submitted = std::time::Instant::now();
    let t = q
        .host_task(
            Box::new(move || {
                *seen2.lock().unwrap() = Some(std::time::Instant::now());
                // SAFETY: host USM, used by nothing else until the task completes.
                unsafe { std::ptr::write_bytes(hp as *mut u8, 0x99, 4096) };
            }),
            std::slice::from_ref(&foreign),
        )
        .unwrap();
    assert!(
        submitted.elapsed() < Duration::from_millis(150),
        "host_task blocked on a foreign event"
    );
    let d = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), 4096, 0)
        .unwrap();
    // SAFETY: ordered after the task.
    unsafe { q.memcpy(d, h, 4096, &[]) }
        .unwrap()
        .wait()
        .unwrap();
    t.wait().unwrap();
    assert!(
        seen.lock().unwrap().unwrap() >= at,
        "the task ran before its foreign dependency"
    );
    assert_eq!(read(&q, d, 4096), vec![0x99; 4096]);
    // A command with a foreign dependency waits for it.
    let at2 = std::time::Instant::now() + Duration::from_millis(100);
    let f2: Arc<dyn sycl_backend::Event> = Arc::new(ForeignEvent { at: at2 });
    // SAFETY: live, idle.
    let e = unsafe { q.fill(d, &[1], 4096, std::slice::from_ref(&f2)) }.unwrap();
    assert!(std::time::Instant::now() >= at2);
    e.wait().unwrap();
    q.enqueue_wait_events(&[f2]).unwrap();

    // Several threads submit to one queue; every command's result is right.
    let bufs: Vec<u64> = (0..8)
        .map(|_| {
            fx.ctx
                .usm_alloc(UsmKind::Device, Some(&fx.device), 1 << 16, 0)
                .unwrap()
        })
        .collect();
    std::thread::scope(|s| {
        for (i, &b) in bufs.iter().enumerate() {
            let q = q.clone();
            s.spawn(move || {
                for round in 0..20u8 {
                    let pat = [i as u8, round, 0xA0 | i as u8];
                    let n = (1 << 16) - (1 << 16) % 3;
                    // SAFETY: each thread owns its buffer.
                    let ev = unsafe { q.fill(b, &pat, n, &[]) }.unwrap();
                    ev.wait().unwrap();
                    assert_eq!(read(&q, b, n), expected_fill(&pat, n));
                }
            });
        }
    });
    q.wait().unwrap();
    for p in bufs.into_iter().chain([d, h]) {
        // SAFETY: idle.
        unsafe { fx.ctx.usm_free(p) }.unwrap();
    }
}

/// The peer side of `imported_event_of_a_dead_exporter_does_not_hang`: exports an event that
/// stays pending (behind a host task that sleeps), prints its handle, and waits to be killed.
#[test]
fn child_holds_an_event() {
    if std::env::var("SYCL_RS_CUDA_CHILD_HOLD_EVENT").is_err() {
        return;
    }
    let fx = setup("child_holds_an_event").expect("the child needs CUDA");
    let q = queue(&fx, false);
    let ev = fx
        .ctx
        .create_event(EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        })
        .unwrap();
    // Keep the stream busy for a minute on the GPU (a host task would not hold a later
    // signal back: submission after it waits on the host instead).
    let bundle = fx
        .ctx
        .build_kernel_bundle(&fx.devices[..1], &KernelSource::Ptx(PTX_SPIN), "")
        .expect("PTX build");
    let spin = bundle.kernel("spin").unwrap();
    let ns = 60_000_000_000u64.to_le_bytes();
    // SAFETY: the kernel only reads the clock.
    unsafe { q.launch(&spin, range1(1), &[KernelArg::Scalar(&ns)], &[]) }.unwrap();
    q.enqueue_signal_event(&ev).unwrap();
    let exp = fx.ctx.ipc_get_event(&ev).unwrap();
    let me = ExporterId::current();
    println!(
        "EVENT {} {}:{}:{}",
        hex::encode(&exp.payload),
        me.pid,
        me.start_time,
        me.nonce
    );
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn imported_event_of_a_dead_exporter_does_not_hang() {
    let Some(fx) = setup("imported_event_of_a_dead_exporter_does_not_hang") else {
        return;
    };
    if std::env::var("SYCL_RS_CUDA_CHILD_HOLD_EVENT").is_ok()
        || !fx.device.has(Aspect::ExtOneapiIpcEvent)
    {
        return;
    }
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holds_an_event",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SYCL_RS_CUDA_CHILD_HOLD_EVENT", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    // The harness prints "test child_holds_an_event ... " on the same line first.
    let line = lines
        .find_map(|l| {
            l.ok()
                .and_then(|l| l.find("EVENT ").map(|i| l[i..].to_string()))
        })
        .expect("the child prints its event handle");
    let parts: Vec<&str> = line.split_whitespace().collect();
    let payload = hex::decode(parts[1]).unwrap();
    let ids: Vec<u64> = parts[2].split(':').map(|x| x.parse().unwrap()).collect();
    let exporter = ExporterId {
        pid: ids[0] as u32,
        start_time: ids[1],
        nonce: ids[2],
    };
    let ev = fx
        .ctx
        .ipc_open_event(IpcImport {
            payload: &payload,
            fds: vec![],
            exporter,
            same_process: false,
        })
        .expect("open the child's event");
    assert_eq!(
        ev.status().unwrap(),
        EventStatus::Submitted,
        "the child's event is still pending"
    );
    assert!(!ev.wait_timeout(Duration::from_millis(100)).unwrap());
    child.kill().unwrap();
    child.wait().unwrap();
    let start = std::time::Instant::now();
    let outcome = ev.wait();
    eprintln!(
        "wait on the dead exporter's event returned after {:?}: {outcome:?}",
        start.elapsed()
    );
    assert!(start.elapsed() < Duration::from_secs(20), "waiting hung");
    if let Err(e) = outcome {
        assert_eq!(e.code(), Errc::Event, "{e}");
    }
}

#[test]
fn foreign_pointer_info_is_the_drivers_word() {
    let Some(fx) = setup("foreign_pointer_info_is_the_drivers_word") else {
        return;
    };
    let info = fx.device.info();
    let mut kinds = vec![UsmKind::Device];
    if info.has(Aspect::UsmHostAllocations) {
        kinds.push(UsmKind::Host);
    }
    if info.has(Aspect::UsmSharedAllocations) {
        kinds.push(UsmKind::Shared);
    }
    for kind in kinds {
        let dev = (kind != UsmKind::Host).then_some(&fx.device);
        let size = 1 << 20;
        let p = fx.ctx.usm_alloc(kind, dev, size, 0).expect("usm_alloc");
        // Interior pointers name the allocation that holds them, as the driver sees it.
        let got = fx
            .ctx
            .foreign_pointer_info(p + 4096)
            .expect("a CUDA pointer");
        assert_eq!(got.kind, kind, "{kind}");
        let want_device = (kind != UsmKind::Host).then_some(0);
        assert_eq!(got.device_index, want_device, "{kind}");
        assert!(
            got.base <= p && p + size as u64 <= got.base + got.size as u64,
            "{got:?}"
        );
        // SAFETY: no command uses `p`.
        unsafe { fx.ctx.usm_free(p).expect("usm_free") };
    }
    // Pageable host memory of this process: unknown to the driver (`Invalid`), or host
    // memory where the device reaches pageable memory (HMM).
    let stack = [0u8; 64];
    match fx.ctx.foreign_pointer_info(stack.as_ptr() as u64) {
        Err(err) => assert_eq!(err.code(), Errc::Invalid, "{err}"),
        Ok(got) => {
            eprintln!("pageable memory is known to this driver: {got:?}");
            assert_eq!(got.kind, UsmKind::Host);
        }
    }
    fx.ctx
        .wait_foreign_default_queue(&fx.device)
        .expect("the legacy default stream is waited for");
}

/// A context the caller made current (as a libcudart user's device is: torch's on rank 1)
/// is current again after each call of ours: none leaves the backend's primary context in
/// its place. (On two GPUs torch found its device switched to 0 after a call on device 1's
/// rank; one GPU shows the same with a context of the caller's own.)
#[test]
fn the_callers_current_context_stays_current() {
    use cudarc::driver::sys;
    let Some(fx) = setup("the_callers_current_context_stays_current") else {
        return;
    };
    let current = || {
        let mut c = std::ptr::null_mut();
        // SAFETY: `c` is a valid out-pointer.
        let r = unsafe { sys::cuCtxGetCurrent(&mut c) };
        assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuCtxGetCurrent");
        c
    };
    let mut dev = 0;
    // SAFETY: `dev` is a valid out-pointer; the backend loaded, so the driver is initialised.
    let r = unsafe { sys::cuDeviceGet(&mut dev, 0) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuDeviceGet");
    let mut theirs = std::ptr::null_mut();
    // SAFETY: a valid out-pointer and no creation parameters: a plain context of device 0,
    // made current on this thread (destroyed below, after our last call).
    let r = unsafe { sys::cuCtxCreate_v4(&mut theirs, std::ptr::null_mut(), 0, dev) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuCtxCreate_v4");
    assert_eq!(current(), theirs);
    let q = queue(&fx, false);
    assert_eq!(current(), theirs, "after creating a queue");
    let buf = fx
        .ctx
        .usm_alloc(UsmKind::Device, Some(&fx.device), 4096, 0)
        .expect("alloc");
    assert_eq!(current(), theirs, "after an allocation");
    // SAFETY: `buf` is a live allocation of 4096 bytes.
    let ev = unsafe { q.fill(buf, &[7], 4096, &[]) }.expect("fill");
    assert_eq!(current(), theirs, "after a fill");
    ev.wait().expect("wait");
    assert_eq!(current(), theirs, "after a wait");
    assert_eq!(read(&q, buf, 16), vec![7u8; 16]);
    assert_eq!(current(), theirs, "after a copy to the host");
    q.wait().expect("queue wait");
    // SAFETY: ours, no command uses it any more (the queue finished).
    unsafe { fx.ctx.usm_free(buf) }.expect("free");
    assert_eq!(current(), theirs, "after a free");
    drop(q);
    assert_eq!(current(), theirs, "after dropping the queue");
    // SAFETY: ours, created above; nothing of the backend uses it.
    let r = unsafe { sys::cuCtxDestroy_v2(theirs) };
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuCtxDestroy_v2");
}
