//! Kernels written in Rust (`#[sycl::kernel]`, spec/kernels.md), on every device present: each
//! language feature against the same computation done by plain Rust on the host, bounds-check
//! and division failures, aliasing refusal, range errors, barriers (with tests that fail when a
//! barrier does not wait), group reductions and atomics under contention.
//!
//! The kernels are module items (as the macro requires); kernels that differ only by element
//! type are stamped out by `macro_rules!` with the type as an identifier.

use std::fmt::Debug;

use bytemuck::Pod;
use libtest_mimic::Failed;
use sycl::kernel::{MemoryScope, Ordering};
use sycl::{Aspect, Device, Errc, Event, KernelFunctor, Queue, Range, Usm};
use sycl_tests::{check, check_eq, fail};

use super::{in_order, R};

// ---------------------------------------------------------------- host-side helpers

/// Device memory holding `data`.
fn upload<T: Pod>(q: &Queue, data: &[T]) -> Result<Usm<T>, Failed> {
    let m = sycl::malloc_device::<T>(data.len(), q).map_err(fail)?;
    q.write(&m, data).map_err(fail)?;
    Ok(m)
}

/// Device memory of `n` elements, each `value`.
fn filled<T: Pod>(q: &Queue, n: usize, value: T) -> Result<Usm<T>, Failed> {
    let m = sycl::malloc_device::<T>(n, q).map_err(fail)?;
    q.fill(&m, value, &[]).map_err(fail)?.wait().map_err(fail)?;
    Ok(m)
}

/// Launches `k` over `range` and waits for it.
fn run(q: &Queue, range: Range, k: impl KernelFunctor) -> R {
    q.parallel_for(range, &[], k)
        .map_err(fail)?
        .wait()
        .map_err(fail)
}

/// Launches `k` (named `name`), which must be accepted, and whose event must report
/// `Errc::Kernel` naming the kernel (or, on the CPU, the failed bounds check).
fn fails_in_kernel(q: &Queue, range: Range, k: impl KernelFunctor, name: &str) -> R {
    let event = q
        .parallel_for(range, &[], k)
        .map_err(|e| fail(format!("kernel `{name}`: refused at submit: {e}")))?;
    match event.wait() {
        Ok(()) => Err(fail(format!(
            "kernel `{name}`: wait succeeded; wanted Errc::Kernel"
        ))),
        Err(e) if e.code() == Errc::Kernel => {
            let msg = e.message().to_string();
            check!(
                msg.contains(name) || msg.contains("out of bounds"),
                "kernel `{name}`: the error does not say what failed: {msg}"
            );
            Ok(())
        }
        Err(e) => Err(fail(format!("kernel `{name}`: {e} (wanted Errc::Kernel)"))),
    }
}

/// `r` must be the error `code` (at submit time, nothing launched).
fn refused(r: sycl::Result<Event>, code: Errc, what: &str) -> R {
    match r {
        Ok(e) => {
            let _ = e.wait();
            Err(fail(format!("{what}: accepted; wanted {code:?}")))
        }
        Err(e) if e.code() == code => Ok(()),
        Err(e) => Err(fail(format!("{what}: {e} (wanted {code:?})"))),
    }
}

/// Compares element-wise with `same`; the first differences are listed with `what(index)`.
fn compare_by<T: Copy + Debug>(
    got: &[T],
    want: &[T],
    same: impl Fn(T, T, usize) -> bool,
    what: impl Fn(usize) -> String,
) -> R {
    check_eq!(got.len(), want.len(), "result lengths");
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| !same(got[i], want[i], i))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = bad
        .iter()
        .take(10)
        .map(|&i| format!("  {}: got {:?}, want {:?}", what(i), got[i], want[i]))
        .collect();
    Err(fail(format!(
        "{} of {} results differ from the host:\n{}",
        bad.len(),
        got.len(),
        lines.join("\n")
    )))
}

/// Exact comparison.
fn compare<T: Copy + Debug + PartialEq>(
    got: &[T],
    want: &[T],
    what: impl Fn(usize) -> String,
) -> R {
    compare_by(got, want, |g, w, _| g == w, what)
}

/// Bit-exact float equality, any NaN matching any NaN (f32 widens to f64 exactly).
fn same_float<F: Into<f64>>(g: F, w: F) -> bool {
    let (g, w) = (g.into(), w.into());
    (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits()
}

/// Equal within `tol` relative to `max(|w|, 1)`; infinities and NaN must match exactly.
fn close<F: Into<f64>>(g: F, w: F, tol: f64) -> bool {
    let (g, w) = (g.into(), w.into());
    if w.is_nan() || g.is_nan() {
        return w.is_nan() && g.is_nan();
    }
    if w.is_infinite() || g.is_infinite() {
        return g == w;
    }
    (g - w).abs() <= tol * w.abs().max(1.0)
}

/// A xorshift generator, so the inputs are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The largest work-group (at most `cap`) the device allows in dimension 0.
fn max_group(d: &Device, cap: usize) -> usize {
    let items = d.max_work_item_sizes()[0];
    let mut n = cap.min(d.max_work_group_size().max(1));
    if items > 0 {
        n = n.min(items);
    }
    n
}

// ---------------------------------------------------------------- 1. integer arithmetic

/// Bit patterns every integer type is tested with (truncated by `as` to the narrower ones).
const EDGE_BITS: [u64; 26] = [
    0,
    1,
    2,
    3,
    5,
    7,
    16,
    31,
    32,
    63,
    64,
    100,
    12345,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    u64::MAX,
    u64::MAX - 1,
    (-7i64) as u64,
    (-12345i64) as u64,
    0x5555_5555_5555_5555,
    0xdead_beef_cafe_f00d,
    0xffff_fffe_0000_0001,
];

/// Shift amounts, including amounts at and past every bit width.
const SHIFTS: [u32; 16] = [
    0,
    1,
    2,
    7,
    15,
    16,
    31,
    32,
    33,
    47,
    63,
    64,
    65,
    100,
    255,
    u32::MAX,
];

/// Results per operand pair of the integer kernels.
const INT_OPS: usize = 26;

/// An integer kernel over type `$t` (loaded from and stored as `$e`), its host reference, and
/// the check that runs it on every pair of edge values.
macro_rules! int_ops {
    ($kernel:ident, $host:ident, $check:ident, $t:ident, $e:ident) => {
        #[sycl::kernel]
        fn $kernel(a: &[$e], b: &[$e], d: &[$e], s: &[u32], out: &mut [$e]) {
            let i = global_id(0);
            let x = a[i] as $t;
            let y = b[i] as $t;
            let z = d[i] as $t;
            let k = s[i];
            let o = i * 26;
            out[o] = (x + y) as $e;
            out[o + 1] = (x - y) as $e;
            out[o + 2] = (x * y) as $e;
            out[o + 3] = (x / z) as $e;
            out[o + 4] = (x % z) as $e;
            out[o + 5] = (x & y) as $e;
            out[o + 6] = (x | y) as $e;
            out[o + 7] = (x ^ y) as $e;
            out[o + 8] = !x as $e;
            out[o + 9] = (x << k) as $e;
            out[o + 10] = (x >> k) as $e;
            out[o + 11] = (x << (k as u64)) as $e;
            out[o + 12] = (x >> (k as usize)) as $e;
            out[o + 13] = x.min(y) as $e;
            out[o + 14] = x.max(y) as $e;
            out[o + 15] = (x < y) as $e;
            out[o + 16] = (x <= y) as $e;
            out[o + 17] = (x == y) as $e;
            out[o + 18] = (x != y) as $e;
            out[o + 19] = (x > y) as $e;
            out[o + 20] = (x >= y) as $e;
            // Rust's precedence, not C's: `&` and `^` bind tighter than comparisons.
            out[o + 21] = (x & y == y) as $e;
            out[o + 22] = (x ^ y != y) as $e;
            out[o + 23] = (x * 3 + 7 - y / 2) as $e;
            let mut c = x;
            c += y;
            c -= 3;
            c *= y;
            c /= 7;
            c %= 5;
            c &= x | 1;
            c |= 16;
            c ^= y;
            c <<= k;
            c >>= 1;
            out[o + 24] = c as $e;
            out[o + 25] = if x > y && y != 0 || x == 0 { x } else { y } as $e;
        }

        fn $host(x: $t, y: $t, z: $t, k: u32) -> [$t; INT_OPS] {
            let mut c = x.wrapping_add(y).wrapping_sub(3).wrapping_mul(y);
            c /= 7;
            c %= 5;
            c &= x | 1;
            c |= 16;
            c ^= y;
            c = c.wrapping_shl(k);
            c >>= 1;
            [
                x.wrapping_add(y),
                x.wrapping_sub(y),
                x.wrapping_mul(y),
                x / z,
                x % z,
                x & y,
                x | y,
                x ^ y,
                !x,
                x.wrapping_shl(k),
                x.wrapping_shr(k),
                x.wrapping_shl(k),
                x.wrapping_shr(k),
                x.min(y),
                x.max(y),
                (x < y) as $t,
                (x <= y) as $t,
                (x == y) as $t,
                (x != y) as $t,
                (x > y) as $t,
                (x >= y) as $t,
                ((x & y) == y) as $t,
                ((x ^ y) != y) as $t,
                x.wrapping_mul(3).wrapping_add(7).wrapping_sub(y / 2),
                c,
                if x > y && y != 0 || x == 0 { x } else { y },
            ]
        }

        fn $check(q: &Queue) -> R {
            let vals: Vec<$t> = EDGE_BITS.iter().map(|&v| v as $t).collect();
            let (mut a, mut b, mut dz, mut s) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for &x in &vals {
                for &y in &vals {
                    // Divisors that cannot fail (division failures have their own test).
                    let mut z = y;
                    if z == 0 {
                        z = 3;
                    }
                    if x == $t::MIN && z == (0 as $t).wrapping_sub(1) {
                        z = 2;
                    }
                    s.push(SHIFTS[a.len() % SHIFTS.len()]);
                    a.push(x);
                    b.push(y);
                    dz.push(z);
                }
            }
            let n = a.len();
            let to_e = |v: &[$t]| v.iter().map(|&x| x as $e).collect::<Vec<$e>>();
            let da = upload(q, &to_e(&a))?;
            let db = upload(q, &to_e(&b))?;
            let dd = upload(q, &to_e(&dz))?;
            let ds = upload(q, &s)?;
            let out = filled(q, n * INT_OPS, 0 as $e)?;
            run(q, Range::d1(n), $kernel(&da, &db, &dd, &ds, &out))?;
            let got = q.to_vec(&out).map_err(fail)?;
            let want: Vec<$e> = (0..n)
                .flat_map(|i| $host(a[i], b[i], dz[i], s[i]).map(|v| v as $e))
                .collect();
            compare(&got, &want, |j| {
                let i = j / INT_OPS;
                format!(
                    "{} op {} on x {:?}, y {:?}, divisor {:?}, shift {}",
                    stringify!($t),
                    j % INT_OPS,
                    a[i],
                    b[i],
                    dz[i],
                    s[i]
                )
            })
        }
    };
}

int_ops!(int_ops_i32, int_host_i32, int_check_i32, i32, i32);
int_ops!(int_ops_u32, int_host_u32, int_check_u32, u32, u32);
int_ops!(int_ops_i64, int_host_i64, int_check_i64, i64, i64);
int_ops!(int_ops_u64, int_host_u64, int_check_u64, u64, u64);
int_ops!(int_ops_usize, int_host_usize, int_check_usize, usize, u64);

/// Negation and `abs` of signed types wrap (`-MIN == MIN`).
macro_rules! signed_ops {
    ($kernel:ident, $check:ident, $t:ident) => {
        #[sycl::kernel]
        fn $kernel(a: &[$t], out: &mut [$t]) {
            let i = global_id(0);
            let x = a[i];
            let o = i * 8;
            out[o] = -x;
            out[o + 1] = x.abs();
            out[o + 2] = -x >> 1;
            out[o + 3] = 0 - x;
            out[o + 4] = x * -1;
            out[o + 5] = (x.abs() < 0) as $t;
            // Negative shift amounts are masked too.
            out[o + 6] = x << -3;
            out[o + 7] = x >> -1;
        }

        fn $check(q: &Queue) -> R {
            let vals: Vec<$t> = EDGE_BITS.iter().map(|&v| v as $t).collect();
            let n = vals.len();
            let da = upload(q, &vals)?;
            let out = filled(q, n * 8, 0 as $t)?;
            run(q, Range::d1(n), $kernel(&da, &out))?;
            let got = q.to_vec(&out).map_err(fail)?;
            let want: Vec<$t> = vals
                .iter()
                .flat_map(|&x| {
                    [
                        x.wrapping_neg(),
                        x.wrapping_abs(),
                        x.wrapping_neg() >> 1,
                        x.wrapping_neg(),
                        x.wrapping_mul(-1),
                        (x.wrapping_abs() < 0) as $t,
                        x.wrapping_shl(-3i32 as u32),
                        x.wrapping_shr(-1i32 as u32),
                    ]
                })
                .collect();
            compare(&got, &want, |j| {
                format!("{} op {} on {}", stringify!($t), j % 8, vals[j / 8])
            })
        }
    };
}

signed_ops!(signed_ops_i32, signed_check_i32, i32);
signed_ops!(signed_ops_i64, signed_check_i64, i64);

/// Integer literals at the edges of their types, and arithmetic on them that wraps.
#[sycl::kernel]
fn literal_edges(oi: &mut [i64], ou: &mut [u64], of: &mut [f32]) {
    let big = 3000000000u32;
    let top = 2147483647i32;
    oi[0] = (-2147483648i32) as i64;
    oi[1] = (top + 1) as i64;
    oi[2] = -9223372036854775808i64;
    oi[3] = 4294967295u32 as i64;
    oi[4] = (0x7fffffffffffffffi64 as i32) as i64;
    oi[5] = -2147483648 + (top as i64);
    ou[0] = 18446744073709551615u64;
    ou[1] = 18446744073709551615u64 + ou[0] + 3;
    ou[2] = (big + big) as u64;
    ou[3] = (4294967295u32 * 4294967295u32) as u64;
    ou[4] = 0xffff_ffff_0000_0000u64 >> 63;
    ou[5] = 1u64 << 63;
    of[0] = 16777217.0f32;
    of[1] = 0.1f32;
    of[2] = 1e-45f32;
    of[3] = 3.4028235e38f32;
    of[4] = 1.0e-38 * 0.5f32;
}

fn literals(q: &Queue) -> R {
    let oi = filled(q, 6, 0i64)?;
    let ou = filled(q, 6, 0u64)?;
    let of = filled(q, 5, 0f32)?;
    run(q, Range::d1(1), literal_edges(&oi, &ou, &of))?;
    let big = 3_000_000_000u32;
    compare(
        &q.to_vec(&oi).map_err(fail)?,
        &[
            i32::MIN as i64,
            i32::MIN as i64,
            i64::MIN,
            u32::MAX as i64,
            -1,
            -2147483648 + i32::MAX as i64,
        ],
        |j| format!("i64 literal case {j}"),
    )?;
    compare(
        &q.to_vec(&ou).map_err(fail)?,
        &[
            u64::MAX,
            1,
            big.wrapping_add(big) as u64,
            u32::MAX.wrapping_mul(u32::MAX) as u64,
            1,
            1 << 63,
        ],
        |j| format!("u64 literal case {j}"),
    )?;
    compare_by(
        &q.to_vec(&of).map_err(fail)?,
        &[16777216.0f32, 0.1, 1e-45, f32::MAX, 1.0e-38 * 0.5],
        |g, w, _| same_float(g, w),
        |j| format!("f32 literal case {j}"),
    )
}

/// Item 1: `+ - * / %`, bit operations, shifts (amounts masked by the width), negation,
/// comparisons, `&&`/`||`, compound assignment and literals, on i32, u32, i64, u64 and usize,
/// against Rust's `wrapping_*` on the host.
pub fn integer_arithmetic(d: &Device) -> R {
    let q = in_order(d)?;
    int_check_i32(&q)?;
    int_check_u32(&q)?;
    int_check_i64(&q)?;
    int_check_u64(&q)?;
    int_check_usize(&q)?;
    signed_check_i32(&q)?;
    signed_check_i64(&q)?;
    literals(&q)
}

// ---------------------------------------------------------------- 1. float arithmetic, 4. math

/// Results per operand triple of the float kernels.
const FLOAT_OPS: usize = 18;

macro_rules! float_ops {
    ($kernel:ident, $host:ident, $check:ident, $t:ident, $edges:expr, $fma:expr) => {
        #[sycl::kernel]
        fn $kernel(a: &[$t], b: &[$t], c: &[$t], out: &mut [$t], cmp: &mut [u32]) {
            let i = global_id(0);
            let x = a[i];
            let y = b[i];
            let z = c[i];
            let o = i * 18;
            out[o] = x + y;
            out[o + 1] = x - y;
            out[o + 2] = x * y;
            out[o + 3] = x / y;
            out[o + 4] = x % y;
            out[o + 5] = -x;
            out[o + 6] = x.min(y);
            out[o + 7] = x.max(y);
            out[o + 8] = x.abs();
            out[o + 9] = x.floor();
            out[o + 10] = x.ceil();
            out[o + 11] = x.sqrt();
            out[o + 12] = x.mul_add(y, z);
            // No contraction: two roundings.
            out[o + 13] = x * y + z;
            out[o + 14] = z - x * y;
            let mut t = x;
            t += y;
            t *= 0.5;
            t -= z;
            t /= 3.0;
            t %= 7.0;
            out[o + 15] = t;
            out[o + 16] = if x < y { x * 2.0 } else { y - 1.0 };
            out[o + 17] = (x + y) * (x - y) / (z + 1.0);
            cmp[i] = (x < y) as u32
                | ((x <= y) as u32) << 1
                | ((x == y) as u32) << 2
                | ((x != y) as u32) << 3
                | ((x > y) as u32) << 4
                | ((x >= y) as u32) << 5
                | ((x != x) as u32) << 6
                | ((x < y || x != x) as u32) << 7;
        }

        fn $host(x: $t, y: $t, z: $t) -> ([$t; FLOAT_OPS], u32) {
            let mut t = x;
            t += y;
            t *= 0.5;
            t -= z;
            t /= 3.0;
            t %= 7.0;
            #[allow(clippy::eq_op)]
            let nan = (x != x) as u32;
            (
                [
                    x + y,
                    x - y,
                    x * y,
                    x / y,
                    x % y,
                    -x,
                    x.min(y),
                    x.max(y),
                    x.abs(),
                    x.floor(),
                    x.ceil(),
                    x.sqrt(),
                    x.mul_add(y, z),
                    x * y + z,
                    z - x * y,
                    t,
                    if x < y { x * 2.0 } else { y - 1.0 },
                    (x + y) * (x - y) / (z + 1.0),
                ],
                (x < y) as u32
                    | ((x <= y) as u32) << 1
                    | ((x == y) as u32) << 2
                    | ((x != y) as u32) << 3
                    | ((x > y) as u32) << 4
                    | ((x >= y) as u32) << 5
                    | nan << 6
                    | ((x < y || x.is_nan()) as u32) << 7,
            )
        }

        fn $check(q: &Queue) -> R {
            let vals: Vec<$t> = $edges.to_vec();
            let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
            for &x in &vals {
                for &y in &vals {
                    a.push(x);
                    b.push(y);
                    c.push(vals[(a.len() * 7) % vals.len()]);
                }
            }
            // Where a fused multiply-add differs from a multiply then an add.
            for (x, y, z) in $fma {
                a.push(x);
                b.push(y);
                c.push(z);
            }
            let n = a.len();
            let (da, db, dc) = (upload(q, &a)?, upload(q, &b)?, upload(q, &c)?);
            let out = filled(q, n * FLOAT_OPS, 0 as $t)?;
            let cmp = filled(q, n, 0u32)?;
            run(q, Range::d1(n), $kernel(&da, &db, &dc, &out, &cmp))?;
            let host: Vec<([$t; FLOAT_OPS], u32)> =
                (0..n).map(|i| $host(a[i], b[i], c[i])).collect();
            let want: Vec<$t> = host.iter().flat_map(|h| h.0).collect();
            compare_by(
                &q.to_vec(&out).map_err(fail)?,
                &want,
                |g, w, j| {
                    // min/max of +0 and -0 may return either.
                    same_float(g, w) || (matches!(j % FLOAT_OPS, 6 | 7) && g == w)
                },
                |j| {
                    let i = j / FLOAT_OPS;
                    format!(
                        "{} op {} on ({:e}, {:e}, {:e})",
                        stringify!($t),
                        j % FLOAT_OPS,
                        a[i],
                        b[i],
                        c[i]
                    )
                },
            )?;
            let want: Vec<u32> = host.iter().map(|h| h.1).collect();
            compare(&q.to_vec(&cmp).map_err(fail)?, &want, |i| {
                format!("{} comparisons of ({:e}, {:e})", stringify!($t), a[i], b[i])
            })
        }
    };
}

const F32_EDGES: [f32; 20] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    1.5,
    -2.5,
    0.1,
    3.0,
    7.0,
    -7.25,
    1e30,
    -1e30,
    f32::MAX,
    f32::MIN_POSITIVE,
    1e-40,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    1.000_244_1, // 1 + 2^-12
    16777216.0,
];

const F64_EDGES: [f64; 20] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    1.5,
    -2.5,
    0.1,
    3.0,
    7.0,
    -7.25,
    1e300,
    -1e300,
    f64::MAX,
    f64::MIN_POSITIVE,
    1e-310,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1.0 + 1.0 / 134217728.0, // 1 + 2^-27
    9007199254740992.0,
];

float_ops!(
    float_ops_f32,
    float_host_f32,
    float_check_f32,
    f32,
    F32_EDGES,
    [
        // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: the product rounds the 2^-24 away.
        (1.000_244_1f32, 1.000_244_1f32, -1.000_488_3f32),
        (0.1f32, 10.0f32, -1.0f32),
        (1.0f32 / 3.0, 3.0f32, -1.0f32),
    ]
);
float_ops!(
    float_ops_f64,
    float_host_f64,
    float_check_f64,
    f64,
    F64_EDGES,
    [
        (
            1.0 + 1.0 / 134217728.0,
            1.0 + 1.0 / 134217728.0,
            -(1.0 + 1.0 / 67108864.0),
        ),
        (0.1f64, 10.0f64, -1.0f64),
        (1.0f64 / 3.0, 3.0f64, -1.0f64),
    ]
);

/// Items 1 and 4: f32 `+ - * / %`, negation, comparisons (NaN included), compound
/// assignment, and the exact math methods (`sqrt floor ceil abs min max mul_add`) bit-exact
/// against the host, with edge values (zeros, subnormals, infinities, NaN); `a * b + c` must
/// not be contracted into a fused multiply-add, `mul_add` must be one.
pub fn float_arithmetic_f32(d: &Device) -> R {
    let q = in_order(d)?;
    let (x, z) = (1.0f32 + 1.0 / 4096.0, -(1.0f32 + 1.0 / 2048.0));
    check!(
        x == 1.000_244_1 && z == -1.000_488_3 && x.mul_add(x, z) != x * x + z,
        "the fused multiply-add case does not tell fused from unfused on the host"
    );
    float_check_f32(&q)
}

/// The same for f64 (aspect fp64).
pub fn float_arithmetic_f64(d: &Device) -> R {
    let q = in_order(d)?;
    float_check_f64(&q)
}

/// Runs a math kernel (`kernel(a, b, out)`, which writes one result per name in `names` for
/// each input pair) over `inputs` and compares with `want` on the host: the functions named
/// in `exact` bit for bit (the sign of zero included; any NaN for a NaN), the others within
/// `tol` (`close`).
fn check_math<T, K>(
    q: &Queue,
    (a, b): (&[T], &[T]),
    (names, exact): (&[&str], &[&str]),
    tol: f64,
    kernel: impl FnOnce(&Usm<T>, &Usm<T>, &Usm<T>) -> K,
    want: impl Fn(T, T) -> Vec<T>,
) -> R
where
    T: Pod + Debug + Into<f64> + std::fmt::LowerExp,
    K: KernelFunctor,
{
    let (n, per) = (a.len(), names.len());
    let (da, db) = (upload(q, a)?, upload(q, b)?);
    let out = filled(q, n * per, T::zeroed())?;
    run(q, Range::d1(n), kernel(&da, &db, &out))?;
    let want: Vec<T> = (0..n).flat_map(|i| want(a[i], b[i])).collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, j| {
            if exact.contains(&names[j % per]) {
                let (g, w): (f64, f64) = (g.into(), w.into());
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())
            } else {
                close(g, w, tol)
            }
        },
        |j| {
            let i = j / per;
            format!(
                "{} {} of ({:e}, {:e})",
                std::any::type_name::<T>(),
                names[j % per],
                a[i],
                b[i]
            )
        },
    )
}

macro_rules! math_lib {
    ($kernel:ident, $check:ident, $t:ident, $tol:expr) => {
        #[sycl::kernel]
        fn $kernel(a: &[$t], b: &[$t], out: &mut [$t]) {
            let i = global_id(0);
            let x = a[i];
            let y = b[i];
            let o = i * 5;
            out[o] = x.exp();
            out[o + 1] = x.ln();
            out[o + 2] = x.sin();
            out[o + 3] = x.cos();
            out[o + 4] = x.abs().powf(y);
        }

        fn $check(q: &Queue) -> R {
            let mut a: Vec<$t> = (-80..=80).map(|k| k as $t * 0.125).collect();
            a.extend([
                0.0,
                -0.0,
                1.0,
                80.0,
                -100.0,
                1e-3,
                0.999,
                $t::INFINITY,
                $t::NEG_INFINITY,
                $t::NAN,
            ]);
            let b: Vec<$t> = (0..a.len()).map(|k| (k % 13) as $t * 0.5 - 3.0).collect();
            check_math(
                q,
                (&a, &b),
                (&["exp", "ln", "sin", "cos", "powf"], &[]),
                $tol,
                |a, b, out| $kernel(a, b, out),
                |x, y| vec![x.exp(), x.ln(), x.sin(), x.cos(), x.abs().powf(y)],
            )
        }
    };
}

math_lib!(math_lib_f32, math_check_f32, f32, 1e-5);
math_lib!(math_lib_f64, math_check_f64, f64, 1e-12);

/// Item 4: `exp ln sin cos powf` from each device's library, within a relative tolerance
/// (1e-5 for f32, 1e-12 for f64 where the device has fp64); special values must match.
pub fn math_library(d: &Device) -> R {
    f32_then_f64(d, math_check_f32, math_check_f64)
}

/// Runs the `f32` check, then the `f64` one where the device has fp64.
fn f32_then_f64(d: &Device, f32_check: fn(&Queue) -> R, f64_check: fn(&Queue) -> R) -> R {
    let q = in_order(d)?;
    f32_check(&q)?;
    if d.has(Aspect::Fp64) {
        f64_check(&q)?;
    }
    Ok(())
}

/// The functions `math_more` computes, in order (the receiver `x`, the argument `y`).
const MATH_MORE: [&str; 16] = [
    "tanh",
    "exp2",
    "log2",
    "log10",
    "trunc",
    "round",
    "copysign",
    "atan2",
    "hypot",
    "recip",
    "fract",
    "powi",
    "is_nan",
    "is_finite",
    "rsqrt",
    "erf",
];

macro_rules! math_more {
    ($kernel:ident, $check:ident, $t:ident, $tol:expr) => {
        #[sycl::kernel]
        fn $kernel(a: &[$t], b: &[$t], out: &mut [$t]) {
            let i = global_id(0);
            let x = a[i];
            let y = b[i];
            let o = i * 16;
            out[o] = x.tanh();
            out[o + 1] = x.exp2();
            out[o + 2] = x.log2();
            out[o + 3] = x.log10();
            out[o + 4] = x.trunc();
            out[o + 5] = x.round();
            out[o + 6] = x.copysign(y);
            out[o + 7] = x.atan2(y);
            out[o + 8] = x.hypot(y);
            out[o + 9] = x.recip();
            out[o + 10] = x.fract();
            out[o + 11] = x.powi((y as i32) % 5);
            out[o + 12] = if x.is_nan() { 1.0 } else { 0.0 };
            out[o + 13] = if x.is_finite() { 1.0 } else { 0.0 };
            out[o + 14] = x.rsqrt();
            out[o + 15] = x.erf();
        }

        fn $check(q: &Queue) -> R {
            let mut a: Vec<$t> = (-80..=80).map(|k| k as $t * 0.375).collect();
            a.extend([
                0.0,
                -0.0,
                0.5,
                -0.5,
                2.5,
                -2.5,
                1.0,
                1e-3,
                -100.0,
                $t::INFINITY,
                $t::NEG_INFINITY,
                $t::NAN,
            ]);
            let mut b: Vec<$t> = (0..a.len()).map(|k| (k % 11) as $t * 0.75 - 3.0).collect();
            // Signed zeros and infinities as the second operand too (atan2's quadrants).
            let n = b.len();
            b[n - 1] = -0.0;
            b[n - 2] = 0.0;
            b[n - 3] = $t::NEG_INFINITY;
            check_math(
                q,
                (&a, &b),
                (
                    &MATH_MORE,
                    &["trunc", "round", "copysign", "fract", "is_nan", "is_finite"],
                ),
                $tol,
                |a, b, out| $kernel(a, b, out),
                |x, y| {
                    vec![
                        x.tanh(),
                        x.exp2(),
                        x.log2(),
                        x.log10(),
                        x.trunc(),
                        x.round(),
                        x.copysign(y),
                        x.atan2(y),
                        x.hypot(y),
                        x.recip(),
                        x.fract(),
                        x.powi((y as i32) % 5),
                        if x.is_nan() { 1.0 } else { 0.0 },
                        if x.is_finite() { 1.0 } else { 0.0 },
                        1.0 / x.sqrt(),
                        <$t as Erf>::erf(x),
                    ]
                },
            )
        }
    };
}

math_more!(math_more_f32, math_more_check_f32, f32, 1e-5);
math_more!(math_more_f64, math_more_check_f64, f64, 1e-12);

/// `tanh exp2 log2 log10 atan2 hypot recip powi` from each device's library within the
/// tolerances of `math_library`; `trunc round copysign fract is_nan is_finite` exactly (Rust's
/// `round` and C's both round half away from zero).
pub fn math_more(d: &Device) -> R {
    f32_then_f64(d, math_more_check_f32, math_more_check_f64)
}

/// Bit patterns that reach every edge of the integer functions: zero, one, powers of two,
/// the signed and unsigned extremes of 32 and 64 bits and their neighbours, mixed patterns.
const INT_EDGES: [u64; 16] = [
    0,
    1,
    2,
    3,
    0x80,
    12345,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    0x1234_5678_9abc_def0,
    0x7fff_ffff_ffff_ffff,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_fffe,
    u64::MAX,
    0x00f0_0000_0000_0000,
];

macro_rules! math_int {
    ($kernel:ident, $check:ident, $t:ident) => {
        #[sycl::kernel]
        fn $kernel(a: &[$t], b: &[$t], out: &mut [$t], counts: &mut [u32]) {
            let i = global_id(0);
            let x = a[i];
            let y = b[i];
            let o = i * 9;
            out[o] = x.saturating_add(y);
            out[o + 1] = x.saturating_sub(y);
            out[o + 2] = x.wrapping_add(y);
            out[o + 3] = x.wrapping_sub(y);
            out[o + 4] = x.wrapping_mul(y);
            out[o + 5] = x.rotate_left(y as u32);
            out[o + 6] = x.rotate_right(y as u32);
            out[o + 7] = x.pow(y as u32);
            out[o + 8] = x.wrapping_pow((y as u32) % 70);
            let c = i * 3;
            counts[c] = x.count_ones();
            counts[c + 1] = x.leading_zeros();
            counts[c + 2] = x.trailing_zeros();
        }

        fn $check(q: &Queue) -> R {
            let edges: Vec<$t> = INT_EDGES.iter().map(|&v| v as $t).collect();
            let (a, b): (Vec<$t>, Vec<$t>) = edges
                .iter()
                .flat_map(|&x| edges.iter().map(move |&y| (x, y)))
                .unzip();
            let n = a.len();
            let (da, db) = (upload(q, &a)?, upload(q, &b)?);
            let out = filled(q, n * 9, 0 as $t)?;
            let counts = filled(q, n * 3, 0u32)?;
            run(q, Range::d1(n), $kernel(&da, &db, &out, &counts))?;
            let names = [
                "saturating_add",
                "saturating_sub",
                "wrapping_add",
                "wrapping_sub",
                "wrapping_mul",
                "rotate_left",
                "rotate_right",
                "pow (wrapping)",
                "wrapping_pow",
            ];
            let want: Vec<$t> = (0..n)
                .flat_map(|i| {
                    let (x, y) = (a[i], b[i]);
                    [
                        x.saturating_add(y),
                        x.saturating_sub(y),
                        x.wrapping_add(y),
                        x.wrapping_sub(y),
                        x.wrapping_mul(y),
                        x.rotate_left(y as u32),
                        x.rotate_right(y as u32),
                        x.wrapping_pow(y as u32),
                        x.wrapping_pow((y as u32) % 70),
                    ]
                })
                .collect();
            compare_by(
                &q.to_vec(&out).map_err(fail)?,
                &want,
                |g, w, _| g == w,
                |j| {
                    format!(
                        "{}::{}({:#x}, {:#x})",
                        stringify!($t),
                        names[j % 9],
                        a[j / 9],
                        b[j / 9]
                    )
                },
            )?;
            let count_names = ["count_ones", "leading_zeros", "trailing_zeros"];
            let want: Vec<u32> = a
                .iter()
                .flat_map(|&x| [x.count_ones(), x.leading_zeros(), x.trailing_zeros()])
                .collect();
            compare_by(
                &q.to_vec(&counts).map_err(fail)?,
                &want,
                |g, w, _| g == w,
                |j| {
                    format!(
                        "{}::{}({:#x})",
                        stringify!($t),
                        count_names[j % 3],
                        a[j / 3]
                    )
                },
            )
        }
    };
}

math_int!(math_int_i32, math_int_check_i32, i32);
math_int!(math_int_u32, math_int_check_u32, u32);
math_int!(math_int_i64, math_int_check_i64, i64);
math_int!(math_int_u64, math_int_check_u64, u64);

/// `saturating_add/sub`, `wrapping_add/sub/mul`, `rotate_left/right`, `count_ones`,
/// `leading_zeros` and `trailing_zeros` of `i32 u32 i64 u64`, exactly as Rust computes them, on every pair of edge
/// patterns.
pub fn math_int(d: &Device) -> R {
    let q = in_order(d)?;
    math_int_check_i32(&q)?;
    math_int_check_u32(&q)?;
    math_int_check_i64(&q)?;
    math_int_check_u64(&q)
}

#[sycl::kernel]
fn clamp_values(
    x: &[f32],
    lo: &[f32],
    hi: &[f32],
    n: &[i32],
    u: &[u32],
    of: &mut [f32],
    oi: &mut [i32],
    ou: &mut [u32],
) {
    let g = global_id(0);
    of[g] = x[g].clamp(lo[g], hi[g]);
    let k = g % 5;
    oi[g] = n[g].clamp(-3 + k as i32, 2 + k as i32);
    ou[g] = u[g].clamp(k as u32, 4 + k as u32);
}

