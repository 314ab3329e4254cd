"""The master's view of a run: evaluate the center on schedule, record metrics, decide when to stop."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import torch

from scaledl.timing import PhaseTimer


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


class Monitor:
    """Evaluates W every `eval_every` steps; one metrics row per evaluation.

    Times reported as training time (`train_s`, time to target) exclude the
    evaluations themselves: they are our measurement, not the algorithm's cost.
    """

    def __init__(
        self,
        stop_rule: StopRule,
        eval_every: int,
        timer: PhaseTimer,
        evaluate: Callable[[], tuple[float, float]],
        samples_per_step: int,
    ):
        self.stop_rule = stop_rule
        self.eval_every = eval_every
        self.timer = timer
        self._evaluate = evaluate
        self.samples_per_step = samples_per_step
        self.rows: list[dict] = []
        self.step = 0
        self.epoch = 0.0
        self.stop_reason: str | None = None
        self.last_accuracy: float | None = None
        self.last_loss: float | None = None
        self.time_to_target: float | None = None
        self.final_wall: float | None = None
        self._loss_sum = None
        self._loss_count = 0
        self._evaluated_step = -1
        self._next_eval = eval_every

    @property
    def train_seconds(self) -> float:
        return self.timer.wall() - self.timer.totals["eval"]

    def record_loss(self, loss: torch.Tensor | float, count: int) -> None:
        """Accumulate (on the device for a tensor: reading it every step would stall a GPU)."""
        weighted = loss * count
        self._loss_sum = weighted if self._loss_sum is None else self._loss_sum + weighted
        self._loss_count += count

    def after_step(self, step: int, epoch: float) -> bool:
        """Called once per step; True when the run should stop."""
        self.step, self.epoch = step, epoch
        if step >= self._next_eval:
            self.evaluate(step, epoch)
        self.stop_reason = self.stop_rule.reason(step, epoch, self.train_seconds, self._accuracy_now(step))
        return self.stop_reason is not None

    def _accuracy_now(self, step: int) -> float | None:
        return self.last_accuracy if self._evaluated_step == step else None

    def evaluate(self, step: int, epoch: float) -> None:
        with self.timer.phase("eval"):
            test_loss, accuracy = self._evaluate()
        train_loss = float(self._loss_sum) / self._loss_count if self._loss_count else None
        self._loss_sum, self._loss_count = None, 0
        self.last_loss, self.last_accuracy, self._evaluated_step = test_loss, accuracy, step
        self._next_eval = (step // self.eval_every + 1) * self.eval_every
        phases = self.timer.snapshot()
        row = {
            "step": step, "epoch": round(epoch, 6), "wall_s": self.timer.wall(), "train_s": self.train_seconds,
            "samples": step * self.samples_per_step, "train_loss": train_loss,
            "test_loss": test_loss, "test_accuracy": accuracy, **phases,
        }
        self.rows.append(row)
        target = self.stop_rule.target_accuracy
        if target is not None and self.time_to_target is None and accuracy >= target:
            self.time_to_target = row["train_s"]
        loss_text = "-" if train_loss is None else f"{train_loss:.4f}"
        print(
            f"step {step:6d}  epoch {epoch:7.3f}  train {row['train_s']:8.2f}s  "
            f"loss {loss_text}  test_loss {test_loss:.4f}  test_acc {accuracy:.4f}\n",
            end="", file=sys.stdout, flush=True,  # one write: the ranks share the launcher's stream
        )

    def evaluated_state(self) -> dict[str, torch.Tensor]:
        """The weights and buffers of the latest evaluation, when the evaluator keeps them
        (train._center_evaluator does): the model whose accuracy `last_accuracy` is."""
        return self._evaluate.evaluated_state

    def finish(self) -> None:
        """Evaluate the final center unless the last step was just evaluated.

        The center may still change after that evaluation (updates in flight at the stop decision
        land in a master-based run); the saved model is the evaluated copy (`evaluated_state`),
        so it matches the final accuracy exactly.
        """
        if self._evaluated_step != self.step:
            self.evaluate(self.step, self.epoch)
        self.final_wall = self.timer.wall()
