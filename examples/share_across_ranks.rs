//! Ranks sharing a buffer and events, zero-copy.
//!
//! Rank 0 allocates a device buffer, fills it, and creates IPC events. It starts N-1 worker
//! ranks (processes), which open the same memory and events through sycl-rs IPC, wait until
//! rank 0's data is ready, compute on their slice *in place*, and signal back. Rank 0 then
//! verifies every element and prints a report. The workers' kernel is one `#[sycl::kernel]`
//! function written in Rust, the same for every device.
//!
//! It needs a device that shares memory and events between processes and runs
//! `#[sycl::kernel]` functions: native CPU, CUDA, and OpenCL devices with fine-grained system
//! SVM (Intel's CPU runtime; not PoCL or NVIDIA's OpenCL, nor Level Zero yet). On another
//! device it says what is missing and which devices would do, and exits with status 3 (other
//! failures exit with 1). With `--worker-device`, the workers run on another device than rank 0,
//! of the same backend or, for memory shared as memfds, of the other (native CPU and OpenCL).
//!
//! ```text
//! cargo run --release --example share_across_ranks                  # default device
//! cargo run --release --example share_across_ranks -- --ranks 8 --device cuda:0
//! cargo run --release --example share_across_ranks -- --spread --device cuda:*   # a rank per GPU
//! cargo run --release --example share_across_ranks -- --device native_cpu:* --worker-device opencl:1
//! ```

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use sycl::ipc::{
    self,
    transport::{Channel, Listener},
};
use sycl::{Aspect, Device, DeviceSelector, Event, EventProperties, Queue, Range};

/// x = x * k + add, in place: one kernel for every device (Rust on the native CPU device,
/// OpenCL C or CUDA C++ generated from it elsewhere).
#[sycl::kernel]
fn scale(x: &mut [f32], k: f32, add: f32) {
    let i = global_id(0);
    x[i] = x[i] * k + add;
}

struct Options {
    ranks: usize,
    elements_per_rank: usize,
    device: Option<String>,
    spread: bool,
    worker_device: Option<String>,
    worker: Option<(String, usize, String)>,
}

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        ranks: 4,
        elements_per_rank: 4 << 20,
        device: None,
        spread: false,
        worker_device: None,
        worker: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut next = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--ranks" => o.ranks = next("--ranks")?.parse().map_err(|e| format!("--ranks: {e}"))?,
            "--elements" => o.elements_per_rank = next("--elements")?.parse().map_err(|e| format!("--elements: {e}"))?,
            "--device" => o.device = Some(next("--device")?),
            "--spread" => o.spread = true,
            "--worker-device" => o.worker_device = Some(next("--worker-device")?),
            "--worker" => {
                let channel = next("--worker")?;
                let rank = next("--worker")?.parse().map_err(|e| format!("rank: {e}"))?;
                let selector = next("--worker")?;
                o.worker = Some((channel, rank, selector));
            }
            "-h" | "--help" => {
                return Err("usage: share_across_ranks [--ranks N] [--elements PER_RANK] [--device SELECTOR] [--spread | --worker-device SELECTOR]".into())
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if o.ranks < 2 {
        return Err("--ranks must be at least 2 (rank 0 and one worker)".into());
    }
    Ok(o)
}

fn worker(channel_name: &str, rank: usize, selector: &str) -> Result<(), String> {
    let err = |e: sycl::Error| format!("rank {rank}: {e}");
    let device = DeviceSelector::filter(selector)
        .and_then(|s| s.select())
        .map_err(err)?;
    let q = Queue::in_order(&device).map_err(err)?;
    let ch = Channel::connect(channel_name).map_err(err)?;
    ch.set_recv_timeout(Some(Duration::from_secs(120)))
        .map_err(err)?;
    // Say who we are: rank 0 makes our done event on our device (a CUDA event can only be
    // signalled from a queue of the device it was made on).
    ch.send(rank.to_string().as_bytes()).map_err(err)?;
    let buffer_handle = ch.recv_handle().map_err(err)?;
    let ready_handle = ch.recv_handle().map_err(err)?;
    let done_handle = ch.recv_handle().map_err(err)?;
    let t = Instant::now();
    let shared = ipc::memory::open::<f32>(&buffer_handle, q.context(), &device).map_err(err)?;
    let open_us = t.elapsed().as_secs_f64() * 1e6;
    let ready = ipc::event::open(&ready_handle, q.context()).map_err(err)?;
    let done = ipc::event::open(&done_handle, q.context()).map_err(err)?;
    let per_rank = shared.len() / ch_u64(&ch.recv().map_err(err)?) as usize;
    let mine = shared
        .range((rank - 1) * per_rank..rank * per_rank)
        .map_err(err)?;
    // Wait (on the device queue) for rank 0's data, compute in place, signal back.
    q.enqueue_wait_event(&ready).map_err(err)?;
    let t = Instant::now();
    q.parallel_for(Range::d1(mine.len()), &[], scale(&mine, 2.0, rank as f32))
        .map_err(err)?;
    q.enqueue_signal_event(&done).map_err(err)?;
    q.wait().map_err(err)?;
    let compute_ms = t.elapsed().as_secs_f64() * 1e3;
    ch.send(
        format!(
            "{rank} {open_us:.1} {compute_ms:.2} {} [{selector}]",
            device.name()
        )
        .as_bytes(),
    )
    .map_err(err)?;
    Ok(())
}

