"""Collectives of the simulated MPI, from point-to-point messages, with the algorithms MPI libraries select.

MPICH's defaults (its classic selection, the one scaledl.net.alphabeta models) by
message size n and communicator size P:

    Barrier    dissemination                      ⌈lg P⌉ rounds of empty messages
    Bcast      binomial tree (n < 12 KiB or P < 8), else scatter + ring allgather
    Reduce     binomial tree (n ≤ 2 KiB), else ring reduce-scatter + gather to the root
    Allreduce  recursive doubling (n ≤ 2 KiB, P a power of two; else binomial reduce + bcast),
               else ring reduce-scatter + ring allgather (the bandwidth term 2(P−1)/P·nβ of
               Rabenseifner's; ring's α term is (P−1) instead of lg P per half)
    Gather     every rank to the root
Object collectives (bcast, gather, allgather of pickled objects): binomial
bcast, gather to the root, gather + bcast.

Every message of a collective is a real transfer on the simulated network, so
the links' sharing shapes its time. The arithmetic is numpy's on real data, in
an order fixed by P and n alone, so every reduction is deterministic; its cost
is charged to the rank's device (Meter.reduction).
"""

from __future__ import annotations

import pickle
import time

import numpy as np

from scaledl.sim.cluster import this_rank

BCAST_SHORT, BCAST_MIN_PROCS = 12 * 1024, 8
REDUCE_SHORT = ALLREDUCE_SHORT = 2 * 1024


class Channel:
    """One collective call's messages: the communicator, a channel name no user message uses, and a tag."""

    def __init__(self, comm, name: str, tag: int):
        self.comm, self.name, self.tag = comm, name, tag
        self.size, self.rank = comm.Get_size(), comm.Get_rank()

    def send(self, dest: int, payload, nbytes: int) -> None:
        self.comm._post(payload, nbytes, dest, self.tag, channel=self.name)

    def recv(self, source: int):
        return self.comm._inbox(self.name).take(source, self.tag).payload

    def send_array(self, dest: int, data: np.ndarray) -> None:
        self.send(dest, data.copy(), data.nbytes)


def _combine(op, into: np.ndarray, value: np.ndarray) -> None:
    """into ← into (op) value: real arithmetic (its CPU seconds are the rank's numerics), charged to the
    simulated clock as the reduction's memory traffic."""
    meter = this_rank().meter
    t0 = time.thread_time()
    op.apply(into, value)
    if meter is not None:
        meter.real_s += time.thread_time() - t0
        meter.reduction(into.nbytes)


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, n, parts + 1).astype(np.int64)
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


# ------------------------------------------------------------------ barrier
def barrier(ch: Channel) -> None:
    distance = 1
    while distance < ch.size:
        ch.send((ch.rank + distance) % ch.size, None, 0)
        ch.recv((ch.rank - distance) % ch.size)
        distance <<= 1


# ------------------------------------------------------------------ bcast
def bcast(ch: Channel, buf: np.ndarray, root: int) -> None:
    if ch.size == 1:
        return
    flat = buf.reshape(-1)
    if flat.nbytes < BCAST_SHORT or ch.size < BCAST_MIN_PROCS:
        _binomial_bcast(ch, flat, root)
    else:
        _scatter_allgather_bcast(ch, flat, root)


def _binomial_bcast(ch: Channel, flat: np.ndarray, root: int) -> None:
    p, vr = ch.size, (ch.rank - root) % ch.size
    mask = 1
    while mask < p:
        if vr & mask:
            flat[...] = ch.recv((vr - mask + root) % p)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vr + mask < p:
            ch.send_array((vr + mask + root) % p, flat)
        mask >>= 1


def _scatter_allgather_bcast(ch: Channel, flat: np.ndarray, root: int) -> None:
    p, parts = ch.size, _chunks(flat.size, ch.size)
    if ch.rank == root:
        for dest in range(p):
            if dest != root:
                lo, hi = parts[dest]
                ch.send_array(dest, flat[lo:hi])
    else:
        lo, hi = parts[ch.rank]
        flat[lo:hi] = ch.recv(root)
    _ring_allgather(ch, flat, parts)


def _ring_allgather(ch: Channel, flat: np.ndarray, parts: list[tuple[int, int]], first_offset: int = 0) -> None:
    """Rank r starts with chunk (r + first_offset) % P; after P − 1 steps every rank has every chunk."""
    p = ch.size
    right, left = (ch.rank + 1) % p, (ch.rank - 1) % p
    for step in range(p - 1):
        lo, hi = parts[(ch.rank + first_offset - step) % p]
        ch.send_array(right, flat[lo:hi])
        lo, hi = parts[(ch.rank + first_offset - step - 1) % p]
        flat[lo:hi] = ch.recv(left)


