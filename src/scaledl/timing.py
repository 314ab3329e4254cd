"""Wall-clock seconds per phase of the paper's time breakdown (PAPER.md §3).

Phases: data (read/shuffle on the host), h2d (batch host→device copy),
compute (forward/backward), comm (parameter messages), update (worker rule),
center_update (master rule), eval (evaluating the center), wait (idle:
a master waiting for workers, a worker waiting for its turn).
On a GPU, `sync` waits for the device before a phase is closed so that
asynchronous kernel launches are charged to the phase that issued them.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable

PHASES = ("data", "h2d", "compute", "comm", "update", "center_update", "eval", "wait")


class PhaseTimer:
    def __init__(self, sync: Callable[[], None] | None = None):
        self._sync = sync or (lambda: None)
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.start = time.perf_counter()

    @contextlib.contextmanager
    def phase(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.totals[name] += time.perf_counter() - t0

    def wall(self) -> float:
        return time.perf_counter() - self.start

    def snapshot(self) -> dict[str, float]:
        return {f"{name}_s": seconds for name, seconds in self.totals.items()}
