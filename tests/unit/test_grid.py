"""The experiment grid (scaledl.grid: runs, jobs, rules, keys): expansion, settings, checks and job shapes,
without Snakemake.

Configs are written here as the schema leaves them after validation: every
key present, `train` keys null unless set (null: the CLI default).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from scaledl.algorithms import ALGORITHMS, accepting, algorithm_options
from scaledl.config import NEGATABLE, defaults, to_argv
from scaledl.data import datasets
from scaledl.errors import UserError
from scaledl.grid import jobs, keys, regime, tune
from scaledl.grid import rules as grid_rules
from scaledl.grid import runs as grid
from scaledl.grid.keys import GridError, RunKey
from scaledl.grid.launch import container_exec, launcher
from scaledl.net.ladder import bound_minutes

REPO = Path(__file__).resolve().parents[2]

KNL = {
    "kind": "knl",
    "cores_per_node": 68,
    "ranks_per_node": 4,
    "threads": None,
    "mem_mb_per_cpu": 1400,
    "partition": "knl",
    "constraint": "knl",
    "runtime": 120,
}


def platform(**keys):
    """A platform with the schema's defaults."""
    return {
        "kind": "local",
        "partition": None,
        "device": None,
        "threads": None,
        "cores_per_node": None,
        "ranks_per_node": None,
        "gpus_per_node": None,
        "ranks_per_gpu": 1,
        "gpu_type": None,
        "master_share": True,
        "mem_mb_per_node": None,
        "mem_mb_per_cpu": None,
        "constraint": None,
        "numactl": None,
        "exclusive": False,
        "slurm_extra": None,
        "runtime": 60,
        **keys,
    }


def block(**keys):
    """An experiment block with the schema's defaults."""
    return {
        "dataset": "digits",
        "models": ["lenet"],
        "algorithms": ["sync_sgd", "sync_easgd"],
        "platforms": ["local"],
        "workers": None,
        "nodes": None,
        "scaling": "weak",
        "global_batch": None,
        "seeds": [0],
        "train": {},
        **keys,
    }


def config(*blocks, platforms=None, **train):
    """A validated config: the blocks (default: one default block), `local` and the top-level train."""
    settings = dict.fromkeys(["max_steps", "epochs", "time_budget", "batch_size", "lr", *algorithm_options()])
    return {
        "experiments": list(blocks) or [block()],
        "platforms": platforms or {"local": platform()},
        "train": {**settings, "max_steps": 10, **train},
    }


def refused(cfg) -> str:
    """The message of the GridError expanding cfg raises (always one line)."""
    with pytest.raises(GridError) as error:
        grid.expand(cfg)
    message = str(error.value)
    assert "\n" not in message and isinstance(error.value, ValueError)
    return message


# ---- expansion ----------------------------------------------------------------


def test_a_block_is_the_product_of_its_lists_in_order():
    runs = grid.expand(
        config(
            block(
                dataset="synthetic",
                models=["lenet", "cifar_net"],
                algorithms=["sync_sgd", "easgd"],
                platforms=["local", "other"],
                workers=[1, 4],
                seeds=[0, 7],
            ),
            platforms={"local": platform(), "other": platform(threads=2)},
        )
    )
    expected = [
        RunKey("synthetic", model, algorithm, name, workers, seed)
        for model in ("lenet", "cifar_net")
        for algorithm in ("sync_sgd", "easgd")
        for name in ("local", "other")
        for seed in (0, 7)
        for workers in (1, 4)
    ]
    assert list(runs) == expected
    assert len(runs) == 2 * 2 * 2 * 2 * 2


def test_blocks_follow_each_other_and_the_default_worker_count_is_two():
    runs = grid.expand(config(block(algorithms=["sync_sgd"]), block(algorithms=["async_sgd"], workers=[3])))
    assert list(runs) == [
        RunKey("digits", "lenet", "sync_sgd", "local", 2, 0),
        RunKey("digits", "lenet", "async_sgd", "local", 3, 0),
    ]


def test_worker_counts_from_workers_and_from_nodes():
    knl = platform(**KNL)
    assert grid.worker_counts(0, block(workers=[1, 2, 8]), "local", platform()) == [1, 2, 8]
    assert grid.worker_counts(0, block(), "local", platform()) == [2]
    assert grid.worker_counts(0, block(nodes=[1, 2, 8]), "knl", knl) == [4, 8, 32]
    gpu = platform(kind="gpu", gpus_per_node=4, ranks_per_gpu=2, threads=4)
    assert grid.worker_counts(0, block(nodes=[3]), "gpu", gpu) == [24]
    runs = grid.expand(config(block(algorithms=["sync_sgd"], platforms=["knl"], nodes=[1, 2]), platforms={"knl": knl}))
    assert [key.workers for key in runs] == [4, 8]


def test_workers_and_nodes_together_are_refused():
    message = refused(
        config(
            block(),
            block(platforms=["c"], workers=[2], nodes=[1]),
            platforms={"local": platform(), "c": platform(kind="cpu", ranks_per_node=2)},
        )
    )
    assert message.startswith("experiments[1] gives both `workers` and `nodes`; keep one")


def test_nodes_on_a_local_platform_are_refused_naming_the_block():
    message = refused(config(block(nodes=[2])))
    assert message.startswith("experiments[0]: platform 'local' is kind local and has no nodes")
    assert "list `workers` instead of `nodes`" in message


# ---- settings -----------------------------------------------------------------


def test_weak_scaling_keeps_the_merged_train_settings():
    runs = grid.expand(
        config(
            block(algorithms=["sync_sgd"], workers=[2, 4], train={"lr": 0.5, "epochs": 3}),
            batch_size=32,
            lr=0.1,
        )
    )
    for key in runs:
        assert runs[key] == {**config()["train"], "batch_size": 32, "lr": 0.5, "epochs": 3}


def test_strong_scaling_splits_the_global_batch():
    runs = grid.expand(config(block(algorithms=["sync_sgd"], workers=[1, 2, 8], scaling="strong", global_batch=64)))
    assert {key.workers: settings["batch_size"] for key, settings in runs.items()} == {1: 64, 2: 32, 8: 8}
    assert grid.batch_settings(0, block(), 4) == {}


@pytest.mark.parametrize(
    "keys, start",
    [
        ({"scaling": "strong"}, "experiments[1] has scaling strong but no global_batch; set it"),
        (
            {"scaling": "strong", "global_batch": 100, "workers": [2, 3]},
            "experiments[1]: global_batch 100 does not split evenly over 3 workers;",
        ),
        ({"global_batch": 64}, "experiments[1] sets global_batch but scaling is weak;"),
    ],
)
def test_batch_settings_that_cannot_hold_are_refused(keys, start):
    assert refused(config(block(), block(seeds=[1], **keys))).startswith(start)


