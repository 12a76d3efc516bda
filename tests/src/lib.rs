//! Test harness shared by the conformance and IPC suites: each device test runs on every device
//! of every backend present, named `[backend:type:index] test`, and is skipped with a printed
//! reason where the device lacks an aspect it needs. `SYCL_RS_REQUIRE_BACKENDS=a,b` turns a
//! missing backend into a failing test; `SYCL_RS_REQUIRE_PLATFORMS=name1,name2` does the same
//! for platforms whose names contain those strings.

use std::process::{Command, ExitCode};

use libtest_mimic::{Arguments, Failed, Trial};
use sycl::{Aspect, BackendKind, Device};

/// A test that runs once per device.
pub struct DeviceTest {
    /// Its name (`area::what`).
    pub name: &'static str,
    /// Aspects a device must have for the test to run.
    pub needs: &'static [Aspect],
    /// The test.
    pub run: fn(&Device) -> Result<(), Failed>,
}

/// A test that runs once.
pub struct GlobalTest {
    /// Its name.
    pub name: &'static str,
    /// The test.
    pub run: fn() -> Result<(), Failed>,
}

/// Turns any displayable error into a test failure.
pub fn fail(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// `assert!` for tests returning `Result<(), Failed>`.
#[macro_export]
macro_rules! check {
    ($cond:expr $(,)?) => {
        if !$cond {
            return Err(libtest_mimic::Failed::from(format!("check failed at {}:{}: {}", file!(), line!(), stringify!($cond))));
        }
    };
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(libtest_mimic::Failed::from(format!("check failed at {}:{}: {}", file!(), line!(), format!($($fmt)+))));
        }
    };
}

/// `assert_eq!` for tests returning `Result<(), Failed>`, with an optional message.
#[macro_export]
macro_rules! check_eq {
    ($a:expr, $b:expr $(,)?) => {
        $crate::check_eq!($a, $b, "")
    };
    ($a:expr, $b:expr, $($fmt:tt)+) => {{
        let (a, b) = (&$a, &$b);
        if a != b {
            return Err(libtest_mimic::Failed::from(format!(
                "check failed at {}:{}: {} == {} {}\n  left: {:?}\n right: {:?}",
                file!(),
                line!(),
                stringify!($a),
                stringify!($b),
                format!($($fmt)+),
                a,
                b
            )));
        }
    }};
}

/// Short label of a device: `native_cpu:cpu:0`.
pub fn device_label(device: &Device, index: usize) -> String {
    format!("{}:{}:{}", device.backend(), device.device_type(), index)
}

/// Every device, with its index among its backend's devices.
pub fn devices() -> Vec<(usize, Device)> {
    let mut per = std::collections::HashMap::<BackendKind, usize>::new();
    Device::all()
        .into_iter()
        .map(|d| {
            let i = per.entry(d.backend()).or_insert(0);
            let out = (*i, d);
            *i += 1;
            out
        })
        .collect()
}

fn require_trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    let present = devices();
    let failures = sycl::backend_load_failures();
    if let Ok(list) = std::env::var("SYCL_RS_REQUIRE_BACKENDS") {
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let name = name.to_string();
            let backend: Result<BackendKind, _> = name.parse();
            let count = backend
                .as_ref()
                .map(|b| present.iter().filter(|(_, d)| d.backend() == *b).count())
                .unwrap_or(0);
            let reason = failures
                .iter()
                .find(|f| backend.as_ref().is_ok_and(|b| f.backend == *b))
                .map(|f| f.reason.clone())
                .unwrap_or_else(|| "unknown backend name".into());
            trials.push(Trial::test(format!("require_backend::{name}"), move || {
                if count == 0 {
                    Err(Failed::from(format!(
                        "SYCL_RS_REQUIRE_BACKENDS names {name}, but it has no device: {reason}"
                    )))
                } else {
                    println!("backend {name}: {count} device(s)");
                    Ok(())
                }
            }));
        }
    }
    if let Ok(list) = std::env::var("SYCL_RS_REQUIRE_PLATFORMS") {
        let names: Vec<String> = sycl::Platform::all()
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        for want in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let want = want.to_string();
            let found = names.iter().any(|n| n.contains(&want));
            let names = names.clone();
            trials.push(Trial::test(format!("require_platform::{want}"), move || {
                if found {
                    Ok(())
                } else {
                    Err(Failed::from(format!("SYCL_RS_REQUIRE_PLATFORMS names `{want}`; platforms present: {names:?}")))
                }
            }));
        }
    }
    trials
}

