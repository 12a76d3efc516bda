#[sycl::kernel]
fn load_release(flag: &[u32], out: &mut [u32]) {
    out[0] = atomic_load(flag, 0, Ordering::Release, MemoryScope::System);
}

#[sycl::kernel]
fn store_as_value(flag: &mut [u32], out: &mut [u32]) {
    out[0] = atomic_store(flag, 0, 1u32);
}

#[sycl::kernel]
fn relaxed_fence(out: &mut [u32]) {
    atomic_fence(Ordering::Relaxed, MemoryScope::Device);
    out[0] = 1;
}

#[sycl::kernel]
fn order_not_constant(out: &mut [u32], o: u32) {
    atomic_fetch_add(out, 0, 1u32, o, MemoryScope::Device);
}

#[sycl::kernel]
fn scope_misspelt(out: &mut [u32]) {
    atomic_fetch_or(out, 0, 1u32, Ordering::AcqRel, MemoryScope::Gpu);
}

#[sycl::kernel]
fn xor_on_floats(out: &mut [f32]) {
    atomic_fetch_xor(out, 0, 1.0f32);
}

fn main() {}