def test_a_run_given_twice_with_the_same_settings_is_one_run():
    runs = grid.expand(config(block(algorithms=["sync_sgd", "easgd"]), block(algorithms=["sync_sgd"])))
    assert list(runs) == [
        RunKey("digits", "lenet", "sync_sgd", "local", 2, 0),
        RunKey("digits", "lenet", "easgd", "local", 2, 0),
    ]


def test_a_run_given_twice_with_different_settings_is_refused():
    message = refused(config(block(), block(algorithms=["sync_easgd"], train={"lr": 0.5})))
    assert message.startswith(
        "experiments[1] repeats the run digits/lenet/sync_easgd/local/p2/s0 with different `train` settings"
    )


# ---- what the schema cannot check ----------------------------------------------


def test_an_undefined_platform_is_refused_naming_the_defined_ones():
    message = refused(config(block(), block(platforms=["local", "gpu"])))
    assert message == ("experiments[1] uses platform 'gpu', which is not defined under `platforms` (defined: local)")


def test_a_block_without_a_budget_is_refused():
    message = refused(config(block(), block(train={"max_steps": None})))
    assert message.startswith("experiments[1] has no budget: set train.max_steps, train.epochs or train.time_budget")


def test_a_budget_of_the_block_alone_is_enough():
    runs = grid.expand(config(block(train={"time_budget": 60}), max_steps=None))
    assert {settings["time_budget"] for settings in runs.values()} == {60}


def test_a_run_that_cannot_be_laid_out_is_refused_naming_block_and_platform():
    tight = {"knl": platform(**{**KNL, "threads": 17})}
    assert grid.expand(config(block(algorithms=["sync_sgd"], platforms=["knl"], nodes=[1]), platforms=tight))
    message = refused(config(block(algorithms=["easgd"], platforms=["knl"], nodes=[1]), platforms=tight))
    assert message.startswith("experiments[0]: platform 'knl': 4 workers need 5 ranks on a node")
    assert "5 × 17 threads exceed cores_per_node 68" in message


def test_a_platform_missing_a_required_key_is_refused_naming_the_block():
    message = refused(config(block(platforms=["g"]), platforms={"g": platform(kind="gpu")}))
    assert message == "experiments[0]: platform 'g': kind 'gpu' needs gpus_per_node"


def test_an_unknown_algorithm_is_refused():
    message = refused(config(block(algorithms=["sync_sgd", "bogus"])))
    assert message.startswith("experiments[0] uses algorithm 'bogus', which is not in the registry")


# ---- algorithm-specific settings -------------------------------------------------


def test_a_setting_one_algorithm_of_the_block_refuses_is_refused():
    message = refused(config(block(), block(algorithms=["async_msgd", "sync_sgd"], train={"momentum": 0.5})))
    assert message == (
        "experiments[1] sets train.momentum to 0.5 (in its `train:`), which its algorithm sync_sgd does not "
        f"accept (accepted by {', '.join(accepting('momentum'))}); move it to a block of its own holding only "
        "such algorithms"
    )
    assert "async_msgd" in accepting("momentum")


def test_a_top_level_setting_counts_for_every_block():
    message = refused(config(block(algorithms=["easgd"]), block(algorithms=["sync_easgd", "async_easgd"]), tau=2))
    assert message.startswith(
        "experiments[0] sets train.tau to 2 (in the top-level `train:`), which its algorithm easgd does not accept"
    )


def test_algorithm_settings_in_a_block_of_their_own_are_accepted():
    runs = grid.expand(
        config(
            block(algorithms=["sync_sgd", "sync_easgd"]),
            block(algorithms=["async_msgd", "async_measgd"], train={"momentum": 0.5}),
            block(algorithms=["sync_easgd", "sync_easgd1", "sync_easgd3"], train={"tau": 4, "rho": 0.1}, seeds=[1]),
            block(algorithms=["chip_partition"], train={"fast_memory_gb": 16}),
        )
    )
    assert runs[RunKey("digits", "lenet", "async_measgd", "local", 2, 0)]["momentum"] == 0.5
    assert runs[RunKey("digits", "lenet", "sync_easgd1", "local", 2, 1)]["tau"] == 4
    assert runs[RunKey("digits", "lenet", "chip_partition", "local", 2, 0)]["fast_memory_gb"] == 16
    assert runs[RunKey("digits", "lenet", "sync_sgd", "local", 2, 0)]["momentum"] is None


def test_null_is_not_set_even_over_a_top_level_value():
    runs = grid.expand(
        config(
            block(algorithms=["sync_sgd"], train={"momentum": None}),
            block(algorithms=["async_msgd"], seeds=[1]),
            momentum=0.5,
        )
    )
    assert [settings["momentum"] for settings in runs.values()] == [None, 0.5]


@pytest.mark.parametrize("option", sorted(algorithm_options()))
def test_every_algorithm_option_is_checked(option):
    refusing = next(key for key, info in ALGORITHMS.items() if option not in info.options)
    message = refused(config(block(algorithms=[refusing], train={option: 1})))
    assert f"train.{option} " in message and f"algorithm {refusing} does not accept" in message


# ---- lookups the workflow makes ---------------------------------------------------


def test_run_key_parses_wildcards_and_names_its_directory():
    key = RunKey.parse(
        {"dataset": "mnist", "model": "lenet", "algorithm": "sync_sgd", "platform": "gpu", "workers": "8", "seed": "1"}
    )
    assert key == RunKey("mnist", "lenet", "sync_sgd", "gpu", 8, 1)
    assert keys.run_dir(key, "paper") == "results/paper/runs/mnist/lenet/sync_sgd/gpu/p8/s1"
    assert keys.run_dir(key) == "results/{name}/runs/mnist/lenet/sync_sgd/gpu/p8/s1"  # the rule's wildcard


def test_each_config_has_its_own_results_namespace():
    assert keys.results_name({"name": None}) == "default"
    assert keys.results_name({"name": None}, ["config/paper.yaml"]) == "paper"
    assert keys.results_name({"name": None}, ["a/first.yaml", "config/paper_small.yaml"]) == "paper_small"
    assert keys.results_name({"name": "mine"}, ["config/paper.yaml"]) == "mine"
    with pytest.raises(GridError, match="^name '../x': a results folder name"):
        keys.results_name({"name": "../x"})


