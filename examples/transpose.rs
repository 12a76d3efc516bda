//! Matrix transpose through a 2-D local tile, one generic `#[sycl::kernel]` for every element
//! type (`T: sycl::Scalar`): a 32 x 32 group reads a tile along rows (consecutive work-items,
//! consecutive addresses), and writes it transposed along rows of the output, reading the
//! tile down its columns (the tile's rows are padded to 33 so that the column reads of
//! neighbouring work-items fall in different local-memory banks). Run for `f32`, `u64` and
//! `bf16` matrices whose sides are not multiples of the tile; each must equal the host's
//! transpose exactly.
//!
//! ```text
//! cargo run --release --example transpose
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example transpose
//! ```

use std::fmt::Debug;
use std::process::ExitCode;
use std::time::Instant;

use sycl::half::bf16;
use sycl::{Device, Queue, Range};

/// The tile's side.
const TILE: usize = 32;

/// `y` (cols x rows) = transpose of `x` (rows x cols), both row-major.
#[sycl::kernel]
fn transpose<T: sycl::Scalar>(x: &[T], y: &mut [T], rows: usize, cols: usize) {
    let tile = local_array::<T, { 32 * 33 }>();
    let ty = local_id(0);
    let tx = local_id(1);
    let r = group_id(0) * 32 + ty;
    let c = group_id(1) * 32 + tx;
    if r < rows && c < cols {
        tile[ty * 33 + tx] = x[r * cols + c];
    }
    barrier();
    // The same tile, transposed: this work-item writes y[c'][r'] for the tile's column ty.
    let r2 = group_id(1) * 32 + ty;
    let c2 = group_id(0) * 32 + tx;
    if r2 < cols && c2 < rows {
        y[r2 * rows + c2] = tile[tx * 33 + ty];
    }
}

/// Transposes a rows x cols matrix of `T` made by `make`, checks it, and prints the time.
fn check<T: sycl::Scalar + PartialEq + Debug>(
    q: &Queue,
    rows: usize,
    cols: usize,
    make: impl Fn(usize) -> T,
) -> sycl::Result<()> {
    let host: Vec<T> = (0..rows * cols).map(make).collect();
    let x = sycl::malloc_device::<T>(rows * cols, q)?;
    let y = sycl::malloc_device::<T>(rows * cols, q)?;
    q.write(&x, &host)?;
    let up = |v: usize| v.div_ceil(TILE) * TILE;
    let range = Range::d2(up(rows), up(cols)).with_local([TILE, TILE, 1]);
    let mut times = Vec::new();
    for _ in 0..4 {
        let start = Instant::now();
        q.parallel_for(range, &[], transpose(&x, &y, rows, cols))?
            .wait()?;
        times.push(start.elapsed());
    }
    let got = q.to_vec(&y)?;
    for r in 0..rows {
        for c in 0..cols {
            if got[c * rows + r] != host[r * cols + c] {
                return Err(sycl::Error::new(
                    sycl::Errc::Runtime,
                    format!(
                        "{}: y[{c}][{r}] is {:?}, x[{r}][{c}] is {:?}",
                        std::any::type_name::<T>(),
                        got[c * rows + r],
                        host[r * cols + c]
                    ),
                ));
            }
        }
    }
    let best = times[1..].iter().min().expect("timed");
    let gbs = (2 * rows * cols * std::mem::size_of::<T>()) as f64 / best.as_secs_f64() / 1e9;
    println!(
        "transpose<{}>: {rows} x {cols} in {best:.2?} ({gbs:.1} GB/s read and written); verified",
        std::any::type_name::<T>()
    );
    Ok(())
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("transpose on {} ({})", device.name(), device.backend());
    // The group is 32 x 32 work-items.
    if device.max_work_group_size() < TILE * TILE {
        println!(
            "transpose: {} allows groups of {} work-items, fewer than {}: skipped",
            device.name(),
            device.max_work_group_size(),
            TILE * TILE
        );
        return Ok(());
    }
    let (rows, cols) = if device.is_gpu() {
        (4099, 8191)
    } else {
        (1027, 2050)
    };
    check(&q, rows, cols, |i| i as f32 * 0.5)?;
    check(&q, rows, cols, |i| (i as u64) * 0x9E37_79B9)?;
    check(&q, rows, cols, |i| bf16::from_f32((i % 4096) as f32))?;
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("transpose: {e}");
            ExitCode::FAILURE
        }
    }
}
