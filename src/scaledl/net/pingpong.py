"""netbench's ping-pong: one-way seconds per message size between two ranks, from one hot buffer or, cold, from
places spread over a ring far larger than the caches."""

from __future__ import annotations

import statistics

import numpy as np

from scaledl.comm import transport
from scaledl.net.ladder import iters_for

COLD_RING_BYTES = 256 << 20  # a cold ping-pong's messages rotate through this much memory: far beyond any cache
COLD_PLACES = 1024  # ... from at most this many places, spread over the whole ring


def _cold_views(ring: np.ndarray, size: int) -> list[np.ndarray]:
    """Places for a message of `size` bytes spread over `ring`, each page-aligned and a page apart at least."""
    stride = max(-(-size // 4096) * 4096 + 4096, (ring.size // COLD_PLACES) // 4096 * 4096)
    places = max(1, min(COLD_PLACES, (ring.size - size) // stride + 1))
    return [ring[k * stride : k * stride + size] for k in range(places)]


def _exchange(comm, views: list[np.ndarray], count: int, peer: int, first: bool, start: int = 0) -> None:
    """`count` round trips with `peer` (sending first, or receiving first), each message from the next view
    after the `start`-th: with one view, the same buffer every time, the loop as bare as the timing needs."""
    if len(views) == 1:
        view = views[0]
        for _ in range(count):
            if first:
                comm.Send(view, dest=peer, tag=7)
                comm.Recv(view, source=peer, tag=7)
            else:
                comm.Recv(view, source=peer, tag=7)
                comm.Send(view, dest=peer, tag=7)
        return
    for i in range(start, start + count):
        out, back = views[(2 * i) % len(views)], views[(2 * i + 1) % len(views)]
        if first:
            comm.Send(out, dest=peer, tag=7)
            comm.Recv(back, source=peer, tag=7)
        else:
            comm.Recv(out, source=peer, tag=7)
            comm.Send(back, dest=peer, tag=7)


def pingpong(
    comm, a: int, b: int, sizes: list[int], iters: int, warmup: int, repeats: int, cold: bool = False
) -> list[dict] | None:
    """One-way seconds per size between ranks a and b (rank a's view), in the order given; None on the other
    ranks. `cold`: each message from another place of a ring far larger than the caches (as a training step's
    weights-sized message finds its buffer: written long ago), instead of the same buffer every time."""
    rank = comm.Get_rank()
    ring = max(max(sizes), COLD_RING_BYTES) if cold else max(sizes)
    buf = np.zeros(ring, dtype=np.uint8)
    rows = []
    for size in sizes:
        views = _cold_views(buf, size) if cold else [buf[:size]]
        n_iter = iters_for(size, iters)
        samples = []
        done = 0  # round trips so far: a cold message never reuses a recent place
        comm.Barrier()
        for rep in range(repeats + 1):
            count = warmup if rep == 0 else n_iter
            if count == 0:
                continue
            if rank == a:
                t0 = transport.clock()
                _exchange(comm, views, count, b, first=True, start=done)
                dt = transport.clock() - t0
                if rep > 0:
                    samples.append(dt / count / 2)
            elif rank == b:
                _exchange(comm, views, count, a, first=False, start=done)
            done += count
        comm.Barrier()
        if rank == a:
            t = statistics.median(samples)
            rows.append({"bytes": size, "iters": n_iter, "time_s": t, "bandwidth_Bps": size / t, "samples_s": samples})
    return rows if rank == a else None
