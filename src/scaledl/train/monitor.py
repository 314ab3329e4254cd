"""The master's view of a run: evaluate the center on schedule, record metrics, decide when to stop.

Besides its budgets, a run stops early for two reasons of its own:
`diverged` (a non-finite training or test loss: every later step would be
wasted) and `interrupted` (SIGINT, SIGTERM or SIGUSR1 on this rank, or a
peer's stop vote that no budget explains: see StopSignals).
"""

from __future__ import annotations

import math
import signal
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from scaledl.train.checkpoint import CheckpointPolicy
from scaledl.train.evaluation import CenterEvaluator, Evaluation, Snapshot
from scaledl.progress import duration
from scaledl.train.outputs import MetricsLog
from scaledl.timing import PhaseTimer

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
    time_budget: float | None = None      # seconds of training (evaluation excluded)
    target_accuracy: float | None = None

    def reason(self, step: int, epoch: float, train_seconds: float, accuracy: float | None) -> str | None:
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
        done = [count / limit for count, limit in ((step, self.max_steps), (epoch, self.epochs),
                                                   (train_seconds, self.time_budget)) if limit]
        return min(1.0, max(done)) if done else None



class Monitor:
    """Snapshots W every `eval_every` steps; one metrics row per evaluation; decides when to stop.

    Evaluations run off every clock (scaledl.train.evaluation): a snapshot of the
    center is taken with the training clock and evaluated on a helper thread.
    A row's `train_s` is the training clock of its snapshot, and the time to
    target that of the first snapshot at or above the target. A target is
    seen when its evaluation finishes, a few steps later; those steps are
    neither counted in the time to target nor hidden: `stop.steps` has them.
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
    ):
        self.stop_rule = stop_rule
        self.eval_every = eval_every
        self.timer = timer
        self.evaluator = evaluator
        self.samples_per_step = samples_per_step
        self.refresh_center = refresh_center
        self.metrics_log = metrics_log            # rows appended as they come, so progress survives a crash
        self.checkpoints = checkpoints or CheckpointPolicy()
        self.rows: list[dict] = []
        self.step = 0
        self.epoch = 0.0
        self.stop_reason: str | None = None
        self.last_accuracy: float | None = None
        self.last_loss: float | None = None
        self.time_to_target: float | None = None
        self.target_step: int | None = None
        self.final_wall: float | None = None
        self.stop_train_s: float | None = None
        self.diverged_at: int | None = None      # step of the first non-finite loss seen
        self._target: tuple[Evaluation, dict] | None = None
        self._result_state: dict[str, torch.Tensor] = {}
        self._loss_sum = None
        self._loss_count = 0
        self._snapshot_step = -1
        self._next_eval = eval_every

    @property
    def train_seconds(self) -> float:
        return self.timer.training()

    def record_loss(self, loss: torch.Tensor | float, count: int) -> None:
        """Accumulate (on the device for a tensor: reading it every step would stall a GPU)."""
        weighted = loss * count
        self._loss_sum = weighted if self._loss_sum is None else self._loss_sum + weighted
        self._loss_count += count

    def after_step(self, step: int, epoch: float, interrupted: bool = False) -> bool:
        """Called once per step (`interrupted`: this rank got a stop signal); True when the run should stop."""
        self.step, self.epoch = step, epoch
        if step >= self._next_eval:
            self.snapshot(step, epoch)
        with self.timer.phase("eval"):               # bookkeeping of finished evaluations
            self._record(self.evaluator.ready())
        target_seen = self.time_to_target is not None
        if interrupted:
            self.stop_reason = INTERRUPTED
        elif self.diverged_at is not None:
            self.stop_reason = DIVERGED
        else:
            self.stop_reason = self.stop_rule.reason(step, epoch, self.train_seconds,
                                                     self.stop_rule.target_accuracy if target_seen else None)
        return self.stop_reason is not None

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

    def _check_finite(self, loss: float | None, step: int) -> None:
        if loss is not None and not math.isfinite(loss) and self.diverged_at is None:
            self.diverged_at = step

    def snapshot(self, step: int, epoch: float) -> None:
        """Copy the center with this moment's clocks and queue its evaluation (the copy is `eval` time)."""
        wall_s, train_s, phases = self.timer.wall(), self.train_seconds, self.timer.snapshot()
        with self.timer.phase("eval"):
            self.refresh_center()
            # Reading the accumulated loss syncs the device once per evaluation, not once per step.
            train_loss = float(self._loss_sum) / self._loss_count if self._loss_count else None
            self._check_finite(train_loss, step)
            self._loss_sum, self._loss_count = None, 0
            self._snapshot_step = step
            self._next_eval = (step // self.eval_every + 1) * self.eval_every
            taken = Snapshot(step=step, epoch=epoch, wall_s=wall_s, train_s=train_s, train_loss=train_loss,
                             phases=phases)
            self._record(self.evaluator.submit(taken))

    def _record(self, evaluations: list[Evaluation]) -> None:
        for ev in evaluations:
            snap = ev.snapshot
            row = {
                "step": snap.step, "epoch": round(snap.epoch, 6), "wall_s": snap.wall_s, "train_s": snap.train_s,
                "samples": snap.step * self.samples_per_step, "train_loss": snap.train_loss,
                "test_loss": ev.test_loss, "test_accuracy": ev.test_accuracy, **snap.phases,
            }
            self.rows.append(row)
            if self.metrics_log is not None:
                self.metrics_log.append(row)
            self._check_finite(ev.test_loss, snap.step)
            self.last_loss, self.last_accuracy = ev.test_loss, ev.test_accuracy
            target = self.stop_rule.target_accuracy
            if target is not None and self.time_to_target is None and ev.test_accuracy >= target:
                self.time_to_target, self.target_step = snap.train_s, snap.step
                self._target = (ev, self.evaluator.evaluated_state)
            print(self.progress_line(snap, ev), end="", file=sys.stdout, flush=True)   # one write: ranks share it

    def progress_line(self, snap: Snapshot, ev: Evaluation) -> str:
        """One line per evaluation: step (of the step budget), epoch, training clock, losses, accuracy, time left."""
        rule = self.stop_rule
        of = f"/{rule.max_steps}" if rule.max_steps else ""
        done = rule.progress(snap.step, snap.epoch, snap.train_s)
        left = (f"  {done:4.0%}  ~{duration(snap.train_s * (1 - done) / done)} left"
                if done and snap.step else "")
        if rule.target_accuracy is not None:
            left += "  (or until test_acc ≥ {:g})".format(rule.target_accuracy) if self.time_to_target is None \
                else "  target reached"
        loss_text = "-" if snap.train_loss is None else f"{snap.train_loss:.4f}"
        return (f"step {snap.step:6d}{of}  epoch {snap.epoch:7.3f}  train {snap.train_s:8.2f}s  "
                f"loss {loss_text}  test_loss {ev.test_loss:.4f}  test_acc {ev.test_accuracy:.4f}{left}\n")

    # ---- checkpoints (scaledl.train.checkpoint)

    def settle(self) -> None:
        """Collect every pending evaluation, so that the state below holds all rows taken so far."""
        with self.timer.phase("eval"):
            self._record(self.evaluator.drain())

    def state_dict(self) -> dict:
        """What the run has learnt so far, after `settle` (no evaluation in flight)."""
        target = None
        if self._target is not None:
            ev, state = self._target
            target = {"evaluation": {"snapshot": asdict(ev.snapshot), "test_loss": ev.test_loss,
                                     "test_accuracy": ev.test_accuracy}, "state": state}
        return {
            "rows": self.rows, "step": self.step, "epoch": self.epoch, "last_accuracy": self.last_accuracy,
            "last_loss": self.last_loss, "time_to_target": self.time_to_target, "target_step": self.target_step,
            "diverged_at": self.diverged_at, "target": target,
            "loss_sum": None if self._loss_sum is None else float(self._loss_sum), "loss_count": self._loss_count,
            "snapshot_step": self._snapshot_step, "next_eval": self._next_eval,
            "evaluated_state": self.evaluator.evaluated_state,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict()`; metrics.csv is rewritten with the rows so far."""
        self.rows = list(state["rows"])
        self.step, self.epoch = state["step"], state["epoch"]
        self.last_accuracy, self.last_loss = state["last_accuracy"], state["last_loss"]
        self.time_to_target, self.target_step = state["time_to_target"], state["target_step"]
        self.diverged_at = state["diverged_at"]
        if state["target"] is not None:
            ev = state["target"]["evaluation"]
            snapshot = Snapshot(**ev["snapshot"])
            self._target = (Evaluation(snapshot, ev["test_loss"], ev["test_accuracy"]), state["target"]["state"])
        self._loss_sum, self._loss_count = state["loss_sum"], state["loss_count"]
        self._snapshot_step, self._next_eval = state["snapshot_step"], state["next_eval"]
        self.evaluator.evaluated_state = state["evaluated_state"]
        if self.metrics_log is not None:
            for row in self.rows:
                self.metrics_log.append(row)

    def evaluated_state(self) -> dict[str, torch.Tensor]:
        """The weights and buffers of the run's result (after `finish`): the model whose accuracy
        `last_accuracy` is."""
        return self._result_state

    def finish(self) -> None:
        """Wait for every evaluation; the run's result is the snapshot that reached the target, if one
        did, else a snapshot of the final center (of the last one taken, for a run that was
        interrupted or diverged: a user who pressed Ctrl-C waits for no new test pass, and a
        diverged center is not worth one).

        A run stopped by its target ends a few steps after the snapshot that reached it (the time
        its evaluation took); those steps are an artifact of evaluating off the clock, so the result
        (final accuracy, model.pt) is that snapshot's. The center may also change after a final
        snapshot (updates in flight at the stop decision land in a master-based run); the saved
        model is always the evaluated copy, so it matches the final accuracy exactly.
        """
        self.stop_train_s = self.train_seconds
        final_snapshot = self.stop_reason not in ("target_accuracy", INTERRUPTED, DIVERGED)
        if final_snapshot and self._snapshot_step != self.step:
            self.snapshot(self.step, self.epoch)
        with self.timer.phase("eval"):
            evaluations = self.evaluator.drain()
            self._record(evaluations)
        self.evaluator.close()
        if self.metrics_log is not None:
            self.metrics_log.close()
        self._result_state = self.evaluator.evaluated_state
        if self.stop_reason == "target_accuracy":
            ev, self._result_state = self._target
            self.last_loss, self.last_accuracy = ev.test_loss, ev.test_accuracy
        self.final_wall = self.timer.wall()