/// Runs `test` on a thread of its own and gives up after `SYCL_RS_TEST_TIMEOUT` seconds
/// (default 300): a hang becomes a named failure instead of a stuck run. With
/// `SYCL_RS_TEST_TRACE=1` each test's start and end (with its time) are printed, so a log
/// shows what was running and what took long.
fn with_watchdog(
    name: String,
    test: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Result<(), Failed> {
    let limit = std::env::var("SYCL_RS_TEST_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300u64);
    let trace = std::env::var("SYCL_RS_TEST_TRACE").is_ok_and(|v| v == "1");
    let started = std::time::Instant::now();
    if trace {
        eprintln!("start {name}");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new().spawn(move || {
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(test)).unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(Failed::from(format!("panicked: {msg}")))
            });
        let _ = tx.send(outcome);
    });
    if let Err(e) = spawned {
        return Err(Failed::from(format!("cannot start the test thread: {e}")));
    }
    match rx.recv_timeout(std::time::Duration::from_secs(limit)) {
        Ok(outcome) => {
            if trace {
                eprintln!("end {name}: {:.2} s", started.elapsed().as_secs_f64());
            }
            outcome
        }
        Err(_) => {
            eprintln!("TIMEOUT {name}: still running after {limit} s");
            Err(Failed::from(format!(
                "timed out after {limit} s (SYCL_RS_TEST_TIMEOUT)"
            )))
        }
    }
}

/// Runs a suite: device tests × devices, global tests, and the `require_*` checks.
///
/// The suites run on every device: `ONEAPI_DEVICE_SELECTOR` from the caller's environment is
/// removed first (tests of the selector set it themselves, in children), so that no test
/// depends on it.
pub fn run_suite(device_tests: &[DeviceTest], global_tests: &[GlobalTest]) -> ExitCode {
    run_suite_where(device_tests, global_tests, |_, _| None)
}

/// [`run_suite`], where `skip(test, device)` may also skip a test on a device that has its
/// aspects, for a reason it returns (printed like a missing aspect): for guarantees that no
/// aspect names, such as "memory is shared as sealed memfds".
pub fn run_suite_where(
    device_tests: &[DeviceTest],
    global_tests: &[GlobalTest],
    skip: impl Fn(&DeviceTest, &Device) -> Option<String>,
) -> ExitCode {
    // Before any thread starts (the harness is single-threaded until it runs the trials).
    std::env::remove_var("ONEAPI_DEVICE_SELECTOR");
    let mut args = Arguments::from_args();
    // A driver may build one program at a time per process (PoCL holds one lock around its
    // compiler; Intel's CPU runtime builds one at a time too: `builds_one_at_a_time`), and a test
    // that builds kernels then blocks the test threads that wait on the same driver. So each test
    // runs on every device in turn (the devices' tests interleave rather than one device's queueing
    // behind another's), with more test threads than cores (twice as many, at most 4 more): a
    // thread blocked on one driver leaves its core to another device's test. (`--test-threads`
    // still decides.) And every other test of such a driver runs in a second process: the same
    // binary and arguments, which runs only those (`SHARD_ENV`), its output printed after this
    // process's own (`ONE_PROCESS_ENV` keeps the suite in one). The conformance suite on 2 cores,
    // cold PoCL cache: 151 s -> 116 s.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.test_threads.is_none() {
        args.test_threads = Some(cores + cores.min(4));
    }
    let devices = devices();
    let shard_child = std::env::var_os(SHARD_ENV).is_some();
    let sharded = shard_child
        || (!args.list
            && cores > 1
            && std::env::var_os(ONE_PROCESS_ENV).is_none()
            && devices.iter().any(|(_, d)| builds_one_at_a_time(d)));
    let mut trials = if shard_child {
        Vec::new()
    } else {
        require_trials()
    };
    for g in global_tests.iter().filter(|_| !shard_child) {
        let run = g.run;
        let name = g.name.to_string();
        trials.push(Trial::test(g.name, move || with_watchdog(name, run)));
    }
    // Per device: its runnable tests so far (every other one is the second process's).
    let mut serial_tests = vec![0usize; devices.len()];
    for t in device_tests {
        for (position, &(index, ref device)) in devices.iter().enumerate() {
            let label = device_label(device, index);
            let lacks: Vec<String> = t
                .needs
                .iter()
                .filter(|a| !device.has(**a))
                .map(|a| a.to_string())
                .collect();
            let missing: Vec<String> = (!lacks.is_empty())
                .then(|| format!("lacks {}", lacks.join(", ")))
                .into_iter()
                .chain(skip(t, device))
                .collect();
            // Which process runs it: every other test that runs on a driver that builds one
            // program at a time is the second's; the rest, and every skip, are the first's.
            let second = sharded && missing.is_empty() && builds_one_at_a_time(device) && {
                serial_tests[position] += 1;
                serial_tests[position] % 2 == 0
            };
            if second != shard_child {
                continue;
            }
            if missing.is_empty() {
                let d = device.clone();
                let run = t.run;
                let name = format!("[{label}] {}", t.name);
                trials.push(Trial::test(name.clone(), move || {
                    with_watchdog(name, move || run(&d))
                }));
            } else {
                let why = missing.join(", ");
                eprintln!("skip [{label}] {}: device {why}", t.name);
                trials.push(
                    Trial::test(format!("[{label}] {} (skipped: {why})", t.name), || Ok(()))
                        .with_ignored_flag(true),
                );
            }
        }
    }
    let second = (sharded && !shard_child).then(|| {
        let mut cmd = Command::new(std::env::current_exe().expect("current_exe"));
        cmd.args(std::env::args_os().skip(1)).env(SHARD_ENV, "1");
        // (Drained on a thread of its own: a full pipe would stop the child.)
        std::thread::spawn(move || cmd.output())
    });
    let conclusion = libtest_mimic::run(&args, trials);
    let Some(second) = second else {
        return conclusion.exit_code();
    };
    println!(
        "\nthe suite's second process (every other test of each driver that builds one program \
         at a time per process: PoCL, Intel's CPU OpenCL):"
    );
    let second_passed = match second.join() {
        Ok(Ok(out)) => {
            print!("{}", String::from_utf8_lossy(&out.stdout));
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            out.status.success()
        }
        Ok(Err(e)) => {
            println!("it did not start: {e}");
            false
        }
        Err(_) => false,
    };
    if conclusion.has_failed() || !second_passed {
        ExitCode::from(101)
    } else {
        ExitCode::SUCCESS
    }
}

