#[sycl::kernel_fn]
fn fails_in_helper(x: u32) -> u32 {
    if x == 0 {
        kernel_fail(Failure::TimedOut);
    }
    x
}

#[sycl::kernel]
fn unknown_failure(out: &mut [u32]) {
    kernel_fail(Failure::Exploded);
    out[0] = 1;
}

#[sycl::kernel]
fn failure_as_value(out: &mut [u32]) {
    out[0] = kernel_fail(Failure::Mismatched);
}

#[sycl::kernel]
fn no_reason(out: &mut [u32]) {
    kernel_fail();
    out[0] = 1;
}

fn main() {}