fn ch_u64(bytes: &[u8]) -> u64 {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1)
}

fn explain_missing(device: &Device) -> Option<String> {
    let needed = [
        Aspect::ExtOneapiIpcMemory,
        Aspect::ExtOneapiIpcEvent,
        Aspect::UsmDeviceAllocations,
        Aspect::ExtOneapiReusableEvents,
        // The workers' kernel, `#[sycl::kernel] fn scale`.
        Aspect::ExtSyclRsKernels,
    ];
    let missing: Vec<String> = needed
        .iter()
        .filter(|a| !device.has(**a))
        .map(|a| a.to_string())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let capable: Vec<String> = Device::all()
        .into_iter()
        .filter(|d| needed.iter().all(|a| d.has(*a)))
        .map(|d| format!("{} ({})", d.name(), d.backend()))
        .collect();
    Some(format!(
        "{} ({}) cannot share memory and events between processes: it lacks {}.\n\
         Devices here that can: {}.\nPick one with --device, e.g. --device native_cpu:*",
        device.name(),
        device.backend(),
        missing.join(", "),
        if capable.is_empty() {
            "none".to_string()
        } else {
            capable.join("; ")
        }
    ))
}

fn rank0(o: &Options) -> Result<(), String> {
    let selector = match &o.device {
        Some(s) => DeviceSelector::filter(s).map_err(|e| e.to_string())?,
        None => DeviceSelector::Default,
    };
    let device = selector.select().map_err(|e| e.to_string())?;
    if let Some(why) = explain_missing(&device) {
        // Nothing started yet: a distinct status, so that scripts can tell "this device cannot
        // take part" from a failure.
        eprintln!("share_across_ranks: {why}");
        std::process::exit(3);
    }
    // Devices for the workers: the same one, with --spread one per device of the backend, or
    // the one --worker-device names.
    let pool: Vec<Device> = if let Some(sel) = &o.worker_device {
        let d = DeviceSelector::filter(sel)
            .and_then(|s| s.select())
            .map_err(|e| e.to_string())?;
        if let Some(why) = explain_missing(&d) {
            eprintln!("share_across_ranks: worker device: {why}");
            std::process::exit(3);
        }
        vec![d]
    } else if o.spread {
        Device::all()
            .into_iter()
            .filter(|d| d.backend() == device.backend() && explain_missing(d).is_none())
            .collect()
    } else {
        vec![device.clone()]
    };
    let index_of = |d: &Device| {
        Device::all()
            .into_iter()
            .filter(|x| x.backend() == d.backend())
            .position(|x| &x == d)
            .unwrap_or(0)
    };
    let q = Queue::in_order(&device).map_err(|e| e.to_string())?;
    let workers = o.ranks - 1;
    let n = workers * o.elements_per_rank;
    let bytes = n * 4;
    println!(
        "rank 0: {} ({}), {} worker ranks, buffer {} elements ({:.1} MiB)",
        device.name(),
        device.backend(),
        workers,
        n,
        bytes as f64 / (1 << 20) as f64
    );

    let buffer = sycl::malloc_device::<f32>(n, &q).map_err(|e| e.to_string())?;
    let ipc_event = EventProperties {
        enable_ipc: true,
        enable_profiling: false,
    };
    let ready = Event::new_for_queue(&q, ipc_event).map_err(|e| e.to_string())?;

    // Fill: x[i] = i mod 1000, then mark the data ready.
    let host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let staging = sycl::malloc_host::<f32>(n, &q).map_err(|e| e.to_string())?;
    q.write(&staging, &host).map_err(|e| e.to_string())?;
    q.copy(&staging, &buffer, &[]).map_err(|e| e.to_string())?;
    q.enqueue_signal_event(&ready).map_err(|e| e.to_string())?;

    let listener = Listener::bind_unique().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut children = Vec::new();
    // Rank r runs on device r of the pool (rank 0 is on the first), round robin.
    let device_of_rank = |rank: usize| &pool[rank % pool.len()];
    for rank in 1..o.ranks {
        let d = device_of_rank(rank);
        let sel = format!("{}:{}", d.backend(), index_of(d));
        // The selector names the device among all devices; ONEAPI_DEVICE_SELECTOR, if rank 0
        // was started under one, would renumber them in the worker.
        let child = Command::new(&exe)
            .env_remove("ONEAPI_DEVICE_SELECTOR")
            .args(["--worker", listener.name(), &rank.to_string(), &sel])
            .spawn()
            .map_err(|e| format!("starting rank {rank}: {e}"))?;
        children.push(child);
    }
    let buffer_handle = ipc::memory::get(&buffer).map_err(|e| e.to_string())?;
    let ready_handle = ipc::event::get(&ready).map_err(|e| e.to_string())?;
    let t_share = Instant::now();
    let mut channels = Vec::new();
    for _ in 0..workers {
        let ch = listener
            .accept(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        ch.set_recv_timeout(Some(Duration::from_secs(300)))
            .map_err(|e| e.to_string())?;
        channels.push(ch);
    }
    // Ranks connect in any order and name themselves; each gets the buffer, the ready event
    // and a done event of its own, made on its device; its slice follows its rank.
    let mut done = Vec::new();
    let mut failure = None;
    for ch in &channels {
        let sent = (|| -> Result<Event, String> {
            let hello = ch.recv().map_err(|e| e.to_string())?;
            let rank = std::str::from_utf8(&hello)
                .ok()
                .and_then(|r| r.trim().parse::<usize>().ok())
                .filter(|r| (1..o.ranks).contains(r))
                .ok_or_else(|| format!("a worker sent {hello:?} instead of its rank"))?;
            let home = Queue::in_order(device_of_rank(rank)).map_err(|e| e.to_string())?;
            let ev = Event::new_for_queue(&home, ipc_event).map_err(|e| e.to_string())?;
            ch.send_handle(&buffer_handle).map_err(|e| e.to_string())?;
            ch.send_handle(&ready_handle).map_err(|e| e.to_string())?;
            ch.send_handle(&ipc::event::get(&ev).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
            ch.send(workers.to_string().as_bytes())
                .map_err(|e| e.to_string())?;
            Ok(ev)
        })();
        match sent {
            Ok(ev) => done.push(ev),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let mut reports = Vec::new();
    if failure.is_none() {
        for (i, ch) in channels.iter().enumerate() {
            let outcome = ch.recv().map_err(|e| e.to_string()).and_then(|reply| {
                done[i].wait().map_err(|e| format!("done event: {e}"))?;
                Ok(reply)
            });
            match outcome {
                Ok(reply) => reports.push(String::from_utf8_lossy(&reply).to_string()),
                Err(e) => {
                    failure = Some(format!("worker {i}: {e}"));
                    break;
                }
            }
        }
    }
    if let Some(why) = failure {
        // Say how the workers ended (a rank that crashed prints nothing itself).
        drop(channels);
        std::thread::sleep(Duration::from_millis(500));
        let mut ends = Vec::new();
        for (rank, c) in children.iter_mut().enumerate() {
            let end = match c.try_wait() {
                Ok(Some(status)) => status.to_string(),
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                    "still running (killed)".to_string()
                }
            };
            ends.push(format!("rank {}: {end}", rank + 1));
        }
        return Err(format!("{why} ({})", ends.join("; ")));
    }
    let round = t_share.elapsed();
    for (rank, mut c) in children.into_iter().enumerate() {
        let status = c.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("rank {} exited with {status}", rank + 1));
        }
    }
    // Verify: slice r was computed by rank r: x * 2 + r.
    let result = q.to_vec(&buffer).map_err(|e| e.to_string())?;
    for (i, &x) in result.iter().enumerate() {
        let rank = i / o.elements_per_rank + 1;
        let want = (i % 1000) as f32 * 2.0 + rank as f32;
        if x != want {
            return Err(format!(
                "element {i} (rank {rank}'s slice) is {x}, expected {want}"
            ));
        }
    }
    println!(
        "shared: 1 device buffer ({bytes} bytes) + {} IPC events, through {}",
        1 + workers,
        device.backend()
    );
    println!(
        "{:>5} {:>14} {:>12}  device",
        "rank", "open (us)", "compute (ms)"
    );
    reports.sort_by_key(|r| r.split(' ').next().and_then(|x| x.parse::<usize>().ok()));
    for r in &reports {
        let mut parts = r.splitn(4, ' ');
        let (rank, open, compute, name) = (
            parts.next().unwrap_or("?"),
            parts.next().unwrap_or("?"),
            parts.next().unwrap_or("?"),
            parts.next().unwrap_or("?"),
        );
        println!("{rank:>5} {open:>14} {compute:>12}  {name}");
    }
    println!(
        "zero-copy: every rank computed on rank 0's allocation in place; no rank copied data \
              (rank 0 read {bytes} bytes back once, only to verify)"
    );
    println!(
        "round (share + compute + signal back): {:.2} ms",
        round.as_secs_f64() * 1e3
    );
    println!("OK: all {n} elements verified");
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match &o.worker {
        Some((channel, rank, selector)) => worker(channel, *rank, selector),
        None => rank0(&o),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("share_across_ranks: {e}");
            ExitCode::FAILURE
        }
    }
}
