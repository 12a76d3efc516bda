//! An n-body step over a slice of `Particle` structs, one `#[sycl::kernel]`: each work-item
//! sums the gravity of every body on its own (softened, `G = 1`) and moves it one step. A
//! group copies a tile of bodies (positions and masses) into local memory once and every
//! work-item of the group reads it from there. `Particle` and the by-value `Step` are
//! `#[derive(sycl::KernelType)]` structs; the kernel copies one whole (`let me = bodies[i];`),
//! reads fields (`bodies[j].pos[0]`) and writes one whole (`out[i] = me;`). Two steps are
//! checked against the same arithmetic on the host.
//!
//! ```text
//! cargo run --release --example nbody
//! ONEAPI_DEVICE_SELECTOR=opencl:0 cargo run --release --example nbody
//! ```

use std::process::ExitCode;
use std::time::Instant;

use sycl::{Device, Queue, Range};

/// A body: 32 bytes, as `repr(C)` lays it out (the derive checks it against the compiler).
#[derive(Clone, Copy, Debug, PartialEq, sycl::KernelType)]
#[repr(C)]
struct Particle {
    pos: [f32; 3],
    mass: f32,
    vel: [f32; 3],
    /// Kept as it is (a tag the host set).
    tag: u32,
}

/// One step's constants, passed by value.
#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Step {
    dt: f32,
    /// Added to every squared distance, so that close encounters stay finite.
    softening: f32,
}

/// Work-items per group, and bodies per local tile.
const GROUP: usize = 128;

#[sycl::kernel]
fn nbody_step(bodies: &[Particle], out: &mut [Particle], step: Step) {
    // x, y, z, mass of the group's current tile of bodies.
    let tile = local_array::<f32, { 4 * 128 }>();
    let i = global_id(0);
    let l = local_id(0);
    let group = local_range(0);
    let n = bodies.len();
    let mut me = bodies[i];
    let mut acc = [0.0f32; 3];
    for base in (0..n).step_by(group) {
        let j = base + l;
        tile[4 * l] = bodies[j].pos[0];
        tile[4 * l + 1] = bodies[j].pos[1];
        tile[4 * l + 2] = bodies[j].pos[2];
        tile[4 * l + 3] = bodies[j].mass;
        barrier();
        for t in 0..group {
            let dx = tile[4 * t] - me.pos[0];
            let dy = tile[4 * t + 1] - me.pos[1];
            let dz = tile[4 * t + 2] - me.pos[2];
            let inv = (dx * dx + dy * dy + dz * dz + step.softening)
                .sqrt()
                .recip();
            let f = tile[4 * t + 3] * inv * inv * inv;
            acc[0] += dx * f;
            acc[1] += dy * f;
            acc[2] += dz * f;
        }
        barrier();
    }
    for k in 0..3 {
        me.vel[k] += acc[k] * step.dt;
        me.pos[k] += me.vel[k] * step.dt;
    }
    out[i] = me;
}

/// The same step on the host, in the same order (indexed as the kernel is).
#[allow(clippy::needless_range_loop)]
fn host_step(bodies: &[Particle], step: Step) -> Vec<Particle> {
    bodies
        .iter()
        .map(|me| {
            let mut acc = [0.0f32; 3];
            for b in bodies {
                let dx = b.pos[0] - me.pos[0];
                let dy = b.pos[1] - me.pos[1];
                let dz = b.pos[2] - me.pos[2];
                let inv = (dx * dx + dy * dy + dz * dz + step.softening)
                    .sqrt()
                    .recip();
                let f = b.mass * inv * inv * inv;
                acc[0] += dx * f;
                acc[1] += dy * f;
                acc[2] += dz * f;
            }
            let mut me = *me;
            for k in 0..3 {
                me.vel[k] += acc[k] * step.dt;
                me.pos[k] += me.vel[k] * step.dt;
            }
            me
        })
        .collect()
}

/// Bodies on a jittered shell, at rest, of slightly different masses.
fn bodies(n: usize) -> Vec<Particle> {
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .map(|i| Particle {
            pos: [next() * 2.0 - 1.0, next() * 2.0 - 1.0, next() * 2.0 - 1.0],
            mass: 0.5 + next() / n as f32,
            vel: [0.0; 3],
            tag: i as u32,
        })
        .collect()
}

/// Whether `got` is `want` up to the devices' square roots and fused multiply-adds.
fn close(got: &Particle, want: &Particle) -> bool {
    let near = |a: f32, b: f32| (a - b).abs() <= 1e-3 * (1.0 + b.abs());
    got.tag == want.tag
        && got.mass == want.mass
        && (0..3).all(|k| near(got.pos[k], want.pos[k]) && near(got.vel[k], want.vel[k]))
}

fn run() -> sycl::Result<()> {
    let device = Device::default_device()?;
    let q = Queue::in_order(&device)?;
    println!("nbody on {} ({})", device.name(), device.backend());
    let n = if device.is_gpu() { 32 * 1024 } else { 4096 };
    let step = Step {
        dt: 1e-3,
        softening: 1e-2,
    };
    let host = bodies(n);
    let a = sycl::malloc_device::<Particle>(n, &q)?;
    let b = sycl::malloc_device::<Particle>(n, &q)?;
    q.write(&a, &host)?;
    let range = Range::d1(n).with_local([GROUP, 1, 1]);
    // Two steps, checked: a -> b -> a.
    q.parallel_for(range, &[], nbody_step(&a, &b, step))?;
    q.parallel_for(range, &[], nbody_step(&b, &a, step))?
        .wait()?;
    let want = host_step(&host_step(&host, step), step);
    let got = q.to_vec(&a)?;
    if let Some(i) = (0..n).find(|&i| !close(&got[i], &want[i])) {
        return Err(sycl::Error::new(
            sycl::Errc::Runtime,
            format!("body {i} is {:?}, the host has {:?}", got[i], want[i]),
        ));
    }
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        q.parallel_for(range, &[], nbody_step(&a, &b, step))?
            .wait()?;
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "nbody: {n} bodies, one step in {:.2} ms ({:.1} G interactions/s); two steps verified",
        best * 1e3,
        (n * n) as f64 / best / 1e9
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nbody: {e}");
            ExitCode::FAILURE
        }
    }
}
