// `#[sycl::kernel]`'s one argument, `reqd_work_group_size`: one to three sizes of at least 1,
// given once; nothing else.
#[sycl::kernel(reqd_work_group_size(0))]
fn zero(y: &mut [f32]) {
    y[0] = 1.0;
}

#[sycl::kernel(reqd_work_group_size(8, 8, 8, 8))]
fn four(y: &mut [f32]) {
    y[0] = 1.0;
}

#[sycl::kernel(reqd_work_group_size(8), reqd_work_group_size(8))]
fn twice(y: &mut [f32]) {
    y[0] = 1.0;
}

#[sycl::kernel(work_group_size = 8)]
fn unknown(y: &mut [f32]) {
    y[0] = 1.0;
}

#[sycl::kernel(reqd_work_group_size(n))]
fn not_a_literal(y: &mut [f32]) {
    y[0] = 1.0;
}

fn main() {}