/// Set in a suite's second process ([`run_suite_where`]).
const SHARD_ENV: &str = "SYCL_RS_TEST_SECOND_PROCESS";
/// Set by the caller: the whole suite in one process.
pub const ONE_PROCESS_ENV: &str = "SYCL_RS_TEST_ONE_PROCESS";

/// Whether `device` is PoCL's: a CPU OpenCL driver whose builds are slow and one at a time per
/// process (one lock around its compiler; two processes build two at once).
pub fn is_pocl(device: &Device) -> bool {
    device.backend() == BackendKind::OpenCl
        && device.platform().name() == "Portable Computing Language"
}

/// Whether `device`'s driver builds one program at a time per process, each taking about a
/// second of one core: PoCL, and Intel's CPU OpenCL runtime (its kernel suite with four test
/// threads kept 1.1 of 2 cores busy, 72 s; on its own in two processes, 40 s).
pub fn builds_one_at_a_time(device: &Device) -> bool {
    is_pocl(device)
        || (device.backend() == BackendKind::OpenCl
            && device.platform().name() == "Intel(R) OpenCL"
            && device.device_type() == sycl::DeviceType::Cpu)
}

/// Name of the environment variable that tells a re-executed test binary which child role to
/// play.
pub const CHILD_ROLE_ENV: &str = "SYCL_RS_TEST_CHILD_ROLE";

/// A child role: its arguments in, success or a message out.
pub type ChildRole = fn(&[String]) -> Result<(), String>;

/// If this process is a child started by [`child_command`], runs its role and exits.
pub fn run_child_role_if_any(roles: &[(&str, ChildRole)]) {
    let Ok(role) = std::env::var(CHILD_ROLE_ENV) else {
        return;
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match roles.iter().find(|(name, _)| *name == role) {
        Some((_, f)) => match f(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("child role {role} failed: {e}");
                1
            }
        },
        None => {
            eprintln!("unknown child role {role}");
            2
        }
    };
    std::process::exit(code);
}

/// A command that re-runs this test binary as child `role` with `args`.
pub fn child_command(role: &str, args: &[String]) -> Command {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.env(CHILD_ROLE_ENV, role).args(args);
    cmd
}

/// Starts `cmd` with its stdout piped and waits for the first line it prints, which must be
/// `ready_line` (a child announcing that it is set up).
pub fn start_child(cmd: &mut Command, ready_line: &str) -> Result<std::process::Child, Failed> {
    use std::io::BufRead;
    let mut child = spawn(cmd.stdout(std::process::Stdio::piped()))?;
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let mut line = String::new();
    out.read_line(&mut line).map_err(fail)?;
    if line.trim() != ready_line {
        let _ = child.kill();
        return Err(Failed::from(format!(
            "the child said `{}` instead of `{ready_line}`",
            line.trim()
        )));
    }
    // Give the pipe back, so that what the child prints later has a reader.
    child.stdout = Some(out.into_inner());
    Ok(child)
}

