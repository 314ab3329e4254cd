"""The report's reader of a run's results: its run.json and the metrics.csv beside it (never logs).

Every table, figure, claim and plot reads a run through `read_run`, which
parses run.json alone, with its one parser (scaledl.run_record); the fields a
consumer asks for (`Run.get`, `Run.fields`: columns named by their dotted
path in the record, each path one RunRecord declares), the run's key and its
metrics.csv are read when first used, so a table that needs only run.json
never asks for metrics.csv. Every problem is a UserError naming the file and
what to do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from scaledl.errors import UserError
from scaledl.report.identity import settings_of
from scaledl.run_record import RUN_JSON, checked_paths, lookup, read_run_json, run_json_path

# A run's key: what tells one run from another in every table and figure.
RUN_KEY = ["dataset", "model", "algorithm", "platform", "workers", "setting", "seed"]
# What a comparison holds fixed (a claim's default `per`, a figure's panel): the key without algorithm and seed.
SETTING = ("dataset", "model", "platform", "workers")

# Column → its path in run.json (dotted paths reach into nested objects), for every column read as recorded;
# checked against the paths RunRecord declares when this module is imported.
RUN_FIELDS: dict[str, str] = checked_paths(
    {
        "dataset": "data.dataset",
        "model": "model.name",
        "algorithm": "algorithm.key",
        "platform": "platform",
        "workers": "world.workers",
        "setting": "arguments.setting",
        "ranks": "world.size",
        "threads": "world.threads_per_rank",
        "nodes": "world.nodes",
        "seed": "arguments.seed",
        "batch_size": "hyper.batch_size",
        "final_test_accuracy": "final.test_accuracy",
        "target_accuracy": "target_accuracy",
        "time_to_target_s": "time_to_target_s",
        "target_step": "evaluation.target_step",
        "steps_to_target": "steps_to_target",
        "later_target_accuracy": "later_target.accuracy",
        "time_to_later_target_s": "later_target.time_to_target_s",
        "steps_to_later_target": "later_target.steps_to_target",
        "eval_every": "evaluation.every_steps",
        "seconds_per_step": "seconds_per_step",
        "transfer_per_step_s": "time.transfer_per_step_s",
        "wait_per_step_s": "time.wait_per_step_s",
        "comm_share": "comm_share",
        "exposed_share": "exposed_share",
        "staleness_median": "staleness.median",
        "staleness_p90": "staleness.p90",
        "staleness_max": "staleness.max",
        "steps": "stop.steps",
        "epochs": "stop.epochs",
        "wall_s": "stop.wall_s",
        "stop_reason": "stop.reason",
        "commit": "provenance.code.commit",
        "dirty": "provenance.code.dirty",
        "slurm_job_id": "provenance.slurm.job_id",
        "simulated_on": "transport.platform",  # the simulated platform; empty for a run on real hardware
        "clock": "transport.clock",  # a simulated run's clock: simgrid or alphabeta (the clock swap)
    }
)

# Columns a run.json of an older version may lack, and the value they then mean.
FIELD_DEFAULTS = {
    "setting": "", "target_step": None, "steps_to_target": None, "commit": None, "dirty": None,
    "slurm_job_id": None, "simulated_on": "", "clock": "", "later_target_accuracy": None,
    "time_to_later_target_s": None, "steps_to_later_target": None,
    "threads": None, "staleness_median": None, "staleness_p90": None, "staleness_max": None,
}  # fmt: skip

# Files a run writes before its run.json (scaledl.train.outputs); metrics.csv is the one the tables read.
COMPANIONS = ("metrics.csv",)


def metrics_path(path: str | Path) -> Path:
    """`path` itself, or the metrics.csv inside it when it is a run directory."""
    path = Path(path)
    return path / "metrics.csv" if path.is_dir() else path


def read_metrics(path: Path) -> pd.DataFrame:
    """metrics.csv as a frame; UserError naming the file if it is unusable."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such metrics.csv (did the training run finish?)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        # pandas' parser and empty-data errors are ValueErrors
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not a readable metrics.csv ({first_line})") from None


@dataclass(frozen=True)
class Run:
    """One finished run: its run.json (`path`, parsed as `record`) and, on first use, its metrics.csv."""

    path: Path
    record: dict

    def get(self, dotted: str):
        """The value at a dotted path of run.json; UserError if the run.json lacks it."""
        return lookup(self.record, dotted, self.path)

    def fields(self, columns) -> dict:
        """{column: value} of RUN_FIELDS columns, read in the order given."""
        return {column: self.field(column) for column in columns}

    def field(self, column: str):
        """One RUN_FIELDS column (FIELD_DEFAULTS' value where this run.json has none)."""
        if column in FIELD_DEFAULTS:
            try:
                value = self.get(RUN_FIELDS[column])
            except UserError:
                return FIELD_DEFAULTS[column]
            return FIELD_DEFAULTS[column] if value is None else value
        return self.get(RUN_FIELDS[column])

    @cached_property
    def settings(self) -> dict:
        """The settings it ran with, swept or not (scaledl.report.identity): what, with its key less the seed,
        tells its configuration from another."""
        return settings_of(self.record)

    @cached_property
    def key(self) -> dict:
        """The RUN_KEY columns."""
        return self.fields(RUN_KEY)

    @property
    def algorithm(self) -> str:
        return self.key["algorithm"]

    @property
    def setting(self) -> tuple:
        return tuple(self.key[column] for column in SETTING)

    @property
    def folder(self) -> str:
        """The run directory as tables print it (their `run` column)."""
        return self.path.parent.as_posix()

    @cached_property
    def metrics(self) -> pd.DataFrame:
        return read_metrics(self.path.with_name("metrics.csv"))

    def require_metrics(self, columns) -> pd.DataFrame:
        """metrics.csv, refused unless it has every one of `columns`."""
        for column in columns:
            if column not in self.metrics.columns:
                raise UserError(
                    f"{self.path.with_name('metrics.csv')}: metrics.csv has no column {column!r} "
                    "(written by an incompatible version; rerun that training)"
                )
        return self.metrics

    def check_companions(self) -> None:
        """A run.json vouches for the files written before it; without them the directory is not a run."""
        missing = [name for name in COMPANIONS if not (self.path.parent / name).exists()]
        if missing:
            raise UserError(
                f"{self.path}: {' and '.join(missing)} missing beside it, so this run is incomplete; "
                "rerun that training"
            )


def expand_runs(paths) -> list[Path]:
    """Each path as the run.json files it names: a run.json, a run directory, or any folder above runs (a
    results folder: every run.json below it, sorted). UserError for a path that holds none."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir() and not (path / RUN_JSON).exists():
            below = sorted(path.rglob(RUN_JSON))
            if not below:
                raise UserError(
                    f"{path}: no run.json in it or below it (a run directory or a results folder such as "
                    "results/NAME, whose runs are in results/NAME/runs/)"
                )
            found += below
        else:
            found.append(run_json_path(path))
    return found


def read_run(path: str | Path) -> Run:
    """The run at `path` (its run.json or its directory); UserError naming the file if run.json is unusable."""
    path = run_json_path(path)
    return Run(path, read_run_json(path))


def read_runs(paths) -> Iterator[Run]:
    """The runs at `paths`, each once, in the order first given; each read when the caller reaches it, so
    the first problem reported is the first one met."""
    return (read_run(path) for path in dict.fromkeys(str(path) for path in paths))
