"""Type stubs of sycl_rs._native (the classes sycl_rs re-exports)."""

from typing import Any, Optional, Sequence, Union

class SyclError(Exception):
    errc: str

class RuntimeError(SyclError): ...
class KernelError(SyclError): ...
class AccessorError(SyclError): ...
class NdRangeError(SyclError): ...
class EventError(SyclError): ...
class KernelArgumentError(SyclError): ...
class BuildError(SyclError): ...
class InvalidError(SyclError): ...
class MemoryAllocationError(SyclError): ...
class PlatformError(SyclError): ...
class ProfilingError(SyclError): ...
class FeatureNotSupportedError(SyclError): ...
class KernelNotSupportedError(SyclError): ...
class BackendMismatchError(SyclError): ...

class Platform:
    backend: str
    name: str
    vendor: str
    version: str
    def devices(self) -> list[Device]: ...

class Device:
    def __init__(self, selector: Optional[str] = None) -> None: ...
    @staticmethod
    def native_cpu() -> Device: ...
    name: str
    vendor: str
    backend: str
    platform: Platform
    device_type: str
    index: int
    filter_string: str
    driver_version: str
    max_compute_units: int
    global_mem_size: int
    local_mem_size: int
    max_mem_alloc_size: int
    max_work_group_size: int
    sub_group_sizes: list[int]
    uuid: Optional[bytes]
    aspects: list[str]
    is_gpu: bool
    is_cpu: bool
    def has_aspect(self, name: str) -> bool: ...

def platforms() -> list[Platform]: ...
def devices(selector: Optional[str] = None) -> list[Device]: ...

class Context:
    def __init__(self, devices: Union[Device, Sequence[Device]]) -> None: ...
    @staticmethod
    def default_for(device: Device) -> Context: ...
    devices: list[Device]
    backend: str

class Event:
    def __init__(
        self,
        queue: Optional[Queue] = None,
        *,
        context: Optional[Context] = None,
        enable_ipc: bool = False,
        enable_profiling: bool = False,
    ) -> None: ...
    def wait(self, timeout: Optional[float] = None) -> bool: ...
    status: str
    profiling_info: tuple[int, int, int]
    ipc_enabled: bool
    signal_count: int
    def wait_signal_count(self, target: int, timeout: Optional[float] = None) -> bool: ...

class Queue:
    def __init__(
        self,
        device: Union[Device, str, None] = None,
        *,
        context: Optional[Context] = None,
        in_order: bool = False,
        enable_profiling: bool = False,
    ) -> None: ...
    device: Device
    context: Context
    is_in_order: bool
    has_profiling: bool
    cuda_stream: Optional[int]
    def wait(self) -> None: ...
    def barrier(self, events: Sequence[Event] = ...) -> Event: ...
    def signal_event(self, event: Event) -> None: ...
    def wait_event(self, event: Event) -> None: ...

class ArrayView:
    shape: list[int]
    dtype: str
    memory: Memory
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    __cuda_array_interface__: dict[str, Any]

