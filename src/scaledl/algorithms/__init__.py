"""The algorithm registry: names are the config enum, the CLI choices and the table keys.

This module imports neither torch nor MPI, so Snakemake and the CLI can read
the registry without initialising MPI; `load(key)` imports an algorithm's
module on demand.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class AlgorithmInfo:
    key: str
    paper_name: str
    module: str              # scaledl.algorithms.<module> defines ALGORITHM
    needs_master: bool       # dedicated master rank: the job has P+1 ranks
    deterministic: bool      # bitwise repeatable for a given seed and world size
    preset: dict = field(default_factory=dict)   # codesign switches fixed by this name (see base.Codesign)


ALGORITHMS: dict[str, AlgorithmInfo] = {
    info.key: info
    for info in (
        AlgorithmInfo("easgd", "original EASGD (round-robin)", "easgd", True, True),
        AlgorithmInfo("async_easgd", "Async EASGD", "async_easgd", True, False),
        AlgorithmInfo("async_measgd", "Async MEASGD", "async_measgd", True, False),
        AlgorithmInfo("hogwild_easgd", "Hogwild EASGD", "hogwild_easgd", True, False),
        AlgorithmInfo("sync_easgd", "Sync EASGD", "sync_easgd", False, True),
        # The paper's engineering ladder (§3, Table 3): original EASGD → 1 → 2 → 3.
        AlgorithmInfo("sync_easgd1", "Sync EASGD1 (tree collectives, center on the host)", "sync_easgd", False, True,
                      {"center_on": "host", "overlap": False}),
        AlgorithmInfo("sync_easgd2", "Sync EASGD2 (weights on the devices)", "sync_easgd", False, True,
                      {"center_on": "device", "overlap": False}),
        AlgorithmInfo("sync_easgd3", "Sync EASGD3 (exchange overlapped with data and fwd/bwd)", "sync_easgd", False, True,
                      {"center_on": "device", "overlap": True}),
        AlgorithmInfo("async_sgd", "Async SGD", "async_sgd", True, False),
        AlgorithmInfo("async_msgd", "Async MSGD", "async_msgd", True, False),
        AlgorithmInfo("hogwild_sgd", "Hogwild SGD", "hogwild_sgd", True, False),
        AlgorithmInfo("sync_sgd", "synchronous SGD (allreduce of gradients)", "sync_sgd", False, True),
        # KNL chip partitioning (§3, Fig. 12): every partition holds all the data and its own weights.
        AlgorithmInfo("chip_partition", "KNL chip partitioning (replicated data and weights, tree-summed gradients)",
                      "sync_sgd", False, True, {"data": "replicated"}),
    )
}


def load(key: str):
    """The Algorithm class registered under `key`."""
    info = ALGORITHMS[key]
    return importlib.import_module(f"scaledl.algorithms.{info.module}").ALGORITHM


def tasks_for(key: str, workers: int) -> int:
    """MPI ranks a run of `key` with `workers` workers needs."""
    return workers + 1 if ALGORITHMS[key].needs_master else workers
