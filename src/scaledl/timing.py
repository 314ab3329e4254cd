"""Where every second goes: the paper's time breakdown (PAPER.md §3), per phase, per step, per rank.

Phases of one rank's main thread (they add up to its wall time):
    data          reading and shuffling the batch on the host (paper part 1, data I/O)
    h2d           batch copy host → device (part 4, CPU–GPU data communication)
    param_copy    weights host ↔ device around a message (part 5, CPU–GPU parameter communication)
    comm          inter-rank parameter messages, including waiting inside them (part 3)
    compute       forward and backward (part 6)
    update        the worker's rule (part 7)
    center_update the master's rule (part 8)
    wait          idle: waiting for a turn (round-robin), for the master, or for an
                  overlapped exchange to finish (exposed communication)
    eval          evaluating the center (our measurement, excluded from training time)
Beside them, `overlapped_comm` counts exchange seconds spent on a helper
thread while the main thread computed (Sync EASGD3); it is not part of the sum.

On a GPU, phases that launch device work are timed with CUDA events (read
once per step, so no extra synchronisation); host-side phases use the host
clock.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import torch

PHASES = ("data", "h2d", "param_copy", "comm", "compute", "update", "center_update", "wait", "eval")
DEVICE_PHASES = frozenset({"h2d", "param_copy", "compute", "update", "center_update"})
COMMUNICATION = ("h2d", "param_copy", "comm", "wait")   # the paper's "communication" parts, plus exposed waits


class PhaseTimer:
    def __init__(self, device: torch.device | None = None):
        self.cuda = device is not None and device.type == "cuda"
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.overlapped_comm = 0.0
        self.start = time.perf_counter()
        self._pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []
        self._step_marks: list[float] = []
        self._step_rows: list[np.ndarray] = []
        self._last_totals = np.zeros(len(PHASES))
        self._active: str | None = None

    @contextlib.contextmanager
    def phase(self, name: str):
        if self._active is not None:
            raise RuntimeError(f"phase {name!r} opened inside {self._active!r}: its seconds would count twice")
        self._active = name
        try:
            with self._timed(name):
                yield
        finally:
            self._active = None

    @contextlib.contextmanager
    def _timed(self, name: str):
        if self.cuda and name in DEVICE_PHASES:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            try:
                yield
            finally:
                end.record()
                self._pending.append((name, begin, end))
            return
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - t0

    def restart(self) -> float:
        """Zero everything and start the clock now (training begins); returns the seconds before."""
        self.settle()
        before = time.perf_counter() - self.start
        self.__init__(torch.device("cuda") if self.cuda else None)
        return before

    def add(self, name: str, seconds: float) -> None:
        """Charge host-clock seconds measured by the caller (a tight loop timed as a whole)."""
        self.totals[name] += seconds

    def add_overlapped(self, seconds: float) -> None:
        self.overlapped_comm += seconds

    def settle(self) -> None:
        """Fold finished CUDA event pairs into the totals (waits for the last one)."""
        if self._pending:
            self._pending[-1][2].synchronize()
            for name, begin, end in self._pending:
                self.totals[name] += begin.elapsed_time(end) / 1000.0
            self._pending.clear()

    def mark_step(self) -> None:
        """End of one iteration: record this step's seconds per phase for the timeline."""
        self.settle()
        now = np.array([self.totals[p] for p in PHASES])
        self._step_marks.append(time.perf_counter() - self.start)
        self._step_rows.append(now - self._last_totals)
        self._last_totals = now

    def wall(self) -> float:
        return time.perf_counter() - self.start

    def snapshot(self) -> dict[str, float]:
        self.settle()
        return {f"{name}_s": seconds for name, seconds in self.totals.items()}

    def timeline(self) -> dict[str, np.ndarray]:
        """Per step: when it ended (seconds since start) and its seconds per phase."""
        rows = np.array(self._step_rows, dtype=np.float32).reshape(-1, len(PHASES))
        return {"step_end_s": np.array(self._step_marks, dtype=np.float64), "phase_s": rows}

    def breakdown(self) -> dict[str, float]:
        """Totals, what no phase covers, and the communication share computed the paper's way."""
        phases = self.snapshot()
        wall = self.wall()
        accounted = sum(phases.values())
        train = wall - phases["eval_s"]
        communication = sum(phases[f"{p}_s"] for p in COMMUNICATION)
        return {
            **phases,
            "overlapped_comm_s": self.overlapped_comm,
            "wall_s": wall,
            "unaccounted_s": wall - accounted,
            "comm_share": communication / train if train > 0 else None,
        }
