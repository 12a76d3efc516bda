"""What the child ranks of test_ipc.py run (spawned: a fresh interpreter imports this)."""

import numpy as np

import sycl_rs
from sycl_rs import ipc

PART = 1024  # uint32 elements per rank


def write_part(rank, memory_handle, event_handle):
    """Open rank 0's buffer and event, write our part, signal."""
    dev = sycl_rs.Device.native_cpu()
    q = sycl_rs.Queue(dev)
    mem = ipc.memory.open(memory_handle, dev)
    ev = ipc.event.open(event_handle, queue=q)
    mem.copy_from(np.full(PART, rank * 1000 + 7, dtype=np.uint32), offset=rank * PART * 4)
    # Through DLPack too: NumPy sees the very same bytes.
    view = np.from_dlpack(mem.as_array("uint32"))
    view[rank * PART] = rank  # first element of our part
    del view
    q.signal_event(ev)
    q.wait()
    ipc.memory.close(mem)


def write_part_from_queue(rank, queue):
    memory_handle, event_handle = queue.get(timeout=60)
    write_part(rank, memory_handle, event_handle)


def over_channel(name, rank):
    ch = ipc.Channel.connect(name)
    ch.set_recv_timeout(60)
    memory_handle = ch.recv_handle()
    event_handle = ch.recv_handle()
    assert memory_handle.carries_descriptors
    write_part(rank, memory_handle, event_handle)
    ch.send(b"done")


def open_then_die(event_handle):
    dev = sycl_rs.Device.native_cpu()
    ipc.event.open(event_handle, device=dev)
    import os

    os._exit(3)  # dies without signalling


def map_physical(handle, event_handle, granularity):
    """Open rank 0's physical memory, map it here, double its second granule, signal."""
    dev = sycl_rs.Device.native_cpu()
    q = sycl_rs.Queue(dev)
    pm = ipc.physical_memory.open(handle, queue=q)
    assert pm.nbytes == 2 * granularity
    vr = sycl_rs.VirtualRange(q, granularity)
    mem = pm.map(vr, offset=granularity, queue=q)  # the second granule only
    assert mem.nbytes == granularity
    part = np.frombuffer(mem.copy_to(), dtype=np.uint32)
    mem.copy_from(part * 2)
    view = np.from_dlpack(mem.as_array("uint32"))  # NumPy over the mapping: the same bytes
    view[0] = 0xC0FFEE
    del view
    q.signal_event(ipc.event.open(event_handle, queue=q))
    q.wait()
    mem.unmap()