# ------------------------------------------------------------------ reduce
def reduce(ch: Channel, send: np.ndarray, recv: np.ndarray | None, op, root: int) -> None:
    acc = send.reshape(-1).copy()
    if ch.size > 1:
        if acc.nbytes <= REDUCE_SHORT:
            _binomial_reduce(ch, acc, op, root)
        else:
            parts = _chunks(acc.size, ch.size)
            _ring_reduce_scatter(ch, acc, op, parts)  # rank r now holds chunk (r + 1) % P, reduced
            own = parts[(ch.rank + 1) % ch.size]
            if ch.rank != root:
                ch.send_array(root, acc[own[0] : own[1]])
            else:
                for source in range(ch.size):
                    if source != root:
                        lo, hi = parts[(source + 1) % ch.size]
                        acc[lo:hi] = ch.recv(source)
    if recv is not None:
        recv.reshape(-1)[...] = acc


def _binomial_reduce(ch: Channel, acc: np.ndarray, op, root: int) -> None:
    """acc ends as the reduction on the root; the children's sums are added in increasing distance."""
    p, vr = ch.size, (ch.rank - root) % ch.size
    mask = 1
    while mask < p:
        if vr & mask:
            ch.send_array((vr - mask + root) % p, acc)
            return
        if vr + mask < p:
            _combine(op, acc, ch.recv((vr + mask + root) % p))
        mask <<= 1


def _ring_reduce_scatter(ch: Channel, acc: np.ndarray, op, parts: list[tuple[int, int]]) -> None:
    p = ch.size
    right, left = (ch.rank + 1) % p, (ch.rank - 1) % p
    for step in range(p - 1):
        lo, hi = parts[(ch.rank - step) % p]
        ch.send_array(right, acc[lo:hi])
        lo, hi = parts[(ch.rank - step - 1) % p]
        _combine(op, acc[lo:hi], ch.recv(left))


# ------------------------------------------------------------------ allreduce
def allreduce(ch: Channel, buf: np.ndarray, op) -> None:
    if ch.size == 1:
        return
    flat = buf.reshape(-1)
    if flat.nbytes <= ALLREDUCE_SHORT:
        if ch.size & (ch.size - 1) == 0:
            _recursive_doubling(ch, flat, op)
        else:
            _binomial_reduce(ch, flat, op, 0)
            _binomial_bcast(ch, flat, 0)
        return
    parts = _chunks(flat.size, ch.size)
    _ring_reduce_scatter(ch, flat, op, parts)
    _ring_allgather(ch, flat, parts, first_offset=1)


def _recursive_doubling(ch: Channel, flat: np.ndarray, op) -> None:
    mask = 1
    while mask < ch.size:
        partner = ch.rank ^ mask
        ch.send_array(partner, flat)
        other = ch.recv(partner)
        if partner < ch.rank:  # the lower rank's value first, on both sides: the same sum everywhere
            other = other.copy()
            _combine(op, other, flat)
            flat[...] = other
        else:
            _combine(op, flat, other)
        mask <<= 1


# ------------------------------------------------------------------ gather
def gather(ch: Channel, send: np.ndarray, recv: np.ndarray | None, root: int) -> None:
    row = send.reshape(-1)
    if ch.rank != root:
        ch.send_array(root, row)
        return
    rows = recv.reshape(ch.size, -1)
    for source in range(ch.size):
        rows[source] = row if source == root else ch.recv(source)


# ------------------------------------------------------------------ objects
def _pickled(obj) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def bcast_object(ch: Channel, obj, root: int):
    p, vr = ch.size, (ch.rank - root) % ch.size
    data = _pickled(obj) if ch.rank == root else None
    mask = 1
    while mask < p:
        if vr & mask:
            data = ch.recv((vr - mask + root) % p)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vr + mask < p:
            ch.send((vr + mask + root) % p, data, len(data))
        mask >>= 1
    return obj if ch.rank == root else pickle.loads(data)


def gather_objects(ch: Channel, obj, root: int):
    if ch.rank != root:
        data = _pickled(obj)
        ch.send(root, data, len(data))
        return None
    return [obj if source == root else pickle.loads(ch.recv(source)) for source in range(ch.size)]


def allgather_objects(ch: Channel, obj):
    everyone = gather_objects(ch, obj, 0)
    return bcast_object(ch, everyone, 0)
