//! Differential test of the bounds proofs of `#[sycl::kernel]` (sycl-macros/src/bounds.rs).
//!
//! tests/build.rs writes random kernels, each twice: `kN` as usual and `kN_unproved` with
//! `#[sycl::kernel(__no_proofs)]`, where every bounds query answers "not proved" (every
//! access checked; no narrowed index, no counted-loop form, no run-time guard). On every
//! device, each kernel runs a few launches of random geometry, slice lengths (long enough, and
//! too short so that accesses go out of bounds), scalar arguments (small, and near `u32::MAX`
//! and `usize::MAX`) and data, both forms with the same inputs and fresh output buffers filled
//! with the same pattern. They must agree:
//! - whether the launch failed, and with which error code;
//! - the bytes of every output buffer when both succeeded;
//! - always, the bytes around each slice (each slice is a sub-range of a larger allocation):
//!   the checked form never writes there, so neither may the proved one.
//!
//! A proof that claims an index in bounds that is not shows up as "proved form succeeded,
//! checked form failed" (or as bytes written around a slice). What a failed launch wrote
//! inside its slices is unspecified (spec/kernels.md), so it is compared only where
//! `SYCL_RS_PROOF_COMPARE_FAILED=1` asks (GPU-style devices, where a failed work-item
//! stops in a defined way, should agree there too).
//!
//! Environment: `SYCL_RS_PROOF_SEED`, `SYCL_RS_PROOF_KERNELS` (build time: which kernels,
//! how many); `SYCL_RS_PROOF_LAUNCHES` (launches per kernel and device, default 12);
//! `SYCL_RS_PROOF_EVERY_KERNEL=1` runs the odd-numbered kernels on PoCL too (by default only
//! the even ones run there: see `main`); `SYCL_RS_PROOF_VERBOSE=1` prints a line per kernel
//! and device (how many launches succeeded); `SYCL_RS_PROOF_TRACE=1` prints each launch
//! before it runs (to find a crash).

use std::fmt::Write as _;
use std::process::ExitCode;

use libtest_mimic::Failed;
use sycl::{Device, Errc, Queue, Range, UsmRange};
use sycl_tests::fail;

/// A generated kernel's launch: both forms take the same arguments.
type LaunchFn = fn(&Queue, Range, &Args) -> sycl::Result<sycl::Event>;

/// A generated kernel.
pub struct GenKernel {
    /// Its number (`kN`).
    pub index: usize,
    /// Its source (the proved form's).
    pub source: &'static str,
    /// Dimensions its queries use: its launches have that many.
    pub dims: u8,
    /// Whether it needs an nd-range (local queries or work-groups).
    pub nd: bool,
    /// How many probes (`if p == i { .. }`) it has; 0: none.
    pub probes: u64,
    /// Launches `kN`.
    pub proved: LaunchFn,
    /// Launches `kN_unproved`.
    pub unproved: LaunchFn,
}

/// The arguments of every generated kernel.
pub struct Args {
    x: UsmRange<u32>,
    y: UsmRange<u32>,
    out: UsmRange<u32>,
    acc: UsmRange<u32>,
    res: UsmRange<u32>,
    a: u32,
    b: u32,
    n: usize,
    m: usize,
    p: u32,
}

#[allow(clippy::all, unused)]
mod generated {
    use super::{test_kernel, Args, GenKernel};
    use sycl::Aspect;
    use sycl_tests::DeviceTest;

    include!(concat!(env!("OUT_DIR"), "/random_kernels.rs"));
}

/// Elements before and after each slice in its allocation.
const PRE: usize = 16;
const POST: usize = 48;
/// The slices' names, in `Args` order.
const NAMES: [&str; 5] = ["x", "y", "out", "acc", "res"];

include!("rng.rs");

/// One launch's inputs: the same for both forms.
#[derive(Clone, Debug)]
struct Setup {
    global: [usize; 3],
    local: Option<[usize; 3]>,
    dims: u8,
    /// Slice lengths, in `NAMES` order.
    lens: [usize; 5],
    a: u32,
    b: u32,
    n: usize,
    m: usize,
    /// The probe that runs.
    p: u32,
    /// Seed of `x`'s and `y`'s contents.
    data: u64,
}

