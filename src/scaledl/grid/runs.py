"""The experiment grid: every training run a workflow config asks for, with its resolved `train` settings.

The config's `experiments` are blocks (workflow/schemas/config.schema.yaml,
config/README.md). A block is the product dataset × models × algorithms ×
platforms × workers × seeds, and each element is one training job, named by a
`RunKey` (scaledl.grid.keys). `expand(config)` lists them all with their
resolved `train` settings: the top-level `train`, then the block's `train:`,
then the per-worker batch of a strong-scaling sweep; then the tune stage's
trials of the blocks marked `tuned` (scaledl.grid.tune).

`expand` also checks what the schema cannot: the platforms a block names, its
budget, its worker counts and batch split, whether its algorithms accept its
algorithm-specific settings, whether a worker's shard holds a batch
(scaledl.data.datasets), whether each run can be laid out on its platform
(scaledl.grid.jobs), and that two blocks giving the same run agree on its
settings. A failure is a `GridError` (a ValueError) of one line that names the
block, `experiments[i]`, and says what to change. workflow/rules/common.smk
calls `expand` while Snakemake parses the workflow, so a bad grid fails before
any job runs.

A null `train` value means "not set": the flag is left off the command line and
`scaledl train`'s default applies (scaledl.config.to_argv).

Plain functions on the validated config (a mapping with the schema's defaults
filled in): no torch, no MPI, no Snakemake, so the workflow can import this
module while it parses.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from scaledl.algorithms import ALGORITHMS, accepting, algorithm_options
from scaledl.config import TrainConfig, defaults
from scaledl.data import datasets
from scaledl.errors import DataError
from scaledl.grid import regime, sensitivity, tune
from scaledl.grid.jobs import placement_of
from scaledl.grid.keys import TUNE_STAGE, GridError, RunKey, RunSettings, run_label
from scaledl.grid.placement import PlacementError, workers_for_nodes


def worker_counts(number: int, block: Mapping, platform: str, settings: Mapping) -> list[int]:
    """The worker counts P of a block on a platform: `workers`, or `nodes` × ranks per node."""
    if block["nodes"] is not None and block["workers"] is not None:
        raise GridError(
            f"experiments[{number}] gives both `workers` and `nodes`; keep one "
            "(nodes for node-count sweeps on cluster platforms, workers for rank counts)"
        )
    if block["nodes"] is None:
        return list(block["workers"] or [2])
    return [workers_for_nodes(platform, settings, nodes) for nodes in block["nodes"]]


def batch_settings(number: int, block: Mapping, workers: int) -> RunSettings:
    """The per-worker batch of a run: train.batch_size (weak, nothing to add) or global_batch / P (strong)."""
    if block["scaling"] == "weak":
        if block["global_batch"] is not None:
            raise GridError(
                f"experiments[{number}] sets global_batch but scaling is weak; "
                "set `scaling: strong` or remove global_batch (weak keeps train.batch_size per worker)"
            )
        return {}
    if block["global_batch"] is None:
        raise GridError(f"experiments[{number}] has scaling strong but no global_batch; set it")
    if block["global_batch"] % workers:
        raise GridError(
            f"experiments[{number}]: global_batch {block['global_batch']} does not split evenly "
            f"over {workers} workers; pick a global_batch divisible by every P of the sweep"
        )
    return {"batch_size": block["global_batch"] // workers}


def block_settings(config: Mapping, block: Mapping) -> RunSettings:
    """A block's `train` settings: its own `train:` over the top-level `train`."""
    return {**config["train"], **block["train"]}


def check_block(number: int, config: Mapping, block: Mapping, settings: Mapping) -> None:
    """What the schema cannot check of one block: its names, its budget, the options its algorithms take."""
    for name in block["platforms"]:
        if name not in config["platforms"]:
            raise GridError(
                f"experiments[{number}] uses platform {name!r}, which is not "
                f"defined under `platforms` (defined: {', '.join(config['platforms'])})"
            )
    for algorithm in block["algorithms"]:
        if algorithm not in ALGORITHMS:
            raise GridError(
                f"experiments[{number}] uses algorithm {algorithm!r}, which is not in the registry "
                f"(choose from {', '.join(ALGORITHMS)})"
            )
    if all(settings.get(key) is None for key in ("max_steps", "epochs", "time_budget")):
        raise GridError(
            f"experiments[{number}] has no budget: set train.max_steps, "
            "train.epochs or train.time_budget (at least one)"
        )
    check_block_options(number, block, settings)


def check_shard(number: int, key: RunKey, settings: Mapping, config: Mapping) -> None:
    """Refuse a batch larger than a worker's shard now, not in a job after it was queued."""
    try:
        n = datasets.train_images(key.dataset, config.get("datasets", {}).get(key.dataset) or {})
    except DataError as error:
        raise GridError(f"experiments[{number}]: {error}") from None
    if n is None:
        return
    batch = settings.get("batch_size") or defaults()["batch_size"]
    if settings.get("validation_fraction"):
        n -= math.ceil(settings["validation_fraction"] * n)  # held out of training
    replicated = ALGORITHMS[key.algorithm].preset.get("data") == "replicated"  # every part holds all the data
    shard = n if replicated else n // key.workers
    if batch > shard:
        raise GridError(
            f"experiments[{number}]: {run_label(key)}: batch {batch} is larger than a worker's shard of {shard} "
            f"images ({n} {key.dataset} training images over {key.workers} workers); "
            "use fewer workers or a smaller batch_size"
        )


