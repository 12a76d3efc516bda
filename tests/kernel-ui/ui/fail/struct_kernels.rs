// Structs in kernels: what is refused, each at its span.

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct P {
    pos: [f32; 3],
    mass: f32,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct NotDerived {
    a: f32,
}

#[sycl::kernel]
fn no_such_field(p: &mut [P]) {
    let i = sycl::kernel::global_id(0);
    p[i].charge = 1.0;
}

#[sycl::kernel]
fn whole_struct_as_value(p: &[P], out: &mut [f32]) {
    let i = sycl::kernel::global_id(0);
    out[i] = p[i];
}

#[sycl::kernel]
fn array_field_unindexed(p: &[P], out: &mut [f32]) {
    let i = sycl::kernel::global_id(0);
    out[i] = p[i].pos;
}

#[sycl::kernel]
fn write_read_only(p: &[P]) {
    let i = sycl::kernel::global_id(0);
    p[i].mass = 2.0;
}

#[sycl::kernel]
fn write_by_value(p: P, out: &mut [f32]) {
    p.mass = 2.0;
    out[0] = p.mass;
}

#[sycl::kernel]
fn literal_missing_field(p: &mut [P]) {
    let i = sycl::kernel::global_id(0);
    p[i] = P { mass: 1.0 };
}

#[sycl::kernel]
fn field_type(p: &mut [P]) {
    let i = sycl::kernel::global_id(0);
    p[i].mass = 1u32;
}

#[sycl::kernel_fn]
fn helper_takes_struct(p: &[P]) -> f32 {
    p[0].mass
}

#[sycl::kernel]
fn not_derived(p: &[NotDerived], out: &mut [f32]) {
    out[0] = p[0].a;
}

#[sycl::kernel]
fn array_element_field(v: &mut [[f32; 4]]) {
    let i = sycl::kernel::global_id(0);
    v[i].x = 1.0;
}

#[sycl::kernel]
fn array_element_length(v: &mut [[f32; 4]]) {
    let i = sycl::kernel::global_id(0);
    v[i] = [1.0, 2.0];
}

fn main() {}
