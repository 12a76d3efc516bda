//! Multi-process IPC suite: real child processes (this binary re-executed in a child role)
//! share memory, physical memory and events with the test process.

mod soundness;

use std::io::BufRead;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libtest_mimic::Failed;
use sycl::ipc::{
    self,
    transport::{Channel, Listener},
    FdAccess, Handle,
};
use sycl::{Aspect, BackendKind, Device, Errc, Event, EventProperties, Queue};
use sycl_tests::{
    check, check_eq, child_command, device_from_selector, fail, run_child, run_suite_where,
    selector_for, start_child, DeviceTest, GlobalTest,
};

pub(crate) type R = Result<(), Failed>;
pub(crate) type ChildResult = Result<(), String>;

pub(crate) const N: usize = 1 << 18;

pub(crate) fn value(i: usize, salt: u32) -> u32 {
    (i as u32).wrapping_mul(2654435761).wrapping_add(salt)
}

pub(crate) fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The handle a parent passed on a child's command line (hex).
pub(crate) fn handle_arg(arg: &str) -> Result<Handle, String> {
    Handle::from_bytes(hex::decode(arg).map_err(s)?).map_err(s)
}

/// Starts this binary as child `role` with arguments `d`'s selector, a fresh channel's name and
/// `extra`, and accepts its connection on that channel.
pub(crate) fn child_on_channel(
    role: &str,
    d: &Device,
    extra: &[String],
    stdout: Stdio,
) -> Result<(std::process::Child, Channel), Failed> {
    let listener = Listener::bind_unique().map_err(fail)?;
    let mut args = vec![selector_for(d), listener.name().to_string()];
    args.extend_from_slice(extra);
    let child = child_command(role, &args)
        .stdout(stdout)
        .spawn()
        .map_err(fail)?;
    let ch = listener
        .accept(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    Ok((child, ch))
}

/// Whether `d` shares memory as sealed memfds, with the guarantees that gives (exports outlive
/// the exporter, `put` revokes, exporter identity checked, descriptors on the channel): the
/// native CPU backend, and OpenCL devices with fine-grained system SVM.
pub(crate) fn memfd_memory(d: &Device) -> bool {
    d.has(Aspect::ExtOneapiIpcMemory)
        && matches!(d.backend(), BackendKind::NativeCpu | BackendKind::OpenCl)
}

/// Whether `d`'s IPC events are shared pages (native CPU, every OpenCL device): signal counts,
/// dead peers noticed.
pub(crate) fn page_events(d: &Device) -> bool {
    d.has(Aspect::ExtOneapiIpcEvent)
        && matches!(d.backend(), BackendKind::NativeCpu | BackendKind::OpenCl)
}

pub(crate) fn allow_children() -> R {
    // pidfd_getfd from a child needs ptrace rights over us under Yama; grant them explicitly.
    ipc::allow_fd_access_from(FdAccess::AnyProcess).map_err(fail)
}

pub(crate) fn exporter_buffer(d: &Device, salt: u32) -> Result<(Queue, sycl::Usm<u32>), Failed> {
    let q = Queue::in_order(d).map_err(fail)?;
    let buf = sycl::malloc_device::<u32>(N, &q).map_err(fail)?;
    q.write(&buf, &(0..N).map(|i| value(i, salt)).collect::<Vec<_>>())
        .map_err(fail)?;
    Ok((q, buf))
}

pub(crate) fn verify(q: &Queue, mem: &impl sycl::AsUsmRange<u32>, salt: u32) -> Result<(), String> {
    let got = q.to_vec(mem).map_err(s)?;
    match got.iter().enumerate().find(|(i, &v)| v != value(*i, salt)) {
        None => Ok(()),
        Some((i, v)) => Err(format!(
            "element {i} is {v:#x}, expected {:#x}",
            value(i, salt)
        )),
    }
}

// ---- memory through pidfd_getfd (handle bytes on the command line)

fn child_open_verify_write(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let handle = handle_arg(&args[1])?;
    let (read_salt, write_salt): (u32, u32) =
        (args[2].parse().map_err(s)?, args[3].parse().map_err(s)?);
    let q = Queue::in_order(&d).map_err(s)?;
    let t = Instant::now();
    let mem = ipc::memory::open::<u32>(&handle, q.context(), &d).map_err(s)?;
    println!("open_us={}", t.elapsed().as_micros());
    if mem.len() != N {
        return Err(format!("opened {} elements, expected {N}", mem.len()));
    }
    verify(&q, &mem, read_salt)?;
    q.write(
        &mem,
        &(0..N).map(|i| value(i, write_salt)).collect::<Vec<_>>(),
    )
    .map_err(s)?;
    ipc::memory::close(mem).map_err(s)
}

fn memory_round_trip_pidfd(d: &Device) -> R {
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 1)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    run_child(
        "open_verify_write",
        &[
            selector_for(d),
            hex::encode(handle.as_bytes()),
            "1".into(),
            "2".into(),
        ],
    )?;
    verify(&q, &buf, 2).map_err(fail)?;
    ipc::memory::put(handle).map_err(fail)
}

// ---- memory through the rank channel (descriptors by SCM_RIGHTS)

fn child_channel_open(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect(&args[1]).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(s)?;
    let handle = ch.recv_handle().map_err(s)?;
    if !handle.carries_descriptors() && memfd_memory(&d) {
        return Err("handle arrived without descriptors".into());
    }
    let q = Queue::in_order(&d).map_err(s)?;
    let mem = ipc::memory::open::<u32>(&handle, q.context(), &d).map_err(s)?;
    verify(&q, &mem, 10)?;
    q.write(&mem, &(0..N).map(|i| value(i, 11)).collect::<Vec<_>>())
        .map_err(s)?;
    drop(mem); // closes
    ch.send(b"done").map_err(s)
}

