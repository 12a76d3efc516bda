//! The memory rules (spec/soundness.md), checked on every device: releases wait for the last
//! reference, host borrows and device commands exclude each other, views race without
//! undefined behaviour, access modes refuse instead of faulting, kernels see exactly their
//! range, and ranges that overflow are errors. Each test names the item of issue 12 it guards.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use libtest_mimic::Failed;
use sycl::virtual_mem::{get_mem_granularity, PhysicalMem, VirtualRange};
use sycl::{
    AccessMode, Aspect, Device, Errc, GranularityMode, KernelArg, KernelBundle,
    PhysicalMemProperties, Queue, Range, UsmKind,
};
use sycl_tests::{check, check_eq, fail};

use super::{in_order, R};

/// `Errc::Invalid` from `r`, or a failure naming `what`.
fn refused<T>(r: sycl::Result<T>, what: &str) -> R {
    match r {
        Ok(_) => Err(fail(format!("{what}: accepted, must be refused"))),
        Err(e) if e.code() == Errc::Invalid => Ok(()),
        Err(e) => Err(fail(format!("{what}: {e} (wanted Errc::Invalid)"))),
    }
}

/// Item 1: an explicit release while ranges, views or kernel arguments of the memory live is
/// refused, and the memory stays allocated (and is not handed out again) until the last one
/// goes. Before, `free` released at once and a write through the range landed in the next
/// allocation at the same address.
pub fn release_waits_for_the_last_reference(d: &Device) -> R {
    let q = in_order(d)?;
    let ctx = q.context().clone();
    let n = 1024usize;
    let buf = sycl::malloc_device::<u32>(n, &q).map_err(fail)?;
    let addr = buf.as_ptr();
    let range = buf.range(16..32).map_err(fail)?;
    let arg = KernelArg::usm(&buf);
    let err = buf
        .free()
        .err()
        .ok_or_else(|| fail("free with a live range"))?;
    check_eq!(err.code(), Errc::Invalid);
    check!(err.message().contains("other reference"), "{err}");
    check_eq!(sycl::get_pointer_type(addr, &ctx), UsmKind::Device);
    // The next allocation cannot take its place; writes through the range stay in it.
    let other = sycl::malloc_device::<u32>(n, &q).map_err(fail)?;
    let (lo, hi) = (other.as_ptr(), other.as_ptr() + (4 * n) as u64);
    check!(
        hi <= addr || lo >= addr + (4 * n) as u64,
        "a new allocation overlaps memory still referenced"
    );
    q.fill(&other, 0u32, &[]).map_err(fail)?;
    q.fill(&range, 7u32, &[]).map_err(fail)?;
    check_eq!(q.to_vec(&range).map_err(fail)?, vec![7u32; 16]);
    check!(q.to_vec(&other).map_err(fail)?.iter().all(|&x| x == 0));
    drop(arg);
    check_eq!(sycl::get_pointer_type(addr, &ctx), UsmKind::Device);
    drop(range);
    check_eq!(
        sycl::get_pointer_type(addr, &ctx),
        UsmKind::Unknown,
        "released with the last reference"
    );
    // The sole owner frees at once and reports.
    let solo = sycl::malloc_device::<u32>(n, &q).map_err(fail)?;
    let solo_addr = solo.as_ptr();
    solo.free().map_err(fail)?;
    check_eq!(sycl::get_pointer_type(solo_addr, &ctx), UsmKind::Unknown);
    if d.has(Aspect::UsmSharedAllocations) && d.has(Aspect::UsmHostAllocations) {
        // A view (of host-accessible memory) is a reference too.
        let shared = sycl::malloc_shared::<u32>(n, &q).map_err(fail)?;
        let view = shared.view().map_err(fail)?;
        refused(shared.free(), "free with a live view")?;
        view.set(n - 1, 5);
        check_eq!(view.get(n - 1), 5);
    }
    Ok(())
}

