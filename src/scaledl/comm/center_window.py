"""The center W in an MPI one-sided window on the master; workers read and update it themselves.

This is the parameter-server pattern of Async SGD / Async EASGD without a
master-side request loop: a worker opens a passive-target epoch on the
master's window, reads W and adds its update, then closes the epoch.

`locked=True` opens the epoch with an exclusive lock: updates are applied
one at a time, in the order workers obtain the lock (first come, first
served). `locked=False` opens it with a shared lock: several workers' reads
and accumulates proceed at once, interleaved element-wise by the MPI library
(accumulates of one op are element-wise atomic, reads may be torn), which
is Hogwild. That lock is the only difference between the two.

Window layout: W (n words), optionally followed by a momentum buffer V
(n words) for master-side momentum.
"""

from __future__ import annotations

import numpy as np
import torch
from mpi4py import MPI


def _nothing() -> None:
    pass


class CenterWindow:
    def __init__(self, world: MPI.Comm, master: int, numel: int, *, locked: bool, with_momentum: bool = False):
        self.master = master
        self.numel = numel
        self.locked = locked
        self.lock_type = MPI.LOCK_EXCLUSIVE if locked else MPI.LOCK_SHARED
        self.is_master = world.Get_rank() == master
        words = numel * (2 if with_momentum else 1)
        self.win = MPI.Win.Allocate(words * 4 if self.is_master else 0, disp_unit=4, comm=world)
        if self.is_master:
            memory = np.frombuffer(self.win.tomemory(), dtype=np.float32)
            memory[:] = 0.0
            self.center = torch.from_numpy(memory[:numel])
            self.momentum = torch.from_numpy(memory[numel:]) if with_momentum else None

    # ---- worker side: each call is one exchange (one lock epoch)
    def push_then_pull(self, delta: np.ndarray, out: np.ndarray, on_update=_nothing) -> None:
        """W += delta; out ← W (the center including this update). Async/Hogwild SGD.

        `on_update()` runs inside the lock epoch (the version count of the update).
        """
        self.win.Lock(self.master, self.lock_type)
        self.win.Accumulate(delta, self.master, op=MPI.SUM)
        self.win.Flush(self.master)  # the lock is held from here on (MPI may acquire it lazily)
        on_update()
        self.win.Get(out, self.master)
        self.win.Unlock(self.master)

    def pull_then_push(self, out: np.ndarray, make_delta, on_update=_nothing) -> None:
        """out ← W; W += make_delta(out). Async/Hogwild EASGD: the elastic difference needs W first.

        The update rules are the caller's (comm/ knows no algorithm): `make_delta`
        computes the increment from the W just read.
        """
        self.win.Lock(self.master, self.lock_type)
        self.win.Get(out, self.master)
        self.win.Flush(self.master)
        self.win.Accumulate(make_delta(out), self.master, op=MPI.SUM)
        on_update()
        self.win.Unlock(self.master)

    def momentum_step(self, velocity: np.ndarray, out: np.ndarray, update_velocity, on_update=_nothing) -> None:
        """Master-side momentum (Eqs. 3-4 at the master): V ← V' ; W ← W + V' ; out ← W.

        velocity ← V; `update_velocity(velocity)` turns it into V' in place (the
        caller's Eq. 3, V' = μV − η·ΔW). A read-modify-write of V: only correct
        under the exclusive lock.
        """
        self.win.Lock(self.master, self.lock_type)
        self.win.Get(velocity, self.master, target=(self.numel, self.numel, MPI.FLOAT))
        self.win.Flush(self.master)
        update_velocity(velocity)
        self.win.Put(velocity, self.master, target=(self.numel, self.numel, MPI.FLOAT))
        self.win.Accumulate(velocity, self.master, op=MPI.SUM)
        on_update()
        self.win.Flush(self.master)
        self.win.Get(out, self.master)
        self.win.Unlock(self.master)

    # ---- master side
    def write(self, values: torch.Tensor) -> None:
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        self.center.copy_(values)
        self.win.Unlock(self.master)

    def snapshot(self, into: torch.Tensor) -> None:
        """A copy of W that no worker is halfway through changing."""
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        into.copy_(self.center)
        self.win.Unlock(self.master)

    def free(self) -> None:
        self.win.Free()
