"""Gradient buckets: sum-allreduces that start while backward still runs (DDP's overlap).

The flat gradient (comm/flat.py) is cut into contiguous buckets in reverse
parameter order, the order in which backward produces gradients: the first
bucket small (`first_mb`, so the first message leaves early), the others up to
`bucket_mb`, as DDP cuts them. A hook on every parameter counts the gradients
its bucket still waits for; when the last one lands, the bucket's allreduce
starts without blocking, and `wait()` completes every bucket before the
update. Buckets start strictly in their fixed order (a ready bucket waits for
the ones before it): every rank issues the same collectives in the same order,
as MPI requires, and each sum, over a fixed size and communicator, is bitwise
repeatable run to run.

MPI advances a nonblocking collective only inside MPI calls, so every hook
tests the buckets in flight: that is what moves them while backward computes.
Transports: MPI on host tensors (zero-copy numpy views), CUDA-aware MPI on
device memory (the stream synchronised before a bucket leaves), MPI staged
through a pinned host mirror (each bucket copied out as it leaves, the sum
copied back once), and torch.distributed's asynchronous work handles (NCCL,
Gloo).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from scaledl.comm import transport
from scaledl.comm.buffers import host_tensor
from scaledl.comm.collectives import TORCH_DIST_BACKENDS
from scaledl.comm.flat import FlatParams
from scaledl.comm.transport import MPI

MB = 1 << 20
FIRST_BUCKET_MB = 1.0  # DDP's first bucket


@dataclass(frozen=True)
class Bucket:
    lo: int  # the bucket's range of the flat gradient, [lo, hi)
    hi: int
    params: tuple[int, ...]  # the indices of the parameters whose gradients fill it


def plan_buckets(numels: list[int], element_size: int, bucket_mb: float, first_mb: float = FIRST_BUCKET_MB):
    """The buckets, in the order they start: parameters taken last to first, a bucket closed once it
    holds at least its cap (`first_mb` for the first, `bucket_mb` after), the remainder one last bucket."""
    offsets = np.cumsum([0, *numels])
    buckets, members, filled, hi = [], [], 0, int(offsets[-1])
    cap = min(first_mb, bucket_mb) * MB
    for index in reversed(range(len(numels))):
        members.append(index)
        filled += numels[index] * element_size
        if filled >= cap:
            lo = int(offsets[index])
            buckets.append(Bucket(lo, hi, tuple(members)))
            members, filled, hi, cap = [], 0, lo, bucket_mb * MB
    if members:
        buckets.append(Bucket(0, hi, tuple(members)))
    return buckets


class GradientBuckets:
    """Hooks on `params`' parameters that allreduce (sum) their flat gradient bucket by bucket.

    `before_send(lo, hi)` runs on a bucket's range just before it leaves (weight decay, which
    must reach the sum). `wait()` returns once every bucket's sum is in `params.grad`.
    """

    def __init__(
        self,
        params: FlatParams,
        comm: MPI.Comm,
        *,
        bucket_mb: float,
        backend: str = "mpi",
        dist_group=None,
        before_send: Callable[[int, int], None] | None = None,
    ):
        self.grad = params.grad
        self.comm = comm
        self.before_send = before_send
        self.buckets = plan_buckets(params.numels, self.grad.element_size(), bucket_mb)
        self.torch_dist = backend in TORCH_DIST_BACKENDS
        # MPI cannot read device memory (nor, in a simulation, a simulated GPU's: comm.buffers.HostStage)
        self.staged = backend == "mpi" and (self.grad.is_cuda or transport.current().device_behind_pcie())
        self.device_direct = backend == "cuda_aware_mpi"
        self.host = host_tensor(self.grad.shape, self.grad.dtype) if self.staged else None
        self.dist_group = dist_group
        self.messages = 0
        self._wire = [self._wire_view(b) for b in self.buckets]
        bucket_of = {index: k for k, b in enumerate(self.buckets) for index in b.params}
        self._reset()
        for index, p in enumerate(params.params):
            p.register_post_accumulate_grad_hook(self._hook(bucket_of[index]))

    def _wire_view(self, bucket: Bucket):
        """What carries a bucket: a numpy view of host memory for MPI, else the tensor slice itself."""
        if self.torch_dist or self.device_direct:
            return self.grad[bucket.lo : bucket.hi]
        source = self.host if self.staged else self.grad
        return source[bucket.lo : bucket.hi].numpy()

    def _reset(self) -> None:
        self._missing = [len(b.params) for b in self.buckets]
        self._next = 0  # the next bucket to start
        self._in_flight: list = []  # MPI requests or torch.distributed work handles

    def _hook(self, k: int):
        """The hook of a parameter whose gradient fills bucket `k`."""

        def landed(_param) -> None:
            self._missing[k] -= 1
            self._start_ready()
            if self._in_flight and not self.torch_dist:
                MPI.Request.Testall(self._in_flight)  # progress for the buckets already on their way

        return landed

    def _start_ready(self, everything: bool = False) -> None:
        """Start the buckets that are complete (all of them, with `everything`), in their fixed order."""
        while self._next < len(self.buckets) and (everything or self._missing[self._next] <= 0):
            self._start(self._next)
            self._next += 1

    def _start(self, k: int) -> None:
        bucket = self.buckets[k]
        if self.before_send is not None:
            self.before_send(bucket.lo, bucket.hi)
        if (self.staged or self.device_direct) and self.grad.is_cuda:
            torch.cuda.current_stream(self.grad.device).synchronize()  # MPI must not read before backward wrote
        if self.staged:
            self.host[bucket.lo : bucket.hi].copy_(self.grad[bucket.lo : bucket.hi])
        transport.meter_mark()  # a simulation charges the backward pass up to here: the bucket leaves now
        if self.torch_dist:
            work = torch.distributed.all_reduce(self._wire[k], group=self.dist_group, async_op=True)
        else:
            work = self.comm.Iallreduce(MPI.IN_PLACE, self._wire[k], op=MPI.SUM)
        self._in_flight.append(work)
        self.messages += 1

    def wait(self) -> None:
        """Start any bucket backward left (a parameter without a gradient), then complete them all."""
        self._start_ready(everything=True)
        if self.torch_dist:
            for work in self._in_flight:
                work.wait()
            if self.grad.is_cuda:
                torch.cuda.current_stream(self.grad.device).synchronize()
        else:
            MPI.Request.Waitall(self._in_flight)
        if self.staged:
            with transport.meter("param_copy"):  # priced in a simulation; over MPI the caller's phase times it
                self.grad.copy_(self.host)
        self._reset()
