# Validation, names, wildcard constraints and the getters the rules call, each a line over scaledl.grid (keys,
# runs: the grid, jobs: what each job asks for, rules: patterns, files, options, regime, sensitivity, preflight) and
# scaledl.report.catalogue. Nothing here may import torch or mpi4py.MPI (MPI would start inside Snakemake).

import os
import shlex

from snakemake.logging import logger
from snakemake.utils import validate
from snakemake_interface_executor_plugins.settings import DeploymentMethod

from scaledl.codehash import code_version
from scaledl.grid import calibration, downloads, jobs, launch, plugins, preflight, regime, sensitivity, tune
from scaledl.grid import rules as grid_rules  # Snakemake's own `rules` stays as it is
from scaledl.grid import runs as grid
from scaledl.grid.check import first_problem
from scaledl.grid.keys import RUN_BENCHMARK, RUN_DIR, RUN_LOG, GridError, RunKey, one_of, results_name, run_dir, run_log
from scaledl.report.catalogue import CATALOGUE, FIGURE_NAMES, TABLE_NAMES

# One line per mistake (with "did you mean"), naming the config file(s) given, before Snakemake's
# validation, which also fills the defaults.
CONFIG_FILES = preflight.config_files(workflow)
if problem := first_problem(config, os.path.join(workflow.current_basedir, "../schemas/config.schema.yaml")):
    preflight.stop(problem, CONFIG_FILES, logger)
validate(config, schema="../schemas/config.schema.yaml")

# Every run with its `train` settings, every download folder with its dataset, and the results name (`name:`,
# else the last --configfile's, else "default": results/NAME/, logs/NAME/, benchmarks/NAME/). A grid, download
# list or platform that cannot work stops here, in one line naming its block, dataset or platform.
try:
    RUNS = grid.expand(config)
    DOWNLOADS = downloads.downloads_by_folder(config)
    preflight.check_slurm_extra(config["platforms"])
    NAME = results_name(config, workflow.overwrite_configfiles)
except GridError as error:
    preflight.stop(str(error), CONFIG_FILES, logger)
RESULTS = f"results/{NAME}"
NETBENCH = grid_rules.NetbenchPlan(RUNS, config, RESULTS)  # which machines are measured, which modelled
TRIAL_FILES = tune.trial_files(RUNS, NAME, tune.lr_grid(config["tune"]), tune.grid_seeds(config["tune"]))  # round 0
CHOSEN_FILES = [f"{RESULTS}/{tune.CHOSEN}"] if TRIAL_FILES else []  # its choice, if the config tunes
REGIME_RUNS = regime.run_files(RUNS, config, NAME)  # both sides of the regime map's claim, if configured
SENSITIVITY_FILES = sensitivity.result_files(RUNS, config, NAME)  # each sensitivity sweep with runs of both sides
VALIDATE_FILES, VALIDATE_FLAGS = calibration.validation_files(RUNS, config, NAME), calibration.validation_flags(config)
RUN_FILES = grid_rules.run_files(RUNS, NAME, "run.json")  # every run of the blocks (not the trials), in order
METRICS_FILES = grid_rules.run_files(RUNS, NAME, "metrics.csv")


# ---- wildcard constraints --------------------------------------------------
# Built from the validated grid, so a typo fails at parse time instead of
# matching nothing (and `a_b` names can never be split the wrong way).
wildcard_constraints:
    **grid_rules.wildcard_constraints(RUNS),
    **grid_rules.name_constraint(NAME),


# train_single runs the one-rank runs (one worker, no master), train_simulated the runs on a simulated
# platform (one process simulates every rank): see train.smk.
SINGLE_RANK_ALGORITHMS = grid_rules.masterless_algorithms(RUNS)
SIMULATED_PLATFORMS = grid_rules.simulated_platforms(RUNS, config)
# The download rule's outputs are the listed files and nothing else.
DOWNLOAD_CONSTRAINTS = downloads.download_wildcard_constraints(config)
# The prepare rule makes the built-in datasets and the plug-ins with a converter; no rule makes the others'
# files (put in place by hand), so Snakemake names a missing one instead of trying to prepare it.
PREPARED_DATASETS = one_of(run.dataset for run in RUNS if plugins.prepared_here(config, run.dataset))
TABLES = one_of(TABLE_NAMES)  # the tables `scaledl aggregate` builds (scaledl.report.tables)