def test_run_dir_is_the_train_rules_output_folder():
    """The train rules' outputs, log and benchmark come from the one template (scaledl.grid.keys), spelt
    nowhere in the rules; the dry-run record (tests/workflow) holds what they expand to."""
    rules = (REPO / "workflow/rules/train.smk").read_text()
    for name in ("metrics.csv", "run.json", "model.pt", "timeline.h5"):
        assert rules.count(f'=f"{{RUN_DIR}}/{name}",') == 2, name  # train and train_simulated
    assert rules.count("        RUN_LOG,\n") == rules.count("        RUN_BENCHMARK\n") == 2
    assert "p{workers}" not in rules
    assert keys.RUN_DIR == f"results/{{name}}/{keys.RUN_PATH}"
    assert (keys.RUN_LOG, keys.RUN_BENCHMARK) == (
        f"logs/{{name}}/{keys.RUN_PATH}.log",
        f"benchmarks/{{name}}/{keys.RUN_PATH}.tsv",
    )
    key = RunKey("mnist", "lenet", "easgd", "knl", 8, 1, "lr0.1")
    assert keys.run_dir(key, "paper") == "results/paper/runs/mnist/lenet/easgd/knl/p8/lr0.1/s1"


def test_settings_of_a_run_outside_the_grid_names_it():
    runs = grid.expand(config())
    key = RunKey("digits", "lenet", "sync_sgd", "local", 3, 0)
    with pytest.raises(GridError, match="^the run digits/lenet/sync_sgd/local/p3/s0 is not a run"):
        grid.settings_of(runs, key)


def test_placement_and_resources_of_a_run():
    cfg = config(
        block(algorithms=["async_easgd", "sync_sgd"], platforms=["knl"], nodes=[2]), platforms={"knl": platform(**KNL)}
    )
    runs = grid.expand(cfg)
    master = jobs.placement_of(RunKey("digits", "lenet", "async_easgd", "knl", 8, 0), cfg)
    assert (master.ranks, master.nodes, master.tasks_per_node, master.cpus_per_task) == (9, 2, 5, 13)
    assert jobs.cores_of(master) == 9 * 13
    # KNL asks by CPU here (mem_mb_per_cpu 1400): mem_mb is the first node's 5 × 13 CPUs of it
    assert jobs.job_resources(master, cfg["platforms"]["knl"]) == {
        "mem_mb": 5 * 13 * 1400,
        "mem_mb_per_cpu": 1400,
        "runtime": 120,
        "tasks": 9,
        "nodes": 2,
        "cpus_per_task": 13,
        "slurm_partition": "knl",
        "constraint": "knl",
        "slurm_extra": "--ntasks-per-node=5",
    }
    assert tuple(jobs.job_resources(master, cfg["platforms"]["knl"])) == jobs.RESOURCES
    # the workers of a master-less run get the same 13 cores (one share of 68 // 5 kept for a master)
    options = grid_rules.train_options(RunKey("digits", "lenet", "sync_sgd", "knl", 8, 0), runs, cfg)
    assert (options["device"], options["threads"], options["max_steps"]) == ("cpu", 13, 10)


def test_memory_per_node_and_exclusive_nodes():
    knl = platform(**{**KNL, "mem_mb_per_cpu": None, "mem_mb_per_node": 86000, "exclusive": True})
    cfg = config(block(algorithms=["async_easgd"], platforms=["knl"], nodes=[2]), platforms={"knl": knl})
    placement = jobs.placement_of(RunKey("digits", "lenet", "async_easgd", "knl", 8, 0), cfg)
    resources = jobs.job_resources(placement, knl)
    assert (resources["mem_mb"], resources["mem_mb_per_cpu"]) == (86000, None)  # --mem 86000, per node
    assert resources["slurm_extra"] == "--ntasks-per-node=5 --exclusive"


def test_a_time_only_simulation_asks_for_one_process_not_a_share_per_rank():
    """Its ranks share one replica of every large buffer: one process's memory plus a little a rank, where a
    full simulation holds every rank's replicas (2 GB a rank: 128 GB for 64 nodes)."""
    sim = platform(kind="simulated", platform_file="cori_knl", simulates="knl", ranks_per_node=1, runtime=240)
    blocks = [block(algorithms=["sync_easgd"], platforms=["sim"], nodes=[64], seeds=[seed], train={"batch_size": 16, **train})
              for seed, train in ((0, {"time_only": True}), (1, {}))]  # fmt: skip
    cfg = config(*blocks, platforms={"sim": sim})
    runs = grid.expand(cfg)
    fast, full = (RunKey("digits", "lenet", "sync_easgd", "sim", 64, seed) for seed in (0, 1))
    assert jobs.train_resources(fast, runs, cfg)["mem_mb"] == 2000 + 64 * 2
    assert jobs.train_resources(full, runs, cfg)["mem_mb"] == 64 * 2000


def test_local_resources_leave_the_cluster_ones_out():
    cfg = config()
    placement = jobs.placement_of(RunKey("digits", "lenet", "sync_sgd", "local", 2, 0), cfg)
    # under --profile slurm a local platform is one node of its ranks, at the default 2000 MB per CPU
    assert jobs.job_resources(placement, cfg["platforms"]["local"]) == {
        "mem_mb": 2 * 2000,
        "mem_mb_per_cpu": 2000,
        "runtime": 60,
        "tasks": 2,
        "nodes": 1,
        "cpus_per_task": 1,
        "slurm_partition": None,
        "constraint": None,
        "slurm_extra": None,
    }


