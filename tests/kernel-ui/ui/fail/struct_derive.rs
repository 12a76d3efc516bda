// What `#[derive(sycl::KernelType)]` refuses: each at its span, with what to write instead.

#[derive(Clone, Copy, sycl::KernelType)]
struct NotReprC {
    a: f32,
}

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Padded {
    a: f32,
    b: f64,
}

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct TailPadded {
    a: f64,
    b: u32,
}

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Flags {
    on: bool,
}

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Index {
    at: usize,
}

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Tuple(f32, f32);

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct Generic<T: Copy> {
    a: T,
}

#[derive(Clone, Copy, sycl::KernelType)]
#[repr(C)]
struct LongArray {
    a: [f32; 1000],
}

// `f32` here is not the float: the derive checks the types, not only their names.
mod shadowed {
    #[allow(non_camel_case_types)]
    type f32 = char;

    #[derive(Clone, Copy, sycl::KernelType)]
    #[repr(C)]
    struct Aliased {
        a: f32,
    }
}

fn main() {}