# The options of the jobs whose command does not depend on their wildcards.
NETBENCH_FLAGS, NETBENCH_LOCAL_FLAGS = grid_rules.netbench_flags(config)  # a simulated platform's, a machine's
CLAIMS_FLAGS = grid_rules.claims_flags(RUNS, config, NETBENCH)
SENSITIVITY_FLAGS = sensitivity.claims_flags(SENSITIVITY_FILES)  # claims shows each sweep beside its verdict
CHOSEN_FLAGS = " ".join(f"--chosen {path}" for path in CHOSEN_FILES)
TUNE_PROTOCOL = shlex.quote(tune.protocol(RUNS, config))  # what the choice's report prints

# ---- software --------------------------------------------------------------
# `--sdm conda`: workflow/envs/scaledl.post-deploy.sh installs this checkout from here into the environment.
os.environ.setdefault("SCALEDL_SOURCE", workflow.basedir)

# `--sdm apptainer`: the image of workflow/envs/scaledl.def (docs/cluster.md) runs every rule; the MPI rules
# start their ranks in it themselves (mpi_launcher: srun is not in the image).
IMAGE = os.environ.get("SCALEDL_IMAGE", os.path.join(workflow.basedir, "scaledl.sif"))


def rank_container(wildcards):
    """`apptainer exec ... IMAGE` for the ranks of an MPI rule under --sdm apptainer, else ""."""
    if DeploymentMethod.APPTAINER not in workflow.deployment_settings.deployment_method:
        return ""
    gpus = jobs.hardware_of(platform_of(wildcards)) == "gpu"
    args = workflow.deployment_settings.apptainer_args or ""
    return launch.container_exec(IMAGE, home=os.getcwd(), gpus=gpus, args=args)


# ---- targets and files -----------------------------------------------------
def final_outputs():
    """The default target's inputs: every table and figure (scaledl.report.catalogue), and the stages on."""
    return [
        *(f"{RESULTS}/tables/{table}.{suffix}" for table in TABLE_NAMES for suffix in ("csv", "md")),
        f"{RESULTS}/plots/accuracy_vs_time.png",
        *(f"{RESULTS}/tables/comm_model/{platform}.md" for platform in NETBENCH.modelled),
        f"{RESULTS}/report/claims.md",
        *(f"{RESULTS}/report/figures/{figure}.png" for figure in FIGURE_NAMES),
        f"{RESULTS}/report/metrics_long.csv",
        *CHOSEN_FILES,
        *([f"{RESULTS}/{tune.CHOSEN_MD}"] if TRIAL_FILES else []),
        *([f"{RESULTS}/report/regime/map.png"] if REGIME_RUNS else []),
        *SENSITIVITY_FILES,
        *VALIDATE_FILES,
    ]


# ---- getters, one line each (a lambda of the job's wildcards, evaluated when Snakemake plans the job) ----
# the communication model's runs on one platform; the optional regime map and sensitivity sweeps
platform_run_files = lambda wildcards: grid_rules.run_files(RUNS, NAME, "run.json", platform=wildcards.platform)
regime_data = lambda wildcards: regime.data_file(config)
regime_flags = lambda wildcards: regime.flags(config, NAME)
sensitivity_runs = lambda wildcards: sensitivity.run_files(RUNS, config, NAME, wildcards.pair)
sensitivity_data = lambda wildcards: sensitivity.data_file(config)
sensitivity_flags = lambda wildcards: sensitivity.flags(config, wildcards.pair, NAME)
# download and prepare
download_dataset = lambda wildcards: DOWNLOADS[wildcards.rawdir]
download_sources = lambda w: downloads.source_flags(config, DOWNLOADS[w.rawdir], w.filename)
prepare_input = lambda wildcards: grid_rules.prepare_input(config, wildcards.dataset)
verify_raw = lambda wildcards: grid_rules.verify_raw(config, wildcards.dataset)
prepare_flags = lambda wildcards: grid_rules.prepare_flags(config, wildcards.dataset)
prepare_threads = lambda wildcards: jobs.prepare_threads(config["datasets"].get(wildcards.dataset, {}))
prepare_job = lambda w: jobs.prepare_resources(w.dataset, config["datasets"].get(w.dataset, {}))