#[sycl::kernel]
fn clamp_fails(x: &[f32], lo: &[f32], hi: &[f32], of: &mut [f32]) {
    let g = global_id(0);
    of[g] = x[g].clamp(lo[g], hi[g]);
}

/// `clamp` on f32, i32 and u32 as Rust computes it (a NaN `x` stays; -0 and +0 are equal), and
/// Rust's panic where `min > max` or either is NaN: the work-item fails (`Errc::Kernel`).
pub fn clamp(d: &Device) -> R {
    let q = in_order(d)?;
    let xs = [
        f32::NEG_INFINITY,
        -2.0,
        -0.0,
        0.0,
        1.5,
        3.0,
        f32::INFINITY,
        f32::NAN,
    ];
    let bounds = [
        (-1.0f32, 1.0f32),
        (0.0, 0.0),
        (f32::NEG_INFINITY, f32::INFINITY),
        (2.0, 2.5),
        (-0.0, 0.0),
    ];
    let mut x = Vec::new();
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    for &v in &xs {
        for &(l, h) in &bounds {
            x.push(v);
            lo.push(l);
            hi.push(h);
        }
    }
    let n = x.len();
    let ints: Vec<i32> = (0..n as i32).map(|k| k * 7 % 23 - 11).collect();
    let uints: Vec<u32> = (0..n as u32).map(|k| k * 5 % 13).collect();
    let (dx, dl, dh) = (upload(&q, &x)?, upload(&q, &lo)?, upload(&q, &hi)?);
    let (dn, du) = (upload(&q, &ints)?, upload(&q, &uints)?);
    let of = filled(&q, n, 0f32)?;
    let oi = filled(&q, n, 0i32)?;
    let ou = filled(&q, n, 0u32)?;
    run(
        &q,
        Range::d1(n),
        clamp_values(&dx, &dl, &dh, &dn, &du, &of, &oi, &ou),
    )?;
    let got = q.to_vec(&of).map_err(fail)?;
    for g in 0..n {
        let want = x[g].clamp(lo[g], hi[g]);
        check!(
            want.to_bits() == got[g].to_bits() || (want.is_nan() && got[g].is_nan()),
            "{}.clamp({}, {}): got {}, want {want}",
            x[g],
            lo[g],
            hi[g],
            got[g]
        );
    }
    let want: Vec<i32> = (0..n)
        .map(|g| ints[g].clamp(-3 + (g % 5) as i32, 2 + (g % 5) as i32))
        .collect();
    compare(&q.to_vec(&oi).map_err(fail)?, &want, |g| {
        format!("i32 clamp of item {g}")
    })?;
    let want: Vec<u32> = (0..n)
        .map(|g| uints[g].clamp((g % 5) as u32, 4 + (g % 5) as u32))
        .collect();
    compare(&q.to_vec(&ou).map_err(fail)?, &want, |g| {
        format!("u32 clamp of item {g}")
    })?;
    // One work-item's bounds reversed, then one NaN bound.
    for (bad_lo, bad_hi) in [(2.0f32, 1.0f32), (f32::NAN, 1.0)] {
        let mut l = vec![-1.0f32; 64];
        let mut h = vec![1.0f32; 64];
        l[37] = bad_lo;
        h[37] = bad_hi;
        let (dx, dl, dh) = (filled(&q, 64, 0.5f32)?, upload(&q, &l)?, upload(&q, &h)?);
        let of = filled(&q, 64, 0f32)?;
        fails_in_kernel(
            &q,
            Range::d1(64),
            clamp_fails(&dx, &dl, &dh, &of),
            "clamp_fails",
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------- 2. casts

#[sycl::kernel]
fn casts_from_f32(
    x: &[f32],
    oi: &mut [i32],
    ou: &mut [u32],
    ol: &mut [i64],
    oq: &mut [u64],
    of: &mut [f32],
) {
    let i = global_id(0);
    let v = x[i];
    oi[i] = v as i32;
    ou[i] = v as u32;
    ol[i * 2] = v as i64;
    ol[i * 2 + 1] = (v >= 1.0) as i64;
    oq[i * 2] = v as u64;
    oq[i * 2 + 1] = (v as usize) as u64;
    of[i * 3] = (v as i32) as f32;
    of[i * 3 + 1] = (v as u64) as f32;
    of[i * 3 + 2] = ((v < 0.0) as u32) as f32;
}

#[sycl::kernel]
fn casts_from_int(
    x: &[i64],
    y: &[u64],
    oi: &mut [i32],
    ou: &mut [u32],
    ol: &mut [i64],
    oq: &mut [u64],
    of: &mut [f32],
) {
    let i = global_id(0);
    let s = x[i];
    let u = y[i];
    oi[i * 3] = s as i32;
    oi[i * 3 + 1] = u as i32;
    oi[i * 3 + 2] = (s == 0) as i32;
    ou[i * 2] = s as u32;
    ou[i * 2 + 1] = u as u32;
    ol[i * 4] = (s as i32) as i64;
    ol[i * 4 + 1] = (s as u32) as i64;
    ol[i * 4 + 2] = u as i64;
    ol[i * 4 + 3] = ((s as i32) as u32) as i64;
    oq[i * 4] = s as u64;
    oq[i * 4 + 1] = (s as i32) as u64;
    oq[i * 4 + 2] = (u as usize) as u64;
    oq[i * 4 + 3] = ((s as usize) as u32) as u64;
    of[i * 6] = s as f32;
    of[i * 6 + 1] = u as f32;
    of[i * 6 + 2] = (s as i32) as f32;
    of[i * 6 + 3] = (s as u32) as f32;
    of[i * 6 + 4] = (u as usize) as f32;
    of[i * 6 + 5] = ((s < 0) as u32) as f32;
}

const CAST_F32: [f32; 34] = [
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    3e9,
    -3e9,
    -1.5,
    -0.5,
    -0.0,
    0.0,
    0.5,
    0.999_999_94,
    1.5,
    2.5,
    -2.5,
    16777217.0,
    2147483520.0,
    2147483648.0,
    -2147483648.0,
    -2147483904.0,
    4294967040.0,
    4294967296.0,
    9.223_371_5e18,
    9.223_372e18,
    -9.223_372e18,
    -9.223_373e18,
    1.844_674_3e19,
    1.844_674_4e19,
    1e30,
    -1e30,
    f32::MAX,
    f32::MIN,
    f32::MIN_POSITIVE,
    1e-40,
    -1e-40,
];

const CAST_I64: [i64; 20] = [
    0,
    1,
    -1,
    127,
    128,
    255,
    256,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    -0x8000_0000,
    -0x8000_0001,
    i64::MAX,
    i64::MIN,
    16_777_217,
    16_777_219,
    (1 << 53) + 1,
    -(1 << 40) - 1,
    0x1234_5678_9abc_def0,
];

const CAST_U64: [u64; 20] = [
    u64::MAX,
    1 << 63,
    (1 << 63) + 1,
    0xffff_ff7f_ffff_ffff,
    0xffff_ff80_0000_0000,
    0xffff_ff80_0000_0001,
    0xffff_ff00_0000_0000,
    0x8000_0080_0000_0000,
    0x8000_0080_0000_0001,
    0x8000_0180_0000_0000,
    0,
    1,
    0xffff_ffff,
    0x1_0000_0000,
    16_777_217,
    0x7fff_ffff_ffff_ffff,
    0x0000_0001_0000_0080,
    0x0123_4567_89ab_cdef,
    0xfedc_ba98_7654_3210,
    12345,
];

/// Item 2: `as` between every pair of types is Rust's `as`: floats to integers round toward
/// zero, saturate, and NaN becomes 0; integers truncate or extend by sign; integers to floats
/// round to nearest even (also from 64-bit integers above 2^63); `bool` to integers.
pub fn casts(d: &Device) -> R {
    let q = in_order(d)?;
    let n = CAST_F32.len();
    let x = upload(&q, &CAST_F32)?;
    let (oi, ou) = (filled(&q, n, 7i32)?, filled(&q, n, 7u32)?);
    let (ol, oq) = (filled(&q, n * 2, 7i64)?, filled(&q, n * 2, 7u64)?);
    let of = filled(&q, n * 3, 7f32)?;
    run(
        &q,
        Range::d1(n),
        casts_from_f32(&x, &oi, &ou, &ol, &oq, &of),
    )?;
    let v = &CAST_F32;
    compare(&q.to_vec(&oi).map_err(fail)?, &v.map(|v| v as i32), |i| {
        format!("{:e} as i32", v[i])
    })?;
    compare(&q.to_vec(&ou).map_err(fail)?, &v.map(|v| v as u32), |i| {
        format!("{:e} as u32", v[i])
    })?;
    let want: Vec<i64> = v
        .iter()
        .flat_map(|&v| [v as i64, (v >= 1.0) as i64])
        .collect();
    compare(&q.to_vec(&ol).map_err(fail)?, &want, |j| {
        format!("{:e} case {} (as i64, bool as i64)", v[j / 2], j % 2)
    })?;
    let want: Vec<u64> = v
        .iter()
        .flat_map(|&v| [v as u64, (v as usize) as u64])
        .collect();
    compare(&q.to_vec(&oq).map_err(fail)?, &want, |j| {
        format!("{:e} case {} (as u64, as usize)", v[j / 2], j % 2)
    })?;
    let want: Vec<f32> = v
        .iter()
        .flat_map(|&v| {
            [
                (v as i32) as f32,
                (v as u64) as f32,
                ((v < 0.0) as u32) as f32,
            ]
        })
        .collect();
    compare_by(
        &q.to_vec(&of).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |j| format!("{:e} case {} (via i32, via u64, bool)", v[j / 3], j % 3),
    )?;

    let n = CAST_I64.len();
    let (s, u) = (&CAST_I64, &CAST_U64);
    let (x, y) = (upload(&q, s)?, upload(&q, u)?);
    let (oi, ou) = (filled(&q, n * 3, 7i32)?, filled(&q, n * 2, 7u32)?);
    let (ol, oq) = (filled(&q, n * 4, 7i64)?, filled(&q, n * 4, 7u64)?);
    let of = filled(&q, n * 6, 7f32)?;
    run(
        &q,
        Range::d1(n),
        casts_from_int(&x, &y, &oi, &ou, &ol, &oq, &of),
    )?;
    let what = |k: usize, j: usize| format!("({}, {:#x}) case {}", s[j / k], u[j / k], j % k);
    let want: Vec<i32> = (0..n)
        .flat_map(|i| [s[i] as i32, u[i] as i32, (s[i] == 0) as i32])
        .collect();
    compare(&q.to_vec(&oi).map_err(fail)?, &want, |j| what(3, j))?;
    let want: Vec<u32> = (0..n).flat_map(|i| [s[i] as u32, u[i] as u32]).collect();
    compare(&q.to_vec(&ou).map_err(fail)?, &want, |j| what(2, j))?;
    let want: Vec<i64> = (0..n)
        .flat_map(|i| {
            [
                (s[i] as i32) as i64,
                (s[i] as u32) as i64,
                u[i] as i64,
                ((s[i] as i32) as u32) as i64,
            ]
        })
        .collect();
    compare(&q.to_vec(&ol).map_err(fail)?, &want, |j| what(4, j))?;
    let want: Vec<u64> = (0..n)
        .flat_map(|i| {
            [
                s[i] as u64,
                (s[i] as i32) as u64,
                (u[i] as usize) as u64,
                ((s[i] as usize) as u32) as u64,
            ]
        })
        .collect();
    compare(&q.to_vec(&oq).map_err(fail)?, &want, |j| what(4, j))?;
    let want: Vec<f32> = (0..n)
        .flat_map(|i| {
            [
                s[i] as f32,
                u[i] as f32,
                (s[i] as i32) as f32,
                (s[i] as u32) as f32,
                (u[i] as usize) as f32,
                ((s[i] < 0) as u32) as f32,
            ]
        })
        .collect();
    compare_by(
        &q.to_vec(&of).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |j| what(6, j),
    )
}

#[sycl::kernel]
fn casts_with_f64(
    x: &[f64],
    f: &[f32],
    y: &[i64],
    of: &mut [f32],
    od: &mut [f64],
    oi: &mut [i64],
    oq: &mut [u64],
) {
    let i = global_id(0);
    let v = x[i];
    of[i] = v as f32;
    od[i * 4] = f[i] as f64;
    od[i * 4 + 1] = y[i] as f64;
    od[i * 4 + 2] = (y[i] as u64) as f64;
    od[i * 4 + 3] = (v as f32) as f64;
    oi[i * 2] = v as i64;
    oi[i * 2 + 1] = (v as i32) as i64;
    oq[i * 3] = v as u64;
    oq[i * 3 + 1] = (v as u32) as u64;
    oq[i * 3 + 2] = (v as usize) as u64;
}

const CAST_F64: [f64; 20] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e300,
    -1e300,
    3.402_823_567_797_337e38,
    3.402_823_466_385_288_6e38,
    1e-50,
    -1e-50,
    9.3e18,
    -9.3e18,
    1.844_674_407_370_955_2e19,
    4294967295.5,
    -0.99,
    2147483647.9,
    -2147483648.9,
    1.000_000_059_604_644_8, // 1 + 2^-24: a tie, rounds to 1 as f32
    1.000_000_178_813_934_3, // 1 + 3 * 2^-24: a tie, rounds up as f32
    0.1,
    -123456789.75,
];

/// Item 2 with f64 (aspect fp64): f64 to f32 rounds (overflow to infinity, underflow to
/// zero), f32 to f64 is exact, f64 to integers saturates, 64-bit integers to f64 round.
pub fn casts_f64(d: &Device) -> R {
    let q = in_order(d)?;
    let n = CAST_F64.len();
    let v = &CAST_F64;
    let f: Vec<f32> = CAST_F32[..n].to_vec();
    let y: Vec<i64> = CAST_I64[..n].to_vec();
    let (dx, df, dy) = (upload(&q, v)?, upload(&q, &f)?, upload(&q, &y)?);
    let of = filled(&q, n, 7f32)?;
    let od = filled(&q, n * 4, 7f64)?;
    let oi = filled(&q, n * 2, 7i64)?;
    let oq = filled(&q, n * 3, 7u64)?;
    run(
        &q,
        Range::d1(n),
        casts_with_f64(&dx, &df, &dy, &of, &od, &oi, &oq),
    )?;
    compare_by(
        &q.to_vec(&of).map_err(fail)?,
        &v.map(|v| v as f32),
        |g, w, _| same_float(g, w),
        |i| format!("{:e} as f32", v[i]),
    )?;
    let want: Vec<f64> = (0..n)
        .flat_map(|i| {
            [
                f[i] as f64,
                y[i] as f64,
                (y[i] as u64) as f64,
                (v[i] as f32) as f64,
            ]
        })
        .collect();
    compare_by(
        &q.to_vec(&od).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |j| {
            let i = j / 4;
            format!("case {} of ({:e}, {:e}, {})", j % 4, v[i], f[i], y[i])
        },
    )?;
    let want: Vec<i64> = v
        .iter()
        .flat_map(|&v| [v as i64, (v as i32) as i64])
        .collect();
    compare(&q.to_vec(&oi).map_err(fail)?, &want, |j| {
        format!("{:e} case {} (as i64, as i32)", v[j / 2], j % 2)
    })?;
    let want: Vec<u64> = v
        .iter()
        .flat_map(|&v| [v as u64, (v as u32) as u64, (v as usize) as u64])
        .collect();
    compare(&q.to_vec(&oq).map_err(fail)?, &want, |j| {
        format!("{:e} case {} (as u64, as u32, as usize)", v[j / 3], j % 3)
    })
}

// ---------------------------------------------------------------- 3. control flow

#[sycl::kernel]
fn control_flow(v: &[u32], flag: bool, out: &mut [u64]) {
    let i = global_id(0);
    let x = v[i];
    let o = i * 10;
    let mut c = 0u64;
    if x % 3 == 0 {
        c += 1;
    } else if x % 3 == 1 {
        c += 2;
    } else {
        c += 3;
    }
    out[o] = c;
    out[o + 1] = if x > 100 {
        100
    } else if x > 10 {
        10
    } else {
        x as u64
    };
    // while: Collatz steps, bounded
    let mut m = x as u64 + 1;
    let mut steps = 0u64;
    while m != 1 && steps < 1000 {
        if m % 2 == 0 {
            m /= 2;
        } else {
            m = 3 * m + 1;
        }
        steps += 1;
    }
    out[o + 2] = steps;
    // loop with break
    let mut p = 1u64;
    loop {
        if p >= x as u64 {
            break;
        }
        p *= 2;
    }
    out[o + 3] = p;
    // for over a..b and a..=b, empty when the start is past the end
    let lo = x % 7;
    let hi = x % 11;
    let mut s = 0u64;
    for j in lo..hi {
        s += j as u64;
    }
    let mut s2 = 0u64;
    for j in lo..=hi {
        s2 += j as u64 * 3;
    }
    out[o + 4] = s * 1000 + s2;
    // continue
    let mut odd = 0u64;
    for j in 0..x % 50 {
        if j % 2 == 0 {
            continue;
        }
        odd += j as u64;
    }
    out[o + 5] = odd;
    // inclusive ranges that end at their type's maximum (or start at its minimum) terminate
    let mut count = 0u64;
    for j in (4294967295u32 - x % 4)..=4294967295u32 {
        count += (j % 2) as u64 + 1;
    }
    let top = 2147483647i32;
    for j in (top - 1)..=top {
        count += (j % 2) as u64 * 10 + 10;
    }
    for j in (9223372036854775807i64 - 2)..=9223372036854775807i64 {
        count += (j % 2) as u64 * 100 + 100;
    }
    for j in (18446744073709551615usize - (x % 3) as usize)..=18446744073709551615usize {
        count += (j % 2) as u64 * 1000 + 1000;
    }
    for j in -2147483648i32..=-2147483647i32 {
        count += (j % 2) as u64 * 0 + 10000;
    }
    for j in 5..=4 {
        count += j as u64 * 1000000;
    }
    out[o + 6] = count;
    // nested loops, break in the inner one
    let mut nest = 0u64;
    for a in 0..x % 9 {
        for b in 0..a {
            if b == 3 {
                break;
            }
            nest += (a * 10 + b) as u64;
        }
    }
    out[o + 7] = nest;
    out[o + 9] = if flag { 2 } else { 3 };
    // early return
    if x % 5 == 4 {
        out[o + 8] = 77;
        return;
    }
    out[o + 8] = 1;
    out[o + 9] += 40;
}

fn control_flow_host(x: u32, flag: bool) -> [u64; 10] {
    let mut out = [0u64; 10];
    out[0] = match x % 3 {
        0 => 1,
        1 => 2,
        _ => 3,
    };
    out[1] = if x > 100 {
        100
    } else if x > 10 {
        10
    } else {
        x as u64
    };
    let mut m = x as u64 + 1;
    let mut steps = 0u64;
    while m != 1 && steps < 1000 {
        m = if m % 2 == 0 { m / 2 } else { 3 * m + 1 };
        steps += 1;
    }
    out[2] = steps;
    let mut p = 1u64;
    while p < x as u64 {
        p *= 2;
    }
    out[3] = p;
    let (lo, hi) = (x % 7, x % 11);
    let s: u64 = (lo..hi).map(|j| j as u64).sum();
    let s2: u64 = (lo..=hi).map(|j| j as u64 * 3).sum();
    out[4] = s * 1000 + s2;
    out[5] = (0..x % 50).filter(|j| j % 2 == 1).map(|j| j as u64).sum();
    let mut count = 0u64;
    for j in (u32::MAX - x % 4)..=u32::MAX {
        count += (j % 2) as u64 + 1;
    }
    for j in (i32::MAX - 1)..=i32::MAX {
        count += (j % 2) as u64 * 10 + 10;
    }
    for j in (i64::MAX - 2)..=i64::MAX {
        count += (j % 2) as u64 * 100 + 100;
    }
    for j in (usize::MAX - (x % 3) as usize)..=usize::MAX {
        count += (j % 2) as u64 * 1000 + 1000;
    }
    count += 2 * 10000;
    out[6] = count;
    let mut nest = 0u64;
    for a in 0..x % 9 {
        for b in 0..a.min(3) {
            nest += (a * 10 + b) as u64;
        }
    }
    out[7] = nest;
    out[9] = if flag { 2 } else { 3 };
    if x % 5 == 4 {
        out[8] = 77;
    } else {
        out[8] = 1;
        out[9] += 40;
    }
    out
}

/// Item 3: `if`/`else` chains, `if` as a value, `while`, `loop`/`break`, `for` over `a..b` and
/// `a..=b` (also ranges ending at the type's maximum, which must terminate, and empty ones),
/// `continue`, nested loops, early `return`, a `bool` parameter.
pub fn control_flow_matches_the_host(d: &Device) -> R {
    let q = in_order(d)?;
    let x: Vec<u32> = (0..300u32).chain([1000, 4095, 65535, 1 << 20]).collect();
    let n = x.len();
    let dx = upload(&q, &x)?;
    for flag in [true, false] {
        let out = filled(&q, n * 10, 0xdead_u64)?;
        run(&q, Range::d1(n), control_flow(&dx, flag, &out))?;
        let want: Vec<u64> = x.iter().flat_map(|&v| control_flow_host(v, flag)).collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
            format!("x = {} (flag {flag}) result {}", x[j / 10], j % 10)
        })?;
    }
    Ok(())
}

/// The right-hand side of `&&` / `||` only runs when needed: indexing past the slice there
/// would fail the launch.
#[sycl::kernel]
fn short_circuit(x: &[i32], out: &mut [u32]) {
    let i = global_id(0);
    let n = x.len();
    let mut r = 0u32;
    if i < n && x[i] > 0 {
        r += 1;
    }
    if i >= n || x[i] < 0 {
        r += 2;
    }
    let inside = i < n && x[i] == 0;
    if !inside {
        r += 4;
    }
    let mut j = i;
    while j < n && x[j] != 0 {
        j += 1;
    }
    out[i] = r + (j as u32) * 8;
}

/// Item 1: `&&` and `||` short-circuit (the other side would fail a bounds check).
pub fn short_circuit_evaluation(d: &Device) -> R {
    let q = in_order(d)?;
    let x: Vec<i32> = (0..200)
        .map(|k| [3, -2, 0, 5, 7][k % 5] * (k as i32 % 3))
        .collect();
    let n = x.len();
    let total = n + 57;
    let dx = upload(&q, &x)?;
    let out = filled(&q, total, 0u32)?;
    run(&q, Range::d1(total), short_circuit(&dx, &out))?;
    let want: Vec<u32> = (0..total)
        .map(|i| {
            let mut r = 0;
            if i < n && x[i] > 0 {
                r += 1;
            }
            if i >= n || x[i] < 0 {
                r += 2;
            }
            if !(i < n && x[i] == 0) {
                r += 4;
            }
            let mut j = i;
            while j < n && x[j] != 0 {
                j += 1;
            }
            r + j as u32 * 8
        })
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("item {i}")
    })
}

/// Odds and ends of the language: scalar parameters of every type, shadowing, an `if` with
/// statements as a `let` initializer, `bool` operators, inclusive ranges ending at the type's
/// maximum with `continue` and `break`, `while` with `continue`, builtins named by path,
/// compound assignment of elements, `len()`, and an early `return` from inside a loop.
#[sycl::kernel]
fn details(
    a: i32,
    b: u32,
    c: i64,
    d: u64,
    e: usize,
    f: f32,
    g: bool,
    x: &[u32],
    out: &mut [u64],
    acc: &mut [i64],
) {
    let i = sycl::kernel::global_id(0);
    let o = i * 16;
    out[o] = a as u64;
    out[o + 1] = b as u64;
    out[o + 2] = c as u64;
    out[o + 3] = d;
    out[o + 4] = e as u64;
    out[o + 5] = (f * 4.0) as u64;
    out[o + 6] = g as u64;
    let v = x[i];
    let v = v as u64 * 3;
    let v = v + 1;
    out[o + 7] = v;
    let mut s: u64 = 0;
    let w = 5u64;
    if g {
        let w = w * 10;
        s += w;
    }
    s += w;
    out[o + 8] = s;
    let t = if x[i] % 2 == 0 {
        let h = x[i] / 2;
        h as u64 + 100
    } else {
        let k = x[i] * 3;
        k as u64 + 1
    };
    out[o + 9] = t;
    let p = x[i] > 10;
    let q = x[i] % 3 == 0;
    out[o + 10] = (p & q) as u64
        | ((p | q) as u64) << 1
        | ((p ^ q) as u64) << 2
        | ((!p) as u64) << 3
        | ((p == q) as u64) << 4
        | ((p != q) as u64) << 5
        | ((p && !q) as u64) << 6;
    let mut cnt = 0u64;
    for j in (4294967290u32 + x[i] % 3)..=4294967295u32 {
        if j % 2 == 0 {
            continue;
        }
        cnt += j as u64 - 4294967000;
    }
    for j in 18446744073709551610u64..=18446744073709551615u64 {
        if j == 18446744073709551613u64 {
            break;
        }
        cnt += 1000;
    }
    out[o + 11] = cnt;
    let mut k = 0u32;
    let mut sw = 0u64;
    while k < x[i] % 20 {
        k += 1;
        if k % 3 == 0 {
            continue;
        }
        sw += k as u64;
    }
    out[o + 12] = sw;
    out[o + 13] = x.len() as u64;
    acc[i] += 5;
    acc[i] *= 3;
    acc[i] -= i as i64;
    acc[i] <<= 2;
    acc[i] >>= 1;
    acc[i] /= 3;
    acc[i] %= 1000;
    acc[i] ^= 7;
    acc[i] |= 16;
    acc[i] &= -2;
    out[o + 15] = 1;
    for j in 0..10u32 {
        if j == x[i] % 7 && g {
            out[o + 14] = j as u64;
            return;
        }
    }
    out[o + 14] = 99;
    out[o + 15] = 2;
}

fn details_host(args: (i32, u32, i64, u64, usize, f32, bool), x: u32, len: usize) -> [u64; 16] {
    let (a, b, c, d, e, f, g) = args;
    let mut out = [0u64; 16];
    out[0] = a as u64;
    out[1] = b as u64;
    out[2] = c as u64;
    out[3] = d;
    out[4] = e as u64;
    out[5] = (f * 4.0) as u64;
    out[6] = g as u64;
    out[7] = x as u64 * 3 + 1;
    out[8] = if g { 55 } else { 5 };
    out[9] = if x % 2 == 0 {
        (x / 2) as u64 + 100
    } else {
        x.wrapping_mul(3) as u64 + 1
    };
    let (p, q) = (x > 10, x % 3 == 0);
    out[10] = (p & q) as u64
        | ((p | q) as u64) << 1
        | ((p ^ q) as u64) << 2
        | ((!p) as u64) << 3
        | ((p == q) as u64) << 4
        | ((p != q) as u64) << 5
        | ((p && !q) as u64) << 6;
    let mut cnt = 0u64;
    for j in (4294967290u32 + x % 3)..=u32::MAX {
        if j % 2 == 1 {
            cnt += j as u64 - 4294967000;
        }
    }
    out[11] = cnt + 3000;
    out[12] = (1..=x % 20).filter(|k| k % 3 != 0).map(|k| k as u64).sum();
    out[13] = len as u64;
    if g && x % 7 < 10 {
        out[14] = (x % 7) as u64;
        out[15] = 1;
    } else {
        out[14] = 99;
        out[15] = 2;
    }
    out
}

#[sycl::kernel]
fn lens(x: &[u32], y: &[u32], out: &mut [u64]) {
    out[global_id(0)] = (x.len() * 1000 + y.len()) as u64;
}

/// Item 1 and 3: the rest of the language (see `details`), on every device.
pub fn language_details(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 200usize;
    let x: Vec<u32> = (0..n as u32)
        .map(|k| if k % 17 == 5 { u32::MAX - k } else { k * 13 })
        .collect();
    let init: Vec<i64> = (0..n as i64).map(|k| k * 1_000_003 - 77_777).collect();
    let big = upload(&q, &[x.clone(), vec![7u32; 10]].concat())?;
    let dx = big.range(0..n).map_err(fail)?;
    for args in [
        (
            -5i32,
            4_000_000_000u32,
            -9_000_000_000i64,
            u64::MAX - 3,
            12345usize,
            2.75f32,
            true,
        ),
        (i32::MIN, 0, i64::MAX, 1 << 63, usize::MAX, -1.5, false),
    ] {
        let out = filled(&q, n * 16, 0xdead_u64)?;
        let acc = upload(&q, &init)?;
        let (a, b, c, dd, e, f, g) = args;
        run(
            &q,
            Range::d1(n),
            details(a, b, c, dd, e, f, g, &dx, &out, &acc),
        )?;
        let want: Vec<u64> = x.iter().flat_map(|&v| details_host(args, v, n)).collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
            format!("x = {} (flag {g}) result {}", x[j / 16], j % 16)
        })?;
        let want: Vec<i64> = init
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let mut v = (v + 5) * 3 - i as i64;
                v <<= 2;
                v >>= 1;
                v /= 3;
                v %= 1000;
                v ^= 7;
                v |= 16;
                v & -2
            })
            .collect();
        compare(&q.to_vec(&acc).map_err(fail)?, &want, |i| {
            format!("acc[{i}]")
        })?;
    }
    // `len()` of ranges, an empty one included (an empty range overlaps nothing).
    let out = filled(&q, 4, 0u64)?;
    let (part, empty) = (
        big.range(3..10).map_err(fail)?,
        big.range(5..5).map_err(fail)?,
    );
    run(&q, Range::d1(4), lens(&part, &empty, &out))?;
    compare(&q.to_vec(&out).map_err(fail)?, &[7000u64; 4], |i| {
        format!("len item {i}")
    })?;
    Ok(())
}

// ---------------------------------------------------------------- 5. helpers

#[sycl::kernel_fn]
fn h_square(x: i64) -> i64 {
    x * x
}

/// A helper that calls another.
#[sycl::kernel_fn]
fn h_poly(x: i64) -> i64 {
    let s: i64 = h_square(x);
    s + 3 * x - 7
}

/// A helper whose tail is an `if` value.
#[sycl::kernel_fn]
fn h_sign(x: f32) -> f32 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// A helper with a loop and an early `return`.
#[sycl::kernel_fn]
fn h_gcd(a: u32, b: u32) -> u32 {
    if a == 0 {
        return b;
    }
    let mut x = a;
    let mut y = b;
    while y != 0 {
        let t = x % y;
        x = y;
        y = t;
    }
    x
}

#[sycl::kernel_fn]
fn h_div(a: i32, b: i32) -> i32 {
    a / b
}

#[sycl::kernel]
fn use_helpers(x: &[i64], f: &[f32], u: &[u32], oi: &mut [i64], of: &mut [f32], ou: &mut [u32]) {
    let i = global_id(0);
    oi[i] = h_poly(x[i]);
    of[i] = h_sign(f[i]) * 2.0f32 + h_sign(-f[i]);
    let g: u32 = h_gcd(u[i], u[(i + 1) % u.len()]);
    ou[i] = g;
}

#[sycl::kernel]
fn divide_in_helper(a: &[i32], b: &[i32], out: &mut [i32]) {
    let i = global_id(0);
    out[i] = h_div(a[i], b[i]);
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Item 5: `#[sycl::kernel_fn]` helpers, one calling another, one with an `if` value tail, one
/// with a loop and early return; a helper's result typed by its use. Helpers are callable
/// from host code too.
pub fn helpers(d: &Device) -> R {
    check_eq!(h_poly(5), 25 + 15 - 7, "the helper on the host");
    let q = in_order(d)?;
    let n = 500usize;
    let x: Vec<i64> = (0..n as i64).map(|k| (k - 250) * 1_000_003).collect();
    let f: Vec<f32> = (0..n)
        .map(|k| [-2.5f32, 0.0, 3.0, -0.0, 1e-30][k % 5])
        .collect();
    let u: Vec<u32> = (0..n as u32).map(|k| (k * 37) % 120 * (k % 4)).collect();
    let (dx, df, du) = (upload(&q, &x)?, upload(&q, &f)?, upload(&q, &u)?);
    let oi = filled(&q, n, 0i64)?;
    let of = filled(&q, n, 0f32)?;
    let ou = filled(&q, n, 0u32)?;
    run(&q, Range::d1(n), use_helpers(&dx, &df, &du, &oi, &of, &ou))?;
    let want: Vec<i64> = x
        .iter()
        .map(|&v| v.wrapping_mul(v).wrapping_add(3 * v) - 7)
        .collect();
    compare(&q.to_vec(&oi).map_err(fail)?, &want, |i| {
        format!("h_poly({})", x[i])
    })?;
    let sign = |v: f32| {
        if v > 0.0 {
            1.0f32
        } else if v < 0.0 {
            -1.0
        } else {
            0.0
        }
    };
    let want: Vec<f32> = f.iter().map(|&v| sign(v) * 2.0 + sign(-v)).collect();
    compare(&q.to_vec(&of).map_err(fail)?, &want, |i| {
        format!("h_sign({})", f[i])
    })?;
    let want: Vec<u32> = (0..n).map(|i| gcd(u[i], u[(i + 1) % n])).collect();
    compare(&q.to_vec(&ou).map_err(fail)?, &want, |i| {
        format!("h_gcd({}, {})", u[i], u[(i + 1) % n])
    })
}

/// Item 5: a division by zero inside a helper fails the launch (`Errc::Kernel`), and the queue
/// goes on.
pub fn helper_division_by_zero_fails(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 300usize;
    let a: Vec<i32> = (0..n as i32).map(|k| k * 7 - 1000).collect();
    let mut b: Vec<i32> = (0..n as i32).map(|k| k % 13 + 1).collect();
    let (da, out) = (upload(&q, &a)?, filled(&q, n, 0i32)?);
    let db = upload(&q, &b)?;
    run(&q, Range::d1(n), divide_in_helper(&da, &db, &out))?;
    let want: Vec<i32> = (0..n).map(|i| a[i] / b[i]).collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("h_div item {i}")
    })?;
    b[123] = 0;
    q.write(&db, &b).map_err(fail)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        divide_in_helper(&da, &db, &out),
        "divide_in_helper",
    )?;
    b[123] = 1;
    q.write(&db, &b).map_err(fail)?;
    run(&q, Range::d1(n), divide_in_helper(&da, &db, &out))
}

// ---------------------------------------------------------------- 6. work-item queries

#[sycl::kernel]
fn ids_1d(r0: usize, vals: &mut [u32], counts: &mut [u32], bad: &mut [u32]) {
    let a = global_id(0);
    if global_range(0) != r0 || a >= r0 {
        atomic_fetch_add(bad, 0, 1u32);
    }
    vals[a] = a as u32;
    atomic_fetch_add(counts, a, 1u32);
}

#[sycl::kernel]
fn ids_2d(r0: usize, r1: usize, vals: &mut [u32], counts: &mut [u32], bad: &mut [u32]) {
    let a = global_id(0);
    let b = global_id(1);
    if global_range(0) != r0 || global_range(1) != r1 || a >= r0 || b >= r1 {
        atomic_fetch_add(bad, 0, 1u32);
    }
    let lin = a * global_range(1) + b;
    vals[lin] = lin as u32;
    atomic_fetch_add(counts, lin, 1u32);
}

