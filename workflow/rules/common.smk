# Validation, wildcard constraints, the getters the rules call, the software
# settings (conda, Apptainer) and the check before the first Slurm submission.
# The logic is plain functions of the config in scaledl.grid (runs: the experiment
# grid; placement; check; downloads) and scaledl.report.catalogue (the figures).
# Import nothing that pulls in torch or mpi4py.MPI: importing MPI here would
# initialise MPI inside Snakemake.

import os
import shlex
import shutil
import subprocess
import sys
from types import SimpleNamespace

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate
from snakemake_interface_executor_plugins.settings import DeploymentMethod

from scaledl.grid import downloads, fit, launch, plugins, tune
from scaledl.grid import runs as grid
from scaledl.grid.check import first_problem
from scaledl.report.catalogue import CATALOGUE, FIGURE_NAMES

# ---- validation ------------------------------------------------------------

# One line per mistake (with "did you mean"), before Snakemake's validation, which also fills the defaults.
CONFIG_PROBLEM = first_problem(config, os.path.join(workflow.current_basedir, "../schemas/config.schema.yaml"))
if CONFIG_PROBLEM:
    raise WorkflowError(CONFIG_PROBLEM)
validate(config, schema="../schemas/config.schema.yaml")

# Every training run, mapped to its `train` settings, and every raw folder a download list fills,
# mapped to its dataset. A grid that cannot run (undefined platform, no budget, a setting an
# algorithm refuses, a run that does not fit its platform, ...) or a download list that cannot
# work stops here, in one line naming its block or dataset.
try:
    RUNS = grid.expand(config)
    DOWNLOADS = downloads.downloads_by_folder(config)
except grid.GridError as error:
    raise WorkflowError(str(error)) from None


def check_slurm_extra():
    """Every platform's slurm_extra through the Slurm executor plugin's own check (validate_slurm_extra),
    while the DAG is built: a flag the plugin writes itself (-p, --qos, --mem, ...) stops the workflow here,
    naming the platform, instead of failing each job at submission."""
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    for name, platform in config["platforms"].items():
        extra = platform["slurm_extra"]
        try:
            validate_slurm_extra(SimpleNamespace(resources=SimpleNamespace(slurm_extra=extra)))
        except WorkflowError as error:
            reason = str(error).split(". ")[0]
            raise WorkflowError(
                f"platform {name!r}: slurm_extra {extra!r}: {reason}; use the platform's own key for it "
                "(partition, runtime, constraint, mem_mb_per_node, ...; a QoS: --slurm-qos in slurm/config.yaml)"
            ) from None


check_slurm_extra()

# This config's results namespace: its outputs go to results/NAME/, its logs to
# logs/NAME/ and benchmarks/NAME/ (`name:` in the config, else the name of the
# last --configfile, else "default"), so two configs never overwrite each other.
NAME = grid.results_name(config, workflow.overwrite_configfiles)
RESULTS = f"results/{NAME}"


# ---- wildcard constraints --------------------------------------------------


# Built from the validated grid, so a typo fails at parse time instead of
# matching nothing (and `a_b` names can never be split the wrong way).
wildcard_constraints:
    **grid.wildcard_constraints(RUNS),
    **grid.name_constraint(NAME),


# ---- software --------------------------------------------------------------

# `snakemake --sdm conda`: workflow/envs/scaledl.post-deploy.sh installs this checkout into the rules'
# environment from here (Snakemake copies the env file elsewhere, so a path in it would not resolve).
os.environ.setdefault("SCALEDL_SOURCE", workflow.basedir)

# `snakemake --sdm apptainer`: the image built from workflow/envs/scaledl.def (docs/cluster.md). The
# Snakefile's `container:` runs every rule in it; the MPI rules start their ranks in it themselves
# (mpi_launcher: srun is not in the image).
IMAGE = os.environ.get("SCALEDL_IMAGE", os.path.join(workflow.basedir, "scaledl.sif"))


def rank_container(wildcards):
    """`apptainer exec ... IMAGE` for the ranks of an MPI rule under --sdm apptainer, else ""."""
    if DeploymentMethod.APPTAINER not in workflow.deployment_settings.deployment_method:
        return ""
    gpus = grid.hardware_of(platform_of(wildcards)) == "gpu"
    args = workflow.deployment_settings.apptainer_args or ""
    return launch.container_exec(IMAGE, home=os.getcwd(), gpus=gpus, args=args)


