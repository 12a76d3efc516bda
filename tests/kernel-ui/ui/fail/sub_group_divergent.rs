#[sycl::kernel]
fn in_if(y: &mut [f32]) {
    let i = global_id(0);
    if i % 2 == 0 {
        let s = sub_group_shuffle(y[i], 1);
        y[i] = s;
    }
}

#[sycl::kernel]
fn in_expression(y: &mut [f32]) {
    let i = global_id(0);
    y[i] = sub_group_shift_left(y[i], 1) * 2.0;
}

#[sycl::kernel]
fn broadcast_from_varying_lane(y: &mut [f32]) {
    let i = global_id(0);
    let v = y[i];
    let s = sub_group_broadcast(v, i % 4);
    y[i] = s;
}

#[sycl::kernel]
fn in_data_dependent_loop(n: &[u32], y: &mut [f32]) {
    let i = global_id(0);
    for k in 0..n[i] {
        let s = sub_group_sum(y[i]);
        y[i] = s + k as f32;
    }
}

fn main() {}
