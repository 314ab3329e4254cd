"""Does a Slurm request fit a node of its partition? Checked against `sinfo` before anything is submitted.

Slurm accepts a job that no node of its partition can ever run (more CPUs,
memory or GPUs per node than any node has) and leaves it pending, reason
PartitionConfig, until someone cancels it. Under the Slurm executor the
workflow (scaledl.grid.preflight, the workflow's `onstart`) reads the partitions' nodes
with SINFO_COMMAND, turns every job it is about to submit into a `SlurmRequest`
(request_of: the executor plugin's resource names) and refuses the first one
that does not fit, in one line naming the rule, the request and the largest
node. Pure functions: no Slurm call here, no torch, no MPI, no Snakemake.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# One line per node and partition: name|partition (default marked *)|CPUs|memory MB|GRES|features|time limit.
SINFO_COMMAND = ("sinfo", "--noheader", "--Node", "--format=%N|%P|%c|%m|%G|%f|%l")


class SinfoError(ValueError):
    """sinfo's output could not be read; the message says what was found."""


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    mem_mb: int
    gpus: Mapping[str, int] = field(default_factory=dict)  # GPU type ("" when untyped) → count
    features: frozenset[str] = frozenset()

    def gpu_count(self, gpu_type: str | None = None) -> int:
        return sum(n for kind, n in self.gpus.items() if gpu_type is None or kind == gpu_type)


@dataclass
class Partition:
    name: str
    default: bool = False
    max_minutes: int | None = None  # None: no limit
    nodes: dict[str, Node] = field(default_factory=dict)


@dataclass(frozen=True)
class SlurmRequest:
    """What one job asks of each of its nodes, and of its partition."""

    partition: str | None  # None: the cluster's default partition
    nodes: int
    tasks_per_node: int
    cpus_per_task: int
    mem_mb_per_node: int | None  # None: the cluster's default
    gpus_per_node: int = 0
    gpu_type: str | None = None
    constraint: str | None = None
    minutes: int | None = None

    @property
    def cpus_per_node(self) -> int:
        return self.tasks_per_node * self.cpus_per_task

    def describe(self) -> str:
        text = f"{self.tasks_per_node} task(s) × {self.cpus_per_task} CPU(s) = {self.cpus_per_node} CPUs"
        if self.mem_mb_per_node:
            text += f", {self.mem_mb_per_node} MB"
        if self.gpus_per_node:
            text += f", {self.gpus_per_node} {self.gpu_type + ' ' if self.gpu_type else ''}GPU(s)"
        text += f" per node on {self.nodes} node(s)"
        return text + (f", constraint {self.constraint!r}" if self.constraint else "")


# ---- sinfo --------------------------------------------------------------------


def parse_minutes(text: str) -> int | None:
    """A Slurm time limit ([days-]hours:minutes:seconds, minutes:seconds, or "infinite") in whole minutes."""
    text = text.strip()
    if text.lower() in ("infinite", "unlimited", "n/a", ""):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    hours, minutes, seconds = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    return (int(days or 0) * 24 + hours) * 60 + minutes + math.ceil(seconds / 60)


def parse_gres(text: str) -> dict[str, int]:
    """GPUs of a node's GRES ("gpu:a100:4(S:0-1),gpu:2", "(null)") as {type: count}."""
    gpus: dict[str, int] = {}
    for entry in text.split(","):
        parts = re.sub(r"\(.*?\)", "", entry).strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2 or not parts[-1].isdigit():
            continue
        kind = ":".join(parts[1:-1])
        gpus[kind] = gpus.get(kind, 0) + int(parts[-1])
    return gpus


def parse_sinfo(text: str) -> dict[str, Partition]:
    """The partitions of SINFO_COMMAND's output, each with its nodes; SinfoError if it is not that format."""
    partitions: dict[str, Partition] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 7:
            raise SinfoError(f"unexpected sinfo line {line.strip()!r}")
        name, partition, cpus, memory, gres, features, limit = (f.strip() for f in fields)
        try:
            node = Node(
                name,
                int(cpus.rstrip("+")),
                int(memory.rstrip("+")),
                parse_gres(gres),
                frozenset(f for f in features.split(",") if f and f != "(null)"),
            )
            max_minutes = parse_minutes(limit)
        except ValueError:
            raise SinfoError(f"unexpected sinfo line {line.strip()!r}") from None
        default = partition.endswith("*")
        entry = partitions.setdefault(partition.rstrip("*"), Partition(partition.rstrip("*"), default, max_minutes))
        entry.nodes[name] = node
    if not partitions:
        raise SinfoError("sinfo listed no nodes")
    return partitions


# ---- requests -------------------------------------------------------------------


