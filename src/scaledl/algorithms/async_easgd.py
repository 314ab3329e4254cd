"""Async EASGD (You, Buluç, Demmel, SC'17 §4; Zhang et al.'s asynchronous EASGD with τ = 1).

Rules, for worker i at its iteration t:
    master, Eq. 2 (one worker):  W ← W + η·ρ·(W^i_t − W_t)
    worker, Eq. 1:               W^i_{t+1} = W^i_t − η·ΔW^i_t − η·ρ·(W^i_t − W_t)
Pattern: first come, first served, the center update locked. Worker i
opens an exclusive-lock epoch on the master's window, reads W_t, adds the
elastic difference η·ρ·(W^i_t − W_t) to W (the master's Eq. 2, applied by
MPI on the master's memory while no other update can intervene), closes the
epoch, then applies Eq. 1 locally. Only the schedule differs from original
EASGD (`easgd`, round-robin); Hogwild EASGD differs from this only in the lock
(its registry pattern, lock_free_window).
"""

from __future__ import annotations

import numpy as np
import torch

from scaledl.algorithms import rules
from scaledl.algorithms.window_based import WindowBased


class AsyncEASGD(WindowBased):
    key = "async_easgd"

    def worker_step(self) -> None:
        self.w_host = self.stage.send_view(self.params.data)                     # W^i_t
        with self.timer.phase("comm"):
            self.window.pull_then_push(self.center_host, self.elastic_difference, on_update=self.count_update)
        center = self.load_center_copy()
        with self.timer.phase("update"):
            self.local_rule(center)

    def elastic_difference(self, center: np.ndarray) -> np.ndarray:
        """η·ρ·(W^i_t − W_t): what Eq. 2 adds to the center for this worker (inside the lock epoch)."""
        rules.elastic_difference_(self.delta, torch.from_numpy(self.w_host), torch.from_numpy(center), self.hyper.alpha)
        return self.delta_host

    def local_rule(self, center) -> None:
        """Eq. 1."""
        rules.elastic_worker_(self.params.data, self.params.grad, center, self.hyper.lr, self.hyper.rho)


ALGORITHM = AsyncEASGD
