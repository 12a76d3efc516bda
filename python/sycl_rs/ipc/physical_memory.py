"""``ipc.physical_memory``: physical memory objects shared between processes.

The exporter makes ``PhysicalMemory(queue, nbytes, enable_ipc=True)`` and sends ``get(pm)``;
a peer opens it and maps it into a range of its own::

    pm = ipc.physical_memory.open(handle, queue=q)
    mem = pm.map(sycl_rs.VirtualRange(q, pm.nbytes))   # a Memory over the same bytes
    mem.copy_to(); numpy.from_dlpack(mem); mem.unmap()
"""

from .._native import physical_memory_get as get
from .._native import physical_memory_open as open
from .._native import physical_memory_put as put

__all__ = ["get", "open", "put"]