def test_netbench_asks_for_two_nodes_of_one_core_ranks_for_its_ladders_time():
    """What the α-β model needs (a pair on two nodes), not the largest run's 16 nodes for its runtime."""
    cfg = config(
        block(algorithms=["easgd"], workers=[1]),
        block(dataset="synthetic", algorithms=["easgd"], platforms=["knl"], nodes=[1, 4, 16], train={"batch_size": 4}),
        block(algorithms=["sync_sgd"], platforms=["gpu"], workers=[3]),
        platforms={
            "local": platform(),
            "knl": platform(**KNL, exclusive=True, warn_before_limit_s=120),
            "gpu": platform(kind="gpu", gpus_per_node=4, threads=8, runtime=120, gpu_type="a100"),
        },
    )
    cfg["netbench"] = {"enabled": True, "max_size": "16M", "repeats": 5, "networks": "fdr_ib"}
    runs = grid.expand(cfg)
    local = jobs.netbench_placement("local", runs, cfg)
    assert (local.ranks, local.cpus_per_task) == (2, 1)
    knl = jobs.netbench_placement("knl", runs, cfg)
    assert (knl.ranks, knl.nodes, knl.tasks_per_node, knl.cpus_per_task, knl.gpus_per_node) == (8, 2, 4, 1, 0)
    resources = jobs.netbench_resources(knl, cfg["platforms"]["knl"], cfg["netbench"])
    # four 16 MB buffers and the interpreter per rank; minutes from the ladder, far below the platform's 120
    assert resources["mem_mb"] == 4 * (512 + 4 * 16) and resources["mem_mb_per_cpu"] is None
    assert resources["runtime"] == bound_minutes("16M", 5, 8) < 15
    assert (resources["nodes"], resources["tasks"], resources["cpus_per_task"]) == (2, 8, 1)
    assert (resources["slurm_partition"], resources["constraint"]) == ("knl", "knl")
    # whole nodes still (timings), but no early warning: a measurement has nothing to checkpoint
    assert resources["slurm_extra"] == "--ntasks-per-node=4 --exclusive"
    # a machine whose runs fit on one node is measured on one node, with at most its largest run's ranks
    gpu = jobs.netbench_placement("gpu", runs, cfg)
    assert (gpu.ranks, gpu.nodes, gpu.gpus_per_node, gpu.device) == (3, 1, 0, "cpu")
    assert jobs.netbench_resources(gpu, cfg["platforms"]["gpu"], cfg["netbench"])["slurm_extra"] == (
        "--ntasks-per-node=3"  # no --gpus-per-node: it times host buffers
    )


def test_platforms_of_one_machine_share_one_network_measurement():
    # a strong-scaling alias (equal but for its time limit and memory) and a differently laid out KNL
    cfg = config(
        block(algorithms=["sync_sgd"], platforms=["knl", "knl_quad"], nodes=[1, 2]),
        block(algorithms=["sync_easgd"], platforms=["knl_strong"], nodes=[1, 8], scaling="strong", global_batch=64),
        platforms={
            "knl": platform(**KNL),
            "knl_strong": platform(**{**KNL, "runtime": 600, "mem_mb_per_cpu": 900}),
            "knl_quad": platform(**{**KNL, "ranks_per_node": 2}),
        },
    )
    runs = grid.expand(cfg)
    assert jobs.netbench_groups(runs, cfg) == {"knl": ["knl", "knl_strong"], "knl_quad": ["knl_quad"]}
    shared = jobs.netbench_placement("knl", runs, cfg)
    assert (shared.nodes, shared.ranks) == (2, 8)  # knl_strong's runs span 8 nodes: measured on two
    assert jobs.netbench_members("knl", runs, cfg) == ["knl", "knl_strong"]
    with pytest.raises(GridError, match="^platform 'knl_strong' is measured as 'knl' .*files of knl$"):
        jobs.netbench_members("knl_strong", runs, cfg)
    with pytest.raises(GridError, match="^platform 'gpu' has no runs in this config"):
        jobs.netbench_members("gpu", runs, cfg)


def test_netbench_threads_need_no_core_count_under_a_cluster_executor():
    cfg = config(
        block(algorithms=["easgd"], workers=[2]),
        block(algorithms=["easgd"], platforms=["knl"], nodes=[1]),
        platforms={"local": platform(), "knl": platform(**KNL)},
    )
    runs = grid.expand(cfg)
    local = jobs.netbench_placement("local", runs, cfg)
    assert jobs.netbench_threads(local, 8) == 8  # run here with --cores 8: the whole machine
    assert jobs.netbench_threads(local, 1) == 2  # never fewer than its ranks' cores
    assert jobs.netbench_threads(local, None) == 2  # --profile slurm: no --cores, its own allocation
    knl = jobs.netbench_placement("knl", runs, cfg)
    assert jobs.netbench_threads(knl, 8) == jobs.netbench_threads(knl, None) == 4  # one core per rank


def test_prepare_resources_follow_the_dataset():
    small = jobs.prepare_resources("mnist", {"raw": None, "seed": 0})
    assert small == {"cpus_per_task": 1, "mem_mb": 4000, "mem_mb_per_cpu": None, "runtime": 120}
    assert jobs.prepare_threads({"raw": None}) == 1
    one = jobs.prepare_resources("imagenet", {"workers": 1})
    many = jobs.prepare_resources("imagenet", {"workers": 16})
    assert jobs.prepare_threads({"workers": 16}) == many["cpus_per_task"] == 16
    # one decoding process: about 1.33 M images at 50 a second, plus an hour; more processes, less time
    assert one["runtime"] == 60 + 444 and many["runtime"] == 120
    assert many["mem_mb"] == 4000 + 15 * 500
    assert tuple(one) == jobs.PREPARE_RESOURCES


def test_wildcard_constraints_are_the_grids_names():
    runs = grid.expand(
        config(
            block(dataset="synthetic", algorithms=["sync_sgd", "easgd"], workers=[1, 2]),
            block(algorithms=["sync_easgd"]),
        )
    )
    assert grid_rules.wildcard_constraints(runs) == {
        "dataset": "digits|synthetic",
        "model": "lenet",
        "algorithm": "easgd|sync_easgd|sync_sgd",
        "platform": "local",
        "workers": r"\d+",
        "seed": r"\d+",
        "stage": "runs",
        "setting": "(?:)",
    }
    assert grid_rules.masterless_algorithms(runs) == "sync_easgd|sync_sgd"
    assert grid_rules.masterless_algorithms(grid.expand(config(block(algorithms=["easgd"])))) == "(?!)"


def test_launcher_prefix_and_none_for_a_singleton():
    assert launcher("srun --mpi=pmi2", 17, 13) == "SRUN_CPUS_PER_TASK=13 srun --mpi=pmi2 -n 17 "
    assert launcher("mpiexec", 2, 1) == "SRUN_CPUS_PER_TASK=1 mpiexec -n 2 "
    assert launcher("", 1, 4) == ""


