"""Quorum rounds (beyond the paper): the averaging round of local SGD or DiLoCo closed by m of the P workers.

P workers W^i, a dedicated master (rank 0) holding the center W. Every
iteration a worker takes an inner step, W^i ← W^i − η·ΔW^i; every τ-th (the
first one included, as the averaging engine counts) it sends W^i to the master
and waits for W, which it takes (the reset). The master closes a round once m
workers' W^i are held (`--quorum m`; the others already arrived join too):
with A the round's workers, each worker's W^j rebased onto the current center
when it began from an older one (W^j + W − W_j, W_j the center it last took:
its own change applied to today's center),

    Σ = Σ_{j∈A} rebased W^j (in worker order) ; the outer step of the averaging engine on Σ / |A|
        average   W ← Σ/|A|                                   (local SGD)
        nesterov  Δ = W − Σ/|A| ; B ← μ_o·B + Δ ; W ← W − η_o·(Δ + μ_o·B)   (DiLoCo)

then W to each worker of A. A worker still computing joins the round open when
its W^i arrives (its staleness: the rounds closed meanwhile, in the master's
report). With m = P every round waits for every worker: the rooted DiLoCo
round (a Reduce of Σ W^i to the master, its outer step, a Bcast of W), bit
for bit where that Reduce adds in worker order (two workers; tested).
Decoupled DiLoCo's rounds close this way; synchronous SGD with backup
workers is τ = 1 with the average outer step.

Message pattern: comm/quorum.py. A pause (an evaluation or a checkpoint) and
the stop reach each worker where it waits for its round's answer: the master
holds every worker's W^i first, so every pause closes a round of all P. A
step is P iterations, as on every master pattern: the round's workers' inner
steps since their last round, over P. Nondeterministic for m < P (which
workers make a round depends on arrival order).
"""

from __future__ import annotations

import torch

from scaledl.algorithms import rules
from scaledl.algorithms.boundary import BoundaryRequest
from scaledl.algorithms.master import MasterBased
from scaledl.algorithms.settings import OUTER_WITH_STATE
from scaledl.algorithms.staleness import Staleness
from scaledl.comm.buffers import host_array
from scaledl.comm.quorum import QuorumMaster
from scaledl.comm.round_robin import RoundRobinMaster, RoundRobinWorker
from scaledl.comm.tags import Tag


