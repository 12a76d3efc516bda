"""``ipc.memory``: USM memory shared between processes.

The equivalent of dpctl's ``IPCMemoryHandle``::

    dpctl                                      sycl_rs
    h = IPCMemoryHandle(mem)                   h = ipc.memory.get(mem)
    data = h.to_bytes()                        data = h.to_bytes()
    m = IPCMemoryHandle.open(data, dev, n)     m = ipc.memory.open(data, dev, n)
    close_mapping(m)                           ipc.memory.close(m)

CUDA memory of other programs: ``open_cuda_raw`` (a raw 64-byte ``cudaIpcMemHandle_t``, e.g.
CuPy's ``ipcGetMemHandle``), ``open_torch`` (what PyTorch's ``storage._share_cuda_()``
returns); and ``get_cuda_raw`` exports sycl-rs CUDA memory for them.
"""

from .._native import memory_close as close
from .._native import memory_get as get
from .._native import memory_get_cuda_raw as get_cuda_raw
from .._native import memory_open as open
from .._native import memory_open_cuda_raw as open_cuda_raw
from .._native import memory_put as put

__all__ = ["close", "get", "get_cuda_raw", "open", "open_cuda_raw", "open_torch", "put"]

_CUDA_IPC_HANDLE_SIZE = 64
# c10's CUDACachingAllocator: a version byte (2 up to torch 2.12, 3 from 2.13) and a type
# byte before the handle: 'c' for a cudaMalloc block; 'e' (expandable segments) is not a
# cudaIpcMemHandle_t at all.
_TORCH_CUDA_MALLOC = ord("c")


def _torch_raw_handle(handle: bytes) -> bytes:
    if len(handle) == _CUDA_IPC_HANDLE_SIZE:
        return handle  # torch before the versioned format
    if len(handle) == _CUDA_IPC_HANDLE_SIZE + 2 and handle[0] in (2, 3):
        if handle[1] != _TORCH_CUDA_MALLOC:
            from .. import FeatureNotSupportedError

            raise FeatureNotSupportedError(
                f"PyTorch handle of type {chr(handle[1])!r}: only cudaMalloc blocks ('c') open "
                "here (expandable segments: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False "
                "in the exporter)"
            )
        return handle[2:]
    from .. import InvalidError

    raise InvalidError(f"not a PyTorch CUDA IPC handle ({len(handle)} bytes)")


def open_torch(share, device=None, *, context=None, queue=None):
    """Opens a CUDA tensor storage that another process shared with PyTorch.

    ``share`` is the tuple ``storage._share_cuda_()`` returned there: (device index, handle,
    storage size in bytes, storage offset in bytes, ...). The result is the storage's bytes,
    without a copy; close it with ``close``. The exporting process keeps the tensor alive
    meanwhile (as with PyTorch's own sharing).
    """
    device_index, handle, size_bytes, offset_bytes = share[0], share[1], share[2], share[3]
    raw = _torch_raw_handle(bytes(handle))
    if device is None and queue is None and context is None:
        device = f"cuda:{int(device_index)}"
    return open_cuda_raw(
        raw, int(size_bytes), device, int(offset_bytes), context=context, queue=queue
    )
