#!/usr/bin/env bash
# The MPI example checks of CI (`.ci/run`): `halo_exchange` with 4 ranks as two "nodes" of two
# (SYCL_RS_RANKS_PER_NODE=2: intra-node zero-copy and inter-node MPI both run, and the result
# is checked against one rank), with descriptors forced through the rank channel, and a rank
# that dies mid-exchange, which must make the job fail with an error well before any time-out.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A debug build: the one CI's MPI tests use (a release build of the crate with MPI would
# cost CI a third build of it for this check alone).
cargo build -q -p sycl-rs --features mpi --example halo_exchange
bin=target/debug/examples/halo_exchange
mpi="timeout -k 5 120 mpirun --allow-run-as-root --oversubscribe -np 4 -x SYCL_RS_RANKS_PER_NODE=2"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

expect_verified() { # what, log
    grep -q "4 ranks equal one rank bit for bit" "$2" || { cat "$2"; echo "mpi-test: $1: not verified"; exit 1; }
    grep -q "on 2 node(s)" "$2" || { cat "$2"; echo "mpi-test: $1: not two nodes"; exit 1; }
    echo "mpi-test: $1: verified"
}

$mpi "$bin" --nx 512 --ny 509 --steps 40 >"$log" 2>&1 || { cat "$log"; exit 1; }
cat "$log"
expect_verified "two nodes of two" "$log"

$mpi -x SYCL_RS_DESCRIPTOR_PATH=channel "$bin" --nx 300 --ny 200 --steps 17 --bw-mib 0 >"$log" 2>&1 || { cat "$log"; exit 1; }
expect_verified "two nodes of two, descriptors through the rank channel" "$log"

# Local rank 1 of node 0 exits at step 20. mpirun is told not to end the job itself, so that
# what ends it is the survivors noticing (its node peer sees its pidfd close) and failing.
start=$SECONDS
set +e
timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe --mca orte_abort_on_non_zero_status 0 \
    -np 4 -x SYCL_RS_RANKS_PER_NODE=2 -x SYCL_RS_RANKS_TIMEOUT_S=30 \
    "$bin" --nx 256 --ny 256 --steps 1000 --die-at 20 --bw-mib 0 >"$log" 2>&1
rc=$?
set -e
took=$((SECONDS - start))
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -ge 25 ]; then
    cat "$log"; echo "mpi-test: dying rank: rc=$rc after ${took}s (want a failure well before 25 s)"; exit 1
fi
grep -q "error: .*on this node exited" "$log" || { cat "$log"; echo "mpi-test: dying rank: no survivor reported it"; exit 1; }
echo "mpi-test: dying rank: the job failed in ${took}s with: $(grep -m1 'on this node exited' "$log")"
