"""The part of MPI the patterns use, over the simulated cluster: communicators, requests, RMA windows.

`SIMULATED_MPI` stands in for mpi4py's module while a simulation runs
(scaledl.comm.transport), so the round robin, the windows, the collectives
and the training loop run unchanged. What is implemented is what the code
calls; anything else raises AttributeError. The semantics:

- Point to point: eager messages (cluster.py); `Isend` is a helper actor that
  moves the bytes, so its request completes when they have arrived.
- CUDA-aware: a torch tensor handed to a collective is device memory (the
  `cuda_aware_mpi` backend; the staged one hands numpy views of host buffers),
  so on a GPU rank its messages leave from and land on the GPU itself, peer to
  peer over the node's PCIe fabric, and its reductions run on the GPU.
- Collectives are built from point-to-point messages with the algorithms MPI
  libraries select (scaledl.sim.collectives), on a channel of their own,
  so they never match a user's message; the nonblocking ones run on a helper
  actor. Reductions are deterministic: the order of the sums depends only on
  the communicator's size and the message size.
- RMA: a window is every member's memory, in this process; an epoch's lock is
  a readers-writer lock per target (exclusive or shared). An operation moves
  and applies its bytes segment by segment (`RMA_SEGMENT_BYTES`), as MPI
  libraries pipeline large RMA operations, so a read that overlaps another
  worker's accumulate (a shared-lock epoch) can see the center partly updated.
  The accumulates to one target are serialised segment by segment, each applied
  under the target's accumulate mutex at the target's memory speed (read two
  operands, write one): concurrent accumulates queue there, none is lost, and
  an accumulate-read (Get_accumulate with NO_OP) never sees half a segment.
  Within one memory host the window is shared memory, which the origin loads
  and stores itself (MPICH maps a node's windows into every member): an
  operation is no message but the origin's copy at its host's memory speed,
  a Get or a Put reading and writing n bytes, an Accumulate reading two
  operands and writing one, each after the call's latency (the loopback's α).
- Abort raises SimulatedAbort, which ends the simulated job.
"""

from __future__ import annotations

import contextlib
import math
import pickle

import numpy as np

from scaledl.sim import collectives
from scaledl.sim.cluster import ANY_SOURCE, ANY_TAG, Message, RankLost, SimulatedAbort, blocked, spawn, this_rank

UNDEFINED = -32766
IN_PLACE = object()
LOCK_EXCLUSIVE, LOCK_SHARED = 234, 235
COMM_TYPE_SHARED = 1
THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
# How many bytes an RMA operation moves and applies at a time: a modelling choice of the size of an MPI
# library's pipelined RMA packets (hundreds of KiB); a LeNet center (1.7 MB) crosses in 7 segments.
RMA_SEGMENT_BYTES = 256 * 1024


class Op:
    def __init__(self, name: str, apply):
        self.name = name
        self.apply = apply  # apply(into, value): into ← into (op) value, in place

    def __repr__(self) -> str:
        return f"MPI.{self.name}"


def _replace(into, value):
    into[...] = value


SUM = Op("SUM", lambda into, value: np.add(into, value, out=into))
MAX = Op("MAX", lambda into, value: np.maximum(into, value, out=into))
MIN = Op("MIN", lambda into, value: np.minimum(into, value, out=into))
BOR = Op("BOR", lambda into, value: np.bitwise_or(into, value, out=into))
REPLACE = Op("REPLACE", _replace)
NO_OP = Op("NO_OP", lambda into, value: None)
_PY_OPS = {SUM: lambda a, b: a + b, MAX: max, MIN: min, BOR: lambda a, b: a | b}


class Datatype:
    def __init__(self, name: str, dtype):
        self.name, self.dtype = name, np.dtype(dtype)


FLOAT, DOUBLE, INT, BYTE = (
    Datatype("FLOAT", np.float32),
    Datatype("DOUBLE", np.float64),
    Datatype("INT", np.int32),
    Datatype("BYTE", np.uint8),
)


class Exception(RuntimeError):  # mpi4py's name: `except MPI.Exception` must catch the simulated failures
    """A failed communication (a peer's host is down)."""


