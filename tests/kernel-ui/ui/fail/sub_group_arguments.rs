#[sycl::kernel]
fn one_argument(y: &mut [f32]) {
    let i = global_id(0);
    let s = sub_group_shuffle(y[i]);
    y[i] = s;
}

#[sycl::kernel]
fn reduction_takes_one(y: &mut [f32]) {
    let i = global_id(0);
    let s = sub_group_sum(y[i], 2);
    y[i] = s;
}

#[sycl::kernel]
fn lane_is_usize(y: &mut [f32]) {
    let i = global_id(0);
    let s = sub_group_shuffle(y[i], 3i32);
    y[i] = s;
}

#[sycl::kernel]
fn numbers_only(y: &mut [f32]) {
    let i = global_id(0);
    let s = sub_group_broadcast(y[i] > 0.0, 0);
    y[i] = 0.0;
}

#[sycl::kernel]
fn query_takes_nothing(y: &mut [u64]) {
    let i = global_id(0);
    y[i] = sub_group_local_id(0) as u64;
}

fn main() {}
