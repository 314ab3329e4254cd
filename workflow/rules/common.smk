# Configuration, validation, wildcard constraints and the getters rules call.
# The grid (runs, settings, checks, placement) is scaledl.grid.runs; here we only
# validate the config and look things up. Import nothing that pulls in torch or
# mpi4py.MPI: importing MPI here would initialise MPI inside Snakemake.

import os
import re
import shlex

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from scaledl.grid import runs as grid
from scaledl.grid.check import first_problem

# One line per mistake (with "did you mean"), before Snakemake's validation, which also fills the defaults.
CONFIG_PROBLEM = first_problem(config, os.path.join(workflow.current_basedir, "../schemas/config.schema.yaml"))
if CONFIG_PROBLEM:
    raise WorkflowError(CONFIG_PROBLEM)
validate(config, schema="../schemas/config.schema.yaml")

# Every training run, mapped to its `train` settings. A grid that cannot run
# (undefined platform, no budget, a setting an algorithm refuses, a run that
# does not fit its platform, ...) fails here with a grid.GridError naming its block.
RUNS = grid.expand(config)


# This config's results namespace: its outputs go to results/NAME/, its logs to
# logs/NAME/ and benchmarks/NAME/ (`name:` in the config, else the name of the
# last --configfile, else "default"), so two configs never overwrite each other.
NAME = grid.results_name(config, workflow.overwrite_configfiles)
RESULTS = f"results/{NAME}"


# Built from the validated grid, so a typo fails at parse time instead of
# matching nothing (and `a_b` names can never be split the wrong way).
wildcard_constraints:
    **grid.wildcard_constraints(RUNS),
    **grid.name_constraint(NAME),


# train_single runs the one-rank runs (one worker, no master): see train.smk.
SINGLE_RANK_ALGORITHMS = grid.masterless_algorithms(RUNS)


# ---- targets ---------------------------------------------------------------


# scaledl.report.figures.FIGURES, spelt out: importing the figures module here would load matplotlib
# into Snakemake (tests/test_figures.py keeps the two lists equal).
REPORT_FIGURES = ("fig6_1", "fig6_2", "fig6_3", "fig6_4", "fig8", "ladder_breakdown", "scaling", "chip_partition",
                  "averaging")


def final_outputs():
    """What `rule all` asks for; new figures and tables are added here."""
    return [
        f"{RESULTS}/tables/summary.csv",
        f"{RESULTS}/tables/summary.md",
        f"{RESULTS}/tables/scaling.csv",
        f"{RESULTS}/tables/scaling.md",
        f"{RESULTS}/tables/averaging.csv",
        f"{RESULTS}/tables/averaging.md",
        f"{RESULTS}/plots/accuracy_vs_time.png",
        *(f"{RESULTS}/tables/comm_model/{platform}.md" for platform in modelled_platforms()),
        f"{RESULTS}/report/claims.md",
        *(f"{RESULTS}/report/figures/{figure}.png" for figure in REPORT_FIGURES),
        f"{RESULTS}/report/metrics_long.csv",
    ]


def run_files(name):
    """`name` (metrics.csv, run.json, ...) of every run, in grid order."""
    return [f"{grid.run_dir(run, NAME)}/{name}" for run in RUNS]


# ---- prepare ---------------------------------------------------------------


def raw_dir(dataset):
    return config["datasets"][dataset]["raw"] or f"data/raw/{dataset}"


def needs_raw(dataset):
    """Datasets read from a download (digits is embedded, synthetic generated)."""
    return "raw" in config["datasets"][dataset]


def prepare_input(wildcards):
    """The raw download and label files, so missing ones are named before anything runs:
    with a download list, its files (the download rule's outputs), else the raw folder."""
    if not needs_raw(wildcards.dataset):
        return []
    settings = config["datasets"][wildcards.dataset]
    extra = [settings.get(key) for key in ("val_labels", "devkit")]
    raw = download_targets(wildcards.dataset) or [raw_dir(wildcards.dataset)]
    return [*raw, *filter(None, extra)]


def verify_raw(wildcards):
    """The command checking hand-placed downloads against their sha256 before `prepare`
    reads them (Snakemake takes an existing output as done), "" without a download list."""
    files = download_files(wildcards.dataset)
    if not files:
        return ""
    checksums = [f"--sha256 {shlex.quote(name)}={spec['sha256']}" for name, spec in files.items() if spec["sha256"]]
    names = " ".join(shlex.quote(name) for name in files)
    folder = shlex.quote(download_folder(wildcards.dataset))
    return (f"python -m scaledl download {wildcards.dataset} {names} --out-dir {folder} --verify-only "
            f"{' '.join(checksums)} && ")


def prepare_flags(wildcards):
    settings = dict(config["datasets"][wildcards.dataset])
    settings.pop("download", None)  # the download rule's, not prepare's
    if needs_raw(wildcards.dataset):
        settings["raw"] = raw_dir(wildcards.dataset)
    return grid.as_flags(settings)


# ---- download --------------------------------------------------------------


