"""``ipc.event``: events signalled in one process and waited on in another."""

from .._native import event_get as get
from .._native import event_open as open
from .._native import event_put as put

__all__ = ["get", "open", "put"]
