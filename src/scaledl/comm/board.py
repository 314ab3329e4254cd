"""The master's notice board: a small RMA window of control words and statistics.

Workers update it with one-sided accumulates, so reporting a loss or
reading the stop flag never waits for the master's attention. Layout
(float64; counts stay exact below 2**53):

    [0] UPDATES   center updates so far (the center's version)
    [1] STOP      1.0 once the master ends the run
    [2] PAUSES    checkpoints asked for so far: a worker that sees it grow joins the next one
    [3] EVALS     evaluations asked for so far: a worker that sees it grow joins the evaluation's pause
    [4] LOSS_SUM  Σ loss·batch reported by workers
    [5] SAMPLES   Σ batch sizes reported
    [6 + w]       exchanges completed by worker w (heartbeat)
    [6 + P + w]   0.0 while worker w holds the center's lock; 1.0 from its beat until
                  it holds the lock for its read; 2.0 from the read's end until it
                  holds the lock for its add (split exchanges)

The last block tells a hung worker from the ones blocked behind it: a
worker that stops while holding an exclusive lock leaves the others queued.
Each mark differs from the one before it, so the master, polling, sees every
worker's last mark change even when it missed the marks in between: the time
of that change dates the worker's last lock request (comm/liveness.py).
"""

from __future__ import annotations

import numpy as np

from scaledl.comm.transport import MPI

UPDATES, STOP, PAUSES, EVALS, LOSS_SUM, SAMPLES, HEARTBEATS = 0, 1, 2, 3, 4, 5, 6
KEPT = (UPDATES, LOSS_SUM, SAMPLES)  # the words a checkpoint keeps (the rest restart at zero)


class Board:
    def __init__(self, world: MPI.Comm, master: int, num_workers: int):
        self.master = master
        self.is_master = world.Get_rank() == master
        self.num_workers = num_workers
        self.size = HEARTBEATS + 2 * num_workers
        nbytes = self.size * 8 if self.is_master else 0
        self.win = MPI.Win.Allocate(nbytes, disp_unit=8, comm=world)
        if self.is_master:
            self.words = np.frombuffer(self.win.tomemory(), dtype=np.float64)
            self.words[:] = 0.0
        self._one = np.ones(1, dtype=np.float64)
        self._zero = np.zeros(1, dtype=np.float64)
        self._two = np.full(1, 2.0)
        self._version = np.zeros(1, dtype=np.float64)
        self._stats = np.zeros(2, dtype=np.float64)
        self._control = np.zeros(3, dtype=np.float64)  # STOP, PAUSES, EVALS as read (one read: consistent)
        self._ignored = np.zeros(3, dtype=np.float64)  # NO_OP's origin (MPI wants it apart from the result)
        world.Barrier()  # the master's zeros are in place before anyone accumulates

    # ---- worker side
    def next_version(self, worker_index: int) -> int:
        """Count one center update (called holding the center's lock); returns the version before it."""
        self.win.Lock(self.master, MPI.LOCK_SHARED)
        self.win.Fetch_and_op(self._one, self._version, self.master, UPDATES, op=MPI.SUM)
        self.win.Accumulate(self._zero, self.master, target=self._queued(worker_index), op=MPI.REPLACE)
        self.win.Unlock(self.master)
        return int(self._version[0])

    def holding(self, worker_index: int, held: bool = True) -> None:
        """This worker holds the center's lock for an epoch that versions nothing (a read under the shared lock,
        which an exclusive add still waits for): mark it as the holder, as next_version does for an update;
        `held=False` once that epoch is over (it queues again, for its add: 2, not its beat's 1)."""
        self.win.Lock(self.master, MPI.LOCK_SHARED)
        mark = self._zero if held else self._two
        self.win.Accumulate(mark, self.master, target=self._queued(worker_index), op=MPI.REPLACE)
        self.win.Unlock(self.master)

    def report(self, worker_index: int, loss_sum: float, samples: int) -> tuple[bool, int, int]:
        """Add this iteration's loss, beat the heart; returns (the master says stop, checkpoints asked so far,
        evaluations asked so far)."""
        self._stats[:] = (loss_sum, samples)
        self.win.Lock(self.master, MPI.LOCK_SHARED)
        self.win.Accumulate(self._stats, self.master, target=LOSS_SUM, op=MPI.SUM)
        self.win.Accumulate(self._one, self.master, target=HEARTBEATS + worker_index, op=MPI.SUM)
        self.win.Accumulate(self._one, self.master, target=self._queued(worker_index), op=MPI.REPLACE)
        self.win.Get_accumulate(self._ignored, self._control, self.master, target=STOP, op=MPI.NO_OP)
        self.win.Unlock(self.master)
        return bool(self._control[0]), int(self._control[1]), int(self._control[2])

    def _queued(self, worker_index: int) -> int:
        return HEARTBEATS + self.num_workers + worker_index

    # ---- master side
    def read(self) -> np.ndarray:
        """A copy of the board, read without a lock so that a hung worker holding one cannot block
        the master. Each word is an aligned 8-byte value, so no word is torn; the words need not
        be mutually consistent, and nothing here needs them to be."""
        return self.words.copy()

    def heartbeats(self, words: np.ndarray) -> np.ndarray:
        return words[HEARTBEATS : HEARTBEATS + self.num_workers]

    def queued(self, words: np.ndarray) -> np.ndarray:
        return words[HEARTBEATS + self.num_workers :]

    def add_updates(self, count: int) -> None:
        """The master counts updates it applied itself (two-sided patterns)."""
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        self.words[UPDATES] += count
        self.win.Unlock(self.master)

    def set_stop(self) -> None:
        self._set(STOP, 1.0)

    def announce(self, *, evaluation: bool, pause: bool, stop: bool) -> None:
        """In one epoch, so that a worker reads all of it or none: an evaluation's pause, a checkpoint's
        pause (each worker joins after its current iteration) and the stop."""
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        self.words[EVALS] += float(evaluation)
        self.words[PAUSES] += float(pause)
        self.words[STOP] = max(self.words[STOP], float(stop))
        self.win.Unlock(self.master)

    def kept(self) -> list[float]:
        return [float(self.words[i]) for i in KEPT]

    def restore(self, kept: list[float]) -> None:
        """The counters of a checkpoint (`kept`), before any worker reports again."""
        for index, value in zip(KEPT, kept):
            self._set(index, value)

    def _set(self, index: int, value: float) -> None:
        self.win.Lock(self.master, MPI.LOCK_EXCLUSIVE)
        self.words[index] = value
        self.win.Unlock(self.master)

    def free(self) -> None:
        self.win.Free()
