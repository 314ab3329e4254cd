"""The first-come-first-served family: W in an RMA window on the master.

Async SGD/MSGD/EASGD/MEASGD open each exchange with an exclusive lock on the
window (one update at a time, in lock order: first come, first served); the
Hogwild variants open it with a shared lock (concurrent, unlocked updates).
Subclasses set `locked` and write `worker_step`; nothing else differs.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from scaledl.algorithms.master_based import MasterBased
from scaledl.comm.center_window import CenterWindow


class CenterInWindow(MasterBased):
    locked: ClassVar[bool]
    master_momentum: ClassVar[bool] = False

    def __init__(self, setup):
        super().__init__(setup)
        r = self.roles
        numel = (self.center if r.is_master else self.params).numel
        self.window = CenterWindow(r.world, r.master, numel, locked=self.locked, with_momentum=self.uses_master_momentum())
        if r.is_worker:
            like = self.params.data
            self.center_host = np.empty(numel, dtype=np.float32)     # W_t as read from the window
            self.delta_host = np.empty(numel, dtype=np.float32)      # what this worker adds to W
            self.center_copy = torch.empty_like(like)                 # W_t on this worker's device

    def uses_master_momentum(self) -> bool:
        return self.master_momentum

    def start(self) -> None:
        super().start()
        if self.roles.is_master:
            self.window.write(self.center.data)

    def refresh_center(self) -> None:
        if self.window is not None:   # after finish() the center holds the final snapshot
            self.window.snapshot(self.center.data)

    def finish(self) -> None:
        super().finish()              # all exchanges settled, final snapshot taken
        self.window.free()
        self.window = None

    def count_update(self) -> None:
        """Version the center and note this worker's staleness (called for every update it makes)."""
        self.staleness.note(self.board.next_version(self.roles.worker_index))

    def load_center_copy(self) -> torch.Tensor:
        """W_t (read into center_host) into this worker's memory."""
        with self.timer.phase("param_copy"):
            self.center_copy.copy_(torch.from_numpy(self.center_host))
        return self.center_copy
