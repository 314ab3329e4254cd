"""What the rules ask of the grid (scaledl.grid.rules), without Snakemake: the netbench plan, file lists,
options, the MPI prefix and the one resource factory."""

from __future__ import annotations

import shlex
from types import SimpleNamespace

import pytest
from shipped_configs import shipped

from scaledl.config import to_argv
from scaledl.grid import calibration, rules
from scaledl.grid.keys import TUNE_STAGE, GridError, RunKey
from scaledl.grid.runs import expand


@pytest.fixture(scope="module")
def cluster():
    config = shipped("cluster.yaml")
    return config, expand(config)


def test_the_netbench_plan_measures_each_machine_once_and_models_every_platform(cluster):
    config, runs = cluster
    plan = rules.NetbenchPlan(runs, config, "results/cluster")
    assert plan.measured == ["gpu", "knl"]  # the strong-scaling aliases are the same machines
    assert plan.modelled == ["gpu", "gpu_strong", "knl", "knl_strong"]
    assert plan.file_of("gpu_strong") == plan.file_of("gpu") == "results/cluster/netbench/gpu.json"
    assert plan.files() == ["results/cluster/netbench/gpu.json", "results/cluster/netbench/knl.json"]
    assert plan.flags() == (
        "--netbench gpu=results/cluster/netbench/gpu.json --netbench gpu_strong=results/cluster/netbench/gpu.json "
        "--netbench knl=results/cluster/netbench/knl.json --netbench knl_strong=results/cluster/netbench/knl.json"
    )
    assert plan.networks == shlex.quote(config["netbench"]["networks"])
    with pytest.raises(GridError, match="no runs in this config"):
        plan.file_of("local")
    # the claims judge a device's claims on its own platforms, with each platform's network
    assert rules.claims_flags(runs, config, plan) == (
        "--device-of gpu=gpu --device-of gpu_strong=gpu --device-of knl=knl --device-of knl_strong=knl " + plan.flags()
    )


def test_without_the_network_stage_the_plan_is_empty(cluster):
    config, runs = cluster
    config = {**config, "netbench": {**config["netbench"], "enabled": False}}
    plan = rules.NetbenchPlan(runs, config, "results/cluster")
    assert (plan.measured, plan.modelled, plan.files(), plan.flags()) == ([], [], [], "")
    assert rules.claims_flags(runs, config, plan).split() == [
        "--device-of",
        "gpu=gpu",
        "--device-of",
        "gpu_strong=gpu",
        "--device-of",
        "knl=knl",
        "--device-of",
        "knl_strong=knl",
    ]


def test_run_files_follow_the_grid_by_stage_and_platform():
    runs = [
        RunKey("digits", "lenet", "sync_sgd", "local", 2, 0),
        RunKey("digits", "lenet", "easgd", "gpu", 2, 0, "lr0.1"),
        RunKey("digits", "lenet", "easgd", "gpu", 2, 0, "t00", TUNE_STAGE),
    ]
    assert rules.run_files(runs, "x", "run.json") == [
        "results/x/runs/digits/lenet/sync_sgd/local/p2/s0/run.json",
        "results/x/runs/digits/lenet/easgd/gpu/p2/lr0.1/s0/run.json",
    ]
    assert rules.run_files(runs, "x", "metrics.csv", platform="gpu") == [
        "results/x/runs/digits/lenet/easgd/gpu/p2/lr0.1/s0/metrics.csv"
    ]
    assert rules.run_files(runs, "x", "run.json", stage=TUNE_STAGE) == [
        "results/x/tune/digits/lenet/easgd/gpu/p2/t00/s0/run.json"
    ]


def test_the_train_flags_are_the_parsers_own_argv_of_the_runs_settings(cluster):
    config, runs = cluster
    key = RunKey("cifar10", "cifar_alexnet", "async_easgd", "knl", 16, 0)
    options = rules.train_options(key, runs, config)
    assert (options["device"], options["threads"]) == ("cpu", 13)
    assert rules.train_flags(key, runs, config) == shlex.join(to_argv(options))
    assert "--batch-size 64" in rules.train_flags(key, runs, config)


def test_prepare_inputs_and_options_from_the_download_list_a_plugin_or_nothing():
    config = shipped("paper.yaml")
    assert rules.prepare_input(config, "cifar10") == ["data/raw/cifar10/cifar-10-python.tar.gz"]
    assert rules.verify_raw(config, "cifar10").startswith(
        "python -m scaledl download cifar10 cifar-10-python.tar.gz --out-dir data/raw/cifar10 --verify-only --sha256 "
    )
    assert rules.prepare_flags(config, "cifar10") == "--raw data/raw/cifar10 --seed 0"  # not the download list
    # digits is embedded: nothing to read, nothing to verify
    assert (rules.prepare_input(config, "digits"), rules.verify_raw(config, "digits")) == ([], "")
    # a plug-in's converter reads its own raw folder, if it has one
    config["plugins"] = {"models": {}, "datasets": {"survey": {"converter": "mine:survey", "raw": "raw/s", "seed": 1}}}
    assert rules.prepare_input(config, "survey") == ["raw/s"] and rules.verify_raw(config, "survey") == ""
    assert rules.prepare_flags(config, "survey") == "--converter mine:survey --raw raw/s --seed 1"
    config["plugins"]["datasets"]["survey"]["raw"] = None
    assert rules.prepare_input(config, "survey") == []


