"""NCCL's all-gather and reduce-scatter on a 2-GPU machine, timed as bench_collectives times
ours: each rank's share is size / 2, back-to-back operations between two CUDA events (per-op
mean), the median of 7 batches; eager and captured in a CUDA graph. The all-reduce side of the
comparison is ../shared/tools/collectives_anchor.py.

Run: python3 scripts/nccl_gather_scatter.py   (NCCL_NVLS_ENABLE=0)
"""
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZES = [512, 32 << 10, 256 << 10, 4 << 20, 32 << 20, 256 << 20]
REPS = 7


def timed(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    dist.barrier()
    per = []
    for _ in range(REPS):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(iters):
            fn()
        e.record()
        e.synchronize()
        per.append(s.elapsed_time(e) * 1e3 / iters)
        dist.barrier()
    return statistics.median(per)


def graphed(fn, iters, k=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(k):
            fn()
    return timed(g.replay, max(1, iters // k)) / k


def worker(rank, world):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    for dtype in (torch.bfloat16, torch.float32):
        esz = torch.tensor([], dtype=dtype).element_size()
        for nbytes in SIZES:
            n = nbytes // esz
            part = n // world
            iters = 200 if nbytes <= (1 << 20) else (50 if nbytes <= (32 << 20) else 10)
            full = torch.ones(n, dtype=dtype, device=dev)
            share = torch.ones(part, dtype=dtype, device=dev)
            gather = lambda: dist.all_gather_into_tensor(full, share)
            scatter = lambda: dist.reduce_scatter_tensor(share, full)
            row = {"dtype": str(dtype).split(".")[-1], "bytes": nbytes}
            row["all_gather_us"] = round(timed(gather, iters), 2)
            row["all_gather_graph_us"] = round(graphed(gather, iters), 2)
            row["reduce_scatter_us"] = round(timed(scatter, iters), 2)
            row["reduce_scatter_graph_us"] = round(graphed(scatter, iters), 2)
            if rank == 0:
                print(json.dumps(row), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
