//! `sycl::ranks` under `mpirun` (feature `mpi`): node grouping, node buffers through every
//! descriptor path, and `Ranks::exchange` direct and staged.
//!
//! Run by `cargo test -p sycl-rs --features mpi --test mpi_ranks`: without an MPI launcher
//! around it, the test starts itself under `mpirun -np 4` with `SYCL_RS_RANKS_PER_NODE=2` (two
//! "nodes" of two ranks on this machine), once per descriptor path. Skips with a reason when
//! `mpirun` is missing, unless `SYCL_RS_REQUIRE_MPI=1` (CI sets it).
//!
//! Then three runs of 2 ranks where rank 1 misbehaves in `node_buffer` (issue 29). Twice it
//! never joins (item 4): once staying alive past the time-out, once exiting with status 0; rank
//! 0's `node_buffer` must fail, by the time-out in the first run and at once (the exit seen
//! through its pidfd) in the second, where before it blocked in `MPI_Allgather` for ever. Once it
//! sends a handle with a forged size (item 5); rank 0 must refuse it at once, where before it
//! fell back to the rank channel and failed with "recvmsg: timed out" after the whole time-out.

use std::process::{Command, ExitCode};
use std::time::Duration;

use mpi::traits::*;
use sycl::ranks::{DescriptorPath, DeviceChoice, NodeKey, Ranks, RanksOptions};
use sycl::{Device, Queue};

type R = Result<(), String>;

fn check(cond: bool, what: String) -> R {
    if cond {
        Ok(())
    } else {
        Err(what)
    }
}

fn e2s(e: sycl::Error) -> String {
    e.to_string()
}

fn options(path: DescriptorPath) -> RanksOptions {
    RanksOptions {
        node_key: NodeKey::RanksPerNode(2),
        device: DeviceChoice::Device(Device::native_cpu()),
        descriptors: path,
        timeout: Duration::from_secs(30),
    }
}

/// Grouping: 4 ranks, 2 per node.
fn grouping(ranks: &Ranks) -> R {
    let rank = ranks.rank();
    check(ranks.size() == 4, format!("size {}", ranks.size()))?;
    check(
        ranks.node_count() == 2,
        format!("node_count {}", ranks.node_count()),
    )?;
    check(
        ranks.local_size() == 2,
        format!("local_size {}", ranks.local_size()),
    )?;
    check(
        ranks.local_rank() == rank % 2,
        format!("local_rank {}", ranks.local_rank()),
    )?;
    check(
        ranks.node_index() == rank / 2,
        format!("node {}", ranks.node_index()),
    )?;
    for r in 0..4 {
        check(
            ranks.is_on_my_node(r) == (r / 2 == rank / 2),
            format!("is_on_my_node({r})"),
        )?;
    }
    check(
        ranks.rank_of_local(ranks.local_rank()).map_err(e2s)? == rank,
        "rank_of_local".into(),
    )?;
    check(ranks.node_of(9).is_err(), "node_of(9) must fail".into())
}

