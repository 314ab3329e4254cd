"""Async SGD (Downpour-style parameter server), as the paper's baseline.

Rule (at the master):  W ← W − η·ΔW^i, applied as soon as worker i's gradient arrives.
Worker i then continues from the updated center: W^i ← W.
Pattern: first come, first served, locked. Worker i opens an exclusive-lock
epoch on the master's window (CenterWindow), accumulates −η·ΔW^i into W,
reads W back, and closes the epoch; workers queue on the lock, so exactly
one gradient is applied at a time (the paper's implicit lock). The
accumulate is the master's update, executed by MPI on the master's memory.
Hogwild SGD is this class with `locked = False`.
"""

from __future__ import annotations

import torch

from scaledl.algorithms.parameter_server import CenterInWindow


class AsyncSGD(CenterInWindow):
    key = "async_sgd"
    locked = True

    def worker_step(self) -> None:
        with self.timer.phase("update"):
            torch.mul(self.params.grad, -self.hyper.lr, out=self.center_copy)   # −η·ΔW^i
        delta = self.stage.send_view(self.center_copy)
        with self.timer.phase("comm"):
            self.window.push_then_pull(delta, self.center_host, on_update=self.count_update)
        center = self.load_center_copy()
        with self.timer.phase("update"):
            self.params.data.copy_(center)                                      # W^i ← W


ALGORITHM = AsyncSGD