def check_block_options(number: int, block: Mapping, settings: Mapping) -> None:
    """Refuse an algorithm-specific setting that one of the block's algorithms does not accept.

    `scaledl train` would refuse it in the job; here the whole grid fails while
    it parses, naming the block, instead of one job after the others have run.
    """
    for option in sorted(algorithm_options()):
        value = settings.get(option)
        if value is None:  # not set: the CLI default, which every algorithm accepts
            continue
        for algorithm in block["algorithms"]:
            if option in ALGORITHMS[algorithm].options:
                continue
            where = "its `train:`" if option in block["train"] else "the top-level `train:`"
            raise GridError(
                f"experiments[{number}] sets train.{option} to {value!r} (in {where}), which its algorithm "
                f"{algorithm} does not accept (accepted by {', '.join(accepting(option))}); move it to a block of "
                "its own holding only such algorithms"
            )


def expand(config: Mapping) -> dict[RunKey, RunSettings]:
    """Every run of the grid, in block order, mapped to its resolved `train` settings: the blocks' runs
    (one per swept value), then the tune stage's trials for the blocks marked `tuned`.

    Raises GridError on the first block that cannot run (see the module docstring).
    """
    try:
        return _expand(config)
    except tune.TuneError as error:
        raise GridError(str(error)) from None


def absent(block: Mapping) -> bool:
    """An optional block (`if_present`) whose path is not on this machine."""
    return bool(block.get("if_present")) and not Path(block["if_present"]).exists()


def every_block_skipped(blocks: list[Mapping]) -> str:
    """The one line refusing a config whose every block is skipped: nothing would train."""
    paths = ", ".join(dict.fromkeys(str(block["if_present"]) for block in blocks))
    datasets = " ".join(dict.fromkeys(str(block["dataset"]) for block in blocks))
    return (
        f"every experiment block is skipped: {paths} is missing (`if_present`), so nothing would train; "
        f"run `scaledl download {datasets}` (or put the dataset's files in {paths}) and start again"
    )


def _expand(config: Mapping) -> dict[RunKey, RunSettings]:
    runs: dict[RunKey, RunSettings] = {}
    skipped = [block for block in config["experiments"] if absent(block)]
    if skipped and len(skipped) == len(config["experiments"]):
        raise GridError(every_block_skipped(skipped))
    for number, block in enumerate(config["experiments"]):
        if absent(block):
            continue  # an optional block: its data (a real dataset, say) is not on this machine
        for setting, point in block_points(number, config, block):
            check_block(number, config, block, point)
            for key, settings in block_runs(number, config, block, point, setting):
                if block.get("tuned"):  # the tables' columns: the settings tuned for this run's algorithm
                    settings["sweep"] = ",".join(tune.tuned_names(key.algorithm, config))
                add_run(runs, number, key, settings, config)
    for number, block in enumerate(config["experiments"]):
        if block.get("tuned") and not absent(block):
            for key, settings in trials_of(number, config, block):
                add_run(runs, number, key, settings, config)
    tune.check_aliases(config, runs)
    regime.check(config)
    sensitivity.check(config)
    return runs


def block_points(number: int, config: Mapping, block: Mapping) -> list[tuple[str, RunSettings]]:
    """(setting, train settings) of each point of a block: one, or one per combination of swept values."""
    common = block_settings(config, block)
    swept = [name for name in SWEEP_ORDER if isinstance(block["train"].get(name), list)]
    if block.get("tuned"):
        if swept:
            raise GridError(
                f"experiments[{number}] is tuned and also sweeps {', '.join(swept)}: a tuned block "
                "takes its settings from the tune stage; sweep in a block of its own"
            )
        scale = ",".join(f"{name}={factor:g}" for name, factor in sorted((block.get("scale") or {}).items()))
        pick = block.get("pick") or "best"
        setting = tune.scaled_setting(block.get("scale") or {}, pick)
        picked = {"tuned_pick": pick} if pick != "best" else {}  # the best: the flag's default, left off
        return [(setting, {**common, "setting": setting, "tuned_scale": scale or None, **picked})]
    if block.get("scale") or block.get("pick", "best") != "best":
        raise GridError(
            f"experiments[{number}] sets `scale` or `pick` but is not tuned: scale multiplies tuned settings; "
            "set `tuned: true` or give the values themselves"
        )
    points = []
    for values in itertools.product(*(block["train"][name] for name in swept)):
        point = dict(zip(swept, values))
        setting = sweep_setting(number, point)
        labels = {"setting": setting, "sweep": ",".join(swept)} if swept else {}  # unswept runs: as before
        points.append((setting, {**common, **point, **labels}))
    return points


