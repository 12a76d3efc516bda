"""CUDA interop with PyTorch and CuPy, in this process and across processes (GPU machine;
skipped without a CUDA device, failed then when SYCL_RS_REQUIRE_BACKENDS names cuda)."""

import multiprocessing as mp

import numpy as np
import pytest

import cuda_workers
import sycl_rs
from cuda_workers import N
from sycl_rs import ipc

cuda_devices = sycl_rs.devices("cuda:*")
pytestmark = pytest.mark.skipif(not cuda_devices, reason="no CUDA device")
TIMEOUT = 120


@pytest.fixture
def q():
    return sycl_rs.Queue(cuda_devices[0])


def test_dlpack_to_torch_and_cupy_is_zero_copy(q):
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    mem = sycl_rs.malloc_device(4 * N, q)
    assert mem.__dlpack_device__() == (2, q.device.index)
    mem.copy_from(np.arange(N, dtype=np.float32))
    t = torch.from_dlpack(mem.as_array("float32"))
    assert t.device.type == "cuda" and t.data_ptr() == mem.ptr
    assert t[12345].item() == 12345
    t.mul_(2)
    torch.cuda.synchronize()
    assert np.frombuffer(mem.copy_to(offset=4 * 100, nbytes=4), np.float32)[0] == 200
    c = cupy.from_dlpack(mem.as_array("float32", (N // 4, 4)))
    assert c.data.ptr == mem.ptr and c.shape == (N // 4, 4)
    via_cai = cupy.asarray(mem.as_array("float32"))
    assert via_cai.data.ptr == mem.ptr and float(via_cai[7]) == 14
    cai = mem.__cuda_array_interface__
    assert cai["version"] == 3 and cai["data"] == (mem.ptr, False) and cai["shape"] == (4 * N,)


def test_torch_producer_sycl_rs_consumer(q):
    pytest.importorskip("torch")
    ctx = mp.get_context("spawn")
    to_parent, from_parent = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=cuda_workers.torch_producer, args=(to_parent, from_parent))
    p.start()
    try:
        share = to_parent.get(timeout=TIMEOUT)
        mem = ipc.memory.open_torch(share)
        assert mem.nbytes == 4 * N
        got = np.frombuffer(mem.copy_to(), dtype=np.int32)
        assert np.array_equal(got, np.arange(N, dtype=np.int32)), "sycl_rs reads torch's data"
        mem.copy_from(-np.arange(N, dtype=np.int32))
        from_parent.put("written")
        assert to_parent.get(timeout=TIMEOUT) is True, "torch sees what sycl_rs wrote"
        ipc.memory.close(mem)
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0


def test_sycl_rs_raw_export_to_cupy(q):
    pytest.importorskip("cupy")
    mem = sycl_rs.malloc_device(4 * N + 256, q)
    mem.fill((0xC0FFEE).to_bytes(4, "little"))
    raw, offset, size = ipc.memory.get_cuda_raw(mem)
    assert len(raw) == 64 and size >= mem.nbytes
    ctx = mp.get_context("spawn")
    to_parent = ctx.Queue()
    p = ctx.Process(target=cuda_workers.cupy_consumer, args=(raw, offset, 4 * N, to_parent))
    p.start()
    p.join(TIMEOUT)
    assert p.exitcode == 0
    assert to_parent.get(timeout=TIMEOUT) is True, "CuPy reads sycl_rs's data"
    got = np.frombuffer(mem.copy_to(nbytes=4 * N), dtype=np.uint32)
    assert np.array_equal(got, np.arange(N, dtype=np.uint32)), "sycl_rs sees CuPy's writes"


def test_cupy_producer_sycl_rs_consumer(q):
    pytest.importorskip("cupy")
    ctx = mp.get_context("spawn")
    to_parent, from_parent = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=cuda_workers.cupy_producer, args=(to_parent, from_parent))
    p.start()
    try:
        raw, nbytes = to_parent.get(timeout=TIMEOUT)
        mem = ipc.memory.open_cuda_raw(raw, nbytes, queue=q)
        assert (np.frombuffer(mem.copy_to(), dtype=np.int32) == 7).all()
        mem.fill((9).to_bytes(4, "little"))
        from_parent.put("written")
        assert to_parent.get(timeout=TIMEOUT) is True
        ipc.memory.close(mem)
    finally:
        p.join(TIMEOUT)
    assert p.exitcode == 0


def test_bad_raw_handles_are_errors(q):
    with pytest.raises(sycl_rs.InvalidError):
        ipc.memory.open_cuda_raw(b"short", 16, queue=q)
    with pytest.raises(sycl_rs.SyclError):
        ipc.memory.open_cuda_raw(bytes(64), 16, queue=q)  # the driver refuses a zero handle
    with pytest.raises(sycl_rs.FeatureNotSupportedError):
        ipc.memory.open_torch((0, bytes([2, ord("e")]) + bytes(64), 16, 0), queue=q)
    native_mem = sycl_rs.malloc_device(16, sycl_rs.Queue(sycl_rs.Device.native_cpu()))
    with pytest.raises(sycl_rs.BackendMismatchError):
        ipc.memory.get_cuda_raw(native_mem)


def test_from_dlpack_of_a_torch_tensor(q):
    torch = pytest.importorskip("torch")
    t = torch.arange(N, dtype=torch.float32, device=f"cuda:{q.device.index}")
    mem = sycl_rs.from_dlpack(t, q)
    assert mem.ptr == t.data_ptr() and mem.nbytes == 4 * N and mem.foreign
    assert mem.kind == "device" and mem.__dlpack_device__() == (2, q.device.index)
    # torch's pending work (arange on its stream) is ordered before our reads.
    got = np.frombuffer(mem.copy_to(offset=4 * 1000, nbytes=8), np.float32)
    assert list(got) == [1000, 1001]
    mem.fill(np.float32(2.5).tobytes(), offset=0, nbytes=4 * 16)
    torch.cuda.synchronize()
    assert t[:16].eq(2.5).all().item() and t[16].item() == 16
    # Without a queue: the CUDA device of the tensor's ordinal.
    again = sycl_rs.from_dlpack(t[N // 2 :])
    assert again.ptr == t[N // 2 :].data_ptr() and again.device == q.device
    again.fill(0)
    torch.cuda.synchronize()
    assert t[N // 2 :].eq(0).all().item() and t[N // 2 - 1].item() == N // 2 - 1


def test_from_dlpack_ordered_on_the_queue(q):
    """sync="queue": torch orders its pending work on the tensor before the queue's commands
    (DLPack's stream: the queue's own), and nothing waits on the host."""
    torch = pytest.importorskip("torch")
    assert isinstance(q.cuda_stream, int) and q.cuda_stream != 0
    device = torch.device("cuda", q.device.index)
    t = torch.zeros(N, dtype=torch.float32, device=device)
    torch.cuda.synchronize()
    torch.cuda._sleep(100_000_000)  # tens of ms of GPU time on torch's current stream
    t.fill_(3.0)  # queued behind it
    mem = sycl_rs.from_dlpack(t, q, sync="queue")
    assert not torch.cuda.current_stream(device).query(), "the wrap waited on the host"
    got = np.frombuffer(mem.copy_to(offset=4 * 7, nbytes=4), np.float32)
    assert got[0] == 3.0, "the queue's read came before torch's fill"
    # The default waits on the host for the legacy default stream (torch's default stream).
    torch.cuda._sleep(100_000_000)
    sycl_rs.from_dlpack(t, q)
    assert torch.cuda.current_stream(device).query()


def test_from_dlpack_keeps_the_torch_tensor_alive(q):
    torch = pytest.importorskip("torch")
    import gc

    t = torch.full((N,), 7, dtype=torch.int32, device=f"cuda:{q.device.index}")
    ptr = t.data_ptr()
    mem = sycl_rs.from_dlpack(t, q)
    del t
    gc.collect()
    torch.cuda.empty_cache()  # the block is still held by the DLPack tensor, not cached-free
    junk = torch.zeros(N, dtype=torch.int32, device=f"cuda:{q.device.index}")
    assert junk.data_ptr() != ptr
    assert np.frombuffer(mem.copy_to(nbytes=8), np.int32).tolist() == [7, 7]


def test_from_dlpack_refuses_strided_and_wrong_devices(q):
    torch = pytest.importorskip("torch")
    t = torch.zeros((64, 64), device=f"cuda:{q.device.index}")
    with pytest.raises(BufferError, match="compact row-major"):
        sycl_rs.from_dlpack(t[:, ::2], q)
    with pytest.raises(sycl_rs.BackendMismatchError):
        sycl_rs.from_dlpack(t, sycl_rs.Queue(sycl_rs.Device.native_cpu()))
    if len(cuda_devices) > 1:
        with pytest.raises(sycl_rs.InvalidError):
            sycl_rs.from_dlpack(t, sycl_rs.Queue(cuda_devices[1]))


def test_from_dlpack_of_a_cupy_array(q):
    cupy = pytest.importorskip("cupy")
    with cupy.cuda.Device(q.device.index):
        a = cupy.arange(N, dtype=cupy.int32)
    mem = sycl_rs.from_dlpack(a, q)
    assert mem.ptr == a.data.ptr and mem.nbytes == 4 * N
    mem.fill(np.int32(-3).tobytes(), nbytes=4 * 8)
    cupy.cuda.runtime.deviceSynchronize()
    assert int(a[7]) == -3 and int(a[8]) == 8


def test_from_dlpack_of_pinned_host_memory(q):
    torch = pytest.importorskip("torch")
    pinned = torch.arange(1024, dtype=torch.int32).pin_memory()
    if pinned.__dlpack_device__()[0] == 3:  # kDLCUDAHost (torch exports pinned memory as CPU)
        mem = sycl_rs.from_dlpack(pinned, q)
        assert mem.kind == "host"
    elif q.device.has_aspect("usm_system_allocations"):
        # A CPU tensor (even pinned) is system memory, which this CUDA device reaches (HMM).
        mem = sycl_rs.from_dlpack(pinned, q)
        assert mem.kind == "unknown" and mem.__dlpack_device__() == (1, 0)
    else:
        with pytest.raises(sycl_rs.FeatureNotSupportedError):
            sycl_rs.from_dlpack(pinned, q)
        mem = sycl_rs.from_dlpack(pinned)  # native CPU
        assert mem.device.backend == "native_cpu"
    assert mem.ptr == pinned.data_ptr()
    mem.fill(1)
    assert pinned[0].item() == 0x01010101


def test_from_dlpack_of_managed_memory(q):
    cupy = pytest.importorskip("cupy")
    if not q.device.has_aspect("usm_shared_allocations"):
        pytest.skip("no managed memory")
    with cupy.cuda.Device(q.device.index):
        ptr = cupy.cuda.malloc_managed(4 * 256)
        a = cupy.ndarray((256,), dtype=cupy.int32, memptr=ptr)
        a[:] = 5
        cupy.cuda.runtime.deviceSynchronize()
    mem = sycl_rs.from_dlpack(a, q)
    assert mem.kind == "shared" and mem.ptr == a.data.ptr
    assert np.frombuffer(mem.copy_to(nbytes=4), np.int32)[0] == 5