# ---- getters: train and tune -----------------------------------------------
def platform_of(wildcards):
    return config["platforms"][wildcards.platform]


def train_placement(wildcards):
    return jobs.placement_of(RunKey.parse(wildcards), config)


def train_threads(wildcards):
    return jobs.cores_of(train_placement(wildcards))


def train_job(wildcards):
    return jobs.train_resources(RunKey.parse(wildcards), RUNS, config)


def train_flags(wildcards):
    return grid_rules.train_flags(RunKey.parse(wildcards), RUNS, config)


def train_priority(wildcards):
    return tune.priority(RunKey.parse(wildcards), RUNS)


simulated_platform_file = lambda wildcards: calibration.platform_file(platform_of(wildcards), NAME)
calibrated_platform = lambda wildcards: calibration.calibration_inputs(platform_of(wildcards), NAME)
calibration_netbench = lambda wildcards: calibration.calibration_netbench(RUNS, config, NAME)
regime_platform = lambda wildcards: calibration.calibration_inputs(config["platforms"][config["regime_map"]["platform"]], NAME)
sensitivity_inputs = lambda wildcards: sensitivity.inputs(config, NAME)
simulation_flags = lambda wildcards: grid_rules.simulation_flags(platform_of(wildcards), NAME, train_placement(wildcards).ranks)


def mpi_launcher(wildcards, resources):
    """The training command's prefix, this try's attempt in it (a param from resources reruns nothing)."""
    image = rank_container(wildcards)
    return grid_rules.rank_launcher(resources, platform_of(wildcards), workflow.attempt, image, os.cpu_count())


def tuned_choice(wildcards):
    """A tuned run's input: the tune stage's choice, which it reads its settings from; none for the others."""
    return [f"{RESULTS}/{tune.CHOSEN}"] if tune.reads_choice(wildcards.setting.lstrip("/")) else []


def tune_round_result(round_number):  # a tune round's result: once it exists, Snakemake re-plans from it
    return checkpoints.tune_round.get(name=NAME, round=round_number).output[0]


def tune_trials(wildcards):  # a round's trials (tune_round), or the last round's (tune_confirm)
    round_number = int(wildcards.round) if "round" in wildcards.keys() else None
    return tune.round_trial_files(RUNS, NAME, config["tune"], round_number, tune_round_result)


def confirmed_trials(wildcards):  # the last round's trials and the confirmation's (tune)
    named = checkpoints.tune_confirm.get(name=NAME).output[0]
    return tune_trials(wildcards) + tune.confirm_trial_files(RUNS, NAME, config["tune"], named)


def tuned_flags(wildcards, input):
    return f"--tuned-from {input.chosen}" if input.chosen else ""


# ---- getters: netbench and the communication model ------------------------
netbench_job = lambda wildcards: jobs.netbench_job(wildcards.platform, RUNS, config)
comm_model_netbench = lambda wildcards: NETBENCH.file_of(wildcards.platform)


def netbench_threads(wildcards):
    """Run here, a local platform's measurement takes every --cores; under a cluster executor its own cores."""
    placement = jobs.netbench_placement(wildcards.platform, RUNS, config)
    return jobs.netbench_threads(placement, workflow.cores if workflow.local_exec else None)


def netbench_launcher(wildcards, resources):
    return launch.launcher(resources.mpi, resources.tasks, resources.cpus_per_task, image=rank_container(wildcards))


# ---- resources: from the platform and the dataset, nowhere else (profiles pick the launcher and account)
TRAIN_RESOURCES = grid_rules.resources_of(train_job, jobs.RESOURCES)
NETBENCH_RESOURCES = grid_rules.resources_of(netbench_job, jobs.RESOURCES)
PREPARE_RESOURCES = grid_rules.resources_of(prepare_job, jobs.PREPARE_RESOURCES)


# Before the first job: under Slurm, node-hours and every job against sinfo's nodes; the logs of unfinished
# trainings kept under a name of their own (Snakemake deletes a job's log before running it again).
onstart:
    preflight.check(workflow, logger)
    preflight.keep_attempt_logs([(run_dir(run, NAME), run_log(run, NAME)) for run in RUNS], logger)


# After Ctrl-C or a failure: say which trainings the same command resumes from their checkpoints.
onerror:
    preflight.say_interrupted([run_dir(run, NAME) for run in RUNS], logger)