# train_single runs the one-rank runs (one worker, no master), train_simulated the runs on a simulated
# platform (one process simulates every rank): see train.smk.
SINGLE_RANK_ALGORITHMS = grid.masterless_algorithms(RUNS)
SIMULATED_PLATFORMS = grid.simulated_platforms(RUNS, config)

# The download rule's outputs are the listed files and nothing else.
DOWNLOAD_CONSTRAINTS = downloads.download_wildcard_constraints(config)

# The prepare rule makes the built-in datasets and the plug-ins with a converter; no rule makes the others'
# files (put in place by hand), so Snakemake names a missing one instead of trying to prepare it.
PREPARED_DATASETS = grid.one_of(run.dataset for run in RUNS if plugins.prepared_here(config, run.dataset))


# ---- targets ---------------------------------------------------------------


def final_outputs():
    """What `rule all` asks for; new tables are added here (new figures go in scaledl.report.catalogue)."""
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
        *(f"{RESULTS}/report/figures/{figure}.png" for figure in FIGURE_NAMES),
        f"{RESULTS}/report/metrics_long.csv",
        *([f"{RESULTS}/{tune.CHOSEN}", f"{RESULTS}/{tune.CHOSEN_MD}"] if trial_files() else []),
        *([f"{RESULTS}/report/regime/map.png"] if grid.regime_map_of(config) and regime_runs(None) else []),
    ]


def regime_runs(wildcards):
    """The runs (run.json) of both sides of the regime map's claim on its platform, dataset, model and P:
    the tuned ones where the config tunes them, else those at the shared settings."""
    spec = grid.regime_map_of(config)
    sides = spec["claim"].split(":")
    found = [
        run for run in RUNS
        if run.stage == grid.RUNS_STAGE and run.algorithm in sides and run.platform == spec["platform"]
        and run.dataset == spec["dataset"] and run.model == spec["model"] and run.workers == spec["workers"]
    ]
    setting = "tuned" if any(run.setting == "tuned" for run in found) else ""
    return [f"{grid.run_dir(run, NAME)}/run.json" for run in found if run.setting == setting]


def regime_flags(wildcards):
    spec = grid.regime_map_of(config)
    platform = config["platforms"][spec["platform"]]
    flags = grid.as_flags({
        "platform_file": platform["platform_file"], "claim": spec["claim"], "workers": spec["workers"],
        "model": spec["model"], "bandwidth_factors": spec["bandwidth_factors"],
        "speed_factors": spec["speed_factors"], "steps": spec["steps"],
    })
    return flags  # each side is simulated with its own runs' settings (scaledl.report.regime.read_side)


def run_files(name):
    """`name` (metrics.csv, run.json, ...) of every run of the blocks (not the tune stage's trials), in grid order."""
    return [f"{grid.run_dir(run, NAME)}/{name}" for run in RUNS if run.stage == grid.RUNS_STAGE]


def trial_files():
    """run.json of every trial of the tune stage."""
    return [f"{grid.run_dir(run, NAME)}/run.json" for run in RUNS if run.stage == tune.STAGE]


# ---- download and prepare --------------------------------------------------


def download_dataset(wildcards):
    return DOWNLOADS[wildcards.rawdir]


def download_sources(wildcards):
    """--url (each mirror, in order) and --sha256 of the one file a download job fetches."""
    return downloads.source_flags(config, download_dataset(wildcards), wildcards.filename)


def prepare_input(wildcards):
    """The raw download and label files, so missing ones are named before anything runs:
    with a download list, its files (the download rule's outputs), else the raw folder
    (a plug-in's: its `raw`, if it has one)."""
    if plugins.is_plugin_dataset(config, wildcards.dataset):
        return [raw] if (raw := plugins.raw_of(config, wildcards.dataset)) else []
    if not downloads.needs_raw(config, wildcards.dataset):
        return []
    settings = config["datasets"][wildcards.dataset]
    extra = [settings.get(key) for key in ("val_labels", "devkit")]
    raw = downloads.download_targets(config, wildcards.dataset) or [downloads.raw_dir(config, wildcards.dataset)]
    return [*raw, *filter(None, extra)]


