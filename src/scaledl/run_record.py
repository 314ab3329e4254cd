"""run.json, declared once: what a finished run records, how it is written, and the one parser of it.

The training run fills a `RunRecord` (scaledl.train.results) and writes it
with `write_run_json`; everything that reads a run (scaledl.report.runs, and
through it every table, figure and claim) parses it with `read_run_json`.
No other code opens run.json, so the file's shape is this module's fields:

- `RunRecord`'s fields are the file's blocks, in the order written;
- a block declared as a dataclass below has exactly its fields as keys, in that
  order, except that a field marked `spread` puts the keys of its own dict in
  its place (the master's seconds per phase at the top of `phases`);
- a block declared as a dict or list is filled by the code named beside it.

A record is parsed into plain dicts and lists, not into these classes: a
run.json written by an older version may lack a block the current one
writes, and its readers decide what that means (report.runs' FIELD_DEFAULTS).
`declared(path)` tells whether a dotted path ("world.workers") is part of
this contract, so a reader's table of paths can be checked against it.
The file is strict JSON: a NaN or an infinity (a diverged run's loss) is
written as null. docs/outputs.md describes every block.
"""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path

from scaledl.atomic import write_text
from scaledl.errors import UserError

RUN_JSON = "run.json"  # the file's name in a run directory

_SPREAD = {"spread": True}  # a dict field whose keys take its place in the block


@dataclass(frozen=True)
class AlgorithmBlock:
    key: str
    paper_name: str
    engine: str  # the module that ran it: easgd, window, averaging, sync_sgd
    rule: str | None  # the window engine's worker rule
    needs_master: bool
    deterministic: bool  # the registry's claim, kept only under this run's conditions
    deterministic_reason: str
    preset: dict  # the switches a preset fixes


@dataclass(frozen=True)
class WorldBlock:
    size: int
    workers: int
    dedicated_master: bool
    ranks_per_node: int
    nodes: int
    hosts: list[str]
    threads_per_rank: int


@dataclass(frozen=True)
class ModelBlock:
    name: str
    source: str  # "scaledl", or the plug-in's module:function
    parameters: int
    tensors: int  # parameter tensors: the messages of a per-layer exchange
    bytes: int


@dataclass(frozen=True)
class DataBlock:
    path: str
    dataset: str
    classes: int
    n_train: int
    validation_rows: int | None
    n_test: int
    image_shape: list[int]
    source_sha256: str | None
    identity: str | None  # what a checkpoint is tied to (scaledl.data.hdf5.identity)


OUTPACED = "outpaced"  # a tune trial stopped once it could no longer be its cell's best or runner-up


@dataclass(frozen=True)
class StopBlock:
    reason: str  # a budget's name, "target_accuracy", "diverged", "interrupted" or OUTPACED
    steps: int
    epochs: float
    wall_s: float
    train_s: float
    nonfinite_loss_step: int | None


@dataclass(frozen=True)
class PhasesBlock:
    """The master rank's seconds per phase at top level; every rank's, and the workers' mean, below."""

    master: dict = field(metadata=_SPREAD)  # scaledl.comm.timing.PhaseTimer.breakdown's seconds
    workers_mean: dict
    per_rank: list[dict]


@dataclass(frozen=True)
class TimeBlock:
    """The workers' steady state (docs/time.md, scaledl.comm.timing.STEADY_KEYS after the warm-up)."""

    warmup_steps: int
    seconds_per_step: float | None
    transfer_per_step_s: float | None
    wait_per_step_s: float | None
    compute_per_step_s: float | None
    comm_share: float | None
    exposed_share: float | None


@dataclass(frozen=True)
class FinalBlock:
    test_accuracy: float | None
    test_loss: float | None


@dataclass(frozen=True)
class EvaluationBlock:
    """The schedule, the step the target was reached at, and what the evaluator reports of itself
    (scaledl.train.evaluation.CenterEvaluator.report)."""

    every_steps: int
    target_step: int | None
    evaluations: int
    seconds: float
    threads: int
    where: str
    bn_re_estimated: bool
    split: str
    delay_s: float | None


@dataclass(frozen=True)
class CheckpointsBlock:
    every_steps: int | None
    interval_s: float | None
    written: list
    resumes: list[dict]  # every resume of the run, each with the code of the attempt that wrote its checkpoint
    kept: bool
    code_versions: list[str]  # every attempt's, in order
    across_versions: bool


