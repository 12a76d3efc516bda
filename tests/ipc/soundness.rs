//! Hostile peers and the memory rules across processes (issue 12): every test plays the
//! attack it guards against, with real child processes, and names its item.

use std::io::{BufRead, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Stdio;
use std::time::Duration;

use libtest_mimic::Failed;
use sycl::ipc::transport::{Channel, Listener, PeerPolicy};
use sycl::ipc::{self, Handle};
use sycl::virtual_mem::PhysicalMem;
use sycl::{Device, Errc, Event, EventProperties, PhysicalMemProperties, Queue};
use sycl_tests::{
    check, check_eq, child_command, device_from_selector, fail, process_start_time, run_child,
    selector_for, start_child, wire,
};

use super::{allow_children, exporter_buffer, handle_arg, s, verify, ChildResult, N, R};

/// `Errc::Invalid` from `r`, or a failure naming `what`.
fn refused<T>(r: sycl::Result<T>, what: &str) -> Result<sycl::Error, String> {
    match r {
        Ok(_) => Err(format!("{what}: accepted, must be refused")),
        Err(e) if e.code() == Errc::Invalid => Ok(e),
        Err(e) => Err(format!("{what}: {e} (wanted Errc::Invalid)")),
    }
}

fn count_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Takes descriptor `fd` of process `pid` with `pidfd_getfd`, as any peer with ptrace rights
/// over the exporter can.
fn steal_fd(pid: u32, fd: i32) -> Result<OwnedFd, String> {
    let pid = rustix::process::Pid::from_raw(pid as i32).ok_or("pid")?;
    let pidfd =
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).map_err(s)?;
    rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty()).map_err(s)
}

/// Sends `bytes` as a handle with `fds`, the way `Channel::send_handle` frames it, but with
/// whatever bytes a hostile peer chooses.
fn hostile_send(ch: &Channel, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Result<(), String> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err("too many descriptors".into());
    }
    let iov = [std::io::IoSlice::new(&[1u8]), std::io::IoSlice::new(bytes)];
    rustix::net::sendmsg(ch.as_fd(), &iov, &mut control, SendFlags::NOSIGNAL).map_err(s)?;
    Ok(())
}

/// The descriptors a handle of this process names, borrowed for as long as its export lives.
fn own_fds(bytes: &[u8]) -> Vec<BorrowedFd<'static>> {
    wire::fds(bytes)
        .into_iter()
        // SAFETY: the numbers of a live export of this process: the caller keeps the export
        // (and so the descriptors) alive while the borrows are used.
        .map(|fd| unsafe { BorrowedFd::borrow_raw(fd) })
        .collect()
}

// ---- item 2: an open in the exporting process keeps the exporter's memory alive