fn memory_round_trip_channel(d: &Device) -> R {
    let (q, buf) = exporter_buffer(d, 10)?;
    let (mut child, ch) = child_on_channel("channel_open", d, &[], Stdio::inherit())?;
    ch.set_recv_timeout(Some(Duration::from_secs(60)))
        .map_err(fail)?;
    ch.send_handle(&ipc::memory::get(&buf).map_err(fail)?)
        .map_err(fail)?;
    let reply = ch.recv();
    let status = child.wait().map_err(fail)?;
    check!(status.success(), "child failed: {status}");
    check_eq!(reply.map_err(fail)?, b"done".to_vec());
    verify(&q, &buf, 11).map_err(fail)
}

// ---- message passing across processes through system-scope atomics (issue 31, item 4)

/// Work-items of the cross-process litmus test: `buf` holds their flags, then their data.
const MP_ITEMS: usize = 256;

/// Each work-item writes its data, then release-stores its flag at system scope.
#[sycl::kernel]
fn mp_writer(buf: &mut [u32], round: u32) {
    let i = global_id(0);
    let n = global_range(0);
    buf[n + i] = round.wrapping_mul(7919) ^ (i as u32);
    atomic_store(buf, i, round, Ordering::Release, MemoryScope::System);
}

/// Each work-item spins (boundedly) on its flag with system-scope acquire loads, then reads the
/// data: `seen` gets 1 (the data came with the flag), 2 (a violation) or 0 (never came).
#[sycl::kernel]
fn mp_reader(buf: &[u32], seen: &mut [u32], round: u32) {
    let i = global_id(0);
    let n = global_range(0);
    let mut spins = 0u32;
    let mut f = atomic_load(buf, i, Ordering::Acquire, MemoryScope::System);
    while f != round && spins < 50000000 {
        spins += 1;
        f = atomic_load(buf, i, Ordering::Acquire, MemoryScope::System);
    }
    let data = buf[n + i];
    seen[i] = if f != round {
        0u32
    } else if data == round.wrapping_mul(7919) ^ (i as u32) {
        1u32
    } else {
        2u32
    };
}

fn child_mp_writer(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect(&args[1]).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(60)))
        .map_err(s)?;
    let handle = ch.recv_handle().map_err(s)?;
    let q = Queue::in_order(&d).map_err(s)?;
    let buf = ipc::memory::open::<u32>(&handle, q.context(), &d).map_err(s)?;
    // Round 0 (the flags stay 0) builds the kernel before the parent's readers start to spin:
    // a first build slower than their bounded spin failed round 1 as "never saw it".
    q.parallel_for(sycl::Range::d1(MP_ITEMS), &[], mp_writer(&buf, 0))
        .map_err(s)?
        .wait()
        .map_err(s)?;
    ch.send(b"ready").map_err(s)?;
    loop {
        let msg = ch.recv().map_err(s)?;
        let Ok(round) = <[u8; 4]>::try_from(&msg[..]) else {
            return Ok(());
        };
        let round = u32::from_le_bytes(round);
        q.parallel_for(sycl::Range::d1(MP_ITEMS), &[], mp_writer(&buf, round))
            .map_err(s)?
            .wait()
            .map_err(s)?;
        ch.send(b"wrote").map_err(s)?;
    }
}

/// A kernel in a child writes data and release-stores flags at system scope into memory the
/// parent exported; a kernel in the parent, running at the same time, acquire-loads the flags
/// and must see the data with each.
fn memory_message_passing(d: &Device) -> R {
    use sycl::kernel::{MemoryScope, Ordering};
    let orders = d.atomic_memory_order_capabilities();
    if !orders.contains(&Ordering::AcqRel)
        || !d
            .atomic_memory_scope_capabilities()
            .contains(&MemoryScope::System)
    {
        // Such a device must refuse the kernels, never run them weaker.
        let q = Queue::in_order(d).map_err(fail)?;
        let buf = sycl::malloc_device::<u32>(2 * MP_ITEMS, &q).map_err(fail)?;
        let e = q
            .parallel_for(sycl::Range::d1(MP_ITEMS), &[], mp_writer(&buf, 1))
            .err()
            .ok_or_else(|| fail("a system-scope release store launched on a device without it"))?;
        check_eq!(e.code(), Errc::FeatureNotSupported, "the refusal's code");
        println!("    {}: refused as it should be: {e}", d.name());
        return Ok(());
    }
    let q = Queue::in_order(d).map_err(fail)?;
    let buf = sycl::malloc_device::<u32>(2 * MP_ITEMS, &q).map_err(fail)?;
    q.fill(&buf, 0u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    let seen = sycl::malloc_device::<u32>(MP_ITEMS, &q).map_err(fail)?;
    let (mut child, ch) = child_on_channel("mp_writer", d, &[], Stdio::inherit())?;
    ch.set_recv_timeout(Some(Duration::from_secs(120)))
        .map_err(fail)?;
    ch.send_handle(&ipc::memory::get(&buf).map_err(fail)?)
        .map_err(fail)?;
    check_eq!(ch.recv().map_err(fail)?, b"ready".to_vec());
    let mut observed = 0;
    for round in 1..=5u32 {
        let reader = q
            .parallel_for(
                sycl::Range::d1(MP_ITEMS),
                &[],
                mp_reader(&buf, &seen, round),
            )
            .map_err(fail)?;
        ch.send(&round.to_le_bytes()).map_err(fail)?;
        check_eq!(ch.recv().map_err(fail)?, b"wrote".to_vec());
        reader.wait().map_err(fail)?;
        let got = q.to_vec(&seen).map_err(fail)?;
        check!(
            got.iter().all(|&v| v == 1),
            "round {round}: a reader saw its flag without the data, or never saw it: {:?}",
            &got[..16]
        );
        observed += got.len();
    }
    ch.send(b"end").map_err(fail)?;
    let status = child.wait().map_err(fail)?;
    check!(status.success(), "child failed: {status}");
    println!(
        "    {}: {observed} flags passed with their data across processes",
        d.name()
    );
    Ok(())
}

// ---- N opens, N closes; open in the exporter itself

fn child_open_many(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let handle = handle_arg(&args[1])?;
    let q = Queue::in_order(&d).map_err(s)?;
    let opened: Vec<_> = (0..5)
        .map(|_| ipc::memory::open::<u32>(&handle, q.context(), &d))
        .collect::<Result<_, _>>()
        .map_err(s)?;
    for m in &opened {
        verify(&q, m, 20)?;
    }
    let mut it = opened.into_iter();
    ipc::memory::close(it.next().unwrap()).map_err(s)?;
    ipc::memory::close(it.next().unwrap()).map_err(s)?;
    // The remaining three are still valid after two closes, then close on drop.
    for m in it {
        verify(&q, &m, 20)?;
    }
    Ok(())
}

fn memory_n_opens(d: &Device) -> R {
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 20)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    run_child(
        "open_many",
        &[selector_for(d), hex::encode(handle.as_bytes())],
    )?;
    verify(&q, &buf, 20).map_err(fail)
}

