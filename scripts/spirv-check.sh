#!/usr/bin/env bash
# #[sycl::kernel] through SPIR-V on Intel's CPU OpenCL runtime (spec/level-zero.md): the kernel
# conformance suite, the bounds proofs' differential test and every example with
# SYCL_RS_KERNEL_IR=spirv, every module the runtime
# built written to a directory (SYCL_RS_SPIRV_DUMP), then `spirv-val` on each (Debian's
# spirv-tools): with the SPIR-V 1.0 rules the modules declare, and OpenCL 2.2's where a module
# has no 64-bit atomics (that environment lists Int64Atomics as an extension's). Also the kernel
# suite on the Intel device as OpenCL C (SYCL_RS_KERNEL_IR=opencl_c), the form SPIR-V replaced
# there by default.
#
# CI runs the README's `cargo test` first, with SYCL_RS_SPIRV_DUMP=DIR/modules and its output
# in DIR/cargo-test.log; it already runs the kernel, soundness and proofs suites on the Intel
# device in its default form, SPIR-V. It then calls this script with
# SYCL_RS_SPIRV_CHECK_FROM_TESTS=DIR: the SPIR-V runs are not made again (each takes minutes on
# 2 cores: Intel's runtime builds a kernel in about a second). The log must show those suites
# on the Intel device, every kernel test passed; the modules are checked and validated here,
# and the kernel and soundness suites run as OpenCL C (the proofs test as OpenCL C ran on PoCL
# in `cargo test`).
#
# Fails on: no Intel OpenCL device, a failed or missing kernel test on it, a sub-group kernel
# that was not built as SPIR-V (the runtime builds them from OpenCL C on devices without
# cl_intel_spirv_subgroups, which Intel's runtime has), a failed example, an empty dump, any
# module spirv-val refuses. Needs the OpenCL environment (OCL_ICD_VENDORS) and
# release examples (scripts/run-examples.sh builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v spirv-val >/dev/null || { echo "spirv-check: spirv-val missing (apt: spirv-tools)" >&2; exit 1; }

