"""Async MEASGD (You, Buluç, Demmel, SC'17 §4, Eqs. 5–6): Async EASGD whose workers use momentum.

Rules, for worker i:
    master, Eq. 2 (one worker):  W ← W + η·ρ·(W^i_t − W_t)
    worker, Eqs. 5–6:            V^i ← μ·V^i − η·ΔW^i_t ;  W^i ← W^i + V^i − η·ρ·(W^i_t − W_t)
Pattern: as `async_easgd` (first come, first served, exclusive lock).
The paper does not say whether ΔW^i is taken at W^i or at the Nesterov
look-ahead W^i + μ·V^i (Zhang et al.'s EAMSGD). Default: at W^i, the
equations as written; `--nesterov` takes it at the look-ahead point.
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

    def begin_iteration(self) -> bool:
        if self.hyper.nesterov:
            rules.look_ahead_(self.params.data, self.velocity, self.hyper.momentum)   # gradient at W^i + μV^i
        return True

    def worker_step(self) -> None:
        if self.hyper.nesterov:
            rules.look_back_(self.params.data, self.velocity, self.hyper.momentum)    # back to W^i before the exchange
        super().worker_step()

    def local_rule(self, center) -> None:
        """Eqs. 5–6."""
        rules.momentum_elastic_worker_(self.params.data, self.velocity, self.params.grad, center,
                                       self.hyper.lr, self.hyper.rho, self.hyper.momentum)


ALGORITHM = AsyncMEASGD
