#[sycl::kernel_fn]
fn two(a: &mut [f32], b: &[f32]) -> f32 {
    a[0] = b[0];
    a[0]
}

#[sycl::kernel]
fn written_twice(y: &mut [f32]) {
    let v = two(y, y);
    y[1] = v;
}

#[sycl::kernel]
fn read_only_as_mut(x: &[f32], y: &mut [f32]) {
    let v = two(&mut x, y);
    y[1] = v;
}

fn main() {}