#[sycl::kernel]
fn ids_3d(r0: usize, r1: usize, r2: usize, vals: &mut [u32], counts: &mut [u32], bad: &mut [u32]) {
    let a = global_id(0);
    let b = global_id(1);
    let c = global_id(2);
    if global_range(0) != r0 || global_range(1) != r1 || global_range(2) != r2 {
        atomic_fetch_add(bad, 0, 1u32);
    }
    if a >= r0 || b >= r1 || c >= r2 {
        atomic_fetch_add(bad, 0, 1u32);
    }
    let lin = (a * global_range(1) + b) * global_range(2) + c;
    vals[lin] = lin as u32;
    atomic_fetch_add(counts, lin, 1u32);
}

/// Room after the range, larger than any rounding to work-groups, that must stay untouched.
const GUARD: usize = 4096;
const SENTINEL: u32 = 0xdead_beef;

/// Checks that every element of `0..n` was written once with its index and the guard after it
/// was not touched.
fn check_ids(
    q: &Queue,
    vals: &Usm<u32>,
    counts: &Usm<u32>,
    bad: &Usm<u32>,
    n: usize,
    what: &str,
) -> R {
    check_eq!(
        q.to_vec(bad).map_err(fail)?[0],
        0,
        "{what}: items saw a wrong range or id"
    );
    let v = q.to_vec(vals).map_err(fail)?;
    let c = q.to_vec(counts).map_err(fail)?;
    let want_v: Vec<u32> = (0..n as u32)
        .chain(std::iter::repeat(SENTINEL).take(GUARD))
        .collect();
    let want_c: Vec<u32> = std::iter::repeat(1)
        .take(n)
        .chain(std::iter::repeat(0).take(GUARD))
        .collect();
    compare(&c, &want_c, |i| {
        format!("{what}: times element {i} was run")
    })?;
    compare(&v, &want_v, |i| format!("{what}: element {i}"))
}

/// What `Range::launched_on` says of a plain range: whole work-groups (no larger than the
/// device allows) covering the range with less than one group to spare, a dimension smaller
/// than a group in the next power of two above it, or no groups at all (the native CPU); an
/// nd-range comes back as it is.
fn launch_geometry(d: &Device, plain: Range) -> R {
    let what = format!("launched_on({plain:?})");
    let r = plain.launched_on(d).map_err(fail)?;
    check_eq!(r.dims(), plain.dims(), "{what}: dimensions");
    match r.local() {
        None => check_eq!(
            r,
            plain,
            "{what}: a range without groups comes back as it is"
        ),
        Some(local) => {
            let items: usize = local.iter().product();
            check!(
                items >= 1 && items <= d.max_work_group_size(),
                "{what}: groups of {local:?} on a device that allows {}",
                d.max_work_group_size()
            );
            for (k, &l) in local.iter().enumerate() {
                let (g, n) = (r.global()[k], plain.global()[k]);
                check!(
                    l >= 1 && g % l == 0 && g >= n && g - n < l,
                    "{what}: dimension {k}: global {g} for {n} items in groups of {l}"
                );
                // A range smaller than a group gets a power of two (a handful of program
                // builds over many sizes), less than twice its size.
                check!(
                    l < 2 * n.max(1),
                    "{what}: dimension {k}: groups of {l} for {n} items"
                );
            }
            if d.is_cpu() && plain.dims() == 1 {
                let units = d.max_compute_units().max(1) as usize;
                let n = plain.global()[0];
                check!(
                    local[0] >= 256.min(n)
                        && (local[0] <= 256 || n.div_ceil(local[0]) >= 8 * units),
                    "{what}: a CPU's groups of {} leave {} groups for {units} compute units",
                    local[0],
                    n.div_ceil(local[0])
                );
            }
        }
    }
    let nd = plain.with_local([1, 1, 1]);
    check_eq!(nd.launched_on(d).map_err(fail)?, nd, "{what}: an nd-range");
    Ok(())
}

/// Item 6: plain ranges in 1, 2 and 3 dimensions whose sizes are not multiples of any
/// work-group size: every work-item runs exactly once with the right ids and ranges, and none
/// runs outside the range (a kernel sees exactly its range).
pub fn work_item_queries_plain_ranges(d: &Device) -> R {
    let q = in_order(d)?;
    let bad = filled(&q, 1, 0u32)?;
    // An empty range runs nothing.
    let vals = filled(&q, GUARD, SENTINEL)?;
    let counts = filled(&q, GUARD, 0u32)?;
    run(&q, Range::d1(0), ids_1d(0, &vals, &counts, &bad))?;
    check_ids(&q, &vals, &counts, &bad, 0, "d1(0)")?;
    // (2^21 + 3: large enough for a CPU device's largest groups, `Range::launched_on`.)
    for n in [1usize, 257, 1000, 100_003, (1 << 21) + 3] {
        let vals = filled(&q, n + GUARD, SENTINEL)?;
        let counts = filled(&q, n + GUARD, 0u32)?;
        run(&q, Range::d1(n), ids_1d(n, &vals, &counts, &bad))?;
        check_ids(&q, &vals, &counts, &bad, n, &format!("d1({n})"))?;
        launch_geometry(d, Range::d1(n))?;
    }
    for (r0, r1) in [(37usize, 53usize), (1, 1000), (1000, 3), (17, 17)] {
        let n = r0 * r1;
        let vals = filled(&q, n + GUARD, SENTINEL)?;
        let counts = filled(&q, n + GUARD, 0u32)?;
        run(&q, Range::d2(r0, r1), ids_2d(r0, r1, &vals, &counts, &bad))?;
        check_ids(&q, &vals, &counts, &bad, n, &format!("d2({r0}, {r1})"))?;
        launch_geometry(d, Range::d2(r0, r1))?;
    }
    for (r0, r1, r2) in [
        (5usize, 7usize, 9usize),
        (1, 1, 300),
        (300, 1, 1),
        (3, 11, 13),
    ] {
        let n = r0 * r1 * r2;
        let vals = filled(&q, n + GUARD, SENTINEL)?;
        let counts = filled(&q, n + GUARD, 0u32)?;
        run(
            &q,
            Range::d3(r0, r1, r2),
            ids_3d(r0, r1, r2, &vals, &counts, &bad),
        )?;
        check_ids(
            &q,
            &vals,
            &counts,
            &bad,
            n,
            &format!("d3({r0}, {r1}, {r2})"),
        )?;
    }
    Ok(())
}

#[sycl::kernel]
fn nd_ids_1d(out: &mut [u64]) {
    let o = global_id(0) * 13;
    out[o] = global_id(0) as u64;
    out[o + 1] = local_id(0) as u64;
    out[o + 2] = group_id(0) as u64;
    out[o + 3] = local_range(0) as u64;
    out[o + 4] = group_range(0) as u64;
}

#[sycl::kernel]
fn nd_ids_2d(out: &mut [u64]) {
    let o = (global_id(0) * global_range(1) + global_id(1)) * 13;
    out[o] = global_id(0) as u64;
    out[o + 1] = local_id(0) as u64;
    out[o + 2] = group_id(0) as u64;
    out[o + 3] = local_range(0) as u64;
    out[o + 4] = group_range(0) as u64;
    out[o + 5] = local_id(1) as u64;
    out[o + 6] = group_id(1) as u64;
    out[o + 7] = local_range(1) as u64;
    out[o + 8] = group_range(1) as u64;
    out[o + 12] = global_id(1) as u64;
}

#[sycl::kernel]
fn nd_ids_3d(out: &mut [u64]) {
    let lin = (global_id(0) * global_range(1) + global_id(1)) * global_range(2) + global_id(2);
    let o = lin * 13;
    out[o] = global_id(0) as u64;
    out[o + 1] = local_id(0) as u64;
    out[o + 2] = group_id(0) as u64;
    out[o + 3] = local_range(0) as u64;
    out[o + 4] = group_range(0) as u64;
    out[o + 5] = local_id(1) as u64;
    out[o + 6] = group_id(1) as u64;
    out[o + 7] = local_range(1) as u64;
    out[o + 8] = group_range(1) as u64;
    out[o + 9] = local_id(2) as u64;
    out[o + 10] = group_id(2) as u64;
    out[o + 11] = local_range(2) as u64;
    out[o + 12] =
        group_range(2) as u64 * 1000000 + global_id(2) as u64 * 1000 + global_id(1) as u64;
}

/// What `nd_ids_*` write for the item at `id` of an nd-range of `global` / `local`.
fn nd_expected(dims: usize, id: [usize; 3], global: [usize; 3], local: [usize; 3]) -> [u64; 13] {
    let mut w = [u64::MAX; 13];
    let slot = |d: usize| if d == 0 { 1 } else { 1 + 4 * d };
    for d in 0..dims {
        let s = slot(d);
        w[s] = (id[d] % local[d]) as u64;
        w[s + 1] = (id[d] / local[d]) as u64;
        w[s + 2] = local[d] as u64;
        w[s + 3] = (global[d] / local[d]) as u64;
    }
    w[0] = id[0] as u64;
    match dims {
        1 => {}
        2 => w[12] = id[1] as u64,
        _ => w[12] = (global[2] / local[2]) as u64 * 1000000 + id[2] as u64 * 1000 + id[1] as u64,
    }
    w
}

/// Item 6: with nd-ranges, `local_id`, `group_id`, `local_range` and `group_range` agree
/// (global id = group id × local range + local id) in 1, 2 and 3 dimensions.
pub fn work_item_queries_nd_ranges(d: &Device) -> R {
    let q = in_order(d)?;
    let cases: [([usize; 3], [usize; 3], u8); 7] = [
        ([1000, 1, 1], [40, 1, 1], 1),
        ([96, 1, 1], [96, 1, 1], 1),
        ([7, 1, 1], [1, 1, 1], 1),
        ([48, 40, 1], [16, 8, 1], 2),
        ([9, 30, 1], [3, 10, 1], 2),
        ([4, 6, 10], [2, 3, 5], 3),
        ([2, 2, 64], [1, 2, 32], 3),
    ];
    for (global, local, dims) in cases {
        let range = match dims {
            1 => Range::d1(global[0]),
            2 => Range::d2(global[0], global[1]),
            _ => Range::d3(global[0], global[1], global[2]),
        }
        .with_local(local);
        let n: usize = global.iter().product();
        let out = filled(&q, n * 13, u64::MAX)?;
        match dims {
            1 => run(&q, range, nd_ids_1d(&out))?,
            2 => run(&q, range, nd_ids_2d(&out))?,
            _ => run(&q, range, nd_ids_3d(&out))?,
        }
        let mut want = Vec::with_capacity(n * 13);
        for a in 0..global[0] {
            for b in 0..global[1] {
                for c in 0..global[2] {
                    want.extend(nd_expected(dims as usize, [a, b, c], global, local));
                }
            }
        }
        compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
            format!("{range:?}: item {} value {}", j / 13, j % 13)
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------- 7. bounds and failures

#[sycl::kernel]
fn oob_read(x: &[u32], off: usize, out: &mut [u32]) {
    let i = global_id(0);
    out[i] = x[i + off];
}

#[sycl::kernel]
fn oob_write(out: &mut [u32], off: usize) {
    let i = global_id(0);
    out[i + off] = 7;
}

#[sycl::kernel]
fn oob_below(out: &mut [u32]) {
    let i = global_id(0);
    out[i - 1] = 9;
}

#[sycl::kernel]
fn oob_local(x: &[u32], out: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    tile[l] = x[global_id(0)];
    barrier();
    out[global_id(0)] = tile[l + 1];
}

#[sycl::kernel]
fn oob_atomic(out: &mut [u32]) {
    atomic_fetch_add(out, global_id(0) + 1, 1u32);
}

#[sycl::kernel]
fn copy_plus_one(x: &[u32], out: &mut [u32]) {
    let i = global_id(0);
    out[i] = x[i] + 1;
}

/// Item 7: out-of-bounds reads and writes (past the end, below zero by wrapping, past a local
/// array) fail the launch with `Errc::Kernel`, even when the index stays inside the
/// allocation the argument is a range of; memory outside the argument is not modified, and
/// the queue runs the next kernel.
pub fn bounds_checks(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1000usize;
    let pad = 64usize;
    let big = filled(&q, n + 2 * pad, SENTINEL)?;
    let inner = big.range(pad..pad + n).map_err(fail)?;
    // A write one past the end lands in the guard unless it is checked.
    fails_in_kernel(&q, Range::d1(n), oob_write(&inner, 1), "oob_write")?;
    let after = q.to_vec(&big).map_err(fail)?;
    check!(
        after[..pad]
            .iter()
            .chain(&after[pad + n..])
            .all(|&v| v == SENTINEL),
        "an out-of-bounds write changed memory outside the argument"
    );
    // Atomics are checked too.
    fails_in_kernel(&q, Range::d1(n), oob_atomic(&inner), "oob_atomic")?;
    let after = q.to_vec(&big).map_err(fail)?;
    check!(
        after[..pad]
            .iter()
            .chain(&after[pad + n..])
            .all(|&v| v == SENTINEL),
        "an out-of-bounds atomic changed memory outside the argument"
    );
    // Far out of range.
    fails_in_kernel(&q, Range::d1(4), oob_write(&inner, 1 << 40), "oob_write")?;
    fails_in_kernel(&q, Range::d1(4), oob_below(&inner), "oob_below")?;
    // A read past the end of a range whose allocation goes on.
    let src = upload(&q, &(0..(n + 2 * pad) as u32).collect::<Vec<_>>())?;
    let src_inner = src.range(pad..pad + n).map_err(fail)?;
    let out = filled(&q, n, 0u32)?;
    fails_in_kernel(&q, Range::d1(n), oob_read(&src_inner, 1, &out), "oob_read")?;
    // Local arrays are checked too.
    fails_in_kernel(
        &q,
        Range::d1(128).with_local([64, 1, 1]),
        oob_local(&src_inner, &out),
        "oob_local",
    )?;
    // The queue goes on, and in-bounds launches of the same kernels work.
    run(&q, Range::d1(n - 1), oob_read(&src_inner, 1, &out))?;
    let got = q.to_vec(&out).map_err(fail)?;
    let want: Vec<u32> = (0..n as u32 - 1).map(|i| i + pad as u32 + 1).collect();
    compare(&got[..n - 1], &want, |i| {
        format!("oob_read in bounds, item {i}")
    })?;
    run(&q, Range::d1(n), copy_plus_one(&src_inner, &inner))?;
    let after = q.to_vec(&big).map_err(fail)?;
    let want: Vec<u32> = std::iter::repeat(SENTINEL)
        .take(pad)
        .chain((0..n as u32).map(|i| i + pad as u32 + 1))
        .chain(std::iter::repeat(SENTINEL).take(pad))
        .collect();
    compare(&after, &want, |i| {
        format!("copy after failures, element {i}")
    })
}

// Kernels whose checks the macro's bounds analysis (sycl-macros/src/bounds.rs) drops, and
// near misses it must not.

#[sycl::kernel]
fn proof_strided_sum(x: &[u32], out: &mut [u32]) {
    let n = x.len();
    let mut acc = 0u32;
    for i in (global_id(0)..n).step_by(global_range(0)) {
        acc += x[i];
    }
    out[global_id(0)] = acc;
}

#[sycl::kernel]
fn proof_strided_plus_one(x: &[u32], out: &mut [u32]) {
    let n = x.len();
    let mut acc = 0u32;
    for i in (global_id(0)..n).step_by(global_range(0)) {
        acc += x[i + 1];
    }
    out[global_id(0)] = acc;
}

#[sycl::kernel]
fn proof_inclusive(x: &[u32], out: &mut [u32]) {
    let mut acc = 0u32;
    for i in global_id(0)..=x.len() {
        acc += x[i];
    }
    out[global_id(0)] = acc;
}

/// `if i < end { x[i] }`: proved (`end <= x.len()`), so it runs unchecked and never fails.
#[sycl::kernel]
fn proof_condition(x: &[u32], out: &mut [u32], c: usize) {
    let g = global_id(0);
    let i = g * c;
    let end = (i + 2).min(x.len());
    let v = if i < end { x[i] } else { 0 };
    let w = if end > i && v > 0 { x[i] } else { 1 };
    out[g] = v + w;
}

/// `if i < x.len() { y[i] = x[i] }`: `y[i]` is in bounds where `y` is no shorter than `x`
/// (a run-time guard); where it is shorter, the store stays checked and fails.
#[sycl::kernel]
fn proof_condition_other(x: &[u32], y: &mut [u32]) {
    let i = global_id(0) * 16;
    let end = x.len();
    if i < end {
        y[i] = x[i];
    }
}

/// `if i <= x.len() { x[i] }`: not proved; fails where `i == x.len()`.
#[sycl::kernel]
fn proof_condition_le(x: &[u32], out: &mut [u32], c: usize) {
    let g = global_id(0);
    let i = g * c;
    let v = if i <= x.len() { x[i] } else { 0 };
    out[g] = v;
}

#[sycl::kernel]
fn proof_truncated(x: &[u32], out: &mut [u32]) {
    let n = (x.len() as u32).min(global_id(0) as u32 + 3);
    let mut acc = 0u32;
    for i in 0..n {
        acc += x[i as usize];
    }
    out[global_id(0)] = acc;
}

#[sycl::kernel]
fn proof_local_stride(out: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    tile[l] = l as u32;
    tile[l + 32] = (l + 32) as u32;
    barrier();
    out[global_id(0)] = tile[l * 2];
}

#[sycl::kernel]
fn proof_local_wrap(out: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0) as u32;
    tile[local_id(0)] = l;
    barrier();
    out[global_id(0)] = tile[(l + 4294967295u32) as usize];
}

#[sycl::kernel]
fn proof_rows(x: &[u32], out: &mut [u32], w: usize) {
    let tile = local_array::<u32, 64>();
    let row = group_id(0);
    let col = local_id(0);
    tile[col] = x[row * w + col];
    barrier();
    out[row * w + col] = tile[col] + 1;
}

/// Item 7b: accesses the macro proves in bounds run without their checks and compute the same;
/// the near misses (an index one past, `..=` up to the length, a local index over the array for
/// this work-group size, a `u32` index that wraps, a slice shorter than the range or than
/// the rows a tiled kernel reads) still fail with `Errc::Kernel`.
pub fn bounds_proofs(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1000usize;
    let xs: Vec<u32> = (0..n as u32).map(|i| i * 3 + 1).collect();
    let x = upload(&q, &xs)?;
    let items = 64usize;
    let out = filled(&q, items, 0u32)?;
    run(&q, Range::d1(items), proof_strided_sum(&x, &out))?;
    let want: Vec<u32> = (0..items)
        .map(|g| xs.iter().skip(g).step_by(items).sum())
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("proof_strided_sum item {i}")
    })?;
    run(&q, Range::d1(items), proof_truncated(&x, &out))?;
    let want: Vec<u32> = (0..items)
        .map(|g| xs[..(g + 3).min(n)].iter().sum())
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("proof_truncated item {i}")
    })?;
    fails_in_kernel(
        &q,
        Range::d1(items),
        proof_strided_plus_one(&x, &out),
        "proof_strided_plus_one",
    )?;
    fails_in_kernel(
        &q,
        Range::d1(items),
        proof_inclusive(&x, &out),
        "proof_inclusive",
    )?;
    // A condition below the length guards its accesses; `<=` does not (item 40 reads
    // x[1000] with c = 25).
    run(&q, Range::d1(items), proof_condition(&x, &out, 25))?;
    let want: Vec<u32> = (0..items)
        .map(|g| {
            let i = g * 25;
            if i < n {
                2 * xs[i]
            } else {
                1
            }
        })
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("proof_condition item {i}")
    })?;
    fails_in_kernel(
        &q,
        Range::d1(items),
        proof_condition_le(&x, &out, 25),
        "proof_condition_le",
    )?;
    let y_long = filled(&q, n, 0u32)?;
    run(&q, Range::d1(items), proof_condition_other(&x, &y_long))?;
    let got = q.to_vec(&y_long).map_err(fail)?;
    check!(
        (0..n).all(|i| got[i] == if i % 16 == 0 { xs[i] } else { 0 }),
        "proof_condition_other: every 16th element copied"
    );
    let y_short = filled(&q, n / 2, 0u32)?;
    fails_in_kernel(
        &q,
        Range::d1(items),
        proof_condition_other(&x, &y_short),
        "proof_condition_other (short y)",
    )?;
    // The same flat kernel with a slice as long as the range (no checks needed) and shorter.
    let long = filled(&q, items, 0u32)?;
    run(&q, Range::d1(items), copy_plus_one(&x, &long))?;
    compare(
        &q.to_vec(&long).map_err(fail)?,
        &xs[..items].iter().map(|v| v + 1).collect::<Vec<_>>(),
        |i| format!("copy_plus_one item {i}"),
    )?;
    let short = upload(&q, &xs[..items - 1])?;
    fails_in_kernel(
        &q,
        Range::d1(items),
        copy_plus_one(&short, &long),
        "copy_plus_one",
    )?;
    // Groups of 32: `l + 32 <= 63` and `l * 2 <= 62` fit the 64-element array; groups of 64
    // do not.
    let local = 32usize.min(max_group(d, 64));
    if local == 32 {
        let out = filled(&q, 64, 0u32)?;
        run(
            &q,
            Range::d1(64).with_local([32, 1, 1]),
            proof_local_stride(&out),
        )?;
        let want: Vec<u32> = (0..64u32).map(|g| 2 * (g % 32)).collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
            format!("proof_local_stride item {i}")
        })?;
    }
    if max_group(d, 64) == 64 {
        fails_in_kernel(
            &q,
            Range::d1(64).with_local([64, 1, 1]),
            proof_local_stride(&out),
            "proof_local_stride",
        )?;
    }
    fails_in_kernel(
        &q,
        Range::d1(64).with_local([local, 1, 1]),
        proof_local_wrap(&out),
        "proof_local_wrap",
    )?;
    // Rows of `w` elements, one group per row: `row * w + col < groups * w` when the slices
    // are that long (for GPUs the runtime tests that on the host and builds the program
    // without those checks), not when shorter.
    let groups = 8usize;
    for w in [local, local + 3] {
        let xs: Vec<u32> = (0..(groups * w) as u32).collect();
        let x = upload(&q, &xs)?;
        let out = filled(&q, groups * w, 0u32)?;
        let range = Range::d1(groups * local).with_local([local, 1, 1]);
        run(&q, range, proof_rows(&x, &out, w))?;
        let got = q.to_vec(&out).map_err(fail)?;
        for r in 0..groups {
            for c in 0..w {
                let want = if c < local { xs[r * w + c] + 1 } else { 0 };
                check_eq!(
                    got[r * w + c],
                    want,
                    "proof_rows (w {w}) row {r} column {c}"
                );
            }
        }
        let short = upload(&q, &xs[..groups * w - w + local - 1])?;
        fails_in_kernel(&q, range, proof_rows(&short, &out, w), "proof_rows")?;
    }
    Ok(())
}

// A work-item-strided `usize` loop whose values may pass 2^32 (through `base`). OpenCL C
// counts it in 32 bits where its end plus its step stays below 2^32 (a run-time guard), and
// starts it at its end when the start is at or past it (a truncated start would run).
#[sycl::kernel]
fn strided_from(x: &[u32], out: &mut [u32], base: usize, end: usize) {
    let mut acc = 0u32;
    let mut count = 0u32;
    for i in (base + local_id(0)..end).step_by(local_range(0)) {
        acc += x[i - base];
        count += 1;
    }
    out[global_id(0)] = acc + count * 1000;
}

// A `u32` loop counted with `v += step` only where no value can wrap.
#[sycl::kernel]
fn count_steps_u32(out: &mut [u32], start: u32, end: u32, step: usize) {
    let mut n = 0u32;
    let mut last = 0u32;
    for i in (start..end).step_by(step) {
        n += 1;
        last = i;
    }
    out[0] = n;
    out[1] = last;
}

// The same with a start no bound covers (read from memory): the loop may count with
// `v += step` (the end and step are guarded), but its test must not compare signed. The
// checked read, the trip count and the checked stores are the shape Intel's CPU runtime
// 2026.2 miscompiled through SPIR-V when the count was below 8 (spec/kernels.md, "Known
// problems").
#[sycl::kernel]
fn count_steps_u32_loaded(out: &mut [u32], end: u32, step: usize) {
    let start = out[2];
    let mut n = 0u32;
    let mut last = 0u32;
    for i in (start..end).step_by(step) {
        n += 1;
        last = i;
    }
    out[0] = n;
    out[1] = last;
}

// `u32` index arithmetic: signed 32-bit only where every value stays below 2^31. With
// `big` near 2^32 the sum passes 2^31 (and the guard fails); the index is still `i`. (A wrong
// sign extension itself would show only with an index past 2^31, in a slice that long.)
#[sycl::kernel]
fn index_through_big(x: &[u32], out: &mut [u32], big: u32) {
    let i = global_id(0) as u32;
    out[global_id(0)] = x[(i + big - big) as usize] + x[(i * 2 + 1 - i - 1) as usize];
}

/// The index and loop forms chosen for Intel's CPU vectorizer (spec/kernels.md, "Performance
/// notes") compute what the plain forms compute, on both sides of their conditions: a `usize`
/// loop past 2^32, across 2^63 and below both, a start past the end whose 32-bit truncation
/// is not, a `u32` loop that would wrap if counted by `v += step` (in `uint` or in `int`),
/// a `u32` start past 2^31, index sums past 2^31.
pub fn index_forms(d: &Device) -> R {
    let q = in_order(d)?;
    let local = 32usize.min(max_group(d, 32));
    let n = 300usize;
    let xs: Vec<u32> = (0..n as u32).map(|k| k * 7 + 2).collect();
    let x = upload(&q, &xs)?;
    let out = filled(&q, local, 0u32)?;
    let range = Range::d1(local).with_local([local, 1, 1]);
    // Work-item l sums x[l], x[l + local], .. below `len`, and counts them.
    let strided = |len: usize| -> Vec<u32> {
        (0..local)
            .map(|l| {
                let picked: Vec<u32> = (l..len).step_by(local).map(|k| xs[k]).collect();
                picked.iter().sum::<u32>() + picked.len() as u32 * 1000
            })
            .collect()
    };
    // Past 2^32 (not counted in 32 bits), and across 2^63 (SPIR-V's 64-bit loops compare
    // signed only below it).
    for base in [
        5usize,
        (1usize << 32) + 5,
        (1usize << 33) - 3,
        (1usize << 63) - 100,
    ] {
        run(&q, range, strided_from(&x, &out, base, base + n))?;
        compare(&q.to_vec(&out).map_err(fail)?, &strided(n), |l| {
            format!("strided_from base {base:#x} item {l}")
        })?;
    }
    // The start is past the end; its low 32 bits (3 + l) are not.
    run(&q, range, strided_from(&x, &out, (1usize << 32) + 3, 10))?;
    compare(&q.to_vec(&out).map_err(fail)?, &vec![0u32; local], |l| {
        format!("strided_from past the end item {l}")
    })?;
    run(&q, range, strided_from(&x, &out, 3, 10))?;
    compare(&q.to_vec(&out).map_err(fail)?, &strided(7), |l| {
        format!("strided_from 3..10 item {l}")
    })?;

    let pair = filled(&q, 2, 0u32)?;
    for (start, end, step) in [
        (u32::MAX - 40, u32::MAX, 16usize),
        (0, 100, 16),
        (u32::MAX - 1, u32::MAX, 1 << 40),
        (7, 7, 3),
        // OpenCL C counts in `int` where the start and every value below 2^31 are proved:
        // a start past 2^31 (negative as an `int`) must not run, nor the last step wrap.
        ((1 << 31) + 5, 10, 1),
        ((1 << 31) - 40, (1 << 31) - 2, 16),
        (3, 1 << 30, 1 << 28),
        (5, 6, 1),
    ]
    .into_iter()
    // Counts around the vector widths of CPU loop vectorizers, whose short-count paths
    // skip the vector loop (spec/kernels.md, "Known problems").
    .chain((0..20u32).flat_map(|c| {
        [
            (10, 10 + c, 1usize),
            (u32::MAX - 3 * c, u32::MAX, 3),
            (100, 100 + 5 * c, 5),
        ]
    })) {
        run(&q, Range::d1(1), count_steps_u32(&pair, start, end, step))?;
        let seen: Vec<u32> = (start..end).step_by(step).collect();
        let want = [seen.len() as u32, seen.last().copied().unwrap_or(0)];
        compare(&q.to_vec(&pair).map_err(fail)?, &want, |k| {
            format!("count_steps_u32 {start}..{end} by {step} word {k}")
        })?;
        let words = upload(&q, &[0, 0, start])?;
        run(&q, Range::d1(1), count_steps_u32_loaded(&words, end, step))?;
        let got = q.to_vec(&words).map_err(fail)?;
        compare(&got[..2], &want, |k| {
            format!("count_steps_u32_loaded {start}..{end} by {step} word {k}")
        })?;
    }

    let items = 64usize;
    let out = filled(&q, items, 0u32)?;
    for big in [3u32, 1 << 31, u32::MAX - 10] {
        run(&q, Range::d1(items), index_through_big(&x, &out, big))?;
        let want: Vec<u32> = (0..items).map(|i| xs[i] * 2).collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
            format!("index_through_big {big} item {i}")
        })?;
    }
    Ok(())
}

#[sycl::kernel]
fn div_i32(a: &[i32], b: &[i32], out: &mut [i32]) {
    let i = global_id(0);
    out[i] = a[i] / b[i];
}

#[sycl::kernel]
fn rem_i64(a: &[i64], b: &[i64], out: &mut [i64]) {
    let i = global_id(0);
    out[i] = a[i] % b[i];
}

#[sycl::kernel]
fn div_u32(a: &[u32], b: &[u32], out: &mut [u32]) {
    let i = global_id(0);
    let mut v = a[i];
    v /= b[i];
    out[i] = v;
}

/// Item 7: integer division and remainder by zero, and `MIN / -1`, fail the launch with
/// `Errc::Kernel`.
pub fn division_failures(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 64usize;
    let a: Vec<i32> = (0..n as i32).map(|k| k * 1000 - 7).collect();
    let ones = vec![1i32; n];
    let (da, out) = (upload(&q, &a)?, filled(&q, n, 0i32)?);
    let mut b = ones.clone();
    b[40] = 0;
    fails_in_kernel(
        &q,
        Range::d1(n),
        div_i32(&da, &upload(&q, &b)?, &out),
        "div_i32",
    )?;
    let mut a2 = a.clone();
    a2[3] = i32::MIN;
    let mut b2 = ones.clone();
    b2[3] = -1;
    fails_in_kernel(
        &q,
        Range::d1(n),
        div_i32(&upload(&q, &a2)?, &upload(&q, &b2)?, &out),
        "div_i32",
    )?;
    // i32::MIN / 1 and -1 / -1 are fine.
    b2[3] = 1;
    b2[4] = -1;
    run(
        &q,
        Range::d1(n),
        div_i32(&upload(&q, &a2)?, &upload(&q, &b2)?, &out),
    )?;
    let want: Vec<i32> = (0..n).map(|i| a2[i] / b2[i]).collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("div_i32 item {i}")
    })?;
    let a64: Vec<i64> = (0..n as i64).map(|k| k * 1_000_000_007 - 3).collect();
    let mut b64: Vec<i64> = (0..n as i64).map(|k| k - 30).collect();
    b64[30] = 1;
    let (da64, out64) = (upload(&q, &a64)?, filled(&q, n, 0i64)?);
    run(&q, Range::d1(n), rem_i64(&da64, &upload(&q, &b64)?, &out64))?;
    let want: Vec<i64> = (0..n).map(|i| a64[i] % b64[i]).collect();
    compare(&q.to_vec(&out64).map_err(fail)?, &want, |i| {
        format!("rem_i64 item {i}")
    })?;
    b64[30] = 0;
    fails_in_kernel(
        &q,
        Range::d1(n),
        rem_i64(&da64, &upload(&q, &b64)?, &out64),
        "rem_i64",
    )?;
    b64[30] = -1;
    let mut m64 = a64.clone();
    m64[30] = i64::MIN;
    fails_in_kernel(
        &q,
        Range::d1(n),
        rem_i64(&upload(&q, &m64)?, &upload(&q, &b64)?, &out64),
        "rem_i64",
    )?;
    let ua: Vec<u32> = (0..n as u32).map(|k| k * 99_999).collect();
    let mut ub: Vec<u32> = (0..n as u32).map(|k| k + 1).collect();
    ub[63] = 0;
    let out_u = filled(&q, n, 0u32)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        div_u32(&upload(&q, &ua)?, &upload(&q, &ub)?, &out_u),
        "div_u32",
    )
}

#[sycl::kernel]
fn fail_before_barrier(x: &[u32], out: &mut [u32]) {
    let tile = local_array::<u32, 256>();
    let l = local_id(0);
    let g = global_id(0);
    let j = if l == 5 { x.len() + g } else { g };
    tile[l] = x[j];
    barrier();
    out[g] = tile[(l + 1) % local_range(0)];
}

/// A failure in a work-group kernel ends the work-item but not its group's barriers: the
/// launch reports `Errc::Kernel` instead of hanging.
pub fn failure_in_a_work_group(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1024usize;
    let local = max_group(d, 256);
    let x = upload(&q, &(0..n as u32).collect::<Vec<_>>())?;
    let out = filled(&q, n, 0u32)?;
    fails_in_kernel(
        &q,
        Range::d1(n).with_local([local, 1, 1]),
        fail_before_barrier(&x, &out),
        "fail_before_barrier",
    )
}

#[sycl::kernel]
fn unchecked(x: &[u32], out: &mut [u32]) {
    let i = global_id(0);
    // SAFETY: the test launches x.len() work-items, so i < x.len().
    let v = unsafe { *x.get_unchecked(i) };
    // SAFETY: out has x.len() elements too.
    unsafe {
        *out.get_unchecked_mut(i) = v * 3 + 1;
    }
}

#[sycl::kernel]
fn unchecked_local(x: &[u32], out: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    // SAFETY: the test launches work-groups of 64, so l < 64, the tile's length.
    unsafe {
        *tile.get_unchecked_mut(l) = x[global_id(0)] * 2;
    }
    barrier();
    // SAFETY: l < 64, so 63 - l < 64.
    out[global_id(0)] = unsafe { *tile.get_unchecked(63 - l) };
}

/// Item 7: `unsafe { *x.get_unchecked(i) }` and `*y.get_unchecked_mut(i) = v` in bounds, on
/// slices and local arrays.
pub fn unchecked_access(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 5000usize;
    let x: Vec<u32> = (0..n as u32)
        .map(|k| k.wrapping_mul(2_654_435_761))
        .collect();
    let (dx, out) = (upload(&q, &x)?, filled(&q, n, 0u32)?);
    run(&q, Range::d1(n), unchecked(&dx, &out))?;
    let want: Vec<u32> = x
        .iter()
        .map(|&v| v.wrapping_mul(3).wrapping_add(1))
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("item {i}")
    })?;
    let m = 64 * 10;
    run(
        &q,
        Range::d1(m).with_local([64, 1, 1]),
        unchecked_local(&dx, &out),
    )?;
    let want: Vec<u32> = (0..m)
        .map(|g| x[g - g % 64 + 63 - g % 64].wrapping_mul(2))
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?[..m], &want, |i| {
        format!("local item {i}")
    })
}

// ---------------------------------------------------------------- 8. aliasing

#[sycl::kernel]
fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = a * x[i] + y[i];
}

