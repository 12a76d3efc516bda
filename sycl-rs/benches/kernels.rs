//! Kernels written in Rust with `#[sycl::kernel]`, beside the same algorithm written by hand,
//! measured in the same run on every device kind.
//!
//! `cargo bench -p sycl-rs --bench kernels` (add `-- --quick` for a short run, `-- --only
//! native,opencl,cuda` to pick device kinds, `-- --dump DIR` to write the generated and the
//! hand-written programs to DIR and exit).
//!
//! Seven algorithms, each as a bounds-checked kernel and as the same kernel with
//! `unsafe { *x.get_unchecked(i) }` / `*y.get_unchecked_mut(i) = v` (unchecked):
//! - saxpy: `y[i] = a * x[i] + y[i]` over a plain range (on OpenCL and CUDA, in the groups
//!   the runtime picks, `Range::launched_on`: 256 on GPUs, up to 4096 on CPUs; the extra
//!   work-items leave);
//! - reduction: the sum of `u32`s (wrapping): each work-group strides through its own
//!   contiguous chunk (`step_by`), a group reduction, one atomic per work-group (groups of 256
//!   on OpenCL and CUDA; on the native CPU, groups of one work-item, which then walks its chunk
//!   in order: the host picks the launch range per device, the kernel is the same);
//! - stencil2d: a 5-point stencil on a square grid, through a 18x18 local tile (16x16 groups
//!   plus a one-element halo, clamped at the edges; edge elements are copied), with 32-bit
//!   index arithmetic in both versions;
//! - matmul: C = A * B on square matrices with 16x16 local tiles, `mul_add` accumulation.
//! - softmax: row-wise softmax of `bf16` rows of 1024 (`f32` arithmetic, `bf16` out): three
//!   strided passes over a row (maximum, sum of exponentials, results) with two group
//!   reductions, one group of 256 per row (native CPU: one work-item walks its row);
//! - histogram: 256 bins of the bytes of `u32` words: local-memory bins with local atomics
//!   per work-group, then one global atomic per bin.
//! - scan: the chunk pass of a multi-pass inclusive scan of `u32`s (`examples/scan.rs` has
//!   all three): each work-group scans its contiguous chunk a tile at a time
//!   (`group_inclusive_sum`, the tile's total by `group_broadcast`, a running carry) and
//!   writes the chunk's total (native CPU: one work-item walks its chunk in order).
//!
//! Beside them (same queue, same memory, same launch geometry): on OpenCL and CUDA devices
//! the same algorithms hand-written in OpenCL C / CUDA C (as a CUDA or OpenCL programmer
//! would: 32-bit `int` indices in CUDA, `int` or `size_t` in OpenCL (see HAND_OPENCL),
//! `restrict` pointers, a sequential-addressing local-memory tree in OpenCL, warp shuffles
//! in CUDA), built with `KernelBundle::build` with default options (NVRTC contracts `a * b +
//! c` there, ours is built with `--fmad=false`; matmul uses `fma`/`mul_add` on both sides)
//! and launched with `Queue::launch`; on the native CPU a hand-written rayon loop over the
//! same kind of memory (rayon's pool is the one the native CPU queue runs on).
//!
//! Times: the median of N launches, each timed by its event's profiling timestamps (OpenCL,
//! CUDA), or on the native CPU the wall time of a batch of launches followed by a wait
//! (rayon: the same batch of calls). The sides run round-robin so that drift hits all alike,
//! and a ratio is the median of the rounds' ratios, so that a burst of host load that spans
//! rounds hits both sides of one;
//! every side runs once first (warm-up: program build, JIT, page faults) and its result is
//! checked against a host reference (a wrong result panics). The hand-written kernels write
//! the same output memory as ours (a memory-bound kernel's time depends on the allocation
//! it writes). On OpenCL and CUDA a fourth side, the hand-written source built a second time
//! (`control` rows, information), shows the run's resolution: identical code, measured the
//! same way, against the first build. On OpenCL, saxpy has a fifth side (`no-check` rows,
//! information): the hand-written kernel without its range check (where the launch covers
//! exactly n work-items), which Intel's CPU runtime compiles to the unmasked loop that our
//! kernels' range check becomes there, against the masked loop of the `if` form.
//!
//! Each device is measured in three replicates, each in a context of its own (fresh builds,
//! fresh allocations), and a row gives the medians over them, printing each replicate's
//! ratio beside it: on Intel's CPU runtime a context keeps its own saxpy ratio for as long as
//! it lives (`REPLICATES`).
//!
//! OpenCL devices that take SPIR-V run everything twice, each time in a context of its own:
//! our kernels as OpenCL C, then as SPIR-V built by sycl-rs (rows labelled `SPIR-V`), each
//! time beside the hand-written OpenCL C (built in the same context).
//!
//! Targets (one PASS/MISS per row): CUDA and Intel's CPU OpenCL: ours <= 1.05x the
//! hand-written time; native CPU saxpy, reduction, softmax and scan: ours >= 0.8x rayon's
//! throughput. Other
//! OpenCL platforms (PoCL) and native stencil/matmul are information.
//!
//! `SYCL_RS_REQUIRE_BACKENDS` (comma list: `opencl`, `cuda`) turns a missing backend into a
//! failure, as in the other benches. For experiments: `-- --kernels saxpy,reduce` runs only
//! those; `--only` also takes a platform-name fragment (`--only intel`); `--samples` prints
//! every round's times;
//! `SYCL_RS_BENCH_HAND_OPENCL` / `SYCL_RS_BENCH_HAND_CUDA` name a file that replaces the
//! hand-written program (same kernel names and parameters); `SYCL_RS_BENCH_RED_PER_ITEM` sets
//! the reduction's elements per work-item on CPUs.
#![allow(unsafe_code)]

mod common;
use common::{median, skip};
use std::fmt::Debug;
use std::time::Instant;

use rayon::prelude::*;
use sycl::half::bf16;
use sycl::kernel::KernelIr;
use sycl::{
    Aspect, BackendKind, Context, Device, DeviceSelector, Event, Kernel, KernelArg, KernelBundle,
    Queue, QueueProperties, Range, Source, Usm,
};

// ---------------------------------------------------------------- the Rust kernels

/// Work-group size of the 1-D kernels; tile side of the 2-D ones.
const WG: usize = 256;
/// Elements of a softmax row.
const SOFTMAX_COLS: usize = 1024;
const TS: usize = 16;

#[sycl::kernel]
fn saxpy(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    y[i] = a * x[i] + y[i];
}

#[sycl::kernel]
fn saxpy_unchecked(a: f32, x: &[f32], y: &mut [f32]) {
    let i = global_id(0);
    // SAFETY: the range is y.len() == x.len() work-items.
    unsafe {
        *y.get_unchecked_mut(i) = a * *x.get_unchecked(i) + *y.get_unchecked(i);
    }
}

// Work-group g sums the g-th contiguous chunk of x, its work-items striding through it: on
// GPUs neighbouring work-items read neighbouring elements; on CPUs, where a group's work-items
// run one after another, each chunk stays in cache while they do (the native CPU gets groups
// of one work-item: one pass in order). `i < end <= n == x.len()`: the macro proves the index
// in bounds, so the checked kernel has no per-element check either.
#[sycl::kernel]
fn reduce(x: &[u32], out: &mut [u32]) {
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    let mut acc = 0u32;
    for i in (begin + local_id(0)..end).step_by(local_range(0)) {
        acc += x[i];
    }
    let s = group_sum(acc);
    if local_id(0) == 0 {
        atomic_fetch_add(out, 0, s);
    }
}

#[sycl::kernel]
fn reduce_unchecked(x: &[u32], out: &mut [u32]) {
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    let mut acc = 0u32;
    for i in (begin + local_id(0)..end).step_by(local_range(0)) {
        // SAFETY: i < end <= n == x.len().
        acc += unsafe { *x.get_unchecked(i) };
    }
    let s = group_sum(acc);
    if local_id(0) == 0 {
        atomic_fetch_add(out, 0, s);
    }
}

// 32-bit index arithmetic, as the hand-written kernels' `int`s (grids below 2^16 a side).
#[sycl::kernel]
fn stencil(src: &[f32], dst: &mut [f32]) {
    let tile = local_array::<f32, 324>();
    let h = global_range(0) as u32;
    let w = global_range(1) as u32;
    let y = global_id(0) as u32;
    let x = global_id(1) as u32;
    let ly = local_id(0) as u32;
    let lx = local_id(1) as u32;
    let y0 = group_id(0) as u32 * 16;
    let x0 = group_id(1) as u32 * 16;
    // The 18x18 tile: the group's 16x16 elements and a halo of one, clamped to the grid.
    for ty in (ly..18).step_by(16) {
        let gy = (y0 + ty).max(1).min(h) - 1;
        for tx in (lx..18).step_by(16) {
            let gx = (x0 + tx).max(1).min(w) - 1;
            tile[(ty * 18 + tx) as usize] = src[(gy * w + gx) as usize];
        }
    }
    barrier();
    let c = ((ly + 1) * 18 + lx + 1) as usize;
    let mid = tile[c];
    let mut v = mid;
    if y != 0 && x != 0 && y != h - 1 && x != w - 1 {
        v = mid * 0.5 + (tile[c - 18] + tile[c + 18] + tile[c - 1] + tile[c + 1]) * 0.125;
    }
    dst[(y * w + x) as usize] = v;
}

#[sycl::kernel]
fn stencil_unchecked(src: &[f32], dst: &mut [f32]) {
    let tile = local_array::<f32, 324>();
    let h = global_range(0) as u32;
    let w = global_range(1) as u32;
    let y = global_id(0) as u32;
    let x = global_id(1) as u32;
    let ly = local_id(0) as u32;
    let lx = local_id(1) as u32;
    let y0 = group_id(0) as u32 * 16;
    let x0 = group_id(1) as u32 * 16;
    for ty in (ly..18).step_by(16) {
        let gy = (y0 + ty).max(1).min(h) - 1;
        for tx in (lx..18).step_by(16) {
            let gx = (x0 + tx).max(1).min(w) - 1;
            // SAFETY: ty, tx < 18; gy < h, gx < w and src holds h * w elements.
            unsafe {
                *tile.get_unchecked_mut((ty * 18 + tx) as usize) =
                    *src.get_unchecked((gy * w + gx) as usize);
            }
        }
    }
    barrier();
    let c = ((ly + 1) * 18 + lx + 1) as usize;
    // SAFETY: ly, lx < 16, so c and its four neighbours are inside the 18x18 tile.
    let mid = unsafe { *tile.get_unchecked(c) };
    let mut v = mid;
    if y != 0 && x != 0 && y != h - 1 && x != w - 1 {
        // SAFETY: as above.
        let n = unsafe { *tile.get_unchecked(c - 18) };
        // SAFETY: as above.
        let s = unsafe { *tile.get_unchecked(c + 18) };
        // SAFETY: as above.
        let e = unsafe { *tile.get_unchecked(c - 1) };
        // SAFETY: as above.
        let o = unsafe { *tile.get_unchecked(c + 1) };
        v = mid * 0.5 + (n + s + e + o) * 0.125;
    }
    // SAFETY: y < h, x < w, dst holds h * w elements.
    unsafe {
        *dst.get_unchecked_mut((y * w + x) as usize) = v;
    }
}