impl Setup {
    fn range(&self) -> Range {
        let g = self.global;
        let r = match self.dims {
            1 => Range::d1(g[0]),
            2 => Range::d2(g[0], g[1]),
            _ => Range::d3(g[0], g[1], g[2]),
        };
        match self.local {
            Some(l) => r.with_local(l),
            None => r,
        }
    }

    fn describe(&self) -> String {
        let d = self.dims as usize;
        let mut s = format!("range {:?}", &self.global[..d]);
        match self.local {
            Some(l) => {
                let _ = write!(s, " with work-groups {:?}", &l[..d]);
            }
            None => s.push_str(" (plain)"),
        }
        let lens: Vec<String> = NAMES
            .iter()
            .zip(self.lens)
            .map(|(n, l)| format!("{n}.len()={l}"))
            .collect();
        let _ = write!(
            s,
            "; {}; a={} b={} n={} m={} p={}; data seed {:#x}",
            lens.join(" "),
            self.a,
            self.b,
            self.n,
            self.m,
            self.p,
            self.data
        );
        s
    }
}

const U32_SPECIAL: [u32; 8] = [
    0x7fff_fffe,
    0x7fff_ffff,
    0x8000_0000,
    0x8000_0001,
    0xffff_fff0,
    0xffff_fffe,
    0xffff_ffff,
    0x1_0000,
];
const USIZE_SPECIAL: [usize; 12] = [
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x1_0000_0001,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    usize::MAX - 16,
    usize::MAX - 1,
    usize::MAX,
    1 << 40,
    0xffff_fff0,
];

/// The work-group shapes a kernel's nd-range launches choose from on `device`: two per kernel
/// (an OpenCL program is built per work-group size: more shapes, more builds).
fn shapes(rng: &mut Rng, dims: usize, device: &Device) -> [[usize; 3]; 2] {
    let max_group = device.max_work_group_size().clamp(1, 64);
    let items = device.max_work_item_sizes();
    let mut out = [[1usize; 3]; 2];
    for l in &mut out {
        let mut total = 1;
        for (d, v) in l.iter_mut().enumerate().take(dims) {
            let cap = if items[d] > 0 { items[d] } else { 64 };
            let mut x = (*rng.pick(&[1usize, 2, 3, 4, 5, 8, 8, 16, 32])).min(cap);
            while x > 1 && total * x > max_group {
                x /= 2;
            }
            *v = x;
            total *= x;
        }
    }
    out
}