def test_the_rank_launcher_yields_when_ranks_outnumber_the_cores_and_passes_a_retry():
    local = {"kind": "local", "numactl": None}
    resources = SimpleNamespace(mpi="mpiexec", tasks=3, cpus_per_task=1)
    assert rules.rank_launcher(resources, local, 1, "", cores=4) == "SRUN_CPUS_PER_TASK=1 mpiexec -n 3 "
    assert rules.rank_launcher(resources, local, 1, "", cores=2).startswith("MPIR_CVAR_ENABLE_HEAVY_YIELD=1 ")
    knl = {"kind": "knl", "numactl": "--preferred=1"}
    srun = SimpleNamespace(mpi="srun --mpi=pmi2", tasks=17, cpus_per_task=13)
    assert rules.rank_launcher(srun, knl, 2, "", cores=2) == (
        "SCALEDL_ATTEMPT=2 SRUN_CPUS_PER_TASK=13 srun --mpi=pmi2 -n 17 numactl --preferred=1 "
    )  # a cluster's ranks are not this machine's: no yield mode
    single = SimpleNamespace(mpi="", tasks=1, cpus_per_task=1)
    assert rules.rank_launcher(single, local, 1, "", cores=1) == ""


def test_resources_of_reads_each_name_of_one_computation_per_job():
    calls = []

    def job(wildcards):
        calls.append(wildcards.platform)
        return {"tasks": 4, "mem_mb": 1000 * len(wildcards.platform)}

    resources = rules.resources_of(job, ["tasks", "mem_mb"])
    assert list(resources) == ["tasks", "mem_mb"]
    assert resources["tasks"](SimpleNamespace(platform="gpu")) == 4
    assert resources["mem_mb"](SimpleNamespace(platform="knl_x")) == 5000
    assert calls == ["gpu", "knl_x"]  # evaluated for the job that asks, when it asks
    with pytest.raises(KeyError):
        rules.resources_of(job, ["runtime"])["runtime"](SimpleNamespace(platform="gpu"))


def test_the_wildcard_patterns_are_the_grids_names(cluster):
    config, runs = cluster
    constraints = rules.wildcard_constraints(runs)
    assert constraints["platform"] == "gpu|gpu_strong|knl|knl_strong" and constraints["setting"] == "(?:)"
    assert rules.name_constraint("paper.v2") == {"name": r"paper\.v2"}
    assert rules.masterless_algorithms(runs) == "sync_easgd|sync_sgd"
    assert rules.simulated_platforms(runs, config) == "(?!)"
    simulated = shipped("paper_simulated.yaml")
    # without MNIST: the ladder (gpu8_sim) and the weak scaling on ImageNet-shaped generated images (knl_sim)
    assert rules.simulated_platforms(expand(simulated), simulated) == "gpu8_sim|knl_sim"


def test_a_calibrated_platform_is_this_machines_file_made_from_its_local_netbench():
    config = shipped("paper_small.yaml")
    runs = expand(config)
    twin, shipped_file = config["platforms"]["laptop_sim"], {"kind": "simulated", "platform_file": "k80x8"}
    assert calibration.platform_file(twin, "paper_small") == "results/paper_small/platform/calibrated.xml"
    assert calibration.calibration_inputs(twin, "paper_small") == {
        "platform": "results/paper_small/platform/calibrated.xml"
    }
    assert (
        calibration.platform_file(shipped_file, "x") == "k80x8"
        and calibration.calibration_inputs(shipped_file, "x") == {}
    )
    assert calibration.calibration_netbench(runs, config, "paper_small") == "results/paper_small/netbench/local.json"
    without_local = {**config, "platforms": {k: v for k, v in config["platforms"].items() if k != "local"}}
    simulated_only = {key: value for key, value in runs.items() if key.platform == "laptop_sim"}
    with pytest.raises(GridError, match="calibrates this machine from the netbench of a platform of kind local"):
        calibration.calibration_netbench(simulated_only, without_local, "paper_small")
    # the twin is validated against this machine where a run simulates on it, and only there
    assert calibration.validation_files(runs, config, "paper_small") == ["results/paper_small/validate/here.md"]
    real_only = {key: value for key, value in runs.items() if key.platform != "laptop_sim"}
    assert calibration.validation_files(real_only, config, "paper_small") == []
    # its options: the command's defaults unless the config's validate block says otherwise
    assert calibration.validation_flags({**config, "validate": {"models": None, "repeats": None}}) == ""
    smaller = {"models": "resnet18:2:3x32x32", "repeats": 3}
    assert calibration.validation_flags({**config, "validate": smaller}) == "--models resnet18:2:3x32x32 --repeats 3"


def test_a_simulated_platform_gives_its_file_ranks_and_clock_to_the_simulation():
    k80 = {"kind": "simulated", "platform_file": "k80x8", "simulates": "gpu"}
    assert shlex.split(rules.simulation_flags(k80, "x", 9)) == ["--platform-file", "k80x8", "--ranks", "9"]
    swapped = rules.simulation_flags({**k80, "clock": "alphabeta"}, "x", 9)
    assert shlex.split(swapped)[-2:] == ["--clock", "alphabeta"]
    calibrated = rules.simulation_flags({**k80, "platform_file": calibration.CALIBRATED}, "x", 3)
    assert shlex.split(calibrated)[:2] == ["--platform-file", calibration.calibrated_platform("x")]
