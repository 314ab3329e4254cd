"""The master's view of a run: evaluate the center on schedule, record metrics, decide when to stop.

Besides its budgets, a run stops early for reasons of its own:
`diverged` (a non-finite training or test loss: every later step would be
wasted), `interrupted` (SIGINT, SIGTERM or SIGUSR1 on this rank, or a
peer's stop vote that no budget explains: see StopSignals) and, for a tune
trial, `outpaced` (it can no longer be its cell's best or runner-up point:
scaledl.train.pace). The last is decided at an evaluation, like the target.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from scaledl.comm import transport
from scaledl.comm.timing import PhaseTimer
from scaledl.progress import duration
from scaledl.run_record import OUTPACED
from scaledl.train.checkpoint import CheckpointPolicy
from scaledl.train.evaluation import CenterEvaluator, Evaluation, Snapshot
from scaledl.train.outputs import MetricsLog

INTERRUPTED, DIVERGED = "interrupted", "diverged"


class StopSignals:
    """SIGINT, SIGTERM and SIGUSR1 ask the run to stop at its next step boundary instead of killing it.

    SIGUSR1 is what a Slurm job asks for with `--signal=USR1@SECONDS`: a warning that
    much before its time limit or a preemption (the job then checkpoints and stops).

    The handler only sets a flag; the training loop reads it once per step
    (`requested`), and the ranks agree on it through the stop vote they cast
    anyway, so no rank is left waiting in a collective. A launcher forwards a
    terminal's Ctrl-C to ranks that already got it from their process group:
    a repeat within `same_press_s` is that same press. A later one means the
    user will not wait: `on_second` ends the job at once.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)

    def __init__(self, on_second: Callable[[], None], same_press_s: float = 2.0):
        self.on_second = on_second
        self.same_press_s = same_press_s
        self.first_at: float | None = None
        self._previous: dict[int, object] = {}

    @property
    def requested(self) -> bool:
        return self.first_at is not None

    def __enter__(self) -> StopSignals:
        if not transport.current().guards_processes:
            return self  # a simulation: every rank is an actor in one process, and Ctrl-C ends the simulation
        for signum in self.SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, frame) -> None:
        now = time.monotonic()
        if self.first_at is None:
            self.first_at = now
        elif now - self.first_at > self.same_press_s:
            self.on_second()


@dataclass(frozen=True)
class StopRule:
    """A run ends at whichever budget is reached first."""

    max_steps: int | None = None
    epochs: float | None = None
    time_budget: float | None = None  # seconds of training (evaluation excluded)
    target_accuracy: float | None = None
    later_target: float | None = None  # a second target past the first: the run stops there instead

    def reason(self, step: int, epoch: float, train_seconds: float | None, accuracy: float | None) -> str | None:
        if self.target_accuracy is not None and accuracy is not None and accuracy >= self.target_accuracy:
            return "target_accuracy"
        if self.max_steps is not None and step >= self.max_steps:
            return "max_steps"
        if self.epochs is not None and epoch >= self.epochs:
            return "epochs"
        if self.time_budget is not None and train_seconds >= self.time_budget:
            return "time_budget"
        return None

    def progress(self, step: int, epoch: float, train_seconds: float) -> float | None:
        """How far the run is towards its nearest budget (0–1); None when only a target accuracy bounds it."""
        done = [
            count / limit
            for count, limit in ((step, self.max_steps), (epoch, self.epochs), (train_seconds, self.time_budget))
            if limit
        ]
        return min(1.0, max(done)) if done else None


