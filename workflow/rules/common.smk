# Configuration, validation, wildcard constraints and the helpers rules call.
# Logic beyond looking things up belongs in the scaledl package, not here.
# Import nothing that pulls in torch or mpi4py.MPI: importing MPI here would
# initialise MPI inside the Snakemake process.

import itertools
import shlex
from typing import NamedTuple

from snakemake.utils import validate

from scaledl.algorithms import ALGORITHMS
from scaledl.placement import place, slurm_extra, workers_for_nodes

validate(config, schema="../schemas/config.schema.yaml")


class Run(NamedTuple):
    """One training job: a point of the experiment grid."""

    dataset: str
    model: str
    algorithm: str
    platform: str
    workers: int
    seed: int


def worker_counts(number, block, platform, settings):
    """The worker counts P of a block on a platform: `workers`, or `nodes` × ranks per node."""
    if block["nodes"] is not None and block["workers"] is not None:
        raise ValueError(
            f"experiments[{number}] gives both `workers` and `nodes`; keep one "
            "(nodes for node-count sweeps on cluster platforms, workers for rank counts)"
        )
    if block["nodes"] is None:
        return block["workers"] or [2]
    return [workers_for_nodes(platform, settings, nodes) for nodes in block["nodes"]]


def batch_settings(number, block, workers):
    """The per-worker batch of a run: train.batch_size (weak) or global_batch / P (strong)."""
    if block["scaling"] == "weak":
        if block["global_batch"] is not None:
            raise ValueError(
                f"experiments[{number}] sets global_batch but scaling is weak; "
                "set `scaling: strong` or remove global_batch (weak keeps train.batch_size per worker)"
            )
        return {}
    if block["global_batch"] is None:
        raise ValueError(f"experiments[{number}] has scaling strong but no global_batch; set it")
    if block["global_batch"] % workers:
        raise ValueError(
            f"experiments[{number}]: global_batch {block['global_batch']} does not split evenly "
            f"over {workers} workers; pick a global_batch divisible by every P of the sweep"
        )
    return {"batch_size": block["global_batch"] // workers}


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
        common = {**config["train"], **block["train"]}
        if all(common[key] is None for key in ("max_steps", "epochs", "time_budget")):
            raise ValueError(
                f"experiments[{number}] has no budget: set train.max_steps, "
                "train.epochs or train.time_budget (at least one)"
            )
        for model, algorithm, platform, seed in itertools.product(
            block["models"], block["algorithms"], block["platforms"], block["seeds"]
        ):
            platform_settings = config["platforms"][platform]
            for workers in worker_counts(number, block, platform, platform_settings):
                run = Run(block["dataset"], model, algorithm, platform, workers, seed)
                settings = {**common, **batch_settings(number, block, workers)}
                placement_of(run)  # a run that cannot be laid out fails here, before anything runs
                if runs.setdefault(run, settings) != settings:
                    raise ValueError(
                        f"experiments[{number}] repeats the run {run_dir(run)} "
                        "with different `train` settings; make the blocks disjoint "
                        "(a weak and a strong sweep of the same runs need different platform names)"
                    )
    return runs


def placement_of(run):
    """Nodes, tasks, CPUs and GPUs of a run (scaledl.placement)."""
    return place(
        run.platform,
        config["platforms"][run.platform],
        run.workers,
        needs_master=ALGORITHMS[run.algorithm].needs_master,
    )


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


# train_single runs the one-rank runs (one worker, no master): the Slurm plugin
# refuses an MPI job of one task, so they run without a launcher.
SINGLE_RANK_ALGORITHMS = (
    one_of(run.algorithm for run in RUNS if not ALGORITHMS[run.algorithm].needs_master)
    or "(?!)"  # none: match nothing
)


# ---- targets ---------------------------------------------------------------


def final_outputs():
    """What `rule all` asks for; new figures and tables are added here."""
    return [
        "results/tables/summary.csv",
        "results/tables/summary.md",
        "results/tables/scaling.csv",
        "results/tables/scaling.md",
        "results/plots/accuracy_vs_time.png",
        *(f"results/tables/comm_model/{platform}.md" for platform in measured_platforms()),
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


def run_of(wildcards):
    """The Run these wildcards name."""
    return Run(
        wildcards.dataset,
        wildcards.model,
        wildcards.algorithm,
        wildcards.platform,
        int(wildcards.workers),
        int(wildcards.seed),
    )


def settings_of(wildcards):
    """The resolved `train` settings of the run these wildcards name."""
    run = run_of(wildcards)
    if run not in RUNS:
        raise ValueError(
            f"{run_dir(run)} is not a run of the config's experiments; add it there"
        )
    return RUNS[run]


def platform_of(wildcards):
    return config["platforms"][wildcards.platform]


def train_placement(wildcards):
    return placement_of(run_of(wildcards))


def train_flags(wildcards):
    """Hyperparameters and placement as explicit CLI flags (null ones omitted)."""
    placement = train_placement(wildcards)
    return as_flags(
        {
            **settings_of(wildcards),
            "device": placement.device,
            "threads": placement.cpus_per_task,
        }
    )


# Resources: computed from the platform here (scaledl.placement) and nowhere
# else; profiles only pick the launcher, account and default partition. The
# Slurm plugin maps tasks -> --ntasks, nodes -> --nodes, cpus_per_task ->
# --cpus-per-task (it wins over threads), mem_mb_per_cpu -> --mem-per-cpu,
# slurm_partition -> -p, constraint -> -C, runtime -> -t, and appends
# slurm_extra (--ntasks-per-node, --gpus-per-node). A helper returning None
# leaves that resource out (local platforms have no nodes or partition).


def placed_resources(placement_for):
    """The `resources:` of an MPI job laid out by placement_for(wildcards).

    Shared by train, train_single and netbench, so a platform's jobs ask Slurm
    for their allocation in one way. Every job's wildcards name its platform.
    """

    def tasks(wildcards):
        """MPI ranks: workers, plus one for a dedicated master."""
        return placement_for(wildcards).ranks

    def nodes(wildcards):
        return placement_for(wildcards).nodes

    def cpus_per_task(wildcards):
        return placement_for(wildcards).cpus_per_task

    def mem_mb_per_cpu(wildcards):
        return platform_of(wildcards)["mem_mb_per_cpu"]

    def slurm_partition(wildcards):
        return platform_of(wildcards)["partition"]

    def constraint(wildcards):
        return platform_of(wildcards)["constraint"]

    def slurm_extra_flags(wildcards):
        return slurm_extra(platform_of(wildcards), placement_for(wildcards))

    def runtime(wildcards):
        return platform_of(wildcards)["runtime"]

    return {
        "tasks": tasks,
        "nodes": nodes,
        "cpus_per_task": cpus_per_task,
        "mem_mb_per_cpu": mem_mb_per_cpu,
        "runtime": runtime,
        "slurm_partition": slurm_partition,
        "constraint": constraint,
        "slurm_extra": slurm_extra_flags,
    }


def placed_threads(placement_for):
    """`threads:` of a job laid out by placement_for: the cores it occupies, so
    `--cores N` caps concurrent ranks locally."""

    def threads(wildcards):
        placement = placement_for(wildcards)
        return placement.ranks * placement.cpus_per_task

    return threads


# ---- netbench and the communication model ----------------------------------


def measured_platforms():
    """Platforms with runs, when the network stage is enabled."""
    if not config["netbench"]["enabled"]:
        return []
    return sorted({run.platform for run in RUNS})


def netbench_placement(wildcards):
    """netbench's allocation: the platform's largest synchronous run (no master), at least 2 ranks.

    The largest run spans the most nodes, so the inter-node pair is measured
    where one exists; a dedicated master's extra rank would only oversubscribe
    a local machine and inflate its latency.
    """
    platform = wildcards.platform
    workers = max(run.workers for run in RUNS if run.platform == platform)
    return place(platform, config["platforms"][platform], max(2, workers), needs_master=False)


def netbench_threads(wildcards):
    """On a local platform every core of this run, so no training job runs beside the
    measurement (Snakemake caps threads at --cores); on a cluster its allocation's."""
    cores = placed_threads(netbench_placement)(wildcards)
    if netbench_placement(wildcards).kind == "local":
        return max(cores, workflow.cores or 1)
    return cores


def netbench_flags(wildcards):
    settings = config["netbench"]
    return as_flags({"max_size": settings["max_size"], "repeats": settings["repeats"]})


def platform_run_files(wildcards):
    """run.json of every run on the platform these wildcards name."""
    return [f"{run_dir(run)}/run.json" for run in RUNS if run.platform == wildcards.platform]


def comm_model_networks(wildcards):
    return shlex.quote(config["netbench"]["networks"])