def test_launcher_binds_memory_passes_a_retry_and_starts_ranks_in_the_image():
    # KNL flat mode: each rank under numactl; a retry's attempt reaches `scaledl train`
    assert launcher("srun --mpi=pmi2", 5, 13, numactl="--preferred=1", attempt=2) == (
        "SCALEDL_ATTEMPT=2 SRUN_CPUS_PER_TASK=13 srun --mpi=pmi2 -n 5 numactl --preferred=1 "
    )
    assert launcher("", 1, 4, numactl="--membind=1") == "numactl --membind=1 "
    image = container_exec("/img/scaledl.sif", home="/scratch/w", gpus=True, args="--bind /data")
    assert image == "apptainer exec --home /scratch/w --nv --bind /data /img/scaledl.sif"
    # srun (on the host) starts every rank in the image; mpiexec is the image's own, inside it
    assert launcher("srun --mpi=pmi2", 4, 8, image=image, numactl="--preferred=1") == (
        f"SRUN_CPUS_PER_TASK=8 srun --mpi=pmi2 -n 4 {image} numactl --preferred=1 "
    )
    assert launcher("mpiexec", 2, 1, image=image, oversubscribed=True) == (
        f"MPIR_CVAR_ENABLE_HEAVY_YIELD=1 SRUN_CPUS_PER_TASK=1 {image} mpiexec -n 2 "
    )
    assert launcher("", 1, 1, image=image) == f"{image} "


def test_as_flags_skips_null_and_false_and_sorts():
    assert grid_rules.as_flags(
        {
            "lr": 0.1,
            "momentum": None,
            "overlap": False,
            "nesterov": True,
            "shape": [1, 28, 28],
            "raw": "my data",
            "batch_size": 8,
        }
    ) == ("--batch-size 8 --lr 0.1 --nesterov --raw 'my data' --shape 1,28,28")


# What the workflow imports while Snakemake parses it (common.smk).
PARSE_TIME_MODULES = (
    "scaledl.grid.keys",
    "scaledl.grid.runs",
    "scaledl.grid.jobs",
    "scaledl.grid.rules",
    "scaledl.grid.regime",
    "scaledl.grid.sensitivity",
    "scaledl.grid.preflight",
    "scaledl.grid.placement",
    "scaledl.grid.check",
    "scaledl.grid.downloads",
    "scaledl.grid.schema",
    "scaledl.data.datasets",
    "scaledl.report.catalogue",
)


@pytest.mark.parametrize("module", PARSE_TIME_MODULES)
def test_the_module_imports_neither_torch_nor_mpi(module):
    heavy = ("torch", "mpi4py.MPI", "matplotlib")
    code = f"import sys, {module}; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_one_of_matches_exactly_one_of_its_words():
    pattern = keys.one_of(["b.c", "a", "a", 3])
    assert pattern == r"3|a|b\.c"  # sorted, deduplicated, escaped
    assert all(re.fullmatch(pattern, word) for word in ("a", "b.c", "3"))
    assert not any(re.fullmatch(pattern, word) for word in ("bxc", "ab", ""))
    assert keys.one_of([]) == "(?!)" and not re.fullmatch("(?!)", "")


def test_train_flags_negate_a_false_switch_that_defaults_to_the_algorithm():
    assert NEGATABLE == {"overlap"}
    assert to_argv({"overlap": False, "nesterov": False}) == ["--no-overlap"]
    assert to_argv({"overlap": True}) == ["--overlap"]


def test_an_optional_block_runs_only_when_its_path_exists(tmp_path):
    present, absent = tmp_path / "here", tmp_path / "missing"
    present.mkdir()
    cfg = config(
        block(algorithms=["sync_sgd"], if_present=str(present)),
        block(algorithms=["sync_easgd"], if_present=str(absent)),
    )
    assert {key.algorithm for key in grid.expand(cfg)} == {"sync_sgd"}


def test_a_config_whose_every_block_is_skipped_is_refused_naming_the_folder_and_the_download(tmp_path):
    absent = tmp_path / "raw/mnist"
    cfg = config(
        block(algorithms=["sync_sgd"], if_present=str(absent)),
        block(algorithms=["sync_easgd"], if_present=str(absent)),
    )
    assert refused(cfg) == (
        f"every experiment block is skipped: {absent} is missing (`if_present`), so nothing would train; "
        f"run `scaledl download digits` (or put the dataset's files in {absent}) and start again"
    )


def test_a_batch_larger_than_a_shard_fails_while_the_grid_parses():
    # digits: 1797 images, 360 held out for testing (test_fraction 0.2), 1437 to train on
    assert datasets.train_images("digits", {"test_fraction": 0.2}) == 1437
    cfg = config(block(algorithms=["sync_sgd"], workers=[4], train={"batch_size": 400}))
    assert refused(cfg) == (
        "experiments[0]: digits/lenet/sync_sgd/local/p4/s0: batch 400 is larger than a worker's "
        "shard of 359 images (1437 digits training images over 4 workers); use fewer workers "
        "or a smaller batch_size"
    )
    # chip partitioning replicates the data: every part holds all 1437 images
    assert grid.expand(config(block(algorithms=["chip_partition"], workers=[4], train={"batch_size": 400})))


# ---- sweeps and the tune stage -------------------------------------------------

TUNE = {
    "lr_grid": {"low": 0.01, "factor": 2, "count": 3},
    "extend": 1,
    "axes": {},
    "seeds": 2,
    "seed": 100,
    "validation_fraction": 0.1,
    "train": {"max_steps": 40, "target_accuracy": 0.8, "eval_every": None},
}


def test_a_swept_key_gives_one_run_and_one_folder_per_value():
    runs = grid.expand(config(block(algorithms=["sync_sgd"], train={"lr": [0.01, 0.05, 0.1]})))
    assert [key.setting for key in runs] == ["lr0.01", "lr0.05", "lr0.1"]
    assert [settings["lr"] for settings in runs.values()] == [0.01, 0.05, 0.1]
    assert all(settings["sweep"] == "lr" and settings["setting"] == key.setting for key, settings in runs.items())
    folders = [keys.run_dir(key, "n") for key in runs]
    assert folders[1] == "results/n/runs/digits/lenet/sync_sgd/local/p2/lr0.05/s0"
    assert len(set(folders)) == 3
    # two swept keys: their product, named in TrainConfig's order whatever the config's
    two = grid.expand(config(block(algorithms=["sync_easgd"], train={"tau": [1, 4], "lr": [0.01, 0.05]})))
    assert [key.setting for key in two] == ["lr0.01-tau1", "lr0.01-tau4", "lr0.05-tau1", "lr0.05-tau4"]


def test_an_unswept_config_keeps_its_folders_and_settings():
    runs = grid.expand(config(block(algorithms=["sync_sgd"], train={"lr": 0.05})))
    [(key, settings)] = runs.items()
    assert key.setting == "" and key.stage == "runs" and "setting" not in settings
    assert keys.run_dir(key, "n") == "results/n/runs/digits/lenet/sync_sgd/local/p2/s0"