/// Item 2: memory opened in the exporting process stays valid after the exporter's owner is
/// dropped. On CUDA such an open is the exporter's allocation itself, which the owner's drop
/// used to free under the opened copy.
pub fn opened_in_exporter_outlives_its_owner(d: &Device) -> R {
    let (q, buf) = exporter_buffer(d, 60)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let opened = ipc::memory::open::<u32>(&handle, q.context(), d).map_err(fail)?;
    drop(handle);
    drop(buf);
    verify(&q, &opened, 60).map_err(fail)?;
    q.fill(&opened, 61u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    check!(q.to_vec(&opened).map_err(fail)?.iter().all(|&x| x == 61));
    ipc::memory::close(opened).map_err(fail)?;
    Ok(())
}

// ---- item 4: no Rust slice over memory another process may write

/// Item 4: exported and opened memory has no host borrows (another process may write it at any
/// moment), only views and copies; the same-process open (a second mapping of the same memory)
/// no longer yields a second `&mut [T]` aliasing the first.
pub fn shared_memory_has_no_host_slices(d: &Device) -> R {
    let q = Queue::in_order(d).map_err(fail)?;
    let mut buf = sycl::malloc_device::<u32>(1024, &q).map_err(fail)?;
    buf.as_mut_slice().map_err(fail)?.fill(3);
    {
        let borrowed = buf.as_slice().map_err(fail)?;
        refused(ipc::memory::get(&buf), "an export under a host borrow").map_err(fail)?;
        check_eq!(borrowed[0], 3);
    }
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    check!(buf.is_shared_with_other_processes());
    let mut opened = ipc::memory::open::<u32>(&handle, q.context(), d).map_err(fail)?;
    refused(buf.as_slice(), "as_slice of exported memory").map_err(fail)?;
    refused(buf.as_mut_slice(), "as_mut_slice of exported memory").map_err(fail)?;
    refused(opened.as_mut_slice(), "as_mut_slice of opened memory").map_err(fail)?;
    // Views reach it, atomically, and see each other's writes.
    let (a, b) = (buf.view().map_err(fail)?, opened.view().map_err(fail)?);
    a.set(7, 70);
    check_eq!(b.get(7), 70);
    b.copy_from_slice(&[9; 1024]).map_err(fail)?;
    check_eq!(a.to_vec(), vec![9; 1024]);
    Ok(())
}

// ---- item 6: opening as T checks the address is aligned for T

/// Item 6: a handle exported at an interior byte offset opens as bytes, but not as a type the
/// address is not aligned for (it used to give a misaligned `Usm<u64>`).
pub fn open_checks_alignment(d: &Device) -> R {
    let q = Queue::in_order(d).map_err(fail)?;
    let buf = sycl::malloc_device::<u8>(4096, &q).map_err(fail)?;
    let odd = ipc::memory::get(&buf.range(1..).map_err(fail)?).map_err(fail)?;
    let e = refused(
        ipc::memory::open::<u64>(&odd, q.context(), d),
        "open::<u64> at +1",
    )
    .map_err(fail)?;
    check!(e.message().contains("aligned"), "{e}");
    check_eq!(
        ipc::memory::open::<u8>(&odd, q.context(), d)
            .map_err(fail)?
            .len(),
        4095
    );
    let four = ipc::memory::get(&buf.range(4..).map_err(fail)?).map_err(fail)?;
    check_eq!(
        ipc::memory::open::<u32>(&four, q.context(), d)
            .map_err(fail)?
            .len(),
        1023
    );
    Ok(())
}

// ---- item 10: the object size in a handle is never believed

fn child_open_forged(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ctx = sycl::Context::default_for(&d).map_err(s)?;
    let through_channel = args[1] == "channel";
    let handle = if through_channel {
        let ch = Channel::connect(&args[2]).map_err(s)?;
        ch.set_recv_timeout(Some(Duration::from_secs(30)))
            .map_err(s)?;
        ch.recv_handle().map_err(s)?
    } else {
        handle_arg(&args[2])?
    };
    let e = refused(ipc::memory::open::<u32>(&handle, &ctx, &d), "a forged size")?;
    println!("refused: {e}");
    Ok(())
}

/// Item 10: a handle whose object size was forged larger (checksum recomputed) is refused by
/// every path: bytes in this process, bytes in another (`pidfd_getfd`), and a hostile sender
/// on the rank channel. Before, it opened as a `Usm` twice as long (reads and writes reached the
/// neighbouring allocation), or 1 TiB long (SIGSEGV).
pub fn forged_sizes_are_refused(d: &Device) -> R {
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 62)?;
    let _neighbour = sycl::malloc_device::<u32>(N, &q).map_err(fail)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let bytes = handle.to_vec();
    let size = handle.object_size();
    // A driver may round an allocation up (CUDA reports the size it allocated): the forged
    // claims clear that by far, except on native CPU, where the exact size is known.
    let mut claims = vec![size + (4 << 20), 2 * size + (4 << 20), 1 << 40, u64::MAX];
    if crate::memfd_memory(d) {
        claims.push(size + 1);
    }
    for forged_size in claims {
        let forged = wire::forge(&bytes, wire::OBJECT_SIZE, &forged_size.to_le_bytes());
        let h = Handle::from_bytes(forged.clone()).map_err(fail)?;
        refused(
            ipc::memory::open::<u32>(&h, q.context(), d),
            "a forged size",
        )
        .map_err(fail)?;
        run_child(
            "open_forged",
            &[selector_for(d), "bytes".into(), hex::encode(&forged)],
        )?;
    }
    // A smaller claim is not a danger: it opens that much.
    let smaller = wire::forge(&bytes, wire::OBJECT_SIZE, &(size / 2).to_le_bytes());
    let h = Handle::from_bytes(smaller).map_err(fail)?;
    check_eq!(
        ipc::memory::open::<u32>(&h, q.context(), d)
            .map_err(fail)?
            .len(),
        N / 2
    );
    // Through the rank channel, from a sender that forges the bytes it frames.
    let forged = wire::forge(
        &bytes,
        wire::OBJECT_SIZE,
        &(2 * size + (4 << 20)).to_le_bytes(),
    );
    let listener = Listener::bind_unique().map_err(fail)?;
    let mut child = child_command(
        "open_forged",
        &[selector_for(d), "channel".into(), listener.name().into()],
    )
    .spawn()
    .map_err(fail)?;
    let ch = listener
        .accept(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    hostile_send(&ch, &forged, &own_fds(&bytes)).map_err(fail)?;
    let status = child.wait().map_err(fail)?;
    check!(
        status.success(),
        "the receiver opened a forged size: {status}"
    );
    // Physical memory: the size is the object's, never the handle's.
    if d.has(sycl::Aspect::ExtOneapiIpcPhysicalMemory) {
        let (_pm, ph) = exported_physical(d, &q)?;
        let g = sycl::virtual_mem::get_mem_granularity(d, q.context(), Default::default())
            .map_err(fail)?;
        let forged = wire::forge(&ph, wire::OBJECT_SIZE, &(2 * g as u64).to_le_bytes());
        let h = Handle::from_bytes(forged).map_err(fail)?;
        refused(
            ipc::physical_memory::open(&h, q.context(), d),
            "a forged physical size",
        )
        .map_err(fail)?;
    }
    drop(handle);
    Ok(())
}

/// One granule of physical memory made with `enable_ipc`, and its handle's bytes.
fn exported_physical(d: &Device, q: &Queue) -> Result<(PhysicalMem, Vec<u8>), Failed> {
    let g =
        sycl::virtual_mem::get_mem_granularity(d, q.context(), Default::default()).map_err(fail)?;
    let pm = PhysicalMem::new(
        d,
        q.context(),
        g,
        PhysicalMemProperties { enable_ipc: true },
    )
    .map_err(fail)?;
    let bytes = ipc::physical_memory::get(&pm).map_err(fail)?.to_vec();
    Ok((pm, bytes))
}

// ---- item 11: nobody can resize shared memory under its mappings

fn child_resize_attack(args: &[String]) -> ChildResult {
    let pid: u32 = args[0].parse().map_err(s)?;
    let mut report = Vec::new();
    for fd in args[1..].iter().map(|a| a.parse::<i32>().map_err(s)) {
        let stolen = steal_fd(pid, fd?)?;
        let shrink = rustix::fs::ftruncate(&stolen, 0);
        let grow = rustix::fs::ftruncate(&stolen, 1 << 30);
        let seal = rustix::fs::fcntl_add_seals(&stolen, rustix::fs::SealFlags::FUTURE_WRITE);
        if shrink.is_ok() || grow.is_ok() || seal.is_ok() {
            return Err(format!(
                "the exporter's memfd could be changed: shrink {shrink:?}, grow {grow:?}, \
                 seal {seal:?}"
            ));
        }
        report.push(format!("{shrink:?}/{grow:?}/{seal:?}"));
    }
    println!("refused: {}", report.join(" "));
    Ok(())
}

/// Item 11: a peer that takes the exporter's descriptor cannot shrink or grow the file, nor
/// seal it against writable mappings: memory, physical memory and event pages are sealed from
/// their creation. Before, an importer's `ftruncate(fd, 0)` made the exporter die of SIGBUS
/// reading its own buffer. (Refusing unsealed descriptors on import: the native CPU backend's
/// `ipc_refuses_unsealed_memfds`.)
pub fn peers_cannot_resize_shared_memory(d: &Device) -> R {
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 63)?;
    let mem = ipc::memory::get(&buf).map_err(fail)?.to_vec();
    // Physical memory where the device has it (not on OpenCL).
    let physical = if d.has(sycl::Aspect::ExtOneapiIpcPhysicalMemory) {
        Some(exported_physical(d, &q)?)
    } else {
        None
    };
    let ev = Event::new(
        q.context(),
        EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .map_err(fail)?;
    let eh = ipc::event::get(&ev).map_err(fail)?.to_vec();
    let mut args = vec![std::process::id().to_string()];
    for h in [Some(&mem), physical.as_ref().map(|(_, ph)| ph), Some(&eh)]
        .into_iter()
        .flatten()
    {
        // Every descriptor the handle names: the object's and the export ticket.
        args.extend(wire::fds(h).iter().map(i32::to_string));
    }
    let out = run_child("resize_attack", &args)?;
    print!("{out}");
    // The exporter still reads all of its memory.
    verify(&q, &buf, 63).map_err(fail)?;
    ev.wait().map_err(fail)?;
    Ok(())
}

// ---- item 13: put revokes exactly

fn child_open_revoked(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ctx = sycl::Context::default_for(&d).map_err(s)?;
    let e = refused(
        ipc::memory::open::<u32>(&handle_arg(&args[1])?, &ctx, &d),
        "a put handle",
    )?;
    println!("refused: {e}");
    // The live export opens with its own extent.
    let live = ipc::memory::open::<u32>(&handle_arg(&args[2])?, &ctx, &d).map_err(s)?;
    if live.len() != N - 256 {
        return Err(format!("the live export opened {} elements", live.len()));
    }
    Ok(())
}

fn child_reopen_after_put(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ctx = sycl::Context::default_for(&d).map_err(s)?;
    let handle = handle_arg(&args[1])?;
    // Opened once: this process keeps the checked ticket and reads it on the next open.
    drop(ipc::memory::open::<u32>(&handle, &ctx, &d).map_err(s)?);
    println!("opened");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(s)?; // the exporter has put now
    let e = refused(
        ipc::memory::open::<u32>(&handle, &ctx, &d),
        "a put handle, opened before",
    )?;
    println!("refused: {e}");
    Ok(())
}

/// Item 13: after `put`, the handle's bytes do not open, even when a later export of the same
/// memory (an interior range) got the same descriptor number; in this process and another.
/// Before, the put handle opened again, with its old, larger extent.
pub fn put_revokes_exactly(d: &Device) -> R {
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 64)?;
    let whole = ipc::memory::get(&buf).map_err(fail)?;
    let whole_bytes = whole.to_vec();
    ipc::memory::put(whole).map_err(fail)?;
    let tail = ipc::memory::get(&buf.range(256..).map_err(fail)?).map_err(fail)?;
    let again = Handle::from_bytes(whole_bytes.clone()).map_err(fail)?;
    refused(
        ipc::memory::open::<u32>(&again, q.context(), d),
        "a put handle",
    )
    .map_err(fail)?;
    check_eq!(
        ipc::memory::open::<u32>(&tail, q.context(), d)
            .map_err(fail)?
            .len(),
        N - 256
    );
    let out = run_child(
        "open_revoked",
        &[
            selector_for(d),
            hex::encode(&whole_bytes),
            hex::encode(tail.as_bytes()),
        ],
    )?;
    print!("{out}");
    // An importer that opened the handle before the put keeps its checked ticket: the put
    // reaches it too (the ticket says revoked).
    let again = ipc::memory::get(&buf).map_err(fail)?;
    let mut child = start_child(
        child_command(
            "reopen_after_put",
            &[selector_for(d), hex::encode(again.as_bytes())],
        )
        .stdin(Stdio::piped()),
        "opened",
    )?;
    ipc::memory::put(again).map_err(fail)?;
    writeln!(child.stdin.take().unwrap(), "put").map_err(fail)?;
    check!(
        child.wait().map_err(fail)?.success(),
        "a kept ticket outlived its put"
    );
    // Put twice, or put a handle made from bytes: refused.
    ipc::memory::put(tail).map_err(fail)?;
    refused(
        ipc::memory::put(Handle::from_bytes(whole_bytes).map_err(fail)?),
        "put of bytes",
    )
    .map_err(fail)?;
    Ok(())
}

