"""The center W in an MPI window on the master; workers read and update it themselves.

This is the parameter-server pattern of Async SGD / Async EASGD without a
master-side request loop: a worker opens a passive-target epoch on the
master's window, reads W and adds its update, then closes the epoch.

`locked=True` opens the epoch with an exclusive lock: updates are applied
one at a time, in the order workers obtain the lock (first come, first
served). `locked=False` opens it with a shared lock (Hogwild). That lock is
the only difference between the two, on either kind of window:

`CenterWindow` ("rma", any placement of the ranks): `MPI.Win.Allocate` on
    the master; workers `Get` W and `Accumulate` their increment. How
    concurrent a shared-lock epoch really is depends on the MPI library.
    With MPICH every lock grant, shared ones included, needs the master's
    progress engine (its spin loop in algorithms/window.py), and MPICH
    applies each `MPI_Accumulate` as a whole vector, under a per-window
    mutex or through the target's progress engine. So Hogwild on this window
    means overlapping epochs with possibly torn or stale reads, but
    serialised whole-vector accumulates (element-wise atomic, none lost),
    not concurrent element-wise updates; its speed-up over the exclusive
    lock comes from a shorter critical section, not from parallel adds.
`SharedCenterWindow` ("shared", every rank on one node): `MPI.Win.Allocate_shared`;
    each worker maps the master's segment (`Win.Shared_query`) and reads and
    adds with numpy, in its own process, inside the same lock epochs, with
    `Win.Sync()` after taking and before releasing the lock (the unified
    memory model's barrier for load/store access). Under the shared lock
    several workers really add into W at the same time, element by element
    and unordered; plain loads and stores are not atomic, so two workers
    adding to one element at the same instant can lose one of the two adds
    (the lost-update race Hogwild's analysis tolerates), and reads may be
    torn. Under the exclusive lock updates are serial, as on "rma".

Arithmetic is the same on both windows: float32 W + Δ, element-wise (what
`MPI_Accumulate` with MPI_SUM computes), so one worker is bitwise the same
on either. bench/bench_hogwild.py measures the concurrency of both
(docs/benchmarks.md, "Hogwild concurrency").

Window layout: W (n words), optionally followed by a momentum buffer V
(n words) for master-side momentum.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from scaledl.comm import transport
from scaledl.comm.transport import MPI
from scaledl.config import CENTER_WINDOWS
from scaledl.errors import UserError


def _nothing() -> None:
    pass


def _phase(timer, name: str):
    """timer.phase(name), or nothing without a timer (the exchanges time themselves when given one:
    acquiring the lock is `wait`, queueing behind other workers; the epoch's operations are `comm`)."""
    return timer.phase(name) if timer is not None else contextlib.nullcontext()


class _Center:
    """What both windows share: the lock type, the master's side, the optional epoch trace.

    `trace`: None, or a list that gets one (lock held since, lock released at)
    MPI.Wtime pair per worker epoch (bench/bench_hogwild.py counts overlaps).
    """

    win: MPI.Win

    def __init__(self, world: MPI.Comm, master: int, numel: int, locked: bool):
        self.master = master
        self.numel = numel
        self.locked = locked
        self.lock_type = MPI.LOCK_EXCLUSIVE if locked else MPI.LOCK_SHARED
        self.is_master = world.Get_rank() == master
        self.trace: list | None = None
        # this rank's seconds inside its epochs that change W under the algorithm's lock (the critical sections:
        # P × their mean against a worker's cycle says whether the lock decides the step), and how many
        self.critical_s = 0.0
        self.critical_epochs = 0
        self._since = 0.0

    def _map(self, memory: np.ndarray, with_momentum: bool) -> None:
        """W (and V) as float32 views of the window's memory (the master's, or the mapped segment)."""
        self.memory = memory
        self.w = memory[: self.numel]
        self.v = memory[self.numel :] if with_momentum else None
        if self.is_master:
            memory[:] = 0.0
            self.center = torch.from_numpy(self.w)
            self.momentum = torch.from_numpy(self.v) if with_momentum else None

    # ---- master side
    def write(self, values: torch.Tensor, whole: bool = False) -> None:
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        self.win.Sync()
        (torch.from_numpy(self.memory) if whole else self.center).copy_(values)
        self.win.Sync()
        self.win.Unlock(self.master)

    def read_all(self) -> torch.Tensor:
        """A copy of the whole window (W, then V when it holds momentum), for a checkpoint."""
        copy = torch.empty(len(self.memory), dtype=torch.float32)
        self.snapshot(copy, whole=True)
        return copy

    def write_all(self, values: torch.Tensor) -> None:
        self.write(values, whole=True)

    def snapshot(self, into: torch.Tensor, whole: bool = False) -> None:
        """A copy of W that no worker is halfway through changing."""
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        self.win.Sync()
        into.copy_(torch.from_numpy(self.memory) if whole else self.center)
        self.win.Unlock(self.master)

    def free(self) -> None:
        self.win.Free()

    def _count_critical(self, critical: bool) -> None:
        if critical:
            self.critical_s += transport.clock() - self._since
            self.critical_epochs += 1


class CenterWindow(_Center):
    """W in an RMA window (`MPI.Win.Allocate`) on the master: Get and Accumulate (kind "rma")."""

    def __init__(self, world: MPI.Comm, master: int, numel: int, *, locked: bool, with_momentum: bool = False):
        super().__init__(world, master, numel, locked)
        words = numel * (2 if with_momentum else 1)
        self.win = MPI.Win.Allocate(words * 4 if self.is_master else 0, disp_unit=4, comm=world)
        if self.is_master:
            self._map(np.frombuffer(self.win.tomemory(), dtype=np.float32), with_momentum)

    def _read(self, out: np.ndarray) -> None:
        """out ← W. Under the shared lock (Hogwild) other workers' Accumulates may land meanwhile, and MPI-3
        defines a read concurrent with them only as an accumulate operation: Get_accumulate with NO_OP
        (element-wise atomic, as their Accumulates are). Under the exclusive lock no epoch overlaps and
        a Get is the plain read."""
        if self.locked:
            self.win.Get(out, self.master)
        else:
            whole = (0, len(out), MPI.FLOAT)
            self.win.Get_accumulate([None, 0, MPI.FLOAT], [out, MPI.FLOAT], self.master, target=whole, op=MPI.NO_OP)

    # ---- worker side: each call is one exchange (one lock epoch)
    def push_then_pull(
        self, delta: np.ndarray, out: np.ndarray, on_update=_nothing, timer=None, before_add=None
    ) -> None:
        """W += delta; out ← W (the center including this update). Async/Hogwild SGD.

        `on_update()` runs inside the lock epoch (the version count of the update); `before_add()`, where
        given, once the lock is held and before the add (an update weighed by the version it counts there).
        """
        with _phase(timer, "wait"):
            self.win.Lock(self.master, self.lock_type)
        with _phase(timer, "comm"):
            held = self._held()
            self._before_add(before_add)
            self.win.Accumulate(delta, self.master, op=MPI.SUM)
            self.win.Flush(self.master)  # the lock is held from here on (MPI may acquire it lazily)
            on_update()
            self._read(out)
            self._unlock(held)

    def pull_then_push(self, out: np.ndarray, make_delta, on_update=_nothing, timer=None) -> None:
        """out ← W; W += make_delta(out). Async/Hogwild EASGD: the elastic difference needs W first.

        The update rules are the caller's (comm/ knows no algorithm): `make_delta`
        computes the increment from the W just read.
        """
        with _phase(timer, "wait"):
            self.win.Lock(self.master, self.lock_type)
        with _phase(timer, "comm"):
            held = self._held()
            self._read(out)
            self.win.Flush(self.master)
            with transport.meter("host_arithmetic"):  # inside the epoch: a simulation prices it here
                delta = make_delta(out)
            self.win.Accumulate(delta, self.master, op=MPI.SUM)
            on_update()
            self._unlock(held)

    def pull(self, out: np.ndarray, timer=None, on_hold=_nothing, on_release=_nothing) -> None:
        """out ← W, in an epoch of its own under the shared lock: concurrent with other reads, never with an
        exclusive epoch, so under the exclusive algorithms' lock it reads a W no update is halfway through.

        `on_hold()` runs once the lock is held and `on_release()` once it is not (a worker that stops in
        between keeps the others' adds waiting: the master's watchdog must know whom they wait for). MPICH
        grants a shared lock at `Lock` (a shared Lock waited 1.8 s here behind an exclusive holder), so the mark
        comes first."""
        with _phase(timer, "wait"):
            self.win.Lock(self.master, MPI.LOCK_SHARED)
        with _phase(timer, "comm"):
            held = self._held()
            on_hold()
            self._read(out)
            self._unlock(held, critical=False)
            on_release()

    def push(self, delta: np.ndarray, on_update=_nothing, timer=None, before_add=None) -> None:
        """W += delta, in an epoch of its own under the algorithm's lock (the critical section is the add);
        `before_add` as push_then_pull's."""
        with _phase(timer, "wait"):
            self.win.Lock(self.master, self.lock_type)
        with _phase(timer, "comm"):
            held = self._held()
            self._before_add(before_add)
            self.win.Accumulate(delta, self.master, op=MPI.SUM)
            self.win.Flush(self.master)  # the lock is held from here on (MPI may acquire it lazily): then mark it
            on_update()
            self._unlock(held)

    def momentum_step(
        self, velocity: np.ndarray, out: np.ndarray, update_velocity, on_update=_nothing, timer=None
    ) -> None:
        """Master-side momentum (Eqs. 3-4 at the master): V ← V' ; W ← W + V' ; out ← W.

        velocity ← V; `update_velocity(velocity)` turns it into V' in place (the
        caller's Eq. 3, V' = μV − η·ΔW). A read-modify-write of V: only correct
        under the exclusive lock.
        """
        with _phase(timer, "wait"):
            self.win.Lock(self.master, self.lock_type)
        with _phase(timer, "comm"):
            held = self._held()
            self.win.Get(velocity, self.master, target=(self.numel, self.numel, MPI.FLOAT))
            self.win.Flush(self.master)
            with transport.meter("host_arithmetic"):
                update_velocity(velocity)
            self.win.Put(velocity, self.master, target=(self.numel, self.numel, MPI.FLOAT))
            self.win.Accumulate(velocity, self.master, op=MPI.SUM)
            on_update()
            self.win.Flush(self.master)
            self.win.Get(out, self.master)
            self._unlock(held)

    def _before_add(self, before_add) -> None:
        if before_add is not None:
            self.win.Flush(self.master)  # the lock is held from here on (MPI may acquire it lazily)
            before_add()

    def _held(self) -> float:
        """When the epoch's lock is held: MPICH's Lock returns once granted (the trace of exclusive epochs,
        which never overlap, checks it: tests/mpi/check_shared_window.py); a library that grants lazily,
        at the first Flush, would make this stamp early."""
        self._since = transport.clock()
        return MPI.Wtime() if self.trace is not None else 0.0

    def _unlock(self, held: float, critical: bool = True) -> None:
        if self.trace is not None:
            self.win.Flush(self.master)  # this epoch's operations are done: the stamp closes the epoch
            self.trace.append((held, MPI.Wtime()))
        self.win.Unlock(self.master)
        self._count_critical(critical)


class SharedCenterWindow(_Center):
    """W in an MPI shared-memory window on the master's node; workers load and store it directly (kind "shared").

    Every rank of `world` must be on one node (refused otherwise, in one line).
    """

    def __init__(self, world: MPI.Comm, master: int, numel: int, *, locked: bool, with_momentum: bool = False):
        super().__init__(world, master, numel, locked)
        node = world.Split_type(MPI.COMM_TYPE_SHARED)
        nodes = world.allreduce(1 if node.Get_rank() == 0 else 0)  # the same count on every rank
        node.Free()
        if nodes != 1:  # every rank refuses alike, in one line
            raise UserError(
                f"--center-window shared needs every rank on one node, but the {world.Get_size()} ranks "
                f"span {nodes} nodes; use --center-window rma (RMA works across nodes)"
            )
        words = numel * (2 if with_momentum else 1)
        self.win = MPI.Win.Allocate_shared(words * 4 if self.is_master else 0, disp_unit=4, comm=world)
        segment, _ = self.win.Shared_query(master)
        self._map(np.frombuffer(segment, dtype=np.float32, count=words), with_momentum)

    def _lock(self, timer, lock_type: int | None = None) -> float:
        with _phase(timer, "wait"):
            self.win.Lock(self.master, self.lock_type if lock_type is None else lock_type)
        self.win.Sync()  # see the stores of the epochs before this one
        self._since = transport.clock()
        return MPI.Wtime() if self.trace is not None else 0.0

    def _unlock(self, held: float, critical: bool = True) -> None:
        self.win.Sync()  # this epoch's stores are visible before the lock is released
        if self.trace is not None:
            self.trace.append((held, MPI.Wtime()))
        self.win.Unlock(self.master)
        self._count_critical(critical)

    # ---- worker side: the same exchanges as CenterWindow's, as loads and stores
    def push_then_pull(
        self, delta: np.ndarray, out: np.ndarray, on_update=_nothing, timer=None, before_add=None
    ) -> None:
        """W += delta; out ← W. See CenterWindow.push_then_pull."""
        held = self._lock(timer)
        with _phase(timer, "comm"):
            if before_add is not None:
                before_add()
            np.add(self.w, delta, out=self.w)
            on_update()
            np.copyto(out, self.w)
            self._unlock(held)

    def pull_then_push(self, out: np.ndarray, make_delta, on_update=_nothing, timer=None) -> None:
        """out ← W; W += make_delta(out). See CenterWindow.pull_then_push."""
        held = self._lock(timer)
        with _phase(timer, "comm"):
            np.copyto(out, self.w)
            np.add(self.w, make_delta(out), out=self.w)
            on_update()
            self._unlock(held)

    def pull(self, out: np.ndarray, timer=None, on_hold=_nothing, on_release=_nothing) -> None:
        """out ← W under the shared lock. See CenterWindow.pull."""
        held = self._lock(timer, MPI.LOCK_SHARED)
        with _phase(timer, "comm"):
            on_hold()
            np.copyto(out, self.w)
            self._unlock(held, critical=False)
            on_release()

    def push(self, delta: np.ndarray, on_update=_nothing, timer=None, before_add=None) -> None:
        """W += delta under the algorithm's lock. See CenterWindow.push."""
        held = self._lock(timer)
        with _phase(timer, "comm"):
            if before_add is not None:
                before_add()
            np.add(self.w, delta, out=self.w)
            on_update()
            self._unlock(held)

    def momentum_step(
        self, velocity: np.ndarray, out: np.ndarray, update_velocity, on_update=_nothing, timer=None
    ) -> None:
        """V ← V' ; W ← W + V' ; out ← W. See CenterWindow.momentum_step."""
        held = self._lock(timer)
        with _phase(timer, "comm"):
            np.copyto(velocity, self.v)
            update_velocity(velocity)
            np.copyto(self.v, velocity)
            np.add(self.w, velocity, out=self.w)
            on_update()
            np.copyto(out, self.w)
            self._unlock(held)


WINDOWS = {"rma": CenterWindow, "shared": SharedCenterWindow}
assert tuple(WINDOWS) == CENTER_WINDOWS


def open_center_window(
    kind: str, world: MPI.Comm, master: int, numel: int, *, locked: bool, with_momentum: bool = False
) -> _Center:
    """The center window of `kind` ("rma" or "shared"; TrainConfig.center_window), collectively on `world`."""
    return WINDOWS[kind](world, master, numel, locked=locked, with_momentum=with_momentum)
