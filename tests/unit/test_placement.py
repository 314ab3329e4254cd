"""Job shapes of training runs on local, cpu, knl and gpu platforms (scaledl.grid.placement)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from scaledl.grid.placement import DEFAULT_MEM_MB_PER_CPU, PlacementError, memory, place, slurm_extra, workers_for_nodes

GPU = {"kind": "gpu", "gpus_per_node": 4, "ranks_per_gpu": 1, "threads": 8, "cores_per_node": 64}
KNL = {"kind": "knl", "cores_per_node": 68, "ranks_per_node": 4, "threads": None}


def test_local_is_one_machine_of_ranks():
    shape = place("local", {"kind": "local", "threads": 1}, 2, needs_master=True)
    assert (shape.ranks, shape.nodes, shape.tasks_per_node, shape.cpus_per_task) == (3, None, 3, 1)
    assert shape.device == "cpu" and not shape.cluster
    assert slurm_extra({"kind": "local"}, shape) is None


def test_defaults_are_the_old_local_platform():
    shape = place("local", {}, 2, needs_master=False)
    assert (shape.kind, shape.ranks, shape.cpus_per_task, shape.device) == ("local", 2, 1, "cpu")


@pytest.mark.parametrize("nodes", [1, 2, 4, 8])
def test_gpu_node_sweep_one_rank_per_gpu(nodes):
    workers = workers_for_nodes("gpu", GPU, nodes)
    assert workers == 4 * nodes
    shape = place("gpu", GPU, workers, needs_master=False)
    assert (shape.nodes, shape.ranks, shape.tasks_per_node, shape.cpus_per_task) == (nodes, 4 * nodes, 4, 8)
    assert shape.device == "cuda"
    assert slurm_extra(GPU, shape) == "--ntasks-per-node=4 --gpus-per-node=4"


@pytest.mark.parametrize("nodes", [1, 2, 8])
def test_gpu_master_is_an_extra_task_on_the_first_node(nodes):
    shape = place("gpu", GPU, 4 * nodes, needs_master=True)
    assert (shape.nodes, shape.ranks, shape.tasks_per_node) == (nodes, 4 * nodes + 1, 5)
    assert shape.gpus_per_node == 4  # the master needs no GPU: the request stays per node


def test_gpu_ranks_per_gpu_and_type():
    platform = {**GPU, "ranks_per_gpu": 2, "gpu_type": "a100", "threads": 4}
    shape = place("gpu", platform, workers_for_nodes("gpu", platform, 2), needs_master=False)
    assert (shape.nodes, shape.ranks, shape.tasks_per_node) == (2, 16, 8)
    assert slurm_extra(platform, shape) == "--ntasks-per-node=8 --gpus-per-node=a100:4"


def test_knl_workers_get_the_same_cores_with_and_without_a_master():
    # 68 cores over 4 workers and a share kept for a possible master: 13 each, whatever the algorithm
    sync = place("knl", KNL, 8, needs_master=False)
    assert (sync.nodes, sync.ranks, sync.tasks_per_node, sync.cpus_per_task) == (2, 8, 4, 13)
    master = place("knl", KNL, 8, needs_master=True)
    assert (master.nodes, master.ranks, master.tasks_per_node, master.cpus_per_task) == (2, 9, 5, 13)
    assert master.device == "cpu"
    assert master.tasks_per_node * master.cpus_per_task <= 68


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 5, 6, 8, 12, 32])
@pytest.mark.parametrize(
    "platform", [KNL, {**GPU, "threads": None}, {"kind": "cpu", "ranks_per_node": 8, "cores_per_node": 48}]
)
def test_threads_never_depend_on_the_algorithm(platform, workers):
    sync = place("p", platform, workers, needs_master=False)
    master = place("p", platform, workers, needs_master=True)
    assert sync.cpus_per_task == master.cpus_per_task
    assert master.tasks_per_node * master.cpus_per_task <= platform["cores_per_node"]


def test_master_share_false_gives_the_workers_every_core_and_refuses_a_master():
    chip = {**KNL, "ranks_per_node": 16, "master_share": False}
    assert [place("knl_chip", chip, p, needs_master=False).cpus_per_task for p in (1, 2, 4, 8, 16)] == [
        68,
        34,
        17,
        8,
        4,
    ]
    with pytest.raises(PlacementError, match=r"^platform 'knl_chip' has master_share: false.*set master_share: true"):
        place("knl_chip", chip, 4, needs_master=True)
    # an explicit threads is the same for every algorithm: the master only has to fit
    assert place("knl_chip", {**chip, "threads": 8}, 4, needs_master=True).cpus_per_task == 8


def test_rank_count_below_a_node_uses_one_node():
    shape = place("knl", KNL, 2, needs_master=False)
    assert (shape.nodes, shape.ranks, shape.tasks_per_node, shape.cpus_per_task) == (1, 2, 2, 22)  # 68 // (2 + 1)


def test_more_shares_than_cores_names_the_fix():
    with pytest.raises(
        PlacementError,
        match=r"5 shares of a node's cores \(4 workers and a master\) exceed "
        r"cores_per_node 4; lower ranks_per_node",
    ):
        place("c", {"kind": "cpu", "ranks_per_node": 4, "cores_per_node": 4}, 4, needs_master=False)


def test_exclusive_asks_for_whole_nodes():
    shape = place("knl", KNL, 8, needs_master=True)
    assert slurm_extra({**KNL, "exclusive": True}, shape) == "--ntasks-per-node=5 --exclusive"
    assert (
        slurm_extra({**KNL, "exclusive": False, "slurm_extra": "--qos=long"}, shape) == "--ntasks-per-node=5 --qos=long"
    )
    gpu = place("gpu", GPU, 8, needs_master=False)
    assert slurm_extra({**GPU, "exclusive": True}, gpu) == "--ntasks-per-node=4 --gpus-per-node=4 --exclusive"
    assert slurm_extra({**KNL, "warn_before_limit_s": 120}, shape) == "--ntasks-per-node=5 --signal=USR1@120"
    with pytest.raises(PlacementError, match="use `exclusive: true` instead of --exclusive in slurm_extra"):
        place("knl", {**KNL, "slurm_extra": "--exclusive"}, 4, needs_master=False)
    with pytest.raises(PlacementError, match="first half of their 180 s runtime"):
        place("knl", {**KNL, "runtime": 3, "warn_before_limit_s": 120}, 4, needs_master=False)


def test_memory_per_node_does_not_grow_with_the_cores():
    for cores in (68, 272):  # some sites count KNL hardware threads
        platform = {**KNL, "cores_per_node": cores, "mem_mb_per_node": 86000}
        shape = place("knl", platform, 8, needs_master=True)
        assert memory(platform, shape) == (86000, None)


def test_memory_per_cpu_only_when_given_else_the_default():
    shape = place("knl", KNL, 8, needs_master=True)  # 5 ranks × 13 cores on the first node
    assert memory({**KNL, "mem_mb_per_cpu": 1000}, shape) == (5 * 13 * 1000, 1000)
    assert memory(KNL, shape) == (5 * 13 * DEFAULT_MEM_MB_PER_CPU, DEFAULT_MEM_MB_PER_CPU)
    with pytest.raises(PlacementError, match="sets both mem_mb_per_node and mem_mb_per_cpu; keep one"):
        place("knl", {**KNL, "mem_mb_per_node": 86000, "mem_mb_per_cpu": 1000}, 4, needs_master=False)


def test_uneven_rank_count_spreads_over_nodes():
    shape = place("cpu", {"kind": "cpu", "ranks_per_node": 4}, 6, needs_master=False)
    assert (shape.nodes, shape.tasks_per_node, shape.cpus_per_task) == (2, 3, 1)


def test_gpu_platform_needs_cores_or_threads():
    bare = {"kind": "gpu", "gpus_per_node": 4}
    with pytest.raises(PlacementError, match=r"^platform 'g': kind gpu needs cores_per_node .* or threads"):
        place("g", bare, 4, needs_master=False)
    assert place("g", {**bare, "threads": 6}, 4, needs_master=True).cpus_per_task == 6
    assert place("g", {**bare, "cores_per_node": 64}, 4, needs_master=True).cpus_per_task == 12  # 64 // 5
    assert place("g", {**bare, "cores_per_node": 64}, 4, needs_master=False).cpus_per_task == 12


def test_master_that_does_not_fit_names_the_fix():
    platform = {**KNL, "threads": 17}  # 4 × 17 = 68: no core left for a master
    assert place("knl", platform, 4, needs_master=False).cpus_per_task == 17
    with pytest.raises(PlacementError, match=r"extra rank on the first node.*5 × 17 threads exceed cores_per_node 68"):
        place("knl", platform, 4, needs_master=True)


@pytest.mark.parametrize(
    "platform, message",
    [
        ({"kind": "knl"}, "needs ranks_per_node"),
        ({"kind": "gpu"}, "needs gpus_per_node"),
        ({"kind": "cpu", "ranks_per_node": 2, "gpus_per_node": 4}, "gpus_per_node applies to kind gpu"),
        ({"kind": "local", "ranks_per_node": 2}, "ranks_per_node applies to kind cpu or knl"),
        ({"kind": "knl", "ranks_per_node": 2, "device": "cuda"}, "no GPUs"),
        ({"kind": "tpu"}, "not one of"),
    ],
)
def test_inconsistent_platform_is_refused(platform, message):
    with pytest.raises(PlacementError, match=message):
        place("p", platform, 2, needs_master=False)


def test_nodes_need_a_cluster_platform():
    with pytest.raises(PlacementError, match="list `workers` instead of `nodes`"):
        workers_for_nodes("local", {"kind": "local"}, 2)


def test_the_platforms_table_documents_every_schema_key_with_its_default():
    """config/README.md's `platforms` table and the schema name the same keys and defaults."""
    root = Path(__file__).resolve().parents[2]
    schema = yaml.safe_load((root / "workflow/schemas/config.schema.yaml").read_text())["$defs"]["platform"]
    text = (root / "config/README.md").read_text()
    table = text.split("## `platforms`", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", table, re.M))
    expected = {key: yaml.safe_dump(prop["default"]).split("\n")[0] for key, prop in schema["properties"].items()}
    assert documented == expected


def test_a_simulated_platform_is_one_process_on_this_cpu():
    sim = {"kind": "simulated", "platform_file": "k80x8", "simulates": "gpu"}
    shape = place("gpu8_sim", sim, 8, needs_master=True)
    assert (shape.ranks, shape.tasks_per_node, shape.nodes, shape.device, shape.cluster) == (9, 1, None, "cpu", False)
    assert workers_for_nodes("knl_sim", {**sim, "ranks_per_node": 1}, 64) == 64
    with pytest.raises(PlacementError, match="needs simulates"):
        place("bad", {"kind": "simulated", "platform_file": "k80x8"}, 2, needs_master=False)
    with pytest.raises(PlacementError, match="remove device"):
        place("bad", {**sim, "device": "cuda"}, 2, needs_master=False)
    with pytest.raises(PlacementError, match="platform_file applies to kind simulated"):
        place("bad", {"kind": "local", "platform_file": "k80x8"}, 2, needs_master=False)


def test_a_simulated_job_asks_memory_for_every_rank_it_simulates():
    sim = {"kind": "simulated", "platform_file": "k80x8", "simulates": "gpu"}
    shape = place("gpu8_sim", sim, 8, needs_master=True)
    assert memory(sim, shape) == (9 * DEFAULT_MEM_MB_PER_CPU, None)  # one --mem for the 9 ranks' replicas
    assert memory({**sim, "mem_mb_per_node": 4000}, shape) == (4000, None)


def test_a_clock_belongs_to_a_simulated_platform_only():
    with pytest.raises(PlacementError, match=r"^platform 'p': clock applies to kind simulated, not 'local'; remove it"):
        place("p", {"kind": "local", "clock": "alphabeta"}, 2, needs_master=False)
