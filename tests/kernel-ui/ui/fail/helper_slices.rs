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

#[sycl::kernel]
fn array_not_mut(y: &mut [f32]) {
    let acc = [0.0f32; 4];
    let v = two(&mut acc, y);
    y[1] = v;
}

#[sycl::kernel]
fn array_twice(y: &mut [f32]) {
    let mut acc = [0.0f32; 4];
    let v = two(&mut acc, &acc);
    y[1] = v;
}

#[sycl::kernel]
fn array_read_only_to_mut(y: &mut [f32]) {
    let acc = [0.0f32; 4];
    let v = two(&acc, y);
    y[1] = v;
}

fn main() {}
