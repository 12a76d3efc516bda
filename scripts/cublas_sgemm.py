"""cuBLAS's FP32 sgemm through torch, as information beside bench-kernels' sgemm row.

Square row-major matrices of the bench's sizes; TF32 off (true FP32, as our kernels compute);
the median of 50 back-to-back multiplies timed with CUDA events, after a warm-up.

    python3 scripts/cublas_sgemm.py [n ...]     # default: 1024 2048
"""

import statistics
import sys

import torch


def gflops(n: int) -> float:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a = torch.randn(n, n, device="cuda", dtype=torch.float32)
    b = torch.randn(n, n, device="cuda", dtype=torch.float32)
    c = torch.empty(n, n, device="cuda", dtype=torch.float32)
    for _ in range(5):
        torch.matmul(a, b, out=c)
    torch.cuda.synchronize()
    times = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b, out=c)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2.0 * n**3 / statistics.median(times) / 1e9


if __name__ == "__main__":
    sizes = [int(s) for s in sys.argv[1:]] or [1024, 2048]
    print(f"cuBLAS FP32 (torch {torch.__version__}, {torch.cuda.get_device_name()})")
    for n in sizes:
        print(f"cublas sgemm {n} x {n}: {gflops(n):.0f} GFLOP/s")
