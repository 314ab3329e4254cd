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
(scaledl.placement), and that two blocks giving the same run agree on its
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

import itertools
from dataclasses import fields
import shlex
from typing import Any, Mapping, NamedTuple

from scaledl.algorithms import ALGORITHMS, accepting, algorithm_options
from scaledl.config import TrainConfig
from scaledl.placement import Placement, PlacementError, place, slurm_extra, workers_for_nodes

# The train rule's output folder (workflow/rules/train.smk), with the fields of a RunKey.
RUN_DIR = "results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}"

# The `resources:` of a placed MPI job, in the names the Slurm executor plugin reads:
# tasks -> --ntasks, nodes -> --nodes, cpus_per_task -> --cpus-per-task,
# mem_mb_per_cpu -> --mem-per-cpu, runtime -> -t, slurm_partition -> -p,
# constraint -> -C, slurm_extra appended as is. None leaves a resource out.
RESOURCES = (
    "tasks", "nodes", "cpus_per_task", "mem_mb_per_cpu", "runtime", "slurm_partition", "constraint", "slurm_extra",
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

    @classmethod
    def parse(cls, fields: Mapping[str, Any]) -> RunKey:
        """The key named by string fields, such as a job's wildcards."""
        return cls(
            str(fields["dataset"]), str(fields["model"]), str(fields["algorithm"]), str(fields["platform"]),
            int(fields["workers"]), int(fields["seed"]),
        )


def run_dir(key: RunKey) -> str:
    return RUN_DIR.format(**key._asdict())


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
    """Every run of the grid, in block order, mapped to its resolved `train` settings.

    Raises GridError on the first block that cannot run (see the module docstring).
    """
    runs: dict[RunKey, Settings] = {}
    for number, block in enumerate(config["experiments"]):
        common = block_settings(config, block)
        check_block(number, config, block, common)
        for model, algorithm, platform, seed in itertools.product(
            block["models"], block["algorithms"], block["platforms"], block["seeds"]
        ):
            platform_settings = config["platforms"][platform]
            try:
                counts = worker_counts(number, block, platform, platform_settings)
            except PlacementError as error:
                raise GridError(f"experiments[{number}]: {error}") from None
            for workers in counts:
                key = RunKey(block["dataset"], model, algorithm, platform, workers, seed)
                settings = {**common, **batch_settings(number, block, workers)}
                try:
                    placement_of(key, config)  # a run that cannot be laid out fails here, before anything runs
                except PlacementError as error:
                    raise GridError(f"experiments[{number}]: {error}") from None
                if runs.setdefault(key, settings) != settings:
                    raise GridError(
                        f"experiments[{number}] repeats the run {run_dir(key)} "
                        "with different `train` settings; make the blocks disjoint "
                        "(a weak and a strong sweep of the same runs need different platform names)"
                    )
    return runs


def settings_of(runs: Mapping[RunKey, Settings], key: RunKey) -> Settings:
    """The resolved `train` settings of a run of the grid."""
    if key not in runs:
        raise GridError(f"{run_dir(key)} is not a run of the config's experiments; add it there")
    return runs[key]


# ---- placement and resources ---------------------------------------------------


def placement_of(key: RunKey, config: Mapping) -> Placement:
    """Nodes, tasks, CPUs and GPUs of a run (scaledl.placement); PlacementError if it cannot be laid out."""
    return place(
        key.platform,
        config["platforms"][key.platform],
        key.workers,
        needs_master=ALGORITHMS[key.algorithm].needs_master,
    )


def netbench_placement(platform: str, runs: Mapping[RunKey, Settings], config: Mapping) -> Placement:
    """The network stage's allocation: the platform's largest synchronous run (no master), at least 2 ranks.

    The largest run spans the most nodes, so the inter-node pair is measured
    where one exists; a dedicated master's extra rank would only oversubscribe
    a local machine and inflate its latency.
    """
    workers = max(key.workers for key in runs if key.platform == platform)
    return place(platform, config["platforms"][platform], max(2, workers), needs_master=False)


def cores_of(placement: Placement) -> int:
    """The cores a job occupies (its `threads:`, so `--cores N` caps the ranks running at once locally)."""
    return placement.ranks * placement.cpus_per_task


def job_resources(placement: Placement, platform: Mapping) -> dict[str, Any]:
    """The RESOURCES of a job laid out as `placement` on `platform`, the same for every MPI rule."""
    return {
        "tasks": placement.ranks,  # MPI ranks: workers, plus one for a dedicated master
        "nodes": placement.nodes,
        "cpus_per_task": placement.cpus_per_task,
        "mem_mb_per_cpu": platform["mem_mb_per_cpu"],
        "runtime": platform["runtime"],
        "slurm_partition": platform["partition"],
        "constraint": platform["constraint"],
        "slurm_extra": slurm_extra(platform, placement),
    }


def launcher(mpi: str, tasks: int, cpus_per_task: int) -> str:
    """The prefix that starts a command as an MPI job of `tasks` ranks, as netbench's rule writes it.

    `mpi` is the launcher (the rule's `mpi` resource: mpiexec, or the profile's
    `srun --mpi=...`); empty, there is none, and MPI starts the command as a
    singleton (a one-rank run: the Slurm plugin refuses an MPI job of one task).
    SRUN_CPUS_PER_TASK gives each rank its cores under srun (srun no longer
    inherits --cpus-per-task, and the plugin's job step drops SLURM_* variables);
    other launchers ignore it.
    """
    if not mpi:
        return ""
    return f"SRUN_CPUS_PER_TASK={cpus_per_task} {mpi} -n {tasks} "


# `scaledl train` switches whose default (None) lets the algorithm decide: false is written --no-KEY.
NEGATABLE_SETTINGS = frozenset(f.name for f in fields(TrainConfig) if f.metadata["switch"] and f.default is None)


def train_flags(key: RunKey, runs: Mapping[RunKey, Settings], config: Mapping) -> str:
    """The `scaledl train` flags of a run beyond the wildcards (null settings left off)."""
    return as_flags(train_options(key, runs, config), NEGATABLE_SETTINGS)


def train_options(key: RunKey, runs: Mapping[RunKey, Settings], config: Mapping) -> Settings:
    """Every `scaledl train` setting of a run beyond the wildcards: its `train` settings, device and threads."""
    placement = placement_of(key, config)
    return {**settings_of(runs, key), "device": placement.device, "threads": placement.cpus_per_task}


# ---- what the workflow writes --------------------------------------------------


def one_of(values) -> str:
    """A regex matching exactly these values (sorted, so it does not depend on the grid's order)."""
    return "|".join(sorted({str(value) for value in values}))


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
    }


def masterless_algorithms(runs: Mapping[RunKey, Settings]) -> str:
    """A regex of the grid's algorithms without a dedicated master: with one worker, a job of one rank."""
    return one_of(key.algorithm for key in runs if not ALGORITHMS[key.algorithm].needs_master) or "(?!)"  # none


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