class Memory:
    nbytes: int
    ptr: int
    kind: str
    device: Device
    queue: Queue
    opened: bool
    foreign: bool
    read_only: bool
    mapped: bool
    access_mode: str
    def set_access_mode(self, mode: str) -> None: ...
    def unmap(self) -> None: ...
    def __len__(self) -> int: ...
    def copy_from(self, src: Any, offset: int = 0) -> None: ...
    def copy_to(
        self, dst: Any = None, offset: int = 0, nbytes: Optional[int] = None
    ) -> Optional[bytes]: ...
    def fill(self, value: Union[int, bytes], offset: int = 0, nbytes: Optional[int] = None) -> None: ...
    def free(self) -> None: ...
    def as_array(self, dtype: str = "uint8", shape: Optional[Sequence[int]] = None) -> ArrayView: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[tuple[int, int]] = None,
        dl_device: Optional[tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...
    __cuda_array_interface__: dict[str, Any]

def malloc_device(nbytes: int, queue: Queue) -> Memory: ...
def malloc_host(nbytes: int, queue: Queue) -> Memory: ...
def malloc_shared(nbytes: int, queue: Queue) -> Memory: ...
def from_dlpack(obj: Any, queue: Optional[Queue] = None, *, sync: str = "host") -> Memory: ...

class PhysicalMemory:
    def __init__(self, queue: Queue, nbytes: int, *, enable_ipc: bool = False) -> None: ...
    @staticmethod
    def granularity(queue: Queue) -> int: ...
    nbytes: int
    ipc_enabled: bool
    device: Device
    context: Context
    def map(
        self,
        range: VirtualRange,
        nbytes: Optional[int] = None,
        *,
        range_offset: int = 0,
        offset: int = 0,
        mode: str = "read_write",
        queue: Optional[Queue] = None,
    ) -> Memory: ...

class VirtualRange:
    def __init__(self, context: Union[Context, Queue], nbytes: int, *, start: int = 0) -> None: ...
    ptr: int
    nbytes: int
    context: Context

def get_mem_granularity(
    device: Device, context: Optional[Context] = None, mode: str = "minimum"
) -> int: ...

class Handle:
    @staticmethod
    def from_bytes(data: bytes) -> Handle: ...
    def to_bytes(self) -> bytes: ...
    def __bytes__(self) -> bytes: ...
    kind: str
    backend: str
    exporter_pid: int
    object_size: int
    descriptor_count: int
    carries_descriptors: bool

class Listener:
    def __init__(self, name: Optional[str] = None, *, allowed_uids: Optional[Sequence[int]] = None) -> None: ...
    name: str
    def accept(self, timeout: Optional[float] = None) -> Channel: ...

class Channel:
    @staticmethod
    def connect(name: str, *, allowed_uids: Optional[Sequence[int]] = None) -> Channel: ...
    @staticmethod
    def pair() -> tuple[Channel, Channel]: ...
    def set_recv_timeout(self, timeout: Optional[float] = None) -> None: ...
    def send(self, message: bytes) -> None: ...
    def recv(self) -> bytes: ...
    def send_handle(self, handle: Handle) -> None: ...
    def recv_handle(self) -> Handle: ...
    def peer_credentials(self) -> tuple[int, int, int]: ...

HandleLike = Union[Handle, bytes]
DeviceLike = Union[Device, str, None]

def memory_get(memory: Memory) -> Handle: ...
def memory_put(handle: Handle) -> None: ...
def memory_open(
    handle: HandleLike,
    device: DeviceLike = None,
    nbytes: Optional[int] = None,
    *,
    context: Optional[Context] = None,
    queue: Optional[Queue] = None,
) -> Memory: ...
def memory_close(memory: Memory) -> None: ...
def memory_get_cuda_raw(memory: Memory) -> tuple[bytes, int, int]: ...
def memory_open_cuda_raw(
    handle: bytes,
    nbytes: int,
    device: DeviceLike = None,
    offset: int = 0,
    *,
    context: Optional[Context] = None,
    queue: Optional[Queue] = None,
) -> Memory: ...
def event_get(event: Event) -> Handle: ...
def event_put(handle: Handle) -> None: ...
def event_open(
    handle: HandleLike,
    context: Optional[Context] = None,
    *,
    queue: Optional[Queue] = None,
    device: DeviceLike = None,
) -> Event: ...
def physical_memory_get(memory: PhysicalMemory) -> Handle: ...
def physical_memory_put(handle: Handle) -> None: ...
def physical_memory_open(
    handle: HandleLike,
    device: DeviceLike = None,
    *,
    context: Optional[Context] = None,
    queue: Optional[Queue] = None,
) -> PhysicalMemory: ...

class NodeRanks:
    local_rank: int
    local_size: int
    device: Device
    @staticmethod
    def from_env(*, device: Optional[Device] = None, timeout: Optional[float] = None) -> NodeRanks: ...
    @staticmethod
    def join(
        local_rank: int,
        local_size: int,
        job: str,
        *,
        rank: Optional[int] = None,
        device: Optional[Device] = None,
        timeout: Optional[float] = None,
    ) -> NodeRanks: ...
    def rank_of_local(self, local: int) -> int: ...
    def barrier(self) -> None: ...

class Team:
    rank: int
    size: int
    queue: Queue
    def __init__(
        self,
        ranks: NodeRanks,
        queue: Optional[Queue] = None,
        *,
        algorithm: str = "auto",
        buffer_bytes: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> None: ...
    def all_reduce(
        self, send: Memory, recv: Memory, dtype: str, op: str = "sum", deps: list[Event] = ...
    ) -> Event: ...
    def all_gather(self, send: Memory, recv: Memory, dtype: str, deps: list[Event] = ...) -> Event: ...
    def reduce_scatter(
        self, send: Memory, recv: Memory, dtype: str, op: str = "sum", deps: list[Event] = ...
    ) -> Event: ...
    def broadcast(self, buf: Memory, dtype: str, root: int, deps: list[Event] = ...) -> Event: ...
    def barrier(self, deps: list[Event] = ...) -> Event: ...
    def record(
        self,
        ops: list[
            tuple[
                str,
                Optional[Union[Memory, SymmetricBuffer]],
                Optional[Memory],
                Optional[str],
                Optional[str],
                Optional[int],
            ]
        ],
    ) -> Graph: ...
    def replay(self, graph: Graph, deps: list[Event] = ...) -> Event: ...
    def symmetric_buffer(self, count: int, dtype: str) -> SymmetricBuffer: ...
    def all_reduce_symmetric(
        self,
        buf: SymmetricBuffer,
        recv: Memory,
        op: str = "sum",
        start: int = 0,
        count: Optional[int] = None,
        deps: list[Event] = ...,
    ) -> Event: ...

class Graph:
    operations: int

class SymmetricBuffer:
    dtype: str
    count: int
    rank: int
    def part(self, rank: int) -> Memory: ...
    def close(self) -> None: ...
