"""Rank roles, named once.

Two layouts exist. Master-based algorithms (the parameter-server family and
round-robin EASGD) put the center W on a dedicated rank 0 and run P workers on
ranks 1..P, so they need P+1 ranks. Collective algorithms run P workers on
ranks 0..P-1 and let worker 0 also play the master: it is the root of the
broadcast/reduce, holds the center, evaluates it and writes the results.

Everywhere else code asks `roles.is_master` / `roles.is_worker`, never `rank == 0`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from scaledl.comm import transport
from scaledl.comm.transport import MPI
from scaledl.errors import UserError


@dataclass(frozen=True)
class Roles:
    world: MPI.Comm
    rank: int
    size: int
    dedicated_master: bool
    master: int  # world rank holding the center W
    worker_ranks: tuple[int, ...]  # world ranks computing gradients, in worker order
    worker_comm: MPI.Comm | None  # communicator of the workers only (None on a dedicated master)
    local_rank: int  # rank among the processes of this node (picks the GPU)
    local_size: int

    @property
    def is_master(self) -> bool:
        return self.rank == self.master

    @property
    def is_worker(self) -> bool:
        return self.worker_comm is not None

    @property
    def num_workers(self) -> int:
        return len(self.worker_ranks)

    @property
    def role(self) -> str:
        """ "master+worker" (collective algorithms' rank 0), "master" or "worker"."""
        if self.is_master:
            return "master+worker" if self.is_worker else "master"
        return "worker"

    @property
    def shares_cores(self) -> bool:
        """More ranks on this node than it has CPUs (a laptop's P + 1 ranks on 2 cores): they time-slice
        the cores, so a rank that waits long should sleep between polls; blocked in MPI it spins (MPICH
        spins even when it yields), taking the core from the rank it waits for. Never in a simulation,
        whose ranks are actors of one process."""
        return oversubscribed(self.local_size) and not transport.current().simulated

    @property
    def worker_index(self) -> int:
        """0..P-1 on workers (selects the data shard); -1 on a dedicated master."""
        return self.worker_comm.Get_rank() if self.worker_comm is not None else -1


def oversubscribed(ranks_on_node: int, cpus: int | None = None) -> bool:
    """Whether `ranks_on_node` ranks outnumber the node's CPUs (`cpus`, default os.cpu_count())."""
    return ranks_on_node > (cpus or os.cpu_count() or 1)


def make_roles(world: MPI.Comm, *, dedicated_master: bool, algorithm: str = "") -> Roles:
    size, rank = world.Get_size(), world.Get_rank()
    if dedicated_master and size < 2:
        raise UserError(
            f"algorithm {algorithm!r} needs a master rank plus at least one worker, "
            f"but the job has {size} rank; launch it with `mpiexec -n P+1` (P workers)"
        )
    first_worker = 1 if dedicated_master else 0
    is_worker = rank >= first_worker
    worker_comm = world.Split(0 if is_worker else MPI.UNDEFINED, key=rank)
    node_comm = world.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
    local_rank, local_size = node_comm.Get_rank(), node_comm.Get_size()
    node_comm.Free()
    return Roles(
        world=world,
        rank=rank,
        size=size,
        dedicated_master=dedicated_master,
        master=0,
        worker_ranks=tuple(range(first_worker, size)),
        worker_comm=worker_comm if worker_comm != MPI.COMM_NULL else None,
        local_rank=local_rank,
        local_size=local_size,
    )
