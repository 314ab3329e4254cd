"""Collectives of the simulated MPI, from point-to-point messages, with the algorithms MPI libraries select.

MPICH's defaults (its classic selection, the one scaledl.net.alphabeta models) by
message size n and communicator size P:

    Barrier    dissemination                      ⌈lg P⌉ rounds of empty messages
    Bcast      binomial tree (n < 12 KiB or P < 8), else scatter + ring allgather
    Reduce     binomial tree (n ≤ 2 KiB), else ring reduce-scatter + gather to the root
    Allreduce  recursive doubling (n ≤ 2 KiB, or fewer elements than P′), else Rabenseifner's:
               reduce-scatter by recursive halving + allgather by recursive doubling,
               2·lg P′·α + 2(P′−1)/P′·nβ. Both run on P′, the largest power of two ≤ P: the
               first 2(P − P′) ranks first fold in pairs (the even one sends its data to the
               odd one, which adds it) and the even ones get the result back at the end
    Gather     every rank to the root
Object collectives (bcast, gather, allgather of pickled objects): binomial
bcast, gather to the root, gather + bcast.

Every message of a collective is a real transfer on the simulated network, so
the links' sharing shapes its time. The arithmetic is numpy's on real data, in
an order fixed by P and n alone, so every reduction is deterministic; its cost
is charged where the buffers are (Meter.reduction): the host's memory, or a
CUDA-aware call's device.
"""

from __future__ import annotations

import pickle
import time

import numpy as np

from scaledl.sim.cluster import this_rank

BCAST_SHORT, BCAST_MIN_PROCS = 12 * 1024, 8
REDUCE_SHORT = ALLREDUCE_SHORT = 2 * 1024


class Channel:
    """One collective call's messages: the communicator, a channel name no user message uses, and a tag;
    `device`: its buffers are device memory (a CUDA-aware call), so its messages and sums are the device's;
    `carry` False: its buffer is a time-only replica (scaledl.sim.replicas), so its messages are priced by
    their sizes and carry no values, and its sums are charged, not computed."""

    def __init__(self, comm, name: str, tag: int, device: bool = False, carry: bool = True):
        self.comm, self.name, self.tag, self.device, self.carry = comm, name, tag, device, carry
        self.size, self.rank = comm.Get_size(), comm.Get_rank()

    def send(self, dest: int, payload, nbytes: int) -> None:
        self.comm._post(payload, nbytes, dest, self.tag, channel=self.name, device=self.device)

    def recv(self, source: int):
        return self.comm._inbox(self.name).take(source, self.tag).payload

    def send_array(self, dest: int, data: np.ndarray) -> None:
        self.send(dest, data.copy() if self.carry else None, data.nbytes)

    def recv_into(self, out: np.ndarray, source: int) -> None:
        """out ← the message from `source` (nothing to write when it carried no values)."""
        payload = self.recv(source)
        if payload is not None:
            out[...] = payload


def _combine(ch: Channel, op, into: np.ndarray, value: np.ndarray | None) -> None:
    """into ← into (op) value: real arithmetic (its CPU seconds are the rank's numerics), charged to the
    simulated clock as the reduction's memory traffic, on the device for a device buffer's (ch.device); a
    message without values (a time-only replica's) is charged alike and not computed."""
    meter = this_rank().meter
    t0 = time.thread_time()
    if value is not None and ch.carry:
        op.apply(into, value)
    if meter is not None:
        meter.real_s += time.thread_time() - t0
        meter.reduction(into.nbytes, on_device=ch.device)


def _edges(n: int, parts: int) -> list[int]:
    """Where `parts` near-equal blocks of n elements start, and n at the end."""
    return np.linspace(0, n, parts + 1).astype(np.int64).tolist()


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    edges = _edges(n, parts)
    return list(zip(edges[:-1], edges[1:]))


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
            ch.recv_into(flat, (vr - mask + root) % p)
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
        ch.recv_into(flat[lo:hi], root)
    _ring_allgather(ch, flat, parts)


def _ring_allgather(ch: Channel, flat: np.ndarray, parts: list[tuple[int, int]]) -> None:
    """Rank r starts with chunk r; after P − 1 steps every rank has every chunk."""
    p = ch.size
    right, left = (ch.rank + 1) % p, (ch.rank - 1) % p
    for step in range(p - 1):
        lo, hi = parts[(ch.rank - step) % p]
        ch.send_array(right, flat[lo:hi])
        lo, hi = parts[(ch.rank - step - 1) % p]
        ch.recv_into(flat[lo:hi], left)


# ------------------------------------------------------------------ reduce
def reduce(ch: Channel, send: np.ndarray, recv: np.ndarray | None, op, root: int) -> None:
    acc = send.reshape(-1).copy() if ch.carry else send.reshape(-1)  # a replica's is never written
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
                        ch.recv_into(acc[lo:hi], source)
    if recv is not None and ch.carry:
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
            _combine(ch, op, acc, ch.recv((vr + mask + root) % p))
        mask <<= 1