# A setting's place in a sweep's folder name: TrainConfig's order, so the name never depends on the config's.
SWEEP_ORDER = tuple(f.name for f in fields(TrainConfig))
SETTING_VALUE = re.compile(r"[A-Za-z0-9_.+-]+")


def sweep_setting(number: int, point: Mapping[str, Any]) -> str:
    """The folder of a sweep's point: lr0.05-tau8 (readable and stable); "" for a block without sweeps."""
    parts = []
    for name, value in point.items():
        text = (
            ("on" if value else "off")
            if isinstance(value, bool)
            else f"{value:g}"
            if isinstance(value, float)
            else str(value)
        )
        if not SETTING_VALUE.fullmatch(text):
            raise GridError(
                f"experiments[{number}] sweeps {name} over {value!r}, which cannot name a folder; "
                "sweep plain numbers or names"
            )
        parts.append(f"{name}{text}")
    return "-".join(parts)


def block_runs(number: int, config: Mapping, block: Mapping, common: RunSettings, setting: str):
    """(key, settings) of every run of one point of a block."""
    for model, algorithm, platform, seed in itertools.product(
        block["models"], block["algorithms"], block["platforms"], block["seeds"]
    ):
        platform_settings = config["platforms"][platform]
        try:
            counts = worker_counts(number, block, platform, platform_settings)
        except PlacementError as error:
            raise GridError(f"experiments[{number}]: {error}") from None
        for workers in counts:
            key = RunKey(block["dataset"], model, algorithm, platform, workers, seed, setting)
            yield key, {**common, **batch_settings(number, block, workers)}


def trials_of(number: int, config: Mapping, block: Mapping):
    """(key, settings) of the tune stage's trials for a tuned block: every point of the shared grid (its
    extensions included: a round runs them only if it needs them) and every trial seed, per cell, on the
    validation split, with the trials' own `train` settings. Numerically identical algorithms share one
    cell, tuned as the first of them in the block (on its first platform, where steps decide: scaledl.grid.tune).
    """
    settings = config["tune"]
    tune.check(settings)
    seeds = sorted({seed for algorithm in block["algorithms"] for seed in tune.every_trial_seed(settings, algorithm)})
    overlap = sorted(set(seeds) & set(block["seeds"]))
    if overlap:  # a final seed that the tuning selected for (a point passes only where its seeds converged)
        raise GridError(
            f"experiments[{number}]: the tune stage's seeds {seeds} overlap the block's final "
            f"seeds at {overlap}: a final run must not repeat a trial the choice was selected on; set tune.seed "
            "past the final seeds (the default, 100, is)"
        )
    own = {name: value for name, value in settings["train"].items() if value is not None}
    trial_train = {"eval_every": tune.TRIAL_EVAL_EVERY, **own}
    cells: dict[RunKey, RunSettings] = {}
    taken = tune.aliases(config)  # platforms tuned on another: no trials of their own
    for key, values in block_runs(number, config, block, block_settings(config, block), ""):
        if key.platform not in taken and not any(tune.same_cell(cell, key) for cell in cells):
            cells[key._replace(seed=0, setting="")] = values
    for cell, common in cells.items():
        names = tune.tuned_names(cell.algorithm, config)
        for point in tune.points(cell.algorithm, config, tune.every_lr(settings)):
            for seed in tune.every_trial_seed(settings, cell.algorithm):
                key = cell._replace(setting=tune.trial_setting(point), seed=seed, stage=TUNE_STAGE)
                grid_trial = seed in tune.trial_seeds(settings, cell.algorithm)
                yield (
                    key,
                    {
                        **common,
                        **trial_train,
                        **({"rho": None} if "beta" in point else {}),  # β tuned: ρ follows from it
                        **point,
                        "setting": key.setting,
                        "sweep": ",".join(names),
                        "tuned_scale": None,
                        "later_target_accuracy": None,  # a trial is scored at its own target only
                        "validation_fraction": settings["validation_fraction"],
                        # a grid trial stops once it cannot matter; a confirmation runs its whole budget
                        "tune_seeds": len(tune.trial_seeds(settings)) if grid_trial else None,
                    },
                )


def add_run(runs: dict[RunKey, RunSettings], number: int, key: RunKey, settings: RunSettings, config: Mapping) -> None:
    """One run into the grid, checked: its shard, its placement, and agreement with a block that gave it too."""
    check_shard(number, key, settings, config)
    try:
        placement_of(key, config)  # a run that cannot be laid out fails here, before anything runs
    except PlacementError as error:
        raise GridError(f"experiments[{number}]: {error}") from None
    if runs.setdefault(key, settings) != settings:
        raise GridError(
            f"experiments[{number}] repeats the run {run_label(key)} "
            "with different `train` settings; make the blocks disjoint "
            "(a weak and a strong sweep of the same runs need different platform names)"
        )


def settings_of(runs: Mapping[RunKey, RunSettings], key: RunKey) -> RunSettings:
    """The resolved `train` settings of a run of the grid."""
    if key not in runs:
        raise GridError(f"the run {run_label(key)} is not a run of the config's experiments; add it there")
    return runs[key]
