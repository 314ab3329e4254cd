"""The one interface every algorithm implements.

An algorithm composes an update rule (`rules.py`) with a message pattern
(`scaledl.comm`). The training loop calls it like this::

    algo.start()                                # every W^i starts equal to W
    while not stop and algo.begin_iteration():  # round-robin: wait for this worker's turn
        images, labels = loader.next_batch()
        loss = forward_backward(...)            # fills params.grad (ΔW^i)
        algo.worker_step()                      # exchange + updates (Eqs. 1-6)
        agreed = algo.end_iteration(loss, len(labels), request)
        if agreed & Request.CHECKPOINT: save a checkpoint
        stop = agreed & Request.STOP
    algo.finish()

and, on the dedicated master of master-based algorithms, `algo.serve(monitor)`
then `algo.finish()`. Where a pattern agrees on a checkpoint outside
`end_iteration` (the dedicated master's loop, a round-robin turn), it calls
`on_checkpoint()`, which the training loop sets. `state_dict()` and
`load_state_dict()` carry what the algorithm adds to a checkpoint
(scaledl.train.checkpoint); they are called between steps, with no exchange in flight.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import IntFlag
from typing import Callable, ClassVar

import torch

from scaledl.algorithms import AlgorithmInfo, check_options
from scaledl.algorithms.rules import default_rho
from scaledl.comm.collectives import Collectives
from scaledl.comm.flat import FlatParams
from scaledl.comm.roles import Roles
from scaledl.config import TrainConfig
from scaledl.timing import PhaseTimer


class Request(IntFlag):
    """What a rank asks for at a step boundary; `end_iteration` returns what the ranks agreed on."""

    NONE = 0
    STOP = 1          # the master's stop rule, or an interrupt
    CHECKPOINT = 2    # the master's checkpoint schedule, or an interrupt (then with STOP)


def _no_checkpoint() -> None:
    """The default `on_checkpoint`: a run without checkpoints."""


@dataclass(frozen=True)
class Hyper:
    """The numbers the update rules use, resolved for this run (defaults live in TrainConfig)."""

    lr: float              # η
    rho: float             # ρ (elasticity); α = ηρ is the moving rate
    momentum: float        # μ, for the momentum variants
    tau: int               # communication period (the paper exchanges every iteration; the averaging family's τ)
    momentum_at: str       # async_msgd: where V lives ("master" or "worker")
    nesterov: bool         # async_measgd: gradient at the look-ahead W^i + μV^i
    worker_timeout: float  # the floor (s) of how long a silent worker is waited for (comm/liveness.py)

    @classmethod
    def from_config(cls, cfg: TrainConfig, num_workers: int, info: AlgorithmInfo | None = None) -> Hyper:
        """ρ as given, else from α = ηρ = β/P (Zhang et al.); τ as given, else the algorithm's (1 where it
        has none); the rest as the run's settings say."""
        rho = cfg.rho if cfg.rho is not None else default_rho(cfg.lr, num_workers, cfg.beta)
        tau = cfg.tau if cfg.tau is not None else (info.defaults.get("tau", 1) if info is not None else 1)
        return cls(lr=cfg.lr, rho=rho, momentum=cfg.momentum, tau=tau, momentum_at=cfg.momentum_at,
                   nesterov=cfg.nesterov, worker_timeout=cfg.worker_timeout)

    @property
    def alpha(self) -> float:
        return self.lr * self.rho


@dataclass(frozen=True)
class Codesign:
    """The paper's system-algorithm codesign switches (§3), recorded in run.json."""

    message: str = "packed"      # "packed": one message per exchange; "per_layer": one per parameter tensor
    center_on: str = "device"    # where the center W lives: "device" (beside the workers' W^i) or "host"
    overlap: bool = False        # exchange weights on a helper thread while data fetch and fwd/bwd run
    backend: str = "mpi"         # resolved: mpi, cuda_aware_mpi, nccl or gloo
    data: str = "sharded"        # "sharded": each worker reads its shard; "replicated": every worker
                                 # holds the whole training set (chip partitioning, paper Fig. 12)


@dataclass
class AlgorithmContext:
    """What an algorithm is built from: its description and the run's settings, its ranks and tensors."""

    info: AlgorithmInfo         # the registry's description of the algorithm run (a preset's, for a preset)
    cfg: TrainConfig            # the run's settings, as given (checked against info.options)
    roles: Roles
    params: FlatParams | None   # this worker's W^i (None on a dedicated master)
    center: FlatParams | None   # the center W (master only)
    hyper: Hyper
    timer: PhaseTimer
    n_train: int = 0            # training-set size, to turn samples into epochs
    codesign: Codesign = Codesign()
    dist_group: object = None   # torch.distributed group of the workers (backends nccl, gloo)


class Algorithm(ABC):
    key: ClassVar[str]

    def __init__(self, context: AlgorithmContext):
        # First, before any rank allocates or communicates: a setting this algorithm
        # would ignore is refused (every rank raises alike; train._agree_on_setup reports it).
        check_options(context.info, context.cfg)
        self.info = context.info
        self.wait_probe = context.cfg.wait_probe == "barrier"   # collectives: skew timed apart, as wait
        self.roles = context.roles
        self.params = context.params
        self.center = context.center
        self.hyper = context.hyper
        self.timer = context.timer
        self.n_train = context.n_train
        self.codesign = context.codesign
        self.dist_group = context.dist_group
        self.on_checkpoint: Callable[[], None] = _no_checkpoint   # set by the training loop

    @abstractmethod
    def start(self) -> None:
        """Make every worker's W^i equal to the master's W before the first step."""

    def begin_iteration(self) -> bool:
        """Before a worker fetches its batch; False means the run is over."""
        return True

    @abstractmethod
    def worker_step(self) -> None:
        """After backward (ΔW^i is in params.grad): communicate and update."""

    @abstractmethod
    def end_iteration(self, loss: torch.Tensor, batch: int, request: Request) -> Request:
        """Report the iteration with this rank's request; returns what the ranks agreed on (the master's
        stop and checkpoint decisions, and any rank's interrupt where the pattern carries one)."""

    def serve(self, monitor) -> None:
        """Dedicated master loop (master-based algorithms only)."""
        raise NotImplementedError(f"{self.key} has no dedicated master")

    def refresh_center(self) -> None:
        """Master: bring `center` up to date before it is evaluated or saved."""

    def finish(self) -> None:
        """Every rank, after its loop: settle in-flight exchanges, release MPI resources."""

    def center_tensor(self) -> torch.Tensor:
        """The weights to evaluate (on the master)."""
        return self.center.data

    def report(self) -> dict:
        """Algorithm-specific facts for run.json (exchanges, staleness, messages, ...)."""
        return {}

    def state_dict(self) -> dict:
        """This rank's algorithm state beyond W^i and W (momentum, counters, the τ phase), for a checkpoint."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict()`, after `start()`; collective where the state lives in a window."""

    def collectives(self, like: torch.Tensor, comm=None, timer=None):
        """The collective patterns on tensors like `like`, with this run's codesign switches."""
        layers = self.params.numels if self.codesign.message == "per_layer" else None
        return Collectives(comm or self.roles.worker_comm, like, timer or self.timer, layers=layers,
                           backend=self.codesign.backend, dist_group=self.dist_group, wait_probe=self.wait_probe)
