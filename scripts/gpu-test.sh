#!/usr/bin/env bash
# The GPU suite, run the same way every session.
#
#   scripts/gpu-test.sh build     # here (no CUDA needed): builds release test/bench/example
#                                 # binaries, strips them into .gpu-bundle/ (git-ignored)
#   device tool: run(command="bash scripts/gpu-test.sh device", carry=[".gpu-bundle"],
#                    kind="nvidia-h100-x1" or "nvidia-h200-x2")
#   scripts/gpu-test.sh device-mpi   # only the MPI steps (sycl::ranks), for the multi-GPU kinds
#   scripts/gpu-test.sh device-collectives # only sycl::collective: tests on CUDA (MPI, launcher,
#                                    # Python under torchrun and mpi4py), bench and NCCL anchor
#   scripts/gpu-test.sh device-python # only the Python package's pytest suite
#   scripts/gpu-test.sh device-tests # tests, demos and examples only; device-rest: benches,
#                                    # Python and MPI (the two halves of `device`, each within
#                                    # one 600 s device call; `device` alone now takes longer)
#
# On the device every suite runs with SYCL_RS_REQUIRE_BACKENDS=cuda, so a CUDA backend that
# fails to load fails the run instead of skipping. Logs land in $OUT; a summary prints last.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-build}
bundle=.gpu-bundle
case "$mode" in
build)
    set -e
    rm -rf "$bundle/bin" "$bundle/bin.tar.gz"
    mkdir -p "$bundle/bin"
    json=$(mktemp)
    cargo test --release --no-run --message-format=json -p sycl-tests -p sycl-backend-cuda -p sycl-backend-opencl >"$json"
    cargo build --release --message-format=json -p sycl-rs --bin sycl-ls --examples --benches >>"$json"
    # sycl::ranks (feature mpi): the MPI test and the halo exchange, linked to libmpi.so.40
    # (Open MPI 4.1 here and on the GPU machines).
    cargo test --release --no-run --message-format=json -p sycl-rs --features mpi --test mpi_ranks >>"$json"
    cargo build --release --message-format=json -p sycl-rs --features mpi --example halo_exchange --example tensor_parallel >>"$json"
    # sycl::collective: its test (self-launching under mpirun) and bench_collectives.
    cargo test --release --no-run --message-format=json -p sycl-rs --features mpi --test collectives >>"$json"
    cargo bench --no-run --message-format=json -p sycl-rs --features mpi --bench collectives >>"$json"
    # Teams without MPI (torchrun-style launches): self-launching, like the collectives test.
    cargo test --release --no-run --message-format=json -p sycl-rs --test launch >>"$json"
    python3 - "$json" "$bundle/bin" <<'PY'
import json, shutil, sys, os
src, dst = sys.argv[1], sys.argv[2]
for line in open(src):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    kind = t["kind"][0]
    is_harness = m["profile"]["test"]
    if kind == "bench":
        name = "bench-" + t["name"]
    elif is_harness:
        # libtest harnesses: integration tests, and unit tests of libs and bins.
        name = {"test": "test-", "lib": "test-lib-", "bin": "test-bin-"}.get(kind, "test-x-") + t["name"]
    else:
        name = t["name"]  # examples and binaries
    shutil.copy(m["executable"], os.path.join(dst, name))
