"""Collectives between the ranks of one node on shared memory: all-reduce, all-gather,
reduce-scatter, broadcast and barrier (``sycl::collective`` of sycl-rs).

The ranks are processes started by a launcher. ``NodeRanks.from_env()`` reads torchrun's
variables (``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ...), Open MPI's (``mpirun``, with or without
mpi4py in the program) or sycl-rs's own (``SYCL_RS_LOCAL_RANK``, ``SYCL_RS_LOCAL_SIZE``,
``SYCL_RS_JOB``); ``from_mpi4py(comm)`` forms them from an mpi4py communicator. A ``Team``
allocates one symmetric buffer per rank, opened by every other rank, and runs each operation
on its own in-order queue.

Operands are sycl_rs ``Memory`` (with ``dtype=``), ``ArrayView``, or any DLPack tensor of the
team's device (a torch or CuPy tensor on its GPU, a NumPy array for the native CPU), used in
place without a copy::

    import torch, sycl_rs.collective as coll
    team = coll.Team()                      # under torchrun: one GPU per local rank
    x = torch.ones(1024, dtype=torch.bfloat16, device=f"cuda:{team.rank}")
    team.all_reduce(x)                      # x = the sum over the ranks, in place

The work torch queued on CUDA tensors on its current stream comes first, without a host wait
(the team's stream waits for an event recorded on torch's; other DLPack producers are asked
for the team's stream, DLPack's ``stream``). Operations wait for
their result on the host by default; ``wait=False`` returns the pending ``Event`` instead
(wait for it before torch or NumPy reads the output); ``wait="stream"`` makes torch's current
stream wait for the operation, as ``torch.distributed``'s calls do, without a host wait (an
operation's failure then surfaces when its ``Event`` is waited for)::

    team.all_reduce(x, wait="stream")       # torch's later work on x follows the all-reduce

Operations repeated on the same memory can be recorded once and replayed as one command (on
CUDA one CUDA graph: no launch per operation)::

    graph = team.record(lambda g: [g.all_reduce(x) for _ in range(20)])
    team.replay(graph)                      # 20 all-reduces of x

A symmetric buffer (torch's ``symm_mem``, sycl-rs's ``NodeBuffer``) lets a rank compute into
memory its peers read directly: its all-reduce copies nothing into the team's buffer::

    buf = team.symmetric_buffer((1024,), torch.bfloat16)   # collective
    x = torch.from_dlpack(buf.local)        # this rank's part, zero copy
    x.copy_(partial)                        # (torch writes it on its current stream)
    out = torch.empty_like(x)
    team.all_reduce_symmetric(buf, out)     # out = the sum of every rank's part
"""

import contextlib as _contextlib
import math as _math
import os as _os
import sys as _sys
import uuid as _uuid

from ._native import ArrayView, Memory, NodeRanks, from_dlpack
from ._native import Team as _Team

__all__ = ["Graph", "NodeRanks", "Recorder", "SymmetricBuffer", "Team", "from_mpi4py"]

_ALIASES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "int": "int32",
    "long": "int64",
}


@_contextlib.contextmanager
def _torch_device_kept():
    """Puts torch's current CUDA device back after sycl-rs calls, where torch uses CUDA.
    torch takes the current context's device for its current device. sycl-rs's CUDA backend
    puts back a context that was current before each of its calls, but where none was (a
    thread torch has not yet bound), it leaves its own current, which would move torch's
    current device to the team's; this covers that case."""
    torch = _sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        yield
        return
    device = torch.cuda.current_device()
    try:
        yield
    finally:
        if torch.cuda.current_device() != device:
            torch.cuda.set_device(device)


def _dtype_name(dtype):
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch.") :]
    return _ALIASES.get(name, name)


def from_mpi4py(comm, **options):
    """The ``NodeRanks`` of this rank's node of the mpi4py communicator ``comm`` (collective
    over ``comm``). Local rank 0 of each node draws the job key and broadcasts it to its node;
    ``options`` go to ``NodeRanks.join`` (``device=``, ``timeout=``)."""
    from mpi4py import MPI

    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        key = f"mpi4py/{_os.getpid()}/{_uuid.uuid4().hex}" if node.Get_rank() == 0 else None
        key = node.bcast(key, root=0)
        return NodeRanks.join(
            node.Get_rank(), node.Get_size(), key, rank=comm.Get_rank(), **options
        )
    finally:
        node.Free()


