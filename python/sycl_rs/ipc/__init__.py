"""Inter-process communication: share USM memory, physical memory and events between
processes on one node without copies (``sycl_ext_oneapi_inter_process_communication``).

One process calls ``get`` and sends the handle to the others, which ``open`` it::

    h = sycl_rs.ipc.memory.get(mem)            # exporter
    channel.send_handle(h)                     # or multiprocessing, or h.to_bytes()
    peer = sycl_rs.ipc.memory.open(h, device)  # importer, zero-copy
    ...
    sycl_rs.ipc.memory.close(peer)

Handles that travel with descriptors (native CPU, OpenCL, Level Zero) go through a
``Channel`` or ``multiprocessing`` (this module registers a reducer with its pickler that
passes the descriptors); plain ``pickle`` refuses them. CUDA handles are bytes only.
"""

import multiprocessing.reduction as _reduction
import os as _os
import weakref as _weakref

from .._native import Channel, Handle, Listener
from . import event, memory, physical_memory

__all__ = ["Channel", "Handle", "Listener", "event", "memory", "physical_memory"]


def _close_all(fds):
    for fd in fds:
        try:
            _os.close(fd)
        except OSError:
            pass


def _rebuild_handle(data, dup_fds):
    fds = [d.detach() for d in dup_fds]
    try:
        return Handle._from_bytes_and_descriptors(data, fds)
    finally:
        _close_all(fds)


def _reduce_handle(handle):
    if handle.descriptor_count == 0:
        return (Handle.from_bytes, (handle.to_bytes(),))
    fds = handle._duplicate_descriptors()
    # Our duplicates live as long as the handle object: multiprocessing may pass them to a
    # child only when it starts it, after this reducer returned.
    _weakref.finalize(handle, _close_all, fds)
    return (_rebuild_handle, (handle.to_bytes(), [_reduction.DupFd(fd) for fd in fds]))


_reduction.ForkingPickler.register(Handle, _reduce_handle)
