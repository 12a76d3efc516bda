#[sycl::kernel]
fn atomic_on_private(y: &mut [u32]) {
    let mut a = [0u32; 4];
    let old = sycl::kernel::atomic_fetch_add(a, 0, 1u32);
    y[0] = old;
}

#[sycl::kernel]
fn array_of_bool(y: &mut [u32]) {
    let a = [true; 4];
    y[0] = if a[1] { 1 } else { 0 };
}

#[sycl::kernel]
fn write_immutable(y: &mut [u32]) {
    let a = [0u32; 4];
    a[1] = 2;
    y[0] = a[1];
}

#[sycl::kernel]
fn too_long(y: &mut [u32]) {
    let a = [0u32; 5000];
    y[0] = a[1];
}

#[sycl::kernel]
fn list_literal(y: &mut [u32]) {
    let a = [1u32, 2.5, 3];
    y[0] = a[1] + [4u32, 5][0];
}

#[sycl::kernel]
fn annotation_differs(y: &mut [u32]) {
    let a: [u32; 3] = [0u32; 4];
    y[0] = a[1];
}

#[sycl::kernel]
fn array_as_value(y: &mut [u32]) {
    let a = [0u32; 4];
    let b = a;
    y[0] = b[1];
}

#[sycl::kernel]
fn usize_slice(y: &mut [usize]) {
    y[0] = 1;
}

fn main() {}