class Team:
    """The ranks of a node (``ranks``, default ``NodeRanks.from_env()``) and their symmetric
    buffers. ``queue``: where operations run (default: an in-order queue on the ranks'
    device); ``algorithm``: "auto", "one_shot" or "two_shot"; ``buffer_bytes``: the symmetric
    buffer's half; ``timeout``: seconds a rank waits for its peers. Collective over the node's
    ranks, as every operation is."""

    def __init__(self, ranks=None, queue=None, **options):
        if ranks is None:
            ranks = NodeRanks.from_env()
        self.ranks = ranks
        with _torch_device_kept():
            self._team = _Team(ranks, queue, **options)
        # Once a torch CUDA tensor came: torch, the team's device, its queue's stream as a
        # torch stream, and an event for each direction (re-recorded each call).
        self._torch = None

    @property
    def rank(self):
        """This rank's index in the team (its local rank)."""
        return self._team.rank

    @property
    def size(self):
        """Ranks in the team."""
        return self._team.size

    @property
    def queue(self):
        """The team's queue: operations' events belong to its context."""
        return self._team.queue

    def _operand(self, obj, dtype):
        """``obj`` as ``Memory``, its element type name, and whether it is a torch CUDA tensor
        (whose producer's work the call orders: ``_after_torch``)."""
        if isinstance(obj, Memory):
            if dtype is None:
                raise TypeError("sycl_rs.Memory has no element type: pass dtype=")
            return obj, _dtype_name(dtype), False
        if isinstance(obj, ArrayView):
            return obj.memory, _dtype_name(dtype or obj.dtype), False
        if not hasattr(obj, "__dlpack__"):
            raise TypeError(
                f"{type(obj).__name__} is neither sycl_rs memory nor a DLPack tensor"
            )
        if dtype is None:
            dtype = getattr(obj, "dtype", None)
            if dtype is None:
                raise TypeError(f"{type(obj).__name__} has no dtype: pass dtype=")
        torch = _sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor) and obj.is_cuda:
            return self._torch_memory(obj), _dtype_name(dtype), True
        # Other producers order their pending work before the team queue's commands: DLPack's
        # stream, no host wait.
        return from_dlpack(obj, self._team.queue, sync="queue"), _dtype_name(dtype), False

    def _torch_memory(self, tensor):
        """A torch CUDA tensor as ``Memory``, wrapped with ``sync="none"``: torch's pending
        work on it is ordered by an event per call (``_after_torch``), which costs less than
        DLPack's stream (torch makes an event and a stream object per tensor for that).
        Wrapped anew each call: a kept wrap would hold the tensor's storage, and torch keeps a
        tensor's Python object alive while C++ holds it, so no weak reference would ever let
        the wrap go."""
        if self._team.queue.cuda_stream is None:
            # (A team of another backend: from_dlpack refuses it, BackendMismatchError.)
            return from_dlpack(tensor, self._team.queue, sync="none")
        # (torch exports a CUDA tensor only while its device is the current one.)
        with self._torch_streams()[0].cuda.device(tensor.device):
            return from_dlpack(tensor, self._team.queue, sync="none")

    def _operands(self, send, recv, dtype):
        send_mem, send_type, send_torch = self._operand(send, dtype)
        if recv is None or recv is send:
            return send_mem, send_mem, send_type, send_torch
        recv_mem, recv_type, recv_torch = self._operand(recv, dtype)
        if recv_type != send_type:
            raise TypeError(f"send is {send_type}, recv is {recv_type}")
        return send_mem, recv_mem, send_type, send_torch or recv_torch

    def _torch_streams(self):
        if self._torch is None:
            import torch

            device = torch.device("cuda", self._team.queue.device.index)
            ours = torch.cuda.ExternalStream(self._team.queue.cuda_stream, device=device)
            self._torch = (torch, device, ours, torch.cuda.Event(), torch.cuda.Event())
        return self._torch

    def _after_torch(self):
        """The team's later commands wait for torch's work queued so far on its current
        stream of the team's device (an event; nothing waits on the host)."""
        torch, device, ours, before, _ = self._torch_streams()
        before.record(torch.cuda.current_stream(device))
        ours.wait_event(before)

    def _torch_after(self):
        """Torch's later work on its current stream waits for the team's commands so far."""
        torch, device, ours, _, after = self._torch_streams()
        after.record(ours)
        torch.cuda.current_stream(device).wait_event(after)

    def _stream_wait(self, wait):
        """Checks ``wait``; for ``"stream"``, the team's CUDA stream (else ``None``)."""
        if not isinstance(wait, str):
            return None
        if wait != "stream":
            raise ValueError(f'wait={wait!r}: True, False or "stream"')
        stream = self._team.queue.cuda_stream
        if stream is None:
            raise ValueError('wait="stream" orders torch\'s CUDA stream: a CUDA team only')
        return stream

    def _finish(self, run, wait, torch_operands=False):
        """Runs ``run()`` (the operation, its ``Event``), after torch's queued work where its
        operands include torch CUDA tensors, then waits as ``wait`` says."""
        stream = self._stream_wait(wait)
        with _torch_device_kept():
            if torch_operands or stream is not None:
                self._after_torch()
            event = run()
            if stream is not None:
                # Torch's later work on its current stream (of the team's device) follows
                # the operation.
                self._torch_after()
            elif wait:
                event.wait()
        return event

    def all_reduce(self, send, recv=None, op="sum", *, dtype=None, deps=(), wait=True):
        """``recv`` (default: ``send``, in place) = the reduction ("sum", "prod", "min",
        "max") of every rank's ``send``, bitwise the same on every rank."""
        s, r, t, tt = self._operands(send, recv, dtype)
        return self._finish(lambda: self._team.all_reduce(s, r, t, op, list(deps)), wait, tt)

    def all_gather(self, send, recv, *, dtype=None, deps=(), wait=True):
        """``recv`` (``size`` times ``send``'s length) = every rank's ``send`` in rank
        order."""
        s, r, t, tt = self._operands(send, recv, dtype)
        return self._finish(lambda: self._team.all_gather(s, r, t, list(deps)), wait, tt)

    def reduce_scatter(self, send, recv, op="sum", *, dtype=None, deps=(), wait=True):
        """``recv`` = this rank's block of the reduction of every rank's ``send`` (``size``
        blocks of ``recv``'s length)."""
        s, r, t, tt = self._operands(send, recv, dtype)
        return self._finish(
            lambda: self._team.reduce_scatter(s, r, t, op, list(deps)), wait, tt
        )

    def broadcast(self, buf, root=0, *, dtype=None, deps=(), wait=True):
        """``buf`` = rank ``root``'s ``buf``, on every rank."""
        b, t, tt = self._operand(buf, dtype)
        return self._finish(lambda: self._team.broadcast(b, t, root, list(deps)), wait, tt)

    def barrier(self, *, deps=(), wait=True):
        """Completes when every rank has reached it."""
        return self._finish(lambda: self._team.barrier(list(deps)), wait)

    def symmetric_buffer(self, shape, dtype):
        """A ``SymmetricBuffer``: ``shape`` (an int or a tuple) elements of ``dtype`` per rank
        on the team's device, every rank's part opened by every other rank. Collective: every
        rank passes the same shape and dtype (``RuntimeError`` on every rank when a rank
        cannot share or open its part)."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        with _torch_device_kept():
            native = self._team.symmetric_buffer(_math.prod(shape), _dtype_name(dtype))
        return SymmetricBuffer(native, shape)

    def all_reduce_symmetric(
        self, buf, recv, op="sum", *, start=0, count=None, deps=(), wait=True
    ):
        """``recv`` = the reduction ("sum", "prod", "min", "max") of elements ``start ..
        start + count`` (default: to the end) of every rank's part of ``buf`` (a
        ``SymmetricBuffer`` of this team's ranks), read where they lie: no copy into the team's
        buffer; bitwise the same on every rank. ``recv`` (a tensor or memory of ``count``
        elements) may not overlap this rank's part. The event completes once every rank has
        read this rank's part, which may then be written again. Every rank passes the same
        range (``InvalidError`` on every rank otherwise).

        Ordering: when ``recv`` is a CUDA tensor, taking it (DLPack) orders torch's current
        stream before the team's queue: that covers torch's writes to the part on that
        stream. Work on the part in other streams, or before a call whose ``recv`` is sycl_rs
        ``Memory``, must be waited for first (``torch.cuda.synchronize()``)."""
        # (Untyped memory takes the buffer's dtype; a typed recv keeps its own.)
        r, t, tt = self._operand(recv, buf.dtype if isinstance(recv, Memory) else None)
        if t != buf.dtype:
            raise TypeError(f"buf is {buf.dtype}, recv is {t}")
        return self._finish(
            lambda: self._team.all_reduce_symmetric(buf._native, r, op, start, count, list(deps)),
            wait,
            tt,
        )

    def record(self, build):
        """Records the operations ``build(recorder)`` makes (a ``Recorder``: this team's
        operations without ``deps`` or ``wait``) into a ``Graph``; nothing runs. Collective:
        every rank records the same operations. The graph keeps its operands alive."""
        recorder = Recorder(self)
        build(recorder)
        return Graph(self._team.record(recorder._ops), recorder._keep, recorder._torch)

    def replay(self, graph, *, deps=(), wait=True):
        """Runs ``graph`` (recorded by this team) once, as one command: its operations on
        their memory as it is now, bitwise as the calls would (after torch's queued work,
        where its operands include torch CUDA tensors)."""
        return self._finish(
            lambda: self._team.replay(graph._graph, list(deps)), wait, graph._torch
        )

    def __repr__(self):
        return repr(self._team)


class SymmetricBuffer:
    """A buffer of which every rank of a team holds a part of the same shape and dtype, opened
    by every other rank (sycl-rs's ``NodeBuffer``, torch's symmetric memory), made by
    ``Team.symmetric_buffer``. ``local`` is this rank's part and ``peer(r)`` rank ``r``'s, as
    DLPack views (``torch.from_dlpack``, ``numpy.from_dlpack``): zero copy, the memory the
    peers read and write. ``close()`` releases it (collective); a view of this rank's own part
    keeps its memory until it goes (see ``peer`` for the peers' parts)."""

    def __init__(self, native, shape):
        self._native = native
        self.shape = shape

    @property
    def dtype(self):
        """The element type's name ("float32", "bfloat16", ...)."""
        return self._native.dtype

    @property
    def count(self):
        """Elements per rank."""
        return self._native.count

    @property
    def local(self):
        """This rank's part, as an ``ArrayView`` of ``shape``."""
        return self.peer(self._native.rank)

    def peer(self, rank):
        """Rank ``rank``'s part (opened in this process), as an ``ArrayView`` of ``shape``.
        Use it no longer than the buffer: once closed, its owner may free it (the native CPU
        keeps such memory valid; on CUDA a read of memory its exporter freed is the driver's
        business, as for any IPC-opened memory)."""
        return self._native.part(rank).as_array(self.dtype, list(self.shape))

    def close(self):
        """Releases the buffer now, collectively (``RuntimeError`` when a rank is gone or the
        time-out passed first). A second call does nothing."""
        self._native.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        """Closes the buffer (``with team.symmetric_buffer(..) as buf:``)."""
        self.close()
        return False

    def __repr__(self):
        return f"SymmetricBuffer(shape={self.shape}, " + repr(self._native)[len("SymmetricBuffer(") :]


class Recorder:
    """The operations of a graph being recorded (``Team.record``)."""

    def __init__(self, team):
        self._team = team
        self._ops = []
        self._keep = []
        self._torch = False  # whether an operand is a torch CUDA tensor

    def all_reduce(self, send, recv=None, op="sum", *, dtype=None):
        s, r, t, tt = self._team._operands(send, recv, dtype)
        self._torch |= tt
        self._ops.append(("all_reduce", s, r, t, op, None))
        self._keep += [send, recv, s, r]

    def all_gather(self, send, recv, *, dtype=None):
        s, r, t, tt = self._team._operands(send, recv, dtype)
        self._torch |= tt
        self._ops.append(("all_gather", s, r, t, None, None))
        self._keep += [send, recv, s, r]

    def reduce_scatter(self, send, recv, op="sum", *, dtype=None):
        s, r, t, tt = self._team._operands(send, recv, dtype)
        self._torch |= tt
        self._ops.append(("reduce_scatter", s, r, t, op, None))
        self._keep += [send, recv, s, r]

    def broadcast(self, buf, root=0, *, dtype=None):
        b, t, tt = self._team._operand(buf, dtype)
        self._torch |= tt
        self._ops.append(("broadcast", b, None, t, None, root))
        self._keep += [buf, b]

    def all_reduce_symmetric(self, buf, recv, op="sum", *, start=0):
        """``Team.all_reduce_symmetric`` of the elements ``start .. start + len(recv)``."""
        r, t, tt = self._team._operand(recv, buf.dtype if isinstance(recv, Memory) else None)
        if t != buf.dtype:
            raise TypeError(f"buf is {buf.dtype}, recv is {t}")
        self._torch |= tt
        self._ops.append(("all_reduce_symmetric", buf._native, r, t, op, start))
        self._keep += [buf, recv, r]

    def barrier(self):
        self._ops.append(("barrier", None, None, None, None, None))


class Graph:
    """Operations of a team recorded once (``Team.record``), replayed by ``Team.replay``."""

    def __init__(self, graph, keep, torch_operands):
        self._graph = graph
        self._keep = keep
        self._torch = torch_operands

    @property
    def operations(self):
        """How many operations a replay runs."""
        return self._graph.operations

    def __repr__(self):
        return repr(self._graph)
