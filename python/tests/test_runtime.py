"""Platforms, devices, aspects, selectors, contexts, queues and events."""

import pytest

import sycl_rs
from conftest import require


def test_every_device_belongs_to_a_platform():
    platforms = sycl_rs.platforms()
    assert platforms, "the native CPU platform is always there"
    from_platforms = [d for p in platforms for d in p.devices()]
    assert set(from_platforms) == set(sycl_rs.devices())
    assert any(p.backend == "native_cpu" for p in platforms)


def test_device_properties(device):
    assert device.name
    assert device.backend in ("native_cpu", "cuda", "opencl", "level_zero")
    assert device.device_type in ("cpu", "gpu", "accelerator", "custom")
    assert device.max_compute_units >= 1
    assert device.global_mem_size > 0
    assert device.platform.backend == device.backend
    assert all(device.has_aspect(a) for a in device.aspects)
    assert all(s > 0 for s in device.sub_group_sizes)
    assert device.is_cpu == (device.device_type == "cpu")


def test_native_cpu_has_ipc_aspects(native):
    assert native.backend == "native_cpu"
    for aspect in ("usm_device_allocations", "ext_oneapi_ipc_memory", "ext_oneapi_ipc_event"):
        assert native.has_aspect(aspect), aspect


def test_native_cpu_sub_groups_are_runs_of_32(native):
    assert native.has_aspect("ext_sycl_rs_sub_groups")
    assert native.sub_group_sizes == [32]


def test_unknown_aspect_is_an_invalid_error(native):
    with pytest.raises(sycl_rs.InvalidError) as e:
        native.has_aspect("warp_drive")
    assert e.value.errc == "invalid"
    assert isinstance(e.value, sycl_rs.SyclError)


def test_selectors_pick_what_they_name(device):
    assert sycl_rs.Device(device.filter_string) == device
    chosen = sycl_rs.devices(device.filter_string)
    assert chosen == [device]
    others = sycl_rs.devices(f"!{device.backend}:*")
    assert device not in others


def test_bad_selectors_are_errors():
    with pytest.raises(sycl_rs.SyclError):
        sycl_rs.Device("warp:0")
    assert sycl_rs.devices("native_cpu:99") == []
    with pytest.raises(sycl_rs.SyclError):
        sycl_rs.Device("native_cpu:99")


def test_contexts_and_queues(device):
    ctx = sycl_rs.Context(device)
    assert ctx.devices == [device]
    q = sycl_rs.Queue(device, context=ctx, in_order=True)
    assert q.device == device and q.is_in_order and not q.has_profiling
    assert sycl_rs.Queue(device.filter_string).device == device
    q.wait()


def test_profiling_events(device):
    require(device, "queue_profiling", "usm_device_allocations")
    q = sycl_rs.Queue(device, enable_profiling=True)
    ev = q.barrier()
    ev.wait()
    assert ev.status == "complete"
    submit, start, end = ev.profiling_info
    assert submit <= start <= end


def test_standalone_events_are_signalled_by_queues(native):
    q = sycl_rs.Queue(native)
    ev = sycl_rs.Event(q)
    assert ev.signal_count == 0
    assert not ev.wait_signal_count(1, timeout=0.01)
    q.signal_event(ev)
    assert ev.wait_signal_count(1, timeout=10)
    assert ev.wait(timeout=10)
    assert ev.signal_count == 1


def test_bad_timeout_is_an_error(native):
    ev = sycl_rs.Event(sycl_rs.Queue(native))
    with pytest.raises(sycl_rs.InvalidError):
        ev.wait(timeout=-1.0)
