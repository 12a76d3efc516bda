"""sycl_rs.from_dlpack: another library's tensor as sycl_rs memory, zero-copy, kept alive, and
every tensor it cannot wrap refused with an error (the capsule then goes back to its producer)."""

import gc
import sys
import weakref

import numpy as np
import pytest

import sycl_rs


def test_numpy_round_trip_is_zero_copy(native):
    a = np.arange(64, dtype=np.uint32)
    mem = sycl_rs.from_dlpack(a)
    assert mem.ptr == a.ctypes.data and mem.nbytes == a.nbytes
    assert mem.foreign and not mem.read_only and not mem.opened
    assert mem.device == native and mem.kind == "unknown"
    # Queue commands write NumPy's own bytes.
    mem.fill(np.uint32(0xDEADBEEF).tobytes(), offset=8, nbytes=16)
    assert (a[2:6] == 0xDEADBEEF).all() and a[1] == 1 and a[6] == 6
    mem.copy_from(np.full(4, 7, np.uint32), offset=0)
    assert list(a[:4]) == [7, 7, 7, 7]
    # And NumPy's writes are what copies read.
    a[10] = 12345
    assert np.frombuffer(mem.copy_to(offset=40, nbytes=4), np.uint32)[0] == 12345
    # Device copies between sycl-rs memory and the wrapper.
    usm = sycl_rs.malloc_device(a.nbytes, mem.queue)
    usm.copy_from(mem)
    a[:] = 0
    mem.copy_from(usm)
    assert a[10] == 12345 and a[4] == 0xDEADBEEF and a[2] == 7


def test_multidimensional_and_offset_views(native):
    a = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    mem = sycl_rs.from_dlpack(a[1])  # a contiguous slice: data at an offset into the block
    assert mem.ptr == a[1].ctypes.data and mem.nbytes == 12 * 8
    mem.fill(np.float64(-1).tobytes())
    assert (a[1] == -1).all() and (a[0] == np.arange(12).reshape(3, 4)).all()
    # 0-d and empty tensors.
    s = np.array(3.5, dtype=np.float32)
    assert sycl_rs.from_dlpack(s).copy_to() == s.tobytes()
    assert sycl_rs.from_dlpack(np.empty((0, 5), np.int16)).nbytes == 0


def test_reexport_goes_back_to_numpy(native):
    a = np.zeros(16, dtype=np.int32)
    mem = sycl_rs.from_dlpack(a)
    b = np.from_dlpack(mem.as_array("int32"))
    assert b.ctypes.data == a.ctypes.data
    mem.fill(np.int32(9).tobytes())
    assert (b == 9).all()


def test_the_producer_stays_alive_while_the_memory_lives(native):
    a = np.arange(1 << 16, dtype=np.uint8)
    base_ref = weakref.ref(a)
    ptr = a.ctypes.data
    mem = sycl_rs.from_dlpack(a)
    del a
    gc.collect()
    assert base_ref() is not None, "the managed tensor keeps the array alive"
    mem.fill(0x5A)
    assert mem.copy_to(nbytes=4) == b"\x5a" * 4 and mem.ptr == ptr
    # A range taken by a DLPack export keeps it alive past the Memory object too.
    view = np.from_dlpack(mem)
    del mem
    gc.collect()
    assert base_ref() is not None and view.ctypes.data == ptr and (view == 0x5A).all()
    del view
    gc.collect()
    assert base_ref() is None, "the deleter ran once the last user went"


def test_deleter_runs_once(native):
    # A producer whose capsule is NumPy's; the array is released exactly once: its refcount
    # comes back to where it was.
    a = np.ones(32, dtype=np.float32)
    before = sys.getrefcount(a)
    for _ in range(200):
        sycl_rs.from_dlpack(a).fill(1)
    gc.collect()
    assert sys.getrefcount(a) == before


def test_read_only_arrays_refuse_writes(native):
    a = np.arange(8, dtype=np.uint8)
    a.flags.writeable = False
    mem = sycl_rs.from_dlpack(a)
    assert mem.read_only and mem.ptr == a.ctypes.data
    assert mem.copy_to() == bytes(range(8))
    for write in (lambda: mem.fill(0), lambda: mem.copy_from(b"\x00" * 8)):
        with pytest.raises(sycl_rs.InvalidError, match="read-only"):
            write()
    assert (a == np.arange(8)).all()
    # Re-exported read-only: NumPy gets a read-only array; a legacy capsule cannot say so.
    back = np.from_dlpack(mem)
    assert not back.flags.writeable
    with pytest.raises(BufferError, match="read-only"):
        mem.__dlpack__()


