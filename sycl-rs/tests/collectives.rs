//! `sycl::collective` between processes (issue 32): every operation, element type and
//! reduction against a host reference, bit for bit, on every rank; odd, zero and multi-piece
//! counts; one-shot and two-shot; ranks that disagree; a rank that never arrives.
//!
//! `cargo test -p sycl-rs --features mpi --test collectives`: without an MPI launcher around
//! it, the test starts itself under `mpirun` with 2, 3 and 4 ranks, then 4 ranks as two
//! "nodes" of two (`SYCL_RS_RANKS_PER_NODE=2`: a team per node), then 2 ranks where rank 1
//! never calls. Skips with a reason when `mpirun` is missing, unless `SYCL_RS_REQUIRE_MPI=1`.
//! The device is the native CPU (`SYCL_RS_COLLECTIVES_DEVICE=cuda` picks one GPU per rank).

mod common;

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use common::checks::*;
use sycl::collective::{Algorithm, Team, TeamOptions};
use sycl::ranks::{DescriptorPath, DeviceChoice, NodeKey, Ranks, RanksOptions};
use sycl::{Device, Queue};

fn ranks_main() -> ExitCode {
    let Some(universe) = sycl::ranks::mpi::initialize() else {
        eprintln!("MPI could not be initialised");
        return ExitCode::FAILURE;
    };
    use sycl::ranks::mpi::traits::Communicator;
    let world = universe.world();
    let device = match std::env::var("SYCL_RS_COLLECTIVES_DEVICE").as_deref() {
        Ok("cuda") => DeviceChoice::RoundRobin(Some("cuda:gpu".into())),
        _ => DeviceChoice::Device(Device::native_cpu()),
    };
    let node_key = match std::env::var("SYCL_RS_RANKS_PER_NODE")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(k) => NodeKey::RanksPerNode(k),
        None => NodeKey::SharedMemory,
    };
    let options = RanksOptions {
        node_key,
        device,
        descriptors: DescriptorPath::Auto,
        timeout: Duration::from_secs(30),
    };
    let silent = std::env::var("SYCL_RS_TEST_SILENT_RANK").ok();
    let result = (|| -> R {
        let ranks = Ranks::new(&world, options).map_err(e2s)?;
        let q = Queue::in_order(ranks.device()).map_err(e2s)?;
        if let Some(steps) = silent {
            return silent_rank(ranks.node(), &q, steps == "host steps");
        }
        let forms = [
            (Algorithm::OneShot, usize::MAX, "one-shot staged"),
            (Algorithm::OneShot, 0, "one-shot copied in, vectors"),
            (Algorithm::TwoShot, 0, "two-shot"),
        ];
        // On the native CPU: host steps (the default), kernels, and both in one team (rank 0
        // on kernels, the others on host steps: one protocol). Other devices run kernels.
        let me = ranks.local_rank();
        let native = q.backend() == sycl::BackendKind::NativeCpu;
        let steps = [
            (if native { "host steps" } else { "kernels" }, true),
            ("kernels", false),
            ("rank 0 on kernels", me != 0),
        ];
        for (steps, host_steps) in steps {
            for (algorithm, staged_max_bytes, name) in forms {
                // 4 KiB halves: the larger counts run in several pieces.
                let options = TeamOptions {
                    buffer_bytes: 4096,
                    algorithm,
                    staged_max_bytes,
                    host_steps,
                    ..TeamOptions::default()
                };
                let mut team = Team::new(&ranks, &q, options).map_err(e2s)?;
                for count in [0, 1, 7, 300, 1500] {
                    let what = format!("{steps}, {name}, {count} elements,");
                    every_type(&mut team, &q, count, &what)?;
                }
                overlapping(&mut team, &q)?;
                ordering(&mut team, &q, native && host_steps)?;
            }
            if !native {
                break;
            }
        }
        mismatches(ranks.node(), &q, true)?;
        mismatches(ranks.node(), &q, me != 0)
    })();
    match result {
        Ok(()) => {
            println!("collectives: rank {} of {}: ok", world.rank(), world.size());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!(
                "collectives: rank {} of {}: FAILED: {e}",
                world.rank(),
                world.size()
            );
            ExitCode::FAILURE
        }
    }
}

fn mpirun(np: usize, env: &[(&str, &str)], extra: &[&str]) -> Result<String, String> {
    let me = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new("timeout");
    cmd.args([
        "-k",
        "5",
        "600",
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
    ])
    .args(extra)
    .args(["-np", &np.to_string()]);
    for (k, v) in env {
        cmd.args(["-x", k]).env(k, v);
    }
    let out = cmd
        .arg(&me)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .map_err(|e| format!("running mpirun: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    print!("{stdout}");
    if !out.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(stdout)
}

fn main() -> ExitCode {
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_RANK").is_some()
    {
        return ranks_main();
    }
    let required = std::env::var("SYCL_RS_REQUIRE_MPI").as_deref() == Ok("1");
    if Command::new("mpirun").arg("--version").output().is_err() {
        if required {
            eprintln!("collectives: mpirun not found, and SYCL_RS_REQUIRE_MPI=1");
            return ExitCode::FAILURE;
        }
        println!("collectives: skipped: no mpirun (install Open MPI: libopenmpi-dev openmpi-bin)");
        return ExitCode::SUCCESS;
    }
    let device = std::env::var("SYCL_RS_COLLECTIVES_DEVICE").unwrap_or_default();
    let runs: &[(usize, Option<&str>)] = &[(2, None), (3, None), (4, None), (4, Some("2"))];
    for &(np, per_node) in runs {
        let mut env = vec![("SYCL_RS_COLLECTIVES_DEVICE", device.as_str())];
        if let Some(k) = per_node {
            env.push(("SYCL_RS_RANKS_PER_NODE", k));
        }
        let start = Instant::now();
        let stdout = match mpirun(np, &env, &[]) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("collectives: {e}");
                return ExitCode::FAILURE;
            }
        };
        let oks = stdout.matches(": ok").count();
        let nodes = per_node.map_or(String::new(), |k| format!(", {k} per node"));
        if oks != np {
            eprintln!("collectives: {np} ranks{nodes}: {oks} of {np} ok");
            return ExitCode::FAILURE;
        }
        println!(
            "collectives: {np} ranks{nodes}: every operation ok ({:.1}s)",
            start.elapsed().as_secs_f64()
        );
    }
    // A rank that never calls, with host steps and with kernels (other devices: kernels).
    let steps: &[&str] = match device.as_str() {
        "" => &["host steps", "kernels"],
        _ => &["kernels"],
    };
    for &steps in steps {
        let env = [
            ("SYCL_RS_COLLECTIVES_DEVICE", device.as_str()),
            ("SYCL_RS_TEST_SILENT_RANK", steps),
        ];
        // Ranks leave without MPI_Finalize: mpirun must let the job run on.
        let extra = [
            "--mca",
            "orte_allowed_exit_without_sync",
            "1",
            "--mca",
            "orte_abort_on_non_zero_status",
            "0",
        ];
        match mpirun(2, &env, &extra) {
            Ok(s) if s.contains("collectives: rank 0 of 2: ok") => {
                println!("collectives: a rank that never calls ({steps}): rank 0 failed in time");
            }
            Ok(_) => {
                eprintln!(
                    "collectives: a rank that never calls ({steps}): rank 0 did not fail in time"
                );
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("collectives: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