@dataclass(frozen=True)
class RunRecord:
    scaledl_version: str
    arguments: dict  # every TrainConfig field as run (paths as strings)
    platform: str
    transport: dict  # scaledl.comm.transport's describe(): a simulated run names its platform
    algorithm: AlgorithmBlock
    hyper: dict  # scaledl.algorithms.settings.Settings.record(): the values this algorithm uses
    codesign: dict  # the same
    replica_memory: dict | None  # scaledl.train.replica_memory (chip partitioning)
    world: WorldBlock
    devices: list[str]
    model: ModelBlock
    data: DataBlock
    stop: StopBlock
    phases: PhasesBlock
    time: TimeBlock
    seconds_per_step: float | None  # time's, repeated at top level
    comm_share: float | None
    exposed_share: float | None
    final: FinalBlock
    target_accuracy: float | None
    time_to_target_s: float | None  # the training clock at which the target was crossed (interpolated)
    steps_to_target: float | None  # the step at which it was crossed (interpolated; evaluation.target_step evaluated)
    later_target: dict | None  # a later target's accuracy and crossing (time_to_target_s, steps_to_target, target_step)
    evaluation: EvaluationBlock
    algorithm_report: list[dict]  # each rank's engine report (scaledl.algorithms.base.Algorithm.report)
    staleness: dict | None  # scaledl.algorithms.master.staleness_summary of the workers' reports
    checkpoints: CheckpointsBlock
    versions: dict  # scaledl.train.outputs.versions
    provenance: dict  # scaledl.train.provenance.collect
    finished_at: str


# ------------------------------------------------------------------ writing


def as_json(value):
    """`value` as JSON's values: a block as a dict in its fields' order (a spread field's keys in its
    place), tuples as lists, and every NaN or infinity as None."""
    if is_dataclass(value):
        out = {}
        for f in fields(value):
            item = as_json(getattr(value, f.name))
            if f.metadata.get("spread"):
                out.update(item)
            else:
                out[f.name] = item
        return out
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    return value


def write_run_json(path: str | Path, record: RunRecord | dict) -> None:
    """run.json at `path`, atomically, as strict JSON (a non-finite number is written as null)."""
    write_text(path, json.dumps(as_json(record), indent=2, sort_keys=False, allow_nan=False) + "\n")


# ------------------------------------------------------------------ reading


def run_json_path(path: str | Path) -> Path:
    """`path` itself, or the run.json inside it when it is a run directory."""
    path = Path(path)
    return path / RUN_JSON if path.is_dir() else path


def read_run_json(path: str | Path) -> dict:
    """The record of the run at `path` (its run.json, or the run directory holding it), as plain dicts
    and lists; UserError naming the file, and what to do, if it is missing or unusable."""
    path = run_json_path(path)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such {RUN_JSON} (did the training run finish?)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: not a readable {RUN_JSON} ({error}); rerun that training") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a scaledl {RUN_JSON} (top level is not an object)")
    return record


def lookup(record: dict, dotted: str, path: Path):
    """The value at `dotted` in a parsed record; UserError naming the file if it is not there."""
    value = record
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise UserError(
                f"{path}: {RUN_JSON} lacks {dotted!r} (not a scaledl {RUN_JSON}, or written by an incompatible version)"
            )
        value = value[key]
    return value


def checked_paths(paths: dict[str, str]) -> dict[str, str]:
    """`paths` ({name: dotted path}, a reader's table) as given; ValueError naming every path RunRecord does
    not declare, so a reader cannot drift from what the writer fills."""
    undeclared = {name: dotted for name, dotted in paths.items() if not declared(dotted)}
    if undeclared:
        raise ValueError(f"paths RunRecord does not declare: {undeclared}")
    return paths


def declared(dotted: str) -> bool:
    """Whether `dotted` names a place RunRecord declares: a block's field, or anywhere inside a block that
    is an open dict or list (a spread field's keys among them)."""
    block = RunRecord
    for key in dotted.split("."):
        if _is_open(block):
            return True  # inside a dict or list its filler declares
        if not is_dataclass(block):
            return False  # past a number or a string
        hints = typing.get_type_hints(block)
        spread = [f.name for f in fields(block) if f.metadata.get("spread")]
        if key in hints and key not in spread:
            block = hints[key]
        elif spread:
            block = dict
        else:
            return False
    return True


def _is_open(annotation) -> bool:
    """A dict or a list (or either, or None): keys inside it are its filler's."""
    if annotation in (dict, list) or typing.get_origin(annotation) in (dict, list):
        return True
    if isinstance(annotation, types.UnionType):
        return any(_is_open(arg) for arg in typing.get_args(annotation))
    return False
