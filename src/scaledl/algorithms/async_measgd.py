"""Async MEASGD (You, Buluç, Demmel, SC'17 §4, Eqs. 5–6): Async EASGD whose workers use momentum.

Rules, for worker i at its iteration t:
    master, Eq. 2 (one worker):  W ← W + η·ρ·(W^i_t − W_t)
    worker, Eqs. 5–6:            V^i ← μ·V^i − η·ΔW^i_t ;
                                 W^i_{t+1} = W^i_t + V^i − η·ρ·(W^i_t − W_t)
Pattern: as `async_easgd` (first come, first served, exclusive lock): one
epoch, lock · Get W_t · Flush · Accumulate α·(W^i_t − W_t) · unlock, and by
default (codesign.overlap; --no-overlap for the ablation) on a helper thread
while the batch is fetched and ΔW^i_t computed, as Async EASGD does.
The paper does not say whether ΔW^i is taken at W^i or at the Nesterov
look-ahead W^i + μ·V^i (Zhang et al.'s EAMSGD). Default: at W^i, the
equations as written; `--nesterov` takes it at the look-ahead point. Then
W^i_t is copied aside before the look-ahead: the exchange sends that copy
(the snapshot is taken before the look-ahead, overlapped or not), and
worker_step restores W^i_t from it exactly before Eqs. 5–6.
"""

from __future__ import annotations

import torch

from scaledl.algorithms import rules
from scaledl.algorithms.async_easgd import AsyncEASGD


class AsyncMEASGD(AsyncEASGD):
    key = "async_measgd"

    def __init__(self, context):
        super().__init__(context)
        if self.roles.is_worker:
            self.velocity = torch.zeros_like(self.params.data)
            self.w_saved = torch.empty_like(self.params.data) if self.hyper.nesterov else None

    def exchanged_weights(self) -> torch.Tensor:
        return self.params.data if self.w_saved is None else self.w_saved

    def begin_iteration(self) -> bool:
        if self.hyper.nesterov:
            with self.timer.phase("update"):
                self.w_saved.copy_(self.params.data)                                   # W^i_t, kept aside
        super().begin_iteration()                              # overlap: W^i_t to the helper's exchange
        if self.hyper.nesterov:
            with self.timer.phase("update"):
                rules.look_ahead_(self.params.data, self.velocity, self.hyper.momentum)  # ΔW^i at W^i + μV^i
        return True

    def worker_step(self) -> None:
        if self.hyper.nesterov:
            with self.timer.phase("update"):
                self.params.data.copy_(self.w_saved)                                   # back to W^i_t, exactly
        super().worker_step()

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.roles.is_worker:
            state["velocity"] = self.velocity.cpu()                  # V^i
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.roles.is_worker:
            self.velocity.copy_(state["velocity"])

    def local_rule(self, center) -> None:
        """Eqs. 5–6."""
        rules.momentum_elastic_worker_(self.params.data, self.velocity, self.params.grad, center,
                                       self.hyper.lr, self.hyper.rho, self.hyper.momentum)


ALGORITHM = AsyncMEASGD