def test_the_wildcards_know_every_setting_and_stage():
    runs = grid.expand(config(block(algorithms=["sync_sgd"], train={"lr": [0.01, 0.1]})))
    constraints = grid_rules.wildcard_constraints(runs)
    assert re.fullmatch(constraints["setting"], "/lr0.01") and re.fullmatch(constraints["setting"], "")
    assert not re.fullmatch(constraints["setting"], "/lr0.5")
    assert RunKey.parse({**runs.__iter__().__next__()._asdict(), "setting": "/lr0.01"}).setting == "lr0.01"


def test_every_tuned_algorithm_gets_the_same_eta_grid_and_seeds_on_a_validation_split():
    tuned = block(algorithms=["sync_sgd", "async_easgd", "async_msgd"], tuned=True, scale={}, seeds=[0, 1, 2])
    runs = grid.expand({**config(tuned), "tune": TUNE})
    trials = [key for key in runs if key.stage == "tune"]
    finals = [key for key in runs if key.stage == "runs"]
    # the base grid 0.01, 0.02, 0.04 and one factor more a side (run only if a round asks), two seeds each
    for algorithm in tuned["algorithms"]:
        mine = [k for k in trials if k.algorithm == algorithm]
        assert sorted({runs[k]["lr"] for k in mine}) == [0.005, 0.01, 0.02, 0.04, 0.08]
        assert sorted({k.seed for k in mine}) == [100, 101] and len(mine) == 5 * 2
    assert {k.setting for k in trials} == {"lr0.005", "lr0.01", "lr0.02", "lr0.04", "lr0.08"}
    assert {k.setting for k in finals} == {"tuned"} and len(finals) == 3 * 3
    for key in trials:
        settings = runs[key]
        assert settings["validation_fraction"] == 0.1  # never the test split
        assert settings["max_steps"] == 40 and settings["target_accuracy"] == 0.8
        assert settings["sweep"] == "lr"
        assert settings.get("beta") is None and settings.get("momentum") is None  # the block's: the paper's 0.9
    assert defaults()["beta"] == defaults()["momentum"] == 0.9
    assert {runs[k]["sweep"] for k in finals} == {"lr"}
    assert {runs[k]["eval_every"] for k in trials} == {10}  # unless tune.train says otherwise
    # the first round's files: the base grid only
    first = tune.trial_files(runs, "n", tune.lr_grid(TUNE), tune.trial_seeds(TUNE))
    assert len(first) == 3 * 3 * 2 and not any("lr0.005" in f or "lr0.08" in f for f in first)


def test_an_axis_applies_to_every_algorithm_with_that_setting():
    tuned = block(algorithms=["sync_sgd", "async_easgd"], tuned=True, scale={})
    runs = grid.expand({**config(tuned), "tune": {**TUNE, "extend": 0, "axes": {"beta": [0.5, 0.9]}}})
    easgd = {k.setting for k in runs if k.stage == "tune" and k.algorithm == "async_easgd"}
    sgd = {k.setting for k in runs if k.stage == "tune" and k.algorithm == "sync_sgd"}
    assert easgd == {f"lr{lr:g}-beta{b:g}" for lr in (0.01, 0.02, 0.04) for b in (0.5, 0.9)}
    assert sgd == {"lr0.01", "lr0.02", "lr0.04"}  # no β: the axis is not its
    assert {runs[k]["rho"] for k in runs if k.stage == "tune" and k.algorithm == "async_easgd"} == {None}


def test_numerically_identical_algorithms_are_tuned_once_as_the_first_of_them():
    tuned = block(algorithms=["sync_easgd2", "sync_easgd3", "sync_easgd1", "sync_sgd"], tuned=True, scale={})
    runs = grid.expand({**config(tuned), "tune": TUNE})
    assert {k.algorithm for k in runs if k.stage == "tune"} == {"sync_easgd2", "sync_sgd"}
    assert {k.algorithm for k in runs if k.stage == "runs"} == set(tuned["algorithms"])


def test_a_platform_tuned_on_another_runs_no_trials_and_needs_that_platforms_cell():
    platforms = {"local": platform(), "slow": platform(tuned_on="local")}
    tuned = block(algorithms=["sync_sgd", "async_easgd"], platforms=["local", "slow"], tuned=True, scale={})
    runs = grid.expand({**config(tuned, platforms=platforms), "tune": TUNE})
    assert {k.platform for k in runs if k.stage == "tune"} == {"local"}
    assert {(k.platform, k.setting) for k in runs if k.stage == "runs"} == {("local", "tuned"), ("slow", "tuned")}
    assert json.loads(tune.protocol(runs, {**config(tuned, platforms=platforms), "tune": TUNE}))["tuned_on"] == {
        "slow": "local"
    }
    # its tuned runs alone, with no block tuning the platform it names: refused, naming the cell
    alone = block(algorithms=["async_easgd"], platforms=["slow"], tuned=True, scale={})
    message = refused({**config(alone, platforms=platforms), "tune": TUNE})
    assert "slow takes local's tuned choices (tuned_on)" in message and "digits/lenet/async_easgd/local/p2" in message
    for target in ("nowhere", "slow"):  # not a platform; itself
        bad = {"local": platform(), "slow": platform(tuned_on=target)}
        assert "platforms.slow.tuned_on" in refused({**config(tuned, platforms=bad), "tune": TUNE})


def test_the_rounds_widen_the_grid_on_an_edge_side_up_to_the_limit(tmp_path):
    settings = {**TUNE, "extend": 2}
    assert tune.next_grid(settings, [0.01, 0.02, 0.04], []) is None  # interior everywhere: the last round
    wider = tune.next_grid(settings, [0.01, 0.02, 0.04], ["high"])
    assert wider == [0.01, 0.02, 0.04, 0.08]
    both = tune.next_grid(settings, wider, ["low", "high"])
    assert both == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16]
    assert tune.next_grid(settings, both, ["high"]) is None  # two factors above: the limit, the edge stays
    # the rounds read one another's result: round 0 names round 1's grid, round 1 names none
    files = {0: tmp_path / "round0.json", 1: tmp_path / "round1.json"}
    tune.write_round(str(files[0]), [0.01, 0.02, 0.04], ["high"], wider)
    tune.write_round(str(files[1]), wider, [], None)
    assert tune.round_grid(settings, 1, lambda r: str(files[r])) == wider
    assert tune.final_round(settings, lambda r: str(files[r]))["grid"] == wider


