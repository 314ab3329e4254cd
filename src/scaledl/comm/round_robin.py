"""Original EASGD's schedule: the master serves one worker at a time, strictly in rank order.

Per turn of worker i (paper Algorithm 1, lines 9-14): the master sends W to
worker i; worker i computes its gradient and sends W^i back; both update.
Only then does worker i+1 get its turn, so the workers' computations are
serialised. That slowness on HPC systems is the paper's point: this pattern
is deliberately not improved. Cost: P·(α + |W|β) per round, each way.
Two-sided buffer messages (Send/Recv) on preallocated arrays.

Timing: a message's arrival is awaited with a probe, timed as `wait` (the
worker waiting for its turn, the master waiting while worker i computes),
and only its receipt is `comm` (the transfer). A turn is waited for as long
as the worker's own pace of turns allows (comm/liveness.py). The master's
send of W is tested without sleeping for its first `SEND_SPIN_S` (the worker
is already waiting for its turn, and MPI moves the message only inside those
tests), so it completes at a blocking Send's speed and still cannot hang.
"""

from __future__ import annotations

import math

import numpy as np

from scaledl.comm import transport
from scaledl.comm.buffers import host_array
from scaledl.comm.liveness import Liveness
from scaledl.comm.tags import Tag
from scaledl.comm.timing import PhaseTimer
from scaledl.comm.transport import MPI
from scaledl.comm.watchdog import abort_job, arrival_or_abort, rank_name, wait_or_abort

POLL_S = 2e-4  # a waiting worker's sleep between polls on shared cores, the master's arrival poll's
SEND_SPIN_S = 2.0  # longer than W takes at any link speed we run on; then the liveness poll takes over


class RoundRobinMaster:
    def __init__(self, world: MPI.Comm, worker_ranks: tuple[int, ...], numel: int, timeout: float):
        """`timeout`: --worker-timeout, the floor of how long a turn is waited for."""
        self.world = world
        self.worker_ranks = worker_ranks
        self.liveness = Liveness(worker_ranks, timeout, event="turn", interval="turn")
        self._index = {rank: w for w, rank in enumerate(worker_ranks)}
        self.from_worker = host_array(numel)
        self._empty = np.empty(0, dtype=np.float32)

    def serve(self, worker: int, center: np.ndarray, timer: PhaseTimer) -> np.ndarray:
        """One turn: W to `worker`, its W^i back (returned; valid until the next turn).

        A worker that dies mid-turn makes MPI fail here (e.g. the shared-memory copy from its
        vanished process): the job ends with one line naming it, not a traceback. The line says what
        its sentinel would (comm/sentinel.py), whichever of the two claims the report first.
        """
        try:
            return self._turn(worker, center, timer)
        except MPI.Exception as error:
            what = str(error).splitlines()[0].removesuffix(", error stack:")
            abort_job(
                f"{rank_name(worker)} died without finishing (killed or crashed): lost during its turn "
                f"(MPI: {what}); aborting the job"
            )

    def _turn(self, worker: int, center: np.ndarray, timer: PhaseTimer) -> np.ndarray:
        w = self._index[worker]
        self.liveness.expect(w)  # the time before its turn is the other workers'
        deadline = self.liveness.deadline(w)
        with timer.phase("comm"):
            send = self.world.Isend(center, dest=worker, tag=Tag.WEIGHTS)
            wait_or_abort(
                send, deadline, lambda: self.liveness.verdict(w, doing="it did not take its turn"), spin_s=SEND_SPIN_S
            )
        with timer.phase("wait"):  # the worker fetches its batch and computes ΔW^i
            arrival_or_abort(
                self.world,
                worker,
                Tag.WEIGHTS,
                deadline,
                lambda: self.liveness.verdict(w, doing="it did not send back its weights"),
            )
        with timer.phase("comm"):
            self.world.Recv(self.from_worker, source=worker, tag=Tag.WEIGHTS)
        self.liveness.progressed(w)
        return self.from_worker

    def stop_all(self) -> None:
        """Each worker is waiting for its next turn; tell it the run is over instead."""
        self._tell_all(Tag.STOP, "the stop message")

    def pause_all(self) -> None:
        """Each worker is waiting for its next turn; ask it to join a checkpoint first."""
        self._tell_all(Tag.PAUSE, "the pause message")

    def evaluate_all(self) -> None:
        """Each worker is waiting for its next turn; ask it to pause, off its clock, for an evaluation."""
        self._tell_all(Tag.EVALUATE, "the evaluation message")

    def _tell_all(self, tag: Tag, what: str) -> None:
        requests = [self.world.Isend(self._empty, dest=w, tag=tag) for w in self.worker_ranks]
        for w, request in enumerate(requests):
            self.liveness.expect(w)
            wait_or_abort(
                request,
                self.liveness.deadline(w),
                lambda w=w: self.liveness.verdict(w, doing=f"it did not take {what}"),
            )


class RoundRobinWorker:
    def __init__(self, world: MPI.Comm, master: int, shares_cores: bool = False):
        """`shares_cores` (Roles.shares_cores): wait for the turn asleep between polls, not spinning in MPI."""
        self.world = world
        self.master = master
        self.shares_cores = shares_cores
        self._status = MPI.Status()

    def await_turn(self, center_out: np.ndarray, timer: PhaseTimer) -> Tag:
        """Block until the master's next message: WEIGHTS (this worker's turn: W lands in center_out),
        PAUSE (join a checkpoint, then wait again), EVALUATE (pause for an evaluation, then
        wait again) or STOP.

        A worker waits out P − 1 other turns. With a core of its own it blocks in MPI (no added latency);
        on cores shared with the other ranks it polls asleep, as the master does, or the P − 1 waiting
        workers' spinning would slow the one whose turn it is (2.6× a round at P = 8 on 2 cores)."""
        with timer.phase("wait"):  # the other workers' turns
            if self.shares_cores:  # no deadline: a lost master ends the job through the launcher
                transport.current().arrival(self.world, self.master, MPI.ANY_TAG, math.inf, lambda: None, POLL_S)
            self.world.Probe(source=self.master, tag=MPI.ANY_TAG, status=self._status)
        tag = self._status.Get_tag()
        with timer.phase("comm"):
            self.world.Recv(center_out, source=self.master, tag=tag)
        return Tag(tag)

    def hand_back(self, weights: np.ndarray) -> None:
        self.world.Send(weights, dest=self.master, tag=Tag.WEIGHTS)