#[sycl::kernel]
fn add_two(a: &[f32], b: &[f32], out: &mut [f32]) {
    let i = global_id(0);
    out[i] = a[i] + b[i];
}

#[sycl::kernel]
fn swap_two(a: &mut [u32], b: &mut [u32]) {
    let i = global_id(0);
    let t = a[i];
    a[i] = b[i];
    b[i] = t;
}

#[sycl::kernel]
fn bits_into(a: &[u32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = a[i] as f32;
}

/// Item 8: a `&mut [T]` argument overlapping any other slice argument (the same memory,
/// overlapping ranges, even by one element or through another element type) is refused at
/// submit with `Errc::Invalid`, and nothing runs; two `&[T]` over the same memory, and
/// disjoint or adjacent ranges of one allocation, are accepted and correct.
pub fn aliasing(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 256usize;
    let init: Vec<f32> = (0..2 * n).map(|k| k as f32).collect();
    let buf = upload(&q, &init)?;
    let whole = buf.range(..).map_err(fail)?;
    let lo = buf.range(0..n).map_err(fail)?;
    let hi = buf.range(n..2 * n).map_err(fail)?;
    let mid = buf.range(n / 2..n / 2 + n).map_err(fail)?;
    let last_lo = buf.range(n - 1..2 * n - 1).map_err(fail)?;
    let r = Range::d1(n);
    refused(
        q.parallel_for(r, &[], axpy(2.0, &buf, &buf)),
        Errc::Invalid,
        "axpy(x, x)",
    )?;
    refused(
        q.parallel_for(r, &[], axpy(2.0, &lo, &whole)),
        Errc::Invalid,
        "axpy over a containing range",
    )?;
    refused(
        q.parallel_for(r, &[], axpy(2.0, &lo, &mid)),
        Errc::Invalid,
        "axpy, mut range overlapping the read one",
    )?;
    refused(
        q.parallel_for(r, &[], axpy(2.0, &mid, &lo)),
        Errc::Invalid,
        "axpy, read range overlapping the mut one",
    )?;
    refused(
        q.parallel_for(r, &[], axpy(2.0, &last_lo, &lo)),
        Errc::Invalid,
        "axpy, ranges sharing one element",
    )?;
    refused(
        q.parallel_for(r, &[], add_two(&lo, &hi, &mid)),
        Errc::Invalid,
        "add_two writing over both inputs",
    )?;
    let words = filled(&q, 2 * n, 5u32)?;
    let (wa, wb) = (
        words.range(0..n).map_err(fail)?,
        words.range(n / 2..n / 2 + n).map_err(fail)?,
    );
    refused(
        q.parallel_for(r, &[], swap_two(&wa, &wb)),
        Errc::Invalid,
        "swap_two over overlapping ranges",
    )?;
    refused(
        q.parallel_for(r, &[], swap_two(&words, &words)),
        Errc::Invalid,
        "swap_two(x, x)",
    )?;
    // The same bytes seen as another element type.
    let bits = buf.full().cast::<u32>().map_err(fail)?;
    let bits_hi = bits.sub(n..2 * n).map_err(fail)?;
    refused(
        q.parallel_for(r, &[], bits_into(&bits_hi, &hi)),
        Errc::Invalid,
        "bits_into over the same bytes as u32 and f32",
    )?;
    // Nothing ran.
    compare(&q.to_vec(&buf).map_err(fail)?, &init, |i| {
        format!("element {i} after the refusals")
    })?;
    compare(&q.to_vec(&words).map_err(fail)?, &vec![5u32; 2 * n], |i| {
        format!("word {i} after the refusals")
    })?;

    // Two `&[T]` over the same memory are fine.
    let out = filled(&q, n, 0f32)?;
    run(&q, r, add_two(&lo, &lo, &out))?;
    let want: Vec<f32> = (0..n).map(|k| 2.0 * k as f32).collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("add_two(x, x) item {i}")
    })?;
    // Disjoint, adjacent ranges of one allocation, as `&[T]` and `&mut [T]`.
    run(&q, r, axpy(3.0, &lo, &hi))?;
    let want: Vec<f32> = (0..n)
        .map(|k| k as f32)
        .chain((0..n).map(|k| 3.0 * k as f32 + (n + k) as f32))
        .collect();
    compare(&q.to_vec(&buf).map_err(fail)?, &want, |i| {
        format!("axpy(lo, hi) element {i}")
    })?;
    // Two `&mut [T]` over disjoint ranges.
    let words_hi = words.range(n..2 * n).map_err(fail)?;
    q.write(&words_hi, &(0..n as u32).collect::<Vec<_>>())
        .map_err(fail)?;
    let words_lo = words.range(0..n).map_err(fail)?;
    run(&q, r, swap_two(&words_lo, &words_hi))?;
    let want: Vec<u32> = (0..n as u32).chain(std::iter::repeat(5).take(n)).collect();
    compare(&q.to_vec(&words).map_err(fail)?, &want, |i| {
        format!("swap_two word {i}")
    })?;
    Ok(())
}

// ---------------------------------------------------------------- 9. range errors

#[sycl::kernel]
fn uses_local_memory(x: &[u32], out: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    tile[l] = x[global_id(0)];
    out[global_id(0)] = tile[l];
}

#[sycl::kernel]
fn uses_barrier(out: &mut [u32]) {
    out[global_id(0)] = 1;
    barrier();
}

#[sycl::kernel]
fn uses_group_sum(out: &mut [u32]) {
    let s = group_sum(1u32);
    out[global_id(0)] = s;
}

#[sycl::kernel]
fn uses_local_id(out: &mut [u32]) {
    out[global_id(0)] = local_id(0) as u32;
}

#[sycl::kernel]
fn uses_group_range(out: &mut [u32]) {
    out[global_id(0)] = group_range(0) as u32;
}

#[sycl::kernel]
fn uses_dim_1(out: &mut [u32]) {
    out[global_id(0) * global_range(1) + global_id(1)] = 1;
}

#[sycl::kernel]
fn uses_dim_2(out: &mut [u32]) {
    out[global_id(2)] = 1;
}

#[sycl::kernel]
fn huge_local(out: &mut [u64]) {
    let big = local_array::<u64, 65536>();
    let more = local_array::<u64, 65536>();
    big[local_id(0)] = 1;
    more[local_id(0)] = 2;
    barrier();
    out[global_id(0)] = big[local_id(0)] + more[local_id(0)];
}

/// Item 9: kernels that need work-groups (local arrays, barriers, reductions, local or group
/// queries) refuse plain ranges, kernels refuse ranges with fewer dimensions than they index,
/// and local memory over the device's is refused, all with `Errc::NdRange` at submit.
pub fn range_errors(d: &Device) -> R {
    let q = in_order(d)?;
    let x = filled(&q, 256, 1u32)?;
    let out = filled(&q, 256, 0u32)?;
    let plain = Range::d1(256);
    let nd = Range::d1(256).with_local([64, 1, 1]);
    let e = Errc::NdRange;
    refused(
        q.parallel_for(plain, &[], uses_local_memory(&x, &out)),
        e,
        "local array, plain range",
    )?;
    refused(
        q.parallel_for(plain, &[], uses_barrier(&out)),
        e,
        "barrier, plain range",
    )?;
    refused(
        q.parallel_for(plain, &[], uses_group_sum(&out)),
        e,
        "group_sum, plain range",
    )?;
    refused(
        q.parallel_for(plain, &[], uses_local_id(&out)),
        e,
        "local_id, plain range",
    )?;
    refused(
        q.parallel_for(plain, &[], uses_group_range(&out)),
        e,
        "group_range, plain range",
    )?;
    refused(
        q.parallel_for(plain, &[], uses_dim_1(&out)),
        e,
        "global_id(1), 1-D range",
    )?;
    refused(
        q.parallel_for(nd, &[], uses_dim_1(&out)),
        e,
        "global_id(1), 1-D nd-range",
    )?;
    refused(
        q.parallel_for(Range::d2(16, 16), &[], uses_dim_2(&out)),
        e,
        "global_id(2), 2-D range",
    )?;
    refused(
        q.parallel_for(
            Range::d1(100).with_local([64, 1, 1]),
            &[],
            uses_local_id(&out),
        ),
        e,
        "a global range that is not a multiple of the work-group",
    )?;
    compare(&q.to_vec(&out).map_err(fail)?, &[0u32; 256], |i| {
        format!("element {i} after the refusals")
    })?;
    // The same kernels with the ranges they need.
    run(&q, nd, uses_local_memory(&x, &out))?;
    run(&q, nd, uses_group_sum(&out))?;
    compare(&q.to_vec(&out).map_err(fail)?, &[64u32; 256], |i| {
        format!("group_sum element {i}")
    })?;
    run(&q, nd, uses_local_id(&out))?;
    let want: Vec<u32> = (0..256).map(|i| i % 64).collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("local_id element {i}")
    })?;
    run(&q, Range::d2(16, 16), uses_dim_1(&out))?;
    run(&q, Range::d3(1, 1, 256), uses_dim_2(&out))?;
    // Kernels that need f64 or 64-bit atomics, where the device lacks them.
    let (wide, wide_out) = (filled(&q, 4, 1f64)?, filled(&q, 4, 0u64)?);
    let cmp = filled(&q, 4, 0u32)?;
    let fs = Errc::FeatureNotSupported;
    if !d.has(Aspect::Fp64) {
        let f64_out = sycl::malloc_device::<f64>(4 * FLOAT_OPS, &q).map_err(fail)?;
        refused(
            q.parallel_for(
                Range::d1(4),
                &[],
                float_ops_f64(&wide, &wide, &wide, &f64_out, &cmp),
            ),
            fs,
            "an f64 kernel without fp64",
        )?;
    }
    if !d.has(Aspect::Atomic64) {
        let (wide_in, tickets) = (filled(&q, 4, 1u64)?, filled(&q, 4, 0u64)?);
        refused(
            q.parallel_for(
                Range::d1(4),
                &[],
                atomic_u64_ops(&wide_in, &wide_out, &tickets),
            ),
            fs,
            "64-bit atomics without atomic64",
        )?;
    }
    let have = d.local_mem_size();
    if have > 0 && have < 1 << 20 {
        let big = filled(&q, 64, 0u64)?;
        refused(
            q.parallel_for(Range::d1(64).with_local([64, 1, 1]), &[], huge_local(&big)),
            e,
            "1 MiB of local memory",
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------- 10. barriers

/// Each work-item writes its slot after a delay that differs between items, then reads the
/// slot of an item half a group away: without a working barrier the reader sees the old value.
#[sycl::kernel]
fn barrier_exchange(x: &[u32], y: &mut [u32]) {
    let tile = local_array::<u32, 1024>();
    let l = local_id(0);
    let n = local_range(0);
    let g = global_id(0);
    let mut v = x[g];
    for _k in 0..(l % 32) * 8 {
        v = v * 1664525 + 1013904223;
    }
    tile[l] = v;
    barrier();
    y[g] = tile[(l + n / 2 + 1) % n];
}

fn lcg_steps(mut v: u32, steps: usize) -> u32 {
    for _ in 0..steps {
        v = v.wrapping_mul(1664525).wrapping_add(1013904223);
    }
    v
}

/// Item 10: a barrier waits for every work-item of the group: items exchange values through
/// local memory across the group (several groups; sizes 64, 256, and the largest up to 1024
/// the device allows). Fails if a barrier does not wait.
pub fn barrier_exchange_waits(d: &Device) -> R {
    let q = in_order(d)?;
    let mut sizes = vec![1usize, 64, 256, max_group(d, 1024)];
    sizes.dedup();
    for local in sizes {
        if local > max_group(d, 1024) {
            continue;
        }
        let n = local * 8;
        let x: Vec<u32> = (0..n as u32)
            .map(|k| k.wrapping_mul(2_654_435_761))
            .collect();
        let (dx, y) = (upload(&q, &x)?, filled(&q, n, SENTINEL)?);
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            barrier_exchange(&dx, &y),
        )?;
        let want: Vec<u32> = (0..n)
            .map(|g| {
                let (base, l) = (g - g % local, g % local);
                let src = (l + local / 2 + 1) % local;
                lcg_steps(x[base + src], (src % 32) * 8)
            })
            .collect();
        compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
            format!("groups of {local}: item {g}")
        })?;
    }
    Ok(())
}

/// Rotates the group's values by one slot per round, two barriers per round, in a `for` loop
/// with uniform bounds.
#[sycl::kernel]
fn barrier_rotate(x: &[u32], rounds: u32, y: &mut [u32]) {
    let tile = local_array::<u32, 1024>();
    let l = local_id(0);
    let n = local_range(0);
    let g = global_id(0);
    tile[l] = x[g];
    barrier();
    for _r in 0..rounds {
        let v = tile[(l + 1) % n];
        barrier();
        tile[l] = v + 1;
        barrier();
    }
    y[g] = tile[l];
}

/// `barrier_rotate` in the work-groups of 32 it requires (the native CPU form has no path for
/// groups of one item).
#[sycl::kernel(reqd_work_group_size(32))]
fn barrier_rotate_32(x: &[u32], rounds: u32, y: &mut [u32]) {
    let tile = local_array::<u32, 32>();
    let l = local_id(0);
    let g = global_id(0);
    tile[l] = x[g];
    barrier();
    for _r in 0..rounds {
        let v = tile[(l + 1) % 32];
        barrier();
        tile[l] = v + 1;
        barrier();
    }
    y[g] = tile[l];
}

/// A tree reduction: log2(group size) rounds, each ending with a barrier.
#[sycl::kernel]
fn barrier_tree_sum(x: &[u32], steps: u32, y: &mut [u32]) {
    let tile = local_array::<u32, 1024>();
    let l = local_id(0);
    tile[l] = x[global_id(0)];
    barrier();
    for k in 0..steps {
        let stride = local_range(0) >> (k + 1);
        if l < stride {
            tile[l] = tile[l] + tile[l + stride];
        }
        barrier();
    }
    if l == 0 {
        y[group_id(0)] = tile[0];
    }
}

/// Group reductions inside a `for` loop with uniform bounds.
#[sycl::kernel]
fn reduce_in_loop(x: &[u32], rounds: u32, out: &mut [u32]) {
    let mut acc = 0u32;
    for r in 0..rounds {
        let v = x[global_id(0)] + r;
        let s = group_sum(v);
        let m = group_max(v);
        acc += s ^ m;
    }
    out[global_id(0)] = acc;
}

/// Item 10: barriers inside `for` loops with uniform bounds (several phases, values moving
/// between items every phase): a rotation by one slot per round, and a tree reduction. Groups
/// of one work-item too (the native CPU runs such kernels as straight code). The rotation
/// again in a kernel that requires groups of 32 (`reqd_work_group_size`): it runs in those,
/// and any other work-group size, or none, is refused with `Errc::NdRange`.
pub fn barrier_in_uniform_loops(d: &Device) -> R {
    let q = in_order(d)?;
    if max_group(d, 1024) >= 32 {
        let n = 32 * 5;
        let x: Vec<u32> = (0..n as u32)
            .map(|k| k.wrapping_mul(2_246_822_519))
            .collect();
        let (dx, y) = (upload(&q, &x)?, filled(&q, n, SENTINEL)?);
        let rounds = 7u32;
        run(
            &q,
            Range::d1(n).with_local([32, 1, 1]),
            barrier_rotate_32(&dx, rounds, &y),
        )?;
        let want: Vec<u32> = (0..n)
            .map(|g| x[g - g % 32 + (g % 32 + rounds as usize) % 32].wrapping_add(rounds))
            .collect();
        compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
            format!("groups of 32 required: item {g}")
        })?;
        for (range, what) in [
            (Range::d1(n), "a plain range"),
            (Range::d1(n).with_local([1, 1, 1]), "groups of 1"),
            (Range::d1(n).with_local([16, 1, 1]), "groups of 16"),
            (Range::d2(n, 2).with_local([32, 2, 1]), "groups of [32, 2]"),
        ] {
            refused(
                q.parallel_for(range, &[], barrier_rotate_32(&dx, rounds, &y)),
                Errc::NdRange,
                &format!("reqd_work_group_size(32), {what}"),
            )?;
        }
    }
    for local in [1usize, 32, 256, max_group(d, 1024)] {
        if local > max_group(d, 1024) {
            continue;
        }
        let groups = 6;
        let n = local * groups;
        let x: Vec<u32> = (0..n as u32)
            .map(|k| k.wrapping_mul(40503) ^ (k >> 3))
            .collect();
        let dx = upload(&q, &x)?;
        for rounds in [0u32, 1, 5, 37] {
            let y = filled(&q, n, SENTINEL)?;
            run(
                &q,
                Range::d1(n).with_local([local, 1, 1]),
                barrier_rotate(&dx, rounds, &y),
            )?;
            let want: Vec<u32> = (0..n)
                .map(|g| {
                    let (base, l) = (g - g % local, g % local);
                    x[base + (l + rounds as usize) % local].wrapping_add(rounds)
                })
                .collect();
            compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
                format!("groups of {local}, {rounds} rounds: item {g}")
            })?;
        }
        let y = filled(&q, n, SENTINEL)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            reduce_in_loop(&dx, 9, &y),
        )?;
        let want: Vec<u32> = x
            .chunks(local)
            .flat_map(|c| {
                let acc = (0..9u32).fold(0u32, |acc, r| {
                    let s = c
                        .iter()
                        .fold(0u32, |a, &b| a.wrapping_add(b.wrapping_add(r)));
                    let m = c.iter().map(|&v| v.wrapping_add(r)).max().expect("a group");
                    acc.wrapping_add(s ^ m)
                });
                std::iter::repeat(acc).take(local)
            })
            .collect();
        compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
            format!("reductions in a loop, groups of {local}: item {g}")
        })?;
        if local.is_power_of_two() {
            let y = filled(&q, groups, SENTINEL)?;
            let steps = local.trailing_zeros();
            run(
                &q,
                Range::d1(n).with_local([local, 1, 1]),
                barrier_tree_sum(&dx, steps, &y),
            )?;
            let want: Vec<u32> = x
                .chunks(local)
                .map(|c| c.iter().fold(0u32, |a, &b| a.wrapping_add(b)))
                .collect();
            compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
                format!("tree sum, groups of {local}: group {g}")
            })?;
        }
    }
    Ok(())
}

/// A third of the items return before the first barrier; the others pair up through local
/// memory across three barriers and a group reduction.
#[sycl::kernel]
fn barrier_early_return(x: &[u32], y: &mut [u32], sums: &mut [u32]) {
    let tile = local_array::<u32, 1024>();
    let l = local_id(0);
    let g = global_id(0);
    if l % 3 == 0 {
        return;
    }
    tile[l] = x[g] * 2;
    barrier();
    let v = if l % 3 == 1 { tile[l + 1] } else { tile[l - 1] };
    barrier();
    tile[l] = v + 1;
    barrier();
    let w = if l % 3 == 1 { tile[l + 1] } else { tile[l - 1] };
    let s = group_sum(w);
    let lo = group_min(w);
    let hi = group_max(w);
    y[g] = w;
    if l == 1 {
        sums[group_id(0) * 3] = s;
        sums[group_id(0) * 3 + 1] = lo;
        sums[group_id(0) * 3 + 2] = hi;
    }
}

/// Item 10: work-items that `return` before a barrier do not deadlock their group, and the
/// others still synchronise (and sum) correctly.
pub fn barrier_after_early_return(d: &Device) -> R {
    let q = in_order(d)?;
    for local in [3usize, 96, 255, 768] {
        if local > max_group(d, 1024) {
            continue;
        }
        let groups = 5;
        let n = local * groups;
        let x: Vec<u32> = (0..n as u32).map(|k| k * 7 + 3).collect();
        let dx = upload(&q, &x)?;
        let y = filled(&q, n, SENTINEL)?;
        let sums = filled(&q, groups * 3, SENTINEL)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            barrier_early_return(&dx, &y, &sums),
        )?;
        let want: Vec<u32> = (0..n)
            .map(|g| {
                if g % local % 3 == 0 {
                    SENTINEL
                } else {
                    x[g] * 2 + 1
                }
            })
            .collect();
        compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
            format!("groups of {local}: item {g}")
        })?;
        let want: Vec<u32> = (0..groups)
            .flat_map(|k| {
                let live: Vec<u32> = (k * local..(k + 1) * local)
                    .filter(|g| g % local % 3 != 0)
                    .map(|g| x[g] * 2 + 1)
                    .collect();
                [
                    live.iter().sum(),
                    *live.iter().min().expect("items"),
                    *live.iter().max().expect("items"),
                ]
            })
            .collect();
        compare(&q.to_vec(&sums).map_err(fail)?, &want, |k| {
            format!(
                "groups of {local}: {} of group {}",
                ["sum", "min", "max"][k % 3],
                k / 3
            )
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------- 11. group reductions

macro_rules! reduce {
    ($kernel:ident, $t:ident) => {
        #[sycl::kernel]
        fn $kernel(x: &[$t], out: &mut [$t]) {
            let g = global_id(0);
            let v = x[g];
            let s = group_sum(v);
            let lo = group_min(v);
            let hi = group_max(v);
            out[g * 3] = s;
            out[g * 3 + 1] = lo;
            out[g * 3 + 2] = hi;
        }
    };
}

reduce!(reduce_i32, i32);
reduce!(reduce_u32, u32);
reduce!(reduce_i64, i64);
reduce!(reduce_u64, u64);
reduce!(reduce_f32, f32);
reduce!(reduce_f64, f64);

/// Group sizes for the reductions: not multiples of 32, one item, a power of two.
fn reduce_sizes(d: &Device) -> Vec<usize> {
    [1usize, 7, 48, 100, 256, 1000]
        .into_iter()
        .filter(|&s| s <= max_group(d, 1024))
        .collect()
}

/// The sizes of `reduce_sizes` that tell an element type's reduction apart from another's: part
/// of one sub-group, and many sub-groups with a part of one last. (Each size is a program
/// build per type; the shapes in between are the first integer and float types' to cover.)
fn reduce_edge_sizes(d: &Device) -> Vec<usize> {
    [7usize, 1000]
        .into_iter()
        .filter(|&s| s <= max_group(d, 1024))
        .collect()
}

/// Runs `launch` with groups of each size and compares every item's (sum, min, max) with the
/// host's over its group.
fn check_reduce<T: Pod + Debug + PartialEq>(
    q: &Queue,
    sizes: &[usize],
    gen: impl Fn(usize) -> T,
    reduce: impl Fn(&[T]) -> [T; 3],
    launch: impl Fn(&Queue, Range, &Usm<T>, &Usm<T>) -> R,
    what: &str,
) -> R {
    for &local in sizes {
        let groups = 5;
        let n = local * groups;
        let x: Vec<T> = (0..n).map(&gen).collect();
        let dx = upload(q, &x)?;
        let out = sycl::malloc_device::<T>(n * 3, q).map_err(fail)?;
        launch(q, Range::d1(n).with_local([local, 1, 1]), &dx, &out)?;
        let want: Vec<T> = x
            .chunks(local)
            .flat_map(|c| {
                let r = reduce(c);
                std::iter::repeat(r).take(local).flatten()
            })
            .collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
            format!(
                "{what}, groups of {local}: item {} {}",
                j / 3,
                ["sum", "min", "max"][j % 3]
            )
        })?;
    }
    Ok(())
}

#[sycl::kernel]
fn sum_of_input(x: &[u32], y: &mut [u32]) {
    let s = group_sum(x[global_id(0)]);
    y[global_id(0)] = s;
}

/// A checked access inside a group reduction's value stays checked where the kernel's other
/// accesses are proved by run-time guards (SPIR-V: the entry point without the checks the
/// guards cover runs only when the reduction's guard holds too): an `x` one short fails the
/// launch, even inside a larger allocation; a long enough one gives every item its group's sum.
pub fn reduction_value_stays_checked(d: &Device) -> R {
    let q = in_order(d)?;
    let local = 16.min(max_group(d, 1024));
    let n = 4 * local;
    let range = Range::d1(n).with_local([local, 1, 1]);
    let big = filled(&q, n + 64, 1u32)?;
    let short = big.range(0..n - 1).map_err(fail)?;
    let y = filled(&q, n, 0u32)?;
    fails_in_kernel(&q, range, sum_of_input(&short, &y), "sum_of_input")?;
    let x = big.range(0..n).map_err(fail)?;
    run(&q, range, sum_of_input(&x, &y))?;
    let got = q.to_vec(&y).map_err(fail)?;
    check!(
        got.iter().all(|&v| v == local as u32),
        "group sums of ones over groups of {local}: {:?}",
        &got[..got.len().min(8)]
    );
    Ok(())
}

