"""Evaluation of the center, off every clock and beside no training: the ranks pause for it.

At each evaluation point every rank of the job pauses at its step boundary
(algorithms/boundary.py: the agreed EVALUATE request) and waits, in its
`eval` phase, off the training clock, while the master evaluates the center
W on the test split, with every core of its node; then training resumes.
So an evaluation takes nothing from the training ranks (no thread shares
their cores, whatever the test set's size), its result is known at the step
it was taken (the run stops exactly at the step that reached the target), and
every algorithm family is evaluated alike, wherever its center lives. Its
price is wall time only. For the asynchronous algorithms a pause is a
synchronisation point: every worker finishes its iteration and waits, once
every `--eval-every` steps.

BatchNorm statistics are buffers, which no algorithm exchanges. Collective
algorithms evaluate on worker 0, whose buffers the evaluation takes (those of
W^0, not of W). A dedicated master has no worker model: before evaluating it
re-estimates the statistics of W itself from BN_BATCHES training batches
(torch.optim.swa_utils.update_bn); a model without BatchNorm skips this.

`SCALEDL_EVAL_DELAY_S` (a diagnostic for the timing tests) adds that many
seconds of sleep to every evaluation.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.optim.swa_utils import update_bn

from scaledl.comm import transport
from scaledl.data.loader import Normalizer, iter_split

# Training batches (of the workers' batch size, the first ones of the pre-shuffled train split, so the same
# images every time) that re-estimate a dedicated master's BatchNorm statistics.
BN_BATCHES = 32
EVAL_DELAY_VARIABLE = "SCALEDL_EVAL_DELAY_S"


@dataclass(frozen=True)
class Snapshot:
    """The center at an evaluation point, and the clocks of that moment."""

    step: int
    epoch: float
    wall_s: float  # the master's wall clock since training began
    train_s: float  # the master's training clock (wall minus its eval phase)
    train_loss: float | None
    phases: dict  # the master's cumulative phase seconds (PhaseTimer.snapshot)


@dataclass(frozen=True)
class Evaluation:
    snapshot: Snapshot
    test_loss: float
    test_accuracy: float


class CenterEvaluator:
    """Evaluates the center on the test split, synchronously, on a model of its own."""

    def __init__(
        self,
        data_path,
        center_model: torch.nn.Module,
        worker_model: torch.nn.Module | None,
        normalize: Normalizer,
        *,
        eval_batch_size: int,
        bn_batch_size: int,
        split: str = "test",
        first: int = 0,
    ):
        self.data_path = data_path
        self.split, self.first = split, first  # the test split, or the train split's held-out tail
        self.center_model = center_model
        self.worker_buffers = dict(worker_model.named_buffers()) if worker_model is not None else None
        self.model = copy.deepcopy(center_model)  # the center's copy that is evaluated (and saved)
        self.normalize = normalize
        self.eval_batch_size = eval_batch_size
        self.bn_batch_size = bn_batch_size
        self.re_estimate_bn = worker_model is None and any(
            isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats
            for m in center_model.modules()
        )
        self.delay = float(os.environ.get(EVAL_DELAY_VARIABLE) or 0.0)
        self.threads = transport.current().evaluation_threads()  # training is paused: the cores it had
        self.evaluated_state: dict[str, torch.Tensor] = {}  # of the latest evaluation
        self.count, self.seconds = 0, 0.0

    def evaluate(self, snapshot: Snapshot) -> Evaluation:
        """The center as it is now, on the test split."""
        t0 = time.perf_counter()
        state = {name: t.detach().clone() for name, t in self.center_model.state_dict().items()}
        if self.worker_buffers is not None:
            for name, buffer in self.worker_buffers.items():
                state[name] = buffer.detach().clone()
        training_threads = torch.get_num_threads()
        torch.set_num_threads(max(self.threads, training_threads))
        try:
            test_loss, accuracy = self._evaluate(state)
        finally:
            torch.set_num_threads(training_threads)
        self.evaluated_state = {name: t.detach().clone() for name, t in self.model.state_dict().items()}
        if self.delay:
            time.sleep(self.delay)
        self.count += 1
        self.seconds += time.perf_counter() - t0
        return Evaluation(snapshot, test_loss, accuracy)

    def report(self) -> dict:
        return {
            "evaluations": self.count,
            "seconds": self.seconds,
            "threads": max(self.threads, 1),
            "where": "the master rank, every rank paused off the clock",
            "bn_re_estimated": self.re_estimate_bn,
            "split": "validation" if self.split == "train" else self.split,
            "delay_s": self.delay or None,
        }

    def _evaluate(self, state: dict[str, torch.Tensor]) -> tuple[float, float]:
        with torch.no_grad():
            self.model.load_state_dict(state)
            if self.re_estimate_bn:
                update_bn(self._train_batches(), self.model)
            self.model.eval()
            loss_sum, correct, count = 0.0, 0, 0
            for images, labels in iter_split(self.data_path, self.split, self.eval_batch_size, first=self.first):
                x, y = self.normalize(images, labels)
                logits = self.model(x)
                loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
                correct += (logits.argmax(1) == y).sum().item()
                count += len(y)
        return loss_sum / count, correct / count

    def _train_batches(self):
        batches = iter_split(self.data_path, "train", self.bn_batch_size, in_memory_max_bytes=0)  # read, not kept
        with contextlib.closing(batches):
            for images, labels in itertools.islice(batches, BN_BATCHES):
                yield self.normalize(images, labels)[0]
