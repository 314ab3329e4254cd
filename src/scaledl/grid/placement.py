"""Where the ranks of one training job go: nodes, tasks per node, CPUs, GPUs and memory.

The config's `platforms` describe machines (workflow/schemas/config.schema.yaml);
this module turns a platform, an algorithm and a worker count into the shape of
one MPI job. workflow/rules/common.smk turns that shape into Snakemake
resources, which the Slurm executor plugin turns into `sbatch` flags, and the
same shape gives the local `mpiexec -n`. Pure functions on plain mappings: no
torch, no MPI, no Snakemake, so the workflow can import it while it parses.

Kinds of platform:

- `local`: one machine. `mpiexec -n RANKS`; under `--profile slurm` a job of
  RANKS tasks on one node (`--nodes=1`), with no partition unless one is given.
- `cpu` / `knl`: `ranks_per_node` MPI ranks per node, each with `threads`
  cores (default: `cores_per_node` shared out, see "Cores per rank").
- `simulated`: a SimGrid platform (`platform_file`: a shipped name or a file;
  `simulates`: gpu, knl or cpu, the device the claims see) that one process
  simulates with every rank an actor (`scaledl simulate`, docs/simulation.md):
  one task of `threads` cores (default 1), on this machine's CPU; with
  `ranks_per_node` a node-count sweep gives P = N × ranks_per_node.
- `gpu`: `gpus_per_node` GPUs, `ranks_per_gpu` ranks on each, `threads` CPU
  cores per rank (or `cores_per_node` shared out; one of the two is required:
  a GPU rank still decodes, loads and copies its batches on the CPU). Every
  rank sees all GPUs of its node and picks local rank % GPUs
  (scaledl.train.loop.pick_device), so one `--gpus-per-node` request serves both
  the master-less and the master-based layouts.

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
  must fit in cores_per_node when that is given.

Cores per rank (`threads: null`, the rule behind --cpus-per-task): a node's
cores_per_node are shared out over the workers of the fullest node plus one
share kept for a master, whether or not the algorithm has one
(`master_share: true`, the default). Every algorithm's workers thus get the
same cores at a given P on a platform, so a master-based and a master-less run
compare algorithms, not core counts: 68 KNL cores and 4 workers a node give
68 // 5 = 13 threads to the workers of sync_sgd and of async_easgd alike (the
share left in a master-less run stays idle, for the system). `master_share:
false` shares the cores over the workers alone (68 // 4 = 17); such a platform
then refuses master-based algorithms with `threads: null`, since their workers
would get fewer cores. An explicit `threads` is the same for every algorithm
anyway. Without cores_per_node (cpu and knl only) a rank gets one core.

Memory: `mem_mb_per_node` asks for that much memory on every node (Snakemake's
`mem_mb`, the plugin's `--mem`, which Slurm counts per node), whatever the
ranks and threads; `mem_mb_per_cpu` (`--mem-per-cpu`) only when it is the one
given; neither gives DEFAULT_MEM_MB_PER_CPU per allocated core. A per-CPU
request grows with cores_per_node, which some sites count in hardware threads
(272 on a 68-core KNL), far past what a node has. A simulated job's one process
holds every rank's model and loader: without mem_mb_per_node it asks for the
per-CPU figure once per rank, as one --mem; a time-only one (its ranks share one replica of every large
buffer: scaledl.sim.replicas) one process's share, the per-CPU figure but at least DEFAULT_MEM_MB_PER_CPU (the
interpreter, torch, SimGrid and the shared replicas of a model of up to about 150 MB of weights), plus
TIME_ONLY_MB_PER_RANK a rank: 2,128 MB for 64 simulated KNL nodes of GoogLeNet (1.4 GB measured), not 128 GB.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

KINDS = ("local", "cpu", "knl", "gpu", "simulated")
CLUSTER_KINDS = ("cpu", "knl", "gpu")
DEFAULT_MEM_MB_PER_CPU = 2000  # MB per allocated core when a platform sets no memory
# A time-only simulated rank's own memory (its actor, modules, inboxes): 1.5 MB measured (scaledl.sim.footprint)
TIME_ONLY_MB_PER_RANK = 2

# keys that only make sense for some kinds; a non-null value elsewhere is an error
_ONLY_FOR = {
    "ranks_per_node": ("cpu", "knl", "simulated"),
    "platform_file": ("simulated",),
    "simulates": ("simulated",),
    "clock": ("simulated",),
    "gpus_per_node": ("gpu",),
    "gpu_type": ("gpu",),
    "cores_per_node": CLUSTER_KINDS,
}
_REQUIRED = {
    "cpu": ("ranks_per_node",), "knl": ("ranks_per_node",), "gpu": ("gpus_per_node",),
    "simulated": ("platform_file", "simulates"),
}  # fmt: skip


class PlacementError(ValueError):
    """A platform or a run that cannot be laid out; the message says what to change."""


@dataclass(frozen=True)
class Placement:
    """The shape of one training job."""

    kind: str
    workers: int
    ranks: int  # MPI ranks = Slurm tasks: workers, plus 1 for a dedicated master
    nodes: int | None  # None on `local`: one machine, no Slurm node count
    tasks_per_node: int  # ranks on the fullest node (the first: it holds the master)
    cpus_per_task: int  # CPU cores per rank = torch threads per rank (Slurm --cpus-per-task)
    gpus_per_node: int  # 0 unless kind is gpu
    device: str  # scaledl train --device

    @property
    def cluster(self) -> bool:
        return self.kind in CLUSTER_KINDS

    @property
    def tasks(self) -> int:
        """Processes of the job (Slurm tasks): one per rank, but one for every rank of a simulation."""
        return 1 if self.kind == "simulated" else self.ranks


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
    if kind == "gpu" and platform.get("threads") is None and platform.get("cores_per_node") is None:
        raise PlacementError(
            f"platform {name!r}: kind gpu needs cores_per_node (the CPU cores of a node, shared out over "
            "its ranks) or threads (CPU cores per rank); without them each rank would get one core"
        )
    if kind == "simulated" and platform.get("device") not in (None, "cpu"):
        raise PlacementError(
            f"platform {name!r}: a simulated platform computes on this machine's CPU (its devices are simulated: "
            "`simulates`); remove device"
        )
    if kind in ("cpu", "knl") and platform.get("device") == "cuda":
        raise PlacementError(f"platform {name!r}: kind {kind!r} has no GPUs; use kind gpu for device cuda")
    if platform.get("mem_mb_per_node") is not None and platform.get("mem_mb_per_cpu") is not None:
        raise PlacementError(
            f"platform {name!r} sets both mem_mb_per_node and mem_mb_per_cpu; keep one (mem_mb_per_node "
            "asks the same memory of every node whatever the cores)"
        )
    if "--exclusive" in (platform.get("slurm_extra") or "").split():
        raise PlacementError(f"platform {name!r}: use `exclusive: true` instead of --exclusive in slurm_extra")
    warn, runtime_s = platform.get("warn_before_limit_s") or 0, 60 * (platform.get("runtime") or 60)
    if warn and 2 * warn > runtime_s:
        raise PlacementError(
            f"platform {name!r}: warn_before_limit_s {warn} would signal its jobs in the first half "
            f"of their {runtime_s} s runtime, so every attempt would stop early; lower it (or 0)"
        )
    if "--signal" in (platform.get("slurm_extra") or ""):
        raise PlacementError(f"platform {name!r}: use `warn_before_limit_s` instead of --signal in slurm_extra")


def ranks_per_node(platform: Mapping) -> int | None:
    """Worker ranks one node holds (None on `local`, which has no nodes)."""
    kind = platform.get("kind", "local")
    if kind == "gpu":
        return platform["gpus_per_node"] * platform.get("ranks_per_gpu", 1)
    if kind in ("cpu", "knl"):
        return platform["ranks_per_node"]
    if kind == "simulated":
        return platform.get("ranks_per_node")  # the simulated nodes' ranks, for a node-count sweep
    return None


def workers_for_nodes(name: str, platform: Mapping, nodes: int) -> int:
    """Workers of a run on `nodes` full nodes of `platform` (a node-count sweep's axis)."""
    check_platform(name, platform)
    per_node = ranks_per_node(platform)
    if per_node is None:
        kind = platform.get("kind", "local")
        raise PlacementError(
            f"platform {name!r} is kind {kind} and has no nodes"
            + (" unless it gives ranks_per_node" if kind == "simulated" else "")
            + "; list `workers` instead of `nodes` for it, or give the experiment a cluster platform"
        )
    return nodes * per_node


def device_of(platform: Mapping) -> str:
    """The configured device, or cuda on a gpu platform and cpu elsewhere."""
    device = platform.get("device")
    if device is not None:
        return device
    return "cuda" if platform.get("kind", "local") == "gpu" else "cpu"


def shared_threads(name: str, platform: Mapping, workers_per_node: int, needs_master: bool) -> int:
    """Cores per rank with `threads: null`: cores_per_node over the workers of a node, plus one share
    for a master unless `master_share` is false (see "Cores per rank" in the module docstring)."""
    cores = platform.get("cores_per_node")
    if not cores:
        return 1
    master_share = platform.get("master_share", True)
    if needs_master and not master_share:
        raise PlacementError(
            f"platform {name!r} has master_share: false, so a dedicated master would take cores from its "
            "workers; set master_share: true (every algorithm's workers then get the same cores), "
            "or give threads explicitly"
        )
    shares = workers_per_node + (1 if master_share else 0)
    if shares > cores:
        raise PlacementError(
            f"platform {name!r}: {shares} shares of a node's cores ({workers_per_node} workers"
            f"{' and a master' if master_share else ''}) exceed cores_per_node {cores}; lower ranks_per_node"
        )
    return cores // shares


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
    if kind == "simulated":  # one process runs every rank (scaledl simulate): one task, on this machine's CPU
        return Placement(kind, workers, ranks, None, 1, threads or 1, 0, "cpu")

    nodes = math.ceil(workers / ranks_per_node(platform))
    tasks_per_node = math.ceil(ranks / nodes)  # Slurm spreads tasks evenly; the first node is the fullest
    if threads is None:
        threads = shared_threads(name, platform, math.ceil(workers / nodes), needs_master)
    cores = platform.get("cores_per_node")
    if cores and tasks_per_node * threads > cores:
        master = " (a master-based algorithm puts one extra rank on the first node)" if needs_master else ""
        raise PlacementError(
            f"platform {name!r}: {workers} workers need {tasks_per_node} ranks on a node{master}, "
            f"and {tasks_per_node} × {threads} threads exceed cores_per_node {cores}; "
            "lower threads (null shares the cores out) or ranks_per_node"
        )
    gpus = platform["gpus_per_node"] if kind == "gpu" else 0
    return Placement(kind, workers, ranks, nodes, tasks_per_node, threads, gpus, device_of(platform))


def memory(platform: Mapping, placement: Placement, time_only: bool = False) -> tuple[int, int | None]:
    """(MB per node, MB per CPU or None) of a job on `platform` (see "Memory" in the module docstring);
    `time_only`: a time-only simulation's.

    The per-node figure is always given (Snakemake's mem_mb, which `--resources
    mem_mb=N` caps locally); the per-CPU one only when the platform asks by CPU,
    and then the plugin writes --mem-per-cpu instead of --mem.
    """
    if platform.get("mem_mb_per_node") is not None:
        return platform["mem_mb_per_node"], None
    per_cpu = platform.get("mem_mb_per_cpu") or DEFAULT_MEM_MB_PER_CPU
    if placement.kind == "simulated" and time_only:  # one shared replica, and each rank's own bookkeeping
        return max(per_cpu, DEFAULT_MEM_MB_PER_CPU) + placement.ranks * TIME_ONLY_MB_PER_RANK, None
    if placement.kind == "simulated":  # one process holds every rank's replicas and loader: a share per rank
        return per_cpu * placement.ranks * placement.cpus_per_task, None
    return per_cpu * placement.tasks_per_node * placement.cpus_per_task, per_cpu


def slurm_extra(platform: Mapping, placement: Placement, *, warn: bool = True) -> str | None:
    """sbatch flags beyond what the executor plugin writes from resources (None if there are none).

    The plugin writes --nodes, --ntasks, --cpus-per-task, --mem, --mem-per-cpu,
    -p, -C and -t itself, and refuses them here; the tasks-per-node ceiling, the
    GPUs per node and --exclusive (whole nodes, so no other job's load skews the
    timings) are ours, and so is the warning signal before the time limit
    (`warn`: a training job checkpoints on it; a measurement has nothing to save).
    """
    flags = []
    if placement.cluster:
        flags.append(f"--ntasks-per-node={placement.tasks_per_node}")
    if placement.gpus_per_node:
        gpu_type = platform.get("gpu_type")
        flags.append(f"--gpus-per-node={gpu_type + ':' if gpu_type else ''}{placement.gpus_per_node}")
    if platform.get("exclusive"):
        flags.append("--exclusive")
    if warn and platform.get("warn_before_limit_s"):
        # Slurm signals every job step's tasks this long before the time limit (or a preemption):
        # each rank checkpoints at its next step boundary and the job exits 130, to be resumed.
        flags.append(f"--signal=USR1@{platform['warn_before_limit_s']}")
    if platform.get("slurm_extra"):
        flags.append(platform["slurm_extra"])
    return " ".join(flags) or None
