"""Time-only: the ranks' large buffers are one replica per job, and a message from one carries no values.

A time-only simulation computes nothing, so no rank's weights, gradients, optimizer state or message
buffers mean anything; only their shapes are priced. Yet every rank allocating its own would make memory
grow with the rank count (GoogLeNet: about 150 MB a rank). While a rank runs, its `Replicas.mode` hands
every fresh CPU tensor of at least `SHARED_FROM_BYTES` (an `empty`, `zeros`, `*_like`, `clone`...) a
slot of the job's pool instead of its own memory: the rank's k-th live buffer of n bytes is every rank's
k-th buffer of n bytes. A rank's live buffers never alias each other (a slot returns to the rank when
the last tensor over it dies), so what the rank's code assumes of its own memory still holds; ranks
alias one another, which nothing can notice, as nothing they compute is read. The pool's pages are
touched only where something writes them (a model's first weights), so most of it is never resident.

`holds(array)` says whether a buffer lies in the pool: the simulated MPI moves such a payload's bytes
over the network (its price) but neither copies nor reduces its values (scaledl.sim.mpi). Control
messages (the stop flag, the board's words, the setup's objects) are small buffers of each rank's own,
below the threshold, and travel with their values as before.
"""

from __future__ import annotations

import math
import weakref

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

SHARED_FROM_BYTES = 1 << 20  # smaller tensors stay each rank's own: control values, a loss, a bias's message

# Operations whose output is fresh memory whose values do not come from another tensor's storage aliasing.
FRESH = {
    torch.ops.aten.empty.memory_format,
    torch.ops.aten.empty_strided.default,
    torch.ops.aten.empty_like.default,
    torch.ops.aten.zeros.default,
    torch.ops.aten.zeros_like.default,
    torch.ops.aten.ones.default,
    torch.ops.aten.ones_like.default,
    torch.ops.aten.full.default,
    torch.ops.aten.full_like.default,
    torch.ops.aten.new_empty.default,
    torch.ops.aten.new_zeros.default,
    torch.ops.aten.new_full.default,
    torch.ops.aten.clone.default,
}


class Replicas:
    """The job's pool: per buffer size, the slots every rank shares (each slot one untouched allocation)."""

    def __init__(self, shared_from: int = SHARED_FROM_BYTES):
        self.shared_from = shared_from
        self.slots: dict[int, list[np.ndarray]] = {}  # nbytes -> its slots' memory
        self._ranges: list[tuple[int, int]] = []  # every slot's [start, end) address

    def mode(self) -> _SharedBuffers:
        """A rank's allocation mode (one per rank: it keeps which slots the rank's live buffers hold)."""
        return _SharedBuffers(self)

    @property
    def nbytes(self) -> int:
        return sum(n * len(slots) for n, slots in self.slots.items())

    def holds(self, buf: np.ndarray) -> bool:
        """Whether `buf`'s memory lies in a slot: a replica's values, which no message needs to carry."""
        start = buf.__array_interface__["data"][0]
        return any(lo <= start < hi for lo, hi in self._ranges)

    def slot(self, nbytes: int, index: int) -> np.ndarray:
        slots = self.slots.setdefault(nbytes, [])
        while len(slots) <= index:
            memory = np.empty(nbytes, dtype=np.uint8)  # untouched: no page is resident until written
            address = memory.__array_interface__["data"][0]
            self._ranges.append((address, address + nbytes))
            slots.append(memory)
        return slots[index]


class _SharedBuffers(TorchDispatchMode):
    """One rank's view of the pool: a fresh large CPU tensor takes the first slot of its size that none of
    the rank's live tensors holds; everything else runs as it would."""

    def __init__(self, pool: Replicas):
        super().__init__()
        self.pool = pool
        self.live: dict[int, set[int]] = {}  # nbytes -> slot indices this rank's live buffers hold

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in FRESH or _at_most(func, args, kwargs) < self.pool.shared_from:
            return func(*args, **kwargs)
        if kwargs.get("pin_memory") or not _on_cpu(func, args, kwargs):
            return func(*args, **kwargs)
        meta = func(*tree_map(to_meta, args), **tree_map(to_meta, kwargs))
        nbytes = extent(meta.shape, meta.stride()) * meta.element_size()
        if nbytes < self.pool.shared_from or meta.layout != torch.strided:
            return func(*args, **kwargs)
        return self._take(meta, nbytes)

    def _take(self, meta: torch.Tensor, nbytes: int) -> torch.Tensor:
        live = self.live.setdefault(nbytes, set())
        index = next(i for i in range(len(live) + 1) if i not in live)
        live.add(index)
        # A fresh numpy view per buffer: torch's storage keeps it alive, so its finalizer runs when the last
        # tensor over the storage (views included) is gone, and the slot returns to this rank.
        memory = self.pool.slot(nbytes, index)[:]
        weakref.finalize(memory, live.discard, index)
        storage = torch.from_numpy(memory).untyped_storage()
        return torch.empty(0, dtype=meta.dtype).set_(storage, 0, meta.shape, meta.stride())


SIZED = {torch.ops.aten.new_empty.default, torch.ops.aten.new_zeros.default, torch.ops.aten.new_full.default}


def _at_most(func, args, kwargs) -> int:
    """A cheap bound on an allocation's bytes, before any meta computation (most are a skipped operation's
    small outputs): its size argument's, or its model tensor's, at 8 bytes an element."""
    if func in SIZED or not isinstance(args[0], torch.Tensor):
        size = args[1] if func in SIZED else args[0]
        return math.prod(size) * 8
    return args[0].numel() * 8


def _on_cpu(func, args, kwargs) -> bool:
    device = kwargs.get("device")
    if device is None:
        like = next((a for a in args if isinstance(a, torch.Tensor)), None)
        return like is None or like.device.type == "cpu"
    return torch.device(device).type == "cpu"


def to_meta(value):
    """An operation's argument as a meta kernel takes it: a tensor on the meta device, and a target device (a
    copy's `device=`) the meta device too, or the kernel refuses the copy."""
    if isinstance(value, torch.Tensor):
        return value.to("meta")
    return META if isinstance(value, torch.device) else value


META = torch.device("meta")


def extent(shape, stride) -> int:
    """Elements of storage a tensor of this shape and stride spans."""
    return 1 + sum((size - 1) * step for size, step in zip(shape, stride)) if all(shape) else 0