/// Item 11: `group_sum`, `group_min`, `group_max` for i32, u32, i64, u64, f32 (and f64 with
/// fp64) return the group's value to every item; integer sums wrap. Group sizes 1, 7, 48,
/// 100, 256, 1000 (as the device allows) for i32 and f32; 7 and 1000 for the other types.
pub fn group_reductions(d: &Device) -> R {
    let q = in_order(d)?;
    let sizes = reduce_sizes(d);
    let edges = reduce_edge_sizes(d);
    let bits = |i: usize| {
        let mut r = Rng((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        r.next();
        r.next()
    };
    check_reduce(
        &q,
        &sizes,
        |i| {
            if i % 11 == 3 {
                i32::MAX - i as i32
            } else {
                bits(i) as i32
            }
        },
        |c| {
            [
                c.iter().fold(0i32, |a, &b| a.wrapping_add(b)),
                *c.iter().min().expect("a group"),
                *c.iter().max().expect("a group"),
            ]
        },
        |q, r, x, o| run(q, r, reduce_i32(x, o)),
        "i32",
    )?;
    check_reduce(
        &q,
        &edges,
        |i| (bits(i) >> 7) as u32,
        |c| {
            [
                c.iter().fold(0u32, |a, &b| a.wrapping_add(b)),
                *c.iter().min().expect("a group"),
                *c.iter().max().expect("a group"),
            ]
        },
        |q, r, x, o| run(q, r, reduce_u32(x, o)),
        "u32",
    )?;
    check_reduce(
        &q,
        &edges,
        |i| bits(i) as i64,
        |c| {
            [
                c.iter().fold(0i64, |a, &b| a.wrapping_add(b)),
                *c.iter().min().expect("a group"),
                *c.iter().max().expect("a group"),
            ]
        },
        |q, r, x, o| run(q, r, reduce_i64(x, o)),
        "i64",
    )?;
    check_reduce(
        &q,
        &edges,
        |i| bits(i) | if i % 5 == 0 { 1 << 63 } else { 0 },
        |c| {
            [
                c.iter().fold(0u64, |a, &b| a.wrapping_add(b)),
                *c.iter().min().expect("a group"),
                *c.iter().max().expect("a group"),
            ]
        },
        |q, r, x, o| run(q, r, reduce_u64(x, o)),
        "u64",
    )?;
    // Multiples of 1/4 of moderate size: every sum is exact in any order.
    check_reduce(
        &q,
        &sizes,
        |i| (bits(i) % 8001) as f32 * 0.25 - 1000.0,
        |c| {
            [
                c.iter().sum(),
                c.iter().copied().fold(f32::INFINITY, f32::min),
                c.iter().copied().fold(f32::NEG_INFINITY, f32::max),
            ]
        },
        |q, r, x, o| run(q, r, reduce_f32(x, o)),
        "f32",
    )?;
    if d.has(Aspect::Fp64) {
        check_reduce(
            &q,
            &edges,
            |i| (bits(i) % 1_000_001) as f64 * 0.125 - 60000.0,
            |c| {
                [
                    c.iter().sum(),
                    c.iter().copied().fold(f64::INFINITY, f64::min),
                    c.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                ]
            },
            |q, r, x, o| run(q, r, reduce_f64(x, o)),
            "f64",
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------- 11b. scans, votes, broadcasts

/// Every inclusive and exclusive scan of an integer type over the work-group, the reductions
/// `group_sum`'s test does not cover, a broadcast and both votes: 19 values and 2 votes an item.
macro_rules! group_collectives_int {
    ($($kernel:ident: $t:ident),*) => {$(
        #[sycl::kernel]
        fn $kernel(x: &[$t], out: &mut [$t], votes: &mut [u32]) {
            let g = global_id(0);
            let v = x[g];
            let i0 = group_inclusive_sum(v);
            let i1 = group_inclusive_product(v);
            let i2 = group_inclusive_min(v);
            let i3 = group_inclusive_max(v);
            let i4 = group_inclusive_bit_and(v);
            let i5 = group_inclusive_bit_or(v);
            let i6 = group_inclusive_bit_xor(v);
            let e0 = group_exclusive_sum(v);
            let e1 = group_exclusive_product(v);
            let e2 = group_exclusive_min(v);
            let e3 = group_exclusive_max(v);
            let e4 = group_exclusive_bit_and(v);
            let e5 = group_exclusive_bit_or(v);
            let e6 = group_exclusive_bit_xor(v);
            let r1 = group_product(v);
            let r4 = group_bit_and(v);
            let r5 = group_bit_or(v);
            let r6 = group_bit_xor(v);
            let b = group_broadcast(v, 3);
            let any = group_any(v % 7 == 3);
            let all = group_all(v % 64 != 5);
            let k = g * 19;
            out[k] = i0;
            out[k + 1] = i1;
            out[k + 2] = i2;
            out[k + 3] = i3;
            out[k + 4] = i4;
            out[k + 5] = i5;
            out[k + 6] = i6;
            out[k + 7] = e0;
            out[k + 8] = e1;
            out[k + 9] = e2;
            out[k + 10] = e3;
            out[k + 11] = e4;
            out[k + 12] = e5;
            out[k + 13] = e6;
            out[k + 14] = r1;
            out[k + 15] = r4;
            out[k + 16] = r5;
            out[k + 17] = r6;
            out[k + 18] = b;
            votes[g * 2] = if any { 1 } else { 0 };
            votes[g * 2 + 1] = if all { 1 } else { 0 };
        }
    )*};
}

group_collectives_int!(
    group_collectives_i32: i32,
    group_collectives_u32: u32,
    group_collectives_i64: i64,
    group_collectives_u64: u64
);

/// The same over sub-groups; each item also reports its sub-group and lane.
macro_rules! sub_group_collectives_int {
    ($($kernel:ident: $t:ident),*) => {$(
        #[sycl::kernel]
        fn $kernel(x: &[$t], out: &mut [$t], votes: &mut [u32]) {
            let g = global_id(0);
            let v = x[g];
            let i0 = sub_group_inclusive_sum(v);
            let i1 = sub_group_inclusive_product(v);
            let i2 = sub_group_inclusive_min(v);
            let i3 = sub_group_inclusive_max(v);
            let i4 = sub_group_inclusive_bit_and(v);
            let i5 = sub_group_inclusive_bit_or(v);
            let i6 = sub_group_inclusive_bit_xor(v);
            let e0 = sub_group_exclusive_sum(v);
            let e1 = sub_group_exclusive_product(v);
            let e2 = sub_group_exclusive_min(v);
            let e3 = sub_group_exclusive_max(v);
            let e4 = sub_group_exclusive_bit_and(v);
            let e5 = sub_group_exclusive_bit_or(v);
            let e6 = sub_group_exclusive_bit_xor(v);
            let r1 = sub_group_product(v);
            let r4 = sub_group_bit_and(v);
            let r5 = sub_group_bit_or(v);
            let r6 = sub_group_bit_xor(v);
            let b = sub_group_broadcast(v, 3);
            let any = sub_group_any(v % 7 == 3);
            let all = sub_group_all(v % 64 != 5);
            let k = g * 19;
            out[k] = i0;
            out[k + 1] = i1;
            out[k + 2] = i2;
            out[k + 3] = i3;
            out[k + 4] = i4;
            out[k + 5] = i5;
            out[k + 6] = i6;
            out[k + 7] = e0;
            out[k + 8] = e1;
            out[k + 9] = e2;
            out[k + 10] = e3;
            out[k + 11] = e4;
            out[k + 12] = e5;
            out[k + 13] = e6;
            out[k + 14] = r1;
            out[k + 15] = r4;
            out[k + 16] = r5;
            out[k + 17] = r6;
            out[k + 18] = b;
            votes[g * 4] = if any { 1 } else { 0 };
            votes[g * 4 + 1] = if all { 1 } else { 0 };
            votes[g * 4 + 2] = sub_group_id() as u32;
            votes[g * 4 + 3] = sub_group_local_id() as u32;
        }
    )*};
}

sub_group_collectives_int!(
    sub_group_collectives_i32: i32,
    sub_group_collectives_u32: u32,
    sub_group_collectives_i64: i64,
    sub_group_collectives_u64: u64
);

/// Float scans (sum, product, min, max), the product and a broadcast: 10 values an item.
macro_rules! collectives_float {
    ($($group:ident, $sub:ident: $t:ident),*) => {$(
        #[sycl::kernel]
        fn $group(x: &[$t], out: &mut [$t], votes: &mut [u32]) {
            let g = global_id(0);
            let v = x[g];
            let i0 = group_inclusive_sum(v);
            let i1 = group_inclusive_product(v);
            let i2 = group_inclusive_min(v);
            let i3 = group_inclusive_max(v);
            let e0 = group_exclusive_sum(v);
            let e1 = group_exclusive_product(v);
            let e2 = group_exclusive_min(v);
            let e3 = group_exclusive_max(v);
            let r1 = group_product(v);
            let b = group_broadcast(v, 3);
            let k = g * 10;
            out[k] = i0;
            out[k + 1] = i1;
            out[k + 2] = i2;
            out[k + 3] = i3;
            out[k + 4] = e0;
            out[k + 5] = e1;
            out[k + 6] = e2;
            out[k + 7] = e3;
            out[k + 8] = r1;
            out[k + 9] = b;
            votes[g] = 0;
        }

        #[sycl::kernel]
        fn $sub(x: &[$t], out: &mut [$t], votes: &mut [u32]) {
            let g = global_id(0);
            let v = x[g];
            let i0 = sub_group_inclusive_sum(v);
            let i1 = sub_group_inclusive_product(v);
            let i2 = sub_group_inclusive_min(v);
            let i3 = sub_group_inclusive_max(v);
            let e0 = sub_group_exclusive_sum(v);
            let e1 = sub_group_exclusive_product(v);
            let e2 = sub_group_exclusive_min(v);
            let e3 = sub_group_exclusive_max(v);
            let r1 = sub_group_product(v);
            let b = sub_group_broadcast(v, 3);
            let k = g * 10;
            out[k] = i0;
            out[k + 1] = i1;
            out[k + 2] = i2;
            out[k + 3] = i3;
            out[k + 4] = e0;
            out[k + 5] = e1;
            out[k + 6] = e2;
            out[k + 7] = e3;
            out[k + 8] = r1;
            out[k + 9] = b;
            votes[g * 4] = 0;
            votes[g * 4 + 1] = 0;
            votes[g * 4 + 2] = sub_group_id() as u32;
            votes[g * 4 + 3] = sub_group_local_id() as u32;
        }
    )*};
}

collectives_float!(
    group_collectives_f32, sub_group_collectives_f32: f32,
    group_collectives_f64, sub_group_collectives_f64: f64
);

/// An operator with its identity.
type IdentityOp<T> = (T, fn(T, T) -> T);

/// The host's side of a collective's element type: the kernels' operators in their order (with
/// identities), which of them the kernels also reduce, and the votes' predicates.
trait CollectiveElem: Pod + Debug + PartialEq {
    /// `(identity, operator)` in the kernels' order.
    fn ops() -> Vec<IdentityOp<Self>>;
    /// The operators (indices into `ops`) the kernels reduce.
    const REDUCED: &'static [usize];
    /// `group_any`'s and `group_all`'s predicates (integers only).
    fn votes(self) -> Option<(bool, bool)>;
}

macro_rules! collective_int {
    ($($t:ident),*) => {$(
        impl CollectiveElem for $t {
            fn ops() -> Vec<IdentityOp<Self>> {
                vec![
                    (0, |a, b| a.wrapping_add(b)),
                    (1, |a, b| a.wrapping_mul(b)),
                    ($t::MAX, |a, b| a.min(b)),
                    ($t::MIN, |a, b| a.max(b)),
                    (!0, |a, b| a & b),
                    (0, |a, b| a | b),
                    (0, |a, b| a ^ b),
                ]
            }
            const REDUCED: &'static [usize] = &[1, 4, 5, 6];
            fn votes(self) -> Option<(bool, bool)> {
                Some((self % 7 == 3, self % 64 != 5))
            }
        }
    )*};
}

collective_int!(i32, u32, i64, u64);

macro_rules! collective_float {
    ($($t:ident),*) => {$(
        impl CollectiveElem for $t {
            fn ops() -> Vec<IdentityOp<Self>> {
                vec![
                    (0.0, |a, b| a + b),
                    (1.0, |a, b| a * b),
                    ($t::INFINITY, $t::min),
                    ($t::NEG_INFINITY, $t::max),
                ]
            }
            const REDUCED: &'static [usize] = &[1];
            fn votes(self) -> Option<(bool, bool)> {
                None
            }
        }
    )*};
}

collective_float!(f32, f64);

/// What each member of `chunk` (a group or sub-group in linear order) gets: the inclusive
/// scans, the exclusive scans, the reductions, the broadcast of member `3 % len`.
fn collective_expect<T: CollectiveElem>(chunk: &[T]) -> Vec<Vec<T>> {
    let ops = T::ops();
    let mut rows: Vec<Vec<T>> = vec![Vec::new(); chunk.len()];
    let mut totals = Vec::new();
    for (pass, inclusive) in [(0, true), (1, false)] {
        for &(ident, op) in &ops {
            let mut acc = ident;
            for (i, &v) in chunk.iter().enumerate() {
                let next = op(acc, v);
                rows[i].push(if inclusive { next } else { acc });
                acc = next;
            }
            if pass == 0 {
                totals.push(acc);
            }
        }
    }
    let b = chunk[3 % chunk.len()];
    for row in rows.iter_mut() {
        row.extend(T::REDUCED.iter().map(|&k| totals[k]));
        row.push(b);
    }
    rows
}

/// Values for the collectives' tests: integers mostly small (so that products and sums wrap
/// now and then, and `&` stays non-zero for a while), floats from {1, -1, 2, 0.5, 0.25 steps}
/// in proportions whose every partial product and sum is exact in any order.
fn collective_value<T: CollectiveElem>(i: usize, from_bits: fn(u64, usize) -> T) -> T {
    let mut r = Rng((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    r.next();
    from_bits(r.next(), i)
}

/// Compares a launch's values (`width` an item) and votes with `expect` over `chunks` (each
/// a list of global ids in lane order).
fn check_collectives<T: CollectiveElem>(
    got: &[T],
    votes: &[u32],
    votes_width: usize,
    x: &[T],
    chunks: &[Vec<usize>],
    what: &str,
) -> R {
    let width = {
        let ops = T::ops().len();
        2 * ops + T::REDUCED.len() + 1
    };
    for members in chunks {
        let values: Vec<T> = members.iter().map(|&g| x[g]).collect();
        let want = collective_expect(&values);
        let any = values.iter().any(|v| v.votes().is_some_and(|p| p.0));
        let all = values.iter().all(|v| v.votes().map_or(true, |p| p.1));
        for (lane, &g) in members.iter().enumerate() {
            let row = &got[g * width..(g + 1) * width];
            for (k, (&gv, &wv)) in row.iter().zip(&want[lane]).enumerate() {
                check!(
                    gv == wv,
                    "{what}: item {g} (lane {lane} of {}) value {k}: got {gv:?}, want {wv:?}",
                    members.len()
                );
            }
            if values[0].votes().is_some() {
                check_eq!(
                    (votes[g * votes_width], votes[g * votes_width + 1]),
                    (u32::from(any), u32::from(all)),
                    "{what}: item {g}'s votes (any, all)"
                );
            }
        }
    }
    Ok(())
}

/// Launches a collectives kernel over (x, out, votes).
type CollectiveLaunch<'a, T> = &'a dyn Fn(&Queue, Range, &Usm<T>, &Usm<T>, &Usm<u32>) -> R;

/// One type's work-group and sub-group collectives on groups of each size.
fn collectives_of<T: CollectiveElem>(
    q: &Queue,
    sizes: &[usize],
    sub_groups: bool,
    from_bits: fn(u64, usize) -> T,
    group: CollectiveLaunch<'_, T>,
    sub: CollectiveLaunch<'_, T>,
    what: &str,
) -> R {
    let width = 2 * T::ops().len() + T::REDUCED.len() + 1;
    for &local in sizes {
        let groups = 3;
        let n = local * groups;
        let x: Vec<T> = (0..n).map(|i| collective_value(i, from_bits)).collect();
        let dx = upload(q, &x)?;
        let out = sycl::malloc_device::<T>(n * width, q).map_err(fail)?;
        let votes = filled(q, n * 4, 0u32)?;
        let range = Range::d1(n).with_local([local, 1, 1]);
        group(q, range, &dx, &out, &votes)?;
        let chunks: Vec<Vec<usize>> = (0..groups)
            .map(|k| (k * local..(k + 1) * local).collect())
            .collect();
        let got = q.to_vec(&out).map_err(fail)?;
        let v = q.to_vec(&votes).map_err(fail)?;
        check_collectives(
            &got,
            &v,
            2,
            &x,
            &chunks,
            &format!("{what}, groups of {local}"),
        )?;
        if !sub_groups {
            continue;
        }
        sub(q, range, &dx, &out, &votes)?;
        let got = q.to_vec(&out).map_err(fail)?;
        let v = q.to_vec(&votes).map_err(fail)?;
        // Members by (work-group, sub-group), in lane order, as the device reported them.
        let mut by: std::collections::BTreeMap<(usize, u32), Vec<(u32, usize)>> =
            Default::default();
        for g in 0..n {
            by.entry((g / local, v[g * 4 + 2]))
                .or_default()
                .push((v[g * 4 + 3], g));
        }
        let mut chunks = Vec::new();
        for (key, mut members) in by {
            members.sort();
            check!(
                members.iter().enumerate().all(|(i, m)| m.0 as usize == i),
                "{what}, groups of {local}: sub-group {key:?} has lanes {:?}",
                members.iter().map(|m| m.0).collect::<Vec<_>>()
            );
            chunks.push(members.into_iter().map(|m| m.1).collect());
        }
        check_collectives(
            &got,
            &v,
            4,
            &x,
            &chunks,
            &format!("{what}, sub-groups in groups of {local}"),
        )?;
    }
    Ok(())
}

/// Item 5: work-group and sub-group inclusive and exclusive scans with `+ * min max & | ^`,
/// reductions with `* & | ^`, broadcasts and `any`/`all` for i32, u32, i64, u64, f32 (f64
/// with fp64), against the host's folds in linear-id order, on group sizes 1, 100 and 512
/// (as the device allows) for i32 and f32, 100 for u32, 100 and 512 for the 64-bit types.
/// Integer sums and products wrap; the float values make every partial result exact in any
/// order.
pub fn group_scans_and_votes(d: &Device) -> R {
    let q = in_order(d)?;
    // (Fewer sizes than the reductions' test: each is a build of twelve kernels.) One item,
    // a partial warp after whole ones, 16 warps (the 64-bit kernels hold 19 results live:
    // on CUDA they have too many registers for groups of 1000).
    // All three for i32 and f32; the other types are told apart from those by their element
    // (a partial warp), the 64-bit ones also by their registers (16 warps).
    let sizes: Vec<usize> = [1usize, 100, 512]
        .into_iter()
        .filter(|&s| s <= max_group(d, 1024))
        .collect();
    let (partial, wide): (&[usize], &[usize]) = match sizes.len() {
        0 | 1 => (&sizes, &sizes),
        _ => (&sizes[1..2], &sizes[1..]),
    };
    let sub_groups = d.has(Aspect::ExtSyclRsSubGroups);
    // Small magnitudes, some negative, a few large; bits set often enough that `&` lives.
    fn int(bits: u64, i: usize) -> u64 {
        match i % 13 {
            0 => bits,
            1 | 2 => !(bits & 0x0f0f),
            _ => bits % 97,
        }
    }
    collectives_of::<i32>(
        &q,
        &sizes,
        sub_groups,
        |b, i| int(b, i) as i32 - if i % 3 == 0 { 40 } else { 0 },
        &|q, r, x, o, v| run(q, r, group_collectives_i32(x, o, v)),
        &|q, r, x, o, v| run(q, r, sub_group_collectives_i32(x, o, v)),
        "i32",
    )?;
    collectives_of::<u32>(
        &q,
        partial,
        sub_groups,
        |b, i| int(b, i) as u32,
        &|q, r, x, o, v| run(q, r, group_collectives_u32(x, o, v)),
        &|q, r, x, o, v| run(q, r, sub_group_collectives_u32(x, o, v)),
        "u32",
    )?;
    collectives_of::<i64>(
        &q,
        wide,
        sub_groups,
        |b, i| int(b, i) as i64 - if i % 3 == 0 { 40 } else { 0 },
        &|q, r, x, o, v| run(q, r, group_collectives_i64(x, o, v)),
        &|q, r, x, o, v| run(q, r, sub_group_collectives_i64(x, o, v)),
        "i64",
    )?;
    collectives_of::<u64>(
        &q,
        wide,
        sub_groups,
        int,
        &|q, r, x, o, v| run(q, r, group_collectives_u64(x, o, v)),
        &|q, r, x, o, v| run(q, r, sub_group_collectives_u64(x, o, v)),
        "u64",
    )?;
    // Signed powers of two, mostly ±1: every sum (of quarters) and product is exact, and a
    // subset of 1000 doubles at most ~100 times.
    fn float(bits: u64, _: usize) -> f64 {
        match bits % 32 {
            0 => 2.0,
            1 => 0.5,
            2..=15 => 1.0,
            16..=29 => -1.0,
            30 => -2.0,
            _ => 0.25,
        }
    }
    collectives_of::<f32>(
        &q,
        &sizes,
        sub_groups,
        |b, i| float(b, i) as f32,
        &|q, r, x, o, v| run(q, r, group_collectives_f32(x, o, v)),
        &|q, r, x, o, v| run(q, r, sub_group_collectives_f32(x, o, v)),
        "f32",
    )?;
    if d.has(Aspect::Fp64) {
        collectives_of::<f64>(
            &q,
            wide,
            sub_groups,
            float,
            &|q, r, x, o, v| run(q, r, group_collectives_f64(x, o, v)),
            &|q, r, x, o, v| run(q, r, sub_group_collectives_f64(x, o, v)),
            "f64",
        )?;
    }
    Ok(())
}

#[sycl::kernel]
fn returned_collectives(x: &[u32], out: &mut [u32]) {
    let g = global_id(0);
    let l = local_id(0);
    if l % 4 == 3 {
        return;
    }
    let v = x[g];
    let s = group_inclusive_sum(v);
    let e = group_exclusive_max(v);
    let p = group_bit_or(v);
    let b = group_broadcast(v, 3);
    let any = group_any(l % 4 == 2);
    let all = group_all(l % 4 != 3);
    out[g * 6] = s;
    out[g * 6 + 1] = e;
    out[g * 6 + 2] = p;
    out[g * 6 + 3] = b;
    out[g * 6 + 4] = if any { 1 } else { 0 };
    out[g * 6 + 5] = if all { 1 } else { 0 };
}

/// Work-items that returned offer the identity to scans, reductions and votes (`all` stays
/// true, `any` sees only the live) and zero to a broadcast from them.
pub fn collectives_after_return(d: &Device) -> R {
    let q = in_order(d)?;
    for local in reduce_sizes(d) {
        let groups = 3;
        let n = local * groups;
        let x: Vec<u32> = (0..n as u32).map(|k| k * 37 % 101 + 1).collect();
        let dx = upload(&q, &x)?;
        let out = filled(&q, n * 6, SENTINEL)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            returned_collectives(&dx, &out),
        )?;
        let got = q.to_vec(&out).map_err(fail)?;
        for k in 0..groups {
            let live: Vec<usize> = (0..local).filter(|l| l % 4 != 3).collect();
            let or = live.iter().fold(0, |a, &l| a | x[k * local + l]);
            let any = live.iter().any(|l| l % 4 == 2);
            let src = 3 % local;
            let b = if src % 4 == 3 { 0 } else { x[k * local + src] };
            let (mut sum, mut max) = (0u32, 0u32);
            for l in 0..local {
                let g = k * local + l;
                let row = &got[g * 6..g * 6 + 6];
                if l % 4 == 3 {
                    check!(
                        row.iter().all(|&v| v == SENTINEL),
                        "item {g} returned: {row:?}"
                    );
                    continue;
                }
                let before = max;
                sum = sum.wrapping_add(x[g]);
                max = max.max(x[g]);
                let want = [sum, before, or, b, u32::from(any), 1];
                check_eq!(
                    row,
                    &want[..],
                    "groups of {local}: item {g} (scan, exclusive max, or, broadcast, any, all)"
                );
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- 12. atomics

#[sycl::kernel]
fn atomic_counter(count: &mut [u32], tickets: &mut [u32]) {
    let old = sycl::kernel::atomic_fetch_add(count, 0, 1u32);
    tickets[global_id(0)] = old;
}

#[sycl::kernel]
fn atomic_min_max(x: &[i32], oi: &mut [i32], ou: &mut [u32]) {
    let v = x[global_id(0)];
    atomic_fetch_min(oi, 0, v);
    atomic_fetch_max(oi, 1, v);
    atomic_fetch_add(oi, 2, v);
    atomic_fetch_min(ou, 0, v as u32);
    atomic_fetch_max(ou, 1, v as u32);
    atomic_fetch_add(ou, 2 + (v as usize) % 4, 1u32);
}

#[sycl::kernel]
fn atomic_f32_add(out: &mut [f32]) {
    atomic_fetch_add(out, 0, 1.0f32);
    atomic_fetch_add(out, 1 + global_id(0) % 2, 0.5f32);
}

/// Item 12: 1<<16 work-items `atomic_fetch_add` one u32: the total is exact and the values
/// returned are a permutation of 0..n (each a unique ticket); `fetch_min`/`fetch_max`/
/// `fetch_add` over all items (i32, u32) match the host; f32 `fetch_add` of 1.0 is exact.
pub fn atomics_under_contention(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1usize << 16;
    let count = filled(&q, 1, 0u32)?;
    let tickets = filled(&q, n, SENTINEL)?;
    run(&q, Range::d1(n), atomic_counter(&count, &tickets))?;
    check_eq!(
        q.to_vec(&count).map_err(fail)?[0] as usize,
        n,
        "fetch_add total"
    );
    let mut t = q.to_vec(&tickets).map_err(fail)?;
    t.sort_unstable();
    compare(&t, &(0..n as u32).collect::<Vec<_>>(), |i| {
        format!("sorted ticket {i}")
    })?;

    let mut rng = Rng(12345);
    let x: Vec<i32> = (0..n).map(|_| (rng.next() >> 20) as i32).collect();
    let dx = upload(&q, &x)?;
    let oi = upload(&q, &[i32::MAX, i32::MIN, 0])?;
    let ou = upload(&q, &[u32::MAX, 0, 0, 0, 0, 0])?;
    run(&q, Range::d1(n), atomic_min_max(&dx, &oi, &ou))?;
    let want_i = [
        *x.iter().min().expect("items"),
        *x.iter().max().expect("items"),
        x.iter().fold(0i32, |a, &b| a.wrapping_add(b)),
    ];
    compare(&q.to_vec(&oi).map_err(fail)?, &want_i, |j| {
        format!("i32 {}", ["fetch_min", "fetch_max", "fetch_add"][j])
    })?;
    let mut want_u = [
        x.iter().map(|&v| v as u32).min().expect("items"),
        x.iter().map(|&v| v as u32).max().expect("items"),
        0,
        0,
        0,
        0,
    ];
    for &v in &x {
        want_u[2 + (v as u32 as usize) % 4] += 1;
    }
    compare(&q.to_vec(&ou).map_err(fail)?, &want_u, |j| {
        format!("u32 result {j}")
    })?;

    let f = filled(&q, 3, 0f32)?;
    run(&q, Range::d1(n), atomic_f32_add(&f))?;
    compare(
        &q.to_vec(&f).map_err(fail)?,
        &[n as f32, n as f32 / 4.0, n as f32 / 4.0],
        |j| format!("f32 fetch_add {j}"),
    )
}

/// Every item takes a ticket by a compare-exchange loop on one counter.
#[sycl::kernel]
fn cas_tickets(count: &mut [u32], tickets: &mut [u32]) {
    let mut cur = count[0];
    loop {
        let seen = atomic_compare_exchange(count, 0, cur, cur + 1);
        if seen == cur {
            break;
        }
        cur = seen;
    }
    tickets[global_id(0)] = cur;
}

/// A compare-exchange that must fail returns the value found and stores nothing.
#[sycl::kernel]
fn cas_mismatch(x: &mut [i32], found: &mut [i32]) {
    let i = global_id(0);
    let old = atomic_compare_exchange(x, i, -5, 99);
    found[i] = old;
}

/// One item per element: each atomic returns the element's value before it.
#[sycl::kernel]
fn atomic_returns(xi: &mut [i32], xu: &mut [u32], oi: &mut [i32], ou: &mut [u32]) {
    let i = global_id(0);
    let a = atomic_fetch_min(xi, i * 3, 0);
    oi[i * 3] = a;
    let b = atomic_fetch_max(xi, i * 3 + 1, 0);
    oi[i * 3 + 1] = b;
    let c = atomic_fetch_add(xi, i * 3 + 2, -5);
    oi[i * 3 + 2] = c;
    let d = atomic_fetch_min(xu, i * 3, 100u32);
    ou[i * 3] = d;
    let e = atomic_fetch_max(xu, i * 3 + 1, 100u32);
    ou[i * 3 + 1] = e;
    let f = atomic_compare_exchange(xu, i * 3 + 2, 7u32, 8u32);
    ou[i * 3 + 2] = f;
}

/// Item 12: a counter built from `atomic_compare_exchange` loops hands out unique tickets
/// 0..n under contention; a failing compare-exchange changes nothing and returns what it found.
pub fn atomics_compare_exchange(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1usize << 14;
    let count = filled(&q, 1, 0u32)?;
    let tickets = filled(&q, n, SENTINEL)?;
    run(&q, Range::d1(n), cas_tickets(&count, &tickets))?;
    check_eq!(
        q.to_vec(&count).map_err(fail)?[0] as usize,
        n,
        "compare-exchange total"
    );
    let mut t = q.to_vec(&tickets).map_err(fail)?;
    t.sort_unstable();
    compare(&t, &(0..n as u32).collect::<Vec<_>>(), |i| {
        format!("sorted ticket {i}")
    })?;
    let init: Vec<i32> = (0..64).map(|k| if k % 3 == 0 { -5 } else { k }).collect();
    let x = upload(&q, &init)?;
    let found = filled(&q, 64, 0i32)?;
    run(&q, Range::d1(64), cas_mismatch(&x, &found))?;
    compare(&q.to_vec(&found).map_err(fail)?, &init, |i| {
        format!("found {i}")
    })?;
    let want: Vec<i32> = init.iter().map(|&v| if v == -5 { 99 } else { v }).collect();
    compare(&q.to_vec(&x).map_err(fail)?, &want, |i| {
        format!("element {i}")
    })?;
    // Every atomic returns the previous value.
    let m = 300usize;
    let mut rng = Rng(99);
    let xi: Vec<i32> = (0..3 * m)
        .map(|_| (rng.next() >> 33) as i32 - (1 << 30))
        .collect();
    let xu: Vec<u32> = (0..3 * m)
        .map(|k| {
            if k % 5 == 2 {
                7
            } else {
                (rng.next() % 200) as u32
            }
        })
        .collect();
    let (dxi, dxu) = (upload(&q, &xi)?, upload(&q, &xu)?);
    let (oi, ou) = (filled(&q, 3 * m, 1i32)?, filled(&q, 3 * m, 1u32)?);
    run(&q, Range::d1(m), atomic_returns(&dxi, &dxu, &oi, &ou))?;
    compare(&q.to_vec(&oi).map_err(fail)?, &xi, |j| {
        format!("i32 atomic {} returned", j % 3)
    })?;
    compare(&q.to_vec(&ou).map_err(fail)?, &xu, |j| {
        format!("u32 atomic {} returned", j % 3)
    })?;
    let want: Vec<i32> = xi
        .iter()
        .enumerate()
        .map(|(j, &v)| match j % 3 {
            0 => v.min(0),
            1 => v.max(0),
            _ => v.wrapping_sub(5),
        })
        .collect();
    compare(&q.to_vec(&dxi).map_err(fail)?, &want, |j| {
        format!("i32 element {j}")
    })?;
    let want: Vec<u32> = xu
        .iter()
        .enumerate()
        .map(|(j, &v)| match j % 3 {
            0 => v.min(100),
            1 => v.max(100),
            _ => {
                if v == 7 {
                    8
                } else {
                    v
                }
            }
        })
        .collect();
    compare(&q.to_vec(&dxu).map_err(fail)?, &want, |j| {
        format!("u32 element {j}")
    })
}

#[sycl::kernel]
fn atomic_u64_ops(x: &[u64], out: &mut [u64], tickets: &mut [u64]) {
    let i = global_id(0);
    let v = x[i];
    atomic_fetch_add(out, 0, v);
    atomic_fetch_min(out, 1, v);
    atomic_fetch_max(out, 2, v);
    let t = atomic_fetch_add(out, 3, 4294967297u64);
    tickets[i] = t;
    let mut cur = out[4];
    loop {
        let seen = atomic_compare_exchange(out, 4, cur, cur + v * 3);
        if seen == cur {
            break;
        }
        cur = seen;
    }
}

/// 64-bit atomics on local memory: a group's sum and maximum.
#[sycl::kernel]
fn local_u64_atomics(x: &[u64], out: &mut [u64]) {
    let acc = local_array::<u64, 2>();
    let l = local_id(0);
    if l < 2 {
        acc[l] = 0;
    }
    barrier();
    let v = x[global_id(0)];
    atomic_fetch_add(acc, 0, v);
    atomic_fetch_max(acc, 1, v);
    barrier();
    if l < 2 {
        out[group_id(0) * 2 + l] = acc[l];
    }
}

/// Item 12 (aspect atomic64): u64 `fetch_add` (carries across 32-bit halves),
/// `fetch_min`/`fetch_max` with values above 2^32, and a compare-exchange loop.
pub fn atomics_u64(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1usize << 14;
    let mut rng = Rng(777);
    let x: Vec<u64> = (0..n).map(|_| rng.next() >> (rng.next() % 40)).collect();
    let dx = upload(&q, &x)?;
    let out = upload(&q, &[0, u64::MAX, 0, 0, 5])?;
    let tickets = filled(&q, n, u64::MAX)?;
    run(&q, Range::d1(n), atomic_u64_ops(&dx, &out, &tickets))?;
    let sum = x.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    let tri = x
        .iter()
        .fold(5u64, |a, &b| a.wrapping_add(b.wrapping_mul(3)));
    let want = [
        sum,
        *x.iter().min().expect("items"),
        *x.iter().max().expect("items"),
        (n as u64) * 4294967297,
        tri,
    ];
    compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
        format!(
            "u64 {}",
            [
                "fetch_add",
                "fetch_min",
                "fetch_max",
                "fetch_add of 2^32 + 1",
                "compare-exchange sum"
            ][j]
        )
    })?;
    let mut t = q.to_vec(&tickets).map_err(fail)?;
    t.sort_unstable();
    let want: Vec<u64> = (0..n as u64).map(|k| k * 4294967297).collect();
    compare(&t, &want, |i| format!("sorted u64 ticket {i}"))?;
    let local = max_group(d, 256);
    let groups = n / local;
    let out = filled(&q, groups * 2, 0u64)?;
    run(
        &q,
        Range::d1(groups * local).with_local([local, 1, 1]),
        local_u64_atomics(&dx, &out),
    )?;
    let want: Vec<u64> = x[..groups * local]
        .chunks(local)
        .flat_map(|c| {
            [
                c.iter().fold(0u64, |a, &b| a.wrapping_add(b)),
                *c.iter().max().expect("a group"),
            ]
        })
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
        format!("local u64 {} of group {}", ["sum", "max"][j % 2], j / 2)
    })
}

/// A histogram in local memory per group (local atomics), merged into the global one with
/// global atomics; the group's maximum by a local `fetch_max`.
#[sycl::kernel]
fn local_histogram(x: &[u32], hist: &mut [u32], tops: &mut [u32], halves: &mut [f32]) {
    let bins = local_array::<u32, 64>();
    let top = local_array::<u32, 1>();
    let half = local_array::<f32, 1>();
    let l = local_id(0);
    let n = local_range(0);
    let mut j = l;
    while j < 64 {
        bins[j] = 0;
        j += n;
    }
    if l == 0 {
        top[0] = 0;
        half[0] = 0.0;
    }
    barrier();
    let v = x[global_id(0)];
    atomic_fetch_add(bins, (v % 64) as usize, 1u32);
    atomic_fetch_max(top, 0, v);
    atomic_fetch_add(half, 0, 0.5f32);
    barrier();
    let mut k = l;
    while k < 64 {
        let c = bins[k];
        atomic_fetch_add(hist, k, c);
        k += n;
    }
    if l == 0 {
        tops[group_id(0)] = top[0];
        halves[group_id(0)] = half[0];
    }
}

/// Item 12: atomics on local arrays (a per-group histogram and maximum) merged with global
/// atomics, against the host's histogram.
pub fn atomics_local_histogram(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1usize << 16;
    let mut rng = Rng(4242);
    // Skewed: half of the values fall in bin 0.
    let x: Vec<u32> = (0..n)
        .map(|k| {
            if k % 2 == 0 {
                64 * (k as u32 % 1000)
            } else {
                (rng.next() >> 40) as u32
            }
        })
        .collect();
    let dx = upload(&q, &x)?;
    for local in [32usize, 256, max_group(d, 1024)] {
        if local > max_group(d, 1024) || n % local != 0 {
            continue;
        }
        let groups = n / local;
        let hist = filled(&q, 64, 0u32)?;
        let tops = filled(&q, groups, SENTINEL)?;
        let halves = filled(&q, groups, -1f32)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            local_histogram(&dx, &hist, &tops, &halves),
        )?;
        compare(
            &q.to_vec(&halves).map_err(fail)?,
            &vec![local as f32 / 2.0; groups],
            |g| format!("groups of {local}: local f32 fetch_add of group {g}"),
        )?;
        let mut want = vec![0u32; 64];
        for &v in &x {
            want[(v % 64) as usize] += 1;
        }
        compare(&q.to_vec(&hist).map_err(fail)?, &want, |b| {
            format!("groups of {local}: bin {b}")
        })?;
        let want: Vec<u32> = x
            .chunks(local)
            .map(|c| *c.iter().max().expect("a group"))
            .collect();
        compare(&q.to_vec(&tops).map_err(fail)?, &want, |g| {
            format!("groups of {local}: maximum of group {g}")
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------- 13. 2-D tiles

macro_rules! transpose {
    ($kernel:ident, $t:ident) => {
        /// Transposes through a 16 × 17 local tile (the extra column keeps banks apart); the
        /// tile is `local_range(0)` square, at most 16.
        #[sycl::kernel]
        fn $kernel(a: &[$t], rows: usize, cols: usize, b: &mut [$t]) {
            let tile = local_array::<$t, 272>();
            let t = local_range(0);
            let lr = local_id(0);
            let lc = local_id(1);
            let r = global_id(0);
            let c = global_id(1);
            if r < rows && c < cols {
                tile[lr * 17 + lc] = a[r * cols + c];
            }
            barrier();
            let orow = group_id(1) * t + lr;
            let ocol = group_id(0) * t + lc;
            if orow < cols && ocol < rows {
                b[orow * rows + ocol] = tile[lc * 17 + lr];
            }
        }
    };
}

transpose!(transpose_u64, u64);
transpose!(transpose_f64, f64);

/// Item 13: a 2-D nd-range kernel with a local tile: a transpose of 64-bit elements through
/// local memory, for shapes that are not multiples of the tile, against the host.
pub fn transpose_2d(d: &Device) -> R {
    let q = in_order(d)?;
    let tile = if d.max_work_group_size() >= 256 {
        16
    } else {
        8
    };
    for (rows, cols) in [(50usize, 70usize), (33, 17), (16, 16), (1, 100)] {
        let grow = rows.next_multiple_of(tile);
        let gcol = cols.next_multiple_of(tile);
        let range = Range::d2(grow, gcol).with_local([tile, tile, 1]);
        let a: Vec<u64> = (0..rows * cols)
            .map(|k| (k as u64) << 33 | (k as u64 * 7919))
            .collect();
        let want: Vec<u64> = (0..rows * cols)
            .map(|k| a[(k % rows) * cols + k / rows])
            .collect();
        let (da, db) = (upload(&q, &a)?, filled(&q, rows * cols, u64::MAX)?);
        run(&q, range, transpose_u64(&da, rows, cols, &db))?;
        compare(&q.to_vec(&db).map_err(fail)?, &want, |k| {
            format!("{rows}x{cols} u64: element ({}, {})", k / rows, k % rows)
        })?;
        if d.has(Aspect::Fp64) {
            let af: Vec<f64> = a.iter().map(|&v| v as f64 * 0.5 - 1e9).collect();
            let wantf: Vec<f64> = (0..rows * cols)
                .map(|k| af[(k % rows) * cols + k / rows])
                .collect();
            let (da, db) = (upload(&q, &af)?, filled(&q, rows * cols, f64::NAN)?);
            run(&q, range, transpose_f64(&da, rows, cols, &db))?;
            compare_by(
                &q.to_vec(&db).map_err(fail)?,
                &wantf,
                |g, w, _| same_float(g, w),
                |k| format!("{rows}x{cols} f64: element ({}, {})", k / rows, k % rows),
            )?;
        }
    }
    Ok(())
}

/// A 3-D work-group reverses its items' values through local memory (the local linear id
/// must agree with the group's layout on every backend).
#[sycl::kernel]
fn reverse_3d(x: &[u32], y: &mut [u32]) {
    let tile = local_array::<u32, 512>();
    let n = local_range(0) * local_range(1) * local_range(2);
    let l = (local_id(0) * local_range(1) + local_id(1)) * local_range(2) + local_id(2);
    let g = (global_id(0) * global_range(1) + global_id(1)) * global_range(2) + global_id(2);
    tile[l] = x[g];
    barrier();
    y[g] = tile[n - 1 - l];
}

/// Item 6 and 13: a 3-D nd-range with local memory and a barrier, against the host.
pub fn local_tiles_3d(d: &Device) -> R {
    let q = in_order(d)?;
    for (global, local) in [
        ([4usize, 8, 16], [2usize, 4, 8]),
        ([6, 6, 6], [3, 2, 1]),
        ([2, 3, 40], [1, 1, 8]),
    ] {
        if local.iter().product::<usize>() > d.max_work_group_size() {
            continue;
        }
        let n: usize = global.iter().product();
        let x: Vec<u32> = (0..n as u32).map(|k| k.wrapping_mul(0x9e37_79b9)).collect();
        let (dx, y) = (upload(&q, &x)?, filled(&q, n, SENTINEL)?);
        let range = Range::d3(global[0], global[1], global[2]).with_local(local);
        run(&q, range, reverse_3d(&dx, &y))?;
        let lin = |id: [usize; 3], r: [usize; 3]| (id[0] * r[1] + id[1]) * r[2] + id[2];
        let mut want = vec![0u32; n];
        for a in 0..global[0] {
            for b in 0..global[1] {
                for c in 0..global[2] {
                    let id = [a, b, c];
                    let grp = [a / local[0], b / local[1], c / local[2]];
                    let l = lin([a % local[0], b % local[1], c % local[2]], local);
                    let m = local.iter().product::<usize>() - 1 - l;
                    let lm = [
                        m / (local[1] * local[2]),
                        m / local[2] % local[1],
                        m % local[2],
                    ];
                    let src = [
                        grp[0] * local[0] + lm[0],
                        grp[1] * local[1] + lm[1],
                        grp[2] * local[2] + lm[2],
                    ];
                    want[lin(id, global)] = x[lin(src, global)];
                }
            }
        }
        compare(&q.to_vec(&y).map_err(fail)?, &want, |g| {
            format!("{range:?}: item {g}")
        })?;
    }
    Ok(())
}

// ---------------------------------------------------------------- sub-groups

macro_rules! sub_group_ops {
    ($($kernel:ident: $t:ident),*) => {$(
        /// Every sub-group query and collective of `x[g]`, per work-item: lanes, deltas and
        /// masks vary by work-item (from `lanes`), and go past the sub-group's end.
        #[sycl::kernel]
        fn $kernel(
            x: &[$t],
            lanes: &[u64],
            broadcast_lane: usize,
            ids: &mut [u64],
            out: &mut [$t],
        ) {
            let g = global_id(0) * global_range(1) + global_id(1);
            let v = x[g];
            let lane = lanes[g] as usize;
            let b = sub_group_broadcast(v, broadcast_lane);
            // Huge lanes stay huge (no overflow anywhere); others become small deltas.
            let delta = if lane > 1000 { lane } else { lane % 40 };
            let mask = if lane > 1000 { lane } else { lane % 64 };
            let s = sub_group_shuffle(v, lane);
            let l = sub_group_shift_left(v, delta);
            let r = sub_group_shift_right(v, delta);
            let m = sub_group_shuffle_xor(v, mask);
            let sum = sub_group_sum(v);
            let lo = sub_group_min(v);
            let hi = sub_group_max(v);
            ids[g * 5] = sub_group_local_id() as u64;
            ids[g * 5 + 1] = sub_group_local_range() as u64;
            ids[g * 5 + 2] = sub_group_max_local_range() as u64;
            ids[g * 5 + 3] = sub_group_id() as u64;
            ids[g * 5 + 4] = sub_group_range() as u64;
            out[g * 8] = b;
            out[g * 8 + 1] = s;
            out[g * 8 + 2] = l;
            out[g * 8 + 3] = r;
            out[g * 8 + 4] = m;
            out[g * 8 + 5] = sum;
            out[g * 8 + 6] = lo;
            out[g * 8 + 7] = hi;
        }
    )*};
}

sub_group_ops!(
    sub_group_ops_i32: i32,
    sub_group_ops_u32: u32,
    sub_group_ops_i64: i64,
    sub_group_ops_u64: u64,
    sub_group_ops_f32: f32,
    sub_group_ops_f64: f64
);

/// The host's side of a sub-group element type: wrapping sums, and an order.
trait SubGroupElem: Pod + Debug + PartialEq + PartialOrd {
    fn add(self, other: Self) -> Self;
}

macro_rules! sub_group_elem {
    (wrapping: $($t:ident),*; float: $($f:ident),*) => {
        $(impl SubGroupElem for $t {
            fn add(self, other: Self) -> Self {
                self.wrapping_add(other)
            }
        })*
        $(impl SubGroupElem for $f {
            fn add(self, other: Self) -> Self {
                self + other
            }
        })*
    };
}

sub_group_elem!(wrapping: i32, u32, i64, u64; float: f32, f64);

/// One work-item's sub-group as the kernel reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SubGroupIds {
    lane: usize,
    size: usize,
    max: usize,
    id: usize,
    count: usize,
}

/// The results of the host, given the sub-groups the device reported (their layout is the
/// device's: checked for consistency, and against the documented layout where there is one).
#[allow(clippy::too_many_arguments)]
fn sub_group_reference<T: SubGroupElem>(
    d: &Device,
    local: [usize; 2],
    ids: &[SubGroupIds],
    x: &[T],
    lanes: &[u64],
    broadcast_lane: usize,
    global: [usize; 2],
) -> Result<Vec<T>, Failed> {
    let items = local[0] * local[1];
    let n = global[0] * global[1];
    // (work-group, sub-group, lane) -> linear global id.
    let mut members: std::collections::HashMap<(usize, usize, usize), usize> = Default::default();
    let group_of = |g: usize| {
        let (r, c) = (g / global[1], g % global[1]);
        (r / local[0]) * (global[1] / local[1]) + c / local[1]
    };
    let linear_local = |g: usize| {
        let (r, c) = (g / global[1], g % global[1]);
        (r % local[0]) * local[1] + c % local[1]
    };
    let documented = matches!(
        d.backend(),
        sycl::BackendKind::NativeCpu | sycl::BackendKind::Cuda
    );
    for (g, s) in ids.iter().enumerate() {
        check!(
            s.lane < s.size && s.size <= s.max && s.id < s.count && s.size <= items,
            "item {g}: inconsistent sub-group {s:?} in groups of {items}"
        );
        // (Not always ceil(items / max): Intel's OpenCL cuts each row of a 2-D group apart.)
        check!(
            s.count * s.max >= items && s.count <= items,
            "item {g}: {} sub-groups of at most {} for groups of {items}",
            s.count,
            s.max
        );
        let sizes = d.sub_group_sizes();
        check!(
            sizes.is_empty() || sizes.contains(&s.max) || s.max >= items,
            "item {g}: sub-group size {} is not among the device's {sizes:?}",
            s.max
        );
        if documented {
            let l = linear_local(g);
            check_eq!(
                (s.id, s.lane, s.max),
                (l / 32, l % 32, 32),
                "item {g}: warp layout"
            );
        }
        let key = (group_of(g), s.id, s.lane);
        check!(
            members.insert(key, g).is_none(),
            "item {g}: two work-items are lane {} of sub-group {}",
            s.lane,
            s.id
        );
    }
    let mut want = Vec::with_capacity(n * 8);
    for g in 0..n {
        let s = ids[g];
        let member = |lane: usize| -> Result<usize, Failed> {
            members
                .get(&(group_of(g), s.id, lane))
                .copied()
                .ok_or_else(|| fail(format!("item {g}: sub-group {} has no lane {lane}", s.id)))
        };
        let own = x[g];
        let at = |lane: usize| member(lane).map(|m| x[m]);
        let lane = lanes[g] as usize;
        let (delta, mask) = if lane > 1000 {
            (lane, lane)
        } else {
            (lane % 40, lane % 64)
        };
        let all: Vec<T> = (0..s.size).map(at).collect::<Result<_, _>>()?;
        let pick = |a: T, b: T, less: bool| if (a < b) == less { a } else { b };
        want.extend([
            at(broadcast_lane % s.size)?,
            at(lane % s.size)?,
            if delta < s.size - s.lane {
                at(s.lane + delta)?
            } else {
                own
            },
            if delta <= s.lane {
                at(s.lane - delta)?
            } else {
                own
            },
            if s.lane ^ mask < s.size {
                at(s.lane ^ mask)?
            } else {
                own
            },
            all[1..].iter().fold(all[0], |a, &b| a.add(b)),
            all[1..].iter().fold(all[0], |a, &b| pick(a, b, true)),
            all[1..].iter().fold(all[0], |a, &b| pick(a, b, false)),
        ]);
    }
    Ok(want)
}

/// Work-group shapes (rows, columns) for the sub-group tests: one item, sizes that are not
/// multiples of 8, 16 or 32 (partial sub-groups), a full 64, and two dimensions.
fn sub_group_shapes(d: &Device) -> Vec<[usize; 2]> {
    let max = max_group(d, 1024);
    [[1, 1], [1, 7], [1, 40], [1, 64], [1, 100], [3, 20], [4, 13]]
        .into_iter()
        .filter(|s| s[0] * s[1] <= max)
        .collect()
}

/// Launches `launch` with each shape and compares every result with the host's.
fn check_sub_groups<T: SubGroupElem>(
    d: &Device,
    q: &Queue,
    gen: impl Fn(usize) -> T,
    launch: impl Fn(&Queue, Range, &Usm<T>, &Usm<u64>, usize, &Usm<u64>, &Usm<T>) -> R,
    what: &str,
) -> R {
    for (k, local) in sub_group_shapes(d).into_iter().enumerate() {
        let global = [local[0] * 2, local[1] * 3];
        let n = global[0] * global[1];
        let x: Vec<T> = (0..n).map(&gen).collect();
        // Lanes from 0 to 99 (in and out of every sub-group), and some near `usize::MAX`.
        let lanes: Vec<u64> = (0..n)
            .map(|i| match i % 13 {
                5 => u64::MAX - i as u64,
                _ => ((i * 37 + k * 11) % 100) as u64,
            })
            .collect();
        let broadcast_lane = [0, 5, 37, usize::MAX - 3][k % 4];
        let (dx, dl) = (upload(q, &x)?, upload(q, &lanes)?);
        let ids = sycl::malloc_device::<u64>(n * 5, q).map_err(fail)?;
        let out = sycl::malloc_device::<T>(n * 8, q).map_err(fail)?;
        let range = Range::d2(global[0], global[1]).with_local([local[0], local[1], 1]);
        launch(q, range, &dx, &dl, broadcast_lane, &ids, &out)?;
        let raw = q.to_vec(&ids).map_err(fail)?;
        let ids: Vec<SubGroupIds> = raw
            .chunks(5)
            .map(|c| SubGroupIds {
                lane: c[0] as usize,
                size: c[1] as usize,
                max: c[2] as usize,
                id: c[3] as usize,
                count: c[4] as usize,
            })
            .collect();
        let want = sub_group_reference(d, local, &ids, &x, &lanes, broadcast_lane, global)
            .map_err(|e| fail(format!("{what}, groups of {local:?}: {e:?}")))?;
        compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
            let s = ids[j / 8];
            format!(
                "{what}, groups of {local:?}: item {} (lane {} of sub-group {} of size {}) {}",
                j / 8,
                s.lane,
                s.id,
                s.size,
                [
                    "broadcast",
                    "shuffle",
                    "shift_left",
                    "shift_right",
                    "shuffle_xor",
                    "sum",
                    "min",
                    "max"
                ][j % 8]
            )
        })?;
    }
    Ok(())
}

/// Sub-group queries, broadcast, shuffle, shifts, xor and reductions for i32, u32, i64, u64,
/// f32 (and f64 with fp64), against the host over the sub-groups the device reports, with
/// partial sub-groups and lanes out of range.
pub fn sub_group_operations(d: &Device) -> R {
    let q = in_order(d)?;
    let bits = |i: usize| {
        let mut r = Rng((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        r.next();
        r.next()
    };
    // `check_sub_groups` of one generated kernel.
    macro_rules! check_kernel {
        ($kernel:ident, $gen:expr, $what:literal) => {
            check_sub_groups(
                d,
                &q,
                $gen,
                |q, r, x, l, b, i, o| run(q, r, $kernel(x, l, b, i, o)),
                $what,
            )?
        };
    }
    check_kernel!(sub_group_ops_i32, |i| bits(i) as i32, "i32");
    check_kernel!(sub_group_ops_u32, |i| (bits(i) >> 3) as u32, "u32");
    check_kernel!(sub_group_ops_i64, |i| bits(i) as i64, "i64");
    check_kernel!(sub_group_ops_u64, bits, "u64");
    // Multiples of 1/4 (1/8) of moderate size: every sum is exact in any order.
    check_kernel!(
        sub_group_ops_f32,
        |i| (bits(i) % 8001) as f32 * 0.25 - 1000.0,
        "f32"
    );
    if d.has(Aspect::Fp64) {
        check_kernel!(
            sub_group_ops_f64,
            |i| (bits(i) % 1_000_001) as f64 * 0.125 - 60000.0,
            "f64"
        );
    }
    Ok(())
}

/// Work-items that returned before a collective: they offer zero to shuffles and the
/// identity to reductions; the others go on.
#[sycl::kernel]
fn sub_group_after_return(x: &[i32], lanes: &[u64], ids: &mut [u64], out: &mut [i32]) {
    let g = global_id(0);
    ids[g * 3] = sub_group_local_id() as u64;
    ids[g * 3 + 1] = sub_group_local_range() as u64;
    ids[g * 3 + 2] = sub_group_id() as u64;
    if g % 3 == 1 {
        return;
    }
    let v = x[g];
    let s = sub_group_shuffle(v, lanes[g] as usize);
    let lo = sub_group_min(v);
    let sum = sub_group_sum(v);
    out[g * 3] = s;
    out[g * 3 + 1] = lo;
    out[g * 3 + 2] = sum;
}

/// Sub-group collectives after some work-items returned (groups of 40: a partial sub-group
/// wherever the size is 16 or 32).
pub fn sub_group_after_return_offers_zero(d: &Device) -> R {
    let q = in_order(d)?;
    let local = 40.min(max_group(d, 1024));
    let n = local * 3;
    let x: Vec<i32> = (0..n).map(|i| 1000 - (i as i32 * 7919) % 2000).collect();
    let lanes: Vec<u64> = (0..n).map(|i| (i * 13 % 50) as u64).collect();
    let (dx, dl) = (upload(&q, &x)?, upload(&q, &lanes)?);
    let ids = filled(&q, n * 3, 0u64)?;
    let out = filled(&q, n * 3, -1i32)?;
    run(
        &q,
        Range::d1(n).with_local([local, 1, 1]),
        sub_group_after_return(&dx, &dl, &ids, &out),
    )?;
    let ids: Vec<usize> = q
        .to_vec(&ids)
        .map_err(fail)?
        .into_iter()
        .map(|v| v as usize)
        .collect();
    let mut members = std::collections::HashMap::new();
    for g in 0..n {
        members.insert((g / local, ids[g * 3 + 2], ids[g * 3]), g);
    }
    let offered = |g: usize| if g % 3 == 1 { None } else { Some(x[g]) };
    let mut want = vec![-1i32; n * 3];
    for g in (0..n).filter(|g| g % 3 != 1) {
        let (lane, size, id) = (ids[g * 3], ids[g * 3 + 1], ids[g * 3 + 2]);
        check!(
            lane < size,
            "item {g}: lane {lane} of a sub-group of {size}"
        );
        let member = |l: usize| {
            members
                .get(&(g / local, id, l))
                .copied()
                .ok_or_else(|| fail(format!("item {g}: sub-group {id} has no lane {l}")))
        };
        let live: Vec<i32> = (0..size)
            .map(|l| member(l).map(offered))
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        want[g * 3] = offered(member(lanes[g] as usize % size)?).unwrap_or(0);
        want[g * 3 + 1] = live.iter().copied().min().unwrap_or(i32::MAX);
        want[g * 3 + 2] = live.iter().fold(0i32, |a, &b| a.wrapping_add(b));
    }
    compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
        format!("item {} {}", j / 3, ["shuffle", "min", "sum"][j % 3])
    })
}

/// An inclusive scan over each sub-group (Hillis-Steele: shifts by 1, 2, 4, .. in a loop with
/// uniform bounds), then the sub-group's sum: collectives inside a loop, on a value that
/// changes between them.
#[sycl::kernel]
fn sub_group_scan(x: &[u32], ids: &mut [u64], out: &mut [u32]) {
    let g = global_id(0);
    let lane = sub_group_local_id();
    ids[g * 2] = sub_group_id() as u64;
    ids[g * 2 + 1] = lane as u64;
    let mut acc = x[g];
    for d in 0..7u32 {
        let step = 1usize << d;
        let below = sub_group_shift_right(acc, step);
        if lane >= step {
            acc += below;
        }
    }
    let total = sub_group_sum(x[g]);
    out[g * 2] = acc;
    out[g * 2 + 1] = total;
}

/// `n` values spread over all of `u32` (multiples of an odd `factor`, wrapping): sums wrap.
fn scrambled_u32s(n: usize, factor: u32) -> Vec<u32> {
    (0..n).map(|i| (i as u32).wrapping_mul(factor)).collect()
}

/// `sub_group_scan` against the host's prefix sums over the sub-groups the device reported
/// (sub-groups up to 128 lanes: seven rounds).
pub fn sub_group_scan_in_loop(d: &Device) -> R {
    let q = in_order(d)?;
    for local in [7usize, 40, 100] {
        let local = local.min(max_group(d, 1024));
        let n = local * 3;
        let x = scrambled_u32s(n, 2_654_435_761);
        let dx = upload(&q, &x)?;
        let ids = filled(&q, n * 2, 0u64)?;
        let out = filled(&q, n * 2, 0u32)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            sub_group_scan(&dx, &ids, &out),
        )?;
        let ids = q.to_vec(&ids).map_err(fail)?;
        // Each sub-group's lanes, in lane order.
        let mut lanes: std::collections::BTreeMap<(usize, u64, u64), usize> = Default::default();
        for g in 0..n {
            lanes.insert((g / local, ids[g * 2], ids[g * 2 + 1]), g);
        }
        let mut want = vec![0u32; n * 2];
        for g in 0..n {
            let (sg, lane) = (ids[g * 2], ids[g * 2 + 1]);
            let members = lanes.range((g / local, sg, 0)..(g / local, sg, u64::MAX));
            let mut prefix = 0u32;
            let mut total = 0u32;
            for (&(_, _, l), &m) in members {
                total = total.wrapping_add(x[m]);
                if l <= lane {
                    prefix = prefix.wrapping_add(x[m]);
                }
            }
            want[g * 2] = prefix;
            want[g * 2 + 1] = total;
        }
        compare(&q.to_vec(&out).map_err(fail)?, &want, |j| {
            format!(
                "groups of {local}: item {} {}",
                j / 2,
                ["scan", "sum"][j % 2]
            )
        })?;
    }
    Ok(())
}

/// A group's sum in two levels, the usual way: each sub-group's sum into local memory by its
/// lane 0, a barrier, then every work-item adds the partial sums (sub-group collectives,
/// queries, local memory and a barrier in one kernel).
#[sycl::kernel]
fn sub_group_two_level_sum(x: &[u32], out: &mut [u32]) {
    let partial = local_array::<u32, 1024>();
    let g = global_id(0);
    let s = sub_group_sum(x[g]);
    if sub_group_local_id() == 0 {
        partial[sub_group_id()] = s;
    }
    barrier();
    let mut total = 0u32;
    for k in 0..sub_group_range() {
        total += partial[k];
    }
    out[g] = total;
}

/// `sub_group_two_level_sum` equals the host's group sums (groups of 7, 40, 100, 256).
pub fn sub_group_sums_through_local_memory(d: &Device) -> R {
    let q = in_order(d)?;
    for local in [7usize, 40, 100, 256] {
        let local = local.min(max_group(d, 1024));
        let n = local * 4;
        let x = scrambled_u32s(n, 2_246_822_519);
        let dx = upload(&q, &x)?;
        let out = filled(&q, n, 0u32)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            sub_group_two_level_sum(&dx, &out),
        )?;
        let want: Vec<u32> = x
            .chunks(local)
            .flat_map(|c| {
                let sum = c.iter().fold(0u32, |a, &b| a.wrapping_add(b));
                std::iter::repeat(sum).take(local)
            })
            .collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |g| {
            format!("groups of {local}: item {g}")
        })?;
    }
    Ok(())
}

/// A sub-group kernel needs an nd-range everywhere, and aspect `ext_sycl_rs_sub_groups`
/// (`Errc::FeatureNotSupported` at submit where the device lacks it, as PoCL does).
pub fn sub_group_refusals(d: &Device) -> R {
    let q = in_order(d)?;
    let x = filled(&q, 64, 1i32)?;
    let lanes = filled(&q, 64, 0u64)?;
    let ids = filled(&q, 64 * 3, 0u64)?;
    let out = filled(&q, 64 * 3, 0i32)?;
    let local = 16.min(max_group(d, 1024));
    let nd = Range::d1(64 / local * local).with_local([local, 1, 1]);
    let kernel = || sub_group_after_return(&x, &lanes, &ids, &out);
    if d.has(Aspect::ExtSyclRsSubGroups) {
        refused(
            q.parallel_for(Range::d1(64), &[], kernel()),
            Errc::NdRange,
            "a sub-group kernel over a plain range",
        )?;
        return run(&q, nd, kernel());
    }
    match q.parallel_for(nd, &[], kernel()) {
        Ok(e) => {
            let _ = e.wait();
            Err(fail(
                "a sub-group kernel was accepted without ext_sycl_rs_sub_groups",
            ))
        }
        Err(e) if e.code() == Errc::FeatureNotSupported => {
            let msg = e.message().to_string();
            check!(
                msg.contains("sub-group") && msg.contains("sub_group_after_return"),
                "the refusal does not say what is missing: {msg}"
            );
            Ok(())
        }
        Err(e) => Err(fail(format!("{e} (wanted FeatureNotSupported)"))),
    }
}

// ---------------------------------------------------------------- 12b. memory orders (issue 31, item 4)

/// Each work-item runs every atomic on its own 12 elements, at several orders and scopes;
/// `r` gets each result (one atomic per statement, so the order is Rust's).
#[sycl::kernel]
fn ordered_ops_u32(x: &[u32], o: &mut [u32], r: &mut [u32]) {
    let i = global_id(0);
    let v = x[i];
    let b = i * 4;
    let k = i * 12;
    atomic_store(o, b, v, Ordering::Release, MemoryScope::Device);
    r[k] = atomic_load(o, b, Ordering::Acquire, MemoryScope::Device);
    r[k + 1] = atomic_exchange(o, b, v ^ 0x5a5a, Ordering::AcqRel, MemoryScope::System);
    r[k + 2] = atomic_fetch_add(o, b, 7u32, Ordering::SeqCst, MemoryScope::Device);
    r[k + 3] = atomic_fetch_sub(o, b, v, Ordering::Release, MemoryScope::WorkGroup);
    r[k + 4] = atomic_fetch_and(o, b, 0xff0f_f0ffu32, Ordering::Acquire, MemoryScope::System);
    r[k + 5] = atomic_fetch_or(o, b, 0x8000_0001u32, Ordering::Relaxed, MemoryScope::System);
    r[k + 6] = atomic_fetch_xor(o, b, v, Ordering::AcqRel, MemoryScope::Device);
    r[k + 7] = atomic_fetch_min(o, b, v, Ordering::SeqCst, MemoryScope::System);
    r[k + 8] = atomic_fetch_max(o, b, v >> 1, Ordering::Acquire, MemoryScope::Device);
    r[k + 9] = atomic_compare_exchange(o, b, v, v + 1, Ordering::AcqRel, MemoryScope::Device);
    r[k + 10] = atomic_compare_exchange(o, b, v + 3, 9u32, Ordering::Release, MemoryScope::System);
    r[k + 11] = atomic_load(o, b, Ordering::SeqCst, MemoryScope::System);
    // Relaxed forms of the new operations (the plain paths of the back ends).
    atomic_store(o, b + 1, v);
    r[k + 11] = r[k + 11] ^ atomic_exchange(o, b + 1, 3u32);
    let s = atomic_fetch_sub(o, b + 1, 1u32);
    let a = atomic_fetch_and(o, b + 1, 6u32);
    let w = atomic_fetch_or(o, b + 1, 8u32);
    let z = atomic_fetch_xor(o, b + 1, 1u32);
    o[b + 2] = s + a * 16 + w * 256 + z * 4096;
    o[b + 3] = atomic_load(o, b + 1);
}

#[sycl::kernel]
fn ordered_ops_i32(x: &[i32], o: &mut [i32], r: &mut [i32]) {
    let i = global_id(0);
    let v = x[i];
    atomic_store(o, i, 5i32, Ordering::SeqCst, MemoryScope::Device);
    r[i * 4] = atomic_fetch_min(o, i, v, Ordering::AcqRel, MemoryScope::System);
    r[i * 4 + 1] = atomic_fetch_max(o, i, -v, Ordering::Acquire, MemoryScope::Device);
    r[i * 4 + 2] = atomic_fetch_sub(o, i, v, Ordering::Release, MemoryScope::System);
    r[i * 4 + 3] = atomic_load(o, i, Ordering::Acquire, MemoryScope::System);
}

#[sycl::kernel]
fn ordered_ops_f32(x: &[f32], o: &mut [f32], r: &mut [f32]) {
    let i = global_id(0);
    let v = x[i];
    atomic_store(o, i, v, Ordering::Release, MemoryScope::System);
    r[i * 3] = atomic_fetch_add(o, i, 0.5f32, Ordering::AcqRel, MemoryScope::Device);
    r[i * 3 + 1] = atomic_exchange(o, i, v * 2.0, Ordering::SeqCst, MemoryScope::System);
    r[i * 3 + 2] = atomic_load(o, i, Ordering::Acquire, MemoryScope::Device);
}

/// Ordered atomics on local memory, a fence, and a group's count through them.
#[sycl::kernel]
fn ordered_local(x: &[u32], out: &mut [u32]) {
    let acc = local_array::<u32, 4>();
    let l = local_id(0);
    if l < 4 {
        atomic_store(acc, l, 0u32, Ordering::Release, MemoryScope::WorkGroup);
    }
    barrier();
    let v = x[global_id(0)];
    atomic_fetch_add(acc, 0, 1u32, Ordering::AcqRel, MemoryScope::WorkGroup);
    atomic_fetch_max(acc, 1, v, Ordering::SeqCst, MemoryScope::Device);
    atomic_fetch_xor(acc, 2, v, Ordering::Relaxed, MemoryScope::WorkGroup);
    atomic_fetch_or(
        acc,
        3,
        1u32 << (v % 32),
        Ordering::Release,
        MemoryScope::System,
    );
    atomic_fence(Ordering::AcqRel, MemoryScope::WorkGroup);
    barrier();
    if l < 4 {
        out[group_id(0) * 4 + l] = atomic_load(acc, l, Ordering::Acquire, MemoryScope::WorkGroup);
    }
}

/// The host's `ordered_ops_u32` for one work-item: (its 4 elements, its 12 results).
fn ordered_ops_u32_host(v: u32) -> ([u32; 4], [u32; 12]) {
    let mut r = [0u32; 12];
    let mut e = v;
    r[0] = e;
    r[1] = e;
    e = v ^ 0x5a5a;
    r[2] = e;
    e = e.wrapping_add(7);
    r[3] = e;
    e = e.wrapping_sub(v);
    r[4] = e;
    e &= 0xff0f_f0ff;
    r[5] = e;
    e |= 0x8000_0001;
    r[6] = e;
    e ^= v;
    r[7] = e;
    e = e.min(v);
    r[8] = e;
    e = e.max(v >> 1);
    r[9] = e;
    if e == v {
        e = v.wrapping_add(1);
    }
    r[10] = e;
    if e == v.wrapping_add(3) {
        e = 9;
    }
    r[11] = e;
    let mut f = v;
    r[11] ^= f;
    f = 3;
    let s = f;
    f = f.wrapping_sub(1);
    let a = f;
    f &= 6;
    let w = f;
    f |= 8;
    let z = f;
    f ^= 1;
    let packed = s
        .wrapping_add(a.wrapping_mul(16))
        .wrapping_add(w.wrapping_mul(256))
        .wrapping_add(z.wrapping_mul(4096));
    ([e, f, packed, f], r)
}

/// Item 4: every atomic (load, store, exchange, compare-exchange, fetch add/sub/and/or/xor/
/// min/max) at each memory order and scope gives Rust's results, on slices of `u32 i32 f32`
/// and on local arrays with a fence. On a device without some order or scope the launch
/// fails with `FeatureNotSupported` naming it.
pub fn atomics_ordered(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 1024usize;
    let mut rng = Rng(314);
    let x: Vec<u32> = (0..n).map(|_| (rng.next() >> 33) as u32).collect();
    let dx = upload(&q, &x)?;
    let o = filled(&q, n * 4, 0u32)?;
    let r = filled(&q, n * 12, SENTINEL)?;
    let orders = d.atomic_memory_order_capabilities();
    let scopes = d.atomic_memory_scope_capabilities();
    let all = orders.contains(&Ordering::SeqCst)
        && orders.contains(&Ordering::AcqRel)
        && scopes.contains(&MemoryScope::System);
    let launched = q.parallel_for(Range::d1(n), &[], ordered_ops_u32(&dx, &o, &r));
    if !all {
        let e = match launched {
            Ok(_) => {
                return Err(fail(format!(
                "{}: ordered atomics launched on a device without them ({orders:?}, {scopes:?})",
                d.name()
            )))
            }
            Err(e) => e,
        };
        check_eq!(e.code(), Errc::FeatureNotSupported, "the refusal's code");
        check!(
            e.message().contains("ordered_ops_u32") && e.message().contains("memory"),
            "the refusal names the kernel and what it lacks: {e}"
        );
        // Local memory needs only the orders (PoCL: all of them, without system scope).
        let local = orders.len() == 5;
        if local {
            ordered_local_check(&q, &x, &dx)?;
        }
        println!(
            "    {}: {e}; on local memory: {}",
            d.name(),
            if local {
                "checked"
            } else {
                "not run (orders missing)"
            }
        );
        return Ok(());
    }
    launched.map_err(fail)?.wait().map_err(fail)?;
    let got_o = q.to_vec(&o).map_err(fail)?;
    let got_r = q.to_vec(&r).map_err(fail)?;
    for (i, &v) in x.iter().enumerate() {
        let (want_o, want_r) = ordered_ops_u32_host(v);
        compare(&got_r[i * 12..i * 12 + 12], &want_r, |j| {
            format!("u32 item {i} (x = {v}) result {j}")
        })?;
        compare(&got_o[i * 4..i * 4 + 4], &want_o, |j| {
            format!("u32 item {i} (x = {v}) element {j}")
        })?;
    }

    let xi: Vec<i32> = x.iter().map(|&v| (v as i32) - (1 << 30)).collect();
    let dxi = upload(&q, &xi)?;
    let oi = filled(&q, n, 0i32)?;
    let ri = filled(&q, n * 4, 0i32)?;
    run(&q, Range::d1(n), ordered_ops_i32(&dxi, &oi, &ri))?;
    let got = q.to_vec(&ri).map_err(fail)?;
    for (i, &v) in xi.iter().enumerate() {
        let mut e = 5i32;
        let r0 = e;
        e = e.min(v);
        let r1 = e;
        e = e.max(v.wrapping_neg());
        let r2 = e;
        e = e.wrapping_sub(v);
        compare(&got[i * 4..i * 4 + 4], &[r0, r1, r2, e], |j| {
            format!("i32 item {i} (x = {v}) result {j}")
        })?;
    }

    let xf: Vec<f32> = x.iter().map(|&v| v as f32 / 7.0).collect();
    let dxf = upload(&q, &xf)?;
    let of = filled(&q, n, 0f32)?;
    let rf = filled(&q, n * 3, 0f32)?;
    run(&q, Range::d1(n), ordered_ops_f32(&dxf, &of, &rf))?;
    let got = q.to_vec(&rf).map_err(fail)?;
    for (i, &v) in xf.iter().enumerate() {
        compare(&got[i * 3..i * 3 + 3], &[v, v + 0.5, v * 2.0], |j| {
            format!("f32 item {i} (x = {v}) result {j}")
        })?;
    }

    ordered_local_check(&q, &x, &dx)
}

/// `ordered_local` (orders on local memory, where every scope is the work-group's) against
/// the host.
fn ordered_local_check(q: &Queue, x: &[u32], dx: &Usm<u32>) -> R {
    let n = x.len();
    let local = 64usize;
    let groups = n / local;
    let out = filled(q, groups * 4, SENTINEL)?;
    run(
        q,
        Range::d1(n).with_local([local, 1, 1]),
        ordered_local(dx, &out),
    )?;
    let got = q.to_vec(&out).map_err(fail)?;
    for g in 0..groups {
        let xs = &x[g * local..(g + 1) * local];
        let want = [
            local as u32,
            *xs.iter().max().expect("items"),
            xs.iter().fold(0, |a, &b| a ^ b),
            xs.iter().fold(0, |a, &b| a | 1u32 << (b % 32)),
        ];
        compare(&got[g * 4..g * 4 + 4], &want, |j| {
            format!("local group {g} result {j}")
        })?;
    }
    Ok(())
}

/// Message passing between work-groups: each work-item writes `data[mine]`, release-stores
/// `flag[mine]`, then spins (boundedly) on its partner group's flag with acquire loads and
/// reads the partner's data: `seen` gets 1 (the data came with the flag), 2 or 3 (the flag came
/// without the data, 2 with the value read before: a violation) or 0 (the partner had not run
/// yet).
#[sycl::kernel]
fn message_passing(data: &mut [u32], flag: &mut [u32], seen: &mut [u32], round: u32) {
    let g = group_id(0);
    let n = local_range(0);
    let l = local_id(0);
    let mine = g * n + l;
    let peer = (g ^ 1) * n + l;
    // Reading the partner's data first puts its old value in the caches a relaxed reader
    // may then hit (GPUs' L1): acquire must not.
    let before = data[peer];
    data[mine] = round;
    atomic_store(flag, mine, round, Ordering::Release, MemoryScope::Device);
    let mut f = atomic_load(flag, peer, Ordering::Acquire, MemoryScope::Device);
    let mut spins = 0u32;
    while f != round && spins < 20000 {
        spins += 1;
        f = atomic_load(flag, peer, Ordering::Acquire, MemoryScope::Device);
    }
    let got = data[peer];
    seen[mine] = if f != round {
        0u32
    } else if got == round {
        1u32
    } else if got == before {
        2u32
    } else {
        3u32
    };
}

/// The same with relaxed atomics: the control, whose violations the hardware and compiler
/// may show (reported, not asserted).
#[sycl::kernel]
fn message_passing_relaxed(data: &mut [u32], flag: &mut [u32], seen: &mut [u32], round: u32) {
    let g = group_id(0);
    let n = local_range(0);
    let l = local_id(0);
    let mine = g * n + l;
    let peer = (g ^ 1) * n + l;
    // Reading the partner's data first puts its old value in the caches a relaxed reader
    // may then hit (GPUs' L1): acquire must not.
    let before = data[peer];
    data[mine] = round;
    atomic_store(flag, mine, round, Ordering::Relaxed, MemoryScope::Device);
    let mut f = atomic_load(flag, peer, Ordering::Relaxed, MemoryScope::Device);
    let mut spins = 0u32;
    while f != round && spins < 20000 {
        spins += 1;
        f = atomic_load(flag, peer, Ordering::Relaxed, MemoryScope::Device);
    }
    let got = data[peer];
    seen[mine] = if f != round {
        0u32
    } else if got == round {
        1u32
    } else if got == before {
        2u32
    } else {
        3u32
    };
}

/// Item 4's litmus test across work-groups: with release/acquire no work-item sees its
/// partner's flag without its data, over many rounds; some rounds must see the partner (else
/// the test showed nothing). The relaxed control's violations are printed.
pub fn atomics_message_passing(d: &Device) -> R {
    let q = in_order(d)?;
    let orders = d.atomic_memory_order_capabilities();
    if !orders.contains(&Ordering::AcqRel) {
        let data = filled(&q, 2, 0u32)?;
        let flag = filled(&q, 2, 0u32)?;
        let seen = filled(&q, 2, 0u32)?;
        let e = q
            .parallel_for(
                Range::d1(2).with_local([1, 1, 1]),
                &[],
                message_passing(&data, &flag, &seen, 1),
            )
            .err()
            .ok_or_else(|| fail("acquire/release launched on a device without them"))?;
        check_eq!(e.code(), Errc::FeatureNotSupported, "the refusal's code");
        println!("    {}: {e}", d.name());
        return Ok(());
    }
    let local = 64usize.min(max_group(d, 64));
    let groups = if d.is_gpu() { 264 } else { 8 };
    let n = local * groups;
    let data = filled(&q, n, 0u32)?;
    let flag = filled(&q, n, 0u32)?;
    let seen = filled(&q, n, 0u32)?;
    let range = Range::d1(n).with_local([local, 1, 1]);
    let (mut observed, mut violations, mut relaxed_violations) = (0usize, 0usize, 0usize);
    let rounds = 40u32;
    for round in 1..=rounds {
        run(&q, range, message_passing(&data, &flag, &seen, round * 2))?;
        let s = q.to_vec(&seen).map_err(fail)?;
        observed += s.iter().filter(|&&v| v == 1).count();
        violations += s.iter().filter(|&&v| v >= 2).count();
        check!(s.iter().all(|&v| v <= 3), "seen holds 0 to 3");
        run(
            &q,
            range,
            message_passing_relaxed(&data, &flag, &seen, round * 2 + 1),
        )?;
        let s = q.to_vec(&seen).map_err(fail)?;
        relaxed_violations += s.iter().filter(|&&v| v >= 2).count();
    }
    println!(
        "    {}: release/acquire: {observed} observed, {violations} violations; relaxed control: {relaxed_violations} violations ({rounds} rounds of {n} work-items)",
        d.name()
    );
    check_eq!(
        violations,
        0,
        "message-passing violations under release/acquire"
    );
    // On CUDA the relaxed control fails (almost every work-item that sees the flag reads the
    // data it read before: caches and the compiler keep it): the test has the power to fail.
    if d.backend() == sycl::BackendKind::Cuda {
        check!(
            relaxed_violations > 0,
            "the relaxed control showed no violation on CUDA: the litmus test lost its power"
        );
    }
    check!(
        observed > 0,
        "no work-item ever saw its partner's flag: the litmus test showed nothing"
    );
    Ok(())
}

// ---------------------------------------------------------------- 13. f16 and bf16 (issue 31, item 2)

/// Every exactly-rounded operation on halves, and the conversions.
#[sycl::kernel]
fn f16_ops(
    a: &[sycl::half::f16],
    b: &[sycl::half::f16],
    w: &[f32],
    o: &mut [sycl::half::f16],
    f: &mut [f32],
    c: &mut [u32],
) {
    let i = global_id(0);
    let x = a[i];
    let y = b[i];
    let k = i * 14;
    o[k] = x + y;
    o[k + 1] = x - y;
    o[k + 2] = x * y;
    o[k + 3] = x / y;
    o[k + 4] = x % y;
    o[k + 5] = x.sqrt();
    o[k + 6] = x.mul_add(y, y);
    o[k + 7] = x.min(y);
    o[k + 8] = x.max(y);
    o[k + 9] = x.abs().floor() + y.ceil();
    o[k + 10] = -x * 1.5;
    o[k + 11] = sycl::half::f16::from_f32(w[i]);
    let mut acc = x;
    acc += y;
    acc *= 0.25;
    o[k + 12] = acc;
    o[k + 13] = x.round().copysign(y) - x.trunc();
    f[i * 2] = x.to_f32();
    f[i * 2 + 1] = (x.to_f64() * 3.0) as f32;
    c[i] = (x < y) as u32
        | ((x == y) as u32) << 1
        | (x.is_nan() as u32) << 2
        | (y.is_finite() as u32) << 3;
}

/// The same on bfloat16.
#[sycl::kernel]
fn bf16_ops(
    a: &[sycl::half::bf16],
    b: &[sycl::half::bf16],
    w: &[f32],
    o: &mut [sycl::half::bf16],
    f: &mut [f32],
    c: &mut [u32],
) {
    let i = global_id(0);
    let x = a[i];
    let y = b[i];
    let k = i * 14;
    o[k] = x + y;
    o[k + 1] = x - y;
    o[k + 2] = x * y;
    o[k + 3] = x / y;
    o[k + 4] = x % y;
    o[k + 5] = x.sqrt();
    o[k + 6] = x.mul_add(y, y);
    o[k + 7] = x.min(y);
    o[k + 8] = x.max(y);
    o[k + 9] = x.abs().floor() + y.ceil();
    o[k + 10] = -x * 1.5;
    o[k + 11] = sycl::half::bf16::from_f32(w[i]);
    let mut acc = x;
    acc += y;
    acc *= 0.25;
    o[k + 12] = acc;
    o[k + 13] = x.round().copysign(y) - x.trunc();
    f[i * 2] = x.to_f32();
    f[i * 2 + 1] = (x.to_f64() * 3.0) as f32;
    c[i] = (x < y) as u32
        | ((x == y) as u32) << 1
        | (x.is_nan() as u32) << 2
        | (y.is_finite() as u32) << 3;
}

/// A half type's operations as the host computes them (the `half` crate's arithmetic; math in
/// `f32`, rounded back).
trait HalfRef: Copy + Pod + Debug + PartialEq {
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
    fn from_bits(b: u16) -> Self;
    fn bits(self) -> u16;
}

macro_rules! half_ref {
    ($t:ty) => {
        impl HalfRef for $t {
            fn from_f32(x: f32) -> Self {
                <$t>::from_f32(x)
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn from_bits(b: u16) -> Self {
                <$t>::from_bits(b)
            }
            fn bits(self) -> u16 {
                <$t>::to_bits(self)
            }
        }
    };
}
half_ref!(sycl::half::f16);
half_ref!(sycl::half::bf16);

/// The host's results of `f16_ops` / `bf16_ops` for one work-item.
fn half_ops_host<H: HalfRef>(x: H, y: H, w: f32) -> ([H; 14], [f32; 2], u32) {
    let r = |v: f32| H::from_f32(v);
    let (xf, yf) = (x.to_f32(), y.to_f32());
    let acc = r(r(xf + yf).to_f32() * r(0.25).to_f32());
    let o = [
        r(xf + yf),
        r(xf - yf),
        r(xf * yf),
        r(xf / yf),
        r(xf % yf),
        r(xf.sqrt()),
        r(xf.mul_add(yf, yf)),
        r(xf.min(yf)),
        r(xf.max(yf)),
        r(r(xf.abs().floor()).to_f32() + r(yf.ceil()).to_f32()),
        r(-xf * r(1.5).to_f32()),
        r(w),
        acc,
        r(r(r(xf.round()).to_f32().copysign(yf)).to_f32() - r(xf.trunc()).to_f32()),
    ];
    let f = [xf, (xf as f64 * 3.0) as f32];
    let c = (xf < yf) as u32
        | ((xf == yf) as u32) << 1
        | (xf.is_nan() as u32) << 2
        | (yf.is_finite() as u32) << 3;
    (o, f, c)
}

/// Runs `kernel` over every 16-bit pattern of `x` against random `y`s and `f32`s (ties and
/// subnormals included) and compares with the host bit for bit (NaNs as NaNs: their payloads
/// are unspecified).
fn half_ops_check<H: HalfRef, K: KernelFunctor>(
    q: &Queue,
    name: &str,
    kernel: impl Fn(&Usm<H>, &Usm<H>, &Usm<f32>, &Usm<H>, &Usm<f32>, &Usm<u32>) -> K,
) -> R {
    let n = 1usize << 16;
    let mut rng = Rng(16);
    let x: Vec<H> = (0..n).map(|i| H::from_bits(i as u16)).collect();
    let y: Vec<H> = (0..n)
        .map(|_| H::from_bits((rng.next() >> 48) as u16))
        .collect();
    let w: Vec<f32> = (0..n)
        .map(|i| match i % 4 {
            // A tie at each type's rounding position, and random values.
            0 => f32::from_bits(((rng.next() >> 40) as u32 & 0x7fff_e000) | 0x1000),
            1 => f32::from_bits(((rng.next() >> 40) as u32 & 0x7fff_0000) | 0x8000),
            _ => f32::from_bits((rng.next() >> 32) as u32),
        })
        .collect();
    let (da, db, dw) = (upload(q, &x)?, upload(q, &y)?, upload(q, &w)?);
    let o = filled(q, n * 14, H::from_bits(0x7e00))?;
    let f = filled(q, n * 2, 0f32)?;
    let c = filled(q, n, SENTINEL)?;
    run(q, Range::d1(n), kernel(&da, &db, &dw, &o, &f, &c))?;
    let (go, gf, gc) = (
        q.to_vec(&o).map_err(fail)?,
        q.to_vec(&f).map_err(fail)?,
        q.to_vec(&c).map_err(fail)?,
    );
    let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
    for i in 0..n {
        let (wo, wf, wc) = half_ops_host(x[i], y[i], w[i]);
        for (j, want) in wo.iter().enumerate() {
            let got = go[i * 14 + j];
            check!(
                same(got.to_f32(), want.to_f32()),
                "{name}: x = {:#06x}, y = {:#06x}, w = {:e}: result {j} is {:#06x}, the host's {:#06x}",
                x[i].bits(),
                y[i].bits(),
                w[i],
                got.bits(),
                want.bits()
            );
        }
        for (j, want) in wf.iter().enumerate() {
            check!(
                same(gf[i * 2 + j], *want),
                "{name}: x = {:#06x}: conversion {j} is {:e}, the host's {want:e}",
                x[i].bits(),
                gf[i * 2 + j]
            );
        }
        check_eq!(
            gc[i],
            wc,
            "{name}: x = {:#06x}, y = {:#06x}: comparisons",
            x[i].bits(),
            y[i].bits()
        );
    }
    Ok(())
}

/// Item 2: f16 and bf16 arithmetic, comparisons, conversions and exact math, bit-equal to the
/// `half` crate on the host for every `f16`/`bf16` pattern of one operand.
pub fn halves(d: &Device) -> R {
    let q = in_order(d)?;
    half_ops_check::<sycl::half::f16, _>(&q, "f16", f16_ops)?;
    half_ops_check::<sycl::half::bf16, _>(&q, "bf16", bf16_ops)
}

/// A helper on halves: `a + (b - a) * t`, each operation rounded.
#[sycl::kernel_fn]
fn h_lerp(a: sycl::half::f16, b: sycl::half::f16, t: sycl::half::f16) -> sycl::half::f16 {
    a + (b - a) * t
}

/// Halves in a work-group: a bf16 local array, a scalar f16 parameter, a helper, compound
/// assignment into slice and local elements, a select.
#[sycl::kernel]
fn halves_in_groups(
    x: &[sycl::half::f16],
    t: sycl::half::f16,
    y: &mut [sycl::half::f16],
    z: &mut [sycl::half::bf16],
) {
    let tile = local_array::<sycl::half::bf16, 64>();
    let l = local_id(0);
    let i = global_id(0);
    tile[l] = sycl::half::bf16::from_f32(x[i].to_f32());
    barrier();
    let n = tile[63 - l];
    barrier();
    tile[l] *= 0.5;
    let v = h_lerp(x[i], y[i], t);
    y[i] += if v > x[i] { v } else { -v };
    z[i] = tile[l] + n;
}

/// Item 2 in groups and helpers: the same bits as the `half` crate on the host.
pub fn halves_in_groups_and_helpers(d: &Device) -> R {
    use sycl::half::{bf16, f16};
    let q = in_order(d)?;
    let n = 4096usize;
    let mut rng = Rng(2);
    let r = |rng: &mut Rng| f16::from_f32(((rng.next() >> 40) as f32 / 16777216.0 - 0.5) * 64.0);
    let x: Vec<f16> = (0..n).map(|_| r(&mut rng)).collect();
    let y0: Vec<f16> = (0..n).map(|_| r(&mut rng)).collect();
    let t = f16::from_f32(0.3);
    let (dx, dy) = (upload(&q, &x)?, upload(&q, &y0)?);
    let dz = filled(&q, n, bf16::ZERO)?;
    run(
        &q,
        Range::d1(n).with_local([64, 1, 1]),
        halves_in_groups(&dx, t, &dy, &dz),
    )?;
    let (gy, gz) = (q.to_vec(&dy).map_err(fail)?, q.to_vec(&dz).map_err(fail)?);
    for i in 0..n {
        let (g, l) = (i / 64 * 64, i % 64);
        let tile = |k: usize| bf16::from_f32(x[g + k].to_f32());
        let v = x[i] + (y0[i] - x[i]) * t;
        let want_y = y0[i] + if v > x[i] { v } else { -v };
        let want_z = tile(l) * bf16::from_f32(0.5) + tile(63 - l);
        check!(
            gy[i].to_bits() == want_y.to_bits() || (gy[i].is_nan() && want_y.is_nan()),
            "y[{i}] is {} ({:#06x}), the host's {} ({:#06x})",
            gy[i],
            gy[i].to_bits(),
            want_y,
            want_y.to_bits()
        );
        check_eq!(gz[i].to_bits(), want_z.to_bits(), "z[{i}]");
    }
    Ok(())
}

// ---------------------------------------------------------------- 14. private arrays (issue 31, item 3)

/// A private array: filled by its `let`, written and read at constant and data-dependent
/// indices, refilled by a `let` inside a loop.
#[sycl::kernel]
fn private_plain(x: &[f32], n: &[u32], out: &mut [f32], oi: &mut [u32]) {
    let g = global_id(0);
    let mut acc = [0.0f32; 8];
    for k in 0..8 {
        acc[k] = x[g] * k as f32;
    }
    let mut s = 0.0f32;
    for k in 0..8 {
        s += acc[7 - k] * 0.5;
    }
    out[g] = s;
    let mut hist = [0u32; 16];
    for k in 0..4 {
        hist[((n[g] >> (4 * k)) & 15) as usize] += 1;
    }
    let mut total = 0u32;
    for r in 0..3 {
        let mut t = [r as u32; 4];
        t[r] += 5;
        total += t[0] + t[1] + t[2] + t[3];
    }
    oi[g] = hist[0] + hist[1] * 10 + hist[15] * 100 + hist[g % 16] * 1000 + total * 10000;
}

/// Each work-item's private array keeps its values across barriers and a group collective
/// (the native CPU keeps it per work-item between the steps), and one declared inside a
/// synchronising loop is refilled at each iteration.
#[sycl::kernel]
fn private_across_barriers(x: &[u32], out: &mut [u32]) {
    let tile = local_array::<u32, 64>();
    let l = local_id(0);
    let g = global_id(0);
    let n = local_range(0);
    let mut mine = [0u32; 5];
    for k in 0..5 {
        mine[k] = x[g] + k as u32;
    }
    tile[l] = mine[4];
    barrier();
    mine[0] = tile[(l + 1) % n];
    let s = group_sum(mine[1]);
    let mut acc = 0u32;
    for r in 0..2 {
        let mut p = [r as u32; 3];
        p[l % 3] += mine[2];
        barrier();
        acc += p[0] + p[1] * 2 + p[2] * 3;
    }
    out[g] = mine[0] + mine[3] * 7 + s % 1000 + acc * 13;
}

/// Halves in a private array: stored as the `half` crate rounds them.
#[sycl::kernel]
fn private_halves(
    x: &[sycl::half::bf16],
    y: &[sycl::half::f16],
    o: &mut [sycl::half::bf16],
    p: &mut [sycl::half::f16],
) {
    let g = global_id(0);
    let mut b = [sycl::half::bf16::from_f32(1.5); 4];
    b[1] = b[0] + x[g];
    b[g % 4] *= x[g];
    o[g] = b[1] + b[3];
    let mut h = [y[g]; 3];
    h[2] = h[0] * sycl::half::f16::from_f32(0.1);
    p[g] = h[2] - h[1];
}

/// A helper with a private array (Horner over four coefficients).
#[sycl::kernel_fn]
fn private_poly(x: f32) -> f32 {
    let mut c = [1.0f32; 4];
    c[2] = 0.5;
    let mut r = 0.0f32;
    for k in 0..4 {
        r = r * x + c[k];
    }
    r
}

#[sycl::kernel]
fn private_in_helper(x: &[f32], out: &mut [f32]) {
    let g = global_id(0);
    out[g] = private_poly(x[g]);
}

/// An index past a private array's end fails the work-item (`Errc::Kernel`).
#[sycl::kernel]
fn private_oob(idx: &[u64], out: &mut [u32]) {
    let g = global_id(0);
    let mut a = [0u32; 4];
    a[idx[g] as usize] = 1;
    out[g] = a[0] + a[1] + a[2] + a[3];
}

/// Private arrays (`let mut a = [v; N];`) as Rust computes them: plain kernels, work-group
/// kernels across barriers and collectives, halves, helpers, and the bounds check.
pub fn private_arrays(d: &Device) -> R {
    use sycl::half::{bf16, f16};
    let q = in_order(d)?;
    let n = 256;
    let mut rng = Rng(0x5eed_a77a);
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
    let bits: Vec<u32> = (0..n).map(|_| rng.next() as u32).collect();
    let (dx, dn) = (upload(&q, &x)?, upload(&q, &bits)?);
    let (out, oi) = (filled(&q, n, 0f32)?, filled(&q, n, 0u32)?);
    run(&q, Range::d1(n), private_plain(&dx, &dn, &out, &oi))?;
    let want: Vec<f32> = (0..n)
        .map(|g| {
            let acc: Vec<f32> = (0..8).map(|k| x[g] * k as f32).collect();
            (0..8).fold(0.0f32, |s, k| s + acc[7 - k] * 0.5)
        })
        .collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |g| format!("private_plain sum of item {g}"),
    )?;
    let want: Vec<u32> = (0..n)
        .map(|g| {
            let mut hist = [0u32; 16];
            for k in 0..4 {
                hist[((bits[g] >> (4 * k)) & 15) as usize] += 1;
            }
            let total: u32 = (0..3).map(|r| 4 * r as u32 + 5).sum();
            hist[0] + hist[1] * 10 + hist[15] * 100 + hist[g % 16] * 1000 + total * 10000
        })
        .collect();
    compare(&q.to_vec(&oi).map_err(fail)?, &want, |g| {
        format!("private_plain histogram of item {g}")
    })?;

    // Work-groups of 1, 7 (3 does not divide it) and 64.
    for local in [1usize, 7, 64] {
        let n = local * 6;
        let x: Vec<u32> = (0..n as u32).map(|i| i * 3 % 101).collect();
        let dx = upload(&q, &x)?;
        let out = filled(&q, n, 0u32)?;
        run(
            &q,
            Range::d1(n).with_local([local, 1, 1]),
            private_across_barriers(&dx, &out),
        )?;
        let want: Vec<u32> = (0..n)
            .map(|g| {
                let (grp, l) = (g / local * local, g % local);
                let next = x[grp + (l + 1) % local] + 4;
                let s: u32 = (0..local).map(|k| x[grp + k] + 1).sum();
                let acc: u32 = (0..2u32)
                    .map(|r| {
                        let mut p = [r; 3];
                        p[l % 3] += x[g] + 2;
                        p[0] + p[1] * 2 + p[2] * 3
                    })
                    .sum();
                next + (x[g] + 3) * 7 + s % 1000 + acc * 13
            })
            .collect();
        compare(&q.to_vec(&out).map_err(fail)?, &want, |g| {
            format!("private_across_barriers, groups of {local}, item {g}")
        })?;
    }

    let xb: Vec<bf16> = (0..n)
        .map(|i| bf16::from_f32(i as f32 * 0.37 - 40.0))
        .collect();
    let yh: Vec<f16> = (0..n)
        .map(|i| f16::from_f32(i as f32 * 1.3 - 100.0))
        .collect();
    let (dxb, dyh) = (upload(&q, &xb)?, upload(&q, &yh)?);
    let (ob, oh) = (filled(&q, n, bf16::ZERO)?, filled(&q, n, f16::ZERO)?);
    run(&q, Range::d1(n), private_halves(&dxb, &dyh, &ob, &oh))?;
    let (gb, gh) = (q.to_vec(&ob).map_err(fail)?, q.to_vec(&oh).map_err(fail)?);
    for g in 0..n {
        let mut b = [bf16::from_f32(1.5); 4];
        b[1] = b[0] + xb[g];
        b[g % 4] *= xb[g];
        let want = b[1] + b[3];
        check_eq!(
            gb[g].to_bits(),
            want.to_bits(),
            "private_halves bf16 of item {g}"
        );
        let h2 = yh[g] * f16::from_f32(0.1);
        check_eq!(
            gh[g].to_bits(),
            (h2 - yh[g]).to_bits(),
            "private_halves f16 of item {g}"
        );
    }

    let out = filled(&q, n, 0f32)?;
    run(&q, Range::d1(n), private_in_helper(&dx, &out))?;
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            [1.0f32, 1.0, 0.5, 1.0]
                .iter()
                .fold(0.0f32, |r, c| r * v + c)
        })
        .collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |g| format!("private_poly of item {g}"),
    )?;

    let mut idx = vec![0u64; 64];
    for (i, v) in idx.iter_mut().enumerate() {
        *v = i as u64 % 4;
    }
    let (di, out) = (upload(&q, &idx)?, filled(&q, 64, 0u32)?);
    run(&q, Range::d1(64), private_oob(&di, &out))?;
    compare(&q.to_vec(&out).map_err(fail)?, &[1u32; 64], |g| {
        format!("private_oob in bounds, item {g}")
    })?;
    idx[41] = 4;
    let di = upload(&q, &idx)?;
    fails_in_kernel(&q, Range::d1(64), private_oob(&di, &out), "private_oob")
}

