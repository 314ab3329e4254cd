"""The experiment grid: every training run a workflow config asks for, with its settings and job shape.

The config's `experiments` are blocks (workflow/schemas/config.schema.yaml,
config/README.md). A block is the product dataset × models × algorithms ×
platforms × workers × seeds, and each element is one training job, named by a
`RunKey` and run in `run_dir(key)`. `expand(config)` lists them all with their
resolved `train` settings: the top-level `train`, then the block's `train:`,
then the per-worker batch of a strong-scaling sweep.

`expand` also checks what the schema cannot: the platforms a block names, its
budget, its worker counts and batch split, whether its algorithms accept its
algorithm-specific settings, whether each run can be laid out on its platform
(scaledl.grid.placement), and that two blocks giving the same run agree on its
settings. A failure is a `GridError` (a ValueError) of one line that names the
block, `experiments[i]`, and says what to change. workflow/rules/common.smk
calls `expand` while Snakemake parses the workflow, so a bad grid fails before
any job runs.

A null `train` value means "not set": the flag is left off the command line and
`scaledl train`'s default applies (`as_flags`).

Plain functions on the validated config (a mapping with the schema's defaults
filled in): no torch, no MPI, no Snakemake, so the workflow can import this
module while it parses.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any, NamedTuple

from scaledl.algorithms import ALGORITHMS, accepting, algorithm_options
from scaledl.config import TrainConfig, defaults
from scaledl.data.hdf5 import DatasetInfo, read_info
from scaledl.errors import DataError
from scaledl.grid import plugins, tune
from scaledl.grid.placement import (
    Placement,
    PlacementError,
    device_of,
    memory,
    place,
    ranks_per_node,
    slurm_extra,
    workers_for_nodes,
)
from scaledl.net.ladder import bound_minutes, parse_size

# Every output of a config goes under its own folder, results/<name>/, so that two configs never
# overwrite each other's runs or tables; logs and benchmarks likewise under logs/<name>/, benchmarks/<name>/.
RESULTS = "results/{name}"
# The train rule's output folder (workflow/rules/train.smk), with the fields of a RunKey: the stage (`runs`, or
# `tune` for the tune stage's trials) and, after the worker count, the run's setting when it has one (swept
# values, a trial, `tuned`), so that a config without sweeps keeps its folders.
RUN_DIR = RESULTS + "/{stage}/{dataset}/{model}/{algorithm}/{platform}/p{workers}{setting}/s{seed}"
RUNS_STAGE = "runs"
DEFAULT_NAME = "default"
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"

# The `resources:` of a placed MPI job, in the names the Slurm executor plugin reads:
# mem_mb -> --mem (per node), mem_mb_per_cpu -> --mem-per-cpu (which the plugin writes instead when set),
# runtime -> -t, tasks -> --ntasks, nodes -> --nodes, cpus_per_task -> --cpus-per-task,
# slurm_partition -> -p, constraint -> -C, slurm_extra appended as is. None leaves a resource out,
# the profile's default-resources included.
RESOURCES = (
    "mem_mb",
    "mem_mb_per_cpu",
    "runtime",
    "tasks",
    "nodes",
    "cpus_per_task",
    "slurm_partition",
    "constraint",
    "slurm_extra",
)

Settings = dict[str, Any]


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


def results_name_of(run_folder: str) -> str | None:
    """The config name of a run folder the workflow wrote (…/results/NAME/runs/… or …/tune/…, as run.json's
    `arguments.out_dir` records it); None for a folder elsewhere (a training run by hand)."""
    stages = "|".join(map(re.escape, (RUNS_STAGE, tune.STAGE)))
    found = re.search(rf"(?:^|/)results/({NAME_PATTERN})/(?:{stages})/", str(run_folder))
    return found.group(1) if found else None


def hardware_of(platform: Mapping) -> str:
    """gpu, knl or cpu: what a platform's ranks compute on, as the claims' `needs` name it (a simulated
    platform's: the device it simulates)."""
    if platform.get("kind") == "simulated":
        return platform["simulates"]
    if device_of(platform) == "cuda":
        return "gpu"
    return "knl" if platform.get("kind") == "knl" else "cpu"


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


# ---- the grid ----------------------------------------------------------------


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


def batch_settings(number: int, block: Mapping, workers: int) -> Settings:
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


def block_settings(config: Mapping, block: Mapping) -> Settings:
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
    check_options(number, block, settings)


# Training images of the datasets whose size the config does not set, before their file is prepared.
TRAIN_IMAGES = {"mnist": 60_000, "cifar10": 50_000}
DIGITS_IMAGES = 1797  # scikit-learn's digits; the test split takes ceil(test_fraction × 1797) of them
PREPARED = "data/hdf5/{dataset}.h5"  # the prepare rule's output, the train rule's input


def prepared_info(dataset: str) -> DatasetInfo | None:
    """The layout of data/hdf5/DATASET.h5 where it exists (None where not); GridError for a file that is not
    in the layout or names another dataset (runs, tables and tuned settings know a dataset by that name)."""
    path = Path(PREPARED.format(dataset=dataset))
    if not path.exists():
        return None
    info = _read_prepared(str(path), path.stat().st_mtime_ns)
    if isinstance(info, str):
        raise GridError(info)
    if info.dataset != dataset:
        raise GridError(
            f"{path} holds dataset {info.dataset!r} (its `dataset` attribute): the file of dataset {dataset} must "
            f"carry its name; prepare it again, or write it with dataset={dataset!r}"
        )
    return info


@functools.lru_cache(maxsize=64)
def _read_prepared(path: str, mtime_ns: int) -> DatasetInfo | str:
    """read_info once per file version (every run of the grid asks); its one-line error as a string."""
    try:
        return read_info(path)
    except DataError as error:
        return str(error)


def train_images(dataset: str, config: Mapping) -> int | None:
    """How many training images `dataset` will have once prepared with the config's settings: computed from
    them (digits, synthetic), else its prepared file's own count where the file exists (any other dataset, a
    plug-in's too), else the published count (mnist, cifar10). None: unknown until its file exists (ImageNet,
    a plug-in's), and the training job checks its shard against the batch itself."""
    settings = config.get("datasets", {}).get(dataset) or {}
    if dataset == "digits":
        return DIGITS_IMAGES - math.ceil(settings.get("test_fraction", 0.2) * DIGITS_IMAGES)
    if dataset == "synthetic":
        return settings.get("train_count", 512)
    info = prepared_info(dataset)
    return info.n_train if info is not None else TRAIN_IMAGES.get(dataset)


def check_shard(number: int, key: RunKey, settings: Mapping, config: Mapping) -> None:
    """Refuse a batch larger than a worker's shard now, not in a job after it was queued."""
    try:
        n = train_images(key.dataset, config)
    except GridError as error:
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


def check_options(number: int, block: Mapping, settings: Mapping) -> None:
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


def expand(config: Mapping) -> dict[RunKey, Settings]:
    """Every run of the grid, in block order, mapped to its resolved `train` settings: the blocks' runs
    (one per swept value), then the tune stage's trials for the blocks marked `tuned`.

    Raises GridError on the first block that cannot run (see the module docstring).
    """
    try:
        return _expand(config)
    except tune.TuneError as error:
        raise GridError(str(error)) from None


def _expand(config: Mapping) -> dict[RunKey, Settings]:
    runs: dict[RunKey, Settings] = {}
    for number, block in enumerate(config["experiments"]):
        if block.get("if_present") and not Path(block["if_present"]).exists():
            continue  # an optional block: its data (a real dataset, say) is not on this machine
        for setting, point in block_points(number, config, block):
            check_block(number, config, block, point)
            for key, settings in block_runs(number, config, block, point, setting):
                if block.get("tuned"):  # the tables' columns: the settings tuned for this run's algorithm
                    settings["sweep"] = ",".join(tune.space_of(key.algorithm, config)) or None
                add_run(runs, number, key, settings, config)
    for number, block in enumerate(config["experiments"]):
        if block.get("tuned") and not (block.get("if_present") and not Path(block["if_present"]).exists()):
            for key, settings in trials_of(number, config, block):
                add_run(runs, number, key, settings, config)
    check_regime_map(config)
    return runs


# The patterns whose numerics the timing cannot change: a regime map reuses their steps to target anywhere.
TIMING_FREE_PATTERNS = ("collectives", "round_robin")


def regime_map_of(config: Mapping) -> dict | None:
    """The config's `regime_map` when it is enabled (the schema fills its defaults), else None."""
    spec = config.get("regime_map") or {}
    return spec if spec.get("enabled") else None


def check_regime_map(config: Mapping) -> None:
    """GridError unless `regime_map` (when given) names a simulated platform and two timing-free algorithms."""
    spec = regime_map_of(config)
    if not spec:
        return
    platform = config["platforms"].get(spec.get("platform") or "")
    if platform is None or platform.get("kind") != "simulated":
        raise GridError(f"regime_map: platform {spec['platform']!r} is not a platform of kind simulated in this config")
    for side in spec["claim"].split(":"):
        if side not in ALGORITHMS:
            raise GridError(f"regime_map: claim {spec['claim']}: {side!r} is not an algorithm")
        if ALGORITHMS[side].pattern not in TIMING_FREE_PATTERNS:
            raise GridError(
                f"regime_map: claim {spec['claim']}: {side}'s numerics depend on the timing (pattern "
                f"{ALGORITHMS[side].pattern}); map a synchronous or round-robin pair"
            )


def block_points(number: int, config: Mapping, block: Mapping) -> list[tuple[str, Settings]]:
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
        setting = tune.scaled_setting(block.get("scale") or {})
        return [(setting, {**common, "setting": setting, "tuned_scale": scale or None})]
    if block.get("scale") or {}:
        raise GridError(
            f"experiments[{number}] sets `scale` but is not tuned: scale multiplies tuned settings; "
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


def block_runs(number: int, config: Mapping, block: Mapping, common: Settings, setting: str):
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
    """(key, settings) of the tune stage's trials for a tuned block: `tune.trials` per algorithm and cell,
    on the validation split, with the trials' own `train` settings and each trial's drawn values."""
    settings = config["tune"]
    trial_train = {name: value for name, value in settings["train"].items() if value is not None}
    cells = {
        key._replace(seed=settings["seed"], setting=""): values
        for key, values in block_runs(number, config, block, block_settings(config, block), "")
    }
    for cell, common in cells.items():
        space = tune.space_of(cell.algorithm, config)
        drawn_rho = {"rho": None} if "beta" in space else {}  # β drawn: ρ follows from it
        for index, drawn in enumerate(tune.draws(cell.algorithm, space, settings["trials"], settings["seed"])):
            key = cell._replace(setting=tune.trial_setting(index), stage=tune.STAGE)
            yield (
                key,
                {
                    **common,
                    **trial_train,
                    **drawn_rho,
                    **drawn,
                    "setting": key.setting,
                    "sweep": ",".join(space) or None,
                    "tuned_scale": None,
                    "validation_fraction": settings["validation_fraction"],
                },
            )


def add_run(runs: dict[RunKey, Settings], number: int, key: RunKey, settings: Settings, config: Mapping) -> None:
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


def settings_of(runs: Mapping[RunKey, Settings], key: RunKey) -> Settings:
    """The resolved `train` settings of a run of the grid."""
    if key not in runs:
        raise GridError(f"the run {run_label(key)} is not a run of the config's experiments; add it there")
    return runs[key]


# ---- placement and resources ---------------------------------------------------


def placement_of(key: RunKey, config: Mapping) -> Placement:
    """Nodes, tasks, CPUs and GPUs of a run (scaledl.grid.placement); PlacementError if it cannot be laid out."""
    return place(
        key.platform,
        config["platforms"][key.platform],
        key.workers,
        needs_master=ALGORITHMS[key.algorithm].needs_master,
    )


# Platform keys that change neither the machines nor where the ranks sit on them (time limit, memory, the
# ranks' memory binding): two platforms equal but for these share one network measurement (a
# strong-scaling alias with a longer time limit, say).
NOT_MACHINE_KEYS = frozenset({"runtime", "mem_mb_per_node", "mem_mb_per_cpu", "numactl"})


def machine_of(platform: Mapping) -> tuple:
    """What a platform's network measurement depends on: its settings but NOT_MACHINE_KEYS, hashable."""
    return tuple(sorted((key, repr(value)) for key, value in platform.items() if key not in NOT_MACHINE_KEYS))


def netbench_groups(runs: Mapping[RunKey, Settings], config: Mapping) -> dict[str, list[str]]:
    """{measured platform: the platforms with runs that share its measurement}, one entry per distinct
    machine (machine_of), each named after its first platform in sorted order."""
    groups: dict[tuple, list[str]] = {}
    for platform in sorted({key.platform for key in runs}):
        groups.setdefault(machine_of(config["platforms"][platform]), []).append(platform)
    return {members[0]: members for members in groups.values()}


def measured_as(platform: str, runs: Mapping[RunKey, Settings], config: Mapping) -> str:
    """The platform whose netbench measurement serves `platform` (itself, or the first of its machine)."""
    for measured, members in netbench_groups(runs, config).items():
        if platform in members:
            return measured
    raise GridError(f"platform {platform!r} has no runs in this config: nothing to measure")


def netbench_members(platform: str, runs: Mapping[RunKey, Settings], config: Mapping) -> list[str]:
    """The platforms whose runs the measurement of `platform` serves; GridError if it has none."""
    groups = netbench_groups(runs, config)
    if platform in groups:
        return groups[platform]
    for measured, members in groups.items():
        if platform in members:
            raise GridError(
                f"platform {platform!r} is measured as {measured!r} (the same machine): "
                f"ask for the netbench and comm_model files of {measured}"
            )
    raise GridError(f"platform {platform!r} has no runs in this config: nothing to measure")


def netbench_placement(platform: str, runs: Mapping[RunKey, Settings], config: Mapping) -> Placement:
    """The network stage's allocation for the measured `platform`: what the α-β model needs, and no more.

    The model (scaledl.net.alphabeta) takes α and β from a pair of ranks on two
    nodes, and γ from one rank: the measurement asks for two nodes (one when no
    run of the machine spans more) of the platform's ranks per node, one core
    per rank (its ranks compute nothing) and no GPU (it times host buffers); a
    local platform gets 2 ranks. A 64-node sweep is measured on 2 nodes, not 64.
    """
    members = netbench_members(platform, runs, config)
    settings = config["platforms"][platform]
    kind = settings.get("kind", "local")
    if kind == "local":
        return Placement(kind, 2, 2, None, 2, 1, 0, "cpu")
    if kind == "simulated":  # two simulated ranks, on two hosts of the platform: one process
        return Placement(kind, 2, 2, None, 1, 1, 0, "cpu")
    spans = max(placement_of(key, config).nodes or 1 for key in runs if key.platform in members)
    per_node = ranks_per_node(settings)
    if spans > 1:
        ranks, nodes = 2 * per_node, 2
    else:
        largest = max(key.workers for key in runs if key.platform in members)
        ranks, nodes = max(2, min(per_node, largest)), 1
    return Placement(kind, ranks, ranks, nodes, math.ceil(ranks / nodes), 1, 0, "cpu")


NETBENCH_MEM_MB_PER_RANK = 512  # the interpreter, numpy and MPI, beside the message buffers


def netbench_resources(placement: Placement, platform: Mapping, netbench: Mapping) -> dict[str, Any]:
    """The RESOURCES of a network measurement: its placement on the platform's partition, nodes and
    `exclusive`, memory for its buffers (about four of the largest message per rank), and a time limit
    from the ladder it runs over a deliberately slow network (scaledl.net.ladder.bound_minutes), not
    the platform's runtime; no early-warning signal (it has nothing to checkpoint)."""
    largest_mb = math.ceil(parse_size(netbench["max_size"]) / 2**20)
    return {
        **job_resources(placement, platform),
        "mem_mb": placement.tasks_per_node * (NETBENCH_MEM_MB_PER_RANK + 4 * largest_mb),
        "mem_mb_per_cpu": None,
        "runtime": bound_minutes(netbench["max_size"], netbench["repeats"], placement.ranks),
        "slurm_extra": slurm_extra(platform, placement, warn=False),
    }


def netbench_threads(placement: Placement, local_cores: int | None) -> int:
    """`threads:` of a network measurement. Run by Snakemake on this machine (local_cores: its --cores)
    a local platform's takes every core, so no training job runs beside it; under a cluster executor
    (local_cores None: there is no --cores, and the job has its own allocation) the cores it occupies."""
    if placement.kind == "local" and local_cores:
        return max(cores_of(placement), local_cores)
    return cores_of(placement)


def cores_of(placement: Placement) -> int:
    """The cores a job occupies (its `threads:`, so `--cores N` caps the ranks running at once locally)."""
    return placement.tasks * placement.cpus_per_task


def job_resources(placement: Placement, platform: Mapping) -> dict[str, Any]:
    """The RESOURCES of a job laid out as `placement` on `platform`, the same for every MPI rule."""
    mem_mb_per_node, mem_mb_per_cpu = memory(platform, placement)
    return {
        "mem_mb": mem_mb_per_node,
        "mem_mb_per_cpu": mem_mb_per_cpu,
        "runtime": platform["runtime"],
        "tasks": placement.tasks,  # MPI ranks: workers, plus one for a dedicated master (a simulation: one)
        # a local platform is one machine: under Slurm, one node
        "nodes": placement.nodes if placement.cluster else 1,
        "cpus_per_task": placement.cpus_per_task,
        "slurm_partition": platform["partition"],
        "constraint": platform["constraint"],
        "slurm_extra": slurm_extra(platform, placement),
    }


# `scaledl train` switches whose default (None) lets the algorithm decide: false is written --no-KEY.
NEGATABLE_SETTINGS = frozenset(f.name for f in fields(TrainConfig) if f.metadata["switch"] and f.default is None)


def train_flags(key: RunKey, runs: Mapping[RunKey, Settings], config: Mapping) -> str:
    """The `scaledl train` flags of a run beyond the wildcards (null settings left off)."""
    return as_flags(train_options(key, runs, config), NEGATABLE_SETTINGS)


def train_options(key: RunKey, runs: Mapping[RunKey, Settings], config: Mapping) -> Settings:
    """Every `scaledl train` setting of a run beyond the wildcards: its `train` settings, device, threads and,
    for a model of the config's plug-ins, the function that builds it."""
    placement = placement_of(key, config)
    own_model = {"model_from": plugins.model_from(config, key.model)}  # a plug-in of the config: its function
    return {**settings_of(runs, key), "device": placement.device, "threads": placement.cpus_per_task, **own_model}


# ---- prepare -------------------------------------------------------------------

# The `prepare` job (workflow/rules/data.smk): one task of `workers` cores (ImageNet's decoding processes,
# one elsewhere), memory per job, and a time limit that grows with the images to decode.
PREPARE_RESOURCES = ("cpus_per_task", "mem_mb", "mem_mb_per_cpu", "runtime")
PREPARE_RUNTIME = 120  # minutes: the small datasets take seconds to minutes
PREPARE_MEM_MB = 4000  # the converter streams blocks of images (bounded memory) ...
PREPARE_MEM_MB_PER_DECODER = 500  # ... and each extra decoding process holds its own block and libraries
IMAGENET_IMAGES = 1_331_167  # ILSVRC-2012: 1,281,167 train + 50,000 val JPEGs
# Decoded, resized and written per second by one process: a pessimistic rate (Pillow's draft mode does
# several times more on a local disk), since a job that hits its time limit loses all its work.
IMAGES_PER_SECOND = 50
PREPARE_OVERHEAD_MIN = 60  # listing and hashing the files, writing the HDF5 file


def prepare_threads(settings: Mapping) -> int:
    """Cores of a dataset's `prepare` job: its decoding processes (`workers`, ImageNet), else one."""
    return settings.get("workers") or 1


def prepare_resources(dataset: str, settings: Mapping) -> dict[str, Any]:
    """cpus_per_task, mem_mb, mem_mb_per_cpu (None: left out, so a profile's per-CPU default cannot
    multiply it by the cores) and runtime of the `prepare` job of `dataset` with its `datasets.<name>`
    settings. cpus_per_task repeats prepare_threads because Snakemake caps a job's threads at --cores,
    which a dry run sets to 1: the resource keeps the printed request the submitted one."""
    decoders = prepare_threads(settings)
    runtime = PREPARE_RUNTIME
    if dataset == "imagenet":
        decoding = math.ceil(IMAGENET_IMAGES / (IMAGES_PER_SECOND * decoders) / 60)
        runtime = max(runtime, PREPARE_OVERHEAD_MIN + decoding)
    return {
        "cpus_per_task": decoders,
        "mem_mb": PREPARE_MEM_MB + PREPARE_MEM_MB_PER_DECODER * (decoders - 1),
        "mem_mb_per_cpu": None,
        "runtime": runtime,
    }


# ---- what the workflow writes --------------------------------------------------


def one_of(values) -> str:
    """A regex matching exactly one of these values, escaped and sorted (so it does not depend on the
    grid's order); with none, one that matches nothing."""
    return "|".join(re.escape(str(value)) for value in sorted({str(value) for value in values})) or "(?!)"


def wildcard_constraints(runs: Mapping[RunKey, Settings]) -> dict[str, str]:
    """The run wildcards' constraints: only names of the grid, so a typo fails instead of matching nothing
    (and names with `_` can never be split the wrong way)."""
    return {
        "dataset": one_of(key.dataset for key in runs),
        "model": one_of(key.model for key in runs),
        "algorithm": one_of(key.algorithm for key in runs),
        "platform": one_of(key.platform for key in runs),
        "workers": r"\d+",
        "seed": r"\d+",
        "stage": one_of(key.stage for key in runs),
        # empty for a run without a setting, else /SETTING (the folder after p{workers})
        "setting": "(?:" + "".join(f"|/{re.escape(s)}" for s in sorted({key.setting for key in runs} - {""})) + ")",
    }


def name_constraint(name: str) -> dict[str, str]:
    """The `{name}` wildcard matches only this config's results namespace."""
    return {"name": re.escape(name)}


def simulated_platforms(runs: Mapping[RunKey, Settings], config: Mapping) -> str:
    """A regex of the grid's platforms of kind simulated (their runs are `scaledl simulate`, one process)."""
    return one_of(key.platform for key in runs if config["platforms"][key.platform].get("kind") == "simulated")


def masterless_algorithms(runs: Mapping[RunKey, Settings]) -> str:
    """A regex of the grid's algorithms without a dedicated master: with one worker, a job of one rank."""
    return one_of(key.algorithm for key in runs if not ALGORITHMS[key.algorithm].needs_master)


def as_flags(values: Mapping[str, Any], negatable: frozenset[str] = frozenset()) -> str:
    """--key value for every non-null value; lists become C,H,W; true is a bare switch, false is left
    off, or `--no-key` for a key in `negatable` (a switch whose default lets the algorithm decide).

    Sorted by key, so the command (which Snakemake compares to decide reruns)
    does not depend on the order keys were written or merged in.
    """
    flags = []
    for key, value in sorted(values.items()):
        flag = f"--{key.replace('_', '-')}"
        if value is False and key in negatable:
            flags.append(f"--no-{key.replace('_', '-')}")
            continue
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
            continue
        if isinstance(value, list):
            value = ",".join(str(item) for item in value)
        flags += [flag, shlex.quote(str(value))]
    return " ".join(flags)
