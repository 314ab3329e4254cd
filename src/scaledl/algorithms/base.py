"""The one interface every engine implements.

An engine composes update rules (`rules.py`) with a message pattern
(`scaledl.comm`); an algorithm is a registry entry naming its engine and its
settings. The training loop (scaledl.train.loop) calls it like this::

    algo.start()                                # every W^i starts equal to W
    while not stop and algo.begin_iteration():  # round-robin: wait for this worker's turn
        images, labels = loader.next_batch()
        loss = forward_backward(...)            # fills params.grad (ΔW^i)
        algo.worker_step()                      # exchange + updates (Eqs. 1-6)
        stop = boundary.cross(step, epoch, agree=partial(algo.end_iteration, loss, len(labels)))
    algo.finish()

and, on the dedicated master of master-based engines, `algo.serve(boundary)`
then `algo.finish()` (algorithms/boundary.py: the one step boundary). Where a
pattern agrees on a pause outside the boundary (a round-robin worker's
messages between turns), it calls `pause_for_evaluation()` or `save_checkpoint()`. `state_dict()` and
`load_state_dict()` carry what the engine adds to a checkpoint
(scaledl.train.checkpoint); they are called between steps, with no exchange in flight.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import torch

from scaledl.algorithms import AlgorithmInfo
from scaledl.algorithms.boundary import BoundaryRequest
from scaledl.algorithms.settings import Settings
from scaledl.comm.collectives import Collectives
from scaledl.comm.flat import FlatParams
from scaledl.comm.roles import Roles
from scaledl.comm.timing import PhaseTimer
from scaledl.comm.transport import MPI
from scaledl.errors import UserError


def _no_checkpoint() -> None:
    """A run without checkpoints."""


def _no_evaluation() -> bool:
    """A run without evaluations."""
    return False


@dataclass
class AlgorithmContext:
    """What an engine is built from: its description and settings, its ranks and tensors."""

    info: AlgorithmInfo  # the registry's description of the algorithm run (a preset's, for a preset)
    settings: Settings  # resolved for this run (algorithms/settings.py)
    roles: Roles
    params: FlatParams | None  # this worker's W^i (None on a dedicated master)
    center: FlatParams | None  # the center W (master only)
    timer: PhaseTimer
    n_train: int = 0  # training-set size, to turn samples into epochs
    dist_group: object = None  # torch.distributed group of the workers (backends nccl, gloo)
    worker_timeout: float = 30.0  # the floor (s) of how long a silent worker is waited for (comm/liveness.py)
    save_checkpoint: Callable[[], None] = _no_checkpoint  # collective: a checkpoint of the whole run
    pause_for_evaluation: Callable[[], bool] = _no_evaluation  # collective: every rank waits while W is evaluated


class Algorithm(ABC):
    # True where the engine adds weight decay to ΔW^i itself (sync_sgd's buckets leave during backward,
    # before the loop could add it); the loop then leaves it out.
    decays_gradient = False

    def __init__(self, context: AlgorithmContext):
        self.info = context.info
        self.settings = context.settings
        self.roles = context.roles
        self.params = context.params
        self.center = context.center
        self.timer = context.timer
        self.n_train = context.n_train
        self.dist_group = context.dist_group
        self.worker_timeout = context.worker_timeout
        self.save_checkpoint = context.save_checkpoint
        self.pause_for_evaluation = context.pause_for_evaluation

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
    def end_iteration(self, loss: torch.Tensor, batch: int, request: BoundaryRequest) -> BoundaryRequest:
        """Report the iteration with this rank's request; returns what the ranks agreed on (the master's
        stop and checkpoint decisions, and any rank's interrupt where the pattern carries one)."""

    def serve(self, boundary) -> None:
        """Dedicated master loop (master-based engines only)."""
        raise NotImplementedError(f"{self.info.key} has no dedicated master")

    def refresh_center(self) -> None:
        """Master: bring `center` up to date before it is evaluated or saved."""

    def finish(self) -> None:
        """Every rank, after its loop: settle in-flight exchanges, release MPI resources."""

    def report(self) -> dict:
        """Engine-specific facts for run.json (exchanges, staleness, messages, ...)."""
        return {}

    def state_dict(self) -> dict:
        """This rank's engine state beyond W^i and W (momentum, counters, the τ phase), for a checkpoint."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Continue from `state_dict()`, after `start()`; collective where the state lives in a window."""

    def require_helper_thread(self) -> None:
        """`require_helper_thread` for this algorithm."""
        require_helper_thread(self.info.key)

    def collectives(self, like: torch.Tensor, comm=None, timer=None) -> Collectives:
        """The collective patterns on tensors like `like`, with this run's codesign switches."""
        s = self.settings
        layers = self.params.numels if s.message == "per_layer" else None
        return Collectives(
            comm or self.roles.worker_comm,
            like,
            timer or self.timer,
            layers=layers,
            backend=s.backend,
            dist_group=self.dist_group,
            wait_probe=s.wait_probe == "barrier",
        )


def require_helper_thread(key: str) -> None:
    """Refuse, alike on every rank and before any window or communicator exists (so nothing is left to
    free), an overlap whose helper thread this MPI does not allow: the helper makes the exchange's MPI
    calls while the main thread makes none, which needs MPI_THREAD_SERIALIZED or better."""
    if MPI.Query_thread() < MPI.THREAD_SERIALIZED:
        raise UserError(
            f"{key} overlaps its exchange on a helper thread, which needs MPI_THREAD_SERIALIZED "
            f"or better; this MPI gives level {MPI.Query_thread()}: use --no-overlap"
        )
