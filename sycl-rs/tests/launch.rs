//! Ranks of one node without MPI (issue 32, item 1): `NodeRanks::join` from a launcher's
//! environment, and teams over it.
//!
//! `cargo test -p sycl-rs --test launch` starts copies of itself as the ranks:
//! - 2 ranks with sycl-rs's variables, 3 ranks with torchrun's, and (when `mpirun` exists; its
//!   absence fails with `SYCL_RS_REQUIRE_MPI=1`) 2 ranks under `mpirun` with MPI never
//!   initialised: a node buffer, then every collective
//!   operation, type and reduction against a host reference, and the mismatch cases;
//! - a rank that never calls: rank 0 fails in time;
//! - a rank with another local size: refused at once (`Errc::Invalid`), rank 0 times out;
//! - a second group under a key in use: `Errc::Runtime` at once;
//! - (as root) a process of another user: refused both ways.
//!
//! The device is the native CPU (`SYCL_RS_COLLECTIVES_DEVICE`: `common::checks::device_choice`).

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

use common::checks::*;
use sycl::collective::{Algorithm, Team, TeamOptions};
use sycl::ipc::transport::{Channel, Listener, PeerPolicy};
use sycl::ranks::{Launch, NodeRanks, RanksOptions};
use sycl::{Errc, Queue};

/// Variables of launchers that must not leak from the caller's environment into the ranks.
const LAUNCHER_VARS: &[&str] = &[
    "SYCL_RS_LOCAL_RANK",
    "SYCL_RS_LOCAL_SIZE",
    "SYCL_RS_JOB",
    "SYCL_RS_RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_NAMESPACE",
    "PMIX_RANK",
    "OMPI_MCA_ess_base_jobid",
];

fn options(timeout: Duration) -> RanksOptions {
    let device = device_choice();
    RanksOptions {
        device,
        timeout,
        ..RanksOptions::default()
    }
}

/// Every rank writes its local rank into its part; every rank reads every part.
fn node_buffer(ranks: &NodeRanks, q: &Queue) -> R {
    let buffer = ranks.node_buffer::<u32>(q, 64).map_err(e2s)?;
    q.fill(buffer.local(), ranks.local_rank() as u32 + 1, &[])
        .and_then(|e| e.wait())
        .map_err(e2s)?;
    ranks.barrier().map_err(e2s)?;
    for r in 0..ranks.local_size() {
        let got = q.to_vec(buffer.peer(r).map_err(e2s)?).map_err(e2s)?;
        if got.iter().any(|&v| v != r as u32 + 1) {
            return Err(format!(
                "node buffer: local rank {r}'s part reads {:?}",
                &got[..4]
            ));
        }
    }
    ranks.barrier().map_err(e2s)
}

fn team_case(ranks: &NodeRanks, q: &Queue) -> R {
    node_buffer(ranks, q)?;
    let native = q.backend() == sycl::BackendKind::NativeCpu;
    let forms = [
        (Algorithm::OneShot, usize::MAX, "one-shot staged"),
        (Algorithm::TwoShot, 0, "two-shot"),
    ];
    for (algorithm, staged_max_bytes, name) in forms {
        let options = TeamOptions {
            buffer_bytes: 4096,
            algorithm,
            staged_max_bytes,
            ..TeamOptions::default()
        };
        let mut team = Team::new(ranks, q, options).map_err(e2s)?;
        for count in [0, 7, 1500] {
            every_type(&mut team, q, count, &format!("{name}, {count} elements,"))?;
        }
        overlapping(&mut team, q)?;
        ordering(&mut team, q, native)?;
    }
    mismatches(ranks, q, true)
}

