"""Async EASGD (You, Buluç, Demmel, SC'17 §4; Zhang et al.'s asynchronous EASGD with τ = 1).

Rules, for worker i at its iteration t:
    master, Eq. 2 (one worker):  W ← W + η·ρ·(W^i_t − W_t)
    worker, Eq. 1:               W^i_{t+1} = W^i_t − η·ΔW^i_t − η·ρ·(W^i_t − W_t)
Pattern: first come, first served, the center update locked. One exchange is
one passive-target epoch on the master's window (CenterWindow.pull_then_push):
    lock (exclusive) · Get W_t · Flush · Accumulate(SUM) α·(W^i_t − W_t) · unlock
so worker i reads W_t and adds the elastic difference (the master's Eq. 2,
applied by MPI on the master's memory while no other update can intervene),
|W| words each way, then applies Eq. 1 locally with the W_t it read. Only
the schedule differs from original EASGD (`easgd`, round-robin); Hogwild
EASGD differs from this only in the lock (its registry pattern,
lock_free_window: a shared lock).

Overlap (the paper's step 2, "worker i computes ΔW^i_t, overlapping with
receiving W_t"; codesign.overlap, on by default, --no-overlap for the
ablation): the exchange needs only W^i_t, known before the gradient. At
begin_iteration the worker snapshots W^i_t into its host stage and hands the
whole epoch to a helper thread; meanwhile the main thread fetches the batch
and computes ΔW^i_t. worker_step waits for the helper (the `wait` phase: the
exposed part of the exchange; the helper's seconds go to overlapped_comm_s
and its phases to run.json's algorithm_report.helper_thread_phases), then
applies Eq. 1 with the W_t the helper read. The arithmetic is the same in
both modes, operation for operation; only when the exchange runs differs.
Only one thread calls MPI at a time (the main thread makes no MPI call while
the helper's epoch is in flight), so MPI_THREAD_SERIALIZED suffices.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from mpi4py import MPI

from scaledl.algorithms import rules
from scaledl.algorithms.window_based import WindowBased
from scaledl.errors import UserError
from scaledl.timing import PhaseTimer


class AsyncEASGD(WindowBased):
    key = "async_easgd"

    def __init__(self, context):
        super().__init__(context)
        self.overlap = self.codesign.overlap
        if self.overlap and MPI.Query_thread() < MPI.THREAD_SERIALIZED:   # alike on every rank
            raise UserError(f"{self.key} overlaps its exchange on a helper thread, which needs MPI_THREAD_SERIALIZED "
                            f"or better; this MPI gives level {MPI.Query_thread()}: use --no-overlap")
        self.overlap = self.overlap and self.roles.is_worker
        self.exposed_s = 0.0        # overlap: seconds the main thread waited for the helper
        if self.overlap:
            self.helper_timer = PhaseTimer()      # the helper's own: two threads must not share a timer
            self.helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scaledl-exchange")
            self.pending = None

    def exchanged_weights(self) -> torch.Tensor:
        """The tensor holding W^i_t when the exchange is prepared (MEASGD's Nesterov keeps a copy)."""
        return self.params.data

    # ---- worker
    def begin_iteration(self) -> bool:
        if self.overlap:
            self.w_host = self.stage.send_view(self.exchanged_weights())          # W^i_t, before ΔW^i_t
            self.pending = self.helper.submit(self.exchange, self.helper_timer)  # ∥ data, h2d, fwd/bwd
        return True

    def exchange(self, timer: PhaseTimer) -> float:
        """One lock epoch: center_host ← W_t ; W ← W + α·(W^i_t − W_t). Returns its wall seconds."""
        t0 = time.perf_counter()
        # the lock's acquisition is timed as wait (queueing), the epoch's operations as comm
        self.window.pull_then_push(self.center_host, self.elastic_difference, on_update=self.count_update,
                                   timer=timer)
        return time.perf_counter() - t0

    def worker_step(self) -> None:
        if self.overlap:
            t0 = time.perf_counter()
            with self.timer.phase("wait"):                                       # the exposed part
                self.timer.add_overlapped(self.pending.result())
            self.exposed_s += time.perf_counter() - t0
            self.pending = None
        else:
            self.w_host = self.stage.send_view(self.exchanged_weights())         # W^i_t
            self.exchange(self.timer)
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

    # ---- both sides
    def finish(self) -> None:
        if self.overlap:
            self.helper.shutdown(wait=True)   # an exchange left in flight (an error mid-iteration) settles first
        super().finish()

    def report(self) -> dict:
        report = super().report()
        if self.roles.is_worker:
            report["overlap"] = self.overlap
            if self.overlap:
                helper = self.helper_timer.snapshot()
                report["helper_thread_phases"] = helper
                exchange = helper["comm_s"] + helper["wait_s"]   # the helper's epochs: lock queue (wait) + operations
                report["exchange_s"] = exchange
                report["exposed_wait_s"] = self.exposed_s        # of which the main thread waited
                report["hidden_s"] = max(exchange - self.exposed_s, 0.0)
        return report


ALGORITHM = AsyncEASGD
