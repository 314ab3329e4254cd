"""Sync EASGD (You, Buluç, Demmel, SC'17 §4, Eqs. 1–2) and its codesign ladder (§3, Algorithms 2–3).

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
Weights, not gradients, are reduced. No arrival order enters, so it is
deterministic for a given seed and world size. The master is worker 0.

The ladder: sync_easgd1/2/3 are the registry's presets of sync_easgd, each
fixing the switches --center-on and --overlap (the math is identical at
every level, so their results are bitwise equal, only the time differs):
    sync_easgd1  tree collectives; the center W stays in host memory (the paper's
                 CPU master): W and ΣW^i cross host↔device every iteration, through
                 page-locked host buffers on a GPU (as the device levels' staging)
    sync_easgd2  W lives on the master's device beside W^0: device-resident
                 weights, GPU–GPU messages where the backend allows
    sync_easgd3  sync_easgd2, and steps 2–3 run on a helper thread while the
                 batch is fetched and ΔW^i computed (steps 1 ∥ 2–3): they depend
                 only on W^i_t and W_t, never on ΔW^i_t
With τ > 1 the exchange happens every τ-th iteration and the others are
plain local SGD steps (Zhang et al.'s communication period).
Defaults: α = ηρ = 0.9/P (Zhang et al.), τ = 1.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import torch

from scaledl.algorithms import rules
from scaledl.algorithms.base import Algorithm
from scaledl.timing import PhaseTimer


class SyncEASGD(Algorithm):
    key = "sync_easgd"

    def __init__(self, context):
        super().__init__(context)
        w = self.params.data
        self.workers = self.roles.num_workers
        self.on_host = self.codesign.center_on == "host"
        place = torch.device("cpu") if self.on_host else w.device

        def buffer() -> torch.Tensor:
            return host_buffer(w) if self.on_host else torch.empty_like(w)

        # What travels: W_t from the master's center, Σ W^i_t into `sum_workers` (in the center's memory).
        self.w_wire = host_buffer(w) if self.on_host else w
        self.center_wire = self.center.data if self.roles.is_master else buffer()
        self.sum_workers = buffer() if self.roles.is_master else None
        # W_t on this worker's device, for Eq. 1.
        self.center_copy = self.center_wire if place == w.device else torch.empty_like(w)
        self.control = self.collectives(self.center_wire)
        if self.codesign.overlap:
            # A communicator and a timer of its own: two threads' collectives must share neither.
            self.helper_comm = self.roles.worker_comm.Dup()
            self.helper_timer = PhaseTimer(w.device, sync=self.timer.sync)
            self.coll = self.collectives(self.center_wire, comm=self.helper_comm, timer=self.helper_timer)
            self.helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scaledl-exchange")
            self.pending = None
            # On a GPU the helper enqueues on a stream of its own, ordered after the
            # update that wrote W^i_t by an event: synchronising the main stream instead
            # would wait for the forward/backward queued meanwhile, and nothing would overlap.
            self.exchange_stream = torch.cuda.Stream(w.device) if w.is_cuda else None
            # Per exchange: the helper's seconds and the part the main thread waited for (the rest was
            # hidden behind data and fwd/bwd), so a steady-state window can be cut as from the timeline.
            self.overlap_log: dict[str, list[float]] = {"exchange_s": [], "waited_s": []}
        else:
            self.coll = self.control
        self.iteration = 0

    def start(self) -> None:
        if self.roles.is_master:
            self.center.data.copy_(self.params.data)
        self.control.bcast_(self.center_wire, root=0)
        self.params.data.copy_(self.center_wire)
        self.coll.messages = self.control.messages = 0   # count the exchanges' messages only
        self.exchanges = 0

    def exchanges_now(self) -> bool:
        return self.iteration % self.hyper.tau == 0

    def begin_iteration(self) -> bool:
        if self.codesign.overlap and self.exchanges_now():
            written = torch.cuda.Event() if self.exchange_stream else None
            if written:
                written.record()                                        # W^i_t is final once this fires
            self.pending = self.helper.submit(self.exchange_on_helper, written)   # steps 2-3 ∥ step 1
        return True

    def exchange_on_helper(self, written) -> float:
        """The exchange on the helper thread (and, on a GPU, on its own stream after `written`)."""
        if self.exchange_stream is None:
            return self.exchange(self.helper_timer)
        with torch.cuda.stream(self.exchange_stream):
            self.exchange_stream.wait_event(written)
            return self.exchange(self.helper_timer)

    def exchange(self, timer: PhaseTimer) -> float:
        """Steps 2-3: W_t to every worker, Σ_i W^i_t to the master. Returns its wall seconds."""
        t0 = time.perf_counter()
        if self.on_host:
            with timer.phase("param_copy"):
                self.w_wire.copy_(self.params.data)                     # W^i_t into host memory
        self.coll.bcast_(self.center_wire, root=0)                      # step 2
        self.coll.reduce_sum(self.w_wire, self.sum_workers, root=0)     # step 3
        return time.perf_counter() - t0

    def worker_step(self) -> None:
        w, grad, lr, rho = self.params.data, self.params.grad, self.hyper.lr, self.hyper.rho
        exchanging = self.exchanges_now()
        self.iteration += 1
        self.exchanges += exchanging
        if not exchanging:
            with self.timer.phase("update"):
                rules.sgd_(w, grad, lr)                                 # local step between exchanges
            return
        if self.codesign.overlap:
            t0 = time.perf_counter()
            with self.timer.phase("wait"):                              # the exposed part of the exchange
                seconds = self.pending.result()
            self.timer.add_overlapped(seconds)
            self.overlap_log["exchange_s"].append(round(seconds, 7))
            self.overlap_log["waited_s"].append(round(time.perf_counter() - t0, 7))
        else:
            self.exchange(self.timer)
        if self.center_copy is not self.center_wire:
            with self.timer.phase("param_copy"):
                self.center_copy.copy_(self.center_wire)                # W_t onto this worker's device
        with self.timer.phase("update"):
            rules.elastic_worker_(w, grad, self.center_copy, lr, rho)   # step 4, Eq. 1
        if self.roles.is_master:
            with self.timer.phase("center_update"):                     # step 5, Eq. 2
                rules.elastic_center_(self.center.data, self.sum_workers, self.workers, lr, rho)

    def end_iteration(self, loss, batch: int, master_wants_stop: bool) -> bool:
        return self.control.any_(master_wants_stop)

    def finish(self) -> None:
        if self.codesign.overlap:
            self.helper.shutdown()
            self.helper_comm.Free()

    def report(self) -> dict:
        report = {"rank": self.roles.rank, "exchanges": self.exchanges, "messages": self.coll.messages,
                  "messages_per_exchange": self.coll.messages / self.exchanges if self.exchanges else None}
        if self.codesign.overlap:
            report["helper_thread_phases"] = self.helper_timer.snapshot()
            report["overlap_per_exchange"] = self.overlap_log   # exchange k ran in iteration k·τ
        return report


def host_buffer(like: torch.Tensor) -> torch.Tensor:
    """A host tensor shaped like `like`, page-locked when `like` is on a GPU: the host↔device copies of
    Sync EASGD1 then run at the same DMA rate as the pinned staging of the device-resident levels, so
    level 1 → 2 measures where the center lives, not pageable against pinned memory."""
    pinned = like.device.type == "cuda" and torch.cuda.is_available()
    return torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=pinned)


ALGORITHM = SyncEASGD