fn rank_main(case: &str) -> ExitCode {
    let launch = Launch::from_env();
    let label = launch.as_ref().map_or(0, |l| l.rank);
    let result = (|| -> R {
        match case {
            "team" | "silent" => {
                let ranks =
                    NodeRanks::join(&launch.map_err(e2s)?, options(Duration::from_secs(30)))
                        .map_err(e2s)?;
                let q = Queue::in_order(ranks.device()).map_err(e2s)?;
                if case == "team" {
                    team_case(&ranks, &q)
                } else {
                    silent_rank(&ranks, &q, true)
                }
            }
            // A join that must fail with the code `SYCL_RS_LAUNCH_EXPECT` names, within its
            // 2 s time-out (plus start-up), or at once for `Invalid`.
            "fails" => {
                let want = match std::env::var("SYCL_RS_LAUNCH_EXPECT").as_deref() {
                    Ok("Invalid") => Errc::Invalid,
                    _ => Errc::Runtime,
                };
                if let Ok(ms) = std::env::var("SYCL_RS_LAUNCH_DELAY_MS") {
                    std::thread::sleep(Duration::from_millis(ms.parse().unwrap_or(0)));
                }
                let start = Instant::now();
                let r = NodeRanks::join(&launch.map_err(e2s)?, options(Duration::from_secs(2)));
                let took = start.elapsed();
                let r = r.map(drop);
                println!("launch: join: {r:?} after {:.2}s", took.as_secs_f64());
                wants(r, want, "join")?;
                let limit = if want == Errc::Invalid { 1.5 } else { 8.0 };
                if took.as_secs_f64() > limit {
                    return Err(format!("the refusal took {took:?}"));
                }
                Ok(())
            }
            // Another user's process that knows the hub's name: it will not talk to a hub of
            // another user, and the hub hangs up on it even when it insists.
            "intrude" => {
                let name = std::env::var("SYCL_RS_HUB_NAME").map_err(|e| e.to_string())?;
                let r = Channel::connect(&name).map(drop);
                println!("launch: intruder: connect: {r:?}");
                wants(r, Errc::Invalid, "connecting to another user's hub")?;
                let channel = Channel::connect_with(&name, PeerPolicy::users([0]))
                    .map_err(|e| format!("connect_with: {e}"))?;
                let mut hello = b"SYH1".to_vec();
                for word in [1u32, 2, 1, 0] {
                    hello.extend_from_slice(&word.to_le_bytes());
                }
                let _ = channel.send(&hello);
                channel
                    .set_recv_timeout(Some(Duration::from_secs(5)))
                    .map_err(e2s)?;
                match channel.recv() {
                    Err(e) => {
                        println!("launch: intruder: the hub hung up: {e}");
                        Ok(())
                    }
                    Ok(m) => Err(format!("the hub answered another user: {m:?}")),
                }
            }
            // Another user's process binds the hub's name first and holds it.
            "squat" => {
                let name = std::env::var("SYCL_RS_HUB_NAME").map_err(|e| e.to_string())?;
                let _listener = Listener::bind(&name).map_err(e2s)?;
                std::thread::sleep(Duration::from_secs(4));
                Ok(())
            }
            other => Err(format!("unknown case {other}")),
        }
    })();
    match result {
        Ok(()) => {
            println!("launch: rank {label}: ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("launch: rank {label}: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One rank process: the test binary in `case`, with `vars` over a clean launcher environment.
fn rank(case: &str, vars: &[(&str, String)]) -> Command {
    let me = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "5", "300"]).arg(me);
    for v in LAUNCHER_VARS {
        cmd.env_remove(v);
    }
    cmd.env("SYCL_RS_LAUNCH_CASE", case)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn own(local_rank: usize, local_size: usize, job: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SYCL_RS_LOCAL_RANK", local_rank.to_string()),
        ("SYCL_RS_LOCAL_SIZE", local_size.to_string()),
        ("SYCL_RS_JOB", job.to_string()),
    ]
}

/// Runs the commands together; every one's output.
fn run_all(cmds: Vec<Command>) -> Result<Vec<Output>, String> {
    let children = cmds
        .into_iter()
        .map(|mut c| c.spawn().map_err(|e| format!("spawn: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    children
        .into_iter()
        .map(|c| c.wait_with_output().map_err(|e| format!("wait: {e}")))
        .collect()
}

/// Every output says ok; prints them all.
fn all_ok(what: &str, outputs: &[Output]) -> R {
    let mut failed = false;
    for (i, out) in outputs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        print!("{stdout}");
        if !out.status.success() || !stdout.contains(": ok") {
            failed = true;
            eprintln!(
                "launch: {what}: process {i}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    if failed {
        Err(format!("{what}: a rank failed"))
    } else {
        println!("launch: {what}: ok");
        Ok(())
    }
}

fn job(name: &str) -> String {
    format!("launch-test/{}/{name}", std::process::id())
}

fn parent() -> R {
    // 2 ranks, sycl-rs's variables.
    let key = job("own");
    all_ok(
        "2 ranks (SYCL_RS_*)",
        &run_all((0..2).map(|r| rank("team", &own(r, 2, &key))).collect())?,
    )?;

    // 3 ranks, torchrun's variables.
    let torchrun = |r: usize| {
        vec![
            ("LOCAL_RANK", r.to_string()),
            ("LOCAL_WORLD_SIZE", "3".to_string()),
            ("RANK", (10 + r).to_string()),
            ("WORLD_SIZE", "13".to_string()),
            ("GROUP_RANK", "1".to_string()),
            ("MASTER_ADDR", "127.0.0.1".to_string()),
            (
                "MASTER_PORT",
                (20000 + std::process::id() % 10000).to_string(),
            ),
            ("TORCHELASTIC_RUN_ID", job("torchrun")),
            ("TORCHELASTIC_RESTART_COUNT", "0".to_string()),
        ]
    };
    all_ok(
        "3 ranks (torchrun's variables)",
        &run_all((0..3).map(|r| rank("team", &torchrun(r))).collect())?,
    )?;

    // 2 ranks under mpirun, MPI never initialised: Open MPI's variables.
    if Command::new("mpirun").arg("--version").output().is_ok() {
        let me = std::env::current_exe().expect("current_exe");
        let mut cmd = Command::new("timeout");
        cmd.args([
            "-k",
            "5",
            "300",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
        ])
        .args([
            "-np",
            "2",
            "-x",
            "SYCL_RS_LAUNCH_CASE",
            "-x",
            "SYCL_RS_COLLECTIVES_DEVICE",
        ])
        .arg(me);
        for v in LAUNCHER_VARS {
            cmd.env_remove(v);
        }
        let device = std::env::var("SYCL_RS_COLLECTIVES_DEVICE").unwrap_or_default();
        let out = cmd
            .env("SYCL_RS_LAUNCH_CASE", "team")
            .env("SYCL_RS_COLLECTIVES_DEVICE", device)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .map_err(|e| format!("mpirun: {e}"))?;
        let oks = String::from_utf8_lossy(&out.stdout).matches(": ok").count();
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if oks != 2 {
            eprintln!("{}", String::from_utf8_lossy(&out.stderr));
            return Err(format!("2 ranks under mpirun without MPI: {oks} of 2 ok"));
        }
        println!("launch: 2 ranks under mpirun (Open MPI's variables, no MPI calls): ok");
    } else if std::env::var("SYCL_RS_REQUIRE_MPI").as_deref() == Ok("1") {
        return Err("mpirun not found, and SYCL_RS_REQUIRE_MPI=1".into());
    } else {
        println!("launch: no mpirun: the Open MPI environment case is skipped");
    }

    // A rank that never calls: rank 0 fails within the team's 2 s time-out (rank 1 leaves
    // without a word once the team is formed).
    let key = job("silent");
    let outputs = run_all((0..2).map(|r| rank("silent", &own(r, 2, &key))).collect())?;
    all_ok("a rank that never calls", &outputs[..1])?;

    // A rank that says another local size is refused at once; rank 0 times out.
    let key = job("size");
    let mut wrong = own(1, 3, &key);
    wrong.push(("SYCL_RS_LAUNCH_EXPECT", "Invalid".into()));
    all_ok(
        "a rank with another local size",
        &run_all(vec![rank("fails", &own(0, 2, &key)), rank("fails", &wrong)])?,
    )?;

    // A second group under a key in use fails at once; the first runs on.
    let key = job("dup");
    let mut second = own(0, 2, &key);
    second.push(("SYCL_RS_LAUNCH_DELAY_MS", "300".into()));
    let mut cmds: Vec<Command> = (0..2).map(|r| rank("team", &own(r, 2, &key))).collect();
    cmds.push(rank("fails", &second));
    all_ok("a second group under a key in use", &run_all(cmds)?)?;

    // Another user's process can neither join nor be joined (root only: it must switch user).
    if rustix::process::geteuid().is_root() {
        let nobody = |case: &str, name: String| {
            let mut cmd = rank(case, &[("SYCL_RS_HUB_NAME", name)]);
            cmd.uid(65534).gid(65534);
            cmd
        };
        // It connects to our hub: refused both ways; rank 0 times out, naming it.
        let key = job("intrude");
        let name = Launch::new(0, 2, key.clone()).hub_name();
        let leader = rank("fails", &own(0, 2, &key))
            .spawn()
            .map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_millis(300));
        let intruder = run_all(vec![nobody("intrude", name)])?;
        let leader_out = leader.wait_with_output().map_err(|e| e.to_string())?;
        let said = String::from_utf8_lossy(&leader_out.stdout).into_owned();
        if !said.contains("65534") {
            return Err(format!("rank 0 did not name the refused user: {said}"));
        }
        all_ok(
            "another user's process joining",
            &[intruder[0].clone(), leader_out],
        )?;
        // It holds our hub's name first: rank 0 cannot bind it, rank 1 will not talk to it.
        let key = job("squat");
        let name = Launch::new(0, 2, key.clone()).hub_name();
        let mut squatter = nobody("squat", name).spawn().map_err(|e| e.to_string())?;
        std::thread::sleep(Duration::from_millis(500));
        let mut member = own(1, 2, &key);
        member.push(("SYCL_RS_LAUNCH_EXPECT", "Invalid".into()));
        let outputs = run_all(vec![
            rank("fails", &own(0, 2, &key)),
            rank("fails", &member),
        ]);
        let _ = squatter.kill();
        let _ = squatter.wait();
        all_ok("another user's process holding the hub's name", &outputs?)?;
    } else {
        println!("launch: not root: the other-user case is skipped (it must switch user)");
    }
    Ok(())
}

fn main() -> ExitCode {
    if let Ok(case) = std::env::var("SYCL_RS_LAUNCH_CASE") {
        return rank_main(&case);
    }
    let start = Instant::now();
    match parent() {
        Ok(()) => {
            println!(
                "launch: every case ok ({:.1}s)",
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("launch: {e}");
            ExitCode::FAILURE
        }
    }
}
