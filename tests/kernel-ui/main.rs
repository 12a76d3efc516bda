//! The kernel language's compile errors: each case under `fail/` must not compile, with the
//! messages recorded beside it (`.stderr`); each case under `pass/` must compile and run.
//! `TRYBUILD=overwrite cargo test --test kernel_ui` records new messages.

#[test]
fn kernel_language_errors_point_at_the_offending_code() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/*.rs");
    t.pass("ui/pass/*.rs");
}