class QuorumAveraging(MasterBased):
    def __init__(self, context):
        super().__init__(context)
        r, s = self.roles, self.settings
        self.quorum = s.quorum or r.num_workers
        if r.is_master:
            self.rounds_of = QuorumMaster(r.world, r.worker_ranks, self.center.numel)
            self.tell = RoundRobinMaster(r.world, r.worker_ranks, self.center.numel, self.worker_timeout)
            w = self.center.data
            self.took = [torch.empty_like(w) for _ in r.worker_ranks]  # W_j: the center each worker last took
            self.total = torch.empty_like(w)
            self.outer_buffer = torch.zeros_like(w) if s.outer in OUTER_WITH_STATE else None
            self.lags = [Staleness() for _ in r.worker_ranks]  # per worker: rounds closed without it
            self.sent = [0] * r.num_workers  # rounds each worker has sent
            self.rounds = 0
        else:
            self.rr = RoundRobinWorker(r.world, r.master, shares_cores=r.shares_cores)
            self.center_host = host_array(self.params.numel)
            self.iteration = 0
            self.awaiting = False  # sent W^i, the master's answer not yet taken

    def start(self) -> None:
        super().start()
        if self.roles.is_master:
            for took in self.took:
                took.copy_(self.center.data)

    # ---- worker: τ inner steps, W^i to the master, its answer taken before the next step
    def begin_iteration(self) -> bool:
        if not self.awaiting:
            return True
        message = self.rr.await_turn(self.center_host, self.timer)
        while message in (Tag.EVALUATE, Tag.PAUSE):
            if message == Tag.EVALUATE:
                self.pause_for_evaluation()
            else:
                self.save_checkpoint()
            message = self.rr.await_turn(self.center_host, self.timer)
        if message == Tag.WEIGHTS:
            self.awaiting = False
            with self.timer.phase("update"):
                self.params.data.copy_(torch.from_numpy(self.center_host))  # the reset
        return message == Tag.WEIGHTS

    def worker_step(self) -> None:
        with self.timer.phase("update"):
            rules.sgd_(self.params.data, self.params.grad, self.settings.lr)
        if self.iteration % self.settings.tau == 0:
            weights = self.stage.send_view(self.params.data)
            with self.timer.phase("comm"):
                self.rr.hand_back(weights)
            self.awaiting = True
        self.iteration += 1

    def end_iteration(self, loss, batch: int, request: BoundaryRequest) -> BoundaryRequest:
        super().end_iteration(loss, batch, request)
        return BoundaryRequest.NONE  # a pause or the stop comes as the answer to a round (begin_iteration)

    # ---- master: close a round on m workers, answer them
    def await_step(self) -> tuple[int, float]:
        """Close rounds until the step advances (a round of m < P workers may not add a whole step)."""
        while True:
            self.close_round(self.rounds_of.gather(self.quorum, self.timer))
            with self.timer.phase("comm"):
                words = self.board.read()
            if self.stats.advance(words, self.monitor):
                return self.stats.step, self.stats.epoch

    def close_round(self, workers: list[int]) -> None:
        s, center, total = self.settings, self.center.data, self.total
        iterations = 0
        with self.timer.phase("center_update"):
            for k, j in enumerate(workers):
                slot = torch.from_numpy(self.rounds_of.slots[j])
                if k == 0:
                    total.copy_(slot)
                else:
                    total.add_(slot)
                if self.lags[j].note(self.rounds):  # began from an older center: its change, on today's
                    total.add_(center).sub_(self.took[j])
                iterations += 1 if self.sent[j] == 0 else s.tau
                self.sent[j] += 1
            if s.outer == "average":
                rules.average_(center, total, len(workers))
            else:
                rules.outer_nesterov_(center, total, len(workers), self.outer_buffer, s.outer_lr, s.outer_momentum)
            for j in workers:
                self.took[j].copy_(center)
        self.rounds_of.answer(center.numpy(), self.timer)
        self.rounds += 1
        with self.timer.phase("comm"):
            self.board.add_updates(iterations)

    def hold_everyone(self) -> None:
        """Every worker's W^i held, so that every worker waits for the master's next message."""
        self.rounds_of.gather(self.roles.num_workers, self.timer)

    def announce(self, request: BoundaryRequest) -> BoundaryRequest:
        if request & (BoundaryRequest.EVALUATE | BoundaryRequest.CHECKPOINT):
            self.hold_everyone()  # the next await_step closes their round after the pause
            if request & BoundaryRequest.EVALUATE:
                self.tell.evaluate_all()
            if request & BoundaryRequest.CHECKPOINT:
                self.tell.pause_all()
        return request  # the stop goes out with `release`

    def release(self) -> None:
        self.hold_everyone()
        self.tell.stop_all()

    # ---- checkpoints: the workers' place in their rounds, the master's held W^i and what each worker took
    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.roles.is_worker:
            return {**state, "iteration": self.iteration, "awaiting": self.awaiting}
        return {
            **state,
            "rounds": self.rounds,
            "sent": list(self.sent),
            "held": list(self.rounds_of.held),
            "slots": [torch.from_numpy(self.rounds_of.slots[j]).clone() for j in self.rounds_of.held],
            "took": [t.clone() for t in self.took],
            "lags": [lag.state_dict() for lag in self.lags],
            "outer_buffer": None if self.outer_buffer is None else self.outer_buffer.clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.roles.is_worker:
            self.iteration, self.awaiting = state["iteration"], state["awaiting"]
            return
        self.rounds, self.sent = state["rounds"], list(state["sent"])
        self.rounds_of.held = list(state["held"])
        for j, slot in zip(self.rounds_of.held, state["slots"]):
            self.rounds_of.slots[j][:] = slot.numpy()
        for took, saved in zip(self.took, state["took"]):
            took.copy_(saved)
        for lag, saved in zip(self.lags, state["lags"]):
            lag.load_state_dict(saved)
        if self.outer_buffer is not None:
            self.outer_buffer.copy_(state["outer_buffer"])

    def report(self) -> dict:
        if self.roles.is_master:
            return {
                "quorum": self.quorum,
                "rounds": self.rounds,
                "workers": [{"rank": rank, **lag.as_dict()} for rank, lag in zip(self.roles.worker_ranks, self.lags)],
            }
        return {"rank": self.roles.rank, "worker": self.roles.worker_index, "iteration": self.iteration}


ENGINE = QuorumAveraging