// ---------------------------------------------------------------- 15. generic kernels (issue 31, item 1)

/// `y = a * x + y`, then a math function, through `from_f32` / `to_f32`, for every float.
#[sycl::kernel]
fn generic_axpy<T: sycl::Float>(a: T, x: &[T], y: &mut [T], w: &mut [f32]) {
    let i = global_id(0);
    let v = a * x[i] + y[i];
    y[i] = v;
    let half = T::from_f32(0.5);
    w[i] = (v * half).abs().sqrt().to_f32() + 1.0;
}

/// Integer operations for every integer type; a private array and a local array of `T`.
#[sycl::kernel]
fn generic_bits<T: sycl::Int>(x: &[T], y: &mut [T]) {
    let tile = local_array::<T, 64>();
    let l = local_id(0);
    let i = global_id(0);
    let mut p = [x[i]; 3];
    p[1] = (p[0] ^ 5) | 3;
    tile[l] = p[1];
    barrier();
    let other = tile[(l + 1) % local_range(0)];
    y[i] = other.rotate_left(3) + p[2].count_ones() as T + p[0] % 7;
}

/// Two type parameters; group reductions of `T`, which halves do not have (so
/// `generic_reduce::<f16, _>` is no instance: its launch is a compile error).
#[sycl::kernel]
fn generic_reduce<T: sycl::Scalar, U: sycl::Int>(x: &[T], scale: U, out: &mut [T], n: &mut [U]) {
    let i = global_id(0);
    let s = group_sum(x[i]);
    if local_id(0) == 0 {
        out[group_id(0)] = s;
        n[group_id(0)] = scale * local_range(0) as U;
    }
}

