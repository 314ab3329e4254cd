"""What the dedicated-master engines share: W_0 to everyone, the notice board, the master's one loop.

Ranks: the master (rank 0) holds the center W in host memory, like the
paper's CPU master; workers 1..P hold W^i on their devices. Each worker
reports its loss and reads the stop and pause words through the master's
board (an RMA window) after every iteration, so stopping and statistics
never need the master's attention.

The master's loop is written once (`serve`); each pattern supplies its hooks:
    watching()        a liveness watch over the whole service (the window's watchdog)
    await_step()      serve the workers until the next step: (step, epoch)
    announce(request) tell the workers a checkpoint's pause and the stop
    release()         after the last step: let every worker leave its loop
and the step boundary (algorithms/boundary.py) decides at every step.
"""

from __future__ import annotations

import contextlib
from abc import abstractmethod

import numpy as np

from scaledl.algorithms.base import Algorithm
from scaledl.algorithms.boundary import BoundaryRequest, StepBoundary
from scaledl.algorithms.staleness import Staleness
from scaledl.comm.board import LOSS_SUM, SAMPLES, UPDATES, Board
from scaledl.comm.buffers import HostStage


class BoardStats:
    """Turns board counters into the monitor's step, epoch and loss.

    A master-based step is P center updates: each worker's iteration is one
    update, so after s steps every worker has made s iterations on average
    (`--max-steps` counts iterations per worker for every pattern).
    """

    def __init__(self, num_workers: int, n_train: int):
        self.num_workers = num_workers
        self.n_train = max(n_train, 1)
        self.step, self.epoch = 0, 0.0
        self._loss_sum, self._samples = 0.0, 0.0

    def state_dict(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "loss_sum": self._loss_sum, "samples": self._samples}

    def load_state_dict(self, state: dict) -> None:
        self.step, self.epoch = state["step"], state["epoch"]
        self._loss_sum, self._samples = state["loss_sum"], state["samples"]

    def advance(self, words: np.ndarray, monitor) -> bool:
        """Feed new losses to the monitor; True when the step (updates / P) advanced."""
        new_samples = words[SAMPLES] - self._samples
        if new_samples > 0:
            monitor.record_loss((words[LOSS_SUM] - self._loss_sum) / new_samples, int(new_samples))
            self._loss_sum, self._samples = words[LOSS_SUM], words[SAMPLES]
        self.epoch = words[SAMPLES] / self.n_train
        step = int(words[UPDATES]) // self.num_workers
        advanced, self.step = step > self.step, step
        return advanced


class MasterBased(Algorithm):
    def __init__(self, context):
        super().__init__(context)
        r = self.roles
        self.world = r.world
        self.board = Board(r.world, r.master, r.num_workers)
        self.staleness = Staleness()
        self.pauses_seen = 0  # worker: checkpoints joined so far (the board counts those asked)
        self.evaluations_seen = 0  # worker: evaluation pauses joined so far
        if r.is_worker:
            self.stage = HostStage(self.params.data, self.timer)
        else:
            self.stats = BoardStats(r.num_workers, self.n_train)

    # ---- both sides
    def start(self) -> None:
        """W^i_0 ← W_0: one broadcast from the master."""
        if self.roles.is_master:
            with self.timer.phase("comm"):
                self.world.Bcast(self.center.data.numpy(), root=self.roles.master)
        else:
            buffer = self.stage.recv_view(self.params.data)
            with self.timer.phase("comm"):
                self.world.Bcast(buffer, root=self.roles.master)
            self.stage.finish_recv(self.params.data)

    def finish(self) -> None:
        self.world.Barrier()  # every worker has left its loop: no exchange is still in flight
        if self.roles.is_master:
            self.refresh_center()
        self.board.free()

    # ---- checkpoints: the workers' staleness, the master's board counters and statistics
    def state_dict(self) -> dict:
        if self.roles.is_worker:
            return {"staleness": self.staleness.state_dict()}
        return {"board": self.board.kept(), "stats": self.stats.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if self.roles.is_worker:
            self.staleness.load_state_dict(state["staleness"])
        else:
            self.board.restore(state["board"])
            self.stats.load_state_dict(state["stats"])

    # ---- worker side
    def end_iteration(self, loss, batch: int, request: BoundaryRequest) -> BoundaryRequest:
        """The master decides alone (every rank receives the same signals): `request` is not sent."""
        with self.timer.phase("comm"):
            stop, pauses, evaluations = self.board.report(self.roles.worker_index, float(loss) * batch, batch)
        agreed = BoundaryRequest.STOP if stop else BoundaryRequest.NONE
        if pauses > self.pauses_seen:
            self.pauses_seen = pauses
            agreed |= BoundaryRequest.CHECKPOINT
        if evaluations > self.evaluations_seen:
            self.evaluations_seen = evaluations
            agreed |= BoundaryRequest.EVALUATE
        return agreed

    def report(self) -> dict:
        if self.roles.is_worker:
            return {"rank": self.roles.rank, "worker": self.roles.worker_index, **self.staleness.as_dict()}
        return {}

    # ---- master side: one loop, the pattern's hooks
    def serve(self, boundary: StepBoundary) -> None:
        """Serve the workers step by step until the step boundary says stop; then release them."""
        self.monitor = boundary.monitor
        with self.watching() as paused:
            while not boundary.cross(*self.await_step(), agree=self.announce, idle="wait", paused=paused):
                pass
        self.release()

    def watching(self):
        """A context for the whole service, yielding the `paused` context of the boundary."""
        return contextlib.nullcontext(contextlib.nullcontext)

    @abstractmethod
    def await_step(self) -> tuple[int, float]:
        """Serve the workers until the next step; returns its number and epoch."""

    @abstractmethod
    def announce(self, request: BoundaryRequest) -> BoundaryRequest:
        """Tell the workers what the master decided (pause first, then stop); returns it."""

    @abstractmethod
    def release(self) -> None:
        """After the last step: every worker leaves its loop."""
