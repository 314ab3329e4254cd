"""Bounded failure: a job whose peer died or hung aborts with a message naming the rank.

How long a silent peer is waited for follows its own pace (comm/liveness.py).

MPI launchers kill the whole job when a process exits abnormally (Hydra,
PRRTE), but a hung process, or a launcher that lets the others run on
(srun without --kill-on-bad-exit), would leave the master waiting forever.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

from scaledl.comm import transport
from scaledl.comm.liveness import Liveness
from scaledl.comm.sentinel import claim
from scaledl.comm.transport import MPI

_job_token: str | None = None
_rank_names: list[str] = []


def set_job_token(token: str) -> None:
    """The job's identity for the sentinels' claim file (see comm/sentinel.py)."""
    global _job_token
    _job_token = token


def set_rank_names(names: list[str]) -> None:
    """Every rank's announced identity ("rank 2/3 (worker 1, pid … on …)"), so a peer that sees it die can name it."""
    _rank_names[:] = names


def rank_name(rank: int) -> str:
    return _rank_names[rank] if rank < len(_rank_names) else f"rank {rank}"


def abort_job(message: str, status: int = 1) -> None:
    """Say why, then end every rank of the job.

    One report per job on a node: the first to claim it speaks (this rank, or the sentinel of a
    rank that died first, whose line then stands); the killed ranks' sentinels stay quiet.
    """
    if _job_token is None or claim(_job_token):
        print(f"scaledl train: error: {message}", file=sys.stderr, flush=True)
    transport.current().abort(status)


def wait_or_abort(
    request: MPI.Request, deadline: float, why: Callable[[], str], poll: float = 2e-4, spin_s: float = 0.0
) -> None:
    """Complete `request`; abort the job, saying `why()`, once the transport's monotonic clock passes
    `deadline`. Over MPI it polls (`spin_s`: the first seconds without sleeping, see
    MPITransport.complete); a simulation blocks until completion or the deadline."""
    transport.current().complete(request, deadline, lambda: abort_job(f"{why()}; aborting the job"), poll, spin_s)


def arrival_or_abort(
    comm: MPI.Comm, source: int, tag: int, deadline: float, why: Callable[[], str], poll: float = 2e-4
) -> None:
    """Return once a message from `source` with `tag` has arrived (not received); abort past `deadline`."""
    if comm.Iprobe(source=source, tag=tag):
        return
    transport.current().arrival(comm, source, tag, deadline, lambda: abort_job(f"{why()}; aborting the job"), poll)


class Watchdog:
    """A thread that aborts the job when `beat()` has not been called for `limit()` seconds.

    Catches a main loop stuck inside an MPI call (e.g. waiting on a lock a hung
    worker holds); `describe()` says who is likely to blame. `limit` is asked
    again at every look, so it may follow the workers' pace (comm/liveness.py).
    """

    def __init__(self, limit: Callable[[], float], describe: Callable[[], str]):
        self.limit = limit
        self.describe = describe
        self._last = time.monotonic()
        self._paused = False
        self._done = threading.Event()
        self._thread = None
        if transport.current().guards_processes:  # a simulated master cannot hang unseen: the simulator reports it
            self._thread = threading.Thread(target=self._watch, name="scaledl-watchdog", daemon=True)
            self._thread.start()

    def beat(self) -> None:
        self._last = time.monotonic()

    @contextlib.contextmanager
    def paused(self):
        """No abort while the caller is busy on purpose (e.g. evaluating)."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False
            self.beat()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(min(1.0, self.limit() / 4)):
            stuck = time.monotonic() - self._last
            if not self._paused and stuck > self.limit():
                abort_job(
                    f"the master has been stuck in an MPI call for {stuck:.1f} s; the likely cause: "
                    f"{self.describe()}; aborting the job"
                )


class Heartbeats:
    """Per-worker exchange counters from the master's board; a worker silent past its own limit
    (comm/liveness.py) ends the job, naming it, not a worker merely queued behind it."""

    def __init__(self, worker_ranks: tuple[int, ...], floor: float):
        self.liveness = Liveness(worker_ranks, floor)
        self.seen = np.zeros(len(worker_ranks))
        self.queued = np.zeros(len(worker_ranks))

    def check(self, beats: np.ndarray, queued: np.ndarray) -> None:
        now = self.liveness.clock()
        for w in np.flatnonzero(queued != self.queued):
            self.liveness.stirred_at(int(w), now)
        for w in np.flatnonzero(beats != self.seen):
            self.liveness.progressed(int(w), int(beats[w] - self.seen[w]), now)
        self.seen, self.queued = beats.copy(), queued.copy()
        if self.liveness.overdue(now).any():
            w = self.liveness.culprit(self.queued, now)
            abort_job(f"{self.liveness.verdict(w, now)}; aborting the job")

    def excuse(self, seconds: float) -> None:
        """Do not count time the master itself was busy (workers may have stalled waiting for it)."""
        self.liveness.excuse(seconds)

    def most_patient_limit(self) -> float:
        """How long the master may be stuck before someone is blamed: the longest any worker is given."""
        return float(self.liveness.limits().max())

    def blame(self) -> str:
        return self.liveness.verdict(self.liveness.culprit(self.queued))