/// Every rank writes into the other local rank's part and signals; each verifies what its
/// peer wrote, and that its own writes are visible in the peer's part.
fn node_buffer(ranks: &Ranks, q: &Queue) -> R {
    const N: usize = 4096;
    let buffer = ranks.node_buffer::<u32>(q, N).map_err(e2s)?;
    let me = ranks.local_rank();
    let peer = 1 - me;
    let mark = 1000 + ranks.rank() as u32;
    q.fill(buffer.local(), 0u32, &[])
        .map_err(e2s)?
        .wait()
        .map_err(e2s)?;
    ranks.node_barrier().map_err(e2s)?;
    // Our mark into the upper half of the peer's part (zero-copy).
    let half = buffer
        .peer(peer)
        .map_err(e2s)?
        .range(N / 2..)
        .map_err(e2s)?;
    q.fill(&half, mark, &[]).map_err(e2s)?;
    buffer.signal(q).map_err(e2s)?;
    ranks.node_barrier().map_err(e2s)?;
    buffer.wait_for(q, &[peer]).map_err(e2s)?;
    q.wait().map_err(e2s)?;
    let got = q.to_vec(buffer.local()).map_err(e2s)?;
    let peer_mark = 1000 + ranks.rank_of_local(peer).map_err(e2s)? as u32;
    check(
        got[..N / 2].iter().all(|&v| v == 0),
        format!("rank {}: lower half changed", ranks.rank()),
    )?;
    check(
        got[N / 2..].iter().all(|&v| v == peer_mark),
        format!(
            "rank {}: upper half holds {:?}.., expected the peer's mark {peer_mark}",
            ranks.rank(),
            &got[N / 2..N / 2 + 4]
        ),
    )?;
    check(buffer.peer(7).is_err(), "peer(7) must fail".into())?;
    let used = buffer.descriptor_path(peer);
    let expected = match (ranks.options().descriptors, deny_ptrace()) {
        (DescriptorPath::Auto, true) | (DescriptorPath::Channel, _) => DescriptorPath::Channel,
        _ => DescriptorPath::Pidfd,
    };
    check(
        used == Some(expected),
        format!(
            "rank {}: descriptors came by {used:?}, expected {expected:?}",
            ranks.rank()
        ),
    )?;
    if ranks.rank() == 0 {
        println!("node buffer: the peer's descriptors came by {used:?}");
    }
    Ok(())
}

/// `SYCL_RS_TEST_DENY_PTRACE=1`: every rank makes itself non-dumpable, so that (without
/// CAP_SYS_PTRACE) no sibling may take its descriptors with `pidfd_getfd`, as under Yama.
fn deny_ptrace() -> bool {
    std::env::var("SYCL_RS_TEST_DENY_PTRACE").as_deref() == Ok("1")
}

/// Rank r exchanges with the rank of the same local index on the other node (through MPI).
fn exchange(ranks: &Ranks, q: &Queue, what: &str) -> R {
    let n = (9 << 20) / 4 + 3; // more than two 4 MiB staging chunks, not a multiple of them
    let peer = (ranks.rank() + 2) % 4;
    let send = sycl::malloc_device::<u32>(n, q).map_err(e2s)?;
    let recv = sycl::malloc_device::<u32>(n, q).map_err(e2s)?;
    let base = ranks.rank() as u32 * 0x100_0000;
    let data: Vec<u32> = (0..n as u32).map(|i| base + i).collect();
    q.write(&send, &data).map_err(e2s)?;
    ranks.exchange(q, &send, &recv, peer, &[]).map_err(e2s)?;
    let got = q.to_vec(&recv).map_err(e2s)?;
    let peer_base = peer as u32 * 0x100_0000;
    let bad = (0..n).find(|&i| got[i] != peer_base + i as u32);
    check(
        bad.is_none(),
        format!("rank {} ({what}): element {bad:?} wrong", ranks.rank()),
    )?;
    check(
        ranks.exchange(q, &send, &recv, ranks.rank(), &[]).is_err(),
        "exchange with itself must fail".into(),
    )
}