fn memory_open_in_exporter(d: &Device) -> R {
    let (q, buf) = exporter_buffer(d, 30)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let again = Handle::from_bytes(handle.to_vec()).map_err(fail)?;
    let a = ipc::memory::open::<u32>(&again, q.context(), d).map_err(fail)?;
    let b = ipc::memory::open::<u32>(&handle, q.context(), d).map_err(fail)?;
    verify(&q, &a, 30).map_err(fail)?;
    q.fill(&b, 0x77u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    check!(
        q.to_vec(&buf).map_err(fail)?.iter().all(|&x| x == 0x77),
        "write through the opened copy is not visible"
    );
    ipc::memory::close(a).map_err(fail)?;
    ipc::memory::close(b).map_err(fail)?;
    // Interior pointer: the importer sees from the offset to the end.
    let tail = buf.range(1000..).map_err(fail)?;
    let h = ipc::memory::get(&tail).map_err(fail)?;
    let opened = ipc::memory::open::<u32>(&h, q.context(), d).map_err(fail)?;
    check_eq!(opened.len(), N - 1000);
    q.fill(&opened, 5u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    let all = q.to_vec(&buf).map_err(fail)?;
    check!(all[999] == 0x77 && all[1000] == 5 && all[N - 1] == 5);
    // close rejects memory that was not opened.
    check_eq!(ipc::memory::close(buf).unwrap_err().code(), Errc::Invalid);
    Ok(())
}

// ---- put before and after the importer opened

fn child_open_after_put(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let handle = handle_arg(&args[1])?;
    match ipc::memory::open::<u32>(&handle, &sycl::Context::default_for(&d).map_err(s)?, &d) {
        Err(e) if e.code() == Errc::Invalid => {
            println!("refused: {e}");
            Ok(())
        }
        Err(e) => Err(format!("wrong error for a put handle: {e}")),
        Ok(m) if !memfd_memory(&d) => {
            // CUDA keeps no per-handle resources, so its put releases nothing; the memory
            // must then still be the exporter's data.
            let q = Queue::in_order(&d).map_err(s)?;
            verify(&q, &m, 40).map(|_| println!("opened"))
        }
        Ok(_) => Err(format!("{} opened a handle after put", d.backend())),
    }
}

fn child_hold_until_told(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let handle = handle_arg(&args[1])?;
    let q = Queue::in_order(&d).map_err(s)?;
    let mem = ipc::memory::open::<u32>(&handle, q.context(), &d).map_err(s)?;
    println!("opened");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(s)?; // the exporter has put now
    verify(&q, &mem, 40)?;
    println!("verified");
    Ok(())
}

fn memory_put_lifetime(d: &Device) -> R {
    allow_children()?;
    let (_q, buf) = exporter_buffer(d, 40)?;
    // Put after the importer opened: the import stays valid.
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let mut child = start_child(
        child_command(
            "hold_until_told",
            &[selector_for(d), hex::encode(handle.as_bytes())],
        )
        .stdin(Stdio::piped()),
        "opened",
    )?;
    ipc::memory::put(handle).map_err(fail)?;
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "go").map_err(fail)?;
    let status = child.wait().map_err(fail)?;
    check!(
        status.success(),
        "importer lost its memory after put: {status}"
    );
    // Put before the importer opened: the bytes are dead (an error, never a crash).
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let bytes = hex::encode(handle.as_bytes());
    ipc::memory::put(handle).map_err(fail)?;
    run_child("open_after_put", &[selector_for(d), bytes])?;
    Ok(())
}

// ---- the importer keeps memory after the exporter frees and exits (native CPU promises it)

fn child_export_then_exit(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect(&args[1]).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(s)?;
    let q = Queue::in_order(&d).map_err(s)?;
    let buf = sycl::malloc_device::<u32>(N, &q).map_err(s)?;
    q.write(&buf, &(0..N).map(|i| value(i, 50)).collect::<Vec<_>>())
        .map_err(s)?;
    ch.send_handle(&ipc::memory::get(&buf).map_err(s)?)
        .map_err(s)?;
    if ch.recv().map_err(s)? != b"opened" {
        return Err("unexpected reply".into());
    }
    drop(buf); // free
    std::process::exit(0);
}

fn memory_survives_exporter_exit(d: &Device) -> R {
    let (mut child, ch) = child_on_channel("export_then_exit", d, &[], Stdio::inherit())?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    let handle = ch.recv_handle().map_err(fail)?;
    let q = Queue::in_order(d).map_err(fail)?;
    let mem = ipc::memory::open::<u32>(&handle, q.context(), d).map_err(fail)?;
    ch.send(b"opened").map_err(fail)?;
    check!(child.wait().map_err(fail)?.success());
    verify(&q, &mem, 50).map_err(fail)?;
    // And a handle of a dead exporter can no longer be opened.
    let err = ipc::memory::open::<u32>(
        &Handle::from_bytes(handle.to_vec()).map_err(fail)?,
        q.context(),
        d,
    )
    .unwrap_err();
    check_eq!(err.code(), Errc::Invalid);
    check!(err.message().contains("no longer exists"), "{err}");
    Ok(())
}

// ---- events

/// A child's side of a parent that sends a memory handle then an event handle: its channel
/// (args: device selector, channel name), a queue on its device, and both opened there.
fn open_memory_and_event(
    args: &[String],
) -> Result<(Channel, Queue, sycl::Usm<u32>, Event), String> {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect(&args[1]).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(60)))
        .map_err(s)?;
    let mem_handle = ch.recv_handle().map_err(s)?;
    let ev_handle = ch.recv_handle().map_err(s)?;
    let q = Queue::in_order(&d).map_err(s)?;
    let mem = ipc::memory::open::<u32>(&mem_handle, q.context(), &d).map_err(s)?;
    let ready = ipc::event::open(&ev_handle, q.context()).map_err(s)?;
    Ok((ch, q, mem, ready))
}

