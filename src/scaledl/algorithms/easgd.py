"""Original EASGD, round-robin (Zhang et al.; the SC'17 paper's baseline, its Algorithm 1).

Rules, for worker i in its turn:
    worker, Eq. 1:               W^i ← W^i − η·ΔW^i − η·ρ·(W^i − W)
    master, Eq. 2 (one worker):  W ← W + η·ρ·(W^i − W)
Pattern: the master serves the workers one at a time, strictly in rank
order (scaledl.comm.round_robin). In worker i's turn: the master sends W
(line 10); worker i fetches its batch (line 9), computes ΔW^i (line 11),
sends W^i back (line 12) and applies Eq. 1 (line 13); the master applies
Eq. 2 (line 14); then worker i+1's turn begins. The workers' computations
are thereby serialised: P·(α + |W|β) per round each way and no overlap,
which is what makes it slow on HPC systems (the paper's motivation). A step
is a round (every worker's turn once). Evaluations and checkpoints fall
between rounds: instead of the next turn each worker gets a message to pause
for the evaluation, or to write its part of the checkpoint. Bitwise repeatable: the order of every update is fixed.
"""

from __future__ import annotations

import torch

from scaledl.algorithms import rules
from scaledl.algorithms.boundary import BoundaryRequest
from scaledl.algorithms.master import MasterBased
from scaledl.algorithms.staleness import Staleness
from scaledl.comm.buffers import host_array
from scaledl.comm.round_robin import RoundRobinMaster, RoundRobinWorker
from scaledl.comm.tags import Tag


class RoundRobinEASGD(MasterBased):
    def __init__(self, context):
        super().__init__(context)
        r = self.roles
        if r.is_master:
            self.rr = RoundRobinMaster(r.world, r.worker_ranks, self.center.numel, self.worker_timeout)
            self.order_head: list[int] = []  # the first rounds' service order, for inspection
            self.in_rank_order = True
            self.turns = 0
            self.lags = [Staleness() for _ in r.worker_ranks]  # measured at the master
        else:
            self.rr = RoundRobinWorker(r.world, r.master, shares_cores=r.shares_cores)
            self.center_host = host_array(self.params.numel)
            self.center_copy = torch.empty_like(self.params.data)

    # ---- worker: wait for the turn, compute, hand back, update
    def begin_iteration(self) -> bool:
        message = self.rr.await_turn(self.center_host, self.timer)  # wait for the turn, then receive W
        while message in (Tag.EVALUATE, Tag.PAUSE):  # between rounds: the master's pauses first
            if message == Tag.EVALUATE:
                self.pause_for_evaluation()  # the stop, if it says so, follows as a message
            else:
                self.save_checkpoint()
            message = self.rr.await_turn(self.center_host, self.timer)
        if message == Tag.WEIGHTS:
            with self.timer.phase("param_copy"):
                self.center_copy.copy_(torch.from_numpy(self.center_host))
        return message == Tag.WEIGHTS

    def worker_step(self) -> None:
        weights = self.stage.send_view(self.params.data)
        with self.timer.phase("comm"):
            self.rr.hand_back(weights)  # W^i_t to the master
        with self.timer.phase("update"):
            s = self.settings
            rules.elastic_worker_(self.params.data, self.params.grad, self.center_copy, s.lr, s.rho)

    def end_iteration(self, loss, batch: int, request: BoundaryRequest) -> BoundaryRequest:
        super().end_iteration(loss, batch, request)
        return BoundaryRequest.NONE  # a stop or a pause arrives instead of the next turn (begin_iteration)

    # ---- master: serve workers 1..P in order, one at a time; a step is a round
    def await_step(self) -> tuple[int, float]:
        center, s = self.center.data, self.settings
        # each turn is waited for as long as that worker's own pace allows (RoundRobinMaster)
        for w, rank in enumerate(self.roles.worker_ranks):
            w_i = self.rr.serve(rank, center.numpy(), self.timer)  # W out; wait while it computes; W^i in
            with self.timer.phase("center_update"):
                rules.elastic_center_one_(center, torch.from_numpy(w_i), s.lr, s.rho)
            self._note_service(w, rank)
        with self.timer.phase("comm"):  # the round's count and the workers' losses, on the board
            self.board.add_updates(self.roles.num_workers)
            words = self.board.read()
        self.stats.advance(words, self.monitor)
        return self.stats.step, self.stats.epoch

    def announce(self, request: BoundaryRequest) -> BoundaryRequest:
        # The workers wait for a turn: they get the pauses instead, in the order the boundary takes them.
        if request & BoundaryRequest.EVALUATE:
            self.rr.evaluate_all()
        if request & BoundaryRequest.CHECKPOINT:
            self.rr.pause_all()
        return request  # the stop goes out with `release`

    def release(self) -> None:
        self.rr.stop_all()

    def _note_service(self, w: int, rank: int) -> None:
        expected = self.roles.worker_ranks[self.turns % self.roles.num_workers]
        self.in_rank_order &= rank == expected
        self.lags[w].note(self.turns)
        self.turns += 1
        if len(self.order_head) < 4 * self.roles.num_workers:
            self.order_head.append(rank)

    def state_dict(self) -> dict:
        state = super().state_dict()
        if self.roles.is_master:
            state["service"] = {
                "turns": self.turns,
                "order_head": self.order_head,
                "in_rank_order": self.in_rank_order,
                "lags": [lag.state_dict() for lag in self.lags],
            }
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.roles.is_master:
            service = state["service"]
            self.turns, self.order_head = service["turns"], list(service["order_head"])
            self.in_rank_order = service["in_rank_order"]
            for lag, saved in zip(self.lags, service["lags"]):
                lag.load_state_dict(saved)

    def report(self) -> dict:
        if self.roles.is_master:
            return {
                "service_order_head": self.order_head,
                "served_in_rank_order": bool(self.in_rank_order),
                "workers": [{"rank": rank, **lag.as_dict()} for rank, lag in zip(self.roles.worker_ranks, self.lags)],
            }
        return {}


ENGINE = RoundRobinEASGD