#[sycl::kernel]
fn matmul(a: &[f32], b: &[f32], c: &mut [f32]) {
    let ta = local_array::<f32, 256>();
    let tb = local_array::<f32, 256>();
    let n = global_range(0);
    let row = global_id(0);
    let col = global_id(1);
    let ly = local_id(0);
    let lx = local_id(1);
    let mut acc = 0.0f32;
    for t in 0..n / 16 {
        ta[ly * 16 + lx] = a[row * n + t * 16 + lx];
        tb[ly * 16 + lx] = b[(t * 16 + ly) * n + col];
        barrier();
        for k in 0..16 {
            acc = ta[ly * 16 + k].mul_add(tb[k * 16 + lx], acc);
        }
        barrier();
    }
    c[row * n + col] = acc;
}

#[sycl::kernel]
fn matmul_unchecked(a: &[f32], b: &[f32], c: &mut [f32]) {
    let ta = local_array::<f32, 256>();
    let tb = local_array::<f32, 256>();
    let n = global_range(0);
    let row = global_id(0);
    let col = global_id(1);
    let ly = local_id(0);
    let lx = local_id(1);
    let mut acc = 0.0f32;
    for t in 0..n / 16 {
        // SAFETY: ly, lx < 16; row, col, t * 16 + 15 < n and the matrices hold n * n.
        unsafe {
            *ta.get_unchecked_mut(ly * 16 + lx) = *a.get_unchecked(row * n + t * 16 + lx);
            *tb.get_unchecked_mut(ly * 16 + lx) = *b.get_unchecked((t * 16 + ly) * n + col);
        }
        barrier();
        for k in 0..16 {
            // SAFETY: ly, lx, k < 16.
            let x = unsafe { *ta.get_unchecked(ly * 16 + k) };
            // SAFETY: as above.
            let y = unsafe { *tb.get_unchecked(k * 16 + lx) };
            acc = x.mul_add(y, acc);
        }
        barrier();
    }
    // SAFETY: row, col < n.
    unsafe {
        *c.get_unchecked_mut(row * n + col) = acc;
    }
}

/// sgemm's register tile side (each work-item computes TM x TM elements of C) and its
/// elements (Rust's const generics cannot compute `TM * TM` as a length: the launch names
/// both).
const TM: usize = 4;
const TT: usize = TM * TM;

// C = A * B, n x n row-major (n a multiple of 16 * TM): 16 x 16 work-items per group, each
// computing a TM x TM register tile from 16-deep local tiles of A (stored transposed) and B;
// every work-item loads TM elements of each tile per step.
#[sycl::kernel]
fn sgemm<const TM: usize, const TT: usize>(a: &[f32], b: &[f32], c: &mut [f32]) {
    let at = local_array::<f32, 1024>();
    let bt = local_array::<f32, 1024>();
    let n = global_range(0) * TM;
    let ty = local_id(0);
    let tx = local_id(1);
    let bm = 16 * TM;
    let row0 = group_id(0) * bm;
    let col0 = group_id(1) * bm;
    let lin = ty * 16 + tx;
    let mut acc = [0.0f32; TT];
    let mut ar = [0.0f32; TM];
    let mut br = [0.0f32; TM];
    for kb in (0..n).step_by(16) {
        for i in 0..TM {
            let e = lin + i * 256;
            let r = e / 16;
            let k = e % 16;
            at[k * 64 + r] = a[(row0 + r) * n + kb + k];
            let k2 = e / bm;
            let cc = e % bm;
            bt[k2 * 64 + cc] = b[(kb + k2) * n + col0 + cc];
        }
        barrier();
        for k in 0..16 {
            for i in 0..TM {
                ar[i] = at[k * 64 + ty * TM + i];
                br[i] = bt[k * 64 + tx * TM + i];
            }
            for i in 0..TM {
                for j in 0..TM {
                    acc[i * TM + j] = ar[i].mul_add(br[j], acc[i * TM + j]);
                }
            }
        }
        barrier();
    }
    for i in 0..TM {
        for j in 0..TM {
            c[(row0 + ty * TM + i) * n + col0 + tx * TM + j] = acc[i * TM + j];
        }
    }
}

#[sycl::kernel]
fn sgemm_unchecked<const TM: usize, const TT: usize>(a: &[f32], b: &[f32], c: &mut [f32]) {
    let at = local_array::<f32, 1024>();
    let bt = local_array::<f32, 1024>();
    let n = global_range(0) * TM;
    let ty = local_id(0);
    let tx = local_id(1);
    let bm = 16 * TM;
    let row0 = group_id(0) * bm;
    let col0 = group_id(1) * bm;
    let lin = ty * 16 + tx;
    let mut acc = [0.0f32; TT];
    let mut ar = [0.0f32; TM];
    let mut br = [0.0f32; TM];
    for kb in (0..n).step_by(16) {
        for i in 0..TM {
            let e = lin + i * 256;
            let r = e / 16;
            let k = e % 16;
            // SAFETY: e < 256 * TM = 16 * bm, so r < bm <= 64, k < 16; the block lies inside
            // the n x n matrix (n a multiple of bm).
            unsafe {
                *at.get_unchecked_mut(k * 64 + r) = *a.get_unchecked((row0 + r) * n + kb + k);
            }
            let k2 = e / bm;
            let cc = e % bm;
            // SAFETY: as above, k2 < 16 and cc < bm.
            unsafe {
                *bt.get_unchecked_mut(k2 * 64 + cc) = *b.get_unchecked((kb + k2) * n + col0 + cc);
            }
        }
        barrier();
        for k in 0..16 {
            for i in 0..TM {
                // SAFETY: k < 16, ty * TM + i, tx * TM + i < 16 * TM <= 64.
                unsafe {
                    *ar.get_unchecked_mut(i) = *at.get_unchecked(k * 64 + ty * TM + i);
                    *br.get_unchecked_mut(i) = *bt.get_unchecked(k * 64 + tx * TM + i);
                }
            }
            for i in 0..TM {
                for j in 0..TM {
                    // SAFETY: i, j < TM and TT = TM * TM.
                    unsafe {
                        *acc.get_unchecked_mut(i * TM + j) = (*ar.get_unchecked(i))
                            .mul_add(*br.get_unchecked(j), *acc.get_unchecked(i * TM + j));
                    }
                }
            }
        }
        barrier();
    }
    for i in 0..TM {
        for j in 0..TM {
            // SAFETY: the tile lies inside C, and i * TM + j < TT.
            unsafe {
                *c.get_unchecked_mut((row0 + ty * TM + i) * n + col0 + tx * TM + j) =
                    *acc.get_unchecked(i * TM + j);
            }
        }
    }
}

// Row-wise softmax of bf16 rows (f32 arithmetic): three strided passes over the row (its
// maximum, the sum of exponentials, the results), two group reductions. On GPUs and OpenCL
// groups of 256 share a row; on the native CPU a group of one work-item walks it in order.
#[sycl::kernel]
fn softmax(x: &[bf16], y: &mut [bf16], cols: usize) {
    let row = group_id(0) * cols;
    let mut m = -3.0e38f32;
    for c in (local_id(0)..cols).step_by(local_range(0)) {
        m = m.max(x[row + c].to_f32());
    }
    let gm = group_max(m);
    let mut s = 0.0f32;
    for c in (local_id(0)..cols).step_by(local_range(0)) {
        s += (x[row + c].to_f32() - gm).exp();
    }
    let gs = group_sum(s);
    let r = 1.0f32 / gs;
    for c in (local_id(0)..cols).step_by(local_range(0)) {
        y[row + c] = bf16::from_f32((x[row + c].to_f32() - gm).exp() * r);
    }
}

#[sycl::kernel]
fn softmax_unchecked(x: &[bf16], y: &mut [bf16], cols: usize) {
    let row = group_id(0) * cols;
    let mut m = -3.0e38f32;
    for c in (local_id(0)..cols).step_by(local_range(0)) {
        // SAFETY: the launch has one group per row of `cols` in x and y.
        m = m.max(unsafe { *x.get_unchecked(row + c) }.to_f32());
    }
    let gm = group_max(m);
    let mut s = 0.0f32;
    for c in (local_id(0)..cols).step_by(local_range(0)) {
        // SAFETY: as above.
        s += (unsafe { *x.get_unchecked(row + c) }.to_f32() - gm).exp();
    }
    let gs = group_sum(s);
    let r = 1.0f32 / gs;
    for c in (local_id(0)..cols).step_by(local_range(0)) {
        // SAFETY: as above.
        let v = unsafe { *x.get_unchecked(row + c) }.to_f32();
        // SAFETY: as above.
        unsafe {
            *y.get_unchecked_mut(row + c) = bf16::from_f32((v - gm).exp() * r);
        }
    }
}

// A 256-bin histogram of the bytes of `x`: each work-group counts its contiguous chunk in
// local memory with local atomics, then adds its bins to `bins` (one atomic per bin).
#[sycl::kernel]
fn histogram(x: &[u32], bins: &mut [u32]) {
    let h = local_array::<u32, 256>();
    for b in (local_id(0)..256).step_by(local_range(0)) {
        h[b] = 0;
    }
    barrier();
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    for i in (begin + local_id(0)..end).step_by(local_range(0)) {
        let w = x[i];
        atomic_fetch_add(h, (w & 255) as usize, 1u32);
        atomic_fetch_add(h, ((w >> 8) & 255) as usize, 1u32);
        atomic_fetch_add(h, ((w >> 16) & 255) as usize, 1u32);
        atomic_fetch_add(h, (w >> 24) as usize, 1u32);
    }
    barrier();
    for b in (local_id(0)..256).step_by(local_range(0)) {
        let c = h[b];
        if c != 0 {
            atomic_fetch_add(bins, b, c);
        }
    }
}

#[sycl::kernel]
fn histogram_unchecked(x: &[u32], bins: &mut [u32]) {
    let h = local_array::<u32, 256>();
    for b in (local_id(0)..256).step_by(local_range(0)) {
        h[b] = 0;
    }
    barrier();
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    for i in (begin + local_id(0)..end).step_by(local_range(0)) {
        // SAFETY: i < end <= n == x.len().
        let w = unsafe { *x.get_unchecked(i) };
        atomic_fetch_add(h, (w & 255) as usize, 1u32);
        atomic_fetch_add(h, ((w >> 8) & 255) as usize, 1u32);
        atomic_fetch_add(h, ((w >> 16) & 255) as usize, 1u32);
        atomic_fetch_add(h, (w >> 24) as usize, 1u32);
    }
    barrier();
    for b in (local_id(0)..256).step_by(local_range(0)) {
        let c = h[b];
        if c != 0 {
            atomic_fetch_add(bins, b, c);
        }
    }
}

// The chunk pass of an inclusive scan: each work-group scans its contiguous chunk of `x` into
// `y`, a tile of one element per work-item at a time, and writes the chunk's total.
#[sycl::kernel]
fn scan(x: &[u32], y: &mut [u32], sums: &mut [u32]) {
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    let mut carry = 0u32;
    for tile in (begin..end).step_by(local_range(0)) {
        let i = tile + local_id(0);
        let v = if i < end { x[i] } else { 0 };
        let s = group_inclusive_sum(v);
        if i < end {
            y[i] = carry.wrapping_add(s);
        }
        let total = group_broadcast(s, local_range(0) - 1);
        carry = carry.wrapping_add(total);
    }
    if local_id(0) == 0 {
        sums[group_id(0)] = carry;
    }
}