fn generic_axpy_check<T: HostAxpy + Debug>(q: &Queue, n: usize) -> R {
    let x: Vec<T> = (0..n).map(|i| T::from_f32(i as f32 * 0.5 - 20.0)).collect();
    let y0: Vec<T> = (0..n).map(|i| T::from_f32(3.0 - i as f32 * 0.25)).collect();
    let a = T::from_f32(1.25);
    let (dx, dy, dw) = (upload(q, &x)?, upload(q, &y0)?, filled(q, n, 0f32)?);
    run(q, Range::d1(n), generic_axpy(a, &dx, &dy, &dw))?;
    let (gy, gw) = (q.to_vec(&dy).map_err(fail)?, q.to_vec(&dw).map_err(fail)?);
    let name = std::any::type_name::<T>();
    for i in 0..n {
        // The host computes with the same type's arithmetic (the `half` crate's for halves).
        let v = T::axpy(a, x[i], y0[i]);
        check!(
            bytemuck::bytes_of(&gy[i]) == bytemuck::bytes_of(&v),
            "generic_axpy::<{name}> y[{i}]: got {:?}, want {v:?}",
            gy[i]
        );
        let want = T::root(v) + 1.0;
        // A device's f32 `sqrt` may be off by an ulp or two (OpenCL allows 3), which can move
        // a half's rounding by one of its ulps.
        let tol = match std::mem::size_of::<T>() {
            2 => 1e-2,
            _ => 1e-6,
        };
        check!(
            close(gw[i], want, tol),
            "generic_axpy::<{name}> w[{i}]: got {}, want {want}",
            gw[i]
        );
    }
    Ok(())
}

/// The host's `generic_axpy` in `T`'s own arithmetic (the `half` crate's for halves).
trait HostAxpy: sycl::Float {
    /// `a * x + y`.
    fn axpy(a: Self, x: Self, y: Self) -> Self;
    /// `sqrt(|v * 0.5|)` as an `f32` (halves: the crate's product, then `abs` and `sqrt`
    /// computed in f32 and rounded, as kernels compute math on halves).
    fn root(v: Self) -> f32;
}

macro_rules! host_axpy_full {
    ($t:ty) => {
        impl HostAxpy for $t {
            fn axpy(a: Self, x: Self, y: Self) -> Self {
                a * x + y
            }
            fn root(v: Self) -> f32 {
                (v * 0.5).abs().sqrt() as f32
            }
        }
    };
}

macro_rules! host_axpy_half {
    ($t:ty) => {
        impl HostAxpy for $t {
            fn axpy(a: Self, x: Self, y: Self) -> Self {
                a * x + y
            }
            fn root(v: Self) -> f32 {
                let p = (v * <$t>::from_f32(0.5)).to_f32().abs();
                <$t>::from_f32(p.sqrt()).to_f32()
            }
        }
    };
}

host_axpy_full!(f32);
host_axpy_full!(f64);
host_axpy_half!(sycl::half::f16);
host_axpy_half!(sycl::half::bf16);

/// Generic kernels (`T: sycl::Float`, `sycl::Int`, `sycl::Scalar`): each instance computes as
/// the same kernel written for that type.
pub fn generic_kernels(d: &Device) -> R {
    use sycl::half::{bf16, f16};
    let q = in_order(d)?;
    let fp64 = d.has(Aspect::Fp64);
    let n = 200;
    generic_axpy_check::<f32>(&q, n)?;
    generic_axpy_check::<f16>(&q, n)?;
    generic_axpy_check::<bf16>(&q, n)?;
    if fp64 {
        generic_axpy_check::<f64>(&q, n)?;
    }

    let local = max_group(d, 64);
    let n = local * 4;
    macro_rules! bits {
        ($t:ty) => {{
            let x: Vec<$t> = (0..n).map(|i| (i * 37 % 1000) as $t).collect();
            let (dx, dy) = (upload(&q, &x)?, filled(&q, n, 0 as $t)?);
            run(
                &q,
                Range::d1(n).with_local([local, 1, 1]),
                generic_bits(&dx, &dy),
            )?;
            let want: Vec<$t> = (0..n)
                .map(|i| {
                    let (g, l) = (i / local * local, i % local);
                    let o = x[g + (l + 1) % local];
                    let p1 = (o ^ 5) | 3;
                    p1.rotate_left(3)
                        .wrapping_add(x[i].count_ones() as $t)
                        .wrapping_add(x[i] % 7)
                })
                .collect();
            compare(&q.to_vec(&dy).map_err(fail)?, &want, |i| {
                format!("generic_bits::<{}> item {i}", stringify!($t))
            })?;
        }};
    }
    bits!(i32);
    bits!(u32);
    bits!(i64);
    bits!(u64);

    let x: Vec<u32> = (0..n as u32).map(|i| i % 17).collect();
    let dx = upload(&q, &x)?;
    let groups = n / local;
    let (out, cnt) = (filled(&q, groups, 0u32)?, filled(&q, groups, 0i64)?);
    run(
        &q,
        Range::d1(n).with_local([local, 1, 1]),
        generic_reduce(&dx, 3i64, &out, &cnt),
    )?;
    let want: Vec<u32> = (0..groups)
        .map(|g| x[g * local..(g + 1) * local].iter().sum())
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |g| {
        format!("generic_reduce::<u32, i64> group {g}")
    })?;
    compare(
        &q.to_vec(&cnt).map_err(fail)?,
        &vec![3 * local as i64; groups],
        |g| format!("generic_reduce::<u32, i64> count of group {g}"),
    )?;
    let xf: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 2.0).collect();
    let dxf = upload(&q, &xf)?;
    let (out, cnt) = (filled(&q, groups, 0f32)?, filled(&q, groups, 0u32)?);
    run(
        &q,
        Range::d1(n).with_local([local, 1, 1]),
        generic_reduce(&dxf, 2u32, &out, &cnt),
    )?;
    let want: Vec<f32> = (0..groups)
        .map(|g| xf[g * local..(g + 1) * local].iter().sum())
        .collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |g| format!("generic_reduce::<f32, u32> group {g}"),
    )
}

/// A private array and loops sized by a const parameter, which the expressions read too.
#[sycl::kernel]
fn const_tile<const TILE: usize>(x: &[f32], out: &mut [f32], idx: &[u64]) {
    let g = global_id(0);
    let mut acc = [0.0f32; TILE];
    for k in 0..TILE {
        acc[k] = x[(g + k) % x.len()];
    }
    let mut s = 0.0f32;
    for k in 0..acc.len() {
        s += acc[k] * (k + 1) as f32;
    }
    // A data-dependent index: checked against TILE.
    out[g] = s + TILE as f32 + acc[idx[g] as usize];
}

/// A local array sized by one const parameter, a synchronising loop bounded by another
/// (`u32`), and a private array in the work-group kernel's state.
#[sycl::kernel]
fn const_local<const N: usize, const R: u32>(x: &[u32], out: &mut [u32]) {
    let tile = local_array::<u32, N>();
    let l = local_id(0);
    let mut mine = [0u32; N];
    mine[l % N] = x[global_id(0)];
    if l < N {
        tile[l] = x[global_id(0)];
    }
    barrier();
    let mut acc = 0u32;
    for r in 0..R {
        acc += tile[(l + r as usize) % N] + mine[l % N];
        barrier();
    }
    out[global_id(0)] = acc;
}

/// Type and const parameters together.
#[sycl::kernel]
fn generic_tile<T: sycl::Float, const K: usize>(x: &[T], out: &mut [T]) {
    let g = global_id(0);
    let mut a = [T::from_f32(1.0); K];
    for k in 1..K {
        a[k] = a[k - 1] * x[g];
    }
    out[g] = a[K - 1];
}

/// Const generic kernels: each instance computes with its values (private arrays of 1, 8
/// and 40 elements, local arrays, loops), an index past a const-length array fails, and the
/// instances are separate definitions.
#[allow(clippy::modulo_one)] // The instances of 1 element are the edge cases.
pub fn const_generic_kernels(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 128;
    let x: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let dx = upload(&q, &x)?;
    macro_rules! tile {
        ($t:literal) => {{
            let idx: Vec<u64> = (0..n as u64).map(|i| i % $t).collect();
            let (di, out) = (upload(&q, &idx)?, filled(&q, n, 0f32)?);
            run(&q, Range::d1(n), const_tile::<$t>(&dx, &out, &di))?;
            let want: Vec<f32> = (0..n)
                .map(|g| {
                    let acc: Vec<f32> = (0..$t).map(|k| x[(g + k) % n]).collect();
                    let s = (0..$t).fold(0.0f32, |s, k| s + acc[k] * (k + 1) as f32);
                    s + $t as f32 + acc[idx[g] as usize]
                })
                .collect();
            compare_by(
                &q.to_vec(&out).map_err(fail)?,
                &want,
                |g, w, _| same_float(g, w),
                |g| format!("const_tile::<{}> item {g}", $t),
            )?;
            // One index past the end.
            let mut bad = idx.clone();
            bad[77] = $t;
            let di = upload(&q, &bad)?;
            fails_in_kernel(
                &q,
                Range::d1(n),
                const_tile::<$t>(&dx, &out, &di),
                "const_tile",
            )?;
        }};
    }
    tile!(1);
    tile!(8);
    tile!(40);

    let local = max_group(d, 64).min(32);
    let groups = 3;
    let xs: Vec<u32> = (0..(local * groups) as u32).map(|i| i * 7 % 31).collect();
    let dxs = upload(&q, &xs)?;
    macro_rules! local {
        ($n:literal, $r:literal) => {{
            let out = filled(&q, local * groups, 0u32)?;
            run(
                &q,
                Range::d1(local * groups).with_local([local, 1, 1]),
                const_local::<$n, $r>(&dxs, &out),
            )?;
            let want: Vec<u32> = (0..local * groups)
                .map(|g| {
                    let (base, l) = (g / local * local, g % local);
                    // Slot k of `tile` holds work-item k's value.
                    (0..$r as usize)
                        .map(|r| xs[base + (l + r) % $n] + xs[g])
                        .sum::<u32>()
                })
                .collect();
            compare(&q.to_vec(&out).map_err(fail)?, &want, |g| {
                format!("const_local::<{}, {}> item {g}", $n, $r)
            })?;
        }};
    }
    if local == 32 {
        local!(32, 3);
    }
    local!(1, 1);
    local!(4, 6);

    let xf: Vec<f32> = (0..n).map(|i| 1.0 + (i % 5) as f32 * 0.25).collect();
    let dxf = upload(&q, &xf)?;
    let out = filled(&q, n, 0f32)?;
    run(&q, Range::d1(n), generic_tile::<f32, 5>(&dxf, &out))?;
    let want: Vec<f32> = xf
        .iter()
        .map(|&v| (1..5).fold(1.0f32, |a, _| a * v))
        .collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |g| format!("generic_tile::<f32, 5> item {g}"),
    )
}

/// The host's error function (libm), per float type.
trait Erf {
    fn erf(self) -> Self;
}

impl Erf for f32 {
    fn erf(self) -> f32 {
        libm::erff(self)
    }
}

impl Erf for f64 {
    fn erf(self) -> f64 {
        libm::erf(self)
    }
}

// ---------------------------------------------------------------- 16. helpers taking slices (issue 31, item 7)

/// Reads two slices.
#[sycl::kernel_fn]
fn h_dot_from(a: &[f32], b: &[f32], start: usize, n: usize) -> f32 {
    let mut s = 0.0f32;
    for k in start..start + n {
        s += a[k] * b[k];
    }
    s
}

/// Writes a slice.
#[sycl::kernel_fn]
fn h_scale_range(y: &mut [f32], start: usize, n: usize, f: f32) -> u32 {
    for k in start..start + n {
        y[k] *= f;
    }
    n as u32
}

/// A loop over a slice's length (proved in bounds there).
#[sycl::kernel_fn]
fn h_sum_all(x: &[u64]) -> u64 {
    let mut s = 0u64;
    for i in 0..x.len() {
        s = s.wrapping_add(x[i]);
    }
    s
}

/// Passes its slices on: one read, one written.
#[sycl::kernel_fn]
fn h_nested(x: &[u64], y: &mut [u64], i: usize) -> u64 {
    y[i] = h_sum_all(x) + i as u64;
    y[i]
}

/// A half slice.
#[sycl::kernel_fn]
fn h_half_at(x: &[sycl::half::bf16], i: usize) -> f32 {
    x[i].to_f32()
}

#[sycl::kernel]
fn use_slice_helpers(
    a: &[f32],
    b: &[f32],
    y: &mut [f32],
    x: &[u64],
    z: &mut [u64],
    h: &[sycl::half::bf16],
    out: &mut [f32],
) {
    let g = global_id(0);
    // (A helper's parameter types are not known where it is called: literals are typed.)
    let d: f32 = h_dot_from(a, b, g, 4usize);
    let c: u32 = h_scale_range(y, g * 4, 4usize, 2.0f32);
    let w: u64 = h_nested(x, z, g);
    out[g] = d + c as f32 + (w % 1000) as f32 + h_half_at(h, g);
}

/// An index past a helper's slice fails the work-item.
#[sycl::kernel_fn]
fn h_at(x: &[f32], i: usize) -> f32 {
    x[i]
}

#[sycl::kernel]
fn helper_slice_oob(x: &[f32], idx: &[u64], out: &mut [f32]) {
    let g = global_id(0);
    out[g] = h_at(x, idx[g] as usize);
}

/// Helpers taking `&[T]` and `&mut [T]` (passing them on to other helpers), as the same code
/// on the host computes; the helpers run on the host too (`[T]` and `Vec<T>` arguments); an
/// index past a helper's slice fails the work-item.
pub fn helpers_with_slices(d: &Device) -> R {
    use sycl::half::bf16;
    let q = in_order(d)?;
    let n = 64;
    let a: Vec<f32> = (0..n + 4).map(|i| (i % 7) as f32 - 3.0).collect();
    let b: Vec<f32> = (0..n + 4).map(|i| (i % 5) as f32 * 0.5).collect();
    let y0: Vec<f32> = (0..4 * n).map(|i| i as f32).collect();
    let x: Vec<u64> = (0..n as u64).map(|i| i * i + 1).collect();
    let hv: Vec<bf16> = (0..n).map(|i| bf16::from_f32(i as f32 * 0.25)).collect();
    let (da, db, dy, dx) = (
        upload(&q, &a)?,
        upload(&q, &b)?,
        upload(&q, &y0)?,
        upload(&q, &x)?,
    );
    let (dz, dh, out) = (filled(&q, n, 0u64)?, upload(&q, &hv)?, filled(&q, n, 0f32)?);
    run(
        &q,
        Range::d1(n),
        use_slice_helpers(&da, &db, &dy, &dx, &dz, &dh, &out),
    )?;
    let total = x.iter().fold(0u64, |s, v| s.wrapping_add(*v));
    let want: Vec<f32> = (0..n)
        .map(|g| {
            // The host runs the same helpers.
            let d = h_dot_from(&a[..], &b, g, 4);
            d + 4.0 + ((total + g as u64) % 1000) as f32 + hv[g].to_f32()
        })
        .collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |g| format!("use_slice_helpers item {g}"),
    )?;
    let mut y_host = y0.clone();
    for g in 0..n {
        h_scale_range(&mut y_host[..], g * 4, 4, 2.0);
    }
    compare(&q.to_vec(&dy).map_err(fail)?, &y_host, |i| {
        format!("the written slice y[{i}]")
    })?;
    let z_want: Vec<u64> = (0..n as u64).map(|g| total + g).collect();
    compare(&q.to_vec(&dz).map_err(fail)?, &z_want, |i| {
        format!("the nested helper's z[{i}]")
    })?;

    let idx: Vec<u64> = (0..n as u64).collect();
    let (di, out) = (upload(&q, &idx)?, filled(&q, n, 0f32)?);
    run(&q, Range::d1(n), helper_slice_oob(&da, &di, &out))?;
    compare(&q.to_vec(&out).map_err(fail)?, &a[..n], |i| {
        format!("h_at item {i}")
    })?;
    let mut bad = idx.clone();
    bad[9] = (n + 4) as u64;
    let di = upload(&q, &bad)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        helper_slice_oob(&da, &di, &out),
        "helper_slice_oob",
    )
}

