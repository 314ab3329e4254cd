"""Where the ranks of one training job go: nodes, tasks per node, CPUs and GPUs.

The config's `platforms` describe machines (workflow/schemas/config.schema.yaml);
this module turns a platform, an algorithm and a worker count into the shape of
one MPI job. workflow/rules/common.smk turns that shape into Snakemake
resources, which the Slurm executor plugin turns into `sbatch` flags, and the
same shape gives the local `mpiexec -n`. Pure functions on plain mappings: no
torch, no MPI, no Snakemake, so the workflow can import it while it parses.

Kinds of platform:

- `local`: this machine. `mpiexec -n RANKS`; no nodes, no partition.
- `cpu` / `knl`: `ranks_per_node` MPI ranks per node, each with `threads`
  cores (default: `cores_per_node` shared out evenly).
- `gpu`: `gpus_per_node` GPUs, `ranks_per_gpu` ranks on each, `threads` CPU
  cores per rank. Every rank sees all GPUs of its node and picks
  local rank % GPUs (scaledl.train.pick_device), so one `--gpus-per-node`
  request serves both the master-less and the master-based layouts.

Layout on a cluster platform (the master question):

- P workers fill `nodes = ceil(P / ranks_per_node)` nodes.
- An algorithm with a dedicated master runs one more rank, rank 0. It goes
  on the first node as an extra task: the job asks for P + 1 tasks and at most
  ranks_per_node + 1 per node (`--ntasks-per-node` is a maximum when `--ntasks`
  is given). Slurm's default block distribution spreads tasks evenly and numbers
  them node by node, so the first node holds the master and ranks_per_node
  workers and every other node ranks_per_node workers: on a GPU node each GPU
  still serves ranks_per_gpu workers, and the master stays on the CPU.
- The first node therefore needs room for one more rank: (ranks on it) × threads
  must fit in cores_per_node when that is given. With `threads: null` the cores
  are shared out over the ranks of the fullest node, master included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

KINDS = ("local", "cpu", "knl", "gpu")
CLUSTER_KINDS = ("cpu", "knl", "gpu")

# keys that only make sense for some kinds; a non-null value elsewhere is an error
_ONLY_FOR = {
    "ranks_per_node": ("cpu", "knl"),
    "gpus_per_node": ("gpu",),
    "gpu_type": ("gpu",),
    "cores_per_node": CLUSTER_KINDS,
}
_REQUIRED = {"cpu": ("ranks_per_node",), "knl": ("ranks_per_node",), "gpu": ("gpus_per_node",)}


class PlacementError(ValueError):
    """A platform or a run that cannot be laid out; the message says what to change."""


@dataclass(frozen=True)
class Placement:
    """The shape of one training job."""

    kind: str
    workers: int
    ranks: int               # MPI ranks = Slurm tasks: workers, plus 1 for a dedicated master
    nodes: int | None        # None on `local`: one machine, no Slurm node count
    tasks_per_node: int      # ranks on the fullest node (the first: it holds the master)
    cpus_per_task: int       # CPU cores per rank = torch threads per rank (Slurm --cpus-per-task)
    gpus_per_node: int       # 0 unless kind is gpu
    device: str              # scaledl train --device

    @property
    def cluster(self) -> bool:
        return self.kind in CLUSTER_KINDS


def check_platform(name: str, platform: Mapping) -> None:
    """Raise PlacementError if the keys of `platform` do not fit its kind."""
    kind = platform.get("kind", "local")
    if kind not in KINDS:
        raise PlacementError(f"platform {name!r}: kind {kind!r} is not one of {', '.join(KINDS)}")
    for key, kinds in _ONLY_FOR.items():
        if platform.get(key) is not None and kind not in kinds:
            raise PlacementError(
                f"platform {name!r}: {key} applies to kind {' or '.join(kinds)}, not {kind!r}; remove it"
            )
    for key in _REQUIRED.get(kind, ()):
        if platform.get(key) is None:
            raise PlacementError(f"platform {name!r}: kind {kind!r} needs {key}")
    if kind in ("cpu", "knl") and platform.get("device") == "cuda":
        raise PlacementError(f"platform {name!r}: kind {kind!r} has no GPUs; use kind gpu for device cuda")


def ranks_per_node(platform: Mapping) -> int | None:
    """Worker ranks one node holds (None on `local`, which has no nodes)."""
    kind = platform.get("kind", "local")
    if kind == "gpu":
        return platform["gpus_per_node"] * platform.get("ranks_per_gpu", 1)
    if kind in ("cpu", "knl"):
        return platform["ranks_per_node"]
    return None


def workers_for_nodes(name: str, platform: Mapping, nodes: int) -> int:
    """Workers of a run on `nodes` full nodes of `platform` (a node-count sweep's axis)."""
    check_platform(name, platform)
    per_node = ranks_per_node(platform)
    if per_node is None:
        raise PlacementError(
            f"platform {name!r} is kind local and has no nodes; list `workers` instead of `nodes` "
            "for it, or give the experiment a cluster platform (kind cpu, knl or gpu)"
        )
    return nodes * per_node


def device_of(platform: Mapping) -> str:
    """The configured device, or cuda on a gpu platform and cpu elsewhere."""
    device = platform.get("device")
    if device is not None:
        return device
    return "cuda" if platform.get("kind", "local") == "gpu" else "cpu"


def place(name: str, platform: Mapping, workers: int, *, needs_master: bool) -> Placement:
    """The job shape of `workers` workers (plus a master if `needs_master`) on `platform`."""
    check_platform(name, platform)
    if workers < 1:
        raise PlacementError(f"platform {name!r}: a run needs at least one worker, got {workers}")
    kind = platform.get("kind", "local")
    ranks = workers + 1 if needs_master else workers
    threads = platform.get("threads")
    if kind == "local":
        return Placement(kind, workers, ranks, None, ranks, threads or 1, 0, device_of(platform))

    per_node = ranks_per_node(platform)
    nodes = math.ceil(workers / per_node)
    tasks_per_node = math.ceil(ranks / nodes)   # Slurm spreads tasks evenly; the first node is the fullest
    cores = platform.get("cores_per_node")
    if threads is None:
        threads = cores // tasks_per_node if cores else 1
    if cores and tasks_per_node * threads > cores:
        master = " (a master-based algorithm puts one extra rank on the first node)" if needs_master else ""
        raise PlacementError(
            f"platform {name!r}: {workers} workers need {tasks_per_node} ranks on a node{master}, "
            f"and {tasks_per_node} × {threads} threads exceed cores_per_node {cores}; "
            "lower threads (null shares the cores out) or ranks_per_node"
        )
    gpus = platform["gpus_per_node"] if kind == "gpu" else 0
    return Placement(kind, workers, ranks, nodes, tasks_per_node, threads, gpus, device_of(platform))


def slurm_extra(platform: Mapping, placement: Placement) -> str | None:
    """sbatch flags beyond what the executor plugin writes from resources (None if there are none).

    The plugin writes --nodes, --ntasks, --cpus-per-task, --mem-per-cpu, -p,
    -C and -t itself, and refuses them here; the tasks-per-node ceiling and
    the GPUs per node are ours.
    """
    flags = []
    if placement.cluster:
        flags.append(f"--ntasks-per-node={placement.tasks_per_node}")
    if placement.gpus_per_node:
        gpu_type = platform.get("gpu_type")
        flags.append(f"--gpus-per-node={gpu_type + ':' if gpu_type else ''}{placement.gpus_per_node}")
    if platform.get("slurm_extra"):
        flags.append(platform["slurm_extra"])
    return " ".join(flags) or None