#[sycl::kernel]
fn scan_unchecked(x: &[u32], y: &mut [u32], sums: &mut [u32]) {
    let n = x.len();
    let chunk = (n + group_range(0) - 1) / group_range(0);
    let begin = group_id(0) * chunk;
    let end = (begin + chunk).min(n);
    let mut carry = 0u32;
    for tile in (begin..end).step_by(local_range(0)) {
        let i = tile + local_id(0);
        // SAFETY: i < end <= n == x.len() == y.len().
        let v = if i < end {
            unsafe { *x.get_unchecked(i) }
        } else {
            0
        };
        let s = group_inclusive_sum(v);
        if i < end {
            // SAFETY: as above.
            unsafe {
                *y.get_unchecked_mut(i) = carry.wrapping_add(s);
            }
        }
        let total = group_broadcast(s, local_range(0) - 1);
        carry = carry.wrapping_add(total);
    }
    if local_id(0) == 0 {
        // SAFETY: the launch has sums.len() groups.
        unsafe {
            *sums.get_unchecked_mut(group_id(0)) = carry;
        }
    }
}

// ---------------------------------------------------------------- hand-written kernels

/// The four algorithms in OpenCL C. OpenCL's dimension 0 is x (the fast one).
///
/// Index types are the faster of `int` and `size_t` on Intel's CPU runtime, per kernel: with
/// `int` indices its vectorizer cannot prove saxpy's and matmul's accesses consecutive and
/// makes them gathers/scatters (its build log says so; 1.3x and 1.4x slower), while reduce
/// and stencil run faster with `int` than with `size_t`.
const HAND_OPENCL: &str = r#"
#define TS 16
#define TW (TS + 2)

__kernel void saxpy(float a, __global const float* restrict x, __global float* restrict y, int n)
{
    size_t i = get_global_id(0);
    if (i < (size_t)n)
        y[i] = a * x[i] + y[i];
}

// For launches whose range is whole work-groups (the `no-check` rows, information).
__kernel void saxpy_no_check(float a, __global const float* restrict x, __global float* restrict y, int n)
{
    size_t i = get_global_id(0);
    y[i] = a * x[i] + y[i];
}