def verify_raw(wildcards):
    """The command checking hand-placed downloads against their sha256 before `prepare`
    reads them (Snakemake takes an existing output as done), "" without a download list."""
    if plugins.is_plugin_dataset(config, wildcards.dataset):
        return ""
    return downloads.verify_command(config, wildcards.dataset)


def prepare_flags(wildcards):
    if plugins.is_plugin_dataset(config, wildcards.dataset):
        return grid.as_flags(plugins.prepare_settings(config, wildcards.dataset))
    settings = dict(config["datasets"][wildcards.dataset])
    settings.pop("download", None)  # the download rule's, not prepare's
    if downloads.needs_raw(config, wildcards.dataset):
        settings["raw"] = downloads.raw_dir(config, wildcards.dataset)
    return grid.as_flags(settings)


# What a prepare job asks for follows from its dataset (scaledl.grid.runs.prepare_resources): ImageNet's
# `workers` decoding processes are its cores, and its time limit grows with the images each decodes.


def prepare_threads(wildcards):
    return grid.prepare_threads(config["datasets"].get(wildcards.dataset, {}))


def prepare_job_resources():
    """The `resources:` of a prepare job, each a function of its dataset."""

    def resource(name):
        def value(wildcards):
            return grid.prepare_resources(wildcards.dataset, config["datasets"].get(wildcards.dataset, {}))[name]

        return value

    return {name: resource(name) for name in grid.PREPARE_RESOURCES}


# ---- train -----------------------------------------------------------------


def platform_of(wildcards):
    return config["platforms"][wildcards.platform]


def train_placement(wildcards):
    return grid.placement_of(grid.RunKey.parse(wildcards), config)


def train_flags(wildcards):
    """Hyperparameters and placement as explicit CLI flags (null ones omitted)."""
    return grid.train_flags(grid.RunKey.parse(wildcards), RUNS, config)


def simulated_platform_file(wildcards):
    """The SimGrid platform of a simulated platform: a shipped name, or a file relative to the working folder."""
    return platform_of(wildcards)["platform_file"]


def simulated_ranks(wildcards):
    """The ranks `scaledl simulate` runs (what mpiexec -n would start: the workers, and a master if any)."""
    return train_placement(wildcards).ranks


def mpi_launcher(wildcards, resources):
    """The training command's prefix (scaledl.grid.launch): its launcher, none for train_single (`mpi`
    empty); with more ranks than this machine's cores on a local platform, MPICH's yield mode; the
    platform's numactl; the image under --sdm apptainer; and on a retry its attempt (workflow.attempt:
    the Slurm job step runs with the retry's --attempt), so that a run refused with a setting to fix
    stops at once. A param computed from resources is no rerun trigger: a new launcher reruns nothing."""
    platform = platform_of(wildcards)
    oversubscribed = platform["kind"] == "local" and resources.tasks > (os.cpu_count() or 1)
    return launch.launcher(
        resources.mpi,
        resources.tasks,
        resources.cpus_per_task,
        oversubscribed=oversubscribed,
        attempt=workflow.attempt,
        numactl=platform["numactl"],
        image=rank_container(wildcards),
    )


def netbench_launcher(wildcards, resources):
    """The network measurement's prefix: the training jobs' launcher and image, one core per rank."""
    return launch.launcher(resources.mpi, resources.tasks, resources.cpus_per_task, image=rank_container(wildcards))


def tuned_choice(wildcards):
    """A tuned run's input: the tune stage's choice, which it reads its settings from; none for the others."""
    return [f"{RESULTS}/{tune.CHOSEN}"] if wildcards.setting.lstrip("/").startswith(tune.TUNED) else []


def tuned_flags(wildcards, input):
    return f"--tuned-from {input.chosen}" if input.chosen else ""


def tune_protocol(wildcards):
    """What the choice's report prints: the search spaces, the trials per algorithm, their budget and target."""
    return shlex.quote(tune.protocol(RUNS, config))


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
    """The α-β model's input for the weak-scaling claim: each platform's network (a simulated platform's is
    measured on the simulation)."""
    return sorted({machine_netbench(platform) for platform in modelled_platforms()})


