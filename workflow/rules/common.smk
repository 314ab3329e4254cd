# Configuration, validation, wildcard constraints and the helpers rules call.
# Logic beyond looking things up belongs in the scaledl package, not here.
# Import nothing that pulls in torch or mpi4py.MPI: importing MPI here would
# initialise MPI inside the Snakemake process.

import itertools
import shlex
from typing import NamedTuple

from snakemake.utils import validate

from scaledl.algorithms import tasks_for

validate(config, schema="../schemas/config.schema.yaml")


class Run(NamedTuple):
    """One training job: a point of the experiment grid."""

    dataset: str
    model: str
    algorithm: str
    platform: str
    workers: int
    seed: int


def expand_experiments(config):
    """Every run of the grid, mapped to its resolved training settings."""
    runs = {}
    for number, block in enumerate(config["experiments"]):
        for name in block["platforms"]:
            if name not in config["platforms"]:
                raise ValueError(
                    f"experiments[{number}] uses platform {name!r}, which is not "
                    f"defined under `platforms` (defined: {', '.join(config['platforms'])})"
                )
        settings = {**config["train"], **block["train"]}
        if all(settings[key] is None for key in ("max_steps", "epochs", "time_budget")):
            raise ValueError(
                f"experiments[{number}] has no budget: set train.max_steps, "
                "train.epochs or train.time_budget (at least one)"
            )
        axes = ("models", "algorithms", "platforms", "workers", "seeds")
        for point in itertools.product(*(block[axis] for axis in axes)):
            run = Run(block["dataset"], *point)
            if runs.setdefault(run, settings) != settings:
                raise ValueError(
                    f"experiments[{number}] repeats the run {run_dir(run)} "
                    "with different `train` settings; make the blocks disjoint"
                )
    return runs


# The train rule's output folder, with the wildcards of a Run.
RUN_DIR = "results/runs/{dataset}/{model}/{algorithm}/{platform}/p{workers}/s{seed}"


def run_dir(run):
    return RUN_DIR.format(**run._asdict())


RUNS = expand_experiments(config)


def one_of(values):
    return "|".join(sorted({str(value) for value in values}))


# Built from the validated grid, so a typo fails at parse time instead of
# matching nothing (and `a_b` names can never be split the wrong way).
wildcard_constraints:
    dataset=one_of(run.dataset for run in RUNS),
    model=one_of(run.model for run in RUNS),
    algorithm=one_of(run.algorithm for run in RUNS),
    platform=one_of(run.platform for run in RUNS),
    workers=r"\d+",
    seed=r"\d+",


# ---- targets ---------------------------------------------------------------


def final_outputs():
    """What `rule all` asks for; new figures and tables are added here."""
    return [
        "results/tables/summary.csv",
        "results/tables/summary.md",
        "results/plots/accuracy_vs_time.png",
    ]


def run_files(name):
    """`name` (metrics.csv, run.json, ...) of every run, in grid order."""
    return [f"{run_dir(run)}/{name}" for run in RUNS]


# ---- prepare ---------------------------------------------------------------


def raw_dir(dataset):
    return config["datasets"][dataset]["raw"] or f"data/raw/{dataset}"


def needs_raw(dataset):
    """Datasets read from a download (digits is embedded, synthetic generated)."""
    return "raw" in config["datasets"][dataset]


def prepare_input(wildcards):
    """The raw download and label files, so missing ones are named before anything runs."""
    if not needs_raw(wildcards.dataset):
        return []
    settings = config["datasets"][wildcards.dataset]
    extra = [settings.get(key) for key in ("val_labels", "devkit")]
    return [raw_dir(wildcards.dataset), *filter(None, extra)]


def as_flags(values):
    """--key value for every non-null value; lists become C,H,W; true is a bare switch.

    Sorted by key, so the command (which Snakemake compares to decide reruns)
    does not depend on the order keys were written or merged in.
    """
    flags = []
    for key, value in sorted(values.items()):
        flag = f"--{key.replace('_', '-')}"
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
            continue
        if isinstance(value, list):
            value = ",".join(str(item) for item in value)
        flags += [flag, shlex.quote(str(value))]
    return " ".join(flags)


def prepare_flags(wildcards):
    settings = dict(config["datasets"][wildcards.dataset])
    if needs_raw(wildcards.dataset):
        settings["raw"] = raw_dir(wildcards.dataset)
    return as_flags(settings)


# ---- train -----------------------------------------------------------------


def settings_of(wildcards):
    """The resolved `train` settings of the run these wildcards name."""
    run = Run(
        wildcards.dataset,
        wildcards.model,
        wildcards.algorithm,
        wildcards.platform,
        int(wildcards.workers),
        int(wildcards.seed),
    )
    if run not in RUNS:
        raise ValueError(
            f"{run_dir(run)} is not a run of the config's experiments; add it there"
        )
    return RUNS[run]


def platform_of(wildcards):
    return config["platforms"][wildcards.platform]


def train_flags(wildcards):
    """Hyperparameters and placement as explicit CLI flags (null ones omitted)."""
    platform = platform_of(wildcards)
    return as_flags(
        {
            **settings_of(wildcards),
            "device": platform["device"],
            "threads": platform["threads"],
        }
    )


def train_tasks(wildcards):
    """MPI ranks: workers, plus one for a dedicated master."""
    return tasks_for(wildcards.algorithm, int(wildcards.workers))


def train_threads(wildcards):
    """Cores the job occupies, so `--cores N` caps concurrent ranks locally."""
    return train_tasks(wildcards) * platform_of(wildcards)["threads"]


# Cluster resources are derived from the platform here and nowhere else; the
# Slurm plugin reads cpus_per_task (it wins over threads) and runtime. Node
# counts, GPUs and partitions of cluster platforms join these helpers.


def train_cpus_per_task(wildcards):
    return platform_of(wildcards)["threads"]


def train_runtime(wildcards):
    return platform_of(wildcards)["runtime"]