/// Rank 1's side of `node_buffer` played by hand (the same non-blocking collectives, in the
/// same order), sending a real export of its memory whose size is forged 16 times larger
/// (checksum recomputed): a peer that lies about what it shares.
fn forge_node_buffer(ranks: &Ranks, q: &Queue) {
    use mpi::datatype::PartitionMut;
    let mem = sycl::malloc_device::<u32>(1024, q).expect("malloc");
    let event = sycl::Event::new_for_queue(
        q,
        sycl::EventProperties {
            enable_ipc: true,
            enable_profiling: false,
        },
    )
    .expect("event");
    let mem_handle = sycl::ipc::memory::get(&mem).expect("export");
    let event_handle = sycl::ipc::event::get(&event).expect("export event");
    // Handle layout (spec/ipc-handle-format.md): object size at 56, CRC-32 at 112 over the
    // bytes before it and the payload after the 116-byte header.
    let mut forged = mem_handle.to_vec();
    let size = u64::from_le_bytes(forged[56..64].try_into().unwrap());
    forged[56..64].copy_from_slice(&(16 * size).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&forged[..112]);
    crc.update(&forged[116..]);
    let sum = crc.finalize();
    forged[112..116].copy_from_slice(&sum.to_le_bytes());
    let mut message = vec![1u8]; // TAG_OK
    message.extend_from_slice(&(forged.len() as u32).to_le_bytes());
    message.extend_from_slice(&forged);
    message.extend_from_slice(event_handle.as_bytes());
    let node = ranks.node_communicator();
    let size = node.size() as usize;
    // Non-blocking collectives match only non-blocking ones (MPI 3.1, 5.12).
    let len = message.len() as i32;
    let mut counts = vec![0i32; size];
    mpi::request::scope(|s| {
        node.immediate_all_gather_into(s, &len, &mut counts[..])
            .wait();
    });
    let displs: Vec<i32> = counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect();
    let mut all = vec![0u8; counts.iter().sum::<i32>() as usize];
    let mut partition = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
    mpi::request::scope(|s| {
        node.immediate_all_gather_varcount_into(s, &message[..], &mut partition)
            .wait();
    });
    // Needs no channel itself, and reports success.
    let mut matrix = vec![0u8; size * size];
    let row = vec![0u8; size];
    mpi::request::scope(|s| {
        node.immediate_all_gather_into(s, &row[..], &mut matrix[..])
            .wait();
    });
    let mut statuses = vec![0u8; size];
    mpi::request::scope(|s| {
        node.immediate_all_gather_into(s, &[0u8][..], &mut statuses[..])
            .wait();
    });
    // Keep the export alive until rank 0 is done with it.
    std::thread::sleep(Duration::from_secs(2));
    drop((mem_handle, event_handle, mem, event));
}

/// The misbehaving-peer runs: rank 1 never calls `node_buffer` (`alive`, `exit`) or forges
/// what it shares (`forged`); rank 0 reports how its call ended and how long it took. Both
/// leave with `exit` (no `MPI_Finalize`: rank 0's abandoned collective would make finalizing
/// wait for rank 1).
fn silent_peer_main(world: &mpi::topology::SimpleCommunicator, variant: &str) -> ! {
    let timeout = Duration::from_secs(if variant == "alive" { 3 } else { 30 });
    let options = RanksOptions {
        node_key: NodeKey::SharedMemory,
        device: DeviceChoice::Device(Device::native_cpu()),
        descriptors: DescriptorPath::Auto,
        timeout,
    };
    let ranks = match Ranks::new(world, options) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rank {}: Ranks::new: {e}", world.rank());
            std::process::exit(1)
        }
    };
    let q = Queue::in_order(ranks.device()).expect("queue");
    if ranks.rank() == 1 {
        match variant {
            // Alive, busy elsewhere, well past rank 0's time-out.
            "alive" => std::thread::sleep(timeout * 4),
            "forged" => forge_node_buffer(&ranks, &q),
            _ => {}
        }
        std::process::exit(0);
    }
    let start = std::time::Instant::now();
    let result = ranks.node_buffer::<u32>(&q, 1024).map(|_| ());
    let took = start.elapsed().as_secs_f64();
    match result {
        Ok(()) => println!("silent-peer {variant}: rank 0: node_buffer succeeded after {took:.1}s"),
        Err(e) => {
            println!("silent-peer {variant}: rank 0: error after {took:.1}s: {e}");
            // Every later collective is refused at once, not left to hang.
            let again = std::time::Instant::now();
            match ranks.node_barrier() {
                Err(e) if again.elapsed() < Duration::from_secs(1) => {
                    println!("silent-peer {variant}: rank 0: later collective refused: {e}")
                }
                other => println!("silent-peer {variant}: rank 0: later collective: {other:?}"),
            }
        }
    }
    std::process::exit(0)
}

