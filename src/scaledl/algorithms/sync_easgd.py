"""Sync EASGD (You, Buluç, Demmel, SC'17 §4, Eqs. 1–2).

Rules:
    (1) worker i:  W^i_{t+1} = W^i_t − η·ΔW^i_t − η·ρ·(W^i_t − W_t)
    (2) master:    W_{t+1}   = W_t + η·ρ·Σ_{i=1..P} (W^i_t − W_t)
Pattern, per iteration t (paper's five steps):
    1. every worker computes ΔW^i_t at W^i_t            (the training loop)
    2. the master broadcasts W_t to all workers           Bcast, tree, |W| words
    3. Σ_i W^i_t is reduced to the master                 Reduce(sum), tree, |W| words
    4. every worker applies Eq. 1 with the W_t it received
    5. the master applies Eq. 2 with the reduced sum
Cost: 2·log P·(α + |W|β) per iteration instead of original EASGD's P·(α + |W|β).
The master is worker 0 (it holds W beside its own W^0), as in the paper's
Sync EASGD2 where the weights stay on the devices. Weights, not gradients,
are reduced. No arrival order enters, so it is deterministic for a given
seed and world size. Defaults: α = ηρ = 0.9/P (Zhang et al.), τ = 1.
"""

from __future__ import annotations

import torch

from scaledl.algorithms import rules
from scaledl.algorithms.base import Algorithm
from scaledl.comm.collectives import Collectives


class SyncEASGD(Algorithm):
    key = "sync_easgd"

    def __init__(self, setup):
        super().__init__(setup)
        w = self.params.data
        self.coll = Collectives(self.roles.worker_comm, w)
        self.workers = self.roles.num_workers
        # W_t as received by this worker; on the master it is the center itself.
        self.center_copy = self.center.data if self.roles.is_master else torch.empty_like(w)
        self.sum_workers = torch.empty_like(w) if self.roles.is_master else None

    def start(self) -> None:
        if self.roles.is_master:
            self.center.data.copy_(self.params.data)
        with self.timer.phase("comm"):
            self.coll.bcast_(self.center_copy, root=0)
        self.params.data.copy_(self.center_copy)

    def worker_step(self) -> None:
        w, grad, lr, rho = self.params.data, self.params.grad, self.hyper.lr, self.hyper.rho
        with self.timer.phase("comm"):
            self.coll.bcast_(self.center_copy, root=0)                 # step 2
            self.coll.reduce_sum(w, self.sum_workers, root=0)          # step 3
        with self.timer.phase("update"):
            rules.elastic_worker_(w, grad, self.center_copy, lr, rho)  # step 4, Eq. 1
        if self.roles.is_master:
            with self.timer.phase("center_update"):                    # step 5, Eq. 2
                rules.elastic_center_(self.center.data, self.sum_workers, self.workers, lr, rho)

    def end_iteration(self, loss, batch: int, master_wants_stop: bool) -> bool:
        with self.timer.phase("comm"):
            return self.coll.any_(master_wants_stop)


ALGORITHM = SyncEASGD
