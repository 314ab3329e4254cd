"""Quorum rounds: a dedicated master closes each averaging round once m of the P workers have sent W^i.

Per round of worker i: after its τ local steps worker i sends W^i (two-sided,
Tag.WEIGHTS) and waits for the master's answer, as a round-robin worker waits
for its turn (comm/round_robin.RoundRobinWorker, reused): the new center W
(WEIGHTS), or a pause (EVALUATE, PAUSE) or STOP instead. The master receives
W^i from whichever workers send first, each into a buffer of its own; once m
are held (and any others already arrived), it closes the round, steps the
center on them and answers each of them. A worker still computing is not
waited for: its W^i arrives later and joins the round open then. With m = P
every round waits for every worker, as a rooted Reduce would.

A pause or the stop must reach every worker where it waits: the master first
holds a message from every worker (those computing send theirs at their
round's end), then tells them all (RoundRobinMaster's messages).
"""

from __future__ import annotations

import numpy as np

from scaledl.comm.buffers import host_array
from scaledl.comm.tags import Tag
from scaledl.comm.timing import PhaseTimer
from scaledl.comm.transport import MPI


class QuorumMaster:
    def __init__(self, world: MPI.Comm, worker_ranks: tuple[int, ...], numel: int):
        self.world = world
        self.worker_ranks = worker_ranks
        self._index = {rank: w for w, rank in enumerate(worker_ranks)}
        self.slots = [host_array(numel) for _ in worker_ranks]  # W^i of each worker, as it last sent it
        self.held: list[int] = []  # workers whose W^i is here and unanswered, in arrival order
        self._status = MPI.Status()

    def arrive(self, timer: PhaseTimer) -> int:
        """Wait for the next W^i from any worker, receive it into its slot; its worker index."""
        with timer.phase("wait"):
            self.world.Probe(source=MPI.ANY_SOURCE, tag=Tag.WEIGHTS, status=self._status)
        rank = self._status.Get_source()
        w = self._index[rank]
        with timer.phase("comm"):
            self.world.Recv(self.slots[w], source=rank, tag=Tag.WEIGHTS)
        self.held.append(w)
        return w

    def gather(self, at_least: int, timer: PhaseTimer) -> list[int]:
        """Hold at least `at_least` workers' W^i and every one already arrived; the held workers, in worker
        order (the order their contributions are summed in)."""
        while len(self.held) < at_least:
            self.arrive(timer)
        while len(self.held) < len(self.worker_ranks) and self.world.Iprobe(source=MPI.ANY_SOURCE, tag=Tag.WEIGHTS):
            self.arrive(timer)
        return sorted(self.held)

    def answer(self, center: np.ndarray, timer: PhaseTimer) -> list[int]:
        """The new center W to every held worker; returns who they were, holding none."""
        answered, self.held = sorted(self.held), []
        with timer.phase("comm"):
            requests = [self.world.Isend(center, dest=self.worker_ranks[w], tag=Tag.WEIGHTS) for w in answered]
            MPI.Request.Waitall(requests)
        return answered