// ---- item 14: the exporter's identity is checked after pidfd_open

fn child_impostor(args: &[String]) -> ChildResult {
    // Hold the exporter's memory file at the descriptor numbers its handle names (the object's
    // and the ticket's), as a process that reused the exporter's pid could by chance.
    let pid: u32 = args[0].parse().map_err(s)?;
    let memfd = steal_fd(pid, args[1].parse().map_err(s)?)?;
    for n in &args[1..] {
        let n: i32 = n.parse().map_err(s)?;
        // SAFETY: dup2 onto a number this process does not otherwise use (a fresh child).
        if unsafe { libc::dup2(std::os::fd::AsRawFd::as_raw_fd(&memfd), n) } != n {
            return Err(format!("dup2 to {n}: {}", std::io::Error::last_os_error()));
        }
    }
    println!("ready");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(s)?;
    Ok(())
}

/// Item 14: a handle whose pid names another process is refused by the export ticket, taken
/// from that process right after `pidfd_open` and before any other descriptor, even when that
/// process has the same start time and holds the exported file at the very descriptor number.
/// Before, only the file's inode was checked, so such an impostor passed. (Pids of 2^31 or
/// more: `sycl-backend`'s `impossible_pids_are_refused_before_any_system_call` and the handle
/// decoder's tests.)
pub fn exporter_identity_is_checked(d: &Device) -> R {
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 65)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let bytes = handle.to_vec();
    let fds = wire::fds(&bytes);
    let mut args = vec![std::process::id().to_string()];
    args.extend(fds.iter().map(i32::to_string));
    let mut child = start_child(
        child_command("impostor", &args).stdin(Stdio::piped()),
        "ready",
    )?;
    let impostor = child.id();
    let start = process_start_time(impostor).ok_or_else(|| fail("impostor start time"))?;
    let mut forged = wire::forge(&bytes, wire::PID, &impostor.to_le_bytes());
    forged = wire::forge(&forged, wire::START_TIME, &start.to_le_bytes());
    let h = Handle::from_bytes(forged).map_err(fail)?;
    let result = ipc::memory::open::<u32>(&h, q.context(), d);
    writeln!(child.stdin.take().unwrap(), "done").map_err(fail)?;
    check!(child.wait().map_err(fail)?.success());
    let e = refused(result, "a handle naming an impostor").map_err(fail)?;
    check!(e.message().contains("holds no live export"), "{e}");
    Ok(())
}

