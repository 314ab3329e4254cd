"""Collective message patterns over the worker communicator, on flat tensors.

Every call moves one whole flat buffer in one MPI call (tree algorithms inside
the MPI library: cost ~ log P · (α + |W|β)). The reduction algorithm an MPI
library picks depends only on the message size and the communicator size, so
for a fixed world size the sums, and hence the synchronous algorithms, are
bitwise repeatable run to run.
"""

from __future__ import annotations

import numpy as np
import torch
from mpi4py import MPI

from scaledl.comm.buffers import HostStage


class Collectives:
    """Sum-allreduce, broadcast and sum-reduce of tensors shaped like `like`."""

    def __init__(self, comm: MPI.Comm, like: torch.Tensor):
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self._a = HostStage(like)
        self._b = HostStage(like)
        self._flag = np.zeros(1, dtype=np.int32)

    def allreduce_sum_(self, t: torch.Tensor) -> None:
        buf = self._a.send_view(t)
        self.comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        self._a.finish_recv(t)

    def bcast_(self, t: torch.Tensor, root: int) -> None:
        buf = self._a.send_view(t) if self.rank == root else self._a.recv_view(t)
        self.comm.Bcast(buf, root=root)
        if self.rank != root:
            self._a.finish_recv(t)

    def reduce_sum(self, src: torch.Tensor, dst: torch.Tensor | None, root: int) -> None:
        """dst (on root only) = Σ over ranks of src; src is left untouched."""
        send = self._a.send_view(src)
        recv = self._b.recv_view(dst) if self.rank == root else None
        self.comm.Reduce(send, recv, op=MPI.SUM, root=root)
        if self.rank == root:
            self._b.finish_recv(dst)

    def any_(self, flag: bool) -> bool:
        """Control: True on every rank if any rank says True (tiny message)."""
        self._flag[0] = int(flag)
        self.comm.Allreduce(MPI.IN_PLACE, self._flag, op=MPI.MAX)
        return bool(self._flag[0])