fn child_event_consumer(args: &[String]) -> ChildResult {
    let (ch, q, mem, ready) = open_memory_and_event(args)?;
    // The exporter signalled the event behind a slow fill before sending it: waiting must
    // cover the fill.
    ready.wait().map_err(s)?;
    verify(&q, &mem, 60)?;
    // Now the other direction: compute in place, signal through the same event, tell the exporter.
    q.write(&mem, &(0..N).map(|i| value(i, 61)).collect::<Vec<_>>())
        .map_err(s)?;
    q.enqueue_signal_event(&ready).map_err(s)?;
    ch.send(b"signalled").map_err(s)?;
    q.wait().map_err(s)
}

fn event_round_trip(d: &Device) -> R {
    event_round_trip_with(d, d)
}

/// The event round trip with the consumer on `peer` (another backend for `cross_backend`).
fn event_round_trip_with(d: &Device, peer: &Device) -> R {
    let q = Queue::in_order(d).map_err(fail)?;
    let buf = sycl::malloc_device::<u32>(N, &q).map_err(fail)?;
    let ev = Event::new_for_queue(
        &q,
        EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .map_err(fail)?;
    check!(ev.ipc_enabled());
    let (mut child, ch) = child_on_channel("event_consumer", peer, &[], Stdio::inherit())?;
    ch.set_recv_timeout(Some(Duration::from_secs(60)))
        .map_err(fail)?;
    // Slow producer: host task, then the fill, then the signal.
    q.host_task(&[], || std::thread::sleep(Duration::from_millis(200)))
        .map_err(fail)?;
    let host: Vec<u32> = (0..N).map(|i| value(i, 60)).collect();
    let staging = sycl::malloc_host::<u32>(N, &q).map_err(fail)?;
    q.write(&staging, &host).map_err(fail)?;
    q.host_task(&[], || std::thread::sleep(Duration::from_millis(100)))
        .map_err(fail)?;
    q.copy(&staging, &buf, &[]).map_err(fail)?;
    q.enqueue_signal_event(&ev).map_err(fail)?;
    ch.send_handle(&ipc::memory::get(&buf).map_err(fail)?)
        .map_err(fail)?;
    ch.send_handle(&ipc::event::get(&ev).map_err(fail)?)
        .map_err(fail)?;
    check_eq!(ch.recv().map_err(fail)?, b"signalled".to_vec());
    ev.wait().map_err(fail)?;
    verify(&q, &buf, 61).map_err(fail)?;
    check!(child.wait().map_err(fail)?.success());
    // An event made without enable_ipc cannot be exported.
    let plain = Event::new_for_queue(&q, EventProperties::default()).map_err(fail)?;
    check_eq!(ipc::event::get(&plain).unwrap_err().code(), Errc::Invalid);
    Ok(())
}

fn child_event_then_die(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect(&args[1]).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(s)?;
    let q = Queue::in_order(&d).map_err(s)?;
    let ev = Event::new_for_queue(
        &q,
        EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .map_err(s)?;
    // The signal sits behind a task that never ends: the event stays pending.
    q.host_task(&[], || std::thread::sleep(Duration::from_secs(3600)))
        .map_err(s)?;
    q.enqueue_signal_event(&ev).map_err(s)?;
    ch.send_handle(&ipc::event::get(&ev).map_err(s)?)
        .map_err(s)?;
    let _ = ch.recv();
    std::process::exit(0); // dies with the signal pending
}

/// A child (`event_then_die`) that exported an event whose signal it owes and will never give,
/// its channel (send "die" to end it), and the event opened here on a queue of `d`.
fn event_of_a_dying_child(
    d: &Device,
) -> Result<(std::process::Child, Channel, Queue, Event), Failed> {
    let (child, ch) = child_on_channel("event_then_die", d, &[], Stdio::inherit())?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    let handle = ch.recv_handle().map_err(fail)?;
    let q = Queue::in_order(d).map_err(fail)?;
    let ev = ipc::event::open(&handle, q.context()).map_err(fail)?;
    Ok((child, ch, q, ev))
}

fn event_exporter_death(d: &Device) -> R {
    let (mut child, ch, _q, ev) = event_of_a_dying_child(d)?;
    check!(
        !ev.wait_timeout(Duration::from_millis(50)).map_err(fail)?,
        "a pending event reported complete"
    );
    ch.send(b"die").map_err(fail)?;
    check!(child.wait().map_err(fail)?.success());
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ev.wait());
    });
    let outcome = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| fail("wait on an event of a dead exporter hung for 10 s"))?;
    let err = outcome
        .err()
        .ok_or_else(|| fail("wait succeeded although the signaller died"))?;
    check_eq!(err.code(), Errc::Event);
    println!("dead exporter noticed after {:?}: {err}", started.elapsed());
    Ok(())
}

