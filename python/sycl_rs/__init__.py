"""sycl-rs for Python: devices, queues, USM memory and zero-copy IPC between ranks.

A thin layer over the Rust crate ``sycl`` (sycl-rs): the same objects, the same checks, the
same errors (``SyclError`` and one subclass per SYCL error code, with the code's name in
``errc``). Memory crosses to NumPy, PyTorch and CuPy without copies through DLPack, both ways
(``numpy.from_dlpack(mem)``, ``sycl_rs.from_dlpack(tensor)``).

>>> import sycl_rs
>>> q = sycl_rs.Queue(sycl_rs.Device.native_cpu())
>>> mem = sycl_rs.malloc_device(16, q)
>>> mem.fill(7)
>>> mem.copy_to()[:4]
b'\\x07\\x07\\x07\\x07'
"""

from ._native import (
    AccessorError,
    ArrayView,
    BackendMismatchError,
    BuildError,
    Context,
    Device,
    Event,
    EventError,
    FeatureNotSupportedError,
    InvalidError,
    KernelArgumentError,
    KernelError,
    KernelNotSupportedError,
    Memory,
    MemoryAllocationError,
    NdRangeError,
    PhysicalMemory,
    Platform,
    PlatformError,
    ProfilingError,
    Queue,
    RuntimeError,
    SyclError,
    VirtualRange,
    devices,
    from_dlpack,
    get_mem_granularity,
    malloc_device,
    malloc_host,
    malloc_shared,
    platforms,
)
from . import collective, ipc

__all__ = [
    "AccessorError",
    "ArrayView",
    "BackendMismatchError",
    "BuildError",
    "Context",
    "Device",
    "Event",
    "EventError",
    "FeatureNotSupportedError",
    "InvalidError",
    "KernelArgumentError",
    "KernelError",
    "KernelNotSupportedError",
    "Memory",
    "MemoryAllocationError",
    "NdRangeError",
    "PhysicalMemory",
    "Platform",
    "PlatformError",
    "ProfilingError",
    "Queue",
    "RuntimeError",
    "SyclError",
    "VirtualRange",
    "devices",
    "from_dlpack",
    "get_mem_granularity",
    "collective",
    "ipc",
    "malloc_device",
    "malloc_host",
    "malloc_shared",
    "platforms",
]
