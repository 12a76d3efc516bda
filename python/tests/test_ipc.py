"""IPC between Python ranks: in-process, through multiprocessing (spawn) and channels, and
the errors a bad or dead peer causes."""

import multiprocessing as mp
import pickle

import numpy as np
import pytest

import ipc_workers
import sycl_rs
from ipc_workers import PART
from sycl_rs import ipc

RANKS = 4  # rank 0 and three children
TIMEOUT = 60


def spawn():
    return mp.get_context("spawn")


def rank0(native):
    q = sycl_rs.Queue(native)
    mem = sycl_rs.malloc_device(RANKS * PART * 4, q)
    mem.fill(0)
    ev = sycl_rs.Event(q, enable_ipc=True)
    return q, mem, ev, ipc.memory.get(mem), ipc.event.get(ev)


def verify(mem, ranks):
    got = np.frombuffer(mem.copy_to(), dtype=np.uint32).reshape(RANKS, PART)
    for rank in ranks:
        want = np.full(PART, rank * 1000 + 7, dtype=np.uint32)
        want[0] = rank
        assert np.array_equal(got[rank], want), f"rank {rank}"
    assert (got[0] == 0).all(), "rank 0's part is untouched"


def join_all(procs):
    for p in procs:
        p.join(TIMEOUT)
        assert p.exitcode == 0, f"{p.name} exit code {p.exitcode}"


def test_ranks_share_a_buffer_and_an_event_through_multiprocessing(native):
    q, mem, ev, mh, eh = rank0(native)
    assert mh.descriptor_count > 0  # native CPU memory travels with its memfd
    procs = [
        spawn().Process(target=ipc_workers.write_part, args=(r, mh, eh), name=f"rank{r}")
        for r in range(1, RANKS)
    ]
    for p in procs:
        p.start()
    assert ev.wait_signal_count(RANKS - 1, timeout=TIMEOUT), "every rank signals"
    join_all(procs)
    verify(mem, range(1, RANKS))
    ipc.memory.put(mh)
    ipc.event.put(eh)


def test_handles_travel_through_a_multiprocessing_queue(native):
    q, mem, ev, mh, eh = rank0(native)
    ctx = spawn()
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=ipc_workers.write_part_from_queue, args=(r, queue))
        for r in range(1, RANKS)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        queue.put((mh, eh))
    assert ev.wait_signal_count(RANKS - 1, timeout=TIMEOUT)
    join_all(procs)
    verify(mem, range(1, RANKS))


def test_ranks_over_a_channel(native):
    q, mem, ev, mh, eh = rank0(native)
    listener = ipc.Listener()
    procs = [
        spawn().Process(target=ipc_workers.over_channel, args=(listener.name, r))
        for r in range(1, RANKS)
    ]
    for p in procs:
        p.start()
    channels = []
    for _ in procs:
        ch = listener.accept(timeout=TIMEOUT)
        ch.set_recv_timeout(TIMEOUT)
        pid, uid, gid = ch.peer_credentials()
        assert pid in {p.pid for p in procs}
        ch.send_handle(mh)
        ch.send_handle(eh)
        channels.append(ch)
    assert ev.wait_signal_count(RANKS - 1, timeout=TIMEOUT)
    assert all(ch.recv() == b"done" for ch in channels)
    join_all(procs)
    verify(mem, range(1, RANKS))


def test_a_dead_peer_is_a_timeout_not_a_hang(native):
    q, mem, ev, mh, eh = rank0(native)
    p = spawn().Process(target=ipc_workers.open_then_die, args=(eh,))
    p.start()
    p.join(TIMEOUT)
    assert p.exitcode == 3
    assert not ev.wait_signal_count(1, timeout=0.5)


def test_dpctl_equivalent(native):
    # dpctl: h = IPCMemoryHandle(mem); data = h.to_bytes()
    #        m = IPCMemoryHandle.open(data, device, nbytes); close_mapping(m)
    q = sycl_rs.Queue(native)
    mem = sycl_rs.malloc_device(4096, q)
    mem.copy_from(bytes(range(256)) * 16)
    h = ipc.memory.get(mem)
    data = h.to_bytes()
    m = ipc.memory.open(data, native, 1024)
    assert m.nbytes == 1024 and m.opened
    assert m.copy_to(nbytes=256) == bytes(range(256))
    ipc.memory.close(m)
    with pytest.raises(sycl_rs.InvalidError):
        m.copy_to()
    with pytest.raises(sycl_rs.InvalidError):
        ipc.memory.open(data, native, 8192)  # more than the handle names
    ipc.memory.put(h)


def test_pickle_refuses_handles_with_descriptors(native):
    q, mem, ev, mh, eh = rank0(native)
    for h in (mh, eh):
        with pytest.raises(TypeError, match="descriptors"):
            pickle.dumps(h)


def test_bad_handles_are_errors(native):
    q, mem, ev, mh, eh = rank0(native)
    data = bytearray(mh.to_bytes())
    for bad in (b"", b"garbage" * 30, bytes(data[:-1]), bytes(data[:40]) + b"\x00" + bytes(data[41:])):
        with pytest.raises(sycl_rs.InvalidError):
            ipc.memory.open(bad, native)
    with pytest.raises(sycl_rs.InvalidError):
        ipc.memory.open(eh, native)  # an event handle is not memory
    with pytest.raises(sycl_rs.InvalidError):
        ipc.event.open(mh, device=native)
    with pytest.raises(TypeError):
        ipc.memory.open(12345, native)
    ipc.memory.put(mh)
    with pytest.raises(sycl_rs.InvalidError):
        ipc.memory.put(mh)  # already put


def test_handle_properties(native):
    q, mem, ev, mh, eh = rank0(native)
    import os

    assert mh.kind == "memory" and eh.kind == "event"
    assert mh.backend == "native_cpu" and mh.exporter_pid == os.getpid()
    assert mh.object_size == mem.nbytes and eh.object_size == 0
    assert bytes(mh) == mh.to_bytes()
    again = ipc.Handle.from_bytes(mh.to_bytes())
    assert again.to_bytes() == mh.to_bytes() and not again.carries_descriptors


def test_physical_memory_exports(native):
    q = sycl_rs.Queue(native)
    if not native.has_aspect("ext_oneapi_ipc_physical_memory"):
        pytest.skip("no ext_oneapi_ipc_physical_memory")
    size = sycl_rs.PhysicalMemory.granularity(q)
    pm = sycl_rs.PhysicalMemory(q, size, enable_ipc=True)
    h = ipc.physical_memory.get(pm)
    assert h.kind == "physical_memory" and h.object_size == size
    opened = ipc.physical_memory.open(h, queue=q)
    assert opened.nbytes == size
    ipc.physical_memory.put(h)


def test_raw_cuda_export_needs_cuda_memory(native):
    mem = sycl_rs.malloc_device(16, sycl_rs.Queue(native))
    with pytest.raises(sycl_rs.BackendMismatchError):
        ipc.memory.get_cuda_raw(mem)
    with pytest.raises(sycl_rs.SyclError):
        ipc.memory.open_cuda_raw(bytes(64), 16, native)
