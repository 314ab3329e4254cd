"""Async MSGD: Async SGD with momentum (paper Eqs. 3–4).

Rule:  V ← μ·V − η·ΔW^i ;  W ← W + V ;  then W^i ← W.
Pattern: as `async_sgd` (first come, first served, exclusive lock).
Where V lives is not stated in the paper; both are offered
(`--momentum-at`):
  master (default, Downpour-style): one V at the master, updated by every
    worker's gradient in arrival order; the read-modify-write of V runs
    inside the worker's exclusive-lock epoch (Get V, Put V', Accumulate V').
  worker: each worker keeps its own V^i and pushes V^i as its update
    (W ← W + V^i), a cheaper exchange of the same size as Async SGD's.
"""

from __future__ import annotations

import numpy as np
import torch

from scaledl.algorithms import rules
from scaledl.algorithms.async_sgd import AsyncSGD


class AsyncMSGD(AsyncSGD):
    key = "async_msgd"

    def __init__(self, context):
        super().__init__(context)     # sets master_momentum (from the registry's options and --momentum-at)
        if self.roles.is_worker:
            if self.master_momentum:
                self.velocity_host = np.empty(self.params.numel, dtype=np.float32)   # V, read from the window
            else:
                self.velocity = torch.zeros_like(self.params.data)

    def worker_step(self) -> None:
        if self.master_momentum:
            self.grad_host = torch.from_numpy(self.stage.send_view(self.params.grad))
            self.window.momentum_step(self.velocity_host, self.center_host, self.master_velocity,
                                      on_update=self.count_update, timer=self.timer)   # lock: wait; epoch: comm
        else:
            with self.timer.phase("update"):
                rules.velocity_(self.velocity, self.params.grad, self.hyper.lr, self.hyper.momentum)  # Eq. 3 on worker i
            delta = self.stage.send_view(self.velocity)
            self.window.push_then_pull(delta, self.center_host, on_update=self.count_update, timer=self.timer)
        center = self.load_center_copy()
        with self.timer.phase("update"):
            self.params.data.copy_(center)                                      # W^i ← W

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.roles.is_worker and not self.master_momentum:
            state["velocity"] = self.velocity.cpu()                  # V^i (with V at the master: in its window)
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if "velocity" in state:
            self.velocity.copy_(state["velocity"])

    def master_velocity(self, velocity: np.ndarray) -> None:
        """Eq. 3 on the master's V, read into `velocity` inside this worker's exclusive-lock epoch."""
        rules.velocity_(torch.from_numpy(velocity), self.grad_host, self.hyper.lr, self.hyper.momentum)


ALGORITHM = AsyncMSGD
