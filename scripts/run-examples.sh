#!/usr/bin/env bash
# Runs every example (each verifies its result) on the default device, then on the first two
# OpenCL devices where OpenCL platforms are visible (OCL_ICD_VENDORS or the system's ICDs), and
# with `cuda` also on cuda:0. Stops at the first failure, with its status.
#
#   scripts/run-examples.sh          # default device, opencl:0, opencl:1
#   scripts/run-examples.sh cuda     # the same, and cuda:0 (which must exist)
#
# Examples run through `cargo run --release`; with SYCL_RS_EXAMPLES_BIN=DIR they run from
# prebuilt binaries in DIR instead (e.g. .gpu-bundle/bin, where sycl-ls must be too).
#
# share_across_ranks needs a device with IPC: on OpenCL devices without fine-grained system SVM
# (PoCL, NVIDIA's OpenCL) it exits with status 3 after saying why, which counts as a skip there
# and only there; Intel's CPU OpenCL runs it (4 ranks).
set -euo pipefail
cd "$(dirname "$0")/.."

examples="vector_add reduction stencil2d matmul softmax layer_norm histogram scan sgemm transpose nbody share_across_ranks"
bin=${SYCL_RS_EXAMPLES_BIN:-}
if [ -z "$bin" ]; then
    cargo build -q --release -p sycl-rs --bin sycl-ls --examples
    bin=target/release
    ex=target/release/examples
else
    ex=$bin
fi
for e in $examples sycl-ls; do
    d=$ex
    [ "$e" = sycl-ls ] && d=$bin
    [ -x "$d/$e" ] || { echo "run-examples: no $d/$e" >&2; exit 1; }
done

# Device selectors: "" is the default device (ONEAPI_DEVICE_SELECTOR unset).
selectors=("")
n_opencl=$(env -u ONEAPI_DEVICE_SELECTOR "$bin/sycl-ls" 2>/dev/null | grep -c '^\[opencl:' || true)
for i in 0 1; do
    if [ "$i" -lt "$n_opencl" ]; then selectors+=("opencl:$i"); fi
done
if [ "$n_opencl" -eq 0 ]; then echo "run-examples: no OpenCL device visible: not running on OpenCL"; fi
if [ "${1:-}" = cuda ]; then selectors+=("cuda:0"); fi

start=$SECONDS
for sel in "${selectors[@]}"; do
    echo "== ${sel:-default device}"
    for e in $examples; do
        t0=$SECONDS
        set +e
        if [ -z "$sel" ]; then
            env -u ONEAPI_DEVICE_SELECTOR "$ex/$e"
        else
            ONEAPI_DEVICE_SELECTOR=$sel "$ex/$e"
        fi
        rc=$?
        set -e
        if [ "$rc" -eq 3 ] && [ "$e" = share_across_ranks ] && [[ "$sel" == opencl:* ]]; then
            echo "-- $e on $sel: skipped (the device cannot share memory between processes)"
        elif [ "$rc" -ne 0 ]; then
            echo "run-examples: $e on ${sel:-the default device} FAILED (exit status $rc)" >&2
            exit "$rc"
        else
            echo "-- $e on ${sel:-default device}: ok ($((SECONDS - t0)) s)"
        fi
    done
done
echo "run-examples: all passed (${#selectors[@]} devices, $((SECONDS - start)) s)"