// ---- a queue that waits for an IPC event (issue 33 item 2)

fn child_queue_waiter(args: &[String]) -> ChildResult {
    let (_ch, q, mem, ready) = open_memory_and_event(args)?;
    let local = sycl::malloc_device::<u32>(N, &q).map_err(s)?;
    // The copy is enqueued at once; only the queue waits for the exporter's signal, which
    // follows the exporter's write of salt 71 (its memory holds salt 70 until then).
    let t = Instant::now();
    q.enqueue_wait_events(&[&ready]).map_err(s)?;
    q.copy(&mem, &local, &[]).map_err(s)?;
    println!("enqueued_after_ms={}", t.elapsed().as_millis());
    q.wait().map_err(s)?;
    println!("done_after_ms={}", t.elapsed().as_millis());
    verify(&q, &local, 71)
}

/// `enqueue_wait_events` on an IPC event holds the queue's later commands back until the
/// peer's signal, which comes 300 ms after they were enqueued (a copy that ran at once would
/// read the old data).
fn event_queue_wait(d: &Device) -> R {
    let (q, buf) = exporter_buffer(d, 70)?;
    let ev = Event::new_for_queue(
        &q,
        EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .map_err(fail)?;
    // Pending from here on: the signal sits behind a host task that waits for the go-ahead.
    let (go, gate) = std::sync::mpsc::channel::<()>();
    q.host_task(&[], move || {
        let _ = gate.recv_timeout(Duration::from_secs(60));
    })
    .map_err(fail)?;
    let host: Vec<u32> = (0..N).map(|i| value(i, 71)).collect();
    let staging = sycl::malloc_host::<u32>(N, &q).map_err(fail)?;
    staging
        .view()
        .map_err(fail)?
        .copy_from_slice(&host)
        .map_err(fail)?;
    q.copy(&staging, &buf, &[]).map_err(fail)?;
    q.enqueue_signal_event(&ev).map_err(fail)?;
    let (child, ch) = child_on_channel("queue_waiter", d, &[], Stdio::piped())?;
    ch.send_handle(&ipc::memory::get(&buf).map_err(fail)?)
        .map_err(fail)?;
    ch.send_handle(&ipc::event::get(&ev).map_err(fail)?)
        .map_err(fail)?;
    std::thread::sleep(Duration::from_millis(300));
    let _ = go.send(());
    let out = child.wait_with_output().map_err(fail)?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    check!(out.status.success(), "the waiting child failed: {text}");
    ev.wait().map_err(fail)?;
    Ok(())
}

/// A queue that waits for an IPC event whose signaller dies with the signal owed does not hang:
/// the commands behind the wait fail (`Errc::Event`), or, where the wait happens at submission
/// (PoCL), the submission does.
fn event_queue_wait_dead_signaller(d: &Device) -> R {
    let (mut child, ch, q, ev) = event_of_a_dying_child(d)?;
    let buf = sycl::malloc_device::<u32>(1024, &q).map_err(fail)?;
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let outcome = q
            .enqueue_wait_events(&[&ev])
            .and_then(|()| q.fill(&buf, 5u32, &[]))
            .and_then(|filled| filled.wait());
        let _ = tx.send(outcome);
        // Dropping the queue must not hang either.
        drop(q);
    });
    std::thread::sleep(Duration::from_millis(100));
    ch.send(b"die").map_err(fail)?;
    check!(child.wait().map_err(fail)?.success());
    let started = Instant::now();
    let outcome = rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| fail("a queue waiting on the event of a dead signaller hung for 10 s"))?;
    let err = outcome
        .err()
        .ok_or_else(|| fail("the commands ran although the signaller died"))?;
    check_eq!(err.code(), Errc::Event, "{err}");
    println!(
        "dead signaller noticed after {:?}: {err}",
        started.elapsed()
    );
    waiter
        .join()
        .map_err(|_| fail("the waiting thread panicked"))?;
    Ok(())
}

// ---- across backends (issue 33 item 3)

/// The device of the other backend that shares memory as memfds (native CPU for an OpenCL
/// device, an OpenCL device with fine-grained system SVM for the native CPU one).
pub(crate) fn memfd_partner(d: &Device) -> Option<Device> {
    Device::all()
        .into_iter()
        .find(|o| o.backend() != d.backend() && memfd_memory(o))
}

/// Memory and an event exported on one backend open and work on the other: the child verifies
/// and rewrites the memory on its device and signals the event from its queue; this process
/// waits for that signal and reads what the child wrote.
fn cross_backend(d: &Device) -> R {
    let peer = memfd_partner(d).ok_or_else(|| fail("no device of another memfd backend"))?;
    allow_children()?;
    let (q, buf) = exporter_buffer(d, 80)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    run_child(
        "open_verify_write",
        &[
            selector_for(&peer),
            hex::encode(handle.as_bytes()),
            "80".into(),
            "81".into(),
        ],
    )?;
    verify(&q, &buf, 81).map_err(fail)?;
    // In this process too: the other backend's context opens the handle.
    let peer_q = Queue::in_order(&peer).map_err(fail)?;
    let opened = ipc::memory::open::<u32>(&handle, peer_q.context(), &peer).map_err(fail)?;
    verify(&peer_q, &opened, 81).map_err(fail)?;
    drop(opened);
    ipc::memory::put(handle).map_err(fail)?;
    event_round_trip_with(d, &peer)
}

// ---- ping-pong through signal counts, no side channel