// ---- item 15: exporting in a loop holds one export

fn child_export_loop(args: &[String]) -> ChildResult {
    // In a process of its own: the descriptor count is process-wide, and tests of the suite
    // run in parallel threads.
    let d = device_from_selector(&args[0])?;
    let q = Queue::in_order(&d).map_err(s)?;
    let buf = sycl::malloc_device::<u32>(N, &q).map_err(s)?;
    let first = ipc::memory::get(&buf).map_err(s)?;
    let before = count_fds();
    let mut handles = Vec::new();
    for _ in 0..10_000 {
        let h = ipc::memory::get(&buf).map_err(s)?;
        if h.as_bytes() != first.as_bytes() {
            return Err("a get made another export".into());
        }
        handles.push(h);
    }
    let held = count_fds() - before;
    // Put all but one: still live; the last put revokes.
    let bytes = first.to_vec();
    for h in handles {
        ipc::memory::put(h).map_err(s)?;
    }
    let reopened = Handle::from_bytes(bytes.clone()).map_err(s)?;
    ipc::memory::open::<u32>(&reopened, q.context(), &d).map_err(s)?;
    ipc::memory::put(first).map_err(s)?;
    if !wire::fds(&bytes).is_empty() {
        let revoked = Handle::from_bytes(bytes).map_err(s)?;
        refused(
            ipc::memory::open::<u32>(&revoked, q.context(), &d),
            "an export after its last put",
        )?;
    }
    // get/put cycles leave nothing behind either.
    let before = count_fds();
    for _ in 0..1000 {
        ipc::memory::put(ipc::memory::get(&buf).map_err(s)?).map_err(s)?;
    }
    let cycled = count_fds() - before;
    let (mut phys, mut events) = (0, 0);
    if d.has(sycl::Aspect::ExtOneapiIpcPhysicalMemory) {
        let g = sycl::virtual_mem::get_mem_granularity(&d, q.context(), Default::default())
            .map_err(s)?;
        let pm = PhysicalMem::new(
            &d,
            q.context(),
            g,
            PhysicalMemProperties { enable_ipc: true },
        )
        .map_err(s)?;
        let keep = ipc::physical_memory::get(&pm).map_err(s)?;
        let before = count_fds();
        let many: Vec<_> = (0..1000)
            .map(|_| ipc::physical_memory::get(&pm))
            .collect::<sycl::Result<_>>()
            .map_err(s)?;
        phys = count_fds() - before;
        drop((many, keep));
    }
    if d.has(sycl::Aspect::ExtOneapiIpcEvent) {
        let ev = Event::new(
            q.context(),
            EventProperties {
                enable_ipc: true,
                enable_profiling: false,
            },
        )
        .map_err(s)?;
        let keep = ipc::event::get(&ev).map_err(s)?;
        let before = count_fds();
        let many: Vec<_> = (0..1000)
            .map(|_| ipc::event::get(&ev))
            .collect::<sycl::Result<_>>()
            .map_err(s)?;
        events = count_fds() - before;
        drop((many, keep));
    }
    println!(
        "descriptors added: 10,000 memory gets {held}, 1,000 get/put cycles {cycled}, 1,000 \
         physical gets {phys}, 1,000 event gets {events}"
    );
    if held + cycled + phys + events != 0 {
        return Err("exports held descriptors per get".into());
    }
    Ok(())
}