class Monitor:
    """Evaluates W every `eval_every` steps; one metrics row per evaluation; decides when to stop.

    Evaluations run in a pause of every rank, off every clock
    (scaledl.train.evaluation). A row's `train_s` is the training clock at its
    evaluation, and the time to target that of the first evaluation at or above
    the target; the run stops at that very step.
    """

    def __init__(
        self,
        stop_rule: StopRule,
        eval_every: int,
        timer: PhaseTimer,
        evaluator: CenterEvaluator,
        samples_per_step: int,
        refresh_center: Callable[[], None],
        metrics_log: MetricsLog | None = None,
        checkpoints: CheckpointPolicy | None = None,
        outpaced: Callable[[int, float], bool] | None = None,
    ):
        self.stop_rule = stop_rule
        self.outpaced = outpaced  # (step, training clock) -> a tune trial that can no longer matter
        self.eval_every = eval_every
        self.timer = timer
        self.evaluator = evaluator
        self.samples_per_step = samples_per_step
        self.refresh_center = refresh_center
        self.metrics_log = metrics_log  # rows appended as they come, so progress survives a crash
        self.checkpoints = checkpoints or CheckpointPolicy()
        self.rows: list[dict] = []
        self.step = 0
        self.epoch = 0.0
        self.stop_reason: str | None = None
        self.last_accuracy: float | None = None
        self.last_loss: float | None = None
        self.time_to_target: float | None = None  # interpolated training clock of the crossing
        self.steps_to_target: float | None = None  # interpolated step of the crossing
        self.target_step: int | None = None  # the evaluated step at which the target was first seen
        self.final_wall: float | None = None
        self.stop_train_s: float | None = None
        self.diverged_at: int | None = None  # step of the first non-finite loss seen
        self._target_state: dict[str, torch.Tensor] | None = None  # the center that reached the target
        self.later: Crossing | None = None  # the crossing of the later target (StopRule.later_target), if set
        self._later_state: dict[str, torch.Tensor] | None = None  # the center that reached it
        self._result_state: dict[str, torch.Tensor] = {}
        self._loss_sum = None
        self._loss_count = 0
        self._evaluated_step = -1
        self._next_eval = eval_every

    @property
    def stop_step(self) -> int | None:
        """The evaluated step at which the run's last target was reached: the later target's where one is
        set (the run goes on past the first), else the target's; None while not reached."""
        if self.stop_rule.later_target is not None:
            return None if self.later is None else self.later.step
        return self.target_step

    @property
    def train_seconds(self) -> float:
        return self.timer.training()

    def record_loss(self, loss: torch.Tensor | float, count: int) -> None:
        """Accumulate (on the device for a tensor: reading it every step would stall a GPU)."""
        if self._loss_sum is None:
            self._loss_sum = loss * count
        elif isinstance(self._loss_sum, torch.Tensor):
            self._loss_sum.add_(loss, alpha=count)  # one in-place op a step: at batch 4 a step is ~1 ms
        else:
            self._loss_sum += loss * count
        self._loss_count += count

    def after_step(self, step: int, epoch: float, interrupted: bool = False) -> bool:
        """Called once per step (`interrupted`: this rank got a stop signal); True when the run should stop."""
        self.step, self.epoch = step, epoch
        if interrupted:
            self.stop_reason = INTERRUPTED
        elif self.diverged_at is not None:
            self.stop_reason = DIVERGED
        elif self.stop_step is not None:  # a resumed run whose restored rows already reach its target
            self.stop_reason = "target_accuracy"
        else:
            # the training clock is read only where a time budget needs it (a step at batch 4 is ~2.5 ms)
            train_s = self.train_seconds if self.stop_rule.time_budget is not None else None
            self.stop_reason = self.stop_rule.reason(step, epoch, train_s, None)
        return self.stop_reason is not None

    def evaluation_due(self) -> bool:
        """After `after_step`: whether the center is to be evaluated at this step (a run that stops here
        gets its final evaluation from `finish`)."""
        return self.stop_reason is None and self.step >= self._next_eval

    def wants_checkpoint(self, stopping: bool) -> bool:
        """After `after_step`: whether the ranks should checkpoint now. On schedule while the run goes
        on; at its end only when interrupted (a run that ends otherwise is complete and needs none)."""
        if not self.checkpoints.enabled:
            return False
        if stopping:
            return self.stop_reason == INTERRUPTED
        return self.checkpoints.due(self.step)

    def stopped_by_peer(self) -> None:
        """The workers agreed to stop, but not for a reason of this monitor's: a peer was interrupted."""
        if self.stop_reason is None:
            self.stop_reason = INTERRUPTED

    def evaluate(self, step: int, epoch: float) -> bool:
        """Evaluate the center now (every rank is paused, in its `eval` phase); True when the evaluation
        ends the run: the target reached, or a non-finite loss."""
        wall_s, train_s, phases = self.timer.wall(), self.train_seconds, self.timer.snapshot()
        self.refresh_center()
        # Reading the accumulated loss syncs the device once per evaluation, not once per step.
        train_loss = float(self._loss_sum) / self._loss_count if self._loss_count else None
        self._check_finite(train_loss, step)
        self._loss_sum, self._loss_count = None, 0
        self._evaluated_step = step
        self._next_eval = (step // self.eval_every + 1) * self.eval_every
        taken = Snapshot(step=step, epoch=epoch, wall_s=wall_s, train_s=train_s, train_loss=train_loss, phases=phases)
        self._record(self.evaluator.evaluate(taken))
        if self.stop_reason is None and self.diverged_at is not None:
            self.stop_reason = DIVERGED
        elif self.stop_reason is None and self.stop_step == step:
            self.stop_reason = "target_accuracy"
        elif self.stop_reason is None and self.outpaced is not None and self.outpaced(step, train_s):
            self.stop_reason = OUTPACED
        return self.stop_reason is not None

    def _check_finite(self, loss: float | None, step: int) -> None:
        if loss is not None and not math.isfinite(loss) and self.diverged_at is None:
            self.diverged_at = step

    def _record(self, ev: Evaluation) -> None:
        snap = ev.snapshot
        row = {
            "step": snap.step,
            "epoch": round(snap.epoch, 6),
            "wall_s": snap.wall_s,
            "train_s": snap.train_s,
            "samples": snap.step * self.samples_per_step,
            "train_loss": snap.train_loss,
            "test_loss": ev.test_loss,
            "test_accuracy": ev.test_accuracy,
            **snap.phases,
        }
        previous = self.rows[-1] if self.rows else None
        self.rows.append(row)
        if self.metrics_log is not None:
            self.metrics_log.append(row)
        self._check_finite(ev.test_loss, snap.step)
        self.last_loss, self.last_accuracy = ev.test_loss, ev.test_accuracy
        target = self.stop_rule.target_accuracy
        if target is not None and self.time_to_target is None and ev.test_accuracy >= target:
            self._set_crossing(crossing(self.rows, target))
            self._target_state = self.evaluator.evaluated_state
        later = self.stop_rule.later_target
        if later is not None and self.later is None and ev.test_accuracy >= later:
            self.later, self._later_state = crossing(self.rows, later), self.evaluator.evaluated_state
        print(self.progress_line(snap, ev, previous), end="", file=sys.stdout, flush=True)  # one write: ranks share it

    def throughput(self, snap: Snapshot, previous: dict | None) -> float | None:
        """Samples (images) a second of training since the previous evaluation (`previous`: its metrics row);
        None at the first evaluation or where the clock did not move."""
        if previous is None or snap.train_s <= previous["train_s"] or snap.step <= previous["step"]:
            return None
        return (snap.step - previous["step"]) * self.samples_per_step / (snap.train_s - previous["train_s"])

    def progress_line(self, snap: Snapshot, ev: Evaluation, previous: dict | None = None) -> str:
        """One line per evaluation: step (of the step budget), epoch, training clock, throughput since the
        previous evaluation, losses, accuracy, time left."""
        rule = self.stop_rule
        rate = self.throughput(snap, previous)
        speed = "" if rate is None else f"  {rate:8,.0f} img/s"
        of = f"/{rule.max_steps}" if rule.max_steps else ""
        done = rule.progress(snap.step, snap.epoch, snap.train_s)
        left = f"  {done:4.0%}  ~{duration(snap.train_s * (1 - done) / done)} left" if done and snap.step else ""
        if rule.target_accuracy is not None:
            last = rule.target_accuracy if rule.later_target is None else rule.later_target
            left += f"  (or until test_acc ≥ {last:g})" if self.stop_step is None else "  target reached"
        loss_text = "-" if snap.train_loss is None else f"{snap.train_loss:.4f}"
        return (
            f"step {snap.step:6d}{of}  epoch {snap.epoch:7.3f}  train {snap.train_s:8.2f}s{speed}  "
            f"loss {loss_text}  test_loss {ev.test_loss:.4f}  test_acc {ev.test_accuracy:.4f}{left}\n"
        )

    # ---- checkpoints (scaledl.train.checkpoint)

    def state_dict(self) -> dict:
        """What the run has learnt so far."""
        return {
            "rows": self.rows,
            "step": self.step,
            "epoch": self.epoch,
            "last_accuracy": self.last_accuracy,
            "last_loss": self.last_loss,
            "time_to_target": self.time_to_target,
            "target_step": self.target_step,
            "diverged_at": self.diverged_at,
            "target_state": self._target_state,
            "later_state": self._later_state,
            "loss_sum": None if self._loss_sum is None else float(self._loss_sum),
            "loss_count": self._loss_count,
            "evaluated_step": self._evaluated_step,
            "next_eval": self._next_eval,
            "evaluated_state": self.evaluator.evaluated_state,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict()`; metrics.csv is rewritten with the rows so far.

        The target may have changed across the resume (a budget): the time to target is found again in
        the restored rows, under this run's target, so it is the training clock of the first evaluation
        at or above it, as in an uninterrupted run. A target those rows already reach stops the run at its
        next step boundary; its result is then the center that reached it if the checkpoint holds that
        one (it reached the same target, or at the checkpoint's own evaluation), else the last evaluated.
        """
        self.rows = list(state["rows"])
        self.step, self.epoch = state["step"], state["epoch"]
        self.last_accuracy, self.last_loss = state["last_accuracy"], state["last_loss"]
        self.diverged_at = state["diverged_at"]
        self._loss_sum, self._loss_count = state["loss_sum"], state["loss_count"]
        self._evaluated_step, self._next_eval = state["evaluated_step"], state["next_eval"]
        self.evaluator.evaluated_state = state["evaluated_state"]
        self._set_crossing(crossing(self.rows, self.stop_rule.target_accuracy))
        self.later = crossing(self.rows, self.stop_rule.later_target)
        # the later target's center survives a resume where the checkpoint saw that crossing (else the last one)
        self._later_state = state.get("later_state") if self.later is not None else None
        self._target_state = None
        if self.target_step is not None and self.target_step == state["target_step"]:
            self._target_state = state["target_state"]
        elif self.target_step is not None and self.target_step == self._evaluated_step:
            self._target_state = state["evaluated_state"]
        if self.metrics_log is not None:
            for row in self.rows:
                self.metrics_log.append(row)

    def _set_crossing(self, found: Crossing | None) -> None:
        self.time_to_target, self.steps_to_target, self.target_step = (
            (found.train_s, found.steps, found.step) if found else (None, None, None)
        )

    def evaluated_state(self) -> dict[str, torch.Tensor]:
        """The weights and buffers of the run's result (after `finish`): the model whose accuracy
        `last_accuracy` is."""
        return self._result_state

    def finish(self) -> None:
        """The run's result: the center that reached the target, if one did, else the final center
        (evaluated now unless this step was; for a run that was interrupted or diverged, the last
        evaluated one: a user who pressed Ctrl-C waits for no new test pass, and a diverged center is
        not worth one). The saved model is always the evaluated copy, so it matches the final
        accuracy exactly (in a master-based run updates in flight at the stop still land in W)."""
        self.stop_train_s = self.train_seconds
        final_evaluation = self.stop_reason not in ("target_accuracy", INTERRUPTED, DIVERGED)
        if final_evaluation and self._evaluated_step != self.step:
            with self.timer.phase("eval"):
                self.evaluate(self.step, self.epoch)
        if self.metrics_log is not None:
            self.metrics_log.close()
        self._result_state = self.evaluator.evaluated_state
        stopped_at = self._later_state if self.stop_rule.later_target is not None else self._target_state
        if stopped_at is not None and self.stop_reason == "target_accuracy":
            self._result_state = stopped_at
            # its own evaluation: the last one, except in a run resumed past it (its restored rows reach the target)
            reached = next(row for row in self.rows if row["step"] == self.stop_step)
            self.last_accuracy, self.last_loss = reached["test_accuracy"], reached["test_loss"]
        self.final_wall = self.timer.wall()


@dataclass(frozen=True)
class Crossing:
    """Where a run crossed its target accuracy: `train_s` and `steps` interpolated between evaluations, and
    `step`, the evaluated step at which the target was first seen (where the run stops)."""

    train_s: float
    steps: float
    step: int


def crossing(rows: list[dict], target: float | None) -> Crossing | None:
    """The crossing of `target` by the metrics rows (in step order); None if no row reaches it.

    The training clock and step are interpolated linearly in test accuracy between the last evaluation below
    the target and the first at or above it, so a time to target is not quantised to the evaluation interval
    (at 40 steps an interval, seeds would otherwise share a handful of values). With no evaluation below it
    before (the first row already reaches it) that row's own clock and step are taken.
    """
    if target is None:
        return None
    index = next((i for i, row in enumerate(rows) if row["test_accuracy"] >= target), None)
    if index is None:
        return None
    row = rows[index]
    if index == 0:
        return Crossing(row["train_s"], float(row["step"]), row["step"])
    before = rows[index - 1]
    # the fraction of the way from `before` to `row` at which the accuracy reaches the target, in (0, 1]
    fraction = (target - before["test_accuracy"]) / (row["test_accuracy"] - before["test_accuracy"])

    def at(key: str) -> float:
        # written from `row` back, so an accuracy exactly at the target gives that row's value to the bit
        return row[key] - (1.0 - fraction) * (row[key] - before[key])

    return Crossing(at("train_s"), at("step"), row["step"])


PAUSE_POLL_S = 1e-3  # how often a paused rank looks whether the evaluation is over


def evaluation_pause(run) -> bool:
    """Collective over every rank of the job: all wait, in their `eval` phase (off the clock), while the
    master evaluates W at its monitor's step; returns, on every rank, whether that evaluation ends the run."""
    roles = run.roles
    with run.timer.phase("eval"):
        roles.world.Barrier()  # every rank at its step boundary: no exchange is in flight
        stop = run.monitor.evaluate(run.monitor.step, run.monitor.epoch) if roles.is_master else None
        # The others wait asleep: a rank blocked in MPI polls (MPICH spins or yields), and where ranks
        # share cores that polling takes CPU from the evaluation.
        evaluated = roles.world.Ibarrier()
        while not evaluated.Test():
            transport.sleep(PAUSE_POLL_S)
        return roles.world.bcast(stop, root=roles.master)
