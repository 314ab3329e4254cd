"""The one step boundary: where the ranks decide whether to evaluate, checkpoint, pause or stop.

Every loop crosses it once per step: the workers' loop after each iteration
(scaledl.train.loop), a dedicated master's after each step of its service
(algorithms/master.py). One order, written once:

    1. the master's monitor applies its stop rule (budgets, divergence, an interrupt);
    2. the request: STOP, EVALUATE (the schedule, while the run goes on) and
       CHECKPOINT (the schedule; at a stop, only when interrupted);
    3. the ranks agree on it through the pattern's own control message (the
       collectives' stop vote, the master's notice board, a round-robin
       message): a dedicated master announces the pauses before the stop,
       so a worker that reads the stop has read them too;
    4. the step is marked on the clock;
    5. an agreed evaluation: every rank pauses off its clock while the master
       evaluates W (scaledl.train.evaluation); the target reached, or a
       non-finite loss, stops the run at this step;
    6. an agreed checkpoint is written (every rank agreed on it before the evaluation, so it is
       written even when the evaluation ends the run: no rank may skip a collective its peers enter).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntFlag

KILL_AT_VARIABLE = "SCALEDL_KILL_AT"  # tests' fault injection: RANK:STEP, that rank dies at that step


class BoundaryRequest(IntFlag):
    """What a rank asks for at a step boundary; the pattern's agreement returns what all agreed on."""

    NONE = 0
    STOP = 1  # the master's stop rule, or an interrupt
    CHECKPOINT = 2  # the master's checkpoint schedule, or an interrupt (then with STOP)
    EVALUATE = 4  # the master's evaluation schedule: every rank pauses while W is evaluated


@dataclass
class StepBoundary:
    """One rank's side of the step boundary."""

    monitor: object | None  # the master's scaledl.train.monitor.Monitor (None elsewhere)
    interrupted: Callable[[], bool]  # this rank got SIGINT, SIGTERM or SIGUSR1
    checkpoints_enabled: bool
    save_checkpoint: Callable[[], None]  # collective over every rank of the job
    evaluate: Callable[[], bool]  # collective: the evaluation pause; True when it ends the run
    timer: object  # this rank's scaledl.comm.timing.PhaseTimer
    kill_at: int | None = None  # fault injection (tests): SIGKILL this rank at this step

    def decide(self, step: int, epoch: float) -> BoundaryRequest:
        """Steps 1-2: the request this rank brings to the agreement."""
        request = BoundaryRequest.NONE
        interrupted = self.interrupted()
        if self.monitor is not None:
            stop = self.monitor.after_step(step, epoch, interrupted=interrupted)
            if stop:
                request |= BoundaryRequest.STOP
            elif self.monitor.evaluation_due():
                request |= BoundaryRequest.EVALUATE
            if self.monitor.wants_checkpoint(stop):
                request |= BoundaryRequest.CHECKPOINT
        if interrupted:
            request |= BoundaryRequest.STOP
            if self.checkpoints_enabled:
                request |= BoundaryRequest.CHECKPOINT
        return request

    def cross(
        self,
        step: int,
        epoch: float,
        agree: Callable[[BoundaryRequest], BoundaryRequest],
        *,
        idle: str | None = None,
        paused=contextlib.nullcontext,
    ) -> bool:
        """The whole boundary at `step`; True when the run stops here.

        agree:  the pattern's agreement (it sends this rank's request and returns the agreed one)
        idle:   the phase the step's untimed seconds are charged to (a dedicated master's `wait`)
        paused: a context in which a liveness watchdog does not count (evaluating, checkpointing)
        """
        if step == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        with paused():
            request = self.decide(step, epoch)
        agreed = agree(request)
        self.timer.mark_step(idle=idle)
        if agreed & BoundaryRequest.EVALUATE and not agreed & BoundaryRequest.STOP:
            with paused():
                if self.evaluate():  # the target, or divergence: the run ends here
                    agreed |= BoundaryRequest.STOP
        if agreed & BoundaryRequest.CHECKPOINT:
            with paused():
                self.save_checkpoint()
        stop = bool(agreed & BoundaryRequest.STOP)
        if stop and self.monitor is not None:
            self.monitor.stopped_by_peer()
        return stop


def fault_step(rank: int) -> int | None:
    """The step at which this rank kills itself, from SCALEDL_KILL_AT=RANK:STEP (the checkpoint tests)."""
    who, _, at = os.environ.get(KILL_AT_VARIABLE, "").partition(":")
    return int(at) if who.isdigit() and int(who) == rank and at.isdigit() else None