/// Item 15: 10,000 gets of the same memory (and 1,000 of a physical memory object and an
/// event) hold one export each, not one descriptor per get; the export stays live until the
/// last of them is put. Before, 10,000 gets held 10,000 descriptors.
pub fn exporting_in_a_loop_holds_one_export(d: &Device) -> R {
    let out = run_child("export_loop", &[selector_for(d)])?;
    print!("{out}");
    Ok(())
}

// ---- item 12: the rank channel talks only to allowed users

/// The uid the channel test runs its other-user children as (`nobody` on Debian; no account
/// is needed for a uid).
const OTHER_UID: u32 = 65534;

fn child_intruder(args: &[String]) -> ChildResult {
    // An attacker does not care whose listener it is.
    let ch = Channel::connect_with(&args[0], PeerPolicy::users([0])).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(10)))
        .map_err(s)?;
    match ch.recv_handle() {
        Ok(h) => Err(format!("the intruder received a handle: {h:?}")),
        Err(e) => {
            println!("intruder got nothing: {e}");
            Ok(())
        }
    }
}

fn child_squatter(args: &[String]) -> ChildResult {
    let listener = Listener::bind_with(&args[0], PeerPolicy::users([0])).map_err(s)?;
    println!("bound");
    match listener.accept(Some(Duration::from_secs(10))) {
        Ok(ch) => match ch.recv() {
            Ok(m) => Err(format!("the squatter received {} bytes", m.len())),
            Err(_) => {
                println!("squatter got nothing");
                Ok(())
            }
        },
        Err(_) => {
            println!("squatter got no connection");
            Ok(())
        }
    }
}