def test_non_contiguous_arrays_are_refused(native):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    for bad in (a[:, ::2], a.T, a[::2]):
        with pytest.raises(BufferError, match="compact row-major"):
            sycl_rs.from_dlpack(bad)
    # The refused capsule went back to its producer: the array is still fine and wrappable.
    assert sycl_rs.from_dlpack(np.ascontiguousarray(a.T)).nbytes == 256


class FakeProducer:
    """Hands out a real NumPy capsule but claims another device, or misbehaves."""

    def __init__(self, device, capsule=None):
        self.device = device
        self.capsule = capsule
        self.array = np.zeros(4, np.float32)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        if self.capsule is not None:
            return self.capsule
        return self.array.__dlpack__(**kwargs)


def test_sync_is_host_queue_or_none(native):
    q = sycl_rs.Queue(native)
    assert q.cuda_stream is None
    a = np.arange(4, dtype=np.float32)
    # Host memory has no stream to order: the same wrap either way.
    for sync in ["queue", "none"]:
        m = sycl_rs.from_dlpack(a, q, sync=sync)
        assert m.ptr == a.ctypes.data and m.queue.device == q.device
    with pytest.raises(ValueError, match="sync"):
        sycl_rs.from_dlpack(a, sync="device")


def test_unsupported_producers_are_errors(native):
    with pytest.raises(sycl_rs.BackendMismatchError):
        sycl_rs.from_dlpack(FakeProducer((4, 0)))  # kDLOpenCL
    with pytest.raises(sycl_rs.BackendMismatchError):
        sycl_rs.from_dlpack(FakeProducer((10, 0)))  # kDLROCM
    with pytest.raises(BufferError, match="device"):
        sycl_rs.from_dlpack(FakeProducer((1, 3)))  # says CPU 3, the capsule says CPU 0
    with pytest.raises(BufferError, match="capsule"):
        sycl_rs.from_dlpack(FakeProducer((1, 0), capsule=object()))
    with pytest.raises(TypeError):
        sycl_rs.from_dlpack(b"bytes have no __dlpack__")
    # A consumed capsule is not taken twice.
    cap = np.zeros(4).__dlpack__(max_version=(1, 0))
    sycl_rs.from_dlpack(FakeProducer((1, 0), capsule=cap))
    with pytest.raises(BufferError, match="consumed"):
        sycl_rs.from_dlpack(FakeProducer((1, 0), capsule=cap))


def test_foreign_memory_is_not_freed_or_exported(native):
    a = np.zeros(64, np.uint8)
    mem = sycl_rs.from_dlpack(a)
    with pytest.raises(sycl_rs.InvalidError, match="producer"):
        mem.free()
    with pytest.raises(sycl_rs.InvalidError, match="foreign"):
        sycl_rs.ipc.memory.get(mem)
    mem.fill(1)  # still usable
    assert (a == 1).all()


def test_queues_of_the_wrong_backend_or_device_are_refused(native):
    # A CUDA tensor (as its producer says) with a native CPU queue: refused before the capsule
    # is even asked for.
    with pytest.raises(sycl_rs.BackendMismatchError):
        sycl_rs.from_dlpack(FakeProducer((2, 0)), sycl_rs.Queue(native))
    others = [d for d in sycl_rs.devices() if not d.has_aspect("usm_system_allocations")]
    if not others:
        pytest.skip("every device here has usm_system_allocations")
    a = np.zeros(16, np.uint8)
    with pytest.raises(sycl_rs.FeatureNotSupportedError):
        sycl_rs.from_dlpack(a, sycl_rs.Queue(others[0]))
    assert (a == 0).all()


def test_sycl_rs_memory_is_not_wrapped_again(native):
    q = sycl_rs.Queue(native)
    m = sycl_rs.malloc_device(64, q)
    with pytest.raises(sycl_rs.InvalidError, match="own owner"):
        sycl_rs.from_dlpack(m, q)
    # The capsule taken for it was released (its deleter ran): nothing holds the memory.
    gc.collect()
    m.free()


def test_zero_sized_elements_are_refused(native):
    """Issue 29, item 1: no memory of zero-sized elements exists in sycl-rs, Python included. A
    DLPack tensor of 0-bit elements is refused (here a real NumPy capsule whose dtype says 0
    bits), and `as_array` knows only dtypes of one byte or more."""
    import ctypes

    cap = np.zeros(4, np.float32).__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    tensor = get(cap, b"dltensor")
    # DLTensor: data (8 bytes), device (8), ndim (4), then dtype {code u8, bits u8, lanes u16}.
    bits = ctypes.c_uint8.from_address(tensor + 21)
    assert bits.value == 32
    bits.value = 0
    with pytest.raises(BufferError, match="0-bit"):
        sycl_rs.from_dlpack(FakeProducer((1, 0), capsule=cap))
    mem = sycl_rs.malloc_shared(16, sycl_rs.Queue(native))
    with pytest.raises(TypeError, match="dtype"):
        mem.as_array("void")