/// A random launch of `k`.
fn setup(rng: &mut Rng, k: &GenKernel, shapes: &[[usize; 3]; 2], launch: usize) -> Setup {
    let dims = k.dims as usize;
    // Friendly: every slice long and as long as the others, small scalars: most launches
    // succeed. Tight: small scalars, slices about as long as the range (where an index at
    // the edge of its bound goes out of bounds alone). Hostile: anything.
    let mode = rng.below(10);
    let (friendly, tight) = (mode < 4, (4..7).contains(&mode));
    let mut global = [1usize; 3];
    let mut local = None;
    if k.nd || rng.chance(30) {
        let l = shapes[rng.below(2) as usize];
        for d in 0..dims {
            let groups = match dims {
                1 => rng.upto(1, 6),
                2 => rng.upto(1, 4),
                _ => rng.upto(1, 2),
            };
            global[d] = l[d] * groups;
        }
        local = Some(l);
    } else {
        for g in global.iter_mut().take(dims) {
            *g = match dims {
                1 => rng.upto(if friendly { 1 } else { 0 }, 160),
                2 => rng.upto(1, 14),
                _ => rng.upto(1, 5),
            };
        }
    }
    let total: usize = global.iter().product();
    let long = total * *rng.pick(&[2usize, 4, 8]) + rng.upto(64, 300);
    let edge = |rng: &mut Rng| {
        let base = match rng.below(4) {
            0 => global[rng.below(dims as u64) as usize],
            1 => local.map_or(total, |l: [usize; 3]| l[0]),
            _ => total,
        };
        (base + rng.upto(0, 4)).saturating_sub(2)
    };
    let mut lens = [0usize; 5];
    for (i, l) in lens.iter_mut().enumerate() {
        *l = if friendly {
            long
        } else if tight {
            // (`res`, which every work-item writes last, stays long.)
            if i < 4 && rng.chance(70) {
                edge(rng)
            } else {
                long
            }
        } else {
            match rng.below(8) {
                0 => rng.upto(0, 3),
                1 => total.saturating_sub(1),
                2 => total,
                3 => total + 1,
                4 => total * 2 + rng.upto(0, 8),
                _ => rng.upto(0, 300),
            }
        };
    }
    let small_u32 = |rng: &mut Rng| rng.upto(0, 9) as u32;
    let any_u32 = |rng: &mut Rng| match rng.below(3) {
        0 => rng.upto(0, 300) as u32,
        1 => *rng.pick(&U32_SPECIAL),
        _ => rng.next() as u32,
    };
    let any_usize = |rng: &mut Rng| match rng.below(3) {
        0 => rng.upto(0, 300),
        1 => *rng.pick(&USIZE_SPECIAL),
        _ => rng.next() as usize,
    };
    let (a, b, n, m) = if friendly || tight {
        (
            small_u32(rng),
            small_u32(rng),
            rng.upto(0, 9),
            rng.upto(0, 9),
        )
    } else {
        (any_u32(rng), any_u32(rng), any_usize(rng), any_usize(rng))
    };
    // Each probe in turn (and now and then none).
    let p = if k.probes > 0 && !rng.chance(10) {
        (launch as u64 % k.probes) as u32
    } else {
        u32::MAX
    };
    Setup {
        global,
        local,
        dims: k.dims,
        lens,
        a,
        b,
        n,
        m,
        p,
        data: rng.next(),
    }
}

/// What a form did.
#[derive(Clone, Debug, PartialEq)]
enum Status {
    Ok,
    /// Refused at submit.
    Refused(Errc, String),
    /// The launch's event reported an error.
    Failed(Errc, String),
}

impl Status {
    fn code(&self) -> Option<Errc> {
        match self {
            Status::Ok => None,
            Status::Refused(c, _) | Status::Failed(c, _) => Some(*c),
        }
    }

    fn same(&self, other: &Status) -> bool {
        match (self, other) {
            (Status::Ok, Status::Ok) => true,
            (Status::Refused(a, _), Status::Refused(b, _)) => a == b,
            (Status::Failed(a, _), Status::Failed(b, _)) => a == b,
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Status::Ok => "succeeded".into(),
            Status::Refused(c, m) => format!("refused at submit: {c:?}: {m}"),
            Status::Failed(c, m) => format!("failed: {c:?}: {m}"),
        }
    }
}

/// `x`'s and `y`'s contents (whole allocations): mostly small numbers, which make in-bounds
/// indices, and some large ones.
fn input(seed: u64, which: u64, len: usize) -> Vec<u32> {
    let mut rng = Rng(seed ^ which.wrapping_mul(0x1234_5678_9abc_def1));
    let small = len.max(8) as u64;
    (0..PRE + len + POST)
        .map(|_| match rng.below(20) {
            0..=15 => rng.below(small) as u32,
            16 | 17 => rng.next() as u32,
            _ => *rng.pick(&U32_SPECIAL),
        })
        .collect()
}

/// The pattern outputs start with (whole allocations; the same for both forms).
fn pattern(which: usize, len: usize) -> Vec<u32> {
    (0..PRE + len + POST)
        .map(|i| 0xa5a5_0000 ^ ((which as u32) << 12) ^ i as u32)
        .collect()
}

