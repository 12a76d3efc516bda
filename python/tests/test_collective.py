"""sycl_rs.collective: ranks joined from a launcher's environment (sycl-rs's variables,
torchrun's, Open MPI's) running every operation on NumPy arrays and sycl_rs memory, and the
errors of bad arguments. The ranks are processes (collective_workers.py)."""

import os
import shutil
import subprocess
import sys
import uuid

import numpy as np
import pytest

import sycl_rs
from sycl_rs import collective as coll

WORKER = os.path.join(os.path.dirname(__file__), "collective_workers.py")
TIMEOUT = 240
LAUNCHER_VARS = [
    "SYCL_RS_LOCAL_RANK",
    "SYCL_RS_LOCAL_SIZE",
    "SYCL_RS_JOB",
    "SYCL_RS_RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "RANK",
    "WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMIX_NAMESPACE",
]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_ranks(envs, args=("numpy",)):
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for env in envs
    ]
    outputs = []
    for p in procs:
        out, _ = p.communicate(timeout=TIMEOUT)
        outputs.append((p.returncode, out))
    for code, out in outputs:
        print(out)
        assert code == 0 and ": ok" in out, out


def test_two_ranks_with_sycl_rs_variables():
    job = f"pytest/{uuid.uuid4().hex}"
    run_ranks(
        [clean_env(SYCL_RS_LOCAL_RANK=r, SYCL_RS_LOCAL_SIZE=2, SYCL_RS_JOB=job) for r in range(2)]
    )


def test_three_ranks_under_torchrun_variables():
    run_id = uuid.uuid4().hex
    run_ranks(
        [
            clean_env(
                LOCAL_RANK=r,
                LOCAL_WORLD_SIZE=3,
                RANK=r,
                WORLD_SIZE=3,
                GROUP_RANK=0,
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=29500,
                TORCHELASTIC_RUN_ID=run_id,
                TORCHELASTIC_RESTART_COUNT=0,
            )
            for r in range(3)
        ]
    )


def test_two_ranks_under_mpirun_without_mpi4py():
    if shutil.which("mpirun") is None:
        if os.environ.get("SYCL_RS_REQUIRE_MPI") == "1":
            pytest.fail("no mpirun (Open MPI), and SYCL_RS_REQUIRE_MPI=1")
        pytest.skip("no mpirun (Open MPI)")
    env = clean_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
    out = subprocess.run(
        ["mpirun", "--oversubscribe", "-np", "2", sys.executable, WORKER, "numpy"],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    print(out.stdout, out.stderr)
    assert out.returncode == 0 and out.stdout.count(": ok") == 2


@pytest.fixture
def solo(native):
    """A team of one rank: every operation is a copy, every check still runs."""
    ranks = coll.NodeRanks.join(0, 1, f"pytest-solo/{uuid.uuid4().hex}", device=native)
    return coll.Team(ranks, buffer_bytes=4096)


def test_a_team_of_one(solo):
    assert (solo.rank, solo.size) == (0, 1)
    assert solo.ranks.local_size == 1
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, dtype=np.float32)
    solo.all_reduce(x, out, op="max")
    assert np.array_equal(out, x)
    ev = solo.barrier(wait=False)
    ev.wait()


def test_bad_arguments_are_errors(solo):
    x = np.ones(8, dtype=np.float32)
    with pytest.raises(sycl_rs.InvalidError):
        solo.all_reduce(x, op="avg")
    with pytest.raises(sycl_rs.InvalidError):
        solo.all_reduce(np.ones(8, dtype=np.int8))  # no int8 reductions
    with pytest.raises(TypeError):
        solo.all_reduce(x, np.ones(8, dtype=np.float64))
    mem = sycl_rs.malloc_device(32, solo.queue)
    with pytest.raises(TypeError):
        solo.all_reduce(mem)  # untyped memory needs dtype=
    with pytest.raises(sycl_rs.InvalidError):
        solo.all_reduce(sycl_rs.malloc_device(6, solo.queue), dtype="float32")  # 1.5 elements
    with pytest.raises(sycl_rs.InvalidError):
        solo.broadcast(x, root=3)
    with pytest.raises(sycl_rs.InvalidError):
        solo.all_gather(x, np.ones(7, dtype=np.float32))
    with pytest.raises(TypeError):
        solo.all_reduce([1.0, 2.0])
    # wait="stream" orders torch's CUDA stream: refused (before anything runs) elsewhere.
    out = np.zeros(8, dtype=np.float32)
    with pytest.raises(ValueError, match="CUDA"):
        solo.all_reduce(x, out, wait="stream")
    with pytest.raises(ValueError, match="stream"):
        solo.barrier(wait="later")
    assert not out.any(), "a refused wait ran nothing"
    buf = solo.symmetric_buffer(8, "float32")
    with pytest.raises(TypeError):
        solo.all_reduce_symmetric(buf, np.ones(8, dtype=np.float64))
    with pytest.raises(sycl_rs.InvalidError):
        solo.all_reduce_symmetric(buf, np.ones(8, dtype=np.float32), op="avg")
    with pytest.raises(sycl_rs.InvalidError):
        solo.symmetric_buffer(8, "int8")
    with pytest.raises(sycl_rs.InvalidError):
        buf.local.memory.free()  # the buffer owns its parts
    buf.close()


def test_a_symmetric_buffer_of_one(solo):
    buf = solo.symmetric_buffer((4, 8), "float64")
    assert (buf.shape, buf.dtype, buf.count) == ((4, 8), "float64", 32)
    part = np.from_dlpack(buf.local)
    part[...] = np.arange(32).reshape(4, 8)
    out = np.zeros(32)
    solo.all_reduce_symmetric(buf, out, op="max")
    assert np.array_equal(out, np.arange(32))
    buf.close()
    assert "closed" in repr(buf)
    assert np.array_equal(part.ravel(), np.arange(32))  # the view keeps its memory
    with solo.symmetric_buffer(16, "int32") as scoped:
        np.from_dlpack(scoped.local)[:] = 7
        out = np.zeros(16, dtype=np.int32)
        solo.all_reduce_symmetric(scoped, out)
        assert np.array_equal(out, np.full(16, 7))
    assert "closed" in repr(scoped)
    with pytest.raises(sycl_rs.InvalidError):
        solo.all_reduce_symmetric(scoped, out)


def test_bad_launches_are_errors(native):
    with pytest.raises(sycl_rs.InvalidError):
        coll.NodeRanks.join(2, 2, "k", device=native)
    with pytest.raises(sycl_rs.InvalidError):
        coll.NodeRanks.join(0, 1, "", device=native)
    # A lone rank 1 waits for its hub, then gives up.
    with pytest.raises(sycl_rs.RuntimeError):
        coll.NodeRanks.join(1, 2, f"pytest-lonely/{uuid.uuid4().hex}", device=native, timeout=0.5)
