//! Heat diffusion on a `rows` x `cols` grid: Jacobi steps of the 5-point stencil, with one
//! `#[sycl::kernel]`. Each 16 x 16 work-group loads an 18 x 18 tile of the grid (its cells
//! and a one-cell halo around them) into work-group local memory, waits at a barrier, and
//! computes its cells from the tile. The grid's border cells are fixed (Dirichlet boundary);
//! the grid need not be a multiple of the tile (work-items past its edge only help load).
//!
//! Every device computes `((up + down) + (left + right)) * 0.25` in this order, without
//! contraction (spec/kernels.md), as the host does: the result must equal the host's bit for
//! bit after every step.
//!
//! ```text
//! cargo run --release --example stencil2d
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example stencil2d
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range};

/// Tile side: work-groups are TS x TS; the kernel's local array is (TS + 2) x (TS + 2).
const TS: usize = 16;

#[sycl::kernel]
fn jacobi_step(src: &[f32], dst: &mut [f32], rows: usize, cols: usize) {
    // tile[(1 + i) * 18 + (1 + j)] is cell (row0 + i, col0 + j); rows and columns -1 and 16
    // are the halo.
    let tile = local_array::<f32, { (16 + 2) * (16 + 2) }>();
    let r = global_id(0);
    let c = global_id(1);
    let row0 = group_id(0) * 16;
    let col0 = group_id(1) * 16;
    // The 256 work-items load the 324 tile cells: cell t by work-item t % 256. Cells outside
    // the grid read as 0 (they are only ever used by border cells, which keep their value).
    let l = local_id(0) * 16 + local_id(1);
    for k in 0..2 {
        let t = l + k * 256;
        if t < 18 * 18 {
            // Grid coordinates plus one, so that the halo's -1 is 0 (no wrap-around).
            let gr1 = row0 + t / 18;
            let gc1 = col0 + t % 18;
            tile[t] = if gr1 >= 1 && gr1 <= rows && gc1 >= 1 && gc1 <= cols {
                src[(gr1 - 1) * cols + (gc1 - 1)]
            } else {
                0.0
            };
        }
    }
    barrier();
    if r < rows && c < cols {
        let at = (local_id(0) + 1) * 18 + (local_id(1) + 1);
        // Border cells keep their value.
        let mut v = tile[at];
        if r > 0 && c > 0 && r < rows - 1 && c < cols - 1 {
            let up = tile[at - 18];
            let down = tile[at + 18];
            let left = tile[at - 1];
            let right = tile[at + 1];
            v = ((up + down) + (left + right)) * 0.25;
        }
        dst[r * cols + c] = v;
    }
}

/// The same step on the host.
fn host_step(src: &[f32], dst: &mut [f32], rows: usize, cols: usize) {
    for r in 0..rows {
        for c in 0..cols {
            let i = r * cols + c;
            dst[i] = if r == 0 || c == 0 || r == rows - 1 || c == cols - 1 {
                src[i]
            } else {
                ((src[i - cols] + src[i + cols]) + (src[i - 1] + src[i + 1])) * 0.25
            };
        }
    }
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("stencil2d on {} ({})", device.name(), device.backend());
    // Not multiples of 16: the last row and column of work-groups stick out of the grid.
    // Smaller in debug builds, where the native CPU device and the host check run unoptimised.
    let (rows, cols, steps) = if cfg!(debug_assertions) {
        (250, 300, 10)
    } else {
        (1000, 1500, 40)
    };
    // A hot top edge (100) over a cold grid with some texture.
    let init: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            if r == 0 {
                100.0
            } else {
                ((r * 7 + c * 13) % 32) as f32
            }
        })
        .collect();
    let a = sycl::malloc_device::<f32>(rows * cols, &q)?;
    let b = sycl::malloc_device::<f32>(rows * cols, &q)?;
    q.write(&a, &init)?;
    let range = Range::d2(rows.div_ceil(TS) * TS, cols.div_ceil(TS) * TS).with_local([TS, TS, 1]);

    // Step 1 alone (on a GPU the first launch builds the program), then the others.
    let start = Instant::now();
    q.parallel_for(range, &[], jacobi_step(&a, &b, rows, cols))?
        .wait()?;
    let first = start.elapsed();
    let start = Instant::now();
    for s in 1..steps {
        let (src, dst) = if s % 2 == 0 { (&a, &b) } else { (&b, &a) };
        q.parallel_for(range, &[], jacobi_step(src, dst, rows, cols))?;
    }
    q.wait()?;
    let rest = start.elapsed();
    let got = q.to_vec(if steps % 2 == 0 { &a } else { &b })?;

    let (mut h0, mut h1) = (init, vec![0.0f32; rows * cols]);
    for _ in 0..steps {
        host_step(&h0, &mut h1, rows, cols);
        std::mem::swap(&mut h0, &mut h1);
    }
    if let Some(i) = (0..rows * cols).find(|&i| got[i].to_bits() != h0[i].to_bits()) {
        return Err(sycl::Error::new(
            sycl::Errc::Runtime,
            format!(
                "after {steps} steps cell ({}, {}) is {}, expected {}",
                i / cols,
                i % cols,
                got[i],
                h0[i]
            ),
        ));
    }
    let per_step = rest / (steps as u32 - 1);
    let mcells = (rows * cols) as f64 / per_step.as_secs_f64() / 1e6;
    println!(
        "stencil2d: {rows} x {cols} grid, {steps} steps, tiles {TS} x {TS} + halo: first step {first:.2?} (with the build), then {per_step:.2?} a step ({mcells:.0} Mcells/s); equal to the host's bit for bit: verified"
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stencil2d: {e}");
            ExitCode::FAILURE
        }
    }
}