#define WG 256

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void reduce(__global const uint* restrict x, int n, __global uint* restrict out,
            __local uint* scratch)
{
    int lid = get_local_id(0);
    int groups = get_num_groups(0);
    int chunk = (n + groups - 1) / groups;
    int begin = get_group_id(0) * chunk;
    int end = min(begin + chunk, n);
    uint acc = 0;
    for (int i = begin + lid; i < end; i += WG)
        acc += x[i];
    scratch[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        atomic_add(out, scratch[0]);
}

__kernel void stencil(__global const float* restrict src, __global float* restrict dst, int h, int w)
{
    __local float tile[TW * TW];
    int lx = get_local_id(0), ly = get_local_id(1);
    int x0 = get_group_id(0) * TS, y0 = get_group_id(1) * TS;
    int x = x0 + lx, y = y0 + ly;
    for (int ty = ly; ty < TW; ty += TS) {
        int gy = clamp(y0 + ty - 1, 0, h - 1);
        for (int tx = lx; tx < TW; tx += TS) {
            int gx = clamp(x0 + tx - 1, 0, w - 1);
            tile[ty * TW + tx] = src[gy * w + gx];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    int c = (ly + 1) * TW + lx + 1;
    float v = tile[c];
    if (y > 0 && x > 0 && y < h - 1 && x < w - 1)
        v = v * 0.5f + (tile[c - TW] + tile[c + TW] + tile[c - 1] + tile[c + 1]) * 0.125f;
    dst[y * w + x] = v;
}

__kernel void matmul(__global const float* restrict a, __global const float* restrict b,
                     __global float* restrict c, int ni)
{
    __local float ta[TS * TS];
    __local float tb[TS * TS];
    size_t n = ni;
    size_t lx = get_local_id(0), ly = get_local_id(1);
    size_t col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;
    for (size_t t = 0; t < n / TS; ++t) {
        ta[ly * TS + lx] = a[row * n + t * TS + lx];
        tb[ly * TS + lx] = b[(t * TS + ly) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (size_t k = 0; k < TS; ++k)
            acc = fma(ta[ly * TS + k], tb[k * TS + lx], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc;
}

#define TMR 4
#define BM (16 * TMR)
__kernel void sgemm(__global const float* restrict a, __global const float* restrict b,
                    __global float* restrict c, int n)
{
    __local float at[16 * 64];
    __local float bt[16 * 64];
    int tx = get_local_id(0), ty = get_local_id(1);
    int row0 = get_group_id(1) * BM, col0 = get_group_id(0) * BM;
    int lin = ty * 16 + tx;
    float acc[TMR * TMR];
    float ar[TMR], br[TMR];
    for (int i = 0; i < TMR * TMR; ++i)
        acc[i] = 0.0f;
    for (int kb = 0; kb < n; kb += 16) {
        for (int i = 0; i < TMR; ++i) {
            int e = lin + i * 256;
            int r = e / 16, k = e % 16;
            at[k * 64 + r] = a[(row0 + r) * n + kb + k];
            int k2 = e / BM, cc = e % BM;
            bt[k2 * 64 + cc] = b[(kb + k2) * n + col0 + cc];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < 16; ++k) {
            for (int i = 0; i < TMR; ++i) {
                ar[i] = at[k * 64 + ty * TMR + i];
                br[i] = bt[k * 64 + tx * TMR + i];
            }
            for (int i = 0; i < TMR; ++i)
                for (int j = 0; j < TMR; ++j)
                    acc[i * TMR + j] = fma(ar[i], br[j], acc[i * TMR + j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < TMR; ++i)
        for (int j = 0; j < TMR; ++j)
            c[(row0 + ty * TMR + i) * n + col0 + tx * TMR + j] = acc[i * TMR + j];
}

static inline float bf2f(ushort h) { return as_float(((uint)h) << 16); }
static inline ushort f2bf(float x) {
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void softmax(__global const ushort* restrict x, __global ushort* restrict y, int cols,
             __local float* scratch)
{
    int l = get_local_id(0);
    size_t row = get_group_id(0) * (size_t)cols;
    float m = -3.0e38f;
    for (int c = l; c < cols; c += WG)
        m = fmax(m, bf2f(x[row + c]));
    scratch[l] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) scratch[l] = fmax(scratch[l], scratch[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float gm = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    for (int c = l; c < cols; c += WG)
        sum += exp(bf2f(x[row + c]) - gm);
    scratch[l] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (l < s) scratch[l] += scratch[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = 1.0f / scratch[0];
    for (int c = l; c < cols; c += WG)
        y[row + c] = f2bf(exp(bf2f(x[row + c]) - gm) * r);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void histogram(__global const uint* restrict x, int n, __global uint* restrict bins)
{
    __local uint h[256];
    int l = get_local_id(0);
    h[l] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    int groups = get_num_groups(0);
    int chunk = (n + groups - 1) / groups;
    int begin = get_group_id(0) * chunk;
    int end = min(begin + chunk, n);
    for (int i = begin + l; i < end; i += WG) {
        uint w = x[i];
        atomic_inc(&h[w & 255u]);
        atomic_inc(&h[(w >> 8) & 255u]);
        atomic_inc(&h[(w >> 16) & 255u]);
        atomic_inc(&h[w >> 24]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint c = h[l];
    if (c != 0u) atomic_add(&bins[l], c);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void scan(__global const uint* restrict x, int n, __global uint* restrict y, __global uint* restrict sums)
{
    __local uint s[WG];
    int l = get_local_id(0);
    int groups = get_num_groups(0);
    int chunk = (n + groups - 1) / groups;
    int begin = get_group_id(0) * chunk;
    int end = min(begin + chunk, n);
    uint carry = 0u;
    for (int tile = begin; tile < end; tile += WG) {
        int i = tile + l;
        s[l] = i < end ? x[i] : 0u;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int d = 1; d < WG; d <<= 1) {
            uint t = l >= d ? s[l - d] + s[l] : s[l];
            barrier(CLK_LOCAL_MEM_FENCE);
            s[l] = t;
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (i < end) y[i] = carry + s[l];
        carry += s[WG - 1];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) sums[get_group_id(0)] = carry;
}
"#;

/// The four algorithms in CUDA C++. CUDA's x is the fast dimension.
const HAND_CUDA: &str = r#"
#define TS 16
#define TW (TS + 2)

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

#define WG 256

extern "C" __global__ void reduce(const unsigned* __restrict__ x, int n, unsigned* __restrict__ out)
{
    __shared__ unsigned partial[32];
    int chunk = (n + gridDim.x - 1) / gridDim.x;
    int begin = blockIdx.x * chunk;
    int end = min(begin + chunk, n);
    unsigned acc = 0;
    for (int i = begin + threadIdx.x; i < end; i += WG)
        acc += x[i];
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < WG / 32 ? partial[lane] : 0u;
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0)
            atomicAdd(out, acc);
    }
}

extern "C" __global__ void stencil(const float* __restrict__ src, float* __restrict__ dst, int h, int w)
{
    __shared__ float tile[TW * TW];
    int lx = threadIdx.x, ly = threadIdx.y;
    int x0 = blockIdx.x * TS, y0 = blockIdx.y * TS;
    int x = x0 + lx, y = y0 + ly;
    for (int ty = ly; ty < TW; ty += TS) {
        int gy = min(max(y0 + ty - 1, 0), h - 1);
        for (int tx = lx; tx < TW; tx += TS) {
            int gx = min(max(x0 + tx - 1, 0), w - 1);
            tile[ty * TW + tx] = src[gy * w + gx];
        }
    }
    __syncthreads();
    int c = (ly + 1) * TW + lx + 1;
    float v = tile[c];
    if (y > 0 && x > 0 && y < h - 1 && x < w - 1)
        v = v * 0.5f + (tile[c - TW] + tile[c + TW] + tile[c - 1] + tile[c + 1]) * 0.125f;
    dst[y * w + x] = v;
}

extern "C" __global__ void matmul(const float* __restrict__ a, const float* __restrict__ b,
                                  float* __restrict__ c, int n)
{
    __shared__ float ta[TS * TS];
    __shared__ float tb[TS * TS];
    int lx = threadIdx.x, ly = threadIdx.y;
    int col = blockIdx.x * TS + lx, row = blockIdx.y * TS + ly;
    float acc = 0.0f;
    for (int t = 0; t < n / TS; ++t) {
        ta[ly * TS + lx] = a[row * n + t * TS + lx];
        tb[ly * TS + lx] = b[(t * TS + ly) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TS; ++k)
            acc = fmaf(ta[ly * TS + k], tb[k * TS + lx], acc);
        __syncthreads();
    }
    c[row * n + col] = acc;
}

#define TMR 4
#define BM (16 * TMR)
extern "C" __global__ void sgemm(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ c, int n)
{
    __shared__ float at[16 * 64];
    __shared__ float bt[16 * 64];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row0 = blockIdx.y * BM, col0 = blockIdx.x * BM;
    int lin = ty * 16 + tx;
    float acc[TMR * TMR];
    float ar[TMR], br[TMR];
#pragma unroll
    for (int i = 0; i < TMR * TMR; ++i)
        acc[i] = 0.0f;
    for (int kb = 0; kb < n; kb += 16) {
#pragma unroll
        for (int i = 0; i < TMR; ++i) {
            int e = lin + i * 256;
            int r = e / 16, k = e % 16;
            at[k * 64 + r] = a[(row0 + r) * n + kb + k];
            int k2 = e / BM, cc = e % BM;
            bt[k2 * 64 + cc] = b[(kb + k2) * n + col0 + cc];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < 16; ++k) {
#pragma unroll
            for (int i = 0; i < TMR; ++i) {
                ar[i] = at[k * 64 + ty * TMR + i];
                br[i] = bt[k * 64 + tx * TMR + i];
            }
#pragma unroll
            for (int i = 0; i < TMR; ++i)
#pragma unroll
                for (int j = 0; j < TMR; ++j)
                    acc[i * TMR + j] = fmaf(ar[i], br[j], acc[i * TMR + j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TMR; ++i)
#pragma unroll
        for (int j = 0; j < TMR; ++j)
            c[(row0 + ty * TMR + i) * n + col0 + tx * TMR + j] = acc[i * TMR + j];
}

__device__ __forceinline__ float bf2f(unsigned short h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ unsigned short f2bf(float x) {
    unsigned u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// One block of WG per row: warp shuffles, then the 8 warps' partials in shared memory.
extern "C" __global__ void softmax(const unsigned short* __restrict__ x, unsigned short* __restrict__ y, int cols)
{
    __shared__ float partial[32];
    int l = threadIdx.x, lane = l & 31, warp = l >> 5;
    size_t row = (size_t)blockIdx.x * cols;
    float m = -3.0e38f;
    for (int c = l; c < cols; c += WG)
        m = fmaxf(m, bf2f(x[row + c]));
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (lane == 0) partial[warp] = m;
    __syncthreads();
    float gm = partial[0];
    for (int w = 1; w < WG / 32; ++w) gm = fmaxf(gm, partial[w]);
    __syncthreads();
    float s = 0.0f;
    for (int c = l; c < cols; c += WG)
        s += expf(bf2f(x[row + c]) - gm);
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) partial[warp] = s;
    __syncthreads();
    float gs = partial[0];
    for (int w = 1; w < WG / 32; ++w) gs += partial[w];
    float r = 1.0f / gs;
    for (int c = l; c < cols; c += WG)
        y[row + c] = f2bf(expf(bf2f(x[row + c]) - gm) * r);
}

extern "C" __global__ void histogram(const unsigned* __restrict__ x, int n, unsigned* __restrict__ bins)
{
    __shared__ unsigned h[256];
    int l = threadIdx.x;
    h[l] = 0;
    __syncthreads();
    int chunk = (n + gridDim.x - 1) / gridDim.x;
    int begin = blockIdx.x * chunk;
    int end = min(begin + chunk, n);
    for (int i = begin + l; i < end; i += WG) {
        unsigned w = x[i];
        atomicAdd(&h[w & 255u], 1u);
        atomicAdd(&h[(w >> 8) & 255u], 1u);
        atomicAdd(&h[(w >> 16) & 255u], 1u);
        atomicAdd(&h[w >> 24], 1u);
    }
    __syncthreads();
    unsigned c = h[l];
    if (c != 0u) atomicAdd(&bins[l], c);
}

extern "C" __global__ void scan(const unsigned* __restrict__ x, int n, unsigned* __restrict__ y, unsigned* __restrict__ sums)
{
    __shared__ unsigned warp_total[WG / 32];
    int l = threadIdx.x, lane = l & 31, warp = l >> 5;
    int chunk = (n + gridDim.x - 1) / gridDim.x;
    int begin = blockIdx.x * chunk;
    int end = min(begin + chunk, n);
    unsigned carry = 0u;
    for (int tile = begin; tile < end; tile += WG) {
        int i = tile + l;
        unsigned v = i < end ? x[i] : 0u;
        for (int o = 1; o < 32; o <<= 1) {
            unsigned t = __shfl_up_sync(0xffffffffu, v, o);
            if (lane >= o) v += t;
        }
        if (lane == 31) warp_total[warp] = v;
        __syncthreads();
        unsigned before = 0u, total = 0u;
        for (int w = 0; w < WG / 32; ++w) {
            unsigned t = warp_total[w];
            if (w < warp) before += t;
            total += t;
        }
        __syncthreads();
        if (i < end) y[i] = carry + before + v;
        carry += total;
    }
    if (l == 0) sums[blockIdx.x] = carry;
}
"#;

// ---------------------------------------------------------------- devices, sizes, rows

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Native,
    /// Intel's CPU OpenCL runtime: the 1.05x targets apply.
    IntelOpenCl,
    /// Any other OpenCL platform (PoCL): information.
    OtherOpenCl,
    Cuda,
}

/// Problem sizes on one device.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    /// saxpy and reduction elements.
    vec: usize,
    /// Work-groups of the reduction (one contiguous chunk each).
    red_groups: usize,
    /// Work-items per reduction work-group: WG on OpenCL and CUDA (the hand-written kernels
    /// are built for it); 1 on the native CPU, whose work-items of a group run one after
    /// another on one thread: one work-item walks its chunk in order (the same kernel text).
    red_local: usize,
    /// Side of the stencil grid.
    grid: usize,
    /// Side of the matrices.
    mat: usize,
    /// Softmax rows (of SOFTMAX_COLS) and histogram words.
    rows: usize,
    /// Work-items per softmax and histogram group: WG, or 1 on the native CPU (as reduce).
    group_local: usize,
}

impl Sizes {
    fn for_device(kind: Kind, quick: bool, compute_units: usize) -> Sizes {
        let (vec, grid, mat) = match (kind, quick) {
            (Kind::Cuda, false) => (1 << 26, 8192, 2048),
            (Kind::Cuda, true) => (1 << 24, 2048, 1024),
            (Kind::Native, false) => (1 << 24, 4096, 512),
            (_, false) => (1 << 24, 4096, 1024),
            (_, true) => (1 << 22, 1024, 256),
        };
        // GPU: 8 groups of 256 per SM. CPUs: chunks of 64 * WG = 16K elements (on OpenCL a
        // group's chunk stays in cache while its work-items stride through it).
        // SYCL_RS_BENCH_RED_PER_ITEM overrides the CPUs' 64.
        let per_item: usize = std::env::var("SYCL_RS_BENCH_RED_PER_ITEM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64)
            .max(1);
        let red_groups = match kind {
            Kind::Cuda => compute_units.max(1) * 8,
            _ => (vec / per_item).div_ceil(WG).max(1),
        };
        Sizes {
            vec,
            red_groups,
            red_local: if kind == Kind::Native { 1 } else { WG },
            grid,
            mat,
            rows: vec / SOFTMAX_COLS,
            group_local: if kind == Kind::Native { 1 } else { WG },
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// ours <= 1.05x the hand-written time.
    Time,
    /// ours >= 0.8x the hand-written (rayon) throughput.
    Throughput,
    Info,
}

struct Row {
    device: String,
    kernel: &'static str,
    mode: &'static str,
    /// Median times.
    ours: f64,
    hand: f64,
    /// Ours / hand: the median over replicates (see `run_device`) of each one's median of
    /// the rounds' ratios (see `measure`).
    ratio: f64,
    /// Each replicate's ratio, in the order they ran (one, `ratio`, before
    /// `merge_replicates`).
    replicates: Vec<f64>,
    /// Work per launch and its unit, for a rate column.
    work: f64,
    unit: &'static str,
    goal: Goal,
}

impl Row {
    fn verdict(&self) -> &'static str {
        match self.goal {
            Goal::Time if self.ratio <= 1.05 => "PASS",
            Goal::Throughput if 1.0 / self.ratio >= 0.8 => "PASS",
            Goal::Info => "info",
            _ => "MISS",
        }
    }

    /// The replicates' ratios, each through `figure` (the time ratio itself, or what the
    /// summary shows of it).
    fn replicates_text(&self, figure: impl Fn(f64) -> f64) -> String {
        let each: Vec<String> = self
            .replicates
            .iter()
            .map(|&r| format!("{:.3}", figure(r)))
            .collect();
        format!("(replicates {})", each.join(" "))
    }

    fn target(&self) -> &'static str {
        match self.goal {
            Goal::Time => "time <= 1.05x",
            Goal::Throughput => "thru >= 0.8x",
            Goal::Info => "-",
        }
    }
}

fn print_header() {
    let cols = [
        format!("{:<34}", "device"),
        format!("{:<8}", "kernel"),
        format!("{:<9}", "mode"),
        format!("{:>10}", "ours ms"),
        format!("{:>10}", "hand ms"),
        format!("{:>9}", "ours/hand"),
        format!("{:>14}", "ours rate"),
        format!("{:<13}", "target"),
    ];
    println!("{}", cols.join(" "));
}

fn print_row(r: &Row) {
    println!(
        "{:<34} {:<8} {:<9} {:>10.3} {:>10.3} {:>9.3} {:>9.1} {:<4} {:<13} {:<4} {}",
        r.device,
        r.kernel,
        r.mode,
        r.ours * 1e3,
        r.hand * 1e3,
        r.ratio,
        r.work / r.ours / 1e9,
        r.unit,
        r.target(),
        r.verdict(),
        r.replicates_text(|ratio| ratio)
    );
}

/// The rows of `runs` (replicates of one device's run, each the same rows in the same
/// order), each with the medians over replicates of its times and ratio.
fn merge_replicates(runs: &[Vec<Row>]) -> Vec<Row> {
    let len = runs.first().map_or(0, Vec::len);
    (0..len)
        .map(|i| {
            let first = &runs[0][i];
            assert!(
                runs.iter().all(|run| run.len() == len
                    && (run[i].kernel, run[i].mode) == (first.kernel, first.mode)),
                "replicates measured different rows"
            );
            let over = |f: fn(&Row) -> f64| median(runs.iter().map(|run| f(&run[i])).collect());
            let replicates: Vec<f64> = runs
                .iter()
                .flat_map(|run| run[i].replicates.iter().copied())
                .collect();
            Row {
                device: first.device.clone(),
                kernel: first.kernel,
                mode: first.mode,
                ours: over(|r| r.ours),
                hand: over(|r| r.hand),
                ratio: median(replicates.clone()),
                replicates,
                work: first.work,
                unit: first.unit,
                goal: first.goal,
            }
        })
        .collect()
}

// ---------------------------------------------------------------- timing

/// How a device's launches are timed.
#[derive(Clone, Copy)]
enum Clock {
    /// The event's profiling start/end.
    Profiling,
    /// Wall time of `batch` launches and a wait, per launch.
    Wall { batch: usize },
}

/// Seconds of one launch (or per launch of a batch), as measured by one side.
type Side<'a> = Box<dyn FnMut() -> f64 + 'a>;

/// A side that launches device kernels.
fn device_side<'a>(q: &'a Queue, clock: Clock, mut launch: impl FnMut() -> Event + 'a) -> Side<'a> {
    match clock {
        Clock::Profiling => Box::new(move || {
            let e = launch();
            e.wait().expect("the kernel failed");
            let p = e.profiling_info().expect("profiling timestamps");
            p.end_ns.saturating_sub(p.start_ns) as f64 * 1e-9
        }),
        Clock::Wall { batch } => Box::new(move || {
            let t = Instant::now();
            let events: Vec<Event> = (0..batch).map(|_| launch()).collect();
            q.wait().expect("queue wait");
            let s = t.elapsed().as_secs_f64() / batch as f64;
            for e in events {
                e.wait().expect("the kernel failed");
            }
            s
        }),
    }
}

/// A side that runs on the host (rayon), timed like `Clock::Wall`.
fn host_side<'a>(clock: Clock, mut f: impl FnMut() + 'a) -> Side<'a> {
    let batch = match clock {
        Clock::Wall { batch } => batch,
        Clock::Profiling => 1,
    };
    Box::new(move || {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        t.elapsed().as_secs_f64() / batch as f64
    })
}

/// Replicates of a run, each in a context of its own (fresh builds of our kernels and
/// the hand-written ones, fresh allocations); a row's figures are the medians over them. On
/// Intel's CPU runtime a context keeps its own ratio for as long as it lives: the same
/// SPIR-V saxpy beside the same hand-written kernel, in four contexts measured round-robin
/// over the same seconds, read 1.056, 1.053, 1.004 and 1.009 (spec/kernels.md, "Performance
/// notes"). More rounds in one context cannot average that away; more contexts can.
const REPLICATES: usize = 3;

/// The hand-written side's place in every `measure` call (ours checked, ours unchecked, hand,
/// then the control where there is one).
const HAND: usize = 2;

/// What `measure` gives: each side's median time, and its ratio to the hand-written side.
struct Times {
    median: Vec<f64>,
    ratio: Vec<f64>,
}

/// Each side over `reps` rounds, round-robin (the first side rotates). One untimed round
/// first; fewer rounds when a launch is long (about `budget` s, at least 5). A side's ratio
/// is the median over rounds of its time / the hand-written side's time in the same round:
/// a burst of load on this shared host lasts for many rounds and slows every side in them,
/// which moves a ratio of medians (one burst moved saxpy's by 0.7 to 1.2 while the
/// per-round ratios stayed near 1) but not the rounds' ratios. `--samples` prints every
/// round's times.
fn measure(sides: &mut [Side<'_>], reps: usize, budget: f64) -> Times {
    let first: f64 = sides.iter_mut().map(|s| s()).sum();
    let reps = if first > 0.0 {
        reps.min((budget / first) as usize).max(5.min(reps))
    } else {
        reps
    };
    let mut samples = vec![Vec::with_capacity(reps); sides.len()];
    for r in 0..reps {
        for k in 0..sides.len() {
            let i = (r + k) % sides.len();
            samples[i].push(sides[i]());
        }
    }
    if std::env::args().any(|a| a == "--samples") {
        for (i, s) in samples.iter().enumerate() {
            let ms: Vec<String> = s.iter().map(|t| format!("{:.3}", t * 1e3)).collect();
            println!("  side {i} (ms): {}", ms.join(" "));
        }
    }
    let ratio = samples
        .iter()
        .map(|s| median(s.iter().zip(&samples[HAND]).map(|(a, h)| a / h).collect()))
        .collect();
    Times {
        median: samples.into_iter().map(median).collect(),
        ratio,
    }
}

// ---------------------------------------------------------------- checks and data

fn check<T: PartialEq + Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        let bad = (0..got.len()).filter(|&i| got[i] != want[i]).count();
        panic!(
            "{what}: WRONG RESULT: element {i} is {:?}, expected {:?} ({bad} of {} elements differ)",
            got[i],
            want[i],
            got.len()
        );
    }
}

fn upload<T: bytemuck::Pod>(q: &Queue, data: &[T]) -> Usm<T> {
    let m = sycl::malloc_device::<T>(data.len(), q).expect("malloc_device");
    q.write(&m, data).expect("write");
    m
}

/// Host memory of the same kind as the kernels' (for the rayon side).
fn upload_host<T: bytemuck::Pod>(q: &Queue, data: &[T]) -> Usm<T> {
    upload(q, data)
}

fn stencil_ref(src: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; n * n];
    out.par_chunks_mut(n)
        .enumerate()
        .for_each(|(y, row)| stencil_row(src, n, y, row));
    out
}

/// One row of the stencil (the host reference and the rayon side).
#[inline]
fn stencil_row(src: &[f32], n: usize, y: usize, row: &mut [f32]) {
    let s = &src[y * n..(y + 1) * n];
    if y == 0 || y == n - 1 {
        row.copy_from_slice(s);
        return;
    }
    let up = &src[(y - 1) * n..y * n];
    let down = &src[(y + 1) * n..(y + 2) * n];
    row[0] = s[0];
    row[n - 1] = s[n - 1];
    for x in 1..n - 1 {
        row[x] = s[x] * 0.5 + (up[x] + down[x] + s[x - 1] + s[x + 1]) * 0.125;
    }
}

/// Row `i` of A * B (k in order, `mul_add`, like the kernels).
fn matmul_row(a: &[f32], b: &[f32], n: usize, i: usize, row: &mut [f32]) {
    row.fill(0.0);
    for k in 0..n {
        let aik = a[i * n + k];
        for (c, &bv) in row.iter_mut().zip(&b[k * n..(k + 1) * n]) {
            *c = aik.mul_add(bv, *c);
        }
    }
}

/// Rows of C that the check compares (every row would take n^3 host work at 2048).
fn sample_rows(n: usize) -> Vec<usize> {
    let mut rows = vec![
        0,
        1,
        15,
        16,
        17,
        n / 2 - 1,
        n / 2,
        n - 17,
        n - 16,
        n - 2,
        n - 1,
    ];
    rows.extend((0..21).map(|k| (k * 7919 + 13) % n));
    rows.sort_unstable();
    rows.dedup();
    rows
}

fn check_matmul(got: &[f32], a: &[f32], b: &[f32], n: usize, what: &str) {
    let mut want = vec![0.0f32; n];
    for i in sample_rows(n) {
        matmul_row(a, b, n, i, &mut want);
        check(
            &got[i * n..(i + 1) * n],
            &want,
            &format!("{what} (row {i})"),
        );
    }
}

// ---------------------------------------------------------------- the rayon side

fn rayon_saxpy(a: f32, x: &Usm<f32>, y: &mut Usm<f32>) {
    let x = x.as_slice().expect("host borrow");
    let mut y = y.as_mut_slice().expect("host borrow");
    y.par_iter_mut()
        .zip(x.par_iter())
        .for_each(|(y, &x)| *y += a * x);
}

fn rayon_reduce(x: &Usm<u32>) -> u32 {
    let x = x.as_slice().expect("host borrow");
    x.par_iter()
        .fold(|| 0u32, |s, &v| s.wrapping_add(v))
        .reduce(|| 0u32, u32::wrapping_add)
}

/// One row's softmax as the kernel computes it (three passes, f32).
fn softmax_row(x: &[bf16], y: &mut [bf16]) {
    let m = x.iter().fold(-3.0e38f32, |m, v| m.max(v.to_f32()));
    let s: f32 = x.iter().map(|v| (v.to_f32() - m).exp()).sum();
    let r = 1.0 / s;
    for (o, v) in y.iter_mut().zip(x) {
        *o = bf16::from_f32((v.to_f32() - m).exp() * r);
    }
}

fn rayon_softmax(x: &Usm<bf16>, y: &mut Usm<bf16>) {
    let x = x.as_slice().expect("host borrow");
    let mut y = y.as_mut_slice().expect("host borrow");
    y.par_chunks_mut(SOFTMAX_COLS)
        .zip(x.par_chunks(SOFTMAX_COLS))
        .for_each(|(y, x)| softmax_row(x, y));
}

fn histogram_ref(x: &[u32]) -> Vec<u32> {
    let mut h = vec![0u32; 256];
    for w in x {
        for k in 0..4 {
            h[((w >> (8 * k)) & 255) as usize] += 1;
        }
    }
    h
}

fn rayon_histogram(x: &Usm<u32>) -> Vec<u32> {
    let x = x.as_slice().expect("host borrow");
    x.par_chunks(1 << 16).map(histogram_ref).reduce(
        || vec![0u32; 256],
        |mut a, b| {
            a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
            a
        },
    )
}

/// Each of `groups` contiguous chunks of `x` scanned (wrapping), and the chunks' totals.
fn scan_ref(x: &[u32], groups: usize) -> (Vec<u32>, Vec<u32>) {
    let chunk = x.len().div_ceil(groups);
    let mut y = vec![0u32; x.len()];
    let mut sums = vec![0u32; groups];
    for (g, (xc, yc)) in x.chunks(chunk).zip(y.chunks_mut(chunk)).enumerate() {
        sums[g] = scan_chunk(xc, yc);
    }
    (y, sums)
}

/// `y` the inclusive scan of `x`; the total.
fn scan_chunk(x: &[u32], y: &mut [u32]) -> u32 {
    let mut acc = 0u32;
    for (y, &v) in y.iter_mut().zip(x) {
        acc = acc.wrapping_add(v);
        *y = acc;
    }
    acc
}

/// The chunk pass with rayon: the same chunks, one task each.
fn rayon_scan(x: &Usm<u32>, y: &mut Usm<u32>, sums: &mut Usm<u32>, groups: usize) {
    let x = x.as_slice().expect("host borrow");
    let mut y = y.as_mut_slice().expect("host borrow");
    let mut sums = sums.as_mut_slice().expect("host borrow");
    let chunk = x.len().div_ceil(groups);
    y.par_chunks_mut(chunk)
        .zip(x.par_chunks(chunk))
        .zip(sums.par_iter_mut())
        .for_each(|((y, x), s)| *s = scan_chunk(x, y));
}

fn rayon_stencil(src: &Usm<f32>, dst: &mut Usm<f32>, n: usize) {
    let s = src.as_slice().expect("host borrow");
    let mut d = dst.as_mut_slice().expect("host borrow");
    d.par_chunks_mut(n)
        .enumerate()
        .for_each(|(y, row)| stencil_row(&s, n, y, row));
}

fn rayon_matmul(a: &Usm<f32>, b: &Usm<f32>, c: &mut Usm<f32>, n: usize) {
    let a = a.as_slice().expect("host borrow");
    let b = b.as_slice().expect("host borrow");
    let mut c = c.as_mut_slice().expect("host borrow");
    c.par_chunks_mut(n)
        .enumerate()
        .for_each(|(i, row)| matmul_row(&a, &b, n, i, row));
}

// ---------------------------------------------------------------- one device

/// The hand-written side of a device.
enum Hand {
    Rayon,
    Source {
        kernels: Box<HandKernels>,
        /// The same source built a second time, timed as a fourth side: its ratio to the
        /// first build is the resolution of the run (identical code, its own placement).
        control: Box<HandKernels>,
        opencl: bool,
    },
}

/// One build of the hand-written kernels.
struct HandKernels {
    saxpy: Kernel,
    /// OpenCL only (absent from a replacement program is fine).
    saxpy_no_check: Option<Kernel>,
    reduce: Kernel,
    stencil: Kernel,
    matmul: Kernel,
    sgemm: Kernel,
    softmax: Kernel,
    histogram: Kernel,
    scan: Kernel,
}

struct Bench<'a> {
    q: &'a Queue,
    label: String,
    kind: Kind,
    clock: Clock,
    hand: Hand,
    sizes: Sizes,
    reps: usize,
    budget: f64,
}

impl Bench<'_> {
    fn goal(&self, kernel: &str) -> Goal {
        match self.kind {
            Kind::Cuda | Kind::IntelOpenCl => Goal::Time,
            Kind::Native if matches!(kernel, "saxpy" | "reduce" | "softmax" | "scan") => {
                Goal::Throughput
            }
            _ => Goal::Info,
        }
    }

    fn push(
        &self,
        rows: &mut Vec<Row>,
        kernel: &'static str,
        t: &Times,
        work: f64,
        unit: &'static str,
    ) {
        // Sides after the hand-written one are information: its second build (`control`),
        // then saxpy's `no-check` form where there is one.
        let info = ["control", "no-check"]
            .into_iter()
            .enumerate()
            .map(|(i, mode)| (mode, HAND + 1 + i, Goal::Info))
            .filter(|&(_, side, _)| side < t.median.len());
        for (mode, side, goal) in [
            ("checked", 0, self.goal(kernel)),
            ("unchecked", 1, self.goal(kernel)),
        ]
        .into_iter()
        .chain(info)
        {
            let row = Row {
                device: self.label.clone(),
                kernel,
                mode,
                ours: t.median[side],
                hand: t.median[HAND],
                ratio: t.ratio[side],
                replicates: vec![t.ratio[side]],
                work,
                unit,
                goal,
            };
            rows.push(row);
        }
    }

    fn saxpy(&self, rows: &mut Vec<Row>) {
        let q = self.q;
        let n = self.sizes.vec;
        let a = 2.0f32;
        let xs: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        let ys: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| a * x + y).collect();
        let x = upload(q, &xs);
        let y = upload(q, &ys);
        let ours_c = || {
            q.parallel_for(Range::d1(n), &[], saxpy(a, &x, &y))
                .expect("launch saxpy")
        };
        let ours_u = || {
            q.parallel_for(Range::d1(n), &[], saxpy_unchecked(a, &x, &y))
                .expect("launch saxpy_unchecked")
        };
        for (name, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            q.write(&y, &ys).unwrap();
            f().wait().expect("saxpy failed");
            check(
                &q.to_vec(&y).unwrap(),
                &want,
                &format!("{}: saxpy {name}", self.label),
            );
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let xr = upload_host(q, &xs);
                let mut yr = upload_host(q, &ys);
                rayon_saxpy(a, &xr, &mut yr);
                check(
                    &q.to_vec(&yr).unwrap(),
                    &want,
                    &format!("{}: saxpy rayon", self.label),
                );
                let hand = || rayon_saxpy(a, &xr, &mut yr);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, hand),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels, control, ..
            } => {
                let yh = upload(q, &ys);
                let ni = n as i32;
                // The geometry of our plain-range launch (groups of 256 on a GPU, larger on a
                // CPU: `Range::launched_on`).
                let range = Range::d1(n)
                    .launched_on(q.device())
                    .expect("saxpy's launch range");
                let hand_on = |k: &Kernel, y: &Usm<f32>| {
                    let args = [
                        KernelArg::scalar(&a),
                        KernelArg::usm(&x),
                        KernelArg::usm(y),
                        KernelArg::scalar(&ni),
                    ];
                    // SAFETY: saxpy / saxpy_no_check(float, const float*, float*, int): the
                    // arguments match; saxpy touches x and y below n, which both hold, and
                    // saxpy_no_check below the launched range, which is n (`no_check` below).
                    unsafe { q.launch(k, range, &args, &[]) }.expect("launch hand saxpy")
                };
                // One launch on `yh` (from `ys`), checked.
                let check_hand = |k: &Kernel, what: &str| {
                    q.write(&yh, &ys).unwrap();
                    hand_on(k, &yh).wait().expect("hand saxpy failed");
                    check(
                        &q.to_vec(&yh).unwrap(),
                        &want,
                        &format!("{}: saxpy hand-written{what}", self.label),
                    );
                };
                check_hand(&kernels.saxpy, "");
                // Timed on our kernels' `y`: this memory-bound kernel's time depends on which
                // allocation it writes (up to 15% between two on one host), not only on code.
                let hand = || hand_on(&kernels.saxpy, &y);
                let again = || hand_on(&control.saxpy, &y);
                let mut sides = vec![
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, hand),
                    device_side(q, self.clock, again),
                ];
                // The hand-written kernel without its range check, where the launch covers
                // exactly n work-items. On Intel's CPU runtime the `if` form compiles to a
                // masked vector loop and this one to an unmasked loop, the form our kernels'
                // range check takes there (per-group loop bounds): this row tells a reading
                // of ours that the loop form causes on this host from one our code causes
                // (spec/kernels.md, "Performance notes").
                let no_check = kernels
                    .saxpy_no_check
                    .as_ref()
                    .filter(|_| range.global()[0] == n);
                if let Some(k) = no_check {
                    check_hand(k, ", no check");
                    let y = &y;
                    sides.push(device_side(q, self.clock, move || hand_on(k, y)));
                }
                measure(&mut sides, self.reps, self.budget)
            }
        };
        self.push(rows, "saxpy", &t, 12.0 * n as f64, "GB/s");
    }

    fn reduce(&self, rows: &mut Vec<Row>) {
        let q = self.q;
        let n = self.sizes.vec;
        let (groups, local) = (self.sizes.red_groups, self.sizes.red_local);
        let xs: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) >> 7)
            .collect();
        let want = xs.iter().fold(0u32, |s, &v| s.wrapping_add(v));
        let x = upload(q, &xs);
        let out = upload(q, &[0u32]);
        let range = Range::d1(groups * local).with_local([local, 1, 1]);
        let ours_c = || {
            q.parallel_for(range, &[], reduce(&x, &out))
                .expect("launch reduce")
        };
        let ours_u = || {
            q.parallel_for(range, &[], reduce_unchecked(&x, &out))
                .expect("launch reduce_unchecked")
        };
        for (name, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            q.write(&out, &[0]).unwrap();
            f().wait().expect("reduce failed");
            check(
                &q.to_vec(&out).unwrap(),
                &[want],
                &format!("{}: reduce {name}", self.label),
            );
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let xr = upload_host(q, &xs);
                let got = rayon_reduce(&xr);
                check(&[got], &[want], &format!("{}: reduce rayon", self.label));
                let hand = || {
                    std::hint::black_box(rayon_reduce(&xr));
                };
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, hand),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels,
                control,
                opencl,
            } => {
                let outh = upload(q, &[0u32]);
                let ni = n as i32;
                let opencl = *opencl;
                let hand_on = |k: &Kernel, out: &Usm<u32>| {
                    let mut args = vec![
                        KernelArg::usm(&x),
                        KernelArg::scalar(&ni),
                        KernelArg::usm(out),
                    ];
                    if opencl {
                        args.push(KernelArg::local::<u32>(WG).expect("local argument"));
                    }
                    // SAFETY: reduce(const uint*, int, uint*[, __local uint*]): the arguments
                    // match; it reads x below n, adds to out[0], and uses WG local elements.
                    unsafe { q.launch(k, range, &args, &[]) }.expect("launch hand reduce")
                };
                hand_on(&kernels.reduce, &outh)
                    .wait()
                    .expect("hand reduce failed");
                check(
                    &q.to_vec(&outh).unwrap(),
                    &[want],
                    &format!("{}: reduce hand-written", self.label),
                );
                // Timed on our kernels' output word, as saxpy is.
                let hand = || hand_on(&kernels.reduce, &out);
                let again = || hand_on(&control.reduce, &out);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, hand),
                    device_side(q, self.clock, again),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
        };
        self.push(rows, "reduce", &t, 4.0 * n as f64, "GB/s");
    }

    fn softmax(&self, rows: &mut Vec<Row>) {
        let q = self.q;
        let (nrows, local) = (self.sizes.rows, self.sizes.group_local);
        let n = nrows * SOFTMAX_COLS;
        let xs: Vec<bf16> = (0..n as u64)
            .map(|i| {
                let r = ((i.wrapping_mul(2_654_435_761) >> 9) & 0xFFFF) as f32 / 4096.0;
                bf16::from_f32(r - 8.0)
            })
            .collect();
        let mut want = vec![bf16::ZERO; n];
        want.chunks_mut(SOFTMAX_COLS)
            .zip(xs.chunks(SOFTMAX_COLS))
            .for_each(|(y, x)| softmax_row(x, y));
        // Within one bf16 ulp: the devices' exp may differ from the host's by an f32 ulp or two.
        let close = |got: &[bf16], what: &str| {
            let bad = got.iter().zip(&want).position(|(g, w)| {
                (g.to_f32() - w.to_f32()).abs() > w.to_f32().abs() / 128.0 + 1e-30
            });
            if let Some(i) = bad {
                panic!("{what}: element {i} is {}, the host's {}", got[i], want[i]);
            }
        };
        let x = upload(q, &xs);
        let y = upload(q, &vec![bf16::ZERO; n]);
        let cols = SOFTMAX_COLS;
        let range = Range::d1(nrows * local).with_local([local, 1, 1]);
        let ours_c = || {
            q.parallel_for(range, &[], softmax(&x, &y, cols))
                .expect("launch softmax")
        };
        let ours_u = || {
            q.parallel_for(range, &[], softmax_unchecked(&x, &y, cols))
                .expect("launch softmax_unchecked")
        };
        for (name, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            f().wait().expect("softmax failed");
            close(
                &q.to_vec(&y).unwrap(),
                &format!("{}: softmax {name}", self.label),
            );
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let xr = upload_host(q, &xs);
                let mut yr = upload_host(q, &vec![bf16::ZERO; n]);
                rayon_softmax(&xr, &mut yr);
                close(
                    &q.to_vec(&yr).unwrap(),
                    &format!("{}: softmax rayon", self.label),
                );
                let hand = || rayon_softmax(&xr, &mut yr);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, hand),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels,
                control,
                opencl,
            } => {
                let yh = upload(q, &vec![bf16::ZERO; n]);
                let ci = cols as i32;
                let opencl = *opencl;
                let hand_on = |k: &Kernel, y: &Usm<bf16>| {
                    let mut args = vec![
                        KernelArg::usm(&x),
                        KernelArg::usm(y),
                        KernelArg::scalar(&ci),
                    ];
                    if opencl {
                        args.push(KernelArg::local::<f32>(WG).expect("local argument"));
                    }
                    // SAFETY: softmax(const ushort*, ushort*, int[, __local float*]): the
                    // arguments match (bf16 is 16 bits); one group of WG per row of `cols`
                    // elements of x and y, WG local floats.
                    unsafe { q.launch(k, range, &args, &[]) }.expect("launch hand softmax")
                };
                hand_on(&kernels.softmax, &yh)
                    .wait()
                    .expect("hand softmax failed");
                close(
                    &q.to_vec(&yh).unwrap(),
                    &format!("{}: softmax hand-written", self.label),
                );
                let hand = || hand_on(&kernels.softmax, &y);
                let again = || hand_on(&control.softmax, &y);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, hand),
                    device_side(q, self.clock, again),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
        };
        // Bytes moved once (the second and third passes re-read rows from cache).
        self.push(rows, "softmax", &t, 4.0 * n as f64, "GB/s");
    }

    fn histogram(&self, rows: &mut Vec<Row>) {
        let q = self.q;
        let n = self.sizes.vec;
        let local = self.sizes.group_local;
        let groups = self.sizes.red_groups;
        // Skewed: a quarter of the bytes fall in bin 0.
        let xs: Vec<u32> = (0..n as u64)
            .map(|i| ((i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32) & 0xFFFF_FF00)
            .collect();
        let want = histogram_ref(&xs);
        let x = upload(q, &xs);
        let bins = upload(q, &[0u32; 256]);
        let range = Range::d1(groups * local).with_local([local, 1, 1]);
        let ours_c = || {
            q.parallel_for(range, &[], histogram(&x, &bins))
                .expect("launch histogram")
        };
        let ours_u = || {
            q.parallel_for(range, &[], histogram_unchecked(&x, &bins))
                .expect("launch histogram_unchecked")
        };
        for (name, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            q.write(&bins, &[0u32; 256]).unwrap();
            f().wait().expect("histogram failed");
            check(
                &q.to_vec(&bins).unwrap(),
                &want,
                &format!("{}: histogram {name}", self.label),
            );
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let xr = upload_host(q, &xs);
                check(
                    &rayon_histogram(&xr),
                    &want,
                    &format!("{}: histogram rayon", self.label),
                );
                let hand = || {
                    std::hint::black_box(rayon_histogram(&xr));
                };
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, hand),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels, control, ..
            } => {
                let binsh = upload(q, &[0u32; 256]);
                let ni = n as i32;
                let hand_on = |k: &Kernel, b: &Usm<u32>| {
                    let args = [
                        KernelArg::usm(&x),
                        KernelArg::scalar(&ni),
                        KernelArg::usm(b),
                    ];
                    // SAFETY: histogram(const uint*, int, uint*): the arguments match; it reads
                    // x below n and adds to the 256 bins, in groups of WG.
                    unsafe { q.launch(k, range, &args, &[]) }.expect("launch hand histogram")
                };
                hand_on(&kernels.histogram, &binsh)
                    .wait()
                    .expect("hand histogram failed");
                check(
                    &q.to_vec(&binsh).unwrap(),
                    &want,
                    &format!("{}: histogram hand-written", self.label),
                );
                let hand = || hand_on(&kernels.histogram, &bins);
                let again = || hand_on(&control.histogram, &bins);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, hand),
                    device_side(q, self.clock, again),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
        };
        self.push(rows, "histogram", &t, 4.0 * n as f64, "GB/s");
    }

    fn scan(&self, rows: &mut Vec<Row>) {
        let q = self.q;
        let n = self.sizes.vec;
        let local = self.sizes.group_local;
        let groups = self.sizes.red_groups;
        let xs: Vec<u32> = (0..n as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32)
            .collect();
        let (want_y, want_sums) = scan_ref(&xs, groups);
        let x = upload(q, &xs);
        let y = upload(q, &vec![0u32; n]);
        let sums = upload(q, &vec![0u32; groups]);
        let range = Range::d1(groups * local).with_local([local, 1, 1]);
        let ours_c = || {
            q.parallel_for(range, &[], scan(&x, &y, &sums))
                .expect("launch scan")
        };
        let ours_u = || {
            q.parallel_for(range, &[], scan_unchecked(&x, &y, &sums))
                .expect("launch scan_unchecked")
        };
        let verify = |y: &Usm<u32>, sums: &Usm<u32>, name: &str| {
            check(
                &q.to_vec(y).unwrap(),
                &want_y,
                &format!("{}: scan {name}", self.label),
            );
            check(
                &q.to_vec(sums).unwrap(),
                &want_sums,
                &format!("{}: scan {name} (totals)", self.label),
            );
        };
        for (name, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            q.write(&y, &vec![0u32; n]).unwrap();
            f().wait().expect("scan failed");
            verify(&y, &sums, name);
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let xr = upload_host(q, &xs);
                let mut yr = upload_host(q, &vec![0u32; n]);
                let mut sr = upload_host(q, &vec![0u32; groups]);
                rayon_scan(&xr, &mut yr, &mut sr, groups);
                verify(&yr, &sr, "rayon");
                let hand = || rayon_scan(&xr, &mut yr, &mut sr, groups);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, hand),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels, control, ..
            } => {
                let yh = upload(q, &vec![0u32; n]);
                let sh = upload(q, &vec![0u32; groups]);
                let ni = n as i32;
                let hand_on = |k: &Kernel, y: &Usm<u32>, s: &Usm<u32>| {
                    let args = [
                        KernelArg::usm(&x),
                        KernelArg::scalar(&ni),
                        KernelArg::usm(y),
                        KernelArg::usm(s),
                    ];
                    // SAFETY: scan(const uint*, int, uint*, uint*): the arguments match; it
                    // reads x and writes y below n, and one total per group, in groups of WG.
                    unsafe { q.launch(k, range, &args, &[]) }.expect("launch hand scan")
                };
                hand_on(&kernels.scan, &yh, &sh)
                    .wait()
                    .expect("hand scan failed");
                verify(&yh, &sh, "hand-written");
                let hand = || hand_on(&kernels.scan, &y, &sums);
                let again = || hand_on(&control.scan, &y, &sums);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, hand),
                    device_side(q, self.clock, again),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
        };
        // Bytes read and written.
        self.push(rows, "scan", &t, 8.0 * n as f64, "GB/s");
    }

    fn stencil(&self, rows: &mut Vec<Row>) {
        let q = self.q;
        let n = self.sizes.grid;
        let srcs: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 61) as f32).collect();
        let want = stencil_ref(&srcs, n);
        let src = upload(q, &srcs);
        let dst = upload(q, &vec![-1.0f32; n * n]);
        let range = Range::d2(n, n).with_local([TS, TS, 1]);
        let ours_c = || {
            q.parallel_for(range, &[], stencil(&src, &dst))
                .expect("launch stencil")
        };
        let ours_u = || {
            q.parallel_for(range, &[], stencil_unchecked(&src, &dst))
                .expect("launch stencil_unchecked")
        };
        for (name, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            q.fill(&dst, -1.0f32, &[]).unwrap().wait().unwrap();
            f().wait().expect("stencil failed");
            check(
                &q.to_vec(&dst).unwrap(),
                &want,
                &format!("{}: stencil {name}", self.label),
            );
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let sr = upload_host(q, &srcs);
                let mut dr = upload_host(q, &vec![-1.0f32; n * n]);
                rayon_stencil(&sr, &mut dr, n);
                check(
                    &q.to_vec(&dr).unwrap(),
                    &want,
                    &format!("{}: stencil rayon", self.label),
                );
                let hand = || rayon_stencil(&sr, &mut dr, n);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, hand),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels, control, ..
            } => {
                let dh = upload(q, &vec![-1.0f32; n * n]);
                let ni = n as i32;
                let hand_on = |k: &Kernel, dst: &Usm<f32>| {
                    let args = [
                        KernelArg::usm(&src),
                        KernelArg::usm(dst),
                        KernelArg::scalar(&ni),
                        KernelArg::scalar(&ni),
                    ];
                    // Index 0 is the backend's x (the fast dimension).
                    let range = Range::d2(n, n).with_local([TS, TS, 1]);
                    // SAFETY: stencil(const float*, float*, int h, int w): the arguments match;
                    // it reads src and writes dst below h * w, which both hold.
                    unsafe { q.launch(k, range, &args, &[]) }.expect("launch hand stencil")
                };
                hand_on(&kernels.stencil, &dh)
                    .wait()
                    .expect("hand stencil failed");
                check(
                    &q.to_vec(&dh).unwrap(),
                    &want,
                    &format!("{}: stencil hand-written", self.label),
                );
                // Timed on our kernels' output, as saxpy is.
                let hand = || hand_on(&kernels.stencil, &dst);
                let again = || hand_on(&control.stencil, &dst);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, hand),
                    device_side(q, self.clock, again),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
        };
        self.push(rows, "stencil", &t, 8.0 * (n * n) as f64, "GB/s");
    }

    fn matmul(&self, rows: &mut Vec<Row>) {
        let n = self.sizes.mat;
        let range = Range::d2(n, n).with_local([TS, TS, 1]);
        self.product(
            rows,
            "matmul",
            range,
            |q, a, b, c| q.parallel_for(range, &[], matmul(a, b, c)),
            |q, a, b, c| q.parallel_for(range, &[], matmul_unchecked(a, b, c)),
            |k| &k.matmul,
        );
    }

    /// sgemm: the register-tiled kernel (`TM` x `TM` per work-item, from const generics)
    /// beside the same algorithm hand-written (native CPU: the rayon matmul).
    fn sgemm(&self, rows: &mut Vec<Row>) {
        let n = self.sizes.mat;
        assert_eq!(
            n % (16 * TM),
            0,
            "sgemm's matrices are multiples of 16 * TM"
        );
        let range = Range::d2(n / TM, n / TM).with_local([16, 16, 1]);
        self.product(
            rows,
            "sgemm",
            range,
            |q, a, b, c| q.parallel_for(range, &[], sgemm::<TM, TT>(a, b, c)),
            |q, a, b, c| q.parallel_for(range, &[], sgemm_unchecked::<TM, TT>(a, b, c)),
            |k| &k.sgemm,
        );
    }

    /// A square matrix product `name` (C = A * B, n = `Sizes::mat`): our checked and unchecked
    /// kernels (launched by `checked`/`unchecked` over `range`), each checked against the
    /// host first, beside the hand-written kernel `hand` picks (the same range, `int n` last)
    /// or, on the native CPU, the rayon matmul.
    fn product(
        &self,
        rows: &mut Vec<Row>,
        name: &'static str,
        range: Range,
        checked: impl Fn(&Queue, &Usm<f32>, &Usm<f32>, &Usm<f32>) -> sycl::Result<Event>,
        unchecked: impl Fn(&Queue, &Usm<f32>, &Usm<f32>, &Usm<f32>) -> sycl::Result<Event>,
        hand: impl Fn(&HandKernels) -> &Kernel,
    ) {
        let q = self.q;
        let n = self.sizes.mat;
        let avals: Vec<f32> = (0..n * n).map(|i| ((i * 3) % 5) as f32).collect();
        let bvals: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 9) as f32 - 4.0).collect();
        let a = upload(q, &avals);
        let b = upload(q, &bvals);
        let c = upload(q, &vec![-1.0f32; n * n]);
        let ours_c = || checked(q, &a, &b, &c).unwrap_or_else(|e| panic!("launch {name}: {e}"));
        let ours_u = || unchecked(q, &a, &b, &c).unwrap_or_else(|e| panic!("launch {name}: {e}"));
        for (mode, f) in [
            ("checked", &ours_c as &dyn Fn() -> Event),
            ("unchecked", &ours_u),
        ] {
            q.fill(&c, -1.0f32, &[]).unwrap().wait().unwrap();
            f().wait()
                .unwrap_or_else(|e| panic!("{name} {mode} failed: {e}"));
            check_matmul(
                &q.to_vec(&c).unwrap(),
                &avals,
                &bvals,
                n,
                &format!("{}: {name} {mode}", self.label),
            );
        }
        let t = match &self.hand {
            Hand::Rayon => {
                let ar = upload_host(q, &avals);
                let br = upload_host(q, &bvals);
                let mut cr = upload_host(q, &vec![-1.0f32; n * n]);
                rayon_matmul(&ar, &br, &mut cr, n);
                check_matmul(
                    &q.to_vec(&cr).unwrap(),
                    &avals,
                    &bvals,
                    n,
                    &format!("{}: {name} rayon", self.label),
                );
                let rayon = || rayon_matmul(&ar, &br, &mut cr, n);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    host_side(self.clock, rayon),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
            Hand::Source {
                kernels, control, ..
            } => {
                let ch = upload(q, &vec![-1.0f32; n * n]);
                let ni = n as i32;
                let hand_on = |k: &Kernel, c: &Usm<f32>| {
                    let args = [
                        KernelArg::usm(&a),
                        KernelArg::usm(&b),
                        KernelArg::usm(c),
                        KernelArg::scalar(&ni),
                    ];
                    // SAFETY: matmul and sgemm take (const float*, const float*, float*,
                    // int n): the arguments match; over `range` they touch the matrices below
                    // n * n, which they hold.
                    unsafe { q.launch(k, range, &args, &[]) }
                        .unwrap_or_else(|e| panic!("launch hand {name}: {e}"))
                };
                hand_on(hand(kernels), &ch)
                    .wait()
                    .unwrap_or_else(|e| panic!("hand {name} failed: {e}"));
                check_matmul(
                    &q.to_vec(&ch).unwrap(),
                    &avals,
                    &bvals,
                    n,
                    &format!("{}: {name} hand-written", self.label),
                );
                // Timed on our kernels' output, as saxpy is.
                let theirs = || hand_on(hand(kernels), &c);
                let again = || hand_on(hand(control), &c);
                let mut sides = [
                    device_side(q, self.clock, ours_c),
                    device_side(q, self.clock, ours_u),
                    device_side(q, self.clock, theirs),
                    device_side(q, self.clock, again),
                ];
                measure(&mut sides, self.reps, self.budget)
            }
        };
        self.push(rows, name, &t, 2.0 * (n as f64).powi(3), "GF/s");
    }
}

