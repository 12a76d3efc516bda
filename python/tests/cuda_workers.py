"""Child processes of test_cuda_interop.py (spawned): PyTorch and CuPy on their own."""

N = 1 << 20  # int32 elements


def torch_producer(to_parent, from_parent):
    import torch

    pad = torch.zeros(3333, dtype=torch.int32, device="cuda")  # so the storage has an offset
    t = torch.arange(N, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    to_parent.put(tuple(t.untyped_storage()._share_cuda_()))
    assert from_parent.get(timeout=120) == "written"
    torch.cuda.synchronize()
    want = -torch.arange(N, dtype=torch.int32, device="cuda")
    to_parent.put(bool(torch.equal(t, want)))
    del pad


def cupy_consumer(raw, offset, nbytes, to_parent):
    import cupy
    import numpy as np

    base = cupy.cuda.runtime.ipcOpenMemHandle(raw)
    try:
        mem = cupy.cuda.UnownedMemory(base + offset, nbytes, owner=None)
        arr = cupy.ndarray((nbytes // 4,), dtype=cupy.uint32, memptr=cupy.cuda.MemoryPointer(mem, 0))
        seen = bool((arr == 0xC0FFEE).all())
        arr[:] = cupy.arange(nbytes // 4, dtype=cupy.uint32)
        cupy.cuda.runtime.deviceSynchronize()
        to_parent.put(seen)
    finally:
        cupy.cuda.runtime.ipcCloseMemHandle(base)


def cupy_producer(to_parent, from_parent):
    import cupy

    nbytes = N * 4
    ptr = cupy.cuda.runtime.malloc(nbytes)
    mem = cupy.cuda.UnownedMemory(ptr, nbytes, owner=None)
    arr = cupy.ndarray((N,), dtype=cupy.int32, memptr=cupy.cuda.MemoryPointer(mem, 0))
    arr[:] = 7
    cupy.cuda.runtime.deviceSynchronize()
    to_parent.put((bytes(cupy.cuda.runtime.ipcGetMemHandle(ptr)), nbytes))
    assert from_parent.get(timeout=120) == "written"
    to_parent.put(bool((arr == 9).all()))
    cupy.cuda.runtime.free(ptr)