/// Starts `cmd`, again while exec says ETXTBSY: a binary the test has just written (a copy
/// of itself) stays open for writing in any child that another test thread forked meanwhile,
/// until that child's own exec closes it, a moment later.
pub fn spawn(cmd: &mut Command) -> Result<std::process::Child, Failed> {
    for _ in 0..200 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            started => return started.map_err(fail),
        }
    }
    cmd.spawn().map_err(fail)
}

/// Runs child `role` to completion; its failure (with stderr) is the test's failure.
pub fn run_child(role: &str, args: &[String]) -> Result<String, Failed> {
    let out = child_command(role, args).output().map_err(fail)?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(Failed::from(format!(
            "child {role} exited with {}: {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// A device selector string that names `device` exactly (`backend:index`).
pub fn selector_for(device: &Device) -> String {
    let index = devices()
        .into_iter()
        .find(|(_, d)| d == device)
        .map(|(i, _)| i)
        .unwrap_or(0);
    format!("{}:{}", device.backend(), index)
}

/// The device a selector string (from [`selector_for`]) names, among every device: children
/// find the parent's device whatever `ONEAPI_DEVICE_SELECTOR` says.
pub fn device_from_selector(spec: &str) -> Result<Device, String> {
    let (backend, index) = spec
        .split_once(':')
        .ok_or_else(|| format!("`{spec}` is not backend:index"))?;
    let backend: BackendKind = backend.parse().map_err(|e: sycl::Error| e.to_string())?;
    let index: usize = index.parse().map_err(|e| format!("`{spec}`: {e}"))?;
    devices()
        .into_iter()
        .find(|(i, d)| d.backend() == backend && *i == index)
        .map(|(_, d)| d)
        .ok_or_else(|| format!("no device {spec}"))
}

/// Kernel source for a vector add `c[i] = a[i] + b[i]` (f32) for `device`'s compiler, if any.
pub fn vector_add_source(device: &Device) -> Option<sycl::Source<'static>> {
    if device.has(Aspect::ExtOneapiKernelCompilerOpencl) {
        Some(sycl::Source::OpenClC(
            "__kernel void vadd(__global const float* a, __global const float* b, __global float* c, uint n) {\n\
               size_t i = get_global_id(0); if (i < n) c[i] = a[i] + b[i];\n}\n",
        ))
    } else if device.has(Aspect::ExtSyclRsKernelCompilerCuda) {
        Some(sycl::Source::CudaC(
            "extern \"C\" __global__ void vadd(const float* a, const float* b, float* c, unsigned n) {\n\
               unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i];\n}\n",
        ))
    } else {
        None
    }
}

/// Offsets of header fields in IPC handle bytes (format version 2, spec/ipc-handle-format.md),
/// for tests that forge handles as a hostile peer would.
pub mod wire {
    /// Exporter pid (u32).
    pub const PID: usize = 16;
    /// Exporter start time (u64).
    pub const START_TIME: usize = 24;
    /// Exporter nonce (u64).
    pub const NONCE: usize = 32;
    /// Object size (u64).
    pub const OBJECT_SIZE: usize = 56;
    /// Descriptor count (u8).
    pub const FD_COUNT: usize = 68;
    /// Descriptor numbers (8 x i32).
    pub const FDS: usize = 72;
    /// CRC-32 (u32) of bytes 0..112 and the payload.
    pub const CRC: usize = 112;
    /// Header length.
    pub const HEADER_LEN: usize = 116;

    /// `bytes` with `value` written at `at` and the checksum recomputed: a forgery that passes
    /// `Handle::from_bytes`.
    pub fn forge(bytes: &[u8], at: usize, value: &[u8]) -> Vec<u8> {
        let mut b = bytes.to_vec();
        b[at..at + value.len()].copy_from_slice(value);
        let mut h = crc32fast::Hasher::new();
        h.update(&b[..CRC]);
        h.update(&b[HEADER_LEN..]);
        let sum = h.finalize();
        b[CRC..CRC + 4].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// The descriptor numbers a handle names (in the exporter), the export ticket last.
    pub fn fds(bytes: &[u8]) -> Vec<i32> {
        (0..bytes[FD_COUNT] as usize)
            .map(|i| {
                let at = FDS + 4 * i;
                i32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
            })
            .collect()
    }
}

/// Start time of process `pid` (`/proc/PID/stat` field 22), as IPC handles record it.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