/// Runs one form over `s`: its status and the whole allocations of `out`, `acc`, `res`.
fn run_form(q: &Queue, f: LaunchFn, s: &Setup) -> Result<(Status, Vec<Vec<u32>>), Failed> {
    let mut mem = Vec::new();
    for (i, &len) in s.lens.iter().enumerate() {
        let init = match i {
            0 | 1 => input(s.data, i as u64, len),
            _ => pattern(i, len),
        };
        let m = sycl::malloc_device::<u32>(init.len(), q).map_err(fail)?;
        q.write(&m, &init).map_err(fail)?;
        mem.push(m);
    }
    let part = |i: usize| mem[i].range(PRE..PRE + s.lens[i]).map_err(fail);
    let args = Args {
        x: part(0)?,
        y: part(1)?,
        out: part(2)?,
        acc: part(3)?,
        res: part(4)?,
        a: s.a,
        b: s.b,
        n: s.n,
        m: s.m,
        p: s.p,
    };
    let status = match f(q, s.range(), &args) {
        Err(e) => Status::Refused(e.code(), e.message().to_string()),
        Ok(ev) => match ev.wait() {
            Ok(()) => Status::Ok,
            Err(e) => Status::Failed(e.code(), e.message().to_string()),
        },
    };
    drop(args);
    let mut outs = Vec::new();
    for m in &mem[2..] {
        outs.push(q.to_vec(m).map_err(fail)?);
    }
    Ok((status, outs))
}

