"""What the dedicated-master algorithms share: W_0 to everyone, the board, the master's loop.

Ranks: the master (rank 0) holds the center W in host memory, like the
paper's CPU master; workers 1..P hold W^i on their devices. Each worker
reports its loss and reads the stop flag through the master's board (an RMA
window) after every iteration, so stopping and statistics never need the
master's attention. The master loops: keep MPI progressing (passive-target
RMA needs the target to call into MPI with some libraries), watch every
worker's heartbeat, evaluate W on schedule and decide when to stop.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from scaledl.algorithms.base import Algorithm, Request
from scaledl.comm.board import LOSS_SUM, SAMPLES, UPDATES, Board
from scaledl.comm.buffers import HostStage
from scaledl.comm.liveness import Liveness
from scaledl.comm.watchdog import Watchdog, abort_job


class Staleness:
    """How many center updates by others happened between a worker's consecutive exchanges."""

    def __init__(self):
        self.count, self.total, self.max, self._expected = 0, 0, 0, 0

    def note(self, version: int) -> None:
        """`version`: the center's update count just before this worker's update."""
        lag = version - self._expected
        self.count += 1
        self.total += lag
        self.max = max(self.max, lag)
        self._expected = version + 1

    def as_dict(self) -> dict:
        return {"exchanges": self.count, "staleness_mean": self.total / self.count if self.count else None, "staleness_max": self.max}

    def state_dict(self) -> dict:
        return {"count": self.count, "total": self.total, "max": self.max, "expected": self._expected}

    def load_state_dict(self, state: dict) -> None:
        self.count, self.total, self.max, self._expected = state["count"], state["total"], state["max"], state["expected"]


class MasterBased(Algorithm):
    def __init__(self, context):
        super().__init__(context)
        r = self.roles
        self.world = r.world
        self.board = Board(r.world, r.master, r.num_workers)
        self.staleness = Staleness()
        self.pauses_seen = 0         # worker: checkpoints joined so far (the board counts those asked)
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
    def end_iteration(self, loss, batch: int, request: Request) -> Request:
        """The master decides alone (every rank receives the same signals): `request` is not sent."""
        with self.timer.phase("comm"):
            stop, pauses = self.board.report(self.roles.worker_index, float(loss) * batch, batch)
        agreed = Request.STOP if stop else Request.NONE
        if pauses > self.pauses_seen:
            self.pauses_seen = pauses
            agreed |= Request.CHECKPOINT
        return agreed

    def report(self) -> dict:
        if self.roles.is_worker:
            return {"rank": self.roles.rank, "worker": self.roles.worker_index, **self.staleness.as_dict()}
        return {}

    # ---- master side
    def serve(self, monitor) -> None:
        """Watch the board until the monitor says stop, then raise the stop flag."""
        heartbeats = Heartbeats(self.roles.worker_ranks, self.hyper.worker_timeout)
        watchdog = Watchdog(heartbeats.most_patient_limit, heartbeats.blame)
        stats = self.stats
        try:
            waiting_since = time.perf_counter()
            while True:
                # Spin: with some MPI libraries the workers' one-sided operations progress only
                # while the master calls into MPI. Timed as a whole: a context manager per spin
                # would cost more than the spin.
                self.world.Iprobe()
                words = self.board.read()
                watchdog.beat()
                heartbeats.check(self.board.heartbeats(words), self.board.queued(words))
                if stats.advance(words, monitor):
                    busy_since = time.perf_counter()
                    self.timer.add("wait", busy_since - waiting_since)
                    with watchdog.paused():       # evaluating W may take long; workers are not to blame
                        done = monitor.after_step(stats.step, stats.epoch)
                    self.timer.mark_step(idle="wait")
                    if monitor.wants_checkpoint(done):
                        # The pause first: a worker that reads the stop has read the pause too, so every
                        # worker joins this checkpoint (a stop read alone would send it to finish()'s barrier).
                        self.board.ask_pause()
                        if done:
                            self.board.set_stop()
                        with watchdog.paused():       # the workers finish their step and write theirs
                            self.on_checkpoint()
                    heartbeats.excuse(time.perf_counter() - busy_since)
                    waiting_since = time.perf_counter()
                    if done:
                        break
            self.board.set_stop()
        finally:
            watchdog.stop()


class BoardStats:
    """Turns board counters into the monitor's step, epoch and loss."""

    def __init__(self, num_workers: int, n_train: int):
        self.num_workers = num_workers
        self.n_train = max(n_train, 1)
        self.step, self.epoch = 0, 0.0
        self._loss_sum, self._samples = 0.0, 0.0

    def state_dict(self) -> dict:
        return {"step": self.step, "epoch": self.epoch, "loss_sum": self._loss_sum, "samples": self._samples}

    def load_state_dict(self, state: dict) -> None:
        self.step, self.epoch, self._loss_sum, self._samples = (state["step"], state["epoch"], state["loss_sum"],
                                                                 state["samples"])

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


class Heartbeats:
    """Per-worker exchange counters from the board; a worker silent past its own limit is lost (comm/liveness.py)."""

    def __init__(self, worker_ranks: tuple[int, ...], floor: float):
        self.liveness = Liveness(worker_ranks, floor)
        self.seen = np.zeros(len(worker_ranks))
        self.queued = np.zeros(len(worker_ranks))

    def check(self, beats: np.ndarray, queued: np.ndarray) -> None:
        now = self.liveness.clock()
        for w in np.flatnonzero(beats != self.seen):
            self.liveness.progressed(int(w), int(beats[w] - self.seen[w]), now)
        self.seen, self.queued = beats.copy(), queued.copy()
        if self.liveness.overdue(now).any():
            w = self.liveness.culprit(self.queued, now)
            abort_job(f"{self.liveness.verdict(w, now)}; aborting the job")

    def excuse(self, seconds: float) -> None:
        """Do not count time the master itself was busy (workers may have stalled waiting for it)."""
        self.liveness.excuse(seconds)

    def most_patient_limit(self) -> float:
        """How long the master may be stuck before someone is blamed: the longest any worker is given."""
        return float(self.liveness.limits().max())

    def blame(self) -> str:
        return self.liveness.verdict(self.liveness.culprit(self.queued))


def host_view(t: torch.Tensor) -> np.ndarray:
    """numpy view of a CPU tensor (the master's center lives in host memory)."""
    return t.detach().numpy()
