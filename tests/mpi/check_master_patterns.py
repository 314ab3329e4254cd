"""Run under mpiexec with 2-4 ranks: the master-based patterns on rank-valued tensors.

Rank 0 is the master, ranks 1..P the workers (worker index w = rank - 1).
Every expected value is computed from P and K alone.
"""

import numpy as np
import torch
from mpi4py import MPI

from scaledl.algorithms import rules
from scaledl.comm.board import LOSS_SUM, SAMPLES, UPDATES, Board
from scaledl.comm.center_window import CenterWindow
from scaledl.comm.roles import make_roles
from scaledl.comm.round_robin import RoundRobinMaster, RoundRobinWorker
from scaledl.comm.tags import Tag
from scaledl.comm.timing import PhaseTimer

world = MPI.COMM_WORLD
roles = make_roles(world, dedicated_master=True)
P, N, K = roles.num_workers, 1000, 20
w = roles.worker_index
total = K * P * (P + 1) / 2  # Σ_w K·(w+1)


def check_window(locked: bool) -> None:
    win = CenterWindow(world, roles.master, N, locked=locked)
    board = Board(world, roles.master, P)
    if roles.is_worker:
        out = np.empty(N, dtype=np.float32)
        delta = np.full(N, w + 1, dtype=np.float32)
        for _ in range(K):
            win.push_then_pull(delta, out, on_update=lambda: board.next_version(w))
            if locked:  # every update adds a uniform vector: under the lock no read is torn
                assert np.all(out == out[0]), "torn read under an exclusive lock"
            win.pull_then_push(out, lambda center: np.zeros(N, dtype=np.float32))
            board.report(w, loss_sum=2.0 * (w + 1), samples=w + 1)
    world.Barrier()
    if roles.is_master:
        center = torch.zeros(N)
        win.snapshot(center)
        assert torch.all(center == total), (locked, center[:4], total)
        words = board.read()
        assert words[UPDATES] == K * P
        assert np.all(board.heartbeats(words) == K) and np.all(board.queued(words) == 1)
        assert words[SAMPLES] == total and words[LOSS_SUM] == 2 * total
    win.free()
    board.free()


def check_master_momentum() -> None:
    """One worker at a time (exclusive lock): V ← μV − ηg ; W ← W + V, with g = 1 everywhere."""
    win = CenterWindow(world, roles.master, N, locked=True, with_momentum=True)
    lr, mu = 0.5, 0.5
    if roles.is_worker:
        grad, velocity, out = np.ones(N, dtype=np.float32), np.empty(N, dtype=np.float32), np.empty(N, dtype=np.float32)
        for _ in range(K):
            win.momentum_step(
                velocity, out, lambda v: rules.velocity_(torch.from_numpy(v), torch.from_numpy(grad), lr, mu)
            )
    world.Barrier()
    if roles.is_master:
        v, wt = 0.0, 0.0
        for _ in range(K * P):  # the order of workers does not matter: every gradient is the same
            v = mu * v - lr
            wt += v
        assert torch.allclose(win.center, torch.full((N,), wt)), (win.center[:3], wt)
        assert torch.allclose(win.momentum, torch.full((N,), v))
    win.free()


def check_round_robin() -> None:
    rounds = 3
    timer = PhaseTimer()
    if roles.is_master:
        rr = RoundRobinMaster(world, roles.worker_ranks, N, timeout=60)
        center = np.zeros(N, dtype=np.float32)
        order = []
        for r in range(rounds):
            for rank in roles.worker_ranks:
                back = rr.serve(rank, center, timer)
                assert np.all(back == center + rank), "a worker returns W + its rank"
                center = back.copy()
                order.append(rank)
            if r == 0:
                rr.pause_all()  # a checkpoint between rounds: every worker hears of it before its turn
        rr.stop_all()
        assert order == list(roles.worker_ranks) * rounds
        assert np.all(center == rounds * sum(roles.worker_ranks))
    else:
        rr = RoundRobinWorker(world, roles.master, shares_cores=roles.rank % 2 == 1)  # both ways of waiting
        got = np.empty(N, dtype=np.float32)
        turns, pauses = 0, 0
        while (message := rr.await_turn(got, timer)) != Tag.STOP:
            if message == Tag.PAUSE:
                assert turns == 1, "the pause comes between the first and the second round"
                pauses += 1
                continue
            turns += 1
            rr.hand_back(got + roles.rank)
        assert turns == rounds and pauses == 1


check_window(locked=True)
check_window(locked=False)
check_master_momentum()
check_round_robin()
print(f"rank {roles.rank}/{roles.size} ok", flush=True)