fn hand_kernels(q: &Queue, kind: Kind) -> Hand {
    if kind == Kind::Native {
        return Hand::Rayon;
    }
    let opencl = kind != Kind::Cuda;
    // SYCL_RS_BENCH_HAND_OPENCL / _CUDA: a file to use instead (same kernel names and
    // parameters), for experiments.
    let var = if opencl {
        "SYCL_RS_BENCH_HAND_OPENCL"
    } else {
        "SYCL_RS_BENCH_HAND_CUDA"
    };
    let text = match std::env::var(var).ok().filter(|p| !p.is_empty()) {
        Some(path) => {
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{var}={path}: {e}"))
        }
        None => (if opencl { HAND_OPENCL } else { HAND_CUDA }).to_owned(),
    };
    let source = if opencl {
        Source::OpenClC(&text)
    } else {
        Source::CudaC(&text)
    };
    let build = |source: Source<'_>| {
        let bundle = KernelBundle::build(q.context(), std::slice::from_ref(q.device()), source, "")
            .expect("building the hand-written kernels");
        let k = |name: &str| bundle.kernel(name).expect("hand-written kernel");
        HandKernels {
            saxpy: k("saxpy"),
            saxpy_no_check: bundle.kernel("saxpy_no_check").ok(),
            reduce: k("reduce"),
            stencil: k("stencil"),
            matmul: k("matmul"),
            sgemm: k("sgemm"),
            softmax: k("softmax"),
            histogram: k("histogram"),
            scan: k("scan"),
        }
    };
    // The control differs by a comment, so that no runtime hands back the first program.
    let again = format!("{text}\n// control build\n");
    let control = if opencl {
        Source::OpenClC(&again)
    } else {
        Source::CudaC(&again)
    };
    Hand::Source {
        kernels: Box::new(build(source)),
        control: Box::new(build(control)),
        opencl,
    }
}