/// The differing elements of the outputs (at most `limit` listed), as lines; `inside` says
/// whether elements inside the slices count or only those around them.
fn differences(
    s: &Setup,
    proved: &[Vec<u32>],
    unproved: &[Vec<u32>],
    inside: bool,
    limit: usize,
) -> (usize, Vec<String>) {
    let mut count = 0;
    let mut lines = Vec::new();
    for (w, (p, u)) in proved.iter().zip(unproved).enumerate() {
        let len = s.lens[w + 2];
        for (at, (pv, uv)) in p.iter().zip(u).enumerate() {
            let within = (PRE..PRE + len).contains(&at);
            if pv == uv || (within && !inside) {
                continue;
            }
            count += 1;
            if lines.len() < limit {
                let place = if within {
                    format!("{}[{}]", NAMES[w + 2], at - PRE)
                } else if at < PRE {
                    format!(
                        "{} element {} BEFORE the slice (outside it!)",
                        NAMES[w + 2],
                        PRE - at
                    )
                } else {
                    format!(
                        "{}[{}], PAST the slice's end (outside it!)",
                        NAMES[w + 2],
                        at - PRE
                    )
                };
                lines.push(format!(
                    "    {place}: proved {pv:#010x}, unproved {uv:#010x}"
                ));
            }
        }
    }
    (count, lines)
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// Runs kernel `k`'s launches on `device`; every mismatch is reported.
pub fn check_kernel(device: &Device, k: &GenKernel) -> Result<(), Failed> {
    let launches: usize = std::env::var("SYCL_RS_PROOF_LAUNCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let trace = env_flag("SYCL_RS_PROOF_TRACE");
    // A failed work-item on an OpenCL device (GPU-style failures) stops in a defined way and
    // the others run on, so two correct forms write the same there too; on the native CPU a
    // failure is a panic that ends the rest of a chunk of work-items, which chunk depends on
    // scheduling.
    let compare_failed = match std::env::var("SYCL_RS_PROOF_COMPARE_FAILED") {
        Ok(v) => v == "1",
        Err(_) => device.backend() != sycl::BackendKind::NativeCpu,
    };
    let q = Queue::in_order(device).map_err(fail)?;
    let mut rng = Rng(generated::SEED ^ (k.index as u64 + 1).wrapping_mul(0xd1b5_4a32_d192_ed03));
    let started = std::time::Instant::now();
    let mut first_failure = None;
    let mut report = String::new();
    let mut bad = 0;
    let (mut ok, mut failed) = (0, 0);
    let shapes = shapes(&mut rng, k.dims as usize, device);
    for launch in 0..launches {
        let s = setup(&mut rng, k, &shapes, launch);
        if trace {
            eprintln!("k{} launch {launch}: {}", k.index, s.describe());
        }
        // (What a crash's report names: see `test_kernel`.)
        progress(&format!("launch {launch} (proved form): {}", s.describe()));
        let (ps, pout) = run_form(&q, k.proved, &s)?;
        progress(&format!(
            "launch {launch} (unproved form): {}",
            s.describe()
        ));
        let (us, uout) = run_form(&q, k.unproved, &s)?;
        let mut problems = Vec::new();
        // A form the driver could not build is a bug of the macro, whichever forms it hits
        // (both failing alike must not pass as agreement).
        for (form, status) in [("proved", &ps), ("unproved", &us)] {
            if status.code() == Some(Errc::Build) {
                problems.push(format!(
                    "  the {form} form did not build: {}",
                    status.describe()
                ));
            }
        }
        if !ps.same(&us) {
            let headline = match (&ps, &us) {
                (Status::Ok, Status::Failed(..)) => {
                    "A PROOF CLAIMS AN INDEX IN BOUNDS BUT THE CHECKED RUN FAILS: the proved form succeeded, the form without proofs failed"
                }
                (Status::Failed(..), Status::Ok) => {
                    "the proved form failed where the form without proofs succeeded"
                }
                _ => "the two forms ended differently",
            };
            problems.push(format!(
                "  {headline}\n    proved:   {}\n    unproved: {}",
                ps.describe(),
                us.describe()
            ));
        }
        let both_ok = ps == Status::Ok && us == Status::Ok;
        let inside = both_ok || (compare_failed && ps.same(&us));
        let (count, lines) = differences(&s, &pout, &uout, inside, 10);
        if count > 0 {
            let why = if !inside {
                " around the slices (the checked form never writes there)"
            } else if both_ok {
                ""
            } else {
                " although both forms failed alike (a failed work-item stops here, so the \
                 proved form ran on past an access that failed in the checked form, or \
                 computed something else)"
            };
            problems.push(format!(
                "  {count} output element(s) differ{why}:\n{}",
                lines.join("\n")
            ));
        }
        match ps.code() {
            None => ok += 1,
            Some(_) => {
                failed += 1;
                first_failure.get_or_insert_with(|| ps.describe());
            }
        }
        if !problems.is_empty() {
            bad += 1;
            if bad <= 3 {
                let _ = writeln!(
                    report,
                    "launch {launch} of kernel k{}: {}\n{}",
                    k.index,
                    s.describe(),
                    problems.join("\n")
                );
            }
        }
    }
    if env_flag("SYCL_RS_PROOF_VERBOSE") {
        eprintln!(
            "proofs: [{:?}] {} k{}: {launches} launches: {ok} succeeded, {failed} failed (proved form), {:.2} s{}",
            device.backend(),
            device.name(),
            k.index,
            started.elapsed().as_secs_f64(),
            first_failure.map(|f| format!("; first: {f}")).unwrap_or_default()
        );
    }
    if bad == 0 {
        return Ok(());
    }
    Err(Failed::from(format!(
        "kernel k{} on {} ({:?}): {bad} of {launches} launches differ between the proved and the unproved form\n{report}kernel source (seed {:#x}; rebuild with SYCL_RS_PROOF_SEED={:#x} SYCL_RS_PROOF_KERNELS={}):\n{}",
        k.index,
        device.name(),
        device.backend(),
        generated::SEED,
        generated::SEED,
        generated::KERNELS.len(),
        k.source
    )))
}

/// A line on stdout, flushed: the last one says what a child that crashed was doing.
fn progress(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The child role that runs one kernel's launches on one device.
const CHILD_ROLE: &str = "proofs_kernel";

/// Child: `selector index`.
fn kernel_child(args: &[String]) -> Result<(), String> {
    let [selector, index] = args else {
        return Err(format!("wanted `selector index`, got {args:?}"));
    };
    let device = sycl_tests::device_from_selector(selector)?;
    let index: usize = index.parse().map_err(|e| format!("`{index}`: {e}"))?;
    check_kernel(&device, &generated::KERNELS[index])
        .map_err(|f| f.message().unwrap_or("failed").to_string())
}

/// Kernel `index`'s test on `device`, in a child process (unless `SYCL_RS_PROOF_IN_PROCESS=1`):
/// an access that a wrong proof left unchecked may crash the process rather than read a
/// wrong value, and so may a driver's compiler; a crash then fails this kernel's test with
/// the launch it was running, and the other tests go on.
pub fn test_kernel(device: &Device, index: usize) -> Result<(), Failed> {
    let k = &generated::KERNELS[index];
    if env_flag("SYCL_RS_PROOF_IN_PROCESS") {
        return check_kernel(device, k);
    }
    let args = [sycl_tests::selector_for(device), index.to_string()];
    let out = sycl_tests::child_command(CHILD_ROLE, &args)
        .output()
        .map_err(fail)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        // The verbose summary, or anything else the child had to say.
        eprint!("{stderr}");
        return Ok(());
    }
    if out.status.code() == Some(1) {
        // The child's report (mismatches), as `run_child_role_if_any` prints it.
        let report = stderr
            .split_once(&format!("child role {CHILD_ROLE} failed: "))
            .map_or(stderr.as_ref(), |(_, r)| r);
        if report.starts_with("no device ") {
            // Seen on the H100 machine: NVIDIA's OpenCL GPU is listed in this process but
            // not in a child started while this one holds CUDA contexts. The test still runs,
            // in this process (a crash then ends the whole binary), and says so.
            eprintln!(
                "proofs: the child process found {} (its device list differs from this \
                 process's); k{index} runs in this process instead",
                report.trim_end()
            );
            return check_kernel(device, k);
        }
        return Err(Failed::from(report.trim_end().to_string()));
    }
    use std::os::unix::process::ExitStatusExt;
    let how = match out.status.signal() {
        Some(sig) => format!("was killed by signal {sig}"),
        None => format!("exited with {}", out.status),
    };
    let doing = stdout.lines().last().unwrap_or("(before its first launch)");
    let driver = stderr.contains("PLEASE submit a bug report") || stderr.contains("Stack dump:");
    let what = if driver {
        "the device's compiler crashed building a program (its stack dump is below): not a \
         proof mismatch, but a kernel that kills the process"
    } else {
        "a crash while the proved form runs is what an access that a wrong proof left \
         unchecked can do"
    };
    let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(Failed::from(format!(
        "kernel k{index} on {} ({:?}): the test process {how} during {doing}\n  {what}\n\
         last lines of its stderr:\n{}\nkernel source (seed {:#x}; rebuild with \
         SYCL_RS_PROOF_SEED={:#x} SYCL_RS_PROOF_KERNELS={}):\n{}",
        device.name(),
        device.backend(),
        tail.join("\n"),
        generated::SEED,
        generated::SEED,
        generated::KERNELS.len(),
        k.source
    )))
}

fn main() -> ExitCode {
    // A failed work-item on the native CPU is a panic on a queue thread, which the launch turns
    // into `Errc::Kernel`: most launches of this test fail on purpose, so those panics are not
    // printed (set `SYCL_RS_PROOF_TRACE=1` to see them). Others still are.
    if !env_flag("SYCL_RS_PROOF_TRACE") {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let queue = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("sycl-native"));
            let kernel = info.location().is_some_and(|l| {
                l.file().ends_with("kernel/rt.rs") || l.file().ends_with("random_kernels.rs")
            });
            if !queue && !kernel {
                default(info);
            }
        }));
    }
    sycl_tests::run_child_role_if_any(&[(CHILD_ROLE, kernel_child)]);
    // PoCL's builds were most of this suite's CPU time (a kernel's two forms and its work-group
    // sizes are several builds of 0.5-1.5 s each; the trace summed PoCL's tests to 478 s against
    // Intel's 118 s): on PoCL the even-numbered kernels run (the OpenCL C printer's half of the
    // suite in CI, where the SPIR-V and native forms run every kernel), which took the suite
    // from 154 s to 93 s on 2 cores (a cold PoCL cache).
    sycl_tests::run_suite_where(generated::DEVICE_TESTS, &[], |test, device| {
        let index: usize = test.name.strip_prefix("proofs::k")?.parse().ok()?;
        (sycl_tests::is_pocl(device) && index % 2 == 1 && !env_flag("SYCL_RS_PROOF_EVERY_KERNEL"))
            .then(|| "odd kernels skip PoCL (SYCL_RS_PROOF_EVERY_KERNEL=1 runs them)".to_string())
    })
}
