"""Async SGD (Downpour-style parameter server), as the paper's baseline.

Rule (at the master):  W ← W − η·ΔW^i, applied as soon as worker i's gradient arrives.
Worker i then continues from the updated center: W^i ← W.
Pattern: first come, first served, locked. Worker i opens an exclusive-lock
epoch on the master's window (CenterWindow), accumulates −η·ΔW^i into W,
reads W back, and closes the epoch; workers queue on the lock, so exactly
one gradient is applied at a time (the paper's implicit lock). The
accumulate is the master's update, executed by MPI on the master's memory.
Hogwild SGD is this class under the lock-free pattern (its registry entry).
"""

from __future__ import annotations

from scaledl.algorithms import rules
from scaledl.algorithms.window_based import WindowBased


class AsyncSGD(WindowBased):
    key = "async_sgd"

    def worker_step(self) -> None:
        with self.timer.phase("update"):
            rules.sgd_step_(self.center_copy, self.params.grad, self.hyper.lr)  # −η·ΔW^i
        delta = self.stage.send_view(self.center_copy)
        # the lock's acquisition is timed as wait (queueing), the epoch's operations as comm
        self.window.push_then_pull(delta, self.center_host, on_update=self.count_update, timer=self.timer)
        center = self.load_center_copy()
        with self.timer.phase("update"):
            self.params.data.copy_(center)                                      # W^i ← W


ALGORITHM = AsyncSGD
