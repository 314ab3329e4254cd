"""How long a silent worker is waited for: a limit that follows each worker's own pace.

A fixed limit cannot tell a slow worker from a hung one: 30 s is ages for a
10 ms step and too short for a 40 s one. Each worker's limit is therefore

    max(floor, PATIENCE × the longest interval that worker has taken so far)

with the floor being --worker-timeout (train.worker_timeout). Until a
worker's pace is known (its first interval measured) the limit is the floor
plus START_UP floors more: its first steps include warm-up (allocations,
kernel selection, the first batches read), so the first exchange does not
count as an interval either.

The longest interval, not a typical one: a worker is never declared hung for
a silence shorter than PATIENCE times a pause it has already come back from.
One odd stall only makes a later hang slower to detect, never a slow worker
dead.

What an interval is depends on the caller: for the board's heartbeats, the
time between two exchanges of the worker; for round-robin, one turn (the
master sends W until the worker's W^i arrives).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from scaledl.comm import transport

# Ten times the worker's worst interval so far: that history already holds its
# usual jitter (data loading, garbage collection, a shared node's other jobs,
# queueing behind the other workers for the center), so a pause ten times the
# worst of it is far outside normal variation, while a hang is still found
# within ten of its longest intervals.
PATIENCE = 10.0
# Before a worker's pace is known: the floor plus this many floors.
START_UP = 2.0
# Intervals kept per worker for the "usual" interval that messages quote.
RECENT = 101


class Liveness:
    """Per-worker silence limits, on an injectable clock (seconds, monotonic)."""

    def __init__(
        self,
        worker_ranks: Sequence[int],
        floor: float,
        *,
        event: str = "exchange",
        interval: str = "exchange interval",
        clock: Callable[[], float] = transport.monotonic,
    ):
        self.worker_ranks = tuple(worker_ranks)
        self.floor = float(floor)
        self.event, self.interval = event, interval
        self.clock = clock
        n = len(self.worker_ranks)
        self.since = np.full(n, clock())  # each worker's silence counts from here
        self.stirred = self.since.copy()  # each worker's last sign of life: progress, or a new mark on the board
        self.events = np.zeros(n, dtype=np.int64)
        self.longest = np.zeros(n)
        self.measured = np.zeros(n, dtype=np.int64)  # intervals seen; 0: pace unknown
        self._recent = [deque(maxlen=RECENT) for _ in range(n)]

    # ---- what happened
    def expect(self, w: int, now: float | None = None) -> None:
        """Worker `w` is expected to act from now on (round-robin: its turn begins)."""
        self.since[w] = self.clock() if now is None else now

    def progressed(self, w: int, count: int = 1, now: float | None = None) -> None:
        """Worker `w` completed `count` more events; the silence before them is one interval."""
        now = self.clock() if now is None else now
        if self.events[w] > 0:  # the silence before the first event is warm-up
            gap = now - self.since[w]
            self.longest[w] = max(self.longest[w], gap)
            self.measured[w] += 1
            self._recent[w].append(gap)
        self.events[w] += count
        self.since[w] = self.stirred[w] = now

    def stirred_at(self, w: int, now: float | None = None) -> None:
        """Worker `w` showed a sign of life that is not progress (a new mark on the board: it took or left a lock)."""
        self.stirred[w] = self.clock() if now is None else now

    def excuse(self, seconds: float) -> None:
        """Do not count time the master itself was busy (workers may have stalled waiting for it)."""
        self.since += seconds
        self.stirred += seconds

    # ---- judgement
    def limits(self) -> np.ndarray:
        """Each worker's limit on its silence, in seconds."""
        paced = np.maximum(self.floor, PATIENCE * self.longest)
        return np.where(self.measured > 0, paced, self.floor * (1.0 + START_UP))

    def limit(self, w: int) -> float:
        return float(self.limits()[w])

    def deadline(self, w: int) -> float:
        """The clock time at which worker `w`, still silent, is declared slow or hung."""
        return self.since[w] + self.limit(w)

    def overdue(self, now: float | None = None) -> np.ndarray:
        """Which workers have been silent longer than their limit."""
        silence = (self.clock() if now is None else now) - self.since
        if silence.max(initial=0.0) <= self.floor:  # no limit is below the floor: the common, cheap case
            return np.zeros(len(silence), dtype=bool)
        return silence > self.limits()

    def culprit(self, queued: np.ndarray | None = None, now: float | None = None) -> int:
        """The worker to blame for the job's stall.

        `queued`: 1 where a worker is waiting for the center's lock (or computing before taking
        it), 0 where it holds the lock. An overdue worker that is not queued is blamed first; when
        only queued workers are overdue, the lock holder keeps them waiting: the unqueued worker
        silent longest, once silent for more than half as long as the late ones (it may have beaten
        its heart just after the one queued behind it, and its own limit may be far longer, after a
        slow interval of its own; a worker that is merely computing beats its heart far more often).
        When every worker reads as queued, the one whose last sign of life (a beat or a new mark) is oldest;
        otherwise, the worker furthest past (or nearest to) its limit.
        """
        now = self.clock() if now is None else now
        silence = now - self.since
        ratio = silence / self.limits()
        late = ratio > 1.0
        if queued is not None:
            free = queued == 0
            if (late & free).any():
                return int(np.argmax(np.where(late & free, ratio, -np.inf)))
            holders = free & (silence > 0.5 * silence[late].min(initial=np.inf))
            if late.any() and holders.any():
                return int(np.argmax(np.where(holders, silence, -np.inf)))
            if late.any() and not free.any():
                # Every worker reads as queued: the holder was granted the lock but never marked it (stopped inside
                # Lock while it waited, the grant made by the master's MPI, or between the grant and its mark). Each
                # worker asks for the lock right after it marks the board (its release mark before the add; its beat
                # before the read where the exchange overlaps the step, the default: without that a step lies
                # between them, and this guess can miss), and the holder asked before the ones now waiting: its
                # last sign of life is the oldest. Not its last beat: a worker waiting for its add beat before its
                # read, and may have beaten before the holder did.
                return int(np.argmin(self.stirred))
        return int(np.argmax(ratio))

    def usual(self, w: int) -> float:
        """The median of the worker's recent intervals."""
        return float(np.median(self._recent[w]))

    def verdict(self, w: int, now: float | None = None, doing: str = "") -> str:
        """One line: who, how long silent against its own pace, and which setting to raise if it is only slow."""
        now = self.clock() if now is None else now
        silence = now - self.since[w]
        state = f"worker {w}, after {self.events[w]} {self.event}s" + (f"; {doing}" if doing else "")
        who = f"worker rank {self.worker_ranks[w]} ({state}) made no progress for {silence:.1f} s"
        if self.measured[w]:
            usual = self.usual(w)
            times = f"{silence / usual:.0f}× " if usual > 0 else ""
            pace = (
                f", {times}its usual {self.interval} of {usual:.3g} s (longest {self.longest[w]:.3g} s; limit "
                f"{self.limit(w):.3g} s, the larger of --worker-timeout and {PATIENCE:g}× the longest)"
            )
            floor_needed = silence
        else:
            pace = (
                f", before its pace was known (limit {self.limit(w):.3g} s: --worker-timeout plus "
                f"{START_UP:g}× that for warm-up)"
            )
            floor_needed = silence / (1.0 + START_UP)
        return (
            f"{who}{pace}: slow or hung; if it is only slow (a straggler, a shared node), raise --worker-timeout "
            f"(config train.worker_timeout, now {self.floor:g} s) above {floor_needed:.1f} s, the least that "
            f"outwaits this silence"
        )
