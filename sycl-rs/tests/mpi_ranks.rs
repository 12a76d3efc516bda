//! `sycl::ranks` under `mpirun` (feature `mpi`): node grouping, node buffers through every
//! descriptor path, and `Ranks::exchange` direct and staged.
//!
//! Run by `cargo test -p sycl-rs --features mpi --test mpi_ranks`: without an MPI launcher
//! around it, the test starts itself under `mpirun -np 4` with `SYCL_RS_RANKS_PER_NODE=2` (two
//! "nodes" of two ranks on this machine), once per descriptor path. Skips with a reason when
//! `mpirun` is missing, unless `SYCL_RS_REQUIRE_MPI=1` (CI sets it).

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

fn ranks_main() -> ExitCode {
    let Some(universe) = mpi::initialize() else {
        eprintln!("MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    let world = universe.world();
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
    ExitCode::SUCCESS
}
