"""What each job of the workflow asks for: a run's placement, and the resources of train, netbench and prepare jobs.

A training run is laid out on its platform by scaledl.grid.placement; its job
asks Slurm for that layout in the names the executor plugin reads (RESOURCES),
and runs on as many of Snakemake's cores as its ranks occupy. The network
stage measures each distinct machine once (platforms equal but for time limit
or memory share a measurement) on what the α-β model needs, not on the
largest run's allocation. A prepare job's size follows from its dataset
(scaledl.data.datasets).

Plain functions of the validated config: no torch, no MPI, no Snakemake.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from scaledl.algorithms import ALGORITHMS
from scaledl.data import datasets
from scaledl.grid.keys import GridError, RunKey, RunSettings
from scaledl.grid.placement import Placement, device_of, memory, place, ranks_per_node, slurm_extra
from scaledl.net.ladder import bound_minutes, parse_size

# The `resources:` of a placed MPI job, in the names the Slurm executor plugin reads:
# mem_mb -> --mem (per node), mem_mb_per_cpu -> --mem-per-cpu (which the plugin writes instead when set),
# runtime -> -t, tasks -> --ntasks, nodes -> --nodes, cpus_per_task -> --cpus-per-task,
# slurm_partition -> -p, constraint -> -C, slurm_extra appended as is. None leaves a resource out,
# the profile's default-resources included.
RESOURCES = (
    "mem_mb",
    "mem_mb_per_cpu",
    "runtime",
    "tasks",
    "nodes",
    "cpus_per_task",
    "slurm_partition",
    "constraint",
    "slurm_extra",
)


def hardware_of(platform: Mapping) -> str:
    """gpu, knl or cpu: what a platform's ranks compute on, as the claims' `needs` name it (a simulated
    platform's: the device it simulates)."""
    if platform.get("kind") == "simulated":
        return platform["simulates"]
    if device_of(platform) == "cuda":
        return "gpu"
    return "knl" if platform.get("kind") == "knl" else "cpu"


def placement_of(key: RunKey, config: Mapping) -> Placement:
    """Nodes, tasks, CPUs and GPUs of a run (scaledl.grid.placement); PlacementError if it cannot be laid out."""
    return place(
        key.platform,
        config["platforms"][key.platform],
        key.workers,
        needs_master=ALGORITHMS[key.algorithm].needs_master,
    )


# Platform keys that change neither the machines nor where the ranks sit on them (time limit, memory, the
# ranks' memory binding): two platforms equal but for these share one network measurement (a
# strong-scaling alias with a longer time limit, say).
NOT_MACHINE_KEYS = frozenset({"runtime", "mem_mb_per_node", "mem_mb_per_cpu", "numactl"})


def machine_of(platform: Mapping) -> tuple:
    """What a platform's network measurement depends on: its settings but NOT_MACHINE_KEYS, hashable."""
    return tuple(sorted((key, repr(value)) for key, value in platform.items() if key not in NOT_MACHINE_KEYS))


def netbench_groups(runs: Mapping[RunKey, RunSettings], config: Mapping) -> dict[str, list[str]]:
    """{measured platform: the platforms with runs that share its measurement}, one entry per distinct
    machine (machine_of), each named after its first platform in sorted order."""
    groups: dict[tuple, list[str]] = {}
    for platform in sorted({key.platform for key in runs}):
        groups.setdefault(machine_of(config["platforms"][platform]), []).append(platform)
    return {members[0]: members for members in groups.values()}


def measured_as(platform: str, runs: Mapping[RunKey, RunSettings], config: Mapping) -> str:
    """The platform whose netbench measurement serves `platform` (itself, or the first of its machine)."""
    for measured, members in netbench_groups(runs, config).items():
        if platform in members:
            return measured
    raise GridError(f"platform {platform!r} has no runs in this config: nothing to measure")


def netbench_members(platform: str, runs: Mapping[RunKey, RunSettings], config: Mapping) -> list[str]:
    """The platforms whose runs the measurement of `platform` serves; GridError if it has none."""
    groups = netbench_groups(runs, config)
    if platform in groups:
        return groups[platform]
    for measured, members in groups.items():
        if platform in members:
            raise GridError(
                f"platform {platform!r} is measured as {measured!r} (the same machine): "
                f"ask for the netbench and comm_model files of {measured}"
            )
    raise GridError(f"platform {platform!r} has no runs in this config: nothing to measure")


def netbench_placement(platform: str, runs: Mapping[RunKey, RunSettings], config: Mapping) -> Placement:
    """The network stage's allocation for the measured `platform`: what the α-β model needs, and no more.

    The model (scaledl.net.alphabeta) takes α and β from a pair of ranks on two
    nodes, and γ from one rank: the measurement asks for two nodes (one when no
    run of the machine spans more) of the platform's ranks per node, one core
    per rank (its ranks compute nothing) and no GPU (it times host buffers); a
    local platform gets 2 ranks. A 64-node sweep is measured on 2 nodes, not 64.
    """
    members = netbench_members(platform, runs, config)
    settings = config["platforms"][platform]
    kind = settings.get("kind", "local")
    if kind == "local":
        return Placement(kind, 2, 2, None, 2, 1, 0, "cpu")
    if kind == "simulated":  # two simulated ranks, on two hosts of the platform: one process
        return Placement(kind, 2, 2, None, 1, 1, 0, "cpu")
    spans = max(placement_of(key, config).nodes or 1 for key in runs if key.platform in members)
    per_node = ranks_per_node(settings)
    if spans > 1:
        ranks, nodes = 2 * per_node, 2
    else:
        largest = max(key.workers for key in runs if key.platform in members)
        ranks, nodes = max(2, min(per_node, largest)), 1
    return Placement(kind, ranks, ranks, nodes, math.ceil(ranks / nodes), 1, 0, "cpu")


NETBENCH_MEM_MB_PER_RANK = 512  # the interpreter, numpy and MPI, beside the message buffers


def netbench_resources(placement: Placement, platform: Mapping, netbench: Mapping) -> dict[str, Any]:
    """The RESOURCES of a network measurement: its placement on the platform's partition, nodes and
    `exclusive`, memory for its buffers (about four of the largest message per rank), and a time limit
    from the ladder it runs over a deliberately slow network (scaledl.net.ladder.bound_minutes), not
    the platform's runtime; no early-warning signal (it has nothing to checkpoint)."""
    largest_mb = math.ceil(parse_size(netbench["max_size"]) / 2**20)
    return {
        **job_resources(placement, platform),
        "mem_mb": placement.tasks_per_node * (NETBENCH_MEM_MB_PER_RANK + 4 * largest_mb),
        "mem_mb_per_cpu": None,
        "runtime": bound_minutes(netbench["max_size"], netbench["repeats"], placement.ranks),
        "slurm_extra": slurm_extra(platform, placement, warn=False),
    }


def netbench_job(platform: str, runs: Mapping[RunKey, RunSettings], config: Mapping) -> dict[str, Any]:
    """The RESOURCES of the network measurement of the measured `platform` (netbench_placement)."""
    placement = netbench_placement(platform, runs, config)
    return netbench_resources(placement, config["platforms"][platform], config["netbench"])


def netbench_threads(placement: Placement, local_cores: int | None) -> int:
    """`threads:` of a network measurement. Run by Snakemake on this machine (local_cores: its --cores)
    a local platform's takes every core, so no training job runs beside it; under a cluster executor
    (local_cores None: there is no --cores, and the job has its own allocation) the cores it occupies."""
    if placement.kind == "local" and local_cores:
        return max(cores_of(placement), local_cores)
    return cores_of(placement)


def cores_of(placement: Placement) -> int:
    """The cores a job occupies (its `threads:`, so `--cores N` caps the ranks running at once locally)."""
    return placement.tasks * placement.cpus_per_task


def train_resources(key: RunKey, runs: Mapping[RunKey, RunSettings], config: Mapping) -> dict[str, Any]:
    """The RESOURCES of run `key`'s job: its placement's on its platform, a time-only simulation's memory where
    its settings say so."""
    time_only = bool(runs[key].get("time_only")) if key in runs else False
    return job_resources(placement_of(key, config), config["platforms"][key.platform], time_only)


def job_resources(placement: Placement, platform: Mapping, time_only: bool = False) -> dict[str, Any]:
    """The RESOURCES of a job laid out as `placement` on `platform`, the same for every MPI rule (`time_only`:
    a time-only simulation's memory)."""
    mem_mb_per_node, mem_mb_per_cpu = memory(platform, placement, time_only)
    return {
        "mem_mb": mem_mb_per_node,
        "mem_mb_per_cpu": mem_mb_per_cpu,
        "runtime": platform["runtime"],
        "tasks": placement.tasks,  # MPI ranks: workers, plus one for a dedicated master (a simulation: one)
        # a local platform is one machine: under Slurm, one node
        "nodes": placement.nodes if placement.cluster else 1,
        "cpus_per_task": placement.cpus_per_task,
        "slurm_partition": platform["partition"],
        "constraint": platform["constraint"],
        "slurm_extra": slurm_extra(platform, placement),
    }


# The `prepare` job (workflow/rules/data.smk): one task of its decoding processes' cores, memory per job, and a
# time limit that grows with the images to decode (scaledl.data.datasets).
PREPARE_RESOURCES = ("cpus_per_task", "mem_mb", "mem_mb_per_cpu", "runtime")


def prepare_threads(settings: Mapping) -> int:
    """Cores of a dataset's `prepare` job: its decoding processes (`workers`, ImageNet), else one."""
    return datasets.decoders(settings)


def prepare_resources(dataset: str, settings: Mapping) -> dict[str, Any]:
    """cpus_per_task, mem_mb, mem_mb_per_cpu (None: left out, so a profile's per-CPU default cannot
    multiply it by the cores) and runtime of the `prepare` job of `dataset` with its `datasets.<name>`
    settings. cpus_per_task repeats prepare_threads because Snakemake caps a job's threads at --cores,
    which a dry run sets to 1: the resource keeps the printed request the submitted one."""
    return {
        "cpus_per_task": prepare_threads(settings),
        "mem_mb": datasets.prepare_mem_mb(settings),
        "mem_mb_per_cpu": None,
        "runtime": datasets.prepare_minutes(dataset, settings),
    }