PY
    rm -f "$json"
    strip "$bundle"/bin/* 2>/dev/null || true
    # Compressed: a call carries at most 64 MiB with the work tree (the binaries were 57 MiB).
    tar -C "$bundle" -czf "$bundle/bin.tar.gz" bin && rm -rf "$bundle/bin"
    # The Python package: one abi3 wheel (Python >= 3.11; the GPU machines have 3.12).
    rm -rf "$bundle/wheel" && mkdir -p "$bundle/wheel"
    venv=${SYCL_RS_PY_VENV:-.ci-venv}
    # (A fresh checkout has no venv until CI's setup made one: make it here, or the bundle
    # goes without its wheel and the GPU run's Python steps fail.)
    [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
    [ -x "$venv/bin/maturin" ] || "$venv/bin/pip" install -q "maturin>=1.7,<2"
    "$venv/bin/maturin" build --release --strip -q -m python/Cargo.toml -o "$bundle/wheel"
    cp scripts/gpu-test.sh "$bundle/"
    # The NCCL / torch symm_mem side of bench_collectives (shared tools, not in the repo).
    cp ../shared/tools/collectives_anchor.py "$bundle/" 2>/dev/null || true
    du -sh "$bundle"
    tar -tzvf "$bundle/bin.tar.gz" | awk '{print $3, $6}'
    ;;
device | device-tests | device-rest | device-mpi | device-collectives | device-python)
    out=${OUT:-/tmp/gpu-out}
    mkdir -p "$out"
    export SYCL_RS_REQUIRE_BACKENDS=${SYCL_RS_REQUIRE_BACKENDS:-cuda}
    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    export RUST_BACKTRACE=1 SYCL_RS_TEST_TRACE=1 SYCL_RS_TEST_TIMEOUT=${SYCL_RS_TEST_TIMEOUT:-90}
    b=$bundle/bin
    if [ -f "$bundle/bin.tar.gz" ]; then rm -rf "$b" && tar -C "$bundle" -xzf "$bundle/bin.tar.gz"; fi
    summary=$out/summary.txt
    : >"$summary"
    step() { # name, command...
        local name=$1; shift
        local t0=$SECONDS
        timeout "${STEP_TIMEOUT:-240}" "$@" >"$out/$name.log" 2>&1
        local rc=$?
        local counts
        # (Every result line: a suite with PoCL prints a second process's after its own.)
        counts=$(grep -E "^test result:" "$out/$name.log" | sed 's/; 0 measured.*//' | paste -sd'|' -)
        printf '%-34s rc=%-3s %4ss %s\n' "$name" "$rc" "$((SECONDS - t0))" "$counts" | tee -a "$summary"
    }
    nvidia-smi -L | tee "$out/gpus.txt"
    nvidia-smi topo -m >>"$out/gpus.txt" 2>&1
    ngpu=$(nvidia-smi -L | grep -c '^GPU')
    py=${SYCL_RS_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
    pyroot=""
    py_setup() { # the wheel unpacked beside the machine's torch/CuPy Python (no network there)
        [ -n "$pyroot" ] && return 0
        [ -x "$py" ] && ls "$bundle"/wheel/*.whl >/dev/null 2>&1 || return 1
        pyroot=$(mktemp -d)
        "$py" -m pip install -q --no-deps --no-index --target "$pyroot" "$bundle"/wheel/*.whl
    }
    collective_steps() {
        # sycl::collective on the GPUs: the MPI suite, teams joined from a launcher's
        # environment (Rust, then Python on torch tensors under torchrun and under mpirun
        # with mpi4py), the tensor-parallel example, bench_collectives beside NCCL/symm_mem.
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        local mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none"
        [ -x "$b/test-collectives" ] && step collectives-cuda env SYCL_RS_COLLECTIVES_DEVICE=cuda "$b/test-collectives"
        [ -x "$b/test-launch" ] && step launch-cuda env SYCL_RS_COLLECTIVES_DEVICE=cuda "$b/test-launch"
        if py_setup; then
            step python-collective-torchrun env PYTHONPATH="$pyroot" "$py" -m torch.distributed.run \
                --standalone --nproc-per-node 2 python/tests/collective_workers.py torch
            step python-collective-mpi4py $mpi -np 2 -x PYTHONPATH="$pyroot" "$py" \
                python/tests/collective_workers.py torch --mpi4py
        else
            echo "python-collective rc=1 (no $py or no wheel)" >>"$summary"
        fi
        step tensor-parallel-cuda $mpi -np 2 "$b/tensor_parallel" --batch 64 --model 1024 --hidden 4096 --steps 50
        # SYCL_RS_SKIP_BENCH=1: the tests only (the anchor alone takes about 300 s).
        [ -n "${SYCL_RS_SKIP_BENCH:-}" ] && return
        step bench-collectives-cuda $mpi -np 2 "$b/bench-collectives" --device cuda --graph
        if [ -f "$bundle/collectives_anchor.py" ]; then
            step collectives-anchor "${SYCL_RS_TORCH_PYTHON:-/opt/torch/.venv/bin/python3}" \
                "$bundle/collectives_anchor.py" --out "$out/anchor.json"
        fi
    }
    mpi_steps() {
        # sycl::ranks: one rank per GPU (one node), then two "nodes" of two GPUs (node key)
        # with the inter-node path CUDA-aware and staged. Open MPI refuses root without these.
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
        command -v mpirun >/dev/null || { echo "mpi: no mpirun" >>"$summary"; return; }
        local mpi="mpirun --allow-run-as-root --oversubscribe --bind-to none"
        local size="--nx 8192 --ny 8192 --steps 200 --bw-mib 256"
        [ -x "$b/test-mpi_ranks" ] && step mpi-ranks "$b/test-mpi_ranks"
        local n=$ngpu; [ "$n" -lt 2 ] && n=2
        step mpi-halo-1node $mpi -np "$n" "$b/halo_exchange" $size
        # sycl::collective: every operation and type on the native CPU (2, 3, 4 ranks and
        # two nodes of two), then on the GPUs; bench_collectives beside NCCL and symm_mem.
        [ -x "$b/test-collectives" ] && step collectives-native "$b/test-collectives"
        if [ "$ngpu" -ge 2 ] && [ -x "$b/test-collectives" ]; then
            collective_steps
            step nccl-gather-scatter "${SYCL_RS_TORCH_PYTHON:-/opt/torch/.venv/bin/python3}" \
                scripts/nccl_gather_scatter.py
        fi
        if [ "$ngpu" -ge 4 ]; then
            step mpi-halo-2nodes $mpi -np 4 -x SYCL_RS_RANKS_PER_NODE=2 "$b/halo_exchange" $size
            step mpi-halo-2nodes-staged $mpi -np 4 -x SYCL_RS_RANKS_PER_NODE=2 -x SYCL_RS_MPI_CUDA_AWARE=0 "$b/halo_exchange" $size
        fi
    }
    # `device` runs everything; on one GPU that now passes the 600 s a device call may take,
    # so `device-tests` (tests, demos, examples) and `device-rest` (benches, Python, MPI) run
    # the two halves in separate calls. `device-mpi` runs only the MPI steps.
    case "$mode" in
    device) tests=1 rest=1 ;;
    device-tests) tests=1 rest=0 ;;
    device-rest) tests=0 rest=1 ;;
    *) tests=0 rest=0 ;;
    esac
    if [ "$mode" = device-mpi ]; then
        mpi_steps
    fi
    if [ "$mode" = device-collectives ]; then
        STEP_TIMEOUT=${STEP_TIMEOUT:-300} collective_steps
    fi
    # `device-python`: the Python package's pytest suite alone (CUDA interop with torch and
    # CuPy included).
    if [ "$mode" = device-python ]; then
        if py_setup; then
            step python-tests env PYTHONPATH="$pyroot" "$py" -m pytest -q -p no:cacheprovider python/tests
        else
            echo "python-tests rc=1 (no $py or no wheel)" >>"$summary"
        fi
    fi
    if [ "$tests" = 1 ]; then
    step sycl-ls "$b/sycl-ls" --verbose
    for t in "$b"/test-*; do
        # Runs under mpirun in mpi_steps.
        [ "$(basename "$t")" = test-mpi_ranks ] && continue
        [ "$(basename "$t")" = test-collectives ] && continue
        step "$(basename "$t")" "$t" --test-threads=4
    done
    step demo-cuda0 "$b/share_across_ranks" --device cuda:0 --ranks 4
    if [ "$ngpu" -ge 2 ]; then
        step demo-spread "$b/share_across_ranks" --spread --device 'cuda:*' --ranks "$ngpu"
    fi
    if [ "$ngpu" -ge 2 ]; then
        # The CUDA GPU tests' second-GPU checks run only where there is a second GPU: make
        # sure they did, so a multi-GPU run cannot pass without them.
        if grep -q "child: device 1 reached the memory through its own mapping" "$out/test-gpu.log"; then
            printf '%-34s rc=0\n' "second-gpu-checks" | tee -a "$summary"
        else
            printf '%-34s rc=1   (not found in test-gpu.log)\n' "second-gpu-checks" | tee -a "$summary"
        fi
    fi
    # Every example (each checks its result) on the default device, the OpenCL devices and
    # cuda:0: the #[sycl::kernel] kernels as generated CUDA C++ and OpenCL C.
    step examples env SYCL_RS_EXAMPLES_BIN="$b" bash scripts/run-examples.sh cuda
    fi
    if [ "$rest" = 1 ]; then
    [ -x "$b/bench-cuda" ] && step bench-cuda "$b/bench-cuda"
    # One step per kind of device: all of them in one process outgrew a step's timeout
    # (native CPU 153 s, PoCL 94 s, NVIDIA OpenCL 16 s, and CUDA, whose targets matter, last).
    if [ -x "$b/bench-kernels" ]; then
        step bench-kernels-cuda "$b/bench-kernels" --only cuda
        step bench-kernels-native "$b/bench-kernels" --only native
        step bench-kernels-opencl "$b/bench-kernels" --only opencl
    fi
    [ -x "$b/all_to_all_ranks" ] && step all-to-all "$b/all_to_all_ranks"
    if py_setup; then
        step python-tests env PYTHONPATH="$pyroot" "$py" -m pytest -q -p no:cacheprovider python/tests
        step python-bench env PYTHONPATH="$pyroot" "$py" python/bench/bench_python.py
    else
        echo "python: no $py or no wheel in the bundle" | tee "$out/python-tests.log"
        echo "python-tests rc=1" >>"$summary"
    fi
    mpi_steps
    fi
    echo "---- summary"
    cat "$summary"
    for f in "$out"/*.log; do
        if grep -qE "FAILED|panicked|^error|failed" "$f"; then
            echo "---- $(basename "$f") (tail)"
            grep -E "^test .*FAILED|^---- |check failed|failed|panicked|Error|error" "$f" | head -30
        fi
    done
    for f in demo-cuda0 demo-spread bench-cuda bench-kernels-cuda bench-kernels-native bench-kernels-opencl all-to-all python-tests python-bench python-collective-torchrun python-collective-mpi4py launch-cuda mpi-ranks mpi-halo-1node mpi-halo-2nodes mpi-halo-2nodes-staged collectives-native collectives-cuda tensor-parallel-cuda bench-collectives-cuda collectives-anchor nccl-gather-scatter; do
        [ -f "$out/$f.log" ] && { echo "---- $f"; tail -40 "$out/$f.log"; }
    done
    # Only a few files come back from the device machine: pack the logs into one.
    (cd "$out" && tar czf logs.tar.gz ./*.log && rm -f ./*.log)
    # The run fails when any step did (benchmark targets print PASS/MISS but do not fail it).
    if grep -Eqv ' rc=0( |$)' "$summary"; then
        echo "---- FAILED steps:"
        grep -Ev ' rc=0( |$)' "$summary"
        exit 1
    fi
    ;;
*)
    echo "usage: $0 build|device|device-tests|device-rest|device-mpi|device-collectives|device-python" >&2
    exit 2
    ;;
esac