/// A read-write mapping of one granule of new physical memory (the mapping keeps the
/// physical memory and the reserved range alive).
fn one_granule_mapping(d: &Device, q: &Queue) -> Result<sycl::virtual_mem::Mapping, Failed> {
    let ctx = q.context();
    let g = get_mem_granularity(d, ctx, GranularityMode::Minimum).map_err(fail)?;
    let phys = PhysicalMem::new(d, ctx, g, PhysicalMemProperties::default()).map_err(fail)?;
    let range = VirtualRange::reserve(ctx, g, 0).map_err(fail)?;
    phys.map(&range, 0, g, AccessMode::ReadWrite, 0)
        .map_err(fail)
}

/// Item 3: a host borrow (`as_slice`, `as_mut_slice`) excludes the device commands that
/// conflict with it, waits for those already submitted, and is refused while a kernel holds a
/// view. Before, `as_slice` handed out `&[T]` under which a fill changed the memory, and
/// `as_mut_slice` returned while a closure kernel was still writing.
pub fn host_borrows_exclude_device_writes(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 4096usize;
    let mut buf = sycl::malloc_shared::<u32>(n, &q).map_err(fail)?;
    let copy = sycl::malloc_shared::<u32>(n, &q).map_err(fail)?;
    q.fill(&buf, 1u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    {
        let s = buf.as_slice().map_err(fail)?;
        check_eq!(s[0], 1);
        refused(q.fill(&buf, 2u32, &[]), "a fill under a shared borrow")?;
        refused(q.copy(&copy, &buf, &[]), "a copy into a borrowed buffer")?;
        refused(buf.view(), "a view under a borrow")?;
        // Reading commands and more readers are fine.
        q.copy(&buf, &copy, &[])
            .map_err(fail)?
            .wait()
            .map_err(fail)?;
        let again = buf.as_slice().map_err(fail)?;
        check_eq!(again[n - 1], 1);
        check_eq!(s[n - 1], 1, "the borrow still sees what it saw");
    }
    q.fill(&buf, 2u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    let probe = buf.range(..1).map_err(fail)?;
    {
        let mut m = buf.as_mut_slice().map_err(fail)?;
        m[0] = 9;
        // Commands on other memory go on; on the borrowed memory, even reads are refused.
        q.to_vec(&copy).map_err(fail)?;
        refused(q.to_vec(&probe), "a device read under an exclusive borrow")?;
    }
    check_eq!(q.to_vec(&buf).map_err(fail)?[0], 9);
    // A borrow waits for the commands that write the memory, even gated ones.
    let gate = q
        .host_task(&[], || std::thread::sleep(Duration::from_millis(30)))
        .map_err(fail)?;
    q.fill(&buf, 3u32, &[&gate]).map_err(fail)?;
    check!(
        buf.as_slice().map_err(fail)?.iter().all(|&x| x == 3),
        "the borrow did not wait for the fill"
    );
    if !d.has(Aspect::ExtSyclRsClosureKernels) {
        return Ok(());
    }
    // A kernel that holds a view: no host borrow until it has finished and dropped it.
    let view = buf.view().map_err(fail)?;
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    let kernel = q
        .parallel_for(Range::d1(1), &[], move |_: sycl::Item| {
            while !g.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            view.set(0, 42);
        })
        .map_err(fail)?;
    refused(buf.as_mut_slice(), "as_mut_slice while a kernel writes")?;
    refused(buf.as_slice(), "as_slice while a kernel writes")?;
    go.store(true, Ordering::Release);
    kernel.wait().map_err(fail)?;
    check_eq!(buf.as_mut_slice().map_err(fail)?[0], 42);
    Ok(())
}

/// Item 5: views are atomic, so work-items racing on one element are defined: the element
/// ends up holding one of the values written. (Before, `UsmView::set` was a plain write: a data
/// race, undefined behaviour; `usm::access` has a test of the atomic parts that Miri checks.)
pub fn racing_views_are_defined(d: &Device) -> R {
    let q = in_order(d)?;
    let out = sycl::malloc_shared::<u64>(2, &q).map_err(fail)?;
    q.fill(&out, 0u64, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    let view = out.view().map_err(fail)?;
    let n = 100_000usize;
    q.parallel_for(Range::d1(n), &[], move |item: sycl::Item| {
        let i = item.get(0) as u64;
        // Both halves of the value come from the same writer.
        view.set(0, (i << 32) | i);
        view.set(1, view.get(1) + 1);
    })
    .map_err(fail)?
    .wait()
    .map_err(fail)?;
    let got = out.as_slice().map_err(fail)?;
    check!(
        got[0] >> 32 == got[0] & 0xffff_ffff && got[0] >> 32 < n as u64,
        "torn or foreign value {:#x}",
        got[0]
    );
    // Increments may be lost (a race), but the count is a count.
    check!(got[1] >= 1 && got[1] <= n as u64, "count {}", got[1]);
    drop(got);
    // Views of other widths would mix atomic sizes on the same bytes: refused while a view of
    // another width lives.
    let wide = out.view().map_err(fail)?;
    let bytes = out.full().cast::<u8>().map_err(fail)?;
    refused(bytes.view(), "a u8 view beside a u64 view")?;
    let same_width = out.full().cast::<f64>().map_err(fail)?;
    same_width.view().map_err(fail)?;
    drop(wide);
    bytes.view().map_err(fail)?;
    Ok(())
}

/// Item 7: after `set_access_mode` to read or none, the commands and views that mode forbids
/// are refused instead of faulting. Before, a fill into a read-only mapping killed the process
/// with SIGSEGV.
pub fn access_modes_refuse_instead_of_faulting(d: &Device) -> R {
    let q = in_order(d)?;
    let m = one_granule_mapping(d, &q)?;
    let words = m.as_range::<u32>().map_err(fail)?;
    q.fill(&words, 5u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    if words.is_host_accessible() {
        // A live view keeps the mapping read-write.
        let v = words.view().map_err(fail)?;
        refused(
            m.set_access_mode(AccessMode::Read),
            "set_access_mode with a live view",
        )?;
        check_eq!(v.get(0), 5);
    }
    m.set_access_mode(AccessMode::Read).map_err(fail)?;
    refused(q.fill(&words, 6u32, &[]), "a fill into a read-only mapping")?;
    refused(
        q.write(&words, &vec![6u32; m.size() / 4]),
        "a write into a read-only mapping",
    )?;
    check!(q.to_vec(&words).map_err(fail)?.iter().all(|&x| x == 5));
    if words.is_host_accessible() {
        refused(words.view(), "a view of a read-only mapping")?;
    }
    m.set_access_mode(AccessMode::None).map_err(fail)?;
    refused(q.to_vec(&words), "a read of an inaccessible mapping")?;
    refused(
        q.fill(&words, 7u32, &[]),
        "a fill into an inaccessible mapping",
    )?;
    m.set_access_mode(AccessMode::ReadWrite).map_err(fail)?;
    q.fill(&words, 8u32, &[]).map_err(fail)?;
    check!(q.to_vec(&words).map_err(fail)?.iter().all(|&x| x == 8));
    drop(words);
    m.unmap().map_err(fail)?;
    Ok(())
}

/// Item 9: a kernel launched without a work-group size sees exactly its range on every
/// backend. The kernel below has no bounds check; the buffer has a guard zone after the range
/// (large enough for any rounding a backend could do, so even a regression stays inside the
/// allocation), which must stay untouched, and every work-item counts itself. Before, CUDA
/// rounded the grid up (256 items for 1-D, 16x16 for 2-D) and wrote into the guard.
pub fn source_kernels_see_exactly_their_range(d: &Device) -> R {
    let source = if d.has(Aspect::ExtOneapiKernelCompilerOpencl) {
        sycl::Source::OpenClC(
            "__kernel void mark(__global uint* out, __global uint* count, uint cols) {\n\
               uint i = (uint)get_global_id(0) * cols + (uint)get_global_id(1);\n\
               out[i] = i + 1; atomic_inc(count);\n}\n",
        )
    } else {
        sycl::Source::CudaC(
            "extern \"C\" __global__ void mark(unsigned* out, unsigned* count, unsigned cols) {\n\
               unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * cols + blockIdx.y * blockDim.y + threadIdx.y;\n\
               out[i] = i + 1; atomicAdd(count, 1u);\n}\n",
        )
    };
    let q = in_order(d)?;
    let bundle = KernelBundle::build(q.context(), &[], source, "").map_err(fail)?;
    let k = bundle.kernel("mark").map_err(fail)?;
    const GUARD: usize = 1 << 16;
    for (rows, cols) in [(1000usize, 1usize), (100_003, 1), (37, 29)] {
        let range = if cols == 1 {
            Range::d1(rows)
        } else {
            Range::d2(rows, cols)
        };
        let n = rows * cols;
        let out = sycl::malloc_device::<u32>(n + GUARD, &q).map_err(fail)?;
        let count = sycl::malloc_device::<u32>(1, &q).map_err(fail)?;
        q.fill(&out, 0u32, &[]).map_err(fail)?;
        q.fill(&count, 0u32, &[]).map_err(fail)?;
        let args = [
            KernelArg::usm(&out),
            KernelArg::usm(&count),
            KernelArg::scalar(&(cols as u32)),
        ];
        // SAFETY: `mark` takes (uint*, uint*, uint) and writes out[i * cols + j] and count[0]
        // for the work-item (i, j); over exactly `range` that is out[0..n). The GUARD words
        // after them absorb the largest rounding a backend could do (a grid rounded up to
        // 1024-item blocks in 1-D, or 64 in each of 2 dimensions), so the writes stay inside
        // `out` even if the range were not respected, which the test then reports.
        unsafe { q.launch(&k, range, &args, &[]) }
            .map_err(fail)?
            .wait()
            .map_err(fail)?;
        let got = q.to_vec(&out).map_err(fail)?;
        check_eq!(
            q.to_vec(&count).map_err(fail)?[0] as usize,
            n,
            "{range:?}: work-items run"
        );
        check!(
            got[..n].iter().enumerate().all(|(i, &x)| x == i as u32 + 1),
            "{range:?}: a work-item of the range did not run"
        );
        check!(
            got[n..].iter().all(|&x| x == 0),
            "{range:?}: work-items outside the range wrote past it"
        );
    }
    Ok(())
}

/// Item 16: ranges whose work-item count overflows are `Errc::NdRange`, never a wrapped count
/// (release) or an overflow panic (debug).
pub fn overflowing_ranges_are_errors() -> R {
    let huge = Range::d3(1 << 32, 1 << 32, 2);
    check_eq!(huge.total().unwrap_err().code(), Errc::NdRange);
    check_eq!(
        Range::d2(usize::MAX, 2).total().unwrap_err().code(),
        Errc::NdRange
    );
    check_eq!(Range::d3(7, 11, 13).total().map_err(fail)?, 1001);
    let q = Queue::in_order(&Device::native_cpu()).map_err(fail)?;
    for range in [
        huge,
        Range::d3(0, 0, 0).with_local([usize::MAX, usize::MAX, 2]),
        Range::d1(0).with_local([1 << 40, 1 << 40, 1]),
    ] {
        let ran = Arc::new(AtomicU32::new(0));
        let r = ran.clone();
        let err = q
            .parallel_for(range, &[], move |_: sycl::Item| {
                r.fetch_add(1, Ordering::Relaxed);
            })
            .err()
            .ok_or_else(|| fail(format!("{range:?} accepted")))?;
        check_eq!(err.code(), Errc::NdRange, "{range:?}: {err}");
        check_eq!(ran.load(Ordering::Relaxed), 0);
    }
    Ok(())
}

/// Issue 29, item 1: USM of a zero-sized element type is refused with `Errc::Invalid` at
/// every entry point that makes typed memory (allocation of each kind, a cast of a range, a
/// mapping's range, an IPC open), so no slice over address 0 can exist. Before, `malloc_shared::<()>(10)`
/// returned memory at address 0 and `as_slice` made a reference from it.
pub fn zero_sized_elements_are_refused(d: &Device) -> R {
    let q = in_order(d)?;
    for (kind, ok) in [
        (UsmKind::Device, d.has(Aspect::UsmDeviceAllocations)),
        (UsmKind::Host, d.has(Aspect::UsmHostAllocations)),
        (UsmKind::Shared, d.has(Aspect::UsmSharedAllocations)),
    ] {
        if !ok {
            continue;
        }
        for count in [0, 10] {
            let r = sycl::Usm::<()>::alloc(kind, count, d, q.context());
            match r {
                Ok(u) => {
                    return Err(fail(format!(
                        "{kind} USM of {count} `()` accepted at {:#x}",
                        u.as_ptr()
                    )))
                }
                Err(e) => {
                    check_eq!(e.code(), Errc::Invalid, "{kind} of `()`: {e}");
                    check!(e.message().contains("zero-sized"), "{e}");
                }
            }
        }
        refused(
            sycl::Usm::<[u32; 0]>::alloc(kind, 4, d, q.context()),
            "USM of [u32; 0]",
        )?;
    }
    let bytes = sycl::malloc_device::<u8>(64, &q).map_err(fail)?;
    refused(bytes.full().cast::<()>(), "a cast to ()")?;
    // The same element types that are not zero-sized keep working.
    check_eq!(bytes.full().cast::<u32>().map_err(fail)?.len(), 16);
    if d.has(Aspect::ExtOneapiIpcMemory) {
        let handle = sycl::ipc::memory::get(&bytes).map_err(fail)?;
        refused(
            sycl::ipc::memory::open::<()>(&handle, q.context(), d),
            "ipc::memory::open::<()>",
        )?;
        let same = sycl::ipc::memory::open::<u32>(&handle, q.context(), d).map_err(fail)?;
        check_eq!(same.len(), 16);
        drop(same);
        sycl::ipc::memory::put(handle).map_err(fail)?;
    }
    if d.has(Aspect::ExtOneapiVirtualMem) {
        let m = one_granule_mapping(d, &q)?;
        refused(m.as_range::<()>(), "a mapping as a range of ()")?;
        check_eq!(m.as_range::<u64>().map_err(fail)?.len(), m.size() / 8);
    }
    Ok(())
}

#[sycl::kernel]
fn scale_into(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = a * x[i] + y[i];
}

/// Runs `body` on a thread of its own and fails if it has not returned within `limit`: a
/// deadlock becomes a failure naming `what` instead of a test run that never ends.
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    body: impl FnOnce() -> Result<T, Failed> + Send + 'static,
) -> Result<T, Failed> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(body());
    });
    match rx.recv_timeout(limit) {
        Ok(result) => result,
        Err(_) => Err(fail(format!(
            "{what}: still blocked after {limit:?} (a deadlock)"
        ))),
    }
}

