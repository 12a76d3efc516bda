"""USM memory: allocation, copies, fills, DLPack (zero-copy, lifetime) and errors."""

import gc

import numpy as np
import pytest

import sycl_rs
from conftest import require

KINDS = [
    ("device", sycl_rs.malloc_device, "usm_device_allocations"),
    ("host", sycl_rs.malloc_host, "usm_host_allocations"),
    ("shared", sycl_rs.malloc_shared, "usm_shared_allocations"),
]


@pytest.mark.parametrize("kind,malloc,aspect", KINDS, ids=[k[0] for k in KINDS])
def test_copies_round_trip(device, kind, malloc, aspect):
    require(device, aspect)
    q = sycl_rs.Queue(device)
    mem = malloc(4096, q)
    assert mem.nbytes == len(mem) == 4096 and mem.kind == kind and mem.device == device
    src = np.arange(1024, dtype=np.uint32)
    mem.copy_from(src)
    assert np.array_equal(np.frombuffer(mem.copy_to(), dtype=np.uint32), src)
    # Into a caller's buffer, at an offset, and from bytes.
    out = np.zeros(16, dtype=np.uint32)
    mem.copy_to(out, offset=64)
    assert np.array_equal(out, src[16:32])
    mem.copy_from(b"\xff" * 8, offset=8)
    assert mem.copy_to(offset=4, nbytes=16) == src[1:2].tobytes() + b"\xff" * 8 + src[4:5].tobytes()


def test_fills(device):
    require(device, "usm_device_allocations")
    q = sycl_rs.Queue(device)
    mem = sycl_rs.malloc_device(64, q)
    mem.fill(0xAB)
    assert mem.copy_to() == b"\xab" * 64
    mem.fill(np.float32(1.5).tobytes(), offset=16, nbytes=32)
    got = np.frombuffer(mem.copy_to(), dtype=np.uint8)
    assert np.array_equal(got[16:48].view(np.float32), np.full(8, 1.5, np.float32))
    assert (got[:16] == 0xAB).all() and (got[48:] == 0xAB).all()
    with pytest.raises(sycl_rs.InvalidError):
        mem.fill(b"abc")
    with pytest.raises(TypeError):
        mem.fill("text")


def test_device_to_device_copy(device):
    require(device, "usm_device_allocations")
    q = sycl_rs.Queue(device)
    a, b = sycl_rs.malloc_device(256, q), sycl_rs.malloc_device(512, q)
    a.copy_from(bytes(range(256)))
    b.fill(0)
    b.copy_from(a, offset=128)
    assert b.copy_to(offset=128, nbytes=256) == bytes(range(256))
    assert b.copy_to(nbytes=128) == bytes(128)


def test_out_of_range_is_an_invalid_error(device):
    require(device, "usm_device_allocations")
    q = sycl_rs.Queue(device)
    mem = sycl_rs.malloc_device(16, q)
    for bad in (
        lambda: mem.copy_from(bytes(17)),
        lambda: mem.copy_from(bytes(8), offset=9),
        lambda: mem.copy_to(offset=2**63, nbytes=2**63),
        lambda: mem.fill(0, offset=10, nbytes=7),
        lambda: mem.as_array("float32", (5,)),
        lambda: mem.as_array("float64", (-1,)),
    ):
        with pytest.raises(sycl_rs.InvalidError):
            bad()


def test_freed_memory_is_an_error_not_a_crash(native):
    q = sycl_rs.Queue(native)
    mem = sycl_rs.malloc_device(16, q)
    mem.free()
    with pytest.raises(sycl_rs.InvalidError):
        mem.copy_to()
    with pytest.raises(sycl_rs.InvalidError):
        mem.free()
    with pytest.raises(sycl_rs.InvalidError):
        mem.__dlpack__()


def test_numpy_from_dlpack_is_zero_copy(device):
    require(device, "usm_device_allocations")
    q = sycl_rs.Queue(device)
    mem = sycl_rs.malloc_device(4 * 64, q)
    if mem.__dlpack_device__()[0] != 1:
        pytest.skip(f"{device.filter_string} device memory is not host memory (no NumPy view)")
    mem.copy_from(np.arange(64, dtype=np.float32))
    arr = np.from_dlpack(mem.as_array("float32", (8, 8)))
    assert arr.shape == (8, 8) and arr.dtype == np.float32
    assert arr.ctypes.data == mem.ptr  # the same bytes, not a copy
    assert arr[1, 2] == 10
    arr[0, 0] = -7  # writable (DLPack 1.0 capsule), and seen by the queue
    assert np.frombuffer(mem.copy_to(nbytes=4), dtype=np.float32)[0] == -7
    raw = np.from_dlpack(mem)
    assert raw.dtype == np.uint8 and raw.shape == (256,) and raw.ctypes.data == mem.ptr


def test_dlpack_consumers_keep_memory_alive(native):
    q = sycl_rs.Queue(native)
    mem = sycl_rs.malloc_device(4096, q)
    mem.fill(3)
    arr = np.from_dlpack(mem)
    with pytest.raises(sycl_rs.InvalidError):
        mem.free()  # refused: the array still uses it, released with the array
    del mem
    gc.collect()
    assert (arr == 3).all()
    arr[:] = 4
    del arr
    gc.collect()


def test_unused_capsules_release_their_memory(native):
    q = sycl_rs.Queue(native)
    mem = sycl_rs.malloc_device(64, q)
    for _ in range(1000):
        mem.__dlpack__()
        mem.__dlpack__(max_version=(1, 0))
    gc.collect()
    mem.free()  # no capsule kept a reference


def test_dlpack_arguments_are_checked(native):
    mem = sycl_rs.malloc_device(64, sycl_rs.Queue(native))
    assert mem.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        mem.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError):
        mem.__dlpack__(copy=True)
    with pytest.raises(TypeError):
        mem.as_array("complex1024")
    with pytest.raises(AttributeError):
        mem.__cuda_array_interface__


def test_half_dtypes(native):
    # f16 and bf16 USM (`sycl::half` in kernels): DLPack float16 and bfloat16, zero copy.
    mem = sycl_rs.malloc_device(8, sycl_rs.Queue(native))
    mem.copy_from(np.array([0x3E00, 0xC000, 0x3FC0, 0xC040], dtype=np.uint16))
    h = np.from_dlpack(mem.as_array("float16", (2,)))
    assert h.dtype == np.float16 and list(h) == [1.5, -2.0]
    # NumPy has no bfloat16: it refuses the capsule for its dtype code (kDLBfloat).
    with pytest.raises((BufferError, RuntimeError, TypeError), match="(?i)bfloat|type|dtype"):
        np.from_dlpack(mem.as_array("bfloat16", (4,)))
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(mem.as_array("bfloat16", (4,)))
    assert t.dtype == torch.bfloat16 and t.data_ptr() == mem.ptr
    assert t[2].item() == 1.5 and t[3].item() == -3.0


def test_torch_from_dlpack_when_torch_is_there(native):
    torch = pytest.importorskip("torch")
    mem = sycl_rs.malloc_device(64, sycl_rs.Queue(native))
    mem.copy_from(np.arange(16, dtype=np.int32))
    t = torch.from_dlpack(mem.as_array("int32"))
    assert t.data_ptr() == mem.ptr and t[5].item() == 5
