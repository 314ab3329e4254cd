"""The simulated MPI's collectives (scaledl.sim.collectives) on an in-process network of threads: what they
compute, and the messages and reductions the algorithms MPICH selects make (no SimGrid needed)."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from scaledl.sim import collectives
from scaledl.sim.cluster import RankState, bind
from scaledl.sim.mpi import SUM

LONG, SHORT = 10_001, 3  # float64 words: 80 kB (Rabenseifner's) and 24 B (recursive doubling)


class Meter:
    """The bytes each reduction of one rank charges."""

    def __init__(self):
        self.real_s = 0.0
        self.reduced: list[int] = []

    def reduction(self, nbytes: int, on_device: bool = False) -> None:
        self.reduced.append(nbytes)
        self.on_device = on_device


class Wires:
    """Point-to-point messages between P threads: a queue per (source, destination), each send recorded."""

    def __init__(self, p: int):
        self.queues = {(a, b): queue.Queue() for a in range(p) for b in range(p)}
        self.sent: list[list[int]] = [[] for _ in range(p)]  # bytes of each message, by sender


class Channel(collectives.Channel):
    def __init__(self, wires: Wires, size: int, rank: int, device: bool = False, carry: bool = True):
        self.wires, self.size, self.rank, self.device, self.carry = wires, size, rank, device, carry

    def send(self, dest: int, payload, nbytes: int) -> None:
        self.wires.sent[self.rank].append(nbytes)
        self.wires.queues[(self.rank, dest)].put(payload)

    def recv(self, source: int):
        return self.wires.queues[(source, self.rank)].get(timeout=10)


def allreduce(inputs: list[np.ndarray], carry: bool = True) -> tuple[list[np.ndarray], Wires, list[Meter]]:
    """Each rank's result of a sum-Allreduce of its input, the messages sent and the reductions charged
    (`carry` False: the buffers are time-only replicas, whose messages carry no values)."""
    p = len(inputs)
    wires, meters, results = Wires(p), [Meter() for _ in range(p)], [x.copy() for x in inputs]

    def rank(r: int) -> None:
        bind(RankState(None, r, None, "node", meter=meters[r]))
        collectives.allreduce(Channel(wires, p, r, carry=carry), results[r], SUM)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(p)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not any(thread.is_alive() for thread in threads)
    return results, wires, meters


def inputs(p: int, n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(p * n)
    return [rng.standard_normal(n) for _ in range(p)]


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("n", [SHORT, LONG])
def test_every_rank_gets_the_sum_and_the_same_bits(p, n):
    data = inputs(p, n)
    results, _, _ = allreduce(data)
    np.testing.assert_allclose(results[0], np.sum(data, axis=0), rtol=1e-12, atol=1e-12)
    assert all(np.array_equal(results[0], other) for other in results[1:])
    again, _, _ = allreduce(data)
    assert np.array_equal(again[0], results[0])  # deterministic: an order fixed by P and n


def test_at_two_ranks_a_long_allreduce_is_one_addition_per_element():
    data = inputs(2, LONG)
    results, _, _ = allreduce(data)
    assert np.array_equal(results[0], data[0] + data[1])  # what any MPI gives: one IEEE addition, commutative


def test_a_long_allreduce_at_eight_ranks_moves_what_rabenseifners_does():
    results, wires, meters = allreduce(inputs(8, LONG))
    n = 8 * LONG
    for sent, meter in zip(wires.sent, meters):
        # lg P halvings then lg P doublings, each half the previous: 2(P − 1)/P·n bytes, and the reduced
        # (P − 1)/P·n of the reduce-scatter (a ring's would be 2(P − 1) messages)
        assert len(sent) == 2 * 3
        assert sum(sent) == pytest.approx(2 * 7 / 8 * n, abs=8 * 8)
        assert sent[:3] == sorted(sent[:3], reverse=True) and sent[3:] == sorted(sent[3:])
        assert sum(meter.reduced) == pytest.approx(7 / 8 * n, abs=8 * 8)


def test_a_long_allreduce_at_five_ranks_folds_the_first_pair():
    _, wires, meters = allreduce(inputs(5, LONG))
    n = 8 * LONG
    # rank 0 sends its whole buffer to rank 1 and sits out; rank 1 adds it, and sends the result back
    assert wires.sent[0] == [n] and sum(meters[0].reduced) == 0
    assert wires.sent[1][-1] == n and meters[1].reduced[0] == n
    assert [len(sent) for sent in wires.sent[1:]] == [2 * 2 + 1, 2 * 2, 2 * 2, 2 * 2]


def test_a_short_allreduce_is_recursive_doubling_of_the_whole_buffer():
    _, wires, _ = allreduce(inputs(8, SHORT))
    assert all(sent == [8 * SHORT] * 3 for sent in wires.sent)


@pytest.mark.parametrize("p", [2, 5, 8])
@pytest.mark.parametrize("n", [SHORT, LONG])
def test_a_replicas_allreduce_moves_and_charges_the_same_bytes_and_computes_nothing(p, n):
    """Time-only: a replica's messages carry no values, yet every message and every reduction is priced as a
    full allreduce's, and no buffer is written."""
    data = inputs(p, n)
    _, wires, meters = allreduce(data)
    untouched, priced, charged = allreduce(data, carry=False)
    assert priced.sent == wires.sent
    assert [m.reduced for m in charged] == [m.reduced for m in meters]
    assert all(np.array_equal(after, before) for after, before in zip(untouched, data))