/// Polls until `addr` is no memory of `ctx` any more: the deferred release happened.
fn released_soon(ctx: &sycl::Context, addr: u64, what: &str) -> R {
    let start = std::time::Instant::now();
    while sycl::get_pointer_type(addr, ctx) != UsmKind::Unknown {
        if start.elapsed() > Duration::from_secs(20) {
            return Err(fail(format!("{what}: the memory was never released")));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Issue 29, item 2: dropping (or freeing) the last owner of memory while a command still uses
/// it defers the release until the command ends; nothing waits for its own work. Before, on the
/// native CPU queue, the worker dropped the kernel's last reference, the release waited for
/// that kernel's event, and `e.wait()` never returned.
pub fn dropping_the_last_owner_defers_the_release(d: &Device) -> R {
    let limit = Duration::from_secs(60);
    let n = 1 << 16;
    for explicit_free in [false, true] {
        let d = d.clone();
        within(limit, "drop(x) while a kernel uses x", move || {
            let q = in_order(&d)?;
            let x = sycl::malloc_device::<f32>(n, &q).map_err(fail)?;
            let y = sycl::malloc_device::<f32>(n, &q).map_err(fail)?;
            q.fill(&x, 2.0f32, &[]).map_err(fail)?;
            q.fill(&y, 1.0f32, &[])
                .map_err(fail)?
                .wait()
                .map_err(fail)?;
            let addr = x.as_ptr();
            let e = q
                .parallel_for(Range::d1(n), &[], scale_into(3.0, &x, &y))
                .map_err(fail)?;
            if explicit_free {
                // Where the kernel still holds a reference (native CPU: its argument guards),
                // refused and released with the last one; elsewhere it waits for the kernel.
                match x.free() {
                    Ok(()) => {}
                    Err(e) if e.code() == Errc::Invalid => {}
                    Err(e) => return Err(fail(format!("free while a kernel runs: {e}"))),
                }
            } else {
                drop(x);
            }
            e.wait().map_err(fail)?;
            check!(q.to_vec(&y).map_err(fail)?.iter().all(|&v| v == 7.0));
            released_soon(q.context(), addr, "x after its kernel")
        })?;
    }
    {
        let d = d.clone();
        within(limit, "a command that does not end", move || {
            // One command that has not ended delays only the release of the memory it uses.
            // Its gate is a host task that a timer opens after 3 s. (On CUDA, which waits on
            // the host for a host task before it submits the next command of the queue, the
            // gated fill is only submitted once the gate opened: nothing is left to check.)
            let (q1, q2) = (in_order(&d)?, in_order(&d)?);
            let (open, gate_rx) = std::sync::mpsc::channel::<()>();
            let gate = q1
                .host_task(&[], move || {
                    let _ = gate_rx.recv_timeout(Duration::from_secs(60));
                })
                .map_err(fail)?;
            let timer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(3));
                let _ = open.send(());
            });
            let stuck = sycl::malloc_device::<u32>(n, &q1).map_err(fail)?;
            let stuck_addr = stuck.as_ptr();
            let gated = q1.fill(&stuck, 1u32, &[&gate]).map_err(fail)?;
            drop(stuck);
            let other = sycl::malloc_device::<u32>(n, &q2).map_err(fail)?;
            let other_addr = other.as_ptr();
            let e = q2.fill(&other, 2u32, &[]).map_err(fail)?;
            drop(other);
            e.wait().map_err(fail)?;
            released_soon(q2.context(), other_addr, "memory of a finished fill")?;
            // Looked at in this order: if the gated fill is still pending after the pointer
            // was, the memory was still allocated while the fill could run.
            let kind = sycl::get_pointer_type(stuck_addr, q1.context());
            if gated.status().map_err(fail)? != sycl::EventStatus::Complete {
                check_eq!(
                    kind,
                    UsmKind::Device,
                    "released under a fill that has not run"
                );
            } else {
                println!("the gated fill had run before the check: nothing to check here");
            }
            timer.join().map_err(|_| fail("the timer panicked"))?;
            q1.wait().map_err(fail)?;
            released_soon(q1.context(), stuck_addr, "memory of the gated fill")
        })?;
    }
    if d.has(Aspect::ExtSyclRsClosureKernels) && d.has(Aspect::UsmSharedAllocations) {
        let d = d.clone();
        within(
            limit,
            "a closure kernel's view is the last owner",
            move || {
                let q = in_order(&d)?;
                let x = sycl::malloc_shared::<u32>(n, &q).map_err(fail)?;
                let addr = x.as_ptr();
                let view = x.view().map_err(fail)?;
                q.parallel_for(Range::d1(n), &[], move |it: sycl::Item| {
                    view.set(it.get(0), 1);
                })
                .map_err(fail)?;
                // A later command on the same queue uses the memory; the closure's view is the
                // last reference once `x` goes, and is dropped before that fill runs.
                q.fill(&x, 5u32, &[]).map_err(fail)?;
                drop(x);
                q.wait().map_err(fail)?;
                released_soon(q.context(), addr, "x after the fill")
            },
        )?;
    }
    Ok(())
}