fn child_ping_pong(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let ch = Channel::connect(&args[1]).map_err(s)?;
    ch.set_recv_timeout(Some(Duration::from_secs(30)))
        .map_err(s)?;
    let rounds: u64 = args[2].parse().map_err(s)?;
    let q = Queue::in_order(&d).map_err(s)?;
    let ping = ipc::event::open(&ch.recv_handle().map_err(s)?, q.context()).map_err(s)?;
    let pong = ipc::event::open(&ch.recv_handle().map_err(s)?, q.context()).map_err(s)?;
    for i in 1..=rounds {
        if !ping
            .ext_wait_signal_count(i, Some(Duration::from_secs(10)))
            .map_err(s)?
        {
            return Err(format!("ping {i} never came"));
        }
        q.enqueue_signal_event(&pong).map_err(s)?;
    }
    q.wait().map_err(s)
}

fn event_ping_pong(d: &Device) -> R {
    let q = Queue::in_order(d).map_err(fail)?;
    let props = EventProperties {
        enable_ipc: true,
        enable_profiling: false,
    };
    let ping = Event::new_for_queue(&q, props).map_err(fail)?;
    let pong = Event::new_for_queue(&q, props).map_err(fail)?;
    let rounds = 500u64;
    let (mut child, ch) =
        child_on_channel("ping_pong", d, &[rounds.to_string()], Stdio::inherit())?;
    ch.send_handle(&ipc::event::get(&ping).map_err(fail)?)
        .map_err(fail)?;
    ch.send_handle(&ipc::event::get(&pong).map_err(fail)?)
        .map_err(fail)?;
    let t = Instant::now();
    for i in 1..=rounds {
        q.enqueue_signal_event(&ping).map_err(fail)?;
        check!(
            pong.ext_wait_signal_count(i, Some(Duration::from_secs(10)))
                .map_err(fail)?,
            "pong {i} never came"
        );
    }
    println!(
        "{rounds} round trips, {:?} each",
        t.elapsed() / rounds as u32
    );
    check_eq!(ping.ext_signal_count().map_err(fail)?, rounds);
    check_eq!(pong.ext_signal_count().map_err(fail)?, rounds);
    check!(child.wait().map_err(fail)?.success());
    Ok(())
}

// ---- physical memory

fn child_physical(args: &[String]) -> ChildResult {
    use sycl::virtual_mem::VirtualRange;
    let d = device_from_selector(&args[0])?;
    let handle = handle_arg(&args[1])?;
    let q = Queue::in_order(&d).map_err(s)?;
    let pm = ipc::physical_memory::open(&handle, q.context(), &d).map_err(s)?;
    if !pm.ipc_enabled() {
        return Err("opened physical memory does not say ipc_enabled".into());
    }
    let range = VirtualRange::reserve(q.context(), pm.size(), 0).map_err(s)?;
    let map = pm
        .map(&range, 0, pm.size(), sycl::AccessMode::ReadWrite, 0)
        .map_err(s)?;
    let view = map.as_range::<u32>().map_err(s)?;
    let got = q.to_vec(&view).map_err(s)?;
    if got.iter().enumerate().any(|(i, &v)| v != value(i, 70)) {
        return Err("physical memory content differs".into());
    }
    q.fill(&view, 0xabcdu32, &[])
        .map_err(s)?
        .wait()
        .map_err(s)?;
    drop(view); // the last other reference: unmap now, not when it goes
    map.unmap().map_err(s)
}

fn physical_memory_round_trip(d: &Device) -> R {
    use sycl::virtual_mem::{get_mem_granularity, PhysicalMem, VirtualRange};
    allow_children()?;
    let q = Queue::in_order(d).map_err(fail)?;
    let ctx = q.context();
    let g = get_mem_granularity(d, ctx, sycl::GranularityMode::Recommended).map_err(fail)?;
    let size = g.max(1 << 20).next_multiple_of(g);
    let plain =
        PhysicalMem::new(d, ctx, size, sycl::PhysicalMemProperties::default()).map_err(fail)?;
    check_eq!(
        ipc::physical_memory::get(&plain).unwrap_err().code(),
        Errc::Invalid
    );
    let pm = PhysicalMem::new(
        d,
        ctx,
        size,
        sycl::PhysicalMemProperties { enable_ipc: true },
    )
    .map_err(fail)?;
    check!(pm.ipc_enabled());
    let range = VirtualRange::reserve(ctx, size, 0).map_err(fail)?;
    let map = pm
        .map(&range, 0, size, sycl::AccessMode::ReadWrite, 0)
        .map_err(fail)?;
    let view = map.as_range::<u32>().map_err(s)?;
    q.write(
        &view,
        &(0..size / 4).map(|i| value(i, 70)).collect::<Vec<_>>(),
    )
    .map_err(fail)?;
    let handle = ipc::physical_memory::get(&pm).map_err(fail)?;
    check_eq!(handle.object_size(), size as u64);
    run_child(
        "physical",
        &[selector_for(d), hex::encode(handle.as_bytes())],
    )?;
    check!(
        q.to_vec(&view).map_err(fail)?.iter().all(|&x| x == 0xabcd),
        "child's writes are not visible"
    );
    ipc::physical_memory::put(handle).map_err(fail)?;
    Ok(())
}

// ---- descriptor and mapping counts stay flat over 10,000 cycles; many threads

fn count_fds_and_maps() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0);
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map(|m| m.lines().count())
        .unwrap_or(0);
    (fds, maps)
}

