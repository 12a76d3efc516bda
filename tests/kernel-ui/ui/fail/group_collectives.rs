#![allow(unused_imports)]
use sycl::half::f16;

#[sycl::kernel]
fn bitwise_on_floats(y: &mut [f32]) {
    let i = global_id(0);
    let s = group_bit_xor(y[i]);
    y[i] = s;
}

#[sycl::kernel]
fn vote_takes_bool(y: &mut [u32]) {
    let i = global_id(0);
    let s = group_any(y[i]);
    y[i] = if s { 1 } else { 0 };
}

#[sycl::kernel]
fn scan_of_halves(y: &mut [f16]) {
    let i = global_id(0);
    let s = group_inclusive_sum(y[i]);
    y[i] = s;
}

#[sycl::kernel]
fn broadcast_id_varies(y: &mut [f32]) {
    let i = global_id(0);
    let s = group_broadcast(y[i], local_id(0));
    y[i] = s;
}

#[sycl::kernel]
fn broadcast_needs_id(y: &mut [f32]) {
    let i = global_id(0);
    let s = group_broadcast(y[i]);
    y[i] = s;
}

#[sycl::kernel]
fn sub_group_vote_takes_bool(y: &mut [u32]) {
    let i = global_id(0);
    let s = sub_group_all(y[i]);
    y[i] = if s { 1 } else { 0 };
}

#[sycl::kernel]
fn scan_stands_alone(y: &mut [f32]) {
    let i = global_id(0);
    let s = group_exclusive_sum(y[i]) + 1.0;
    y[i] = s;
}

#[sycl::kernel]
fn sub_group_numbers_for_bitwise(y: &mut [f64]) {
    let i = global_id(0);
    let s = sub_group_inclusive_bit_or(y[i]);
    y[i] = s;
}

fn main() {}