#[sycl::kernel]
fn mark_first(out: &mut [u32]) {
    let i = global_id(0);
    if i == 0 {
        out[0] = 1;
    }
}

/// Issue 29, item 3: launches beyond what the device takes are `Errc::NdRange` at submit and
/// run nothing. Before, PoCL was handed 2^32 work-groups and killed the process (SIGFPE,
/// SIGILL or SIGABRT in its scheduler). The native CPU device takes any range whose
/// work-item count fits `usize` (such a launch runs, for hours: spec/soundness.md), so there
/// only ranges whose count overflows are refused.
pub fn launches_beyond_the_device_are_refused(d: &Device) -> R {
    let q = in_order(d)?;
    let out = sycl::malloc_device::<u32>(1, &q).map_err(fail)?;
    q.fill(&out, 0u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    let beyond = if d.backend() == sycl::BackendKind::NativeCpu {
        vec![Range::d3(1 << 32, 1 << 32, 2), Range::d2(usize::MAX, 2)]
    } else {
        vec![
            Range::d1(1 << 44),
            Range::d2(1 << 20, 1 << 20),
            // Within CUDA's grid as a plain range (it would run): only as groups of one item
            // does it exceed every device's limits.
            Range::d3(1 << 16, 1 << 16, 1 << 16).with_local([1, 1, 1]),
            Range::d1(1 << 40).with_local([1, 1, 1]),
        ]
    };
    for range in beyond {
        match q.parallel_for(range, &[], mark_first(&out)) {
            Ok(e) => {
                let _ = e.wait();
                return Err(fail(format!("{range:?} was launched on {}", d.name())));
            }
            Err(e) => check_eq!(e.code(), Errc::NdRange, "{range:?}: {e}"),
        }
    }
    // A range the device takes still runs, on the same queue.
    q.parallel_for(Range::d1(4096), &[], mark_first(&out))
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    check_eq!(q.to_vec(&out).map_err(fail)?, vec![1u32]);
    Ok(())
}

/// Issue 29 ("aliasing across mappings"): two mappings of one physical memory object are the
/// same bytes at two addresses; a kernel writing one while reading the other is refused like
/// two overlapping ranges of one allocation (GPU code compiles `&mut [T]` as `restrict`).
/// Mappings of disjoint parts of the object stay accepted.
pub fn aliasing_across_mappings_is_refused(d: &Device) -> R {
    let q = in_order(d)?;
    let ctx = q.context();
    let g = get_mem_granularity(d, ctx, GranularityMode::Minimum).map_err(fail)?;
    let phys = PhysicalMem::new(d, ctx, 2 * g, PhysicalMemProperties::default()).map_err(fail)?;
    let ra = VirtualRange::reserve(ctx, 2 * g, 0).map_err(fail)?;
    let rb = VirtualRange::reserve(ctx, 2 * g, 0).map_err(fail)?;
    let a = phys
        .map(&ra, 0, 2 * g, AccessMode::ReadWrite, 0)
        .map_err(fail)?;
    let b = phys
        .map(&rb, 0, 2 * g, AccessMode::ReadWrite, 0)
        .map_err(fail)?;
    let (fa, fb) = (
        a.as_range::<f32>().map_err(fail)?,
        b.as_range::<f32>().map_err(fail)?,
    );
    let n = g / 4;
    let r = Range::d1(n);
    let lo_a = fa.sub(0..n).map_err(fail)?;
    let hi_b = fb.sub(n..2 * n).map_err(fail)?;
    let lo_b = fb.sub(0..n).map_err(fail)?;
    refused(
        q.parallel_for(r, &[], scale_into(2.0, &lo_a, &lo_b)),
        "writing one mapping while reading the same bytes through another",
    )?;
    refused(
        q.parallel_for(r, &[], scale_into(2.0, &lo_b, &lo_a)),
        "the same, the other way round",
    )?;
    // The first half through one mapping, the second through the other: disjoint bytes.
    q.fill(&fa, 1.0f32, &[]).map_err(fail)?;
    q.parallel_for(r, &[], scale_into(2.0, &lo_a, &hi_b))
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    check!(q.to_vec(&hi_b).map_err(fail)?.iter().all(|&v| v == 3.0));
    Ok(())
}