def _ring_reduce_scatter(ch: Channel, acc: np.ndarray, op, parts: list[tuple[int, int]]) -> None:
    p = ch.size
    right, left = (ch.rank + 1) % p, (ch.rank - 1) % p
    for step in range(p - 1):
        lo, hi = parts[(ch.rank - step) % p]
        ch.send_array(right, acc[lo:hi])
        lo, hi = parts[(ch.rank - step - 1) % p]
        _combine(ch, op, acc[lo:hi], ch.recv(left))


# ------------------------------------------------------------------ allreduce
def allreduce(ch: Channel, buf: np.ndarray, op) -> None:
    """Every op here is a built-in, so commutative: MPICH's one condition left is the size."""
    if ch.size == 1:
        return
    flat = buf.reshape(-1)
    pof2 = _pof2(ch.size)
    rem = ch.size - pof2
    folded = _fold(ch, flat, op, rem)
    if folded is not None:
        if flat.nbytes <= ALLREDUCE_SHORT or flat.size < pof2:
            _recursive_doubling(ch, flat, op, folded, pof2, rem)
        else:
            _halving_doubling(ch, flat, op, folded, pof2, rem)
    _unfold(ch, flat, rem)


def _pof2(p: int) -> int:
    """The largest power of two ≤ p."""
    return 1 << (p.bit_length() - 1)


def _real_rank(folded: int, rem: int) -> int:
    """The rank behind folded rank `folded`: the odd rank of a folded pair, or a rank past the pairs."""
    return 2 * folded + 1 if folded < rem else folded + rem


def _fold(ch: Channel, flat: np.ndarray, op, rem: int) -> int | None:
    """Bring P down to a power of two: among the first 2·rem ranks the even one sends its data to its odd
    neighbour, which adds it, and sits out (None); the others get their rank among the P′ left."""
    if ch.rank >= 2 * rem:
        return ch.rank - rem
    if ch.rank % 2 == 0:
        ch.send_array(ch.rank + 1, flat)
        return None
    _combine(ch, op, flat, ch.recv(ch.rank - 1))
    return ch.rank // 2


def _unfold(ch: Channel, flat: np.ndarray, rem: int) -> None:
    """The folded pairs' odd ranks hand the result back to the even ones that sat out."""
    if ch.rank < 2 * rem:
        if ch.rank % 2:
            ch.send_array(ch.rank - 1, flat)
        else:
            ch.recv_into(flat, ch.rank + 1)


def _recursive_doubling(ch: Channel, flat: np.ndarray, op, folded: int, pof2: int, rem: int) -> None:
    mask = 1
    while mask < pof2:
        partner = _real_rank(folded ^ mask, rem)
        ch.send_array(partner, flat)
        other = ch.recv(partner)
        if partner < ch.rank and other is not None:  # the lower rank's value first, on both sides: the same sum
            other = other.copy()
            _combine(ch, op, other, flat)
            flat[...] = other
        else:
            _combine(ch, op, flat, other)
        mask <<= 1


def _halving_doubling(ch: Channel, flat: np.ndarray, op, folded: int, pof2: int, rem: int) -> None:
    """Rabenseifner's allreduce on the P′ folded ranks. Reduce-scatter by recursive halving: at distance 1,
    2, 4, … each pair splits its blocks in half, the lower rank keeping the lower half, and adds the
    partner's copy of the half it keeps; then allgather by recursive doubling retraces the splits backwards,
    each rank sending the blocks it finished and receiving its partner's."""
    edges = _edges(flat.size, pof2)
    lo, hi = 0, pof2  # the blocks this rank still reduces
    splits = []
    mask = 1
    while mask < pof2:
        partner = _real_rank(folded ^ mask, rem)
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if folded & mask == 0 else ((mid, hi), (lo, mid))
        ch.send_array(partner, flat[edges[give[0]] : edges[give[1]]])
        _combine(ch, op, flat[edges[keep[0]] : edges[keep[1]]], ch.recv(partner))
        splits.append((partner, keep, give))
        lo, hi = keep
        mask <<= 1
    for partner, keep, give in reversed(splits):
        ch.send_array(partner, flat[edges[keep[0]] : edges[keep[1]]])
        ch.recv_into(flat[edges[give[0]] : edges[give[1]]], partner)


# ------------------------------------------------------------------ gather
def gather(ch: Channel, send: np.ndarray, recv: np.ndarray | None, root: int) -> None:
    row = send.reshape(-1)
    if ch.rank != root:
        ch.send_array(root, row)
        return
    rows = recv.reshape(ch.size, -1)
    for source in range(ch.size):
        if source == root:
            rows[source] = row
        else:
            ch.recv_into(rows[source], source)


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