fn child_cycles(args: &[String]) -> ChildResult {
    let d = device_from_selector(&args[0])?;
    let handle = handle_arg(&args[1])?;
    let cycles: usize = args[2].parse().map_err(s)?;
    let ctx = sycl::Context::default_for(&d).map_err(s)?;
    for _ in 0..10 {
        ipc::memory::close(ipc::memory::open::<u32>(&handle, &ctx, &d).map_err(s)?).map_err(s)?;
    }
    let before = count_fds_and_maps();
    let t = Instant::now();
    for _ in 0..cycles {
        let m = ipc::memory::open::<u32>(&handle, &ctx, &d).map_err(s)?;
        ipc::memory::close(m).map_err(s)?;
    }
    let per = t.elapsed() / cycles as u32;
    let after = count_fds_and_maps();
    println!(
        "cycles={cycles} per_cycle={per:?} fds {}->{} maps {}->{}",
        before.0, after.0, before.1, after.1
    );
    if before != after {
        return Err(format!(
            "counts moved: fds {}->{}, maps {}->{}",
            before.0, after.0, before.1, after.1
        ));
    }
    Ok(())
}

fn counts_stay_flat(d: &Device) -> R {
    allow_children()?;
    let (_q, buf) = exporter_buffer(d, 80)?;
    let handle = ipc::memory::get(&buf).map_err(fail)?;
    let out = run_child(
        "cycles",
        &[
            selector_for(d),
            hex::encode(handle.as_bytes()),
            "10000".into(),
        ],
    )?;
    print!("{out}");
    Ok(())
}