def download_files(dataset):
    """{file name: {urls, sha256}} the download rule fetches for `dataset`; {} for none."""
    return config["datasets"][dataset].get("download") or {}


def download_folder(dataset):
    """The raw folder, normalised so the download rule's outputs and prepare's inputs match."""
    return os.path.normpath(raw_dir(dataset))


def download_targets(dataset):
    return [f"{download_folder(dataset)}/{name}" for name in download_files(dataset)]


def downloads_by_folder():
    """Raw folder → the dataset whose download list fills it; a listed file with neither
    a URL nor a sha256, or two lists filling one folder, stop the workflow here."""
    folders = {}
    for dataset in config["datasets"]:
        for name, spec in download_files(dataset).items():
            if not spec["urls"] and not spec["sha256"]:
                raise WorkflowError(f"datasets.{dataset}.download.{name}: give it urls or a sha256, or leave it out")
        if not download_files(dataset):
            continue
        folder = download_folder(dataset)
        if folder in folders:
            raise WorkflowError(f"datasets {folders[folder]} and {dataset} both download into {folder}: "
                                f"give one of them its own `raw` folder")
        folders[folder] = dataset
    return folders


DOWNLOADS = downloads_by_folder()


def one_of(words):
    """A regex matching exactly one of `words`; one that matches nothing when there are none."""
    return "|".join(re.escape(word) for word in sorted(set(words))) or "(?!)"


def download_wildcard_constraints():
    """The download rule's outputs are the listed files and nothing else."""
    return {
        "rawdir": one_of(DOWNLOADS),
        "filename": one_of(name for dataset in DOWNLOADS.values() for name in download_files(dataset)),
    }


def download_dataset(wildcards):
    return DOWNLOADS[wildcards.rawdir]


def download_sources(wildcards):
    """--url (each mirror, in order) and --sha256 of the one file a download job fetches."""
    name = wildcards.filename
    spec = download_files(download_dataset(wildcards))[name]
    flags = [f"--url {shlex.quote(f'{name}={url}')}" for url in spec["urls"]]
    if spec["sha256"]:
        flags.append(f"--sha256 {shlex.quote(name)}={spec['sha256']}")
    return " ".join(flags)


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


# Resources: computed from the platform (scaledl.grid.runs.job_resources) and
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
    """One platform per distinct machine with runs, when the network stage is enabled: platforms equal
    but for their time limit or memory (a strong-scaling alias) share one measurement, named after
    the first of them (scaledl.grid.runs.netbench_groups); each platform still gets its own comm_model table."""
    if not config["netbench"]["enabled"]:
        return []
    return sorted(grid.netbench_groups(RUNS, config))


def modelled_platforms():
    """Every platform with runs, when the network stage is enabled: each gets its own comm_model table."""
    if not config["netbench"]["enabled"]:
        return []
    return sorted({run.platform for run in RUNS})


def machine_netbench(platform):
    """The netbench file measured on `platform`'s machine (shared by platforms that differ only in
    time limit or memory)."""
    return f"{RESULTS}/netbench/{grid.measured_as(platform, RUNS, config)}.json"


def comm_model_netbench(wildcards):
    return machine_netbench(wildcards.platform)


def figures_netbench(wildcards):
    """--netbench PLATFORM=JSON for every modelled platform: a network belongs to its own platform's runs."""
    return " ".join(f"--netbench {platform}={machine_netbench(platform)}" for platform in modelled_platforms())


def figures_netbench_files(wildcards):
    return sorted({machine_netbench(platform) for platform in modelled_platforms()})


def claims_netbench(wildcards):
    """The α-β model's input for the weak-scaling claim: the network of the first measured platform."""
    return [f"{RESULTS}/netbench/{platform}.json" for platform in measured_platforms()[:1]]


def claims_flags(wildcards):
    """--device-of PLATFORM=DEVICE for every platform with runs (a claim needing a GPU or a KNL is judged
    only on runs that had one), and --netbench when the network was measured."""
    flags = [f"--device-of {platform}={grid.hardware_of(config['platforms'][platform])}"
             for platform in sorted({run.platform for run in RUNS})]
    flags += [f"--netbench {path}" for path in claims_netbench(wildcards)]
    return " ".join(flags)


def netbench_placement(wildcards):
    return grid.netbench_placement(wildcards.platform, RUNS, config)


def netbench_threads(wildcards):
    """Run here, a local platform's measurement takes every --cores, so no training job runs beside
    it; under a cluster executor (`--profile slurm`: no --cores) the cores of its own allocation."""
    local_cores = workflow.cores if workflow.local_exec else None
    return grid.netbench_threads(netbench_placement(wildcards), local_cores)


def netbench_flags(wildcards):
    settings = config["netbench"]
    return grid.as_flags({"max_size": settings["max_size"], "repeats": settings["repeats"]})


def platform_run_files(wildcards):
    """run.json of every run on the platform these wildcards name."""
    return [f"{grid.run_dir(run, NAME)}/run.json" for run in RUNS if run.platform == wildcards.platform]


def comm_model_networks(wildcards):
    return shlex.quote(config["netbench"]["networks"])
