"""KNL-style chip partitioning (paper §3 technique 6, Fig. 12): does one node hold P replicas?

Divide: every partition (a rank) holds its own copy of the training data and
of the weights; conquer: the gradients are tree-summed (Allreduce) and every
partition applies the same update to its own copy. The limit is memory: P
copies of (weights, gradients, data) must fit in the node's fast memory (the
paper: 16 × (249 MB AlexNet + 687 MB CIFAR) ≈ 15 GB of the 16 GB MCDRAM).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaledl.errors import UserError

GIB = 1 << 30


@dataclass(frozen=True)
class ReplicaBudget:
    replicas: int  # ranks sharing this node
    weights_bytes: int  # per replica: weights and gradients
    data_bytes: int  # per replica: the whole training split
    available_bytes: int  # fast memory if given, else the node's available memory
    source: str  # where available_bytes came from

    @property
    def needed_bytes(self) -> int:
        return self.replicas * (self.weights_bytes + self.data_bytes)

    def as_dict(self) -> dict:
        return {**asdict(self), "needed_bytes": self.needed_bytes}


def node_available_bytes() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise UserError("cannot read MemAvailable from /proc/meminfo; give --fast-memory-gb")


def check_replicas(replicas: int, parameters: int, data_bytes: int, fast_memory_gb: float | None) -> ReplicaBudget:
    """Raise UserError unless `replicas` copies of weights, gradients and data fit."""
    if fast_memory_gb is not None:
        available, source = int(fast_memory_gb * GIB), "--fast-memory-gb"
    else:
        available, source = node_available_bytes(), "MemAvailable"
    budget = ReplicaBudget(replicas, 2 * 4 * parameters, data_bytes, available, source)
    if budget.needed_bytes > available:
        raise UserError(
            f"{replicas} replicas need {_size(budget.needed_bytes)} ({replicas} × ({_size(budget.weights_bytes)} "
            f"weights and gradients + {_size(data_bytes)} data)) but the node has {_size(available)} ({source}); "
            "use fewer partitions per node"
        )
    return budget


def _size(nbytes: int) -> str:
    return f"{nbytes / GIB:.2f} GiB" if nbytes >= GIB else f"{nbytes / (1 << 20):.1f} MiB"