fn child_allowed_user(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect_with(&args[1], PeerPolicy::users([0])).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(s)?;
    let handle = ch.recv_handle().map_err(s)?;
    let q = Queue::in_order(&d).map_err(s)?;
    let mem = ipc::memory::open::<u32>(&handle, q.context(), &d).map_err(s)?;
    verify(&q, &mem, 67)?;
    q.fill(&mem, 68u32, &[]).map_err(s)?.wait().map_err(s)?;
    ch.send(b"done").map_err(s)
}

/// A command running this test binary as [`OTHER_UID`], from a copy readable by that user.
fn as_other_user(role: &str, args: &[String]) -> Result<(std::process::Command, Copy), Failed> {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("sycl-rs-uid-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(fail)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    let exe = dir.join("ipc-test");
    std::fs::copy(std::env::current_exe().map_err(fail)?, &exe).map_err(fail)?;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).map_err(fail)?;
    let mut cmd = std::process::Command::new(&exe);
    cmd.env(sycl_tests::CHILD_ROLE_ENV, role)
        .args(args)
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .current_dir(&dir)
        .stdout(Stdio::piped());
    Ok((cmd, Copy(dir)))
}

/// Removes the copied binary.
struct Copy(std::path::PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Item 12: a process of another user can neither take a rank's handle by connecting to its
/// listener, nor receive one by binding the name first; an allow-list lets a chosen user in.
/// Before, a connection of any local user was accepted and received the descriptors (then read
/// and overwrote the memory). Runs as root only (it switches a child to another uid).
pub fn channel_refuses_other_users() -> R {
    if !rustix::process::geteuid().is_root() {
        println!("skipped: switching a child to another uid needs root (CI runs as root)");
        return Ok(());
    }
    let d = Device::native_cpu();
    let (q, buf) = exporter_buffer(&d, 67)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;

    // An intruder connects: refused (closed at once), it receives nothing, and accept goes on
    // waiting, here for this process, which connects once the intruder has given up.
    let listener = Listener::bind_unique().map_err(fail)?;
    let (mut cmd, _copy) = as_other_user("intruder", &[listener.name().to_string()])?;
    let child = sycl_tests::spawn(&mut cmd)?;
    let name = listener.name().to_string();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        (out, Channel::connect(&name))
    });
    let ch = listener
        .accept(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    check_eq!(ch.peer_credentials().map_err(fail)?.pid, std::process::id());
    let (out, me) = waiter.join().map_err(|_| fail("waiter panicked"))?;
    let out = out.map_err(fail)?;
    me.map_err(fail)?;
    let said = String::from_utf8_lossy(&out.stdout);
    check!(
        out.status.success() && said.contains("intruder got nothing"),
        "intruder: {said}"
    );

    // A squatter binds the name first: the rank refuses to connect to it.
    let name = format!("sycl-rs-squat-{}", std::process::id());
    let (mut cmd, _copy) = as_other_user("squatter", std::slice::from_ref(&name))?;
    let mut child = start_child(&mut cmd, "bound")?;
    let err = Channel::connect(&name)
        .err()
        .ok_or_else(|| fail("connected to another user's listener"))?;
    check_eq!(err.code(), Errc::Invalid);
    check!(err.message().contains(&OTHER_UID.to_string()), "{err}");
    check!(child.wait().map_err(fail)?.success());

    // An allow-listed user gets in, opens the memory and writes it.
    let listener = Listener::bind_unique_with(PeerPolicy::users([OTHER_UID])).map_err(fail)?;
    let (mut cmd, _copy) =
        as_other_user("allowed_user", &[selector_for(&d), listener.name().into()])?;
    let child = sycl_tests::spawn(&mut cmd)?;
    let ch = listener
        .accept(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    check_eq!(ch.peer_credentials().map_err(fail)?.uid, OTHER_UID);
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    ch.send_handle(&handle).map_err(fail)?;
    check_eq!(ch.recv().map_err(fail)?, b"done".to_vec());
    let out = child.wait_with_output().map_err(fail)?;
    check!(out.status.success());
    check!(q.to_vec(&buf).map_err(fail)?.iter().all(|&x| x == 68));
    Ok(())
}

/// The child roles of this module.
pub const ROLES: &[(&str, sycl_tests::ChildRole)] = &[
    ("open_forged", child_open_forged),
    ("resize_attack", child_resize_attack),
    ("open_revoked", child_open_revoked),
    ("reopen_after_put", child_reopen_after_put),
    ("export_loop", child_export_loop),
    ("impostor", child_impostor),
    ("intruder", child_intruder),
    ("squatter", child_squatter),
    ("allowed_user", child_allowed_user),
];

// ---- hostile descriptors behind a valid export ticket

/// An export of this process whose memory descriptor is swapped for `fd`, with the payload's
/// inode, device and size rewritten to match it (the export ticket stays valid): what a peer
/// that controls the descriptors it sends can make.
fn with_hostile_memfd(bytes: &[u8], fd: &OwnedFd, claimed: u64) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    let st = rustix::fs::fstat(fd).expect("fstat of our own descriptor");
    let fd_no = (fd.as_raw_fd() as u32).to_le_bytes();
    let mut b = wire::forge(bytes, wire::FDS, &fd_no);
    // Payload (native CPU memory format): tag, inode, device, size, offset, descriptor.
    let p = wire::HEADER_LEN;
    b = wire::forge(&b, p + 4, &(st.st_ino as u64).to_le_bytes());
    b = wire::forge(&b, p + 12, &(st.st_dev as u64).to_le_bytes());
    b = wire::forge(&b, p + 20, &claimed.to_le_bytes());
    b = wire::forge(&b, p + 36, &fd_no);
    wire::forge(&b, wire::OBJECT_SIZE, &claimed.to_le_bytes())
}

