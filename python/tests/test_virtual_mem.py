"""Virtual memory from Python: reserve, map, access modes, unmap; and a second process that
opens a physical memory handle, maps it and reads and writes it (native CPU)."""

import gc
import multiprocessing as mp

import numpy as np
import pytest

import ipc_workers
import sycl_rs
from sycl_rs import ipc

TIMEOUT = 60


@pytest.fixture
def q(native):
    if not native.has_aspect("ext_oneapi_virtual_mem"):
        pytest.skip("no ext_oneapi_virtual_mem")
    return sycl_rs.Queue(native)


def test_map_use_and_unmap(q):
    g = sycl_rs.get_mem_granularity(q.device)
    assert g == sycl_rs.PhysicalMemory.granularity(q) and g > 0
    assert sycl_rs.get_mem_granularity(q.device, q.context, "recommended") % g == 0
    pm = sycl_rs.PhysicalMemory(q, 2 * g)
    vr = sycl_rs.VirtualRange(q, 4 * g)
    assert vr.nbytes == 4 * g and vr.ptr % g == 0
    mem = pm.map(vr, range_offset=g)
    assert mem.mapped and mem.nbytes == 2 * g and mem.ptr == vr.ptr + g
    assert mem.access_mode == "read_write" and mem.kind == "device"
    mem.fill(0x11)
    mem.copy_from(np.arange(16, dtype=np.uint32), offset=g)
    assert np.array_equal(np.frombuffer(mem.copy_to(offset=g, nbytes=64), np.uint32), np.arange(16))
    # The same physical memory mapped a second time shows the same bytes.
    again = pm.map(vr, g, range_offset=3 * g, offset=g)
    assert np.array_equal(np.frombuffer(again.copy_to(nbytes=64), np.uint32), np.arange(16))
    # A NumPy view of the mapping (the host reaches native CPU mappings).
    arr = np.from_dlpack(mem.as_array("uint32"))
    assert arr.ctypes.data == mem.ptr and arr[0] == 0x11111111
    arr[0] = 5
    assert mem.copy_to(nbytes=4) == np.uint32(5).tobytes()
    # Access modes: refused while the NumPy view holds it (it would fault under NumPy).
    with pytest.raises(sycl_rs.InvalidError, match="[Vv]iew"):
        mem.set_access_mode("read")
    del arr
    gc.collect()
    mem.set_access_mode("read")
    assert mem.access_mode == "read" and mem.read_only
    assert mem.copy_to(nbytes=4) == np.uint32(5).tobytes()
    with pytest.raises(sycl_rs.InvalidError):
        mem.fill(0)
    with pytest.raises(BufferError):
        np.from_dlpack(mem)  # a read mapping cannot be held by a consumer
    mem.set_access_mode("none")
    with pytest.raises(sycl_rs.InvalidError):
        mem.copy_to(nbytes=4)
    mem.set_access_mode("read_write")
    mem.fill(0x22, nbytes=4)
    # Unmap while a consumer holds the mapping: refused now, unmapped with the consumer
    # (as free() of USM), and the object is done with it.
    arr = np.from_dlpack(mem)
    with pytest.raises(sycl_rs.InvalidError, match="reference"):
        mem.unmap()
    with pytest.raises(sycl_rs.InvalidError):
        mem.copy_to()
    assert arr[0] == 0x22  # still mapped for the consumer
    arr[1] = 1
    del arr
    gc.collect()
    with pytest.raises(sycl_rs.InvalidError):
        mem.unmap()
    again.unmap()  # no other reference: unmapped now
    with pytest.raises(sycl_rs.InvalidError):
        again.copy_to()


def test_bad_mappings_are_errors(q):
    g = sycl_rs.PhysicalMemory.granularity(q)
    pm = sycl_rs.PhysicalMemory(q, g)
    vr = sycl_rs.VirtualRange(q.context, 2 * g)
    for bad in (
        lambda: pm.map(vr, 2 * g),  # more than the physical memory
        lambda: pm.map(vr, g, range_offset=2 * g),  # outside the range
        lambda: pm.map(vr, g, offset=g),
        lambda: pm.map(vr, 0),
        lambda: pm.map(vr, g, mode="write"),
        lambda: sycl_rs.VirtualRange(q, g + 1),
        lambda: sycl_rs.VirtualRange(q, 0),
        lambda: sycl_rs.get_mem_granularity(q.device, mode="largest"),
    ):
        with pytest.raises(sycl_rs.InvalidError):
            bad()
    with pytest.raises(TypeError):
        sycl_rs.VirtualRange("context", g)
    mem = pm.map(vr, g)
    with pytest.raises(sycl_rs.InvalidError, match="unmap"):
        mem.free()
    with pytest.raises(sycl_rs.InvalidError):
        ipc.memory.close(mem)
    usm = sycl_rs.malloc_device(16, q)
    with pytest.raises(sycl_rs.InvalidError, match="mapping"):
        usm.set_access_mode("read")
    with pytest.raises(sycl_rs.InvalidError):
        usm.unmap()
    # The range and the physical memory may go first: the mapping keeps them.
    del vr, pm
    gc.collect()
    mem.fill(3)
    assert mem.copy_to(nbytes=2) == b"\x03\x03"


def test_another_process_maps_physical_memory(q):
    if not q.device.has_aspect("ext_oneapi_ipc_physical_memory"):
        pytest.skip("no ext_oneapi_ipc_physical_memory")
    g = sycl_rs.PhysicalMemory.granularity(q)
    pm = sycl_rs.PhysicalMemory(q, 2 * g, enable_ipc=True)
    vr = sycl_rs.VirtualRange(q, 2 * g)
    mem = pm.map(vr)
    mem.copy_from(np.arange(2 * g // 4, dtype=np.uint32))
    ev = sycl_rs.Event(q, enable_ipc=True)
    h, eh = ipc.physical_memory.get(pm), ipc.event.get(ev)
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=ipc_workers.map_physical, args=(h, eh, g))
    p.start()
    assert ev.wait_signal_count(1, timeout=TIMEOUT), "the child signals"
    p.join(TIMEOUT)
    assert p.exitcode == 0
    got = np.frombuffer(mem.copy_to(), np.uint32)
    # The child doubled the second granule, through a queue copy and through NumPy.
    want = np.arange(2 * g // 4, dtype=np.uint32)
    want[g // 4 :] *= 2
    want[g // 4] = 0xC0FFEE
    assert np.array_equal(got, want)
    ipc.physical_memory.put(h)
    ipc.event.put(eh)
