"""A rank of the sycl_rs.collective tests, started by test_collective.py (native CPU, NumPy),
by torchrun (GPU, torch tensors) or by mpirun (mpi4py):

    python collective_workers.py numpy|torch [--mpi4py]

Checks every operation against a reference computed here, prints "collective: rank R: ok"
or the failure, and exits non-zero on failure."""

import os
import sys
import time

import numpy as np

import sycl_rs
from sycl_rs import collective as coll

# Values whose sums, products, minima and maxima over a few ranks are exact in every dtype.
N = 1000


def values(rank, n, dtype):
    return ((np.arange(n) * (rank + 1)) % 7 + rank).astype(dtype)


def reduce_ref(size, n, dtype, op):
    parts = [values(r, n, dtype) for r in range(size)]
    fn = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}[op]
    acc = parts[0]
    for p in parts[1:]:
        acc = fn(acc, p)
    return acc.astype(dtype)


def bf16_bits(a):
    """float32 values (exact in bfloat16) as bfloat16 bit patterns."""
    return (np.asarray(a, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def check(name, got, want):
    if not np.array_equal(np.asarray(got), np.asarray(want)):
        raise AssertionError(f"{name}: got {np.asarray(got)[:8]}, wanted {np.asarray(want)[:8]}")


def numpy_checks(team):
    me, size = team.rank, team.size
    for dtype in ["float32", "float64", "float16", "int32", "uint32", "int64", "uint64"]:
        for op in ["sum", "prod", "min", "max"]:
            x = values(me, N, dtype)
            team.all_reduce(x, op=op)
            check(f"all_reduce {dtype} {op} in place", x, reduce_ref(size, N, dtype, op))
        out = np.zeros(N, dtype=dtype)
        team.all_reduce(values(me, N, dtype), out)
        check(f"all_reduce {dtype} out of place", out, reduce_ref(size, N, dtype, "sum"))
        gathered = np.zeros(N * size, dtype=dtype)
        team.all_gather(values(me, N, dtype), gathered)
        check(
            f"all_gather {dtype}",
            gathered,
            np.concatenate([values(r, N, dtype) for r in range(size)]),
        )
        block = np.zeros(N, dtype=dtype)
        team.reduce_scatter(values(me, N * size, dtype), block)
        full = reduce_ref(size, N * size, dtype, "sum")
        check(f"reduce_scatter {dtype}", block, full[me * N : (me + 1) * N])
        buf = values(me, N, dtype)
        team.broadcast(buf, root=size - 1)
        check(f"broadcast {dtype}", buf, values(size - 1, N, dtype))
    # bfloat16: sycl_rs memory, typed by dtype=.
    mem = sycl_rs.malloc_device(2 * N, team.queue)
    mem.copy_from(bf16_bits(values(me, N, "float32")).tobytes())
    team.all_reduce(mem, dtype="bfloat16")
    got = np.frombuffer(mem.copy_to(), dtype=np.uint16)
    check("all_reduce bfloat16", got, bf16_bits(reduce_ref(size, N, "float32", "sum")))
    # Zero elements, and events chained without waits.
    team.all_reduce(np.zeros(0, dtype="float32"))
    x = values(me, N, "int64")
    first = team.all_reduce(x, wait=False)
    team.all_reduce(x, deps=[first], wait=False)
    team.barrier()
    want = reduce_ref(size, N, "int64", "sum") * size
    check("two chained all_reduces", x, want)
    # A recorded graph replayed on new values: the calls' results each time.
    x = np.zeros(N, dtype="float32")
    y = np.zeros(N, dtype="float32")
    mine = values(me, N, "int32")
    gathered = np.zeros(N * size, dtype="int32")
    graph = team.record(lambda g: (g.all_reduce(x, y), g.all_gather(mine, gathered), g.barrier()))
    if graph.operations != 3:
        raise AssertionError(f"a graph of {graph.operations} operations, wanted 3")
    for k in range(3):
        x[:] = values(me, N, "float32") * (k + 1)
        team.replay(graph)
        check(f"replay {k}: all_reduce", y, reduce_ref(size, N, "float32", "sum") * (k + 1))
        check(
            f"replay {k}: all_gather",
            gathered,
            np.concatenate([values(r, N, "int32") for r in range(size)]),
        )
    team.ranks.barrier()


def symmetric_checks(team, mode):
    """Symmetric buffers: every rank writes its part through a DLPack view (NumPy, or torch on
    the GPU), reads a peer's part the same way, and all-reduces the parts where they lie, the
    whole range and a sub-range, for every operation; ranks that pass different ranges fail;
    recv may not overlap this rank's part."""
    me, size = team.rank, team.size
    n = 1000
    if mode == "numpy":
        dtypes = ["float32", "int64", "float16", "uint32"]
        view = np.from_dlpack
        host = np.asarray
    else:
        import torch

        dtypes = [torch.float32, torch.bfloat16, torch.int64]
        view = torch.from_dlpack
        host = lambda t: t.float().cpu().numpy() if t.dtype == torch.bfloat16 else t.cpu().numpy()  # noqa: E731
    for dtype in dtypes:
        name = coll._dtype_name(dtype)
        ref_type = "float32" if name == "bfloat16" else name
        buf = team.symmetric_buffer((10, n // 10), dtype)
        local = view(buf.local)
        if tuple(local.shape) != (10, n // 10):
            raise AssertionError(f"symmetric {name}: local view of shape {tuple(local.shape)}")
        mine = values(me, n, ref_type).reshape(10, n // 10)
        if mode == "numpy":
            local[...] = mine
        else:
            local.copy_(torch.from_numpy(mine).to(local.device, dtype))
        team.barrier()
        peer = (me + 1) % size
        check(f"symmetric {name}: peer {peer}'s part", host(view(buf.peer(peer))).ravel(),
              values(peer, n, ref_type))
        for op in ["sum", "prod", "min", "max"]:
            out = np.zeros(n, dtype=ref_type) if mode == "numpy" else torch.zeros(
                n, dtype=dtype, device=local.device
            )
            team.all_reduce_symmetric(buf, out, op=op)
            check(f"all_reduce_symmetric {name} {op}", host(out), reduce_ref(size, n, ref_type, op))
        out = np.zeros(5, dtype=ref_type) if mode == "numpy" else torch.zeros(
            5, dtype=dtype, device=local.device
        )
        team.all_reduce_symmetric(buf, out, start=n - 5)
        check(f"all_reduce_symmetric {name} of the last 5", host(out),
              reduce_ref(size, n, ref_type, "sum")[n - 5 :])
        # The part may be written again once the event completed: a second round.
        if mode == "numpy":
            local[...] = mine * 2
        else:
            local.mul_(2)
        out = np.zeros(n, dtype=ref_type) if mode == "numpy" else torch.zeros(
            n, dtype=dtype, device=local.device
        )
        team.all_reduce_symmetric(buf, out)
        check(f"all_reduce_symmetric {name} round 2", host(out),
              reduce_ref(size, n, ref_type, "sum") * 2)
        # Recorded once (the whole part, and the max of elements 10..20), replayed on parts
        # written anew each time.
        last = np.zeros(10, dtype=ref_type) if mode == "numpy" else torch.zeros(
            10, dtype=dtype, device=local.device
        )
        graph = team.record(
            lambda g: (g.all_reduce_symmetric(buf, out), g.all_reduce_symmetric(
                buf, last, op="max", start=10))
        )
        for k in [3, 1]:
            if mode == "numpy":
                local[...] = mine * k
            else:
                local.copy_(torch.from_numpy(mine).to(local.device, dtype)).mul_(k)
            team.barrier()
            team.replay(graph)
            check(f"all_reduce_symmetric {name} replayed x{k}", host(out),
                  reduce_ref(size, n, ref_type, "sum") * k)
            check(f"all_reduce_symmetric {name} max replayed x{k}", host(last),
                  reduce_ref(size, n, ref_type, "max")[10:20] * k)
        del local
        buf.close()
        buf.close()
    # Misuse: every rank fails, none hangs or sums the wrong elements.
    buf = team.symmetric_buffer(64, "float32")
    out = np.zeros(8, dtype="float32") if mode == "numpy" else view(
        sycl_rs.malloc_device(32, team.queue).as_array("float32")
    )
    for bad in [dict(start=60, count=8), dict(start=0, count=9)]:
        try:
            team.all_reduce_symmetric(buf, out, **bad)
        except sycl_rs.InvalidError:
            pass
        else:
            raise AssertionError(f"all_reduce_symmetric with {bad} did not fail")
    try:
        team.all_reduce_symmetric(buf, buf.local, count=64)
    except sycl_rs.InvalidError:
        pass
    else:
        raise AssertionError("recv over this rank's own part did not fail")
    try:
        buf.peer(size)
    except sycl_rs.InvalidError:
        pass
    else:
        raise AssertionError(f"peer({size}) of {size} ranks did not fail")
    # (Last on this team: a mismatch poisons its pads.)
    try:
        team.all_reduce_symmetric(buf, out, start=8 * me, count=8)
    except sycl_rs.InvalidError:
        pass
    else:
        if size > 1:
            raise AssertionError("ranks passing different ranges did not fail")
    buf.close()
    try:
        team.all_reduce_symmetric(buf, out, count=8)
    except sycl_rs.InvalidError:
        pass
    else:
        raise AssertionError("a closed buffer did not fail")
    team.ranks.barrier()


def mismatch_check(ranks, mode):
    """Ranks that disagree on the count: InvalidError on every rank."""
    team = coll.Team(ranks, buffer_bytes=4096)
    n = 10 if team.rank == 0 else 11
    if mode == "numpy":
        x = np.ones(n, dtype="float32")
    else:
        import torch

        x = torch.ones(n, dtype=torch.float32, device="cuda")
    try:
        team.all_reduce(x)
    except sycl_rs.InvalidError as e:
        print(f"collective: rank {team.rank}: a mismatch is InvalidError: {e}", flush=True)
    else:
        raise AssertionError("ranks with different counts did not fail")


def torch_checks(team):
    import torch

    me, size = team.rank, team.size
    device = torch.device("cuda", torch.cuda.current_device())
    for dtype in [torch.bfloat16, torch.float32, torch.float16, torch.int64]:
        for n in [1, 1000, 1 << 20]:
            x = torch.arange(n, device=device, dtype=torch.float32).remainder(7).add(me)
            x = x.to(dtype)
            want = sum(
                torch.arange(n, device=device, dtype=torch.float32).remainder(7).add(r)
                for r in range(size)
            ).to(dtype)
            team.all_reduce(x)
            if not torch.equal(x, want):
                raise AssertionError(f"all_reduce {dtype} {n}: {x[:8]} != {want[:8]}")
        out = torch.empty(1000 * size, device=device, dtype=dtype)
        team.all_gather(torch.full((1000,), me, device=device, dtype=dtype), out)
        want = torch.arange(size, device=device).repeat_interleave(1000).to(dtype)
        if not torch.equal(out, want):
            raise AssertionError(f"all_gather {dtype}")
    # Per-call times through Python, 512 B of bf16: the whole call (DLPack wrap, launch, event
    # wait); the wrap alone; a call on memory wrapped once; calls that do not wait.
    x = torch.ones(256, device=device, dtype=torch.bfloat16)
    mem = sycl_rs.from_dlpack(x, team.queue)
    reps = 200

    def per_call(fn, to_the_end=False):
        # (`to_the_end`: calls that wait for nothing on the host, timed until torch's stream,
        # which waits for the team's, has run them all.)
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        if to_the_end:
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / reps * 1e6

    whole = per_call(lambda: team.all_reduce(x))
    stream_ordered = per_call(lambda: team.all_reduce(x, wait="stream"), to_the_end=True)
    wrap = per_call(lambda: sycl_rs.from_dlpack(x, team.queue, sync="none"))
    wrap_host = per_call(lambda: sycl_rs.from_dlpack(x, team.queue))
    wrapped = per_call(lambda: team.all_reduce(mem, dtype="bfloat16"))
    events = []
    no_wait = per_call(lambda: events.append(team.all_reduce(mem, dtype="bfloat16", wait=False)))
    events[-1].wait()
    # 20 all-reduces recorded once; each replay is one call (and one CUDA graph launch).
    graph = team.record(lambda g: [g.all_reduce(mem, dtype="bfloat16") for _ in range(20)])
    replayed = per_call(lambda: team.replay(graph)) / 20
    y = torch.arange(1000, device=device, dtype=torch.float32).add(me)
    out = torch.empty_like(y)
    graph2 = team.record(lambda g: g.all_reduce(y, out))
    for k in range(3):
        y.copy_(torch.arange(1000, device=device, dtype=torch.float32).add(me).mul(k + 1))
        torch.cuda.synchronize()
        team.replay(graph2)
        want = sum(torch.arange(1000, device=device, dtype=torch.float32).add(r) for r in range(size))
        if not torch.equal(out, want * (k + 1)):
            raise AssertionError(f"replay {k}: {out[:8]} != {(want * (k + 1))[:8]}")
    print(
        f"collective: rank {me}: bf16 512 B all_reduce replayed from a graph of 20 from "
        f"Python: {replayed:.1f} us per operation",
        flush=True,
    )
    print(
        f"collective: rank {me}: bf16 512 B all_reduce from Python, us per call: {whole:.1f} "
        f"(wait=\"stream\" {stream_ordered:.1f}; from_dlpack alone {wrap:.1f}, with a host "
        f"sync {wrap_host:.1f}; on memory wrapped once {wrapped:.1f}, without waiting "
        f"{no_wait:.1f})",
        flush=True,
    )
    stream_order_checks(team, device)


def stream_order_checks(team, device):
    """Torch's work and the team's in stream order, no host waits: what torch queued on a
    tensor comes before the operation that takes it, and with wait="stream" torch's later work
    comes after it. A GPU sleep ahead of torch's writes makes a missing order visible."""
    import torch

    me, size = team.rank, team.size
    want = float(sum(r + 1 for r in range(size)))
    for n in [100, 1 << 20]:
        x = torch.zeros(n, device=device, dtype=torch.float32)
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)  # tens of ms of GPU time on torch's current stream
        x.fill_(me + 1)  # queued behind it
        team.all_reduce(x, wait="stream")
        # (No host wait so far: the sleep still runs.)
        busy = not torch.cuda.current_stream(device).query()
        y = x * 2  # torch's current stream, after the all-reduce
        if not torch.equal(y, torch.full_like(y, 2 * want)):
            raise AssertionError(f"stream order, {n}: {y[:4]} != {2 * want}")
        if not busy:
            raise AssertionError("wait=\"stream\" or the DLPack wrap waited on the host")
    # Through torch's other streams: the wrap orders the producer's current stream.
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        x = torch.zeros(4096, device=device, dtype=torch.float32)
        torch.cuda._sleep(50_000_000)
        x.fill_(me + 1)
        team.all_reduce(x, wait="stream")
        y = x * 2
    torch.cuda.synchronize()
    if not torch.equal(y, torch.full_like(y, 2 * want)):
        raise AssertionError(f"stream order on a side stream: {y[:4]} != {2 * want}")
    # A graph's replay follows torch's queued writes to its operands too.
    x = torch.zeros(4096, device=device, dtype=torch.float32)
    out = torch.empty_like(x)
    graph = team.record(lambda g: g.all_reduce(x, out))
    for k in range(1, 4):
        torch.cuda._sleep(50_000_000)
        x.fill_((me + 1) * k)
        team.replay(graph, wait="stream")
        if not torch.equal(out, torch.full_like(out, want * k)):
            raise AssertionError(f"replay {k} in stream order: {out[:4]} != {want * k}")
    # A tensor moved to other storage (set_) is reduced there; one made strided in place is
    # refused, not read as it was.
    x = torch.ones(1000, device=device, dtype=torch.float32)
    team.all_reduce(x)
    x.set_(torch.full((1000,), float(me + 1), device=device))
    team.all_reduce(x)
    if not torch.equal(x, torch.full_like(x, want)):
        raise AssertionError(f"a tensor moved by set_: {x[:4]} != {want}")
    x.as_strided_((500,), (2,))
    try:
        team.all_reduce(x)
    except BufferError:
        pass
    else:
        raise AssertionError("a tensor made strided in place was reduced")
    if torch.cuda.current_device() != device.index:
        raise AssertionError(
            f"torch's current device is {torch.cuda.current_device()}, set {device.index}"
        )
    print(f"collective: rank {me}: stream order with torch ok", flush=True)


def main():
    mode = sys.argv[1]
    if mode == "numpy":
        device = sycl_rs.Device.native_cpu()
    else:
        # One CUDA GPU per local rank, as torch numbers them.
        import torch

        gpus = [d for d in sycl_rs.devices() if d.backend == "cuda"]
        local = int(os.environ.get("LOCAL_RANK", os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", 0)))
        device = gpus[local % len(gpus)]
        torch.cuda.set_device(local % torch.cuda.device_count())
    if "--mpi4py" in sys.argv:
        from mpi4py import MPI

        ranks = coll.from_mpi4py(MPI.COMM_WORLD, device=device, timeout=60.0)
    else:
        ranks = coll.NodeRanks.from_env(device=device, timeout=60.0)
    team = coll.Team(ranks, buffer_bytes=4096 if mode == "numpy" else None)
    try:
        if mode == "numpy":
            numpy_checks(team)
        else:
            torch_checks(team)
        symmetric_checks(team, mode)
        mismatch_check(ranks, mode)
    except Exception as e:  # noqa: BLE001 - every failure is reported, then the exit code says it
        print(f"collective: rank {team.rank}: FAILED: {type(e).__name__}: {e}", flush=True)
        sys.exit(1)
    print(f"collective: rank {team.rank}: ok ({ranks.device.name})", flush=True)


if __name__ == "__main__":
    main()