// ---------------------------------------------------------------- 16b. helpers taking arrays (issue 31, item 7)

/// Fills `t[k] = base + k` for every item of a slice it writes.
#[sycl::kernel_fn]
fn h_fill_from(t: &mut [f32], base: f32) -> u32 {
    for k in 0..t.len() {
        t[k] = base + k as f32;
    }
    t.len() as u32
}

/// Passes its slice on (a private array, a local array or a global slice, as its caller's).
#[sycl::kernel_fn]
fn h_sum_of(t: &[f32]) -> f32 {
    h_dot_from(t, t, 0usize, t.len())
}

/// One element.
#[sycl::kernel_fn]
fn h_elem(t: &[f32], i: usize) -> f32 {
    t[i]
}

/// Writes one element.
#[sycl::kernel_fn]
fn h_put(t: &mut [f32], i: usize, v: f32) -> u32 {
    t[i] = v;
    1
}

/// Private arrays and a local array passed whole to helpers that read, write and pass them
/// on; the same helpers on a global slice.
#[sycl::kernel]
fn use_array_helpers(x: &[f32], out: &mut [f32]) {
    let g = global_id(0);
    let l = local_id(0);
    let mut acc = [0.0f32; 8];
    let n: u32 = h_fill_from(&mut acc, l as f32);
    let tile = local_array::<f32, 64>();
    let w: u32 = h_put(tile, l, x[g] * 2.0);
    barrier();
    let right = h_elem(tile, (l + 1) % local_range(0));
    let own = h_sum_of(&acc);
    let global = h_elem(x, g);
    // A reduction: OpenCL C builds then use 2.0 or 3.0, where unqualified pointers are
    // generic (the helper's private variant must say `__private`).
    let total = group_sum(n + w);
    out[g] = own + right + total as f32 + global;
}

/// An index past an array's end inside a helper fails the work-item.
#[sycl::kernel]
fn array_helper_oob(idx: &[u64], out: &mut [f32]) {
    let g = global_id(0);
    let mut acc = [1.0f32; 4];
    let _k: u32 = h_put(&mut acc, 0usize, 3.0f32);
    out[g] = h_elem(&acc, idx[g] as usize);
}

/// Helpers taking a work-item's private array and the group's local array (each a variant of
/// the helper per address space where the device language has them), checked against the
/// same helpers run on the host; an index past an array fails the work-item.
pub fn helpers_with_arrays(d: &Device) -> R {
    let q = in_order(d)?;
    let (n, wg) = (128usize, 64usize);
    let x: Vec<f32> = (0..n).map(|i| (i % 9) as f32 - 4.0).collect();
    let (dx, out) = (upload(&q, &x)?, filled(&q, n, 0f32)?);
    run(
        &q,
        Range::d1(n).with_local([wg, 1, 1]),
        use_array_helpers(&dx, &out),
    )?;
    let want: Vec<f32> = (0..n)
        .map(|g| {
            let l = g % wg;
            let mut acc = [0.0f32; 8];
            let c = h_fill_from(&mut acc[..], l as f32);
            let right = x[g - l + (l + 1) % wg] * 2.0;
            h_sum_of(&acc[..]) + right + (wg as u32 * (c + 1)) as f32 + h_elem(&x[..], g)
        })
        .collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |g| format!("use_array_helpers item {g}"),
    )?;
    let idx: Vec<u64> = (0..n as u64).map(|i| i % 4).collect();
    let di = upload(&q, &idx)?;
    run(&q, Range::d1(n), array_helper_oob(&di, &out))?;
    let want: Vec<f32> = (0..n).map(|i| if i % 4 == 0 { 3.0 } else { 1.0 }).collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("array_helper_oob item {i}")
    })?;
    let mut bad = idx.clone();
    bad[5] = 4;
    let di = upload(&q, &bad)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        array_helper_oob(&di, &out),
        "array_helper_oob",
    )
}

// ---------------------------------------------------------------- 17. structs (issue 31, item 3)

/// A struct of `f32` arrays and scalars and a `u32` (every field 4 bytes wide).
#[derive(Clone, Copy, Debug, PartialEq, sycl::KernelType)]
#[repr(C)]
pub struct Particle {
    pos: [f32; 3],
    vel: [f32; 3],
    mass: f32,
    id: u32,
}

/// Fields of three widths (8, 4 and 2 bytes): offsets 0, 8, 12; 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, sycl::KernelType)]
#[repr(C)]
pub struct Mixed {
    a: i64,
    b: u32,
    c: [sycl::half::f16; 2],
}

/// Passed by value.
#[derive(Clone, Copy, Debug, PartialEq, sycl::KernelType)]
#[repr(C)]
pub struct StepParams {
    dt: f32,
    accel: [f32; 3],
    bump: u32,
}

/// A struct copied whole (`let mut q = p[i]; .. p[i] = q;`), its array fields indexed in
/// loops, a by-value struct parameter's fields and array.
#[sycl::kernel]
fn struct_step(p: &mut [Particle], s: StepParams) {
    let i = global_id(0);
    let mut q = p[i];
    for k in 0..3 {
        q.vel[k] += s.accel[k] * s.dt;
        q.pos[k] += q.vel[k] * s.dt;
    }
    q.mass *= 2.0;
    q.id += s.bump;
    p[i] = q;
}

/// Fields read and written in place, of structs of mixed widths too.
#[sycl::kernel]
fn struct_fields(p: &[Particle], out: &mut [f32], m: &mut [Mixed]) {
    let i = global_id(0);
    out[i] = p[i].pos[1] + p[i].mass * 2.0 + p[i].id as f32;
    m[i].a = m[i].a * 3 - p[i].id as i64;
    m[i].b += 7;
    m[i].c[1] = m[i].c[0] * sycl::half::f16::from_f32(0.5);
}

/// A struct literal stored whole, and whole structs copied between slices.
#[sycl::kernel]
fn struct_build(seed: &[f32], p: &mut [Particle], src: &[Particle], dst: &mut [Particle]) {
    let i = global_id(0);
    let v = seed[i];
    let a = [v, v + 1.0, v + 2.0];
    p[i] = Particle {
        id: i as u32,
        pos: [a[0], a[1], a[2]],
        vel: [0.5; 3],
        mass: v * v,
    };
    let n = src.len();
    dst[i] = src[n - 1 - i];
}

/// A generic kernel over a struct slice: each instance asks the struct for its layout.
#[sycl::kernel]
fn struct_generic<T: sycl::Float>(p: &mut [Particle], w: &[T]) {
    let i = global_id(0);
    p[i].mass += w[i].to_f32();
}

/// An array field's index past its length fails the work-item.
#[sycl::kernel]
fn struct_item_oob(p: &mut [Particle], k: &[u64]) {
    let i = global_id(0);
    p[i].pos[k[i] as usize] = 1.0;
}

/// A struct index past the slice's end fails the work-item.
#[sycl::kernel]
fn struct_elem_oob(p: &[Particle], k: &[u64], out: &mut [f32]) {
    let i = global_id(0);
    out[i] = p[k[i] as usize].mass;
}

/// Slices of arrays: an element copied whole into a private array and back, items read and
/// written, an array list stored whole.
#[sycl::kernel]
fn array_elements(v: &mut [[f32; 4]], w: &[[u32; 2]], out: &mut [f32], lists: &mut [[u32; 2]]) {
    let i = global_id(0);
    let mut a = v[i];
    for k in 0..4 {
        a[k] *= 2.0;
    }
    v[i] = a;
    v[i][1] += 0.5;
    out[i] = v[i][3] + w[i][1] as f32;
    lists[i] = [w[i][1], w[i][0] + 1];
}

/// An array element's item past its length fails the work-item.
#[sycl::kernel]
fn array_item_oob(v: &[[f32; 4]], k: &[u64], out: &mut [f32]) {
    let i = global_id(0);
    out[i] = v[i][k[i] as usize];
}

fn particles(n: usize) -> Vec<Particle> {
    (0..n)
        .map(|i| {
            let f = i as f32;
            Particle {
                pos: [f, f * 0.5, -f],
                vel: [0.25, -1.0, f * 0.125],
                mass: 1.0 + f * 0.01,
                id: i as u32 * 3,
            }
        })
        .collect()
}

/// Kernel structs (`#[derive(sycl::KernelType)]`): by value, in slices, fields read and
/// written (of several widths), whole copies and literals, and both bounds checks; results
/// bit-equal to the same Rust on the host.
pub fn structs(d: &Device) -> R {
    use sycl::half::f16;
    let q = in_order(d)?;
    let n = 96;
    let p0 = particles(n);
    let s = StepParams {
        dt: 0.5,
        accel: [1.0, -2.0, 0.25],
        bump: 11,
    };
    let dp = upload(&q, &p0)?;
    run(&q, Range::d1(n), struct_step(&dp, s))?;
    let want: Vec<Particle> = p0
        .iter()
        .map(|p| {
            let mut q = *p;
            for k in 0..3 {
                q.vel[k] += s.accel[k] * s.dt;
                q.pos[k] += q.vel[k] * s.dt;
            }
            q.mass *= 2.0;
            q.id += s.bump;
            q
        })
        .collect();
    compare(&q.to_vec(&dp).map_err(fail)?, &want, |i| {
        format!("struct_step particle {i}")
    })?;

    let m0: Vec<Mixed> = (0..n)
        .map(|i| Mixed {
            a: i as i64 * 1_000_000_007 - 5,
            b: i as u32 * 17,
            c: [f16::from_f32(i as f32 * 0.3 - 9.0), f16::from_f32(-1.0)],
        })
        .collect();
    let dp = upload(&q, &p0)?;
    let (dm, out) = (upload(&q, &m0)?, filled(&q, n, 0f32)?);
    run(&q, Range::d1(n), struct_fields(&dp, &out, &dm))?;
    let want: Vec<f32> = p0
        .iter()
        .map(|p| p.pos[1] + p.mass * 2.0 + p.id as f32)
        .collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("struct_fields read of item {i}")
    })?;
    let got = q.to_vec(&dm).map_err(fail)?;
    for i in 0..n {
        let (w, g) = (m0[i], got[i]);
        check_eq!(g.a, w.a * 3 - p0[i].id as i64, "Mixed.a of item {i}");
        check_eq!(g.b, w.b + 7, "Mixed.b of item {i}");
        check_eq!(g.c[0].to_bits(), w.c[0].to_bits(), "Mixed.c[0] of item {i}");
        check_eq!(
            g.c[1].to_bits(),
            (w.c[0] * f16::from_f32(0.5)).to_bits(),
            "Mixed.c[1] of item {i}"
        );
    }

    let seed: Vec<f32> = (0..n).map(|i| i as f32 * 0.75 - 3.0).collect();
    let (ds, dp, src) = (upload(&q, &seed)?, upload(&q, &p0)?, upload(&q, &p0)?);
    let dst = upload(&q, &vec![particles(1)[0]; n])?;
    run(&q, Range::d1(n), struct_build(&ds, &dp, &src, &dst))?;
    let want: Vec<Particle> = seed
        .iter()
        .enumerate()
        .map(|(i, &v)| Particle {
            id: i as u32,
            pos: [v, v + 1.0, v + 2.0],
            vel: [0.5; 3],
            mass: v * v,
        })
        .collect();
    compare(&q.to_vec(&dp).map_err(fail)?, &want, |i| {
        format!("struct_build literal {i}")
    })?;
    let want: Vec<Particle> = p0.iter().rev().copied().collect();
    compare(&q.to_vec(&dst).map_err(fail)?, &want, |i| {
        format!("struct_build copy {i}")
    })?;

    let mut k: Vec<u64> = (0..n as u64).map(|i| i % 3).collect();
    let (dp, dk) = (upload(&q, &p0)?, upload(&q, &k)?);
    run(&q, Range::d1(n), struct_item_oob(&dp, &dk))?;
    let want: Vec<Particle> = p0
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut p = *p;
            p.pos[i % 3] = 1.0;
            p
        })
        .collect();
    compare(&q.to_vec(&dp).map_err(fail)?, &want, |i| {
        format!("struct_item_oob in bounds, item {i}")
    })?;
    k[50] = 3;
    let dk = upload(&q, &k)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        struct_item_oob(&dp, &dk),
        "struct_item_oob",
    )?;

    let mut k: Vec<u64> = (0..n as u64).rev().collect();
    let (dk, out) = (upload(&q, &k)?, filled(&q, n, 0f32)?);
    run(&q, Range::d1(n), struct_elem_oob(&dp, &dk, &out))?;
    k[7] = n as u64;
    let dk = upload(&q, &k)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        struct_elem_oob(&dp, &dk, &out),
        "struct_elem_oob",
    )?;

    // A generic kernel's f32 and bf16 instances over the same struct slice.
    let dp = upload(&q, &p0)?;
    let w: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let wb: Vec<sycl::half::bf16> = w.iter().map(|&x| sycl::half::bf16::from_f32(x)).collect();
    let (dw, dwb) = (upload(&q, &w)?, upload(&q, &wb)?);
    run(&q, Range::d1(n), struct_generic(&dp, &dw))?;
    run(&q, Range::d1(n), struct_generic(&dp, &dwb))?;
    let want: Vec<f32> = (0..n).map(|i| p0[i].mass + w[i] + wb[i].to_f32()).collect();
    let got: Vec<f32> = q
        .to_vec(&dp)
        .map_err(fail)?
        .iter()
        .map(|p| p.mass)
        .collect();
    compare_by(
        &got,
        &want,
        |g, w, _| same_float(g, w),
        |i| format!("struct_generic mass of item {i}"),
    )?;

    // Slices of arrays.
    let v0: Vec<[f32; 4]> = (0..n)
        .map(|i| [i as f32, 1.5, -(i as f32), 0.25 * i as f32])
        .collect();
    let w: Vec<[u32; 2]> = (0..n as u32).map(|i| [i * 7, i + 3]).collect();
    let (dv, dw) = (upload(&q, &v0)?, upload(&q, &w)?);
    let (out, lists) = (filled(&q, n, 0f32)?, filled(&q, n, [0u32; 2])?);
    run(&q, Range::d1(n), array_elements(&dv, &dw, &out, &lists))?;
    let want_v: Vec<[f32; 4]> = v0
        .iter()
        .map(|a| {
            let mut a = a.map(|x| x * 2.0);
            a[1] += 0.5;
            a
        })
        .collect();
    compare(&q.to_vec(&dv).map_err(fail)?, &want_v, |i| {
        format!("array_elements v[{i}]")
    })?;
    let want: Vec<f32> = (0..n).map(|i| want_v[i][3] + w[i][1] as f32).collect();
    compare(&q.to_vec(&out).map_err(fail)?, &want, |i| {
        format!("array_elements out[{i}]")
    })?;
    let want: Vec<[u32; 2]> = w.iter().map(|p| [p[1], p[0] + 1]).collect();
    compare(&q.to_vec(&lists).map_err(fail)?, &want, |i| {
        format!("array_elements lists[{i}]")
    })?;
    let mut k: Vec<u64> = (0..n as u64).map(|i| i % 4).collect();
    let (dk, out) = (upload(&q, &k)?, filled(&q, n, 0f32)?);
    run(&q, Range::d1(n), array_item_oob(&dv, &dk, &out))?;
    k[3] = 4;
    let dk = upload(&q, &k)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        array_item_oob(&dv, &dk, &out),
        "array_item_oob",
    )
}

/// Whole array elements and a struct's array fields copied in one access each
/// (`StmtKind::CopyField`: a vector where the device has one) at 2, 3, 4 and 8 items of 2, 4
/// and 8 bytes, read and written at proved (`i`) and checked (`j`) indices. Bits move as
/// they are (a signalling NaN stays one).
#[sycl::kernel]
#[allow(clippy::too_many_arguments)]
fn vector_copies(
    v: &[[f32; 4]],
    vo: &mut [[f32; 4]],
    h: &[[sycl::half::bf16; 8]],
    ho: &mut [[sycl::half::bf16; 8]],
    l: &[[i64; 2]],
    lo: &mut [[i64; 2]],
    t: &[[u32; 3]],
    to: &mut [[u32; 3]],
    pin: &[Particle],
    pout: &mut [Particle],
    perm: &[u64],
) {
    let i = global_id(0);
    let j = perm[i] as usize;
    let a = v[j];
    vo[i] = a;
    let b = h[i];
    ho[j] = b;
    let c = l[j];
    lo[j] = c;
    let e = t[i];
    to[i] = e;
    let q = pin[j];
    pout[i] = q;
}

/// Whole-element copies (`let a = v[i]; w[j] = a;` on slices of arrays, `let q = p[i];` on a
/// struct's array fields): each item bit-equal to its source, and an index past the end (read
/// or write) failing the launch.
pub fn vector_copies_of_elements(d: &Device) -> R {
    use sycl::half::bf16;
    let q = in_order(d)?;
    let n = 80;
    // Reversed in blocks of 8: every checked index differs from `i`.
    let perm: Vec<u64> = (0..n as u64).map(|i| (i / 8) * 8 + 7 - i % 8).collect();
    let v: Vec<[f32; 4]> = (0..n)
        .map(|i| {
            let f = i as f32;
            [f, -f * 0.5, f32::from_bits(0x7f80_0001 + i as u32), 1e-40]
        })
        .collect();
    let h: Vec<[bf16; 8]> = (0..n)
        .map(|i| std::array::from_fn(|k| bf16::from_bits(0x7f81 + (i * 8 + k) as u16)))
        .collect();
    let l: Vec<[i64; 2]> = (0..n as i64).map(|i| [-i << 40, i * 3 + 1]).collect();
    let t: Vec<[u32; 3]> = (0..n as u32).map(|i| [i, !i, i << 20]).collect();
    let pin = particles(n);
    let (dv, dh, dl, dt) = (
        upload(&q, &v)?,
        upload(&q, &h)?,
        upload(&q, &l)?,
        upload(&q, &t)?,
    );
    let (dpin, dperm) = (upload(&q, &pin)?, upload(&q, &perm)?);
    let vo = filled(&q, n, [0f32; 4])?;
    let ho = filled(&q, n, [bf16::ZERO; 8])?;
    let lo = filled(&q, n, [0i64; 2])?;
    let to = filled(&q, n, [0u32; 3])?;
    let pout = upload(&q, &particles(n).iter().map(|_| pin[0]).collect::<Vec<_>>())?;
    run(
        &q,
        Range::d1(n),
        vector_copies(&dv, &vo, &dh, &ho, &dl, &lo, &dt, &to, &dpin, &pout, &dperm),
    )?;
    let j = |i: usize| perm[i] as usize;
    let bits = |a: &[f32; 4]| a.map(f32::to_bits);
    let got: Vec<[u32; 4]> = q.to_vec(&vo).map_err(fail)?.iter().map(bits).collect();
    let want: Vec<[u32; 4]> = (0..n).map(|i| bits(&v[j(i)])).collect();
    compare(&got, &want, |i| format!("vector_copies vo[{i}] (bits)"))?;
    let hb = |a: &[bf16; 8]| a.map(bf16::to_bits);
    let got: Vec<[u16; 8]> = q.to_vec(&ho).map_err(fail)?.iter().map(hb).collect();
    let mut want = vec![[0u16; 8]; n];
    for i in 0..n {
        want[j(i)] = hb(&h[i]);
    }
    compare(&got, &want, |i| format!("vector_copies ho[{i}] (bits)"))?;
    compare(&q.to_vec(&lo).map_err(fail)?, &l, |i| {
        format!("vector_copies lo[{i}]")
    })?;
    compare(&q.to_vec(&to).map_err(fail)?, &t, |i| {
        format!("vector_copies to[{i}]")
    })?;
    let want: Vec<Particle> = (0..n).map(|i| pin[j(i)]).collect();
    compare(&q.to_vec(&pout).map_err(fail)?, &want, |i| {
        format!("vector_copies pout[{i}]")
    })?;
    // One index past the end: `v[j]` reads and `ho[j]`, `lo[j]` write out of bounds.
    let mut bad = perm.clone();
    bad[5] = n as u64;
    let dbad = upload(&q, &bad)?;
    fails_in_kernel(
        &q,
        Range::d1(n),
        vector_copies(&dv, &vo, &dh, &ho, &dl, &lo, &dt, &to, &dpin, &pout, &dbad),
        "vector_copies",
    )
}

/// A bounded spin-wait on a flag nobody sets: after `limit` polls the work-item gives up with
/// `Failure::TimedOut`; a work-item whose `want` differs from the first one's fails with
/// `Failure::Mismatched`.
#[sycl::kernel]
fn bounded_waits(flag: &[u32], want: &[u32], limit: u32, out: &mut [u32]) {
    let i = global_id(0);
    if want[i] != want[0] {
        kernel_fail(Failure::Mismatched);
    }
    if i == 5 {
        let mut polls = 0u32;
        // (Relaxed: the test is of `kernel_fail`, on every device, NVIDIA's OpenCL too,
        // which has no acquire loads; the flag is set before the launch that reads it.)
        while atomic_load(flag, 0, Ordering::Relaxed, MemoryScope::Device) == 0 {
            polls += 1;
            if polls >= limit {
                kernel_fail(Failure::TimedOut);
            }
        }
    }
    out[i] = want[i] + 1;
}

/// `kernel_fail`: the launch's event reports the failure's error code (`Errc::Runtime` for a
/// timed-out wait, `Errc::Invalid` for a mismatch).
pub fn kernel_failures(d: &Device) -> R {
    let q = in_order(d)?;
    let n = 64;
    let flag = filled(&q, 1, 0u32)?;
    let same = filled(&q, n, 3u32)?;
    let out = filled(&q, n, 0u32)?;
    let wait_err = |r: sycl::Result<()>, code: Errc, what: &str| -> R {
        match r {
            Ok(()) => Err(fail(format!("{what}: wait succeeded; wanted {code:?}"))),
            Err(e) if e.code() == code => Ok(()),
            Err(e) => Err(fail(format!("{what}: {e} (wanted {code:?})"))),
        }
    };
    let ev = q
        .parallel_for(Range::d1(n), &[], bounded_waits(&flag, &same, 1000, &out))
        .map_err(fail)?;
    wait_err(
        ev.wait(),
        Errc::Runtime,
        "bounded_waits with a flag never set",
    )?;
    // (What a failed launch wrote is unspecified.) With the flag set, nobody waits long and
    // every work-item writes; one differing `want` is a mismatch.
    q.fill(&flag, 1u32, &[])
        .map_err(fail)?
        .wait()
        .map_err(fail)?;
    run(&q, Range::d1(n), bounded_waits(&flag, &same, 1000, &out))?;
    compare(&q.to_vec(&out).map_err(fail)?, &vec![4u32; n], |i| {
        format!("bounded_waits out[{i}]")
    })?;
    let mut want = vec![3u32; n];
    want[9] = 4;
    let differ = upload(&q, &want)?;
    let ev = q
        .parallel_for(Range::d1(n), &[], bounded_waits(&flag, &differ, 1000, &out))
        .map_err(fail)?;
    wait_err(
        ev.wait(),
        Errc::Invalid,
        "bounded_waits with one differing argument",
    )
}

// ---------------------------------------------------------------- 18. generic helpers (issue 31, item 7)

/// A generic helper called by another.
#[sycl::kernel_fn]
fn g_sq<T: sycl::Float>(x: T) -> T {
    x * x
}

/// A generic helper over slices.
#[sycl::kernel_fn]
fn g_dot<T: sycl::Float>(a: &[T], b: &[T], at: usize, n: usize) -> T {
    let mut s = T::from_f32(0.0);
    for k in 0..n {
        s += a[at + k] * b[at + k] + g_sq(a[at + k]);
    }
    s
}

/// One over integers.
#[sycl::kernel_fn]
fn g_mix<T: sycl::Int>(x: T, y: T) -> T {
    (x ^ y) + (x & 3)
}

/// Each generic helper called at two types from one kernel (two instances each).
#[sycl::kernel]
fn use_generic_helpers(
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    h: &[sycl::half::bf16],
    hout: &mut [sycl::half::bf16],
    u: &mut [u32],
    l: &mut [i64],
) {
    let i = global_id(0);
    out[i] = g_dot(a, b, i * 4, 4usize);
    hout[i] = g_dot(h, h, i * 4, 4usize);
    u[i] = g_mix(u[i], 7u32);
    l[i] = g_mix(l[i], -3i64);
}

/// Generic helpers: one instance per type a call passes, each computing what the same
/// generic Rust computes on the host (which calls the same functions), bit for bit.
pub fn generic_helpers(d: &Device) -> R {
    use sycl::half::bf16;
    let q = in_order(d)?;
    let n = 64;
    let a: Vec<f32> = (0..4 * n).map(|i| i as f32 * 0.125 - 3.0).collect();
    let b: Vec<f32> = (0..4 * n).map(|i| 1.0 - i as f32 * 0.0625).collect();
    let h: Vec<bf16> = a.iter().map(|&x| bf16::from_f32(x)).collect();
    let u0: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(0x9E37_79B9)).collect();
    let l0: Vec<i64> = (0..n as i64).map(|i| i * -1_000_003 + 17).collect();
    let (da, db, dh) = (upload(&q, &a)?, upload(&q, &b)?, upload(&q, &h)?);
    let (out, hout) = (filled(&q, n, 0f32)?, filled(&q, n, bf16::ZERO)?);
    let (du, dl) = (upload(&q, &u0)?, upload(&q, &l0)?);
    run(
        &q,
        Range::d1(n),
        use_generic_helpers(&da, &db, &out, &dh, &hout, &du, &dl),
    )?;
    let want: Vec<f32> = (0..n).map(|i| g_dot(&a[..], &b[..], i * 4, 4)).collect();
    compare_by(
        &q.to_vec(&out).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |i| format!("g_dot::<f32> of item {i}"),
    )?;
    let got = q.to_vec(&hout).map_err(fail)?;
    for (i, g) in got.iter().enumerate() {
        let w = g_dot(&h[..], &h[..], i * 4, 4);
        check_eq!(g.to_bits(), w.to_bits(), "g_dot::<bf16> of item {i}");
    }
    let want: Vec<u32> = u0.iter().map(|&x| g_mix(x, 7u32)).collect();
    compare(&q.to_vec(&du).map_err(fail)?, &want, |i| {
        format!("g_mix::<u32> of item {i}")
    })?;
    let want: Vec<i64> = l0.iter().map(|&x| g_mix(x, -3i64)).collect();
    compare(&q.to_vec(&dl).map_err(fail)?, &want, |i| {
        format!("g_mix::<i64> of item {i}")
    })
}

// ---------------------------------------------------------------- 19. blocked loops (native CPU)
//
// On the native CPU a `for` loop of step 1 whose body qualifies runs a block of iterations at
// a time over private buffers (`sycl-macros`, `emit_rust/block.rs`), so that LLVM vectorizes
// it. These kernels are written so that it applies (or, for the last two, so that it must
// not), and every device runs them against the host's sequential loop.

/// A blocked row pass: reads at an offset (one of them in an `if`), per-iteration values from
/// the loop variable, two maxima and a count carried across iterations, and a compound bf16
/// store in a second loop of `step_by(step)`; then a float sum, which is never blocked.
#[sycl::kernel]
fn blocked_rows(
    x: &[sycl::half::bf16],
    y: &mut [f32],
    w: &mut [sycl::half::bf16],
    stats: &mut [f32],
    off: usize,
    n: usize,
    step: usize,
) {
    let r = global_id(0);
    let row = r * n;
    let mut m = -3.0e38f32;
    let mut odd = -1.0f32;
    let mut hits = 0u32;
    for c in 0..n {
        let v = x[off + row + c].to_f32();
        m = m.max(v);
        if (c & 1) == 1 {
            odd = odd.max(x[off + row + c].to_f32() * 0.5);
        }
        hits += (v > 0.25) as u32;
        y[row + c] = v * 2.0 - (c as f32) * 0.125;
    }
    for c in (0..n).step_by(step) {
        w[row + c] += sycl::half::bf16::from_f32((x[off + row + c].to_f32() - m).exp());
    }
    let mut sum = 0.0f32;
    for c in 0..n {
        sum += (x[off + row + c].to_f32() - m) * 0.25;
    }
    stats[r * 4] = m;
    stats[r * 4 + 1] = odd;
    stats[r * 4 + 2] = hits as f32;
    stats[r * 4 + 3] = sum;
}

/// A blocked loop that runs past the end of `x`: the launch fails, on the CPU after the
/// elements before the failing one were written, as the sequential loop writes them.
#[sycl::kernel]
fn blocked_past_end(x: &[f32], y: &mut [f32], n: usize) {
    for i in 0..n {
        y[i] = (x[i] * 2.0 + 1.0).max(0.0).min(1000.0);
    }
}

/// Reads one element of `y` and writes the next: each iteration needs the last one's store
/// (never blocked: a written slice at two offsets).
#[sycl::kernel]
fn chained_writes(y: &mut [u32], n: usize) {
    for i in 0..n {
        y[i + 1] = (y[i] ^ 0x9e37u32).rotate_left(5) * 3u32 + 1u32;
    }
}

/// Writes only the even elements (never blocked: a store inside an `if`).
#[sycl::kernel]
fn even_writes(x: &[f32], y: &mut [f32], n: usize) {
    for i in 0..n {
        let v = (x[i] * 3.0 + 1.0).max(2.0);
        if (i & 1) == 0 {
            y[i] = v.min(50.0);
        }
    }
}

/// Item 19: loops the native CPU runs in blocks compute what the sequential loop computes,
/// with lengths that are not whole blocks, at an offset, and with a failure in a block; loops
/// it must not block (a written slice read at another offset, a conditional store) keep the
/// loop's order.
pub fn blocked_loops(d: &Device) -> R {
    use sycl::half::bf16;
    let q = in_order(d)?;
    let (rows, n, off) = (5usize, 1000usize, 7usize);
    let mut rng = Rng(0x5eed_b10c);
    let x: Vec<bf16> = (0..off + rows * n + 3)
        .map(|_| bf16::from_f32((rng.next() % 2001) as f32 / 1000.0 - 1.0))
        .collect();
    let w0: Vec<bf16> = (0..rows * n)
        .map(|k| bf16::from_f32((k % 13) as f32 * 0.25))
        .collect();
    let (dx, dw) = (upload(&q, &x)?, upload(&q, &w0)?);
    let (dy, ds) = (filled(&q, rows * n, 0f32)?, filled(&q, rows * 4, 0f32)?);
    run(
        &q,
        Range::d1(rows),
        blocked_rows(&dx, &dy, &dw, &ds, off, n, 1),
    )?;
    let (mut want_y, mut want_w, mut want_s) = (vec![0f32; rows * n], w0.clone(), Vec::new());
    for r in 0..rows {
        let row = r * n;
        let (mut m, mut odd, mut hits) = (-3.0e38f32, -1.0f32, 0u32);
        for c in 0..n {
            let v = x[off + row + c].to_f32();
            m = m.max(v);
            if c & 1 == 1 {
                odd = odd.max(v * 0.5);
            }
            hits += (v > 0.25) as u32;
            want_y[row + c] = v * 2.0 - (c as f32) * 0.125;
        }
        let mut sum = 0.0f32;
        for c in 0..n {
            want_w[row + c] += bf16::from_f32((x[off + row + c].to_f32() - m).exp());
            sum += (x[off + row + c].to_f32() - m) * 0.25;
        }
        want_s.extend([m, odd, hits as f32, sum]);
    }
    compare_by(
        &q.to_vec(&dy).map_err(fail)?,
        &want_y,
        |g, w, _| same_float(g, w),
        |i| format!("blocked_rows y[{i}]"),
    )?;
    // The float sum (every fourth) within rounding: Intel's CPU runtime adds it in another
    // order; the maxima and the count exactly.
    compare_by(
        &q.to_vec(&ds).map_err(fail)?,
        &want_s,
        |g, w, i| match i % 4 {
            3 => close(g, w, 1e-5),
            _ => same_float(g, w),
        },
        |i| {
            format!(
                "blocked_rows stats[{i}] (max, odd max, count, sum of row {})",
                i / 4
            )
        },
    )?;
    // `exp` is the device's: within bf16's rounding of the host's.
    compare_by(
        &q.to_vec(&dw).map_err(fail)?,
        &want_w,
        |g, w, _| close(g.to_f32(), w.to_f32(), 1.0 / 128.0),
        |i| format!("blocked_rows w[{i}]"),
    )?;

    // A failure in the second block: x has 300 elements, the loop runs to 700.
    let xs: Vec<f32> = (0..300).map(|k| k as f32 * 0.5 - 20.0).collect();
    let (dxs, dys) = (upload(&q, &xs)?, filled(&q, 700, -1f32)?);
    fails_in_kernel(
        &q,
        Range::d1(1),
        blocked_past_end(&dxs, &dys, 700),
        "blocked_past_end",
    )?;
    if d.backend() == sycl::BackendKind::NativeCpu {
        let want: Vec<f32> = (0..700)
            .map(|i| match xs.get(i) {
                Some(v) => (v * 2.0 + 1.0).clamp(0.0, 1000.0),
                None => -1.0,
            })
            .collect();
        compare_by(
            &q.to_vec(&dys).map_err(fail)?,
            &want,
            |g, w, _| same_float(g, w),
            |i| format!("blocked_past_end y[{i}] (written up to the failing element only)"),
        )?;
    }

    let m = 600usize;
    let y0: Vec<u32> = (0..m as u32 + 1)
        .map(|k| k.wrapping_mul(2_654_435_761))
        .collect();
    let dc = upload(&q, &y0)?;
    run(&q, Range::d1(1), chained_writes(&dc, m))?;
    let mut want = y0.clone();
    for i in 0..m {
        want[i + 1] = (want[i] ^ 0x9e37)
            .rotate_left(5)
            .wrapping_mul(3)
            .wrapping_add(1);
    }
    compare(&q.to_vec(&dc).map_err(fail)?, &want, |i| {
        format!("chained_writes y[{i}]")
    })?;

    let xe: Vec<f32> = (0..m).map(|k| k as f32 * 0.1 - 3.0).collect();
    let (dxe, dye) = (upload(&q, &xe)?, filled(&q, m, 7f32)?);
    run(&q, Range::d1(1), even_writes(&dxe, &dye, m))?;
    let want: Vec<f32> = (0..m)
        .map(|i| match i & 1 {
            0 => (xe[i] * 3.0 + 1.0).clamp(2.0, 50.0),
            _ => 7.0,
        })
        .collect();
    compare_by(
        &q.to_vec(&dye).map_err(fail)?,
        &want,
        |g, w, _| same_float(g, w),
        |i| format!("even_writes y[{i}]"),
    )
}
