"""``ipc.physical_memory``: physical memory objects shared between processes."""

from .._native import physical_memory_get as get
from .._native import physical_memory_open as open
from .._native import physical_memory_put as put

__all__ = ["get", "open", "put"]