def test_refine_plans_the_halfway_points_and_the_last_round_names_each_cells_own(tmp_path):
    tuned = block(algorithms=["async_sgd", "sync_sgd"], tuned=True, scale={})
    settings = {**TUNE, "extend": 0, "refine": True}
    runs = grid.expand({**config(tuned), "tune": settings})
    planned = {runs[k]["lr"] for k in runs if k.stage == "tune" and k.algorithm == "async_sgd"}
    assert planned == {0.007071, 0.01, 0.01414, 0.02, 0.02828, 0.04, 0.05657}  # the grid and its √2 points
    assert tune.refined(0.02, 2) == [0.01414, 0.02828]
    cell = next(k for k in runs if k.stage == "tune" and k.algorithm == "async_sgd")
    last = str(tmp_path / "round0.json")
    tune.write_round(last, [0.01, 0.02, 0.04], [], None, {tune.cell_label(cell): tune.refined(0.02, 2)})
    read = tune.round_trial_files(runs, "n", settings, None, lambda r: last)
    lrs = {f.split("/lr")[1].split("/")[0] for f in read if "/async_sgd/" in f}
    assert lrs == {"0.01", "0.02", "0.04", "0.01414", "0.02828"}  # the grid, then its own two points
    assert not any("0.01414" in f or "0.02828" in f for f in read if "/sync_sgd/" in f)  # not another cell's


def test_the_confirmation_runs_the_named_points_on_seeds_after_the_grids_to_their_whole_budget(tmp_path):
    tuned = block(algorithms=["async_sgd", "sync_sgd"], tuned=True, scale={})
    settings = {**TUNE, "extend": 0, "confirm": {"seeds": 6, "misses": 1}}
    runs = grid.expand({**config(tuned), "tune": settings})
    trials = [k for k in runs if k.stage == "tune" and k.algorithm == "async_sgd" and k.setting == "lr0.02"]
    assert sorted(k.seed for k in trials) == list(range(100, 108))  # the grid's 100, 101; then 102-107
    assert {k.seed: runs[k]["tune_seeds"] for k in trials} == {100: 2, 101: 2, **dict.fromkeys(range(102, 108))}
    first = tune.round_trial_files(runs, "n", settings, 0, None)
    assert {int(f.split("/s")[-1].split("/")[0]) for f in first} == {100, 101}  # the rounds read the grid's seeds
    cell = trials[0]
    named = str(tmp_path / "confirm.json")
    tune.write_confirm(named, {tune.cell_label(cell): ["lr0.02", "lr0.04"]})
    again = tune.confirm_trial_files(runs, "n", settings, named)
    assert len(again) == 2 * 6 and all("/async_sgd/" in f for f in again)  # its two points; not another cell's
    assert {f.split("/async_sgd/")[1].split("/")[-3] for f in again} == {"lr0.02", "lr0.04"}
    assert json.loads(tune.protocol(runs, {**config(tuned), "tune": settings}))["confirm"] == {
        "seeds": list(range(102, 108)),
        "misses": 1,
    }


def test_the_aa_replica_is_tuned_as_a_cell_of_its_own_on_seeds_no_other_trial_uses():
    tuned = block(algorithms=["sync_sgd", "sync_sgd_aa"], tuned=True, scale={})
    settings = {**TUNE, "extend": 0, "confirm": {"seeds": 6, "misses": 1}}
    runs = grid.expand({**config(tuned), "tune": settings})
    seeds = {a: sorted({k.seed for k in runs if k.stage == "tune" and k.algorithm == a}) for a in tuned["algorithms"]}
    assert seeds == {"sync_sgd": list(range(100, 108)), "sync_sgd_aa": list(range(108, 116))}  # disjoint
    first = tune.round_trial_files(runs, "n", settings, 0, None)
    assert {f.split("/s")[-1].split("/")[0] for f in first if "/sync_sgd_aa/" in f} == {"108", "109"}  # its grid's
    rows = [SimpleNamespace(dataset="d", model="m", algorithm=a, platform="p", workers=2) for a in seeds]
    for row in rows:  # each run takes its own cell's choice, not its numerical twin's
        assert tune.choice_for(rows, row) is row
    assert json.loads(tune.protocol(runs, {**config(tuned), "tune": settings}))["seeds"] == [100, 101, 108, 109]


def test_a_grid_that_cannot_grow_is_refused():
    tuned = block(algorithms=["sync_sgd"], tuned=True, scale={})
    bad = {**TUNE, "lr_grid": {"low": 0.01, "factor": 1.0, "count": 3}}
    assert "factor 1.0 must be" in refused({**config(tuned), "tune": bad})


def test_a_tuned_block_cannot_sweep_and_a_scale_needs_a_tuned_block():
    assert "tuned and also sweeps lr" in refused(
        {**config(block(tuned=True, scale={}, train={"lr": [0.1, 0.2]})), "tune": TUNE}
    )
    assert "sets `scale` or `pick` but is not tuned" in refused(config(block(scale={"lr": 0.1})))
    assert "sets `scale` or `pick` but is not tuned" in refused(config(block(pick="runner_up")))
    robust = grid.expand({**config(block(algorithms=["sync_sgd"], tuned=True, pick="runner_up")), "tune": TUNE})
    [final] = [k for k in robust if k.stage == "runs"]
    assert final.setting == "tuned-runnerup" and robust[final]["tuned_pick"] == "runner_up"
    control = grid.expand({**config(block(algorithms=["sync_sgd"], tuned=True, scale={"lr": 0.1})), "tune": TUNE})
    [final] = [k for k in control if k.stage == "runs"]
    assert final.setting == "tuned-lr0.1x" and control[final]["tuned_scale"] == "lr=0.1"


# ---- plug-ins -------------------------------------------------------------------


def test_a_config_plugin_model_runs_with_its_function_and_a_built_in_without():
    cfg = config(block(models=["tiny_mlp", "lenet"], algorithms=["sync_sgd"], workers=[2]))
    cfg["plugins"] = {"models": {"tiny_mlp": "my_models:tiny_mlp"}, "datasets": {}}
    runs = grid.expand(cfg)
    mine, builtin = (RunKey("digits", model, "sync_sgd", "local", 2, 0) for model in ("tiny_mlp", "lenet"))
    assert grid_rules.train_options(mine, runs, cfg)["model_from"] == "my_models:tiny_mlp"
    assert grid_rules.train_options(builtin, runs, cfg)["model_from"] is None
    assert "--model-from my_models:tiny_mlp" in grid_rules.train_flags(mine, runs, cfg)
    assert "--model-from" not in grid_rules.train_flags(builtin, runs, cfg)


