// Index bounds the macro derived (sycl-macros/src/bounds.rs) from the work-group size: u64
// arithmetic saturating at the maximum, which then means "anything" (a wrap is possible).
// Shared by both dialects: each prelude defines SYCL_BOUND_FN and SYCL_U64C first.
#define SYCL_U64MAX (~SYCL_U64C(0))
SYCL_BOUND_FN sycl_u64 sycl_badd(sycl_u64 a, sycl_u64 b) { return a > SYCL_U64MAX - b ? SYCL_U64MAX : a + b; }
// (Products of values below 2^32 cannot overflow: no division at run time, and all of it
// folds where the operands are constants; OpenCL's `mul_hi` did not fold on Intel's CPU runtime.)
SYCL_BOUND_FN sycl_u64 sycl_bmul(sycl_u64 a, sycl_u64 b) { return ((a | b) >> 32) == SYCL_U64C(0) ? a * b : b != SYCL_U64C(0) && a > SYCL_U64MAX / b ? SYCL_U64MAX : a * b; }
SYCL_BOUND_FN sycl_u64 sycl_bsub(sycl_u64 a, sycl_u64 b) { return a >= b ? a - b : SYCL_U64C(0); }
SYCL_BOUND_FN sycl_u64 sycl_bdiv(sycl_u64 a, sycl_u64 b) { return b == SYCL_U64C(0) ? a : a / b; }
SYCL_BOUND_FN sycl_u64 sycl_bmin(sycl_u64 a, sycl_u64 b) { return a < b ? a : b; }
SYCL_BOUND_FN sycl_u64 sycl_bmax(sycl_u64 a, sycl_u64 b) { return a > b ? a : b; }
SYCL_BOUND_FN sycl_u64 sycl_bwrap_lo(sycl_u64 hi, sycl_u64 lo, sycl_u64 max) { return hi >= max ? SYCL_U64C(0) : lo; }