def claims_flags(wildcards):
    """--device-of PLATFORM=DEVICE for every platform with runs (a claim needing a GPU or a KNL is judged
    only on runs that had one: a simulated platform's is the device it simulates), and each platform's
    --netbench PLATFORM=JSON when the network stage ran."""
    flags = [f"--device-of {platform}={grid.hardware_of(config['platforms'][platform])}"
             for platform in sorted({run.platform for run in RUNS})]
    flags += [f"--netbench {platform}={machine_netbench(platform)}" for platform in modelled_platforms()]
    return " ".join(flags)


def netbench_placement(wildcards):
    return grid.netbench_placement(wildcards.platform, RUNS, config)


def netbench_job_resources():
    """The `resources:` of a netbench job: its own placement, memory and time limit
    (scaledl.grid.runs.netbench_resources), not the training jobs'."""

    def resource(name):
        def value(wildcards):
            placement = netbench_placement(wildcards)
            return grid.netbench_resources(placement, platform_of(wildcards), config["netbench"])[name]

        return value

    return {name: resource(name) for name in grid.RESOURCES}


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
    return [f"{grid.run_dir(run, NAME)}/run.json" for run in RUNS
            if run.platform == wildcards.platform and run.stage == grid.RUNS_STAGE]


def comm_model_networks(wildcards):
    return shlex.quote(config["netbench"]["networks"])


# ---- before the first Slurm submission ---------------------------------------


def slurm_preflight():
    """Under the Slurm executor, once the DAG is built and before anything is submitted: one line sums the
    node-hours and GPU-hours the jobs about to be submitted ask for (`scaledl cost` breaks a config down),
    then each is checked against the nodes of its partition (`sinfo`, scaledl.grid.fit), and one that no
    node can run (CPUs, memory, GPUs per node, features, node count, time limit) stops the workflow in one
    line. Without sinfo the check is skipped, saying so once. Job steps run with --no-hooks: never there."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm" or workflow.remote_exec:
        return
    jobs = [job for job in workflow.dag.needrun_jobs() if not job.is_local]
    requests = [(job, fit.request_of(job.resources, job.threads)) for job in jobs]
    node_hours = sum(r.nodes * (r.minutes or 0) / 60 for _, r in requests)
    gpu_hours = sum(r.nodes * r.gpus_per_node * (r.minutes or 0) / 60 for _, r in requests)
    logger.info(
        f"scaledl: {len(jobs)} Slurm job(s) ask for up to {node_hours:.1f} node-hours and {gpu_hours:.1f} "
        "GPU-hours, each for its full time limit (scaledl cost --configfile ... breaks a config down)"
    )
    partitions = sinfo_partitions()
    if partitions is None:
        return
    refused = []
    for job, request in requests:
        wildcards = ", ".join(f"{k}={v}" for k, v in job.wildcards_dict.items())
        line = fit.refusal(f"rule {job.rule.name} ({wildcards})", request, partitions)
        if line:
            refused.append(line)
    if refused:
        more = f" ({len(refused) - 1} more job(s) do not fit either)" if len(refused) > 1 else ""
        logger.error(
            f"scaledl: {refused[0]}{more}; nothing was submitted: change the platform in the config "
            "(or its partition) and run again"
        )
        sys.exit(1)


def sinfo_partitions():
    """The partitions and nodes sinfo lists (scaledl.grid.fit.parse_sinfo), or None, said once, without them."""
    if shutil.which(fit.SINFO_COMMAND[0]) is None:
        logger.warning("scaledl: no sinfo here: the jobs' requests were not checked against the partitions' nodes")
        return None
    try:
        listing = subprocess.run(fit.SINFO_COMMAND, capture_output=True, text=True, timeout=60)
        if listing.returncode:
            raise fit.SinfoError((listing.stderr.strip() or f"exit status {listing.returncode}").splitlines()[0])
        return fit.parse_sinfo(listing.stdout)
    except (fit.SinfoError, OSError, subprocess.TimeoutExpired) as error:
        logger.warning(f"scaledl: sinfo failed ({error}): the jobs' requests were not checked against the nodes")
        return None


onstart:
    slurm_preflight()