/// Issue 33 item 5, for every backend that shares memory as memfds: behind a genuine export
/// ticket, a descriptor that is no sealed memfd (unsealed, sealed only in part, sealed against
/// writes, a regular file) or that holds less than the payload claims is refused with
/// `Errc::Invalid`; mapping it would let the peer fault this process (SIGBUS) by shrinking it.
pub fn hostile_memfds_are_refused(d: &Device) -> R {
    use rustix::fs::{MemfdFlags, SealFlags};
    let q = Queue::in_order(d).map_err(fail)?;
    let buf = sycl::malloc_device::<u8>(4096, &q).map_err(fail)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let bytes = handle.to_vec();
    let page = 4096u64;
    let ours = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
    let cases: [(&str, Option<SealFlags>, u64); 6] = [
        ("unsealed", None, page),
        (
            "sealed against shrinking only",
            Some(SealFlags::SHRINK),
            page,
        ),
        (
            "not sealed against sealing",
            Some(SealFlags::SHRINK | SealFlags::GROW),
            page,
        ),
        ("sealed against writes", Some(ours | SealFlags::WRITE), page),
        ("shorter than claimed", Some(ours), 1 << 20),
        (
            "sealed against future writes",
            Some(ours | SealFlags::FUTURE_WRITE),
            page,
        ),
    ];
    for (what, seals, claimed) in cases {
        let fd =
            rustix::fs::memfd_create("hostile", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
                .map_err(fail)?;
        rustix::fs::ftruncate(&fd, page).map_err(fail)?;
        if let Some(seals) = seals {
            rustix::fs::fcntl_add_seals(&fd, seals).map_err(fail)?;
        }
        let forged = Handle::from_bytes(with_hostile_memfd(&bytes, &fd, claimed)).map_err(fail)?;
        let e = refused(ipc::memory::open::<u8>(&forged, q.context(), d), what).map_err(fail)?;
        println!("{what}: {e}");
    }
    let file = OwnedFd::from(std::fs::File::open("/proc/self/exe").map_err(fail)?);
    let forged = Handle::from_bytes(with_hostile_memfd(&bytes, &file, page)).map_err(fail)?;
    refused(
        ipc::memory::open::<u8>(&forged, q.context(), d),
        "a regular file",
    )
    .map_err(fail)?;
    // The genuine handle still opens.
    check_eq!(
        ipc::memory::open::<u8>(&handle, q.context(), d)
            .map_err(fail)?
            .len(),
        4096
    );
    Ok(())
}