# (The workspace's selection, not `-p sycl-tests`, in the tests below: the same build as the
# README's `cargo test`, where `-p` resolved features apart and built sycl-rs again.)
cargo build -q --release -p sycl-rs --bin sycl-ls --examples
intel=$(env -u ONEAPI_DEVICE_SELECTOR target/release/sycl-ls | grep 'Intel(R) OpenCL' | head -1 | sed -n 's/^\[\([a-z_]*:[a-z]*:[0-9]*\)\].*/\1/p')
[ -n "$intel" ] || { echo "spirv-check: no Intel(R) OpenCL device" >&2; exit 1; }
selector=${intel%%:*}:${intel##*:}

log=$(mktemp)
# The Intel device's tests of suite $2 in test log $1: some ran, and none but passed (an
# ignored kernel test is a failure here: every one runs on this device).
intel_tests_passed() {
    local ran bad
    # (Not anchored at the line's start: a test's stderr, such as another test's backtrace,
    # can land in front of its result line.)
    ran=$(grep -c "test \[$intel\] $2::.* ok$" "$1" || true)
    bad=$(grep "test \[$intel\] $2::" "$1" | grep -vc " ok$" || true)
    if [ "$ran" -eq 0 ] || [ "$bad" -ne 0 ]; then
        grep -E "FAILED|failed|panicked" "$1" | head -40 >&2 || true
        echo "spirv-check: the $2 suite through SPIR-V on $intel: $ran passed, $bad not passed" >&2
        exit 1
    fi
    echo "-- the $2 suite through SPIR-V: $ran tests passed on $intel"
}
from_tests=${SYCL_RS_SPIRV_CHECK_FROM_TESTS:-}
if [ -n "$from_tests" ]; then
    # DIR/modules: what SYCL_RS_SPIRV_DUMP wrote; DIR/cargo-test.log: the tests' output.
    dump=$from_tests/modules
    trap 'rm -f "$log"' EXIT
    [ -d "$dump" ] && [ -n "$(ls "$dump")" ] && [ -s "$from_tests/cargo-test.log" ] \
        || { echo "spirv-check: $from_tests lacks modules/ or cargo-test.log: run \`SYCL_RS_SPIRV_DUMP=$from_tests/modules cargo test | tee $from_tests/cargo-test.log\` first" >&2; exit 1; }
    echo "-- \`cargo test\` ran the suites on $intel in its default form, SPIR-V: $(ls "$dump" | wc -l) modules"
    intel_tests_passed "$from_tests/cargo-test.log" kernels
    intel_tests_passed "$from_tests/cargo-test.log" proofs
    grep "test \[$intel\] soundness::" "$from_tests/cargo-test.log" | grep -q " ok$" \
        || { echo "spirv-check: no soundness test passed on $intel in \`cargo test\`" >&2; exit 1; }
else
    dump=$(mktemp -d)
    trap 'rm -rf "$dump" "$log"' EXIT
fi
export SYCL_RS_KERNEL_IR=spirv SYCL_RS_SPIRV_DUMP=$dump

if [ -z "$from_tests" ]; then
    set +e
    cargo test -q --test conformance -- "$intel] kernels::" >"$log" 2>&1
    rc=$?
    set -e
    grep '^test result' "$log" || true
    [ "$rc" -eq 0 ] || { grep -E "FAILED|failed|panicked" "$log" | head -40 >&2 || true; echo "spirv-check: conformance through SPIR-V failed on $intel (exit $rc)" >&2; exit 1; }
    intel_tests_passed "$log" kernels

    # The soundness suite's kernels (deferred release, launch limits, aliasing across
    # mappings) through SPIR-V too, their modules validated below.
    cargo test -q --test conformance -- "$intel] soundness::" >"$log" 2>&1 \
        || { tail -40 "$log" >&2; echo "spirv-check: the soundness suite through SPIR-V failed on $intel" >&2; exit 1; }
    echo "-- the soundness suite through SPIR-V: $(grep -c ' ok$' "$log") tests passed on $intel"
fi
# The sub-group tests count only if their kernels really went through SPIR-V.
for k in sub_group_ops_i32 sub_group_ops_f64 sub_group_after_return sub_group_scan sub_group_two_level_sum; do
    ls "$dump" | grep "^$k-" >/dev/null \
        || { echo "spirv-check: kernel $k was not built as SPIR-V on $intel" >&2; exit 1; }
done

# SPIR-V is the default where the driver takes it: the OpenCL C form must keep passing there
# (and build no module: the dump must not grow).
before=$(ls "$dump" | wc -l)
SYCL_RS_KERNEL_IR=opencl_c cargo test -q --test conformance -- "$intel] kernels::" >"$log" 2>&1 \
    || { tail -40 "$log" >&2; echo "spirv-check: the kernel suite as OpenCL C failed on $intel" >&2; exit 1; }
[ "$(ls "$dump" | wc -l)" -eq "$before" ] || { echo "spirv-check: SYCL_RS_KERNEL_IR=opencl_c built SPIR-V" >&2; exit 1; }
echo "-- and as OpenCL C: $(grep -c ' ok$' "$log") kernel tests passed on $intel"
SYCL_RS_KERNEL_IR=opencl_c cargo test -q --test conformance -- "$intel] soundness::" >"$log" 2>&1 \
    || { tail -40 "$log" >&2; echo "spirv-check: the soundness suite as OpenCL C failed on $intel" >&2; exit 1; }
[ "$(ls "$dump" | wc -l)" -eq "$before" ] || { echo "spirv-check: SYCL_RS_KERNEL_IR=opencl_c built SPIR-V" >&2; exit 1; }
echo "-- and the soundness suite as OpenCL C: $(grep -c ' ok$' "$log") tests passed on $intel"

# The differential test of the bounds proofs (random kernels with and without proofs, which
# must agree) through both forms on the Intel device: SPIR-V (its modules validated below)
# and OpenCL C. (The workspace test run covers it on every device in its default form.)
# After `cargo test` (SYCL_RS_SPIRV_CHECK_FROM_TESTS) neither runs here: the SPIR-V form ran
# there on this device, and the OpenCL C form on PoCL. The proofs are a property of the
# printed kernel, not of the driver that builds it; the 80 builds of it as OpenCL C here would
# take over a minute of CI.
if [ -z "$from_tests" ]; then
    cargo test -q --test proofs -- "$intel] proofs::" >"$log" 2>&1 \
        || { grep -A12 -E "FAILED|differ" "$log" | head -60 >&2; echo "spirv-check: the proofs test through SPIR-V failed on $intel" >&2; exit 1; }
    echo "-- the proofs test through SPIR-V: $(grep -c ' ok$' "$log") kernels agreed on $intel"
    before=$(ls "$dump" | wc -l)
    SYCL_RS_KERNEL_IR=opencl_c cargo test -q --test proofs -- "$intel] proofs::" >"$log" 2>&1 \
        || { grep -A12 -E "FAILED|differ" "$log" | head -60 >&2; echo "spirv-check: the proofs test as OpenCL C failed on $intel" >&2; exit 1; }
    [ "$(ls "$dump" | wc -l)" -eq "$before" ] || { echo "spirv-check: SYCL_RS_KERNEL_IR=opencl_c built SPIR-V" >&2; exit 1; }
    echo "-- and as OpenCL C: $(grep -c ' ok$' "$log") kernels agreed on $intel"
fi

for e in vector_add reduction stencil2d matmul; do
    ONEAPI_DEVICE_SELECTOR=$selector target/release/examples/$e | tail -1
done

n=0
bad=0
for f in "$dump"/*.spv; do
    [ -e "$f" ] || break
    n=$((n + 1))
    envs="spv1.0"
    # (grep without -q reads all of spirv-dis's output: no SIGPIPE under pipefail.)
    spirv-dis "$f" | grep 'OpCapability Int64Atomics' >/dev/null || envs="$envs opencl2.2"
    for env in $envs; do
        if ! out=$(spirv-val --target-env "$env" "$f" 2>&1); then
            bad=$((bad + 1))
            echo "spirv-check: $(basename "$f") ($env): $out" >&2
        fi
    done
done
[ "$n" -gt 0 ] || { echo "spirv-check: no module was dumped" >&2; exit 1; }
[ "$bad" -eq 0 ] || { echo "spirv-check: $bad validation failures in $n modules" >&2; exit 1; }
echo "spirv-check: the kernel suites on $intel through SPIR-V and OpenCL C, 4 examples, $n modules clean under spirv-val"
