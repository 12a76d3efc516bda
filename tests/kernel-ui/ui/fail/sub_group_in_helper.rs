#[sycl::kernel_fn]
fn lane_sum(v: f32) -> f32 {
    sub_group_sum(v)
}

#[sycl::kernel_fn]
fn my_lane(v: u32) -> u32 {
    v + sub_group_local_id() as u32
}

fn main() {}
