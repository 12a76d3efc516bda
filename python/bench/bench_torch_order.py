"""How a torch program's host thread fares around sycl_rs collectives on a CUDA GPU: the
host time of a loop that queues GPU work and all-reduces its result each step, beside the
same loop's GPU time, in one run.

    python python/bench/bench_torch_order.py [--steps N]

A team of one rank (this process, cuda:0): no peer to meet, so the figures are the calls'
own costs, not the ranks' (a GPU shared by two ranks time-slices between them). Each step
queues about 1 ms of GPU work (``torch.cuda._sleep``) and a write of the tensor, then
all-reduces it:

- ``host sync``: the tensor wrapped with ``from_dlpack(.., sync="host")`` (the host waits for
  torch's queued work) and a call that waits on the host (``wait=True``);
- ``stream order``: the operand taken as the team does (``sync="queue"``: the team's stream
  waits for torch's, on the GPU) and ``wait="stream"`` (torch's stream waits for the team's).

Rows: host seconds per step until the loop returns, and until the GPU finished. Where the
host waits, the two are the same (the host cannot run ahead of the GPU); in stream order the
host's is the calls' own cost and the GPU runs behind it. Exits 0 either way; checks the
result each run.
"""

import sys
import time
import uuid

import sycl_rs
import sycl_rs.collective as coll


def main():
    try:
        import torch
    except ImportError:
        print("bench_torch_order: no torch here")
        return
    gpus = sycl_rs.devices("cuda:*")
    if not gpus or not torch.cuda.is_available():
        print("bench_torch_order: no CUDA device")
        return
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 50
    device = torch.device("cuda", gpus[0].index)
    torch.cuda.set_device(device)
    ranks = coll.NodeRanks.join(0, 1, f"bench-torch-order/{uuid.uuid4().hex}", device=gpus[0])
    team = coll.Team(ranks)
    x = torch.zeros(256, dtype=torch.bfloat16, device=device)  # 512 B

    def host_sync():
        mem = sycl_rs.from_dlpack(x, team.queue, sync="host")
        team.all_reduce(mem, dtype="bfloat16", wait=True)

    def stream_order():
        team.all_reduce(x, wait="stream")

    for name, call in [("host sync", host_sync), ("stream order", stream_order)]:
        for warm in (True, False):
            n = 3 if warm else steps
            torch.cuda.synchronize()
            start = time.perf_counter()
            for k in range(n):
                torch.cuda._sleep(2_000_000)  # about 1 ms of GPU time
                x.fill_(k)
                call()
            host = (time.perf_counter() - start) / n * 1e3
            torch.cuda.synchronize()
            total = (time.perf_counter() - start) / n * 1e3
        if x[0].item() != steps - 1:
            raise AssertionError(f"{name}: {x[0].item()} != {steps - 1}")
        print(
            f'{{"loop": "{name}", "steps": {steps}, "host_ms_per_step": {host:.3f}, '
            f'"gpu_done_ms_per_step": {total:.3f}}}',
            flush=True,
        )
    # The calls alone, the GPU otherwise idle: us per call until the GPU finished.
    calls = [
        ("host sync", host_sync),
        ("wait=True", lambda: team.all_reduce(x)),
        ('wait="stream"', lambda: team.all_reduce(x, wait="stream")),
    ]
    for name, call in calls:
        for _ in range(20):
            call()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps * 10):
            call()
        torch.cuda.synchronize()
        us = (time.perf_counter() - start) / (steps * 10) * 1e6
        print(f'{{"call": "{name}", "us_per_call": {us:.1f}}}', flush=True)


if __name__ == "__main__":
    main()