def _flag(extra: str, name: str) -> str | None:
    """The value of --NAME=VALUE (or --NAME VALUE) in a slurm_extra string."""
    match = re.search(rf"(?:^|\s)--{name}[=\s]+(\S+)", extra)
    return match.group(1) if match else None


def request_of(resources: Mapping, threads: int = 1) -> SlurmRequest:
    """The SlurmRequest of a job's evaluated resources, in the names the Slurm executor plugin reads.

    Tasks per node: slurm_extra's --ntasks-per-node, else the tasks spread over
    the nodes; CPUs per task: cpus_per_task, else the job's threads; memory per
    node: mem_mb, or mem_mb_per_cpu × the CPUs of a node; GPUs per node:
    slurm_extra's --gpus-per-node=[TYPE:]N, or the plugin's `gres` / `gpu`.
    """
    extra = str(resources.get("slurm_extra") or "")
    nodes = int(resources.get("nodes") or 1)
    tasks = int(resources.get("tasks") or 1)
    per_node = _flag(extra, "ntasks-per-node")
    tasks_per_node = int(per_node) if per_node else math.ceil(tasks / nodes)
    cpus = int(resources.get("cpus_per_task") or threads or 1)
    if resources.get("mem_mb_per_cpu"):
        mem = int(resources["mem_mb_per_cpu"]) * tasks_per_node * cpus
    else:
        mem = int(resources["mem_mb"]) if resources.get("mem_mb") else None
    gpus, gpu_type = 0, None
    spec = _flag(extra, "gpus-per-node") or (str(resources["gres"]) if resources.get("gres") else None)
    if spec:
        parts = spec.removeprefix("gpu:").split(":")
        gpus, gpu_type = int(parts[-1]), (":".join(parts[:-1]) or None)
    elif resources.get("gpu"):
        gpus, gpu_type = math.ceil(int(resources["gpu"]) / nodes), resources.get("gpu_model") or None
    runtime = resources.get("runtime")
    return SlurmRequest(
        partition=resources.get("slurm_partition") or None,
        nodes=nodes,
        tasks_per_node=tasks_per_node,
        cpus_per_task=cpus,
        mem_mb_per_node=mem,
        gpus_per_node=gpus,
        gpu_type=gpu_type,
        constraint=resources.get("constraint") or None,
        minutes=int(runtime) if isinstance(runtime, int) or str(runtime).isdigit() else None,
    )


# ---- the check ------------------------------------------------------------------


def satisfies(node: Node, constraint: str | None) -> bool:
    """Whether a node's features meet a constraint of names joined by & and | (others are not judged)."""
    if not constraint or not re.fullmatch(r"[\w.-]+(?:[&|][\w.-]+)*", constraint):
        return True
    return any(all(name in node.features for name in term.split("&")) for term in constraint.split("|"))


def fits(node: Node, request: SlurmRequest) -> bool:
    return (
        node.cpus >= request.cpus_per_node
        and (request.mem_mb_per_node is None or node.mem_mb >= request.mem_mb_per_node)
        and node.gpu_count(request.gpu_type) >= request.gpus_per_node
        and satisfies(node, request.constraint)
    )


def largest(nodes: Iterable[Node], gpu_type: str | None) -> str:
    """The most CPUs, memory and GPUs any of these nodes has, as words."""
    nodes = list(nodes)
    most_gpus = max(node.gpu_count(gpu_type) for node in nodes)
    return (
        f"{max(node.cpus for node in nodes)} CPUs, {max(node.mem_mb for node in nodes)} MB"
        f", {most_gpus} {gpu_type + ' ' if gpu_type else ''}GPU(s)"
    )


def default_partition(partitions: Mapping[str, Partition]) -> str | None:
    return next((name for name, partition in partitions.items() if partition.default), None)


def refusal(job: str, request: SlurmRequest, partitions: Mapping[str, Partition]) -> str | None:
    """One line saying why no node of its partition can run `job` (a rule and its wildcards), or None."""
    name = request.partition or default_partition(partitions)
    if name is None:
        return None  # no partition named and none marked default: Slurm (or the plugin) chooses
    where = f"partition {name!r}" + ("" if request.partition else " (the default)")
    if name not in partitions:
        return f"{job} goes to {where}, which sinfo does not list (it lists {', '.join(partitions)})"
    partition = partitions[name]
    nodes = partition.nodes.values()
    asks = f"{job} asks for {request.describe()}"
    fitting = [node for node in nodes if fits(node, request)]
    if not fitting:
        return f"{asks}, and no node of {where} has that: its largest has {largest(nodes, request.gpu_type)}"
    if len(fitting) < request.nodes:
        return f"{asks}, and only {len(fitting)} node(s) of {where} have that"
    if request.minutes and partition.max_minutes is not None and request.minutes > partition.max_minutes:
        return f"{job} asks for {request.minutes} min, beyond the {partition.max_minutes} min limit of {where}"
    return None
