"""Job shapes of training runs on local, cpu, knl and gpu platforms (scaledl.placement)."""

from __future__ import annotations

import pytest

from scaledl.placement import PlacementError, place, slurm_extra, workers_for_nodes

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


def test_knl_threads_share_the_cores_out():
    sync = place("knl", KNL, 8, needs_master=False)
    assert (sync.nodes, sync.ranks, sync.tasks_per_node, sync.cpus_per_task) == (2, 8, 4, 17)
    master = place("knl", KNL, 8, needs_master=True)
    assert (master.nodes, master.ranks, master.tasks_per_node, master.cpus_per_task) == (2, 9, 5, 13)
    assert master.device == "cpu"
    assert slurm_extra({**KNL, "slurm_extra": "--exclusive"}, master) == "--ntasks-per-node=5 --exclusive"


def test_rank_count_below_a_node_uses_one_node():
    shape = place("knl", KNL, 2, needs_master=False)
    assert (shape.nodes, shape.ranks, shape.tasks_per_node, shape.cpus_per_task) == (1, 2, 2, 34)


def test_uneven_rank_count_spreads_over_nodes():
    shape = place("cpu", {"kind": "cpu", "ranks_per_node": 4}, 6, needs_master=False)
    assert (shape.nodes, shape.tasks_per_node, shape.cpus_per_task) == (2, 3, 1)


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
