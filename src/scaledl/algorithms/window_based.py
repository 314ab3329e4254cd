"""What the window-based algorithms share: the center W in an RMA window on the master.

Async SGD/MSGD/EASGD/MEASGD and the Hogwild variants: no master-side request
loop; each worker exchange is one passive-target epoch on the master's window
(`scaledl.comm.center_window`: an RMA window, or with --center-window shared a
shared-memory window the workers update directly). The registry's pattern sets the
lock (`AlgorithmInfo.locked`): `fcfs_window` opens each epoch with an
exclusive lock (one update at a time, in lock order: first come, first
served), `lock_free_window` with a shared lock (concurrent, unlocked updates:
Hogwild). That is the only difference between a locked algorithm and its
Hogwild variant; subclasses write `worker_step`.
"""

from __future__ import annotations

import numpy as np
import torch

from scaledl.algorithms.master_based import MasterBased
from scaledl.comm.center_window import open_center_window


class WindowBased(MasterBased):
    def __init__(self, context):
        super().__init__(context)
        r = self.roles
        numel = (self.center if r.is_master else self.params).numel
        # Async MSGD's default: one momentum buffer V beside W in the master's window.
        self.master_momentum = "momentum_at" in self.info.options and self.hyper.momentum_at == "master"
        # The run's --center-window: "rma" (Get/Accumulate) or "shared" (loads and stores on a shared-memory window).
        self.window = open_center_window(context.cfg.center_window, r.world, r.master, numel, locked=self.info.locked,
                                         with_momentum=self.master_momentum)
        if r.is_worker:
            like = self.params.data
            self.center_host = np.empty(numel, dtype=np.float32)     # W_t as read from the window
            self.delta_host = np.empty(numel, dtype=np.float32)      # what this worker adds to W
            self.delta = torch.from_numpy(self.delta_host)            # ... as a tensor, for the rules
            self.center_copy = torch.empty_like(like)                 # W_t on this worker's device

    def start(self) -> None:
        # W_0 goes into the window BEFORE the broadcast of W_0 (MasterBased.start): a worker can
        # leave that Bcast only after the master has entered it, so the window holds W_0 before
        # any worker's first epoch can read it. Written after the Bcast, a worker's first Get
        # could race the master's write and read the window's zeros.
        if self.roles.is_master:
            self.window.write(self.center.data)
        super().start()

    def state_dict(self) -> dict:
        """The master adds its whole window (W, and V with the master's momentum)."""
        state = super().state_dict()
        if self.roles.is_master:
            state["window"] = self.window.read_all()
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.roles.is_master:
            self.window.write_all(state["window"])

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
