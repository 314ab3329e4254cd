"""What each job asks for (scaledl.grid.jobs): the netbench job of a measured machine and a prepare job."""

from __future__ import annotations

import pytest
from shipped_configs import shipped

from scaledl.data import datasets
from scaledl.grid import jobs
from scaledl.grid.runs import expand


def test_the_netbench_job_is_its_placement_on_its_platform():
    config = shipped("cluster.yaml")
    runs = expand(config)
    job = jobs.netbench_job("gpu", runs, config)
    assert job == jobs.netbench_resources(
        jobs.netbench_placement("gpu", runs, config), config["platforms"]["gpu"], config["netbench"]
    )
    # two whole nodes of one-core ranks for minutes, as the α-β model needs (the sweeps span 8 nodes)
    assert (job["nodes"], job["tasks"], job["cpus_per_task"], job["mem_mb"], job["runtime"]) == (2, 8, 1, 2304, 9)
    assert list(job) == list(jobs.RESOURCES)


@pytest.mark.parametrize("decoders, minutes, mem_mb", [(1, 504, 4000), (8, 120, 7500)])
def test_a_prepare_job_is_sized_by_its_dataset(decoders, minutes, mem_mb):
    settings = {"workers": decoders}
    assert jobs.prepare_resources("imagenet", settings) == {
        "cpus_per_task": decoders,
        "mem_mb": mem_mb,
        "mem_mb_per_cpu": None,
        "runtime": minutes,
    }
    assert jobs.prepare_threads(settings) == decoders
    assert jobs.prepare_resources("mnist", {})["runtime"] == datasets.PREPARE_RUNTIME


def test_a_platforms_hardware():
    assert jobs.hardware_of({"kind": "simulated", "simulates": "knl"}) == "knl"
    assert jobs.hardware_of({"kind": "knl"}) == "knl"
    assert jobs.hardware_of({"kind": "gpu", "device": None, "gpus_per_node": 4}) == "gpu"
    assert jobs.hardware_of({"kind": "local", "device": "cpu"}) == "cpu"
