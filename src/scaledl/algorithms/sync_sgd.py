"""Synchronous SGD: the allreduce-of-gradients baseline (what DDP and Horovod do).

Rule:     W^i ← W^i − η · (1/P) Σ_j ΔW^j            (identical on every worker)
Pattern:  the flat gradient Allreduce(sum)ed over the P workers every
          iteration; no master rank (worker 0 keeps the results). `--message`:
          bucketed (the default) starts one nonblocking Allreduce per bucket
          while backward still runs, as DDP does (comm/buckets.py, sizes
          --bucket-mb); packed sends one message after backward; per_layer
          one per parameter tensor. One worker has nothing to exchange and
          sends nothing.
Deterministic: the reduction order depends only on P and |W|, so every
replica stays bitwise equal and two runs with one seed are bitwise equal.
Plain SGD (no momentum), like the paper's SGD baselines.

Preset: `chip_partition` (the registry's preset of sync_sgd; paper §3, Fig. 12)
is this algorithm, pattern unchanged, with replicated data: every partition
of a KNL chip holds the whole training set and its own weights, and the run
first checks that the node's fast memory holds the replicas
(`--fast-memory-gb`). As the paper says ("a tree reduction sums the
gradients; every group updates with the sum"), it applies the sum, not the
mean (the preset's `gradients: sum`):
          W^i ← W^i − η · Σ_j ΔW^j
So at one η its step is P times sync_sgd's: chip_partition with η_sum equals
sync_sgd with η_mean = P·η_sum (η_sum = η_mean / P) up to rounding. Keep η
fixed across P to reproduce Fig. 12's setting; divide it by P to compare
with sync_sgd at equal step size.
"""

from __future__ import annotations

from scaledl.algorithms import rules
from scaledl.algorithms.base import Algorithm
from scaledl.algorithms.boundary import BoundaryRequest
from scaledl.comm.buckets import GradientBuckets


class SyncSGD(Algorithm):
    def __init__(self, context):
        super().__init__(context)
        self.coll = self.collectives(self.params.data)
        self.workers = self.roles.num_workers
        # How the allreduced gradients combine: "mean" (sync_sgd) or "sum" (chip_partition, as the paper).
        self.combine = self.settings.gradients
        self.buckets = None
        if self.settings.message == "bucketed" and self.workers > 1:
            self.buckets = GradientBuckets(
                self.params,
                self.roles.worker_comm,
                bucket_mb=self.settings.bucket_mb,
                backend=self.settings.backend,
                dist_group=self.dist_group,
                before_send=self.decay if self.settings.weight_decay else None,
            )
            self.decays_gradient = True  # weight decay must reach the sum: added bucket by bucket, as each leaves
        if self.workers == 1:
            self.params.release_grads()  # nothing to send: backward's own gradients, no flat buffer to fill

    def decay(self, lo: int, hi: int) -> None:
        rules.weight_decay_(self.params.grad[lo:hi], self.params.data[lo:hi], self.settings.weight_decay)

    def start(self) -> None:
        self.coll.bcast_(self.params.data, root=0)
        if self.roles.is_master:
            self.center.data.copy_(self.params.data)
        self.coll.messages, self.exchanges = 0, 0  # count the exchanges' messages only

    def worker_step(self) -> None:
        if self.buckets is not None:
            self.coll.arrive()  # the wait probe: a slower peer's backward is `wait`, the rest of the buckets `comm`
            with self.timer.phase("comm"):
                self.buckets.wait()
        elif self.workers > 1:
            self.coll.allreduce_sum_(self.params.grad)
        self.exchanges += 1
        with self.timer.phase("update"):
            for w, grad in self.params.pairs():
                if self.combine == "sum":
                    rules.sgd_(w, grad, self.settings.lr)  # W ← W − η·Σ_j ΔW^j
                else:
                    rules.mean_sgd_(w, grad, self.workers, self.settings.lr)

    def refresh_center(self) -> None:
        # The center of a replicated algorithm is worker 0's replica.
        self.center.data.copy_(self.params.data)

    def end_iteration(self, loss, batch: int, request: BoundaryRequest) -> BoundaryRequest:
        return BoundaryRequest(self.coll.agree_(request) if self.workers > 1 else request)

    @property
    def messages(self) -> int:
        return self.coll.messages + (self.buckets.messages if self.buckets is not None else 0)

    def state_dict(self) -> dict:
        return {"exchanges": self.exchanges, "messages": self.messages}

    def load_state_dict(self, state: dict) -> None:
        self.exchanges = state["exchanges"]
        self.coll.messages = state["messages"] - (self.buckets.messages if self.buckets is not None else 0)

    def report(self) -> dict:
        return {
            "rank": self.roles.rank,
            "exchanges": self.exchanges,
            "messages": self.messages,
            "messages_per_exchange": self.messages / self.exchanges if self.exchanges else None,
        }


ENGINE = SyncSGD
