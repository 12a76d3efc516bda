//! Helpers shared by the bench binaries: medians, timing, the ours/raw row, and hex for
//! passing handle bytes to child processes.
#![allow(dead_code)] // each bench uses a subset

use std::time::Instant;

/// The median (NaN for no samples; NaNs sort last).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Seconds taken by each of `reps` calls of `f`.
pub fn time_it(reps: usize, mut f: impl FnMut()) -> Vec<f64> {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect()
}

/// Microseconds since `t`.
pub fn us_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// Says a bench skips for `why`, or panics if `SYCL_RS_REQUIRE_BACKENDS` names `backend`:
/// where a backend is required (CI, the GPU script), a bench that measured nothing fails.
pub fn skip(backend: &str, why: &str) {
    let required = std::env::var("SYCL_RS_REQUIRE_BACKENDS")
        .is_ok_and(|list| list.split(',').any(|b| b.trim() == backend));
    assert!(
        !required,
        "SYCL_RS_REQUIRE_BACKENDS names {backend}, but the bench cannot run: {why}"
    );
    println!("{why}: skipped");
}

/// One measurement beside its raw counterpart.
pub fn row(name: &str, unit: &str, ours: f64, raw: f64) {
    println!(
        "{name:<52} ours {ours:>10.2} {unit:<5} raw {raw:>10.2} {unit:<5} ours/raw {:>7.3}",
        ours / raw
    );
}
