"""What one training run is asked to do: the `scaledl train` options as a dataclass.

Kept free of torch and MPI imports, so that building the command line (for
`scaledl prepare`, `aggregate`, ... too) never initialises MPI: under a
Slurm job step that would start a PMI handshake an ordinary job cannot answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("auto", "mpi", "cuda_aware_mpi", "nccl", "gloo")
MESSAGES = ("packed", "per_layer")
PLACES = ("host", "device")


@dataclass(frozen=True)
class TrainConfig:
    data: Path
    model: str
    algorithm: str
    out_dir: Path
    max_steps: int | None = None
    epochs: float | None = None
    time_budget: float | None = None
    target_accuracy: float | None = None
    batch_size: int = 64
    lr: float = 0.05
    momentum: float = 0.9
    rho: float | None = None          # None: α = ηρ = beta/P
    beta: float = 0.9
    weight_decay: float = 0.0
    momentum_at: str = "master"       # async_msgd: where the momentum buffer lives
    nesterov: bool = False            # async_measgd: gradient at the look-ahead point
    worker_timeout: float = 30.0      # seconds without progress before the job is aborted
    seed: int = 0
    eval_every: int = 50
    eval_batch_size: int = 1000
    message: str = "packed"           # collectives: one packed message per exchange, or per_layer
    center_on: str | None = None      # sync_easgd: "host" or "device" (None: the preset's, else device)
    overlap: bool | None = None       # sync_easgd: exchange on a helper thread (None: the preset's, else off)
    tau: int = 1                      # sync_easgd: communication period
    backend: str = "auto"             # collectives: auto, mpi, cuda_aware_mpi, nccl, gloo
    fast_memory_gb: float | None = None   # chip_partition: memory the replicas must fit in (default: MemAvailable)
    platform: str = "local"           # recorded for the tables (workflow: the config's platform)
    expect_ranks: int | None = None   # fail unless MPI started exactly this many ranks
    device: str = "auto"
    threads: int | None = None
