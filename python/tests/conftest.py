"""Shared fixtures: the devices present, and SYCL_RS_REQUIRE_BACKENDS (a backend it names
that has no device fails the run instead of skipping)."""

import os

import pytest

import sycl_rs

# Tests pick their devices themselves.
os.environ.pop("ONEAPI_DEVICE_SELECTOR", None)


def all_devices():
    return sycl_rs.devices()


def _ids(devices):
    return [d.filter_string for d in devices]


def pytest_sessionstart(session):
    required = [b for b in os.environ.get("SYCL_RS_REQUIRE_BACKENDS", "").split(",") if b]
    present = {d.backend for d in all_devices()}
    missing = [b for b in required if b not in present]
    if missing:
        raise pytest.UsageError(
            f"SYCL_RS_REQUIRE_BACKENDS names {missing}, which have no device here "
            f"(present: {sorted(present)})"
        )


@pytest.fixture(params=all_devices(), ids=_ids(all_devices()))
def device(request):
    return request.param


@pytest.fixture
def native():
    return sycl_rs.Device.native_cpu()


def ipc_devices():
    return [d for d in all_devices() if d.has_aspect("ext_oneapi_ipc_memory")]


def require(device, *aspects):
    lacking = [a for a in aspects if not device.has_aspect(a)]
    if lacking:
        pytest.skip(f"{device.filter_string} lacks {', '.join(lacking)}")
