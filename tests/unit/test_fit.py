"""A job's Slurm request against the nodes `sinfo` lists (scaledl.grid.fit), on stand-in sinfo output."""

from __future__ import annotations

import pytest

from scaledl.grid import fit

# SINFO_COMMAND's format: name|partition|CPUs|memory MB|GRES|features|time limit; one line per node and partition
SINFO = """\
cpu001|cpu*|2|7800|(null)|(null)|1-00:00:00
cpu002|cpu*|2|7800|(null)|(null)|1-00:00:00
gpu01|gpu|64|515000|gpu:a100:4(S:0-1)|a100,ib|2:00:00
gpu02|gpu|64|515000|gpu:a100:4(S:0-1)|a100,ib|2:00:00
gpu03|gpu|64|257000|gpu:v100:2,gpu:tesla:1|v100|2:00:00
knl001|knl|272|96000|(null)|knl,quad,flat|infinite
knl002|knl|272|96000|(null)|knl,quad,cache|infinite
"""


@pytest.fixture
def partitions():
    return fit.parse_sinfo(SINFO)


def test_sinfo_lists_partitions_nodes_and_their_limits(partitions):
    assert list(partitions) == ["cpu", "gpu", "knl"] and fit.default_partition(partitions) == "cpu"
    gpu = partitions["gpu"]
    assert gpu.max_minutes == 120 and partitions["cpu"].max_minutes == 24 * 60 and partitions["knl"].max_minutes is None
    assert gpu.nodes["gpu01"] == fit.Node("gpu01", 64, 515000, {"a100": 4}, frozenset({"a100", "ib"}))
    assert gpu.nodes["gpu03"].gpu_count() == 3 and gpu.nodes["gpu03"].gpu_count("v100") == 2
    assert fit.parse_minutes("30:00") == 30 and fit.parse_minutes("2-03:04:05") == (2 * 24 + 3) * 60 + 5
    assert fit.parse_gres("gpu:4,mps:400") == {"": 4}


@pytest.mark.parametrize("text", ["", "PARTITION AVAIL\ndebug* up", "n|p|two|8000|(null)|(null)|infinite"])
def test_output_of_another_format_is_refused_as_unreadable(text):
    with pytest.raises(fit.SinfoError):
        fit.parse_sinfo(text)


def test_request_of_the_plugins_resources():
    # a training job on 2 GPU nodes: its tasks per node and GPUs are in slurm_extra, memory per node
    train = fit.request_of(
        {
            "nodes": 2,
            "tasks": 9,
            "cpus_per_task": 8,
            "mem_mb": 64000,
            "slurm_partition": "gpu",
            "slurm_extra": "--ntasks-per-node=5 --gpus-per-node=a100:4 --exclusive",
            "runtime": 120,
        }
    )
    assert train == fit.SlurmRequest("gpu", 2, 5, 8, 64000, 4, "a100", None, 120)
    assert train.cpus_per_node == 40
    # memory per CPU is per node × the node's CPUs; a one-task job's CPUs are its threads
    assert fit.request_of({"tasks": 3, "mem_mb_per_cpu": 2000, "mem_mb": 6000}).mem_mb_per_node == 6000
    prepare = fit.request_of({"mem_mb": 4000, "runtime": 504}, threads=8)
    assert (prepare.partition, prepare.nodes, prepare.cpus_per_node, prepare.minutes) == (None, 1, 8, 504)
    assert fit.request_of({"gres": "gpu:2", "nodes": 1}).gpus_per_node == 2


def test_a_request_no_node_can_run_is_refused_in_one_line_naming_the_largest_node(partitions):
    # the default config's master-based run on a cluster of 2-CPU nodes: 3 tasks on one node
    three = fit.SlurmRequest(None, 1, 3, 1, 6000)
    line = fit.refusal("rule train (algorithm=easgd, workers=2)", three, partitions)
    assert line == (
        "rule train (algorithm=easgd, workers=2) asks for 3 task(s) × 1 CPU(s) = 3 CPUs, 6000 MB per node on 1 "
        "node(s), and no node of partition 'cpu' (the default) has that: its largest has 2 CPUs, 7800 MB, 0 GPU(s)"
    )
    assert fit.refusal("job", fit.SlurmRequest("cpu", 2, 2, 1, 7000), partitions) is None  # both nodes fit


@pytest.mark.parametrize(
    "request_, says",
    [
        (fit.SlurmRequest("gpu", 1, 9, 8, 128000, 8), "no node of partition 'gpu' has that: its largest has 64 CPUs"),
        (fit.SlurmRequest("gpu", 1, 4, 8, 600000, 4), "its largest has 64 CPUs, 515000 MB, 4 GPU(s)"),
        (fit.SlurmRequest("gpu", 1, 2, 8, 64000, 2, "h100"), "0 h100 GPU(s)"),
        (fit.SlurmRequest("gpu", 3, 4, 8, 64000, 4, "a100"), "only 2 node(s) of partition 'gpu' have that"),
        (fit.SlurmRequest("gpu", 1, 4, 8, 64000, 4, minutes=180), "asks for 180 min, beyond the 120 min limit"),
        (fit.SlurmRequest("knl", 2, 4, 13, 86000, constraint="knl&flat"), "only 1 node(s) of partition 'knl'"),
        (fit.SlurmRequest("knl", 1, 4, 13, 104000), "no node of partition 'knl' has that"),  # 2000 MB × 52 CPUs
        (
            fit.SlurmRequest("debug", 1, 1, 1, 1000),
            "partition 'debug', which sinfo does not list (it lists cpu, gpu, knl)",
        ),
    ],
)
def test_each_way_a_request_cannot_fit(partitions, request_, says):
    line = fit.refusal("rule train (p)", request_, partitions)
    assert line is not None and says in line and "\n" not in line, line


def test_requests_that_fit(partitions):
    assert fit.refusal("j", fit.SlurmRequest("gpu", 2, 5, 8, 128000, 4, "a100", "a100&ib", 120), partitions) is None
    assert fit.refusal("j", fit.SlurmRequest("gpu", 1, 3, 1, 1000, 3), partitions) is None  # gpu03: 2 v100 + 1 tesla
    assert fit.refusal("j", fit.SlurmRequest("knl", 1, 16, 4, 86000, constraint="knl&flat"), partitions) is None
    # a constraint beyond names, & and | is left to Slurm
    assert fit.refusal("j", fit.SlurmRequest("knl", 2, 4, 13, 86000, constraint="[quad*2]"), partitions) is None
    # no partition named and none marked default: the plugin or Slurm chooses, nothing to check
    no_default = fit.parse_sinfo(SINFO.replace("cpu*", "cpu"))
    assert fit.refusal("j", fit.SlurmRequest(None, 1, 300, 1, None), no_default) is None
