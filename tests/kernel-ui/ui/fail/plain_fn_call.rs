fn twice(v: f32) -> f32 {
    v * 2.0
}

#[sycl::kernel]
fn k(y: &mut [f32]) {
    let i = global_id(0);
    let v: f32 = twice(y[i]);
    y[i] = v;
}
fn main() {}