fn concurrent_open_close(d: &Device) -> R {
    let (q, buf) = exporter_buffer(d, 90)?;
    let handle = Arc::new(ipc::memory::get(&buf).map_err(fail)?);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (handle, q, d) = (handle.clone(), q.clone(), d.clone());
            std::thread::spawn(move || -> ChildResult {
                for i in 0..200 {
                    let m = ipc::memory::open::<u32>(&handle, q.context(), &d).map_err(s)?;
                    let idx = (t * 7919 + i * 104729) % N;
                    let mut one = [0u32];
                    q.read(&m.range(idx..idx + 1).map_err(s)?, &mut one)
                        .map_err(s)?;
                    if one[0] != value(idx, 90) {
                        return Err(format!("thread {t}: element {idx} wrong"));
                    }
                    if i % 2 == 0 {
                        ipc::memory::close(m).map_err(s)?;
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join()
            .map_err(|_| fail("thread panicked"))?
            .map_err(fail)?;
    }
    Ok(())
}

// ---- garbage handles through the public API (the exhaustive property test lives in sycl-rs)

fn garbage_handles() -> R {
    let d = Device::native_cpu();
    let q = Queue::in_order(&d).map_err(fail)?;
    let buf = sycl::malloc_device::<u8>(4096, &q).map_err(fail)?;
    let good = ipc::memory::get(&buf).map_err(fail)?.to_vec();
    let mut x = 0x1234_5678u32;
    for i in 0..2000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let mut b = good.clone();
        match i % 3 {
            0 => b.truncate(x as usize % good.len()),
            1 => b[x as usize % good.len()] ^= 1 << (x % 8),
            _ => {
                b = (0..(x % 300) as usize)
                    .map(|j| (x >> (j % 24)) as u8)
                    .collect()
            }
        }
        if let Ok(h) = Handle::from_bytes(b) {
            // Only an unmodified handle may decode; any open of it must then also work or fail cleanly.
            check!(
                h.as_bytes() == good.as_slice(),
                "corrupted bytes decoded as a handle"
            );
        }
    }
    // A memory handle is not an event or physical memory handle.
    let h = Handle::from_bytes(good).map_err(fail)?;
    check_eq!(
        ipc::event::open(&h, q.context()).unwrap_err().code(),
        Errc::Invalid
    );
    check_eq!(
        ipc::physical_memory::open(&h, q.context(), &d)
            .unwrap_err()
            .code(),
        Errc::Invalid
    );
    // A handle of another backend that shares no format with it: BackendMismatch (OpenCL
    // opens native CPU memory: `cross_backend`).
    if let Some(other) = Device::all().into_iter().find(|o| {
        !matches!(o.backend(), BackendKind::NativeCpu | BackendKind::OpenCl)
            && o.has(Aspect::ExtOneapiIpcMemory)
    }) {
        let ctx = sycl::Context::default_for(&other).map_err(fail)?;
        check_eq!(
            ipc::memory::open::<u8>(&h, &ctx, &other)
                .unwrap_err()
                .code(),
            Errc::BackendMismatch
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let roles: &[(&str, sycl_tests::ChildRole)] = &[
        ("open_verify_write", child_open_verify_write),
        ("channel_open", child_channel_open),
        ("open_many", child_open_many),
        ("open_after_put", child_open_after_put),
        ("hold_until_told", child_hold_until_told),
        ("export_then_exit", child_export_then_exit),
        ("event_consumer", child_event_consumer),
        ("event_then_die", child_event_then_die),
        ("physical", child_physical),
        ("cycles", child_cycles),
        ("ping_pong", child_ping_pong),
        ("queue_waiter", child_queue_waiter),
        ("mp_writer", child_mp_writer),
    ];
    sycl_tests::run_child_role_if_any(&[roles, soundness::ROLES].concat());
    const MEM: &[Aspect] = &[Aspect::ExtOneapiIpcMemory, Aspect::UsmDeviceAllocations];
    const EVT: &[Aspect] = &[
        Aspect::ExtOneapiIpcEvent,
        Aspect::ExtOneapiIpcMemory,
        Aspect::UsmDeviceAllocations,
        Aspect::UsmHostAllocations,
    ];
    const PHYS: &[Aspect] = &[
        Aspect::ExtOneapiIpcPhysicalMemory,
        Aspect::ExtOneapiVirtualMem,
    ];
    // Tests of guarantees that memfd memory and event pages give (native CPU, OpenCL) are
    // named in `MEMFD_TESTS` / `PAGE_EVENT_TESTS`; `skip` below holds them to those devices.
    const NATIVE_MEM: &[Aspect] = &[Aspect::ExtOneapiIpcMemory];
    const NATIVE_EVT: &[Aspect] = &[Aspect::ExtOneapiIpcEvent];
    const NATIVE_FDS: &[Aspect] = &[Aspect::ExtOneapiIpcMemory, Aspect::ExtOneapiIpcEvent];
    const MEMFD_TESTS: &[&str] = &[
        "ipc::memory::survives_exporter_exit",
        "soundness::shared_memory_has_no_host_slices",
        "soundness::peers_cannot_resize_shared_memory",
        "soundness::put_revokes_exactly",
        "soundness::exporter_identity_is_checked",
        "soundness::hostile_memfds_are_refused",
        "ipc::cross_backend",
    ];
    const PAGE_EVENT_TESTS: &[&str] = &[
        "ipc::event::exporter_death_is_an_error",
        "ipc::event::ping_pong_by_signal_count",
        "ipc::event::queue_waits_for_a_late_signal",
        "ipc::event::queue_wait_fails_when_the_signaller_dies",
    ];
    let device_tests = [
        DeviceTest {
            name: "ipc::memory::round_trip_pidfd",
            needs: MEM,
            run: memory_round_trip_pidfd,
        },
        DeviceTest {
            name: "ipc::memory::round_trip_channel",
            needs: MEM,
            run: memory_round_trip_channel,
        },
        DeviceTest {
            name: "ipc::memory::message_passing_across_processes",
            needs: &[
                Aspect::ExtOneapiIpcMemory,
                Aspect::UsmDeviceAllocations,
                Aspect::ExtSyclRsKernels,
            ],
            run: memory_message_passing,
        },
        DeviceTest {
            name: "ipc::memory::n_opens_n_closes",
            needs: MEM,
            run: memory_n_opens,
        },
        DeviceTest {
            name: "ipc::memory::open_in_exporter",
            needs: MEM,
            run: memory_open_in_exporter,
        },
        DeviceTest {
            name: "ipc::memory::put_before_and_after_open",
            needs: MEM,
            run: memory_put_lifetime,
        },
        DeviceTest {
            name: "ipc::memory::survives_exporter_exit",
            needs: NATIVE_MEM,
            run: memory_survives_exporter_exit,
        },
        DeviceTest {
            name: "ipc::memory::counts_flat_over_10000_cycles",
            needs: MEM,
            run: counts_stay_flat,
        },
        DeviceTest {
            name: "ipc::memory::concurrent_open_close",
            needs: MEM,
            run: concurrent_open_close,
        },
        DeviceTest {
            name: "ipc::event::round_trip",
            needs: EVT,
            run: event_round_trip,
        },
        DeviceTest {
            name: "ipc::event::exporter_death_is_an_error",
            needs: NATIVE_EVT,
            run: event_exporter_death,
        },
        DeviceTest {
            name: "ipc::event::ping_pong_by_signal_count",
            needs: NATIVE_EVT,
            run: event_ping_pong,
        },
        DeviceTest {
            name: "ipc::event::queue_waits_for_a_late_signal",
            needs: EVT,
            run: event_queue_wait,
        },
        DeviceTest {
            name: "ipc::event::queue_wait_fails_when_the_signaller_dies",
            needs: NATIVE_EVT,
            run: event_queue_wait_dead_signaller,
        },
        DeviceTest {
            name: "ipc::cross_backend",
            needs: MEM,
            run: cross_backend,
        },
        DeviceTest {
            name: "ipc::physical_memory::round_trip",
            needs: PHYS,
            run: physical_memory_round_trip,
        },
        DeviceTest {
            name: "soundness::opened_in_exporter_outlives_its_owner",
            needs: MEM,
            run: soundness::opened_in_exporter_outlives_its_owner,
        },
        DeviceTest {
            name: "soundness::shared_memory_has_no_host_slices",
            needs: NATIVE_MEM,
            run: soundness::shared_memory_has_no_host_slices,
        },
        DeviceTest {
            name: "soundness::open_checks_alignment",
            needs: MEM,
            run: soundness::open_checks_alignment,
        },
        DeviceTest {
            name: "soundness::forged_sizes_are_refused",
            needs: MEM,
            run: soundness::forged_sizes_are_refused,
        },
        DeviceTest {
            name: "soundness::peers_cannot_resize_shared_memory",
            needs: NATIVE_FDS,
            run: soundness::peers_cannot_resize_shared_memory,
        },
        DeviceTest {
            name: "soundness::put_revokes_exactly",
            needs: NATIVE_MEM,
            run: soundness::put_revokes_exactly,
        },
        DeviceTest {
            name: "soundness::exporter_identity_is_checked",
            needs: NATIVE_MEM,
            run: soundness::exporter_identity_is_checked,
        },
        DeviceTest {
            name: "soundness::hostile_memfds_are_refused",
            needs: NATIVE_MEM,
            run: soundness::hostile_memfds_are_refused,
        },
        DeviceTest {
            name: "soundness::exporting_in_a_loop_holds_one_export",
            needs: MEM,
            run: soundness::exporting_in_a_loop_holds_one_export,
        },
    ];
    let global = [
        GlobalTest {
            name: "ipc::garbage_handles_are_errors",
            run: garbage_handles,
        },
        GlobalTest {
            name: "soundness::channel_refuses_other_users",
            run: soundness::channel_refuses_other_users,
        },
    ];
    run_suite_where(&device_tests, &global, |t, d| {
        if MEMFD_TESTS.contains(&t.name) && !memfd_memory(d) {
            Some("does not share memory as sealed memfds".into())
        } else if t.name == "ipc::cross_backend" && memfd_partner(d).is_none() {
            Some("has no device of another backend that shares memfds".into())
        } else if PAGE_EVENT_TESTS.contains(&t.name) && !page_events(d) {
            Some("does not share events as pages of memory".into())
        } else {
            None
        }
    })
}