/// Starts the silent-peer run `variant` under `mpirun -np 2` and checks rank 0's report:
/// an error, within `within` seconds, whose text contains `says`.
fn silent_peer_run(me: &std::path::Path, variant: &str, within: f64, says: &str) -> R {
    let out = Command::new("timeout")
        .args([
            "-k",
            "5",
            "90",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
        ])
        // Ranks leave without MPI_Finalize, and rank 1 may leave first: mpirun must let the
        // job run on, so that what ends rank 0's call is rank 0 noticing.
        .args(["--mca", "orte_allowed_exit_without_sync", "1"])
        .args(["--mca", "orte_abort_on_non_zero_status", "0"])
        .args(["-np", "2", "-x", "SYCL_RS_TEST_SILENT_PEER"])
        .arg(me)
        .env("SYCL_RS_TEST_SILENT_PEER", variant)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .map_err(|e| format!("running mpirun: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    print!("{stdout}");
    let report = stdout
        .lines()
        .find(|l| l.starts_with(&format!("silent-peer {variant}: rank 0: ")))
        .ok_or_else(|| {
            format!(
                "silent peer ({variant}): rank 0 reported nothing ({:?}): {stderr}",
                out.status
            )
        })?;
    let took: f64 = report
        .split("after ")
        .nth(1)
        .and_then(|t| t.split('s').next())
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| format!("silent peer ({variant}): unreadable report: {report}"))?;
    check(
        report.contains("error after") && report.contains(says) && took < within,
        format!(
            "silent peer ({variant}): wanted an error saying `{says}` within {within}s: {report}"
        ),
    )?;
    if variant == "forged" {
        // A refused handle abandons no collective: the ranks stay usable (the barrier after
        // it fails only because rank 1 has left by then).
        return Ok(());
    }
    check(
        stdout.contains(&format!(
            "silent-peer {variant}: rank 0: later collective refused"
        )),
        format!("silent peer ({variant}): a later collective was not refused: {stdout}"),
    )
}

fn ranks_main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
    if let Ok(variant) = std::env::var("SYCL_RS_TEST_SILENT_PEER") {
        silent_peer_main(&world, &variant);
    }
    if deny_ptrace() {
        // SAFETY: prctl(PR_SET_DUMPABLE, 0) changes only this process's ptrace-ability.
        let r = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
        assert_eq!(r, 0, "prctl(PR_SET_DUMPABLE)");
    }
    let path = match std::env::var("SYCL_RS_DESCRIPTOR_PATH").as_deref() {
        Ok("channel") => DescriptorPath::Channel,
        Ok("pidfd") => DescriptorPath::Pidfd,
        _ => DescriptorPath::Auto,
    };
    let result = (|| -> R {
        let ranks = Ranks::new(&world, options(path)).map_err(e2s)?;
        let q = Queue::in_order(ranks.device()).map_err(e2s)?;
        grouping(&ranks)?;
        node_buffer(&ranks, &q)?;
        exchange(&ranks, &q, "native CPU memory, direct")?;
        // Device memory MPI cannot reach: staged through pinned host memory.
        if let Some(opencl) = Device::all()
            .into_iter()
            .find(|d| d.backend() == sycl::BackendKind::OpenCl)
        {
            let q = Queue::in_order(&opencl).map_err(e2s)?;
            exchange(&ranks, &q, "OpenCL device memory, staged")?;
            if ranks.rank() == 0 {
                println!("staged exchange on {}: ok", opencl.name());
            }
        } else if std::env::var("SYCL_RS_REQUIRE_BACKENDS")
            .unwrap_or_default()
            .split(',')
            .any(|b| b.trim() == "opencl")
        {
            // CI names OpenCL: the staged path must not go untested silently.
            return Err(
                "no OpenCL device, but SYCL_RS_REQUIRE_BACKENDS names opencl: the \
                        staged exchange path would go untested"
                    .into(),
            );
        } else if ranks.rank() == 0 {
            println!("no OpenCL device: the staged exchange path is not exercised here");
        }
        Ok(())
    })();
    match result {
        Ok(()) => {
            println!("rank {}: ok ({path:?})", world.rank());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rank {}: FAILED: {e}", world.rank());
            world.abort(1)
        }
    }
}

