"""Evaluation of the center off every clock: a snapshot now, the test pass on a helper thread.

At each evaluation point the master copies the center W (weights and
buffers) together with the training clock. A helper thread evaluates the
snapshots in order, on a model of its own, while training goes on: no rank
waits for an evaluation, so no rank's phases contain one, and the time to
target is the training clock of the first snapshot whose accuracy reaches
the target. Why a thread on the master rather than after the run or on an
extra rank: the run can still stop at the target (a few steps late, not
counted), no rank or node is added, and the copy is the master's only cost.
Its cost on a shared machine: the thread competes for the master's cores
(or GPU), which shows up as that rank's compute, not as anyone's wait.

Memory is bounded: at most MAX_PENDING snapshots wait. One more makes the
master wait for the oldest evaluation; those seconds are its `eval` phase
and run.json counts them (`evaluation.stalls`), since its peers then wait too.

BatchNorm statistics are buffers, which no algorithm exchanges. Collective
algorithms evaluate on worker 0, whose buffers the snapshot takes (those of
W^0, not of W). A dedicated master has no worker model: before evaluating a
snapshot it re-estimates the statistics of W itself from BN_BATCHES training
batches (torch.optim.swa_utils.update_bn); a model without BatchNorm skips this.

`SCALEDL_EVAL_DELAY_S` (a diagnostic for the timing tests) adds that many
seconds of sleep to every evaluation.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.optim.swa_utils import update_bn

from scaledl.data.loader import Normalizer, iter_split

MAX_PENDING = 4
# Training batches (of the workers' batch size, the first ones of the pre-shuffled train split, so the same
# images every time) that re-estimate a dedicated master's BatchNorm statistics: 32 batches (2048 images at
# batch 64) cost about a fifth of a 10 000-image test pass.
BN_BATCHES = 32
EVAL_DELAY_VARIABLE = "SCALEDL_EVAL_DELAY_S"


@dataclass(frozen=True)
class Snapshot:
    """The center at an evaluation point, and the clocks of that moment."""

    step: int
    epoch: float
    wall_s: float          # the master's wall clock since training began
    train_s: float         # the master's training clock (wall minus its eval phase)
    train_loss: float | None
    phases: dict           # the master's cumulative phase seconds (PhaseTimer.snapshot)


@dataclass(frozen=True)
class Evaluation:
    snapshot: Snapshot
    test_loss: float
    test_accuracy: float


class CenterEvaluator:
    """Snapshots of the center, evaluated in order on a helper thread."""

    def __init__(self, data_path, center_model: torch.nn.Module, worker_model: torch.nn.Module | None,
                 normalize: Normalizer, *, eval_batch_size: int, bn_batch_size: int):
        self.data_path = data_path
        self.center_model = center_model
        self.worker_buffers = dict(worker_model.named_buffers()) if worker_model is not None else None
        self.model = copy.deepcopy(center_model)       # the helper thread's own: snapshots load into it
        self.normalize = normalize
        self.eval_batch_size = eval_batch_size
        self.bn_batch_size = bn_batch_size
        self.re_estimate_bn = worker_model is None and any(
            isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats
            for m in center_model.modules())
        self.delay = float(os.environ.get(EVAL_DELAY_VARIABLE) or 0.0)
        device = next(center_model.parameters()).device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scaledl-eval")
        self.pending: deque[tuple[Snapshot, Future]] = deque()
        self.evaluated_state: dict[str, torch.Tensor] = {}   # of the latest evaluation collected
        self.stalls, self.stall_s, self.count = 0, 0.0, 0

    def submit(self, snapshot: Snapshot) -> list[Evaluation]:
        """Copy the center now and queue its evaluation; returns evaluations that had to be waited for."""
        state = {name: t.detach().clone() for name, t in self.center_model.state_dict().items()}
        if self.worker_buffers is not None:
            for name, buffer in self.worker_buffers.items():
                state[name] = buffer.detach().clone()
        ready = None
        if self.stream is not None:
            ready = torch.cuda.Event()
            ready.record()                                  # the copies above, on the training stream
        waited = []
        if len(self.pending) >= MAX_PENDING:
            t0 = time.perf_counter()
            waited.append(self._collect_oldest())
            self.stalls += 1
            self.stall_s += time.perf_counter() - t0
        self.pending.append((snapshot, self.pool.submit(self._evaluate, state, ready)))
        return waited

    def ready(self) -> list[Evaluation]:
        """The evaluations finished so far, in snapshot order (never waits)."""
        done = []
        while self.pending and self.pending[0][1].done():
            done.append(self._collect_oldest())
        return done

    def drain(self) -> list[Evaluation]:
        """Every evaluation still pending (waits for them)."""
        done = []
        while self.pending:
            done.append(self._collect_oldest())
        return done

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def report(self) -> dict:
        return {"evaluations": self.count, "max_pending": MAX_PENDING, "stalls": self.stalls,
                "stall_s": self.stall_s, "bn_re_estimated": self.re_estimate_bn,
                "delay_s": self.delay or None}

    # ---- helper thread
    def _collect_oldest(self) -> Evaluation:
        snapshot, future = self.pending.popleft()
        test_loss, accuracy, state = future.result()
        self.evaluated_state = state
        self.count += 1
        return Evaluation(snapshot, test_loss, accuracy)

    def _evaluate(self, state: dict[str, torch.Tensor], ready) -> tuple[float, float, dict]:
        stream = torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()
        with stream, torch.no_grad():
            if ready is not None:
                self.stream.wait_event(ready)
            self.model.load_state_dict(state)
            if self.re_estimate_bn:
                update_bn(self._train_batches(), self.model)
            self.model.eval()
            loss_sum, correct, count = 0.0, 0, 0
            for images, labels in iter_split(self.data_path, "test", self.eval_batch_size):
                x, y = self.normalize(images, labels)
                logits = self.model(x)
                loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
                correct += (logits.argmax(1) == y).sum().item()
                count += len(y)
            evaluated = {name: t.detach().clone() for name, t in self.model.state_dict().items()}
        if self.delay:
            time.sleep(self.delay)
        return loss_sum / count, correct / count, evaluated

    def _train_batches(self):
        batches = iter_split(self.data_path, "train", self.bn_batch_size, in_memory_max_bytes=0)  # read, not kept
        with contextlib.closing(batches):
            for images, labels in itertools.islice(batches, BN_BATCHES):
                yield self.normalize(images, labels)[0]
