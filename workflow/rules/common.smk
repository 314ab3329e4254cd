# Configuration, validation, wildcard constraints and the getters rules call.
# The grid (runs, settings, checks, placement) is scaledl.grid; here we only
# validate the config and look things up. Import nothing that pulls in torch or
# mpi4py.MPI: importing MPI here would initialise MPI inside Snakemake.

import shlex

from snakemake.utils import validate

from scaledl import grid

validate(config, schema="../schemas/config.schema.yaml")

# Every training run, mapped to its `train` settings. A grid that cannot run
# (undefined platform, no budget, a setting an algorithm refuses, a run that
# does not fit its platform, ...) fails here with a grid.GridError naming its block.
RUNS = grid.expand(config)


# Built from the validated grid, so a typo fails at parse time instead of
# matching nothing (and `a_b` names can never be split the wrong way).
wildcard_constraints:
    **grid.wildcard_constraints(RUNS),


# train_single runs the one-rank runs (one worker, no master): see train.smk.
SINGLE_RANK_ALGORITHMS = grid.masterless_algorithms(RUNS)


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
    return [f"{grid.run_dir(run)}/{name}" for run in RUNS]


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


def prepare_flags(wildcards):
    settings = dict(config["datasets"][wildcards.dataset])
    if needs_raw(wildcards.dataset):
        settings["raw"] = raw_dir(wildcards.dataset)
    return grid.as_flags(settings)


# ---- train -----------------------------------------------------------------


def platform_of(wildcards):
    return config["platforms"][wildcards.platform]


def train_placement(wildcards):
    return grid.placement_of(grid.RunKey.parse(wildcards), config)


def train_flags(wildcards):
    """Hyperparameters and placement as explicit CLI flags (null ones omitted)."""
    return grid.train_flags(grid.RunKey.parse(wildcards), RUNS, config)


def mpi_launcher(wildcards, resources):
    """The training command's launcher prefix, nothing for train_single (`mpi` empty).
    A param computed from resources is no rerun trigger: a new launcher reruns nothing."""
    return grid.launcher(resources.mpi, resources.tasks, resources.cpus_per_task)


# Resources: computed from the platform (scaledl.grid.job_resources) and
# nowhere else; profiles only pick the launcher, account and default partition.


def placed_resources(placement_for):
    """The `resources:` of an MPI job laid out by placement_for(wildcards), whose
    wildcards name its platform: the same for train, train_single and netbench."""

    def resource(name):
        def value(wildcards):
            return grid.job_resources(placement_for(wildcards), platform_of(wildcards))[name]

        return value

    return {name: resource(name) for name in grid.RESOURCES}


def placed_threads(placement_for):
    """`threads:` of a job laid out by placement_for: the cores it occupies."""
    def threads(wildcards):
        return grid.cores_of(placement_for(wildcards))

    return threads


# ---- netbench and the communication model ----------------------------------


def measured_platforms():
    """Platforms with runs, when the network stage is enabled."""
    if not config["netbench"]["enabled"]:
        return []
    return sorted({run.platform for run in RUNS})


def netbench_placement(wildcards):
    return grid.netbench_placement(wildcards.platform, RUNS, config)


def netbench_threads(wildcards):
    """On a local platform every core of this run, so no training job runs beside the
    measurement (Snakemake caps threads at --cores); on a cluster its allocation's."""
    cores = placed_threads(netbench_placement)(wildcards)
    if netbench_placement(wildcards).kind == "local":
        return max(cores, workflow.cores or 1)
    return cores


def netbench_flags(wildcards):
    settings = config["netbench"]
    return grid.as_flags({"max_size": settings["max_size"], "repeats": settings["repeats"]})


def platform_run_files(wildcards):
    """run.json of every run on the platform these wildcards name."""
    return [f"{grid.run_dir(run)}/run.json" for run in RUNS if run.platform == wildcards.platform]


def comm_model_networks(wildcards):
    return shlex.quote(config["netbench"]["networks"])
