use sycl::half::f16;

/// Group reductions refuse halves: `reduce::<f16>` is left out.
#[sycl::kernel]
fn reduce<T: sycl::Float>(x: &[T], out: &mut [T]) {
    let i = global_id(0);
    let s = group_sum(x[i]);
    out[i] = s;
}

fn main() {
    let q = sycl::Queue::in_order(&sycl::Device::native_cpu()).unwrap();
    let x = sycl::malloc_device::<f16>(4, &q).unwrap();
    let _ = reduce(&x, &x);
}