/// `ir`: the form our kernels take (OpenCL devices: OpenCL C or SPIR-V, each a context of its
/// own; the hand-written kernels are built in the same context).
fn run_device(
    dev: &Device,
    kind: Kind,
    ir: Option<KernelIr>,
    quick: bool,
    algos: &[&str],
    rows: &mut Vec<Row>,
) {
    let label = match (kind, ir) {
        (Kind::Native, _) => "native CPU".to_owned(),
        (Kind::Cuda, _) => format!("CUDA {}", dev.name().trim()),
        (_, Some(KernelIr::SpirV)) => format!("{} SPIR-V", dev.platform().name().trim()),
        _ => dev.platform().name().trim().to_owned(),
    };
    if !dev.has(Aspect::ExtSyclRsKernels) {
        let backend = match kind {
            Kind::Native => "native_cpu",
            Kind::Cuda => "cuda",
            _ => "opencl",
        };
        skip(backend, &format!("{label}: no aspect ext_sycl_rs_kernels"));
        return;
    }
    let profiling = kind != Kind::Native && dev.has(Aspect::QueueProfiling);
    let props = QueueProperties {
        in_order: true,
        enable_profiling: profiling,
    };
    let clock = if profiling {
        Clock::Profiling
    } else {
        Clock::Wall { batch: 4 }
    };
    let sizes = Sizes::for_device(kind, quick, dev.max_compute_units() as usize);
    let reps = match (kind, quick) {
        (Kind::Cuda, false) => 50,
        (Kind::Cuda, true) => 15,
        (_, false) => 45,
        (_, true) => 5,
    };
    let t = Instant::now();
    let runs: Vec<Vec<Row>> = (0..REPLICATES)
        .map(|_| {
            // A context of its own: fresh builds of every program, fresh allocations.
            let ctx = match ir {
                Some(ir) => Context::with_kernel_ir(std::slice::from_ref(dev), ir),
                None => Context::new(std::slice::from_ref(dev)),
            }
            .expect("a context for the bench");
            let q = Queue::with_context(&ctx, dev, props).expect("queue");
            let bench = Bench {
                q: &q,
                hand: hand_kernels(&q, kind),
                label: label.clone(),
                kind,
                clock,
                sizes,
                reps,
                budget: if quick { 1.0 } else { 8.0 } / REPLICATES as f64,
            };
            let mut run = Vec::new();
            if algos.contains(&"saxpy") {
                bench.saxpy(&mut run);
            }
            if algos.contains(&"reduce") {
                bench.reduce(&mut run);
            }
            if algos.contains(&"stencil") {
                bench.stencil(&mut run);
            }
            if algos.contains(&"matmul") {
                bench.matmul(&mut run);
            }
            if algos.contains(&"sgemm") {
                bench.sgemm(&mut run);
            }
            if algos.contains(&"softmax") {
                bench.softmax(&mut run);
            }
            if algos.contains(&"histogram") {
                bench.histogram(&mut run);
            }
            if algos.contains(&"scan") {
                bench.scan(&mut run);
            }
            run
        })
        .collect();
    for row in merge_replicates(&runs) {
        print_row(&row);
        rows.push(row);
    }
    println!(
        "  ({label}: {sizes:?}, {}, {REPLICATES} replicates, {:.1} s)",
        match clock {
            Clock::Profiling => "event profiling".to_owned(),
            Clock::Wall { batch } => format!("wall time of {batch} launches + wait"),
        },
        t.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------- dump, main

fn dump(dir: &str) {
    use sycl::kernel::__rt::program_source_of as src;
    std::fs::create_dir_all(dir).expect("create the dump directory");
    let d1 = Range::d1(WG).with_local([WG, 1, 1]);
    let d2 = Range::d2(TS, TS).with_local([TS, TS, 1]);
    for (b, ext) in [(KernelIr::CudaC, "cu"), (KernelIr::OpenClC, "cl")] {
        for (name, s) in [
            ("saxpy", src::<saxpy>(b, d1)),
            ("saxpy_unchecked", src::<saxpy_unchecked>(b, d1)),
            ("reduce", src::<reduce>(b, d1)),
            ("reduce_unchecked", src::<reduce_unchecked>(b, d1)),
            ("stencil", src::<stencil>(b, d2)),
            ("stencil_unchecked", src::<stencil_unchecked>(b, d2)),
            ("matmul", src::<matmul>(b, d2)),
            ("matmul_unchecked", src::<matmul_unchecked>(b, d2)),
            ("sgemm", src::<sgemm<TM, TT>>(b, d2)),
            ("sgemm_unchecked", src::<sgemm_unchecked<TM, TT>>(b, d2)),
            ("softmax", src::<softmax>(b, d1)),
            ("softmax_unchecked", src::<softmax_unchecked>(b, d1)),
            ("histogram", src::<histogram>(b, d1)),
            ("histogram_unchecked", src::<histogram_unchecked>(b, d1)),
            ("scan", src::<scan>(b, d1)),
            ("scan_unchecked", src::<scan_unchecked>(b, d1)),
        ] {
            std::fs::write(format!("{dir}/{name}.{ext}"), s.expect("program source"))
                .expect("write");
        }
    }
    std::fs::write(format!("{dir}/hand.cl"), HAND_OPENCL).expect("write");
    std::fs::write(format!("{dir}/hand.cu"), HAND_CUDA).expect("write");
    println!("wrote the generated and hand-written programs to {dir}");
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if let Some(i) = args.iter().position(|a| a == "--dump") {
        dump(args.get(i + 1).map_or("kernels-dump", String::as_str));
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(|x| x.trim().to_owned()).collect());
    let wanted = |k: &str| only.as_ref().map_or(true, |o| o.iter().any(|x| x == k));
    let algos: Vec<&str> = match args.iter().position(|a| a == "--kernels") {
        Some(i) => args
            .get(i + 1)
            .map_or("", String::as_str)
            .split(',')
            .collect(),
        None => vec![
            "saxpy",
            "reduce",
            "stencil",
            "matmul",
            "sgemm",
            "softmax",
            "histogram",
            "scan",
        ],
    };
    println!(
        "#[sycl::kernel] kernels beside hand-written ones{} ({} threads on the host)",
        if quick { ", quick" } else { "" },
        rayon::current_num_threads()
    );
    let t = Instant::now();
    let mut rows = Vec::new();
    print_header();
    if wanted("native") {
        run_device(
            &Device::native_cpu(),
            Kind::Native,
            None,
            quick,
            &algos,
            &mut rows,
        );
    }
    if wanted("opencl")
        || only
            .as_ref()
            .is_some_and(|o| o.iter().any(|x| x != "native" && x != "cuda"))
    {
        let devices: Vec<Device> = Device::all()
            .into_iter()
            .filter(|d| d.backend() == BackendKind::OpenCl)
            .collect();
        if devices.is_empty() {
            skip("opencl", "no OpenCL device");
        }
        for dev in &devices {
            let platform = dev.platform().name().to_lowercase();
            if !wanted("opencl") && !only.iter().flatten().any(|o| platform.contains(o.as_str())) {
                continue;
            }
            let kind = if dev.platform().name().contains("Intel")
                && dev.device_type() == sycl::DeviceType::Cpu
            {
                Kind::IntelOpenCl
            } else {
                Kind::OtherOpenCl
            };
            // OpenCL C, then (where the device takes it) SPIR-V built by sycl-rs, each beside
            // the hand-written kernels.
            run_device(dev, kind, Some(KernelIr::OpenClC), quick, &algos, &mut rows);
            if dev.has(Aspect::ExtOneapiKernelCompilerSpirv) {
                run_device(dev, kind, Some(KernelIr::SpirV), quick, &algos, &mut rows);
            }
        }
    }
    if wanted("cuda") {
        match DeviceSelector::filter("cuda:0").and_then(|s| s.select()) {
            Ok(dev) => run_device(&dev, Kind::Cuda, None, quick, &algos, &mut rows),
            Err(_) => skip("cuda", "no CUDA device"),
        }
    }
    let count = |v: &str| rows.iter().filter(|r| r.verdict() == v).count();
    println!(
        "--- targets ({:.1} s): {} PASS, {} MISS, {} info",
        t.elapsed().as_secs_f64(),
        count("PASS"),
        count("MISS"),
        count("info")
    );
    for r in rows.iter().filter(|r| r.goal != Goal::Info) {
        let (figure, replicates) = match r.goal {
            Goal::Throughput => (
                format!("ours/rayon throughput {:.3}", 1.0 / r.ratio),
                r.replicates_text(|ratio| 1.0 / ratio),
            ),
            _ => (
                format!("ours/hand time {:.3}", r.ratio),
                r.replicates_text(|ratio| ratio),
            ),
        };
        println!(
            "{} {} {} {}: {figure} ({}) {}",
            r.verdict(),
            r.device,
            r.kernel,
            r.mode,
            r.target(),
            replicates
        );
    }
}
