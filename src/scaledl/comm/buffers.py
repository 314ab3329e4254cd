"""Hand tensors to mpi4py's buffer (uppercase) calls without per-call allocation.

A CPU tensor is given to MPI as a zero-copy numpy view. A tensor on a device
that the MPI library cannot read is staged through a host buffer allocated
once (pinned, so the copies are DMA), after synchronizing the device stream:
mpi4py cannot know a CUDA kernel is still writing the tensor. The copies are
the paper's CPU–GPU parameter communication and are timed as `param_copy`.
"""

from __future__ import annotations

import numpy as np
import torch

from scaledl.timing import PhaseTimer


class HostStage:
    """A host mirror of one device tensor: `.host` is what MPI reads and writes."""

    def __init__(self, like: torch.Tensor, timer: PhaseTimer):
        self.device = like.device
        self.on_host = like.device.type == "cpu"
        self.timer = timer
        self._host = None if self.on_host else torch.empty(like.shape, dtype=like.dtype, pin_memory=torch.cuda.is_available())

    def send_view(self, t: torch.Tensor) -> np.ndarray:
        """A numpy array holding `t`'s current values, ready to be sent."""
        if self.on_host:
            return t.detach().numpy()
        with self.timer.phase("param_copy"):
            torch.cuda.current_stream(self.device).synchronize()
            self._host.copy_(t)
        return self._host.numpy()

    def recv_view(self, t: torch.Tensor) -> np.ndarray:
        """A numpy array MPI may write into; call `finish_recv(t)` afterwards."""
        return t.detach().numpy() if self.on_host else self._host.numpy()

    def finish_recv(self, t: torch.Tensor) -> None:
        if not self.on_host:
            with self.timer.phase("param_copy"):
                t.copy_(self._host, non_blocking=False)
