"""A training run's name and place: its key, its folder, log and benchmark (one template), a config's results name.

Every output of a config goes under its own folder, results/NAME/, so that two
configs never overwrite each other's runs or tables; logs and benchmarks
likewise under logs/NAME/ and benchmarks/NAME/. A run's folder below that is
RUN_PATH, spelt here once: the train rules' outputs, log and benchmark
(workflow/rules/train.smk) and every list of run files are built from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

RUNS_STAGE = "runs"
TUNE_STAGE = "tune"  # the tune stage's trials (scaledl.grid.tune)
DEFAULT_NAME = "default"
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"

RESULTS = "results/{name}"
# With the fields of a RunKey: the stage (`runs`, or `tune` for the tune stage's trials) and, after the worker
# count, the run's setting when it has one (swept values, a trial, `tuned`), so that a config without
# sweeps keeps its folders.
RUN_PATH = "{stage}/{dataset}/{model}/{algorithm}/{platform}/p{workers}{setting}/s{seed}"
RUN_DIR = f"{RESULTS}/{RUN_PATH}"
RUN_LOG = f"logs/{{name}}/{RUN_PATH}.log"
RUN_BENCHMARK = f"benchmarks/{{name}}/{RUN_PATH}.tsv"

# A training run's `train` settings, resolved (TrainConfig field names; None: the default).
RunSettings = dict[str, Any]


class GridError(ValueError):
    """An experiment grid that cannot run; the one-line message names the block and says what to change."""


class RunKey(NamedTuple):
    """One training job: a point of the experiment grid (and the wildcards of its rule)."""

    dataset: str
    model: str
    algorithm: str
    platform: str
    workers: int
    seed: int
    setting: str = ""  # swept values (lr0.05-tau8), a tune trial (t03), tuned; "" for none
    stage: str = RUNS_STAGE  # runs, or tune (the tune stage's trials)

    @classmethod
    def parse(cls, fields: Mapping[str, Any]) -> RunKey:
        """The key named by string fields, such as a job's wildcards (whose setting has its leading /)."""
        return cls(
            str(fields["dataset"]),
            str(fields["model"]),
            str(fields["algorithm"]),
            str(fields["platform"]),
            int(fields["workers"]),
            int(fields["seed"]),
            str(fields.get("setting", "")).lstrip("/"),
            str(fields.get("stage", RUNS_STAGE)),
        )

    @property
    def cell(self) -> tuple:
        """What a tuned setting is chosen for: dataset, model, algorithm, platform, workers."""
        return self.dataset, self.model, self.algorithm, self.platform, self.workers


def run_dir(key: RunKey, name: str = "{name}") -> str:
    """The run's folder in the results of config `name` (left as the `{name}` wildcard if not given)."""
    return RUN_DIR.format(name=name, **{**key._asdict(), "setting": f"/{key.setting}" if key.setting else ""})


def run_log(key: RunKey, name: str = "{name}") -> str:
    """The run's training log (the train rule's `log:`), as run_dir names its folder."""
    return RUN_LOG.format(name=name, **{**key._asdict(), "setting": f"/{key.setting}" if key.setting else ""})


def run_label(key: RunKey) -> str:
    """dataset/model/algorithm/platform/pP[/SETTING]/sS: a run as messages name it (its folder under its stage)."""
    setting = f"/{key.setting}" if key.setting else ""
    stage = "" if key.stage == RUNS_STAGE else f"{key.stage}: "
    return f"{stage}{key.dataset}/{key.model}/{key.algorithm}/{key.platform}/p{key.workers}{setting}/s{key.seed}"


def results_name(config: Mapping, configfiles=()) -> str:
    """The config's results namespace: its `name`, else the file name (stem) of the last `--configfile`
    given on the command line, else "default" (config/config.yaml alone)."""
    name = config.get("name")
    if not name and configfiles:
        name = Path(str(list(configfiles)[-1])).stem
    name = name or DEFAULT_NAME
    if not re.fullmatch(NAME_PATTERN, name):
        raise GridError(
            f"name {name!r}: a results folder name takes letters, digits, '_', '.' and '-' only; "
            "set `name:` in the config"
        )
    return name


def results_name_of(run_folder: str) -> str | None:
    """The config name of a run folder the workflow wrote (…/results/NAME/runs/… or …/tune/…, as run.json's
    `arguments.out_dir` records it); None for a folder elsewhere (a training run by hand)."""
    stages = "|".join(map(re.escape, (RUNS_STAGE, TUNE_STAGE)))
    found = re.search(rf"(?:^|/)results/({NAME_PATTERN})/(?:{stages})/", str(run_folder))
    return found.group(1) if found else None


def one_of(values: Iterable) -> str:
    """A regex matching exactly one of these values, escaped and sorted (so it does not depend on the
    grid's order); with none, one that matches nothing."""
    return "|".join(re.escape(str(value)) for value in sorted({str(value) for value in values})) or "(?!)"