fn main() -> ExitCode {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_RANK").is_some()
    {
        return ranks_main();
    }
    let required = std::env::var("SYCL_RS_REQUIRE_MPI").as_deref() == Ok("1");
    if Command::new("mpirun").arg("--version").output().is_err() {
        if required {
            eprintln!("mpi_ranks: mpirun not found, and SYCL_RS_REQUIRE_MPI=1");
            return ExitCode::FAILURE;
        }
        println!("mpi_ranks: skipped: no mpirun (install Open MPI: libopenmpi-dev openmpi-bin)");
        return ExitCode::SUCCESS;
    }
    let me = std::env::current_exe().expect("current_exe");
    // (descriptor path, deny ptrace): the last run makes pidfd_getfd fail between the ranks,
    // so that `Auto` must fall back to the rank channel by itself. Root may ptrace anyone, so
    // as root that run drops to user nobody (setpriv); without setpriv it is skipped.
    let root = rustix::process::geteuid().is_root();
    let has_setpriv = Command::new("setpriv").arg("--version").output().is_ok();
    for (path, deny) in [
        ("auto", false),
        ("pidfd", false),
        ("channel", false),
        ("auto", true),
    ] {
        if deny && root && !has_setpriv {
            println!(
                "mpi_ranks: the auto fallback run skipped: root, and no setpriv to drop to nobody"
            );
            continue;
        }
        let mut cmd = Command::new("timeout");
        cmd.args(["-k", "5", "180"]);
        let mut program = me.clone();
        if deny && root {
            // Nobody may not reach the build directory: run a copy from the temp directory.
            use std::os::unix::fs::PermissionsExt;
            program =
                std::env::temp_dir().join(format!("sycl-rs-mpi-ranks-{}", std::process::id()));
            std::fs::copy(&me, &program).expect("copying the test binary");
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
            cmd.args([
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ]);
            cmd.env("HOME", std::env::temp_dir());
        }
        cmd.args([
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "4",
        ])
        .args([
            "-x",
            "SYCL_RS_DESCRIPTOR_PATH",
            "-x",
            "SYCL_RS_TEST_DENY_PTRACE",
        ])
        // Open MPI's shared-memory transport reads peers' memory with process_vm_readv,
        // which a non-dumpable peer refuses too: copy through its own segment instead.
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .arg(&program)
        .env("SYCL_RS_DESCRIPTOR_PATH", path)
        .env("SYCL_RS_TEST_DENY_PTRACE", if deny { "1" } else { "0" })
        // Open MPI refuses root without these (CI runs as root).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        let out = cmd.output().expect("running mpirun");
        if program != me {
            let _ = std::fs::remove_file(&program);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        print!("{stdout}");
        let oks = stdout.matches(": ok (").count();
        let what = if deny {
            format!("{path}, pidfd_getfd refused")
        } else {
            path.to_string()
        };
        if !out.status.success() || oks != 4 {
            eprintln!("{stderr}");
            eprintln!(
                "mpi_ranks: descriptor path {what}: {:?}, {oks} of 4 ranks ok",
                out.status
            );
            return ExitCode::FAILURE;
        }
        println!("mpi_ranks: descriptor path {what}: 4 ranks on 2 nodes ok");
    }
    // Rank 1 alive but silent: the 3 s time-out ends rank 0's call. Rank 1 exited: its pidfd
    // ends the call long before the 30 s time-out.
    // Rank 1 forging its size: refused at once, not after the 30 s time-out of the channel.
    for (variant, within, says) in [
        ("alive", 10.0, "timed out"),
        ("exit", 10.0, "exited"),
        ("forged", 10.0, "forged"),
    ] {
        if let Err(e) = silent_peer_run(&me, variant, within, says) {
            eprintln!("mpi_ranks: {e}");
            return ExitCode::FAILURE;
        }
        println!("mpi_ranks: silent peer ({variant}): rank 0 failed in time");
    }
    ExitCode::SUCCESS
}
