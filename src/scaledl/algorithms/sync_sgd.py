"""Synchronous SGD: the allreduce-of-gradients baseline (what DDP and Horovod do).

Rule:     W^i ← W^i − η · (1/P) Σ_j ΔW^j            (identical on every worker)
Pattern:  one Allreduce(sum) of the flat gradient per iteration over the
          P workers; no master rank (worker 0 keeps the results).
Deterministic: the reduction order depends only on P and |W|, so every
replica stays bitwise equal and two runs with one seed are bitwise equal.
Plain SGD (no momentum), like the paper's SGD baselines.
"""

from __future__ import annotations

from scaledl.algorithms import rules
from scaledl.algorithms.base import Algorithm
from scaledl.comm.collectives import Collectives


class SyncSGD(Algorithm):
    key = "sync_sgd"

    def __init__(self, setup):
        super().__init__(setup)
        self.coll = Collectives(self.roles.worker_comm, self.params.data)
        self.workers = self.roles.num_workers

    def start(self) -> None:
        with self.timer.phase("comm"):
            self.coll.bcast_(self.params.data, root=0)
        if self.roles.is_master:
            self.center.data.copy_(self.params.data)

    def worker_step(self) -> None:
        grad = self.params.grad
        with self.timer.phase("comm"):
            self.coll.allreduce_sum_(grad)
        with self.timer.phase("update"):
            grad.div_(self.workers)
            rules.sgd_(self.params.data, grad, self.hyper.lr)
        if self.roles.is_master:
            # The center of a replicated algorithm is worker 0's replica.
            self.center.data.copy_(self.params.data)

    def end_iteration(self, loss, batch: int, master_wants_stop: bool) -> bool:
        with self.timer.phase("comm"):
            return self.coll.any_(master_wants_stop)


ALGORITHM = SyncSGD
