"""Hand tensors to mpi4py's buffer (uppercase) calls without per-call allocation.

A CPU tensor is given to MPI as a zero-copy numpy view. A tensor on a device
that the MPI library cannot read is staged through a host buffer allocated
once (pinned, so the copies are DMA), after synchronizing the device stream:
mpi4py cannot know a CUDA kernel is still writing the tensor. The copies are
the paper's CPU–GPU parameter communication and are timed as `param_copy`.
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from scaledl.comm import transport
from scaledl.comm.timing import PhaseTimer

# Where the host buffers that MPI reads and writes are: (first byte, end) of each live one. A simulation's numerics
# keep every tensor in this machine's memory, so its meter asks here which side of a copy is the host's
# (scaledl.sim.roofline: a copy between a host buffer and the device's memory crosses PCIe, in that direction).
_host_buffers: set[tuple[int, int]] = set()


def _register_host(owner: torch.Tensor | np.ndarray) -> None:
    """Note `owner`'s memory as a host buffer for as long as `owner` lives."""
    start = owner.data_ptr() if isinstance(owner, torch.Tensor) else owner.ctypes.data
    span = (start, start + owner.nbytes)
    _host_buffers.add(span)
    weakref.finalize(owner, _host_buffers.discard, span)


def is_host_buffer(t: torch.Tensor) -> bool:
    """Whether `t` lies inside a host buffer made here (host_array, a HostStage's mirror)."""
    start = t.data_ptr()
    return any(first <= start < end for first, end in _host_buffers)


def host_array(numel: int) -> np.ndarray:
    """An uninitialised float32 host array of `numel` values, allocated by torch (the numpy view keeps the tensor
    alive). torch's allocator gives large blocks huge pages (THP_MEM_ALLOC_ENABLE, set by `python -m
    scaledl`), as it does every other |W|-sized buffer of a run; a plain np.empty does not, and a 143 MB
    message into such a buffer took twice as long here (bench_exchange)."""
    array = torch.empty(numel, dtype=torch.float32).numpy()
    _register_host(array)
    return array


def host_tensor(shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """A host mirror for staging a device tensor: pinned where there is a GPU (its copies are DMA), noted as a
    host buffer."""
    mirror = torch.empty(shape, dtype=dtype, pin_memory=torch.cuda.is_available())
    _register_host(mirror)
    return mirror


class HostStage:
    """A host mirror of one device tensor: `.host` is what MPI reads and writes."""

    def __init__(self, like: torch.Tensor, timer: PhaseTimer):
        self.device = like.device
        # a simulated GPU's tensors are in this machine's memory, but its messages are staged as on the GPU
        self.on_host = like.device.type == "cpu" and not transport.current().device_behind_pcie()
        self.timer = timer
        self._host = None if self.on_host else host_tensor(like.shape, like.dtype)
        self._views: dict[tuple, np.ndarray] = {}

    def view(self, t: torch.Tensor) -> np.ndarray:
        """`t`'s memory as a numpy array, made once per tensor.

        A fresh view per call cost 30–40 µs more per Allreduce at LeNet's size
        (2 ranks, measured against a view made once). The view keeps the
        tensor's memory alive, so an address in the cache is never reused.
        """
        key = (t.data_ptr(), t.numel(), t.dtype)
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = t.detach().numpy()
        return found

    def send_view(self, t: torch.Tensor) -> np.ndarray:
        """A numpy array holding `t`'s current values, ready to be sent."""
        if self.on_host:
            return self.view(t)
        with self.timer.phase("param_copy"):
            if self.device.type == "cuda":
                torch.cuda.current_stream(self.device).synchronize()
            self._host.copy_(t)
        return self.view(self._host)

    def recv_view(self, t: torch.Tensor) -> np.ndarray:
        """A numpy array MPI may write into; call `finish_recv(t)` afterwards."""
        return self.view(t if self.on_host else self._host)

    def finish_recv(self, t: torch.Tensor) -> None:
        if not self.on_host:
            with self.timer.phase("param_copy"):
                t.copy_(self._host, non_blocking=False)
