use sycl::half::{bf16, f16};

#[sycl::kernel]
fn as_cast(x: &[f16], out: &mut [f32]) {
    out[0] = x[0] as f32;
}

#[sycl::kernel]
fn from_f64(x: &[f64], out: &mut [f16]) {
    out[0] = f16::from_f64(x[0]);
}

#[sycl::kernel]
fn reduce_halves(x: &[bf16], out: &mut [f32]) {
    let s = group_sum(x[global_id(0)]);
    out[0] = s.to_f32();
}

#[sycl::kernel]
fn to_f32_of_f32(x: &[f32], out: &mut [f32]) {
    out[0] = x[0].to_f32();
}

fn main() {}