def test_a_plugin_datasets_file_gives_its_size_and_must_carry_its_name(tmp_path, monkeypatch):
    """The shard check reads an existing data/hdf5/NAME.h5 (a plug-in's, put there by hand) for its size."""
    import numpy as np

    from scaledl.data.hdf5 import write_dataset

    monkeypatch.chdir(tmp_path)
    cfg = config(block(dataset="survey", algorithms=["sync_sgd"], workers=[4]), batch_size=32)
    cfg["plugins"] = {"models": {}, "datasets": {"survey": {"converter": None, "raw": None, "seed": 0}}}
    assert len(grid.expand(cfg)) == 1  # no file yet: the size is unknown, the job checks its shard

    def put(name: str, n_train: int) -> None:
        images = np.zeros((n_train, 1, 8, 8), np.uint8)
        labels = np.arange(n_train) % 2
        write_dataset(
            "data/hdf5/survey.h5",
            dataset=name,
            train=(images, labels),
            test=(images[:4], labels[:4]),
            classes=2,
            class_names=None,
            source_sha256="0" * 64,
        )

    put("survey", 100)
    assert datasets.train_images("survey", {}) == 100
    assert "batch 32 is larger than a worker's shard of 25 images (100 survey training images" in refused(cfg)
    put("other", 400)
    assert refused(cfg).startswith(
        "experiments[0]: data/hdf5/survey.h5 holds dataset 'other' (its `dataset` attribute)"
    )
    (tmp_path / "data/hdf5/survey.h5").write_bytes(b"not hdf5")
    assert "not an HDF5 file" in refused(cfg)


def test_a_regime_map_needs_a_simulated_platform_and_a_timing_free_pair():
    config = {
        "platforms": {"local": {"kind": "local"}, "sim": {"kind": "simulated", "platform_file": "k80x8"}},
        "regime_map": {"enabled": True, "claim": "sync_easgd3:easgd", "platform": "sim", "dataset": "mnist",
                       "model": "lenet", "workers": 8},
    }  # fmt: skip
    regime.check(config)
    assert regime.map_of(config)["workers"] == 8 and regime.map_of({"regime_map": {"enabled": False}}) is None
    for change, words in (
        ({"platform": "local"}, "not a platform of kind simulated"),
        ({"claim": "sync_easgd3:nope"}, "'nope' is not an algorithm"),
        ({"claim": "async_easgd:async_sgd"}, "depend on the timing"),
    ):
        with pytest.raises(GridError, match=words):
            regime.check({**config, "regime_map": {**config["regime_map"], **change}})


def test_tuning_seeds_never_overlap_final_seeds_in_any_shipped_config():
    """A final run must not repeat a trial the choice was selected on (a point passes the tune only where its
    seeds converged): every shipped config's tuned blocks keep their final seeds apart from the trials'."""
    from shipped_configs import REPO, shipped

    from scaledl.grid.keys import TUNE_STAGE
    from scaledl.grid.runs import expand

    for name in sorted(path.name for path in (REPO / "config").glob("*.yaml")):
        runs = expand(shipped(name))
        trial = {key.seed for key in runs if key.stage == TUNE_STAGE}
        tuned = {key.seed for key in runs if key.stage != TUNE_STAGE and key.setting.startswith("tuned")}
        assert not trial & tuned, (name, sorted(trial & tuned))


def test_a_tune_seed_among_the_final_seeds_is_refused():
    from shipped_configs import shipped

    from scaledl.grid.keys import GridError
    from scaledl.grid.runs import expand

    config = shipped("paper_small.yaml")
    config["tune"] = {**config["tune"], "seed": 0, "confirm": {"seeds": 0}}
    with pytest.raises(GridError, match=r"tune stage's seeds \[0, 1\] overlap the block's final seeds at \[0, 1\]"):
        expand(config)
    # the confirmation's seeds follow the grid's, and are refused alike: grid 4, 5; confirmation 6-9
    config["tune"] = {**config["tune"], "seed": 4, "confirm": {"seeds": 4, "misses": 1}}
    with pytest.raises(
        GridError, match=r"seeds \[4, 5, 6, 7, 8, 9\] overlap the block's final seeds at \[4, 5, 6, 7\]"
    ):
        expand(config)


def test_a_runs_protocol_is_decoded_beside_the_code_that_encodes_its_setting():
    assert tune.protocol_of(tune.scaled_setting({})) == "tuned"
    assert tune.protocol_of(tune.scaled_setting({}, pick="runner_up")) == "runner_up"
    assert tune.protocol_of(tune.scaled_setting({"lr": 0.1})) == "control"
    assert tune.protocol_of("") == tune.protocol_of("lr0.05") == "shared"
    assert tune.reads_choice(tune.scaled_setting({"lr": 0.1})) and not tune.reads_choice("lr0.05")
    assert tune.at_runner_up(tune.scaled_setting({}, pick="runner_up")) and not tune.at_runner_up("tuned")


def test_chosen_csv_has_one_reader_for_the_tuned_runs_and_the_claims(tmp_path):
    path = tmp_path / "chosen.csv"
    path.write_text(
        "dataset,model,algorithm,platform,workers,tuned,lr,runner_up_lr,edge,budget_ok\n"
        "digits,lenet,async_easgd,local,2,lr,0.064,,low,True\n"
    )
    (choice,) = tune.read_choices(path, "--chosen")
    assert (choice.workers, choice.lr, choice.runner_up_lr, choice.edge, choice.tuned) == (2, 0.064, None, "low", "lr")
    assert choice.budget_ok == "True"
    run = types.SimpleNamespace(dataset="digits", model="lenet", algorithm="async_easgd", platform="local", workers=2)
    assert tune.choice_for([choice], run) is choice
    assert tune.choice_for([choice], types.SimpleNamespace(**{**vars(run), "workers": 4})) is None
    with pytest.raises(UserError, match=r"^--chosen .*nowhere.csv: cannot read it"):
        tune.read_choices(tmp_path / "nowhere.csv", "--chosen")
    (tmp_path / "bad.csv").write_text("dataset,model\ndigits,lenet\n")
    with pytest.raises(
        UserError, match=r"not the tune stage's chosen.csv \(no column algorithm, platform, workers, lr\)"
    ):
        tune.read_choices(tmp_path / "bad.csv", "--tuned-from")