def array(buf) -> np.ndarray | None:
    """The numpy array behind an mpi4py buffer argument: an array, a memoryview, a tensor (device memory, as a
    CUDA-aware MPI takes it: `on_device`), or [array, (count,) datatype]; None for no buffer (a NO_OP's origin)."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    if buf is None or isinstance(buf, np.ndarray):
        return buf
    if on_device(buf):
        return buf.detach().numpy()
    return np.frombuffer(buf, dtype=np.uint8)


def on_device(buf) -> bool:
    """Whether a buffer is a device's memory: a tensor itself, not a host buffer's numpy view (comm.buffers)."""
    return type(buf).__module__.startswith("torch")


def _timeout(deadline: float) -> float | None:
    """Simulated seconds until `deadline` (None: no deadline, wait for as long as it takes)."""
    return None if math.isinf(deadline) else max(0.0, deadline - this_rank().cluster.now())


class Status:
    def __init__(self):
        self.source, self.tag, self.count = ANY_SOURCE, ANY_TAG, 0

    def Get_tag(self) -> int:  # the mpi4py API, names and all
        return self.tag

    def Get_source(self) -> int:
        return self.source

    def _set(self, message: Message) -> None:
        self.source, self.tag, self.count = message.source, message.tag, message.nbytes


class SimulatedRequest:
    """A nonblocking operation, completed by a helper actor (cluster.Done); `MPI.Request` in a simulation."""

    def __init__(self, done):
        self._done = done

    def Test(self) -> bool:
        if self._done.ready and self._done.error is not None:
            raise self._done.error
        return self._done.ready

    def Wait(self) -> None:
        self._done.result()

    def wait_until(self, deadline: float) -> bool:
        """Completed before the simulated time `deadline`? (transport.complete's blocking wait; a failed
        operation raises its error)"""
        done = self._done.wait(_timeout(deadline))
        return self.Test() if done else False

    @staticmethod
    def Testall(requests) -> bool:
        return all(r.Test() for r in requests)

    @staticmethod
    def Waitall(requests) -> None:
        for r in requests:
            r.Wait()


class Comm:
    """A communicator: its world ranks, this rank's index, and its channel (the inboxes' namespace)."""

    def __init__(self, channel: str, ranks: tuple[int, ...], rank: int):
        self.channel = channel
        self.ranks = ranks  # world ranks, by rank in this communicator
        self.rank = rank
        self._children = 0  # communicators made from this one so far (the same count on every member)
        self._nonblocking = 0  # nonblocking collectives started so far (the same on every member)
        self.collective_calls = 0  # blocking collectives so far: their messages' tag

    # ---- who
    def Get_rank(self) -> int:
        return self.rank

    def Get_size(self) -> int:
        return len(self.ranks)

    def __eq__(self, other) -> bool:
        return isinstance(other, Comm) and other.channel == self.channel and other.rank == self.rank

    def __hash__(self) -> int:
        return hash((self.channel, self.rank))

    @property
    def cluster(self):
        return this_rank().cluster

    # ---- point to point
    def _post(
        self, payload, nbytes: int, dest: int, tag: int, channel: str | None = None, device: bool = False
    ) -> None:
        cluster = self.cluster
        try:
            cluster.transfer(self.ranks[self.rank], self.ranks[dest], nbytes, device)
        except RankLost as error:
            raise Exception(f"Other MPI error: {error}") from None
        cluster.inbox(channel or self.channel, self.ranks[dest]).deliver(Message(self.rank, tag, payload, nbytes))

    def _inbox(self, channel: str | None = None):
        return self.cluster.inbox(channel or self.channel, self.ranks[self.rank])

    def _payload(self, buf) -> tuple[np.ndarray | None, int]:
        """A message's copy of `buf` and its size; no copy of a time-only replica (its bytes are priced alone)."""
        data = array(buf)
        return (data.copy() if self.cluster.carries(data) else None), data.nbytes

    def Send(self, buf, dest: int, tag: int = 0) -> None:
        self._post(*self._payload(buf), dest, tag)

    def Isend(self, buf, dest: int, tag: int = 0) -> SimulatedRequest:
        return SimulatedRequest(spawn("isend", self._post, *self._payload(buf), dest, tag))

    def Recv(self, buf, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        message = self._inbox().take(source, tag)
        if message.payload is not None:
            out = array(buf)
            out.reshape(-1).view(np.uint8)[: message.payload.nbytes] = message.payload.reshape(-1).view(np.uint8)
        if status is not None:
            status._set(message)

    def Probe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> None:
        message = self._inbox().take(source, tag, remove=False)
        if status is not None:
            status._set(message)

    def Iprobe(self, source: int = ANY_SOURCE, tag: int = ANY_TAG, status: Status | None = None) -> bool:
        message = self._inbox().find(source, tag, remove=False)
        if message is None:
            blocked(this_rank().cluster.sg.this_actor.sleep_for, self.cluster.poll_s)  # a spin loop lets time pass
            return False
        if status is not None:
            status._set(message)
        return True

    def probe_until(self, source: int, tag: int, deadline: float) -> bool:
        """A matching message arrived before the simulated time `deadline`? (transport.arrival)"""
        return self._inbox().take(source, tag, remove=False, timeout=_timeout(deadline)) is not None

    # ---- collectives (scaledl.sim.collectives), each on this communicator's collective channel
    def _collective(self, buf=None) -> collectives.Channel:
        """A blocking collective's channel; its messages go device to device when `buf` is device memory, and
        carry no values when `buf` is a time-only replica."""
        self.collective_calls += 1
        return collectives.Channel(self, self.channel + "#c", self.collective_calls, on_device(buf), self._carries(buf))

    def _nonblocking_channel(self, buf=None) -> collectives.Channel:
        self._nonblocking += 1
        name = f"{self.channel}#nb{self._nonblocking}"
        return collectives.Channel(self, name, 0, on_device(buf), self._carries(buf))

    def _carries(self, buf) -> bool:
        return buf is None or self.cluster.carries(array(buf))

    def Barrier(self) -> None:
        collectives.barrier(self._collective())

    def Ibarrier(self) -> SimulatedRequest:
        return SimulatedRequest(spawn("ibarrier", collectives.barrier, self._nonblocking_channel()))

    def Bcast(self, buf, root: int = 0) -> None:
        collectives.bcast(self._collective(buf), array(buf), root)

    def Reduce(self, sendbuf, recvbuf, op: Op = SUM, root: int = 0) -> None:
        send = array(recvbuf) if sendbuf is IN_PLACE else array(sendbuf)
        recv = array(recvbuf) if self.rank == root else None
        collectives.reduce(self._collective(recvbuf if sendbuf is IN_PLACE else sendbuf), send, recv, op, root)

    def Allreduce(self, sendbuf, recvbuf, op: Op = SUM) -> None:
        channel = self._collective(recvbuf)
        recv = array(recvbuf)
        if sendbuf is not IN_PLACE and channel.carry:
            np.copyto(recv, array(sendbuf))
        collectives.allreduce(channel, recv, op)

    def Iallreduce(self, sendbuf, recvbuf, op: Op = SUM) -> SimulatedRequest:
        channel = self._nonblocking_channel(recvbuf)
        recv = array(recvbuf)
        if sendbuf is not IN_PLACE and channel.carry:
            np.copyto(recv, array(sendbuf))
        return SimulatedRequest(spawn("iallreduce", collectives.allreduce, channel, recv, op))

    def Gather(self, sendbuf, recvbuf, root: int = 0) -> None:
        out = array(recvbuf) if self.rank == root else None
        channel = self._collective()
        channel.carry = self._carries(sendbuf)
        collectives.gather(channel, array(sendbuf), out, root)

    # ---- collectives of Python objects (pickled, as mpi4py does)
    def bcast(self, obj=None, root: int = 0):
        return collectives.bcast_object(self._collective(), obj, root)

    def gather(self, obj, root: int = 0):
        return collectives.gather_objects(self._collective(), obj, root)

    def allgather(self, obj):
        return collectives.allgather_objects(self._collective(), obj)

    def allreduce(self, obj, op: Op = SUM):
        values = self.allgather(obj)
        result = values[0]
        for value in values[1:]:  # rank order: the same result on every rank
            result = _PY_OPS[op](result, value)
        return result

    # ---- communicators
    def _child_channel(self, what: str) -> str:
        self._children += 1
        return f"{self.channel}/{what}{self._children}"

    def Dup(self) -> Comm:
        return Comm(self._child_channel("dup"), self.ranks, self.rank)

    def Split(self, color: int = 0, key: int = 0) -> Comm | None:
        channel = self._child_channel("split")
        chosen = self.allgather((color, key, self.rank))
        if color == UNDEFINED:
            return COMM_NULL
        members = sorted((k, r) for c, k, r in chosen if c == color)
        ranks = tuple(self.ranks[r] for _, r in members)
        return Comm(f"{channel}.{color}", ranks, [r for _, r in members].index(self.rank))

    def Split_type(self, split_type: int, key: int = 0) -> Comm:
        nodes = sorted({state.node for state in self.cluster.ranks})
        return self.Split(nodes.index(this_rank().node), key)

    def Free(self) -> None:
        pass

    def Abort(self, errorcode: int = 0) -> None:
        raise SimulatedAbort(errorcode)


COMM_NULL = None


def _target(target, disp_unit: int) -> int:
    """The byte offset of mpi4py's `target` argument: a displacement, or (displacement, count, datatype)."""
    if target is None:
        return 0
    disp = target[0] if isinstance(target, (list, tuple)) else target
    return int(disp) * disp_unit


class _ReadWriteLock:
    """A window target's lock: many shared holders or one exclusive holder (writer-fair: a turnstile)."""

    def __init__(self, sg):
        self.turnstile = sg.Mutex()
        self.readers_mutex = sg.Mutex()
        self.room_empty = sg.Semaphore(1)
        self.readers = 0

    def lock(self, exclusive: bool) -> None:
        blocked(self.turnstile.lock)
        if exclusive:
            blocked(self.room_empty.acquire)
            self.turnstile.unlock()
            return
        self.turnstile.unlock()
        blocked(self.readers_mutex.lock)
        self.readers += 1
        if self.readers == 1:
            blocked(self.room_empty.acquire)
        self.readers_mutex.unlock()

    def unlock(self, exclusive: bool) -> None:
        if exclusive:
            self.room_empty.release()
            return
        self.readers_mutex.lock()
        self.readers -= 1
        if self.readers == 0:
            self.room_empty.release()
        self.readers_mutex.unlock()


class Win:
    """An RMA window over every member's memory (allocated by its owner, shared in this process)."""

    def __init__(self, comm: Comm, memories: list[np.ndarray], disp_units: list[int], locks: list, applying: list):
        self.comm = comm
        self.memories = memories  # uint8, per rank of comm
        self.disp_units = disp_units
        self.locks = locks
        self.applying = applying  # per target: the mutex its accumulates are applied under, one segment at a time
        self._held: dict[int, bool] = {}  # target -> exclusive

    @staticmethod
    def _create(nbytes: int, disp_unit: int, comm: Comm) -> Win:
        cluster = comm.cluster
        key = comm._child_channel("win")
        mine = np.zeros(int(nbytes), dtype=np.uint8)
        everyone = comm.allgather((comm.rank, disp_unit))  # also orders the allocation: all members are here
        table = cluster.shared.setdefault(key, {})
        table[comm.rank] = mine
        comm.Barrier()  # every member's memory is in the table
        memories = [table[r] for r in range(comm.Get_size())]
        locks = cluster.shared.setdefault(key + ":locks", [_ReadWriteLock(cluster.sg) for _ in memories])
        applying = cluster.shared.setdefault(key + ":applying", [cluster.sg.Mutex() for _ in memories])
        return Win(comm, memories, [u for _, u in sorted(everyone)], locks, applying)

    @staticmethod
    def Allocate(size: int, disp_unit: int = 1, info=None, comm: Comm | None = None) -> Win:
        return Win._create(size, disp_unit, comm)

    @staticmethod
    def Allocate_shared(size: int, disp_unit: int = 1, info=None, comm: Comm | None = None) -> Win:
        return Win._create(size, disp_unit, comm)

    def Shared_query(self, rank: int):
        return memoryview(self.memories[rank]), self.disp_units[rank]

    def tomemory(self):
        return memoryview(self.memories[self.comm.rank])

    # ---- epochs
    def _round_trip(self, target: int) -> None:
        """A lock's request and grant: two control messages when the target is another rank."""
        if target != self.comm.rank:
            cluster = self.comm.cluster
            me, there = self.comm.ranks[self.comm.rank], self.comm.ranks[target]
            cluster.transfer(me, there, 0, copiers=(me,))
            cluster.transfer(there, me, 0, copiers=(me,))

    def Lock(self, rank: int, lock_type: int = LOCK_EXCLUSIVE, assertion: int = 0) -> None:
        exclusive = lock_type == LOCK_EXCLUSIVE
        self._round_trip(rank)
        self.locks[rank].lock(exclusive)
        self._held[rank] = exclusive

    def Unlock(self, rank: int) -> None:
        self.locks[rank].unlock(self._held.pop(rank))

    def Flush(self, rank: int) -> None:
        pass  # every operation completed when it was issued

    def Sync(self) -> None:
        pass

    def Free(self) -> None:
        self.comm.Barrier()

    # ---- operations: segment by segment, move the bytes, then apply
    def _view(self, target: int, offset: int, like: np.ndarray) -> np.ndarray:
        memory = self.memories[target]
        return memory[offset : offset + like.nbytes].view(like.dtype).reshape(-1)

    def _shared(self, target: int) -> bool:
        """Whether `target`'s window is in the origin's memory host, on SimGrid's clock: shared memory, which the
        origin loads and stores (the α-β clock keeps every operation a message)."""
        cluster = self.comm.cluster
        me, there = (cluster.ranks[self.comm.ranks[r]] for r in (self.comm.rank, target))
        return me.memory_host == there.memory_host and cluster.clock == "simgrid"

    def _direct(self, traffic: int) -> None:
        """The origin's own loads and stores of `traffic` bytes in its memory host, after the call's latency."""
        cluster, origin = self.comm.cluster, self.comm.ranks[self.comm.rank]
        me = cluster.ranks[origin]
        latency, _ = cluster.route(me.memory_host, me.memory_host)
        cluster.copy(me.memory_host, latency + traffic / me.meter.host_device.memory_bw, (origin,))

    def _move(self, src: int, dst: int, nbytes: int) -> None:
        cluster = self.comm.cluster
        try:
            origin = self.comm.ranks[self.comm.rank]  # within a node, the origin copies alone (shared memory)
            cluster.transfer(self.comm.ranks[src], self.comm.ranks[dst], nbytes, copiers=(origin,))
        except RankLost as error:
            raise Exception(f"Other MPI error: {error}") from None

    @staticmethod
    def _segments(like: np.ndarray):
        """Slices of a flat array of `like`'s size, RMA_SEGMENT_BYTES each (the last one shorter)."""
        step = max(RMA_SEGMENT_BYTES // like.itemsize, 1)
        return [slice(i, min(i + step, like.size)) for i in range(0, max(like.size, 1), step)]

    @contextlib.contextmanager
    def _applying(self, target: int, nbytes: int):
        """Hold the target's accumulate mutex while its node's CPU applies `nbytes` of operands (memory-bound)."""
        mutex = self.applying[target]
        mutex.lock()
        try:
            if nbytes:  # the window is a host buffer of the target's: its memory host applies the operands
                self.comm.cluster.ranks[self.comm.ranks[target]].meter.accumulate_here(nbytes)
            yield
        finally:
            mutex.unlock()

    # A time-only replica on the origin's side (scaledl.sim.replicas) has no values to move: its bytes are priced,
    # segment by segment as ever, and neither copied nor applied.
    def Put(self, origin, target_rank: int, target=None) -> None:
        data = array(origin).reshape(-1)
        there = self._view(target_rank, _target(target, self.disp_units[target_rank]), data)
        carry, shared = self.comm.cluster.carries(data), self._shared(target_rank)
        for part in self._segments(data):
            if shared:  # read n, write n
                self._direct(2 * data[part].nbytes)
            else:
                self._move(self.comm.rank, target_rank, data[part].nbytes)
            if carry:
                there[part] = data[part]

    def Get(self, origin, target_rank: int, target=None) -> None:
        out = array(origin).reshape(-1)
        there = self._view(target_rank, _target(target, self.disp_units[target_rank]), out)
        carry, shared = self.comm.cluster.carries(out), self._shared(target_rank)
        for part in self._segments(out):
            if shared:  # read n, write n
                self._direct(2 * out[part].nbytes)
            else:
                self._move(target_rank, self.comm.rank, out[part].nbytes)
            if carry:
                out[part] = there[part]

    def Accumulate(self, origin, target_rank: int, target=None, op: Op = SUM) -> None:
        data = array(origin).reshape(-1)
        there = self._view(target_rank, _target(target, self.disp_units[target_rank]), data)
        carry, shared = self.comm.cluster.carries(data), self._shared(target_rank)
        for part in self._segments(data):
            if not shared:
                self._move(self.comm.rank, target_rank, data[part].nbytes)
            with self._applying(target_rank, 0 if shared else data[part].nbytes):
                if shared:  # the origin reads both operands and writes one, holding the target's mutex
                    self._direct(3 * data[part].nbytes)
                if carry:
                    op.apply(there[part], data[part])

    def Get_accumulate(self, origin, result, target_rank: int, target=None, op: Op = SUM) -> None:
        data, out = array(origin), array(result).reshape(-1)
        there = self._view(target_rank, _target(target, self.disp_units[target_rank]), out)
        carry, shared = self.comm.cluster.carries(out), self._shared(target_rank)
        for part in self._segments(out):
            n = out[part].nbytes
            if op is not NO_OP and not shared:
                self._move(self.comm.rank, target_rank, n)
            with self._applying(target_rank, n if op is not NO_OP and not shared else 0):
                if shared:  # the old values read and written out, then (an op) both operands read, one written
                    self._direct((2 + (3 if op is not NO_OP else 0)) * n)
                if carry:
                    out[part] = there[part]
                    if op is not NO_OP:
                        op.apply(there[part], data.reshape(-1)[part])
            if not shared:
                self._move(target_rank, self.comm.rank, n)

    def Fetch_and_op(self, origin, result, target_rank: int, target_disp: int = 0, op: Op = SUM) -> None:
        self.Get_accumulate(origin, result, target_rank, target_disp, op)


class SimulatedMPI:
    """The module object the patterns see as `MPI` during a simulation."""

    UNDEFINED, IN_PLACE, ANY_SOURCE, ANY_TAG = UNDEFINED, IN_PLACE, ANY_SOURCE, ANY_TAG
    LOCK_EXCLUSIVE, LOCK_SHARED, COMM_TYPE_SHARED, COMM_NULL = LOCK_EXCLUSIVE, LOCK_SHARED, COMM_TYPE_SHARED, COMM_NULL
    THREAD_SINGLE, THREAD_FUNNELED, THREAD_SERIALIZED, THREAD_MULTIPLE = 0, 1, 2, 3
    SUM, MAX, MIN, BOR, REPLACE, NO_OP = SUM, MAX, MIN, BOR, REPLACE, NO_OP
    FLOAT, DOUBLE, INT, BYTE = FLOAT, DOUBLE, INT, BYTE
    Comm, Win, Request, Status, Exception = Comm, Win, SimulatedRequest, Status, Exception  # mpi4py's names

    @property
    def COMM_WORLD(self) -> Comm:
        return this_rank().world

    @staticmethod
    def Wtime() -> float:
        return this_rank().cluster.now()

    @staticmethod
    def Query_thread() -> int:
        return THREAD_MULTIPLE  # helper actors may call anything

    @staticmethod
    def Get_version() -> tuple[int, int]:
        return (3, 1)

    @staticmethod
    def Get_library_version() -> str:
        return f"simulated MPI over SimGrid {this_rank().cluster.sg.simgrid_version}"

    @staticmethod
    def get_vendor() -> tuple[str, tuple[int, ...]]:
        version = this_rank().cluster.sg.simgrid_version
        return "SimGrid", tuple(int(part) for part in version.split(".")[:3])

    @staticmethod
    def Finalize() -> None:
        pass


def object_size(obj) -> int:
    """Bytes of a Python object as mpi4py would send it (pickled)."""
    return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


SIMULATED_MPI = SimulatedMPI()
