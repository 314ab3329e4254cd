"""netbench's window epoch: the seconds of one Async SGD exchange on an RMA window, per message size.

Rank 1 runs epochs on a window held by rank 0, each the worker side of `CenterWindow.push_then_pull`: an
exclusive lock, an Accumulate (sum) of n bytes, a flush, a Get of n bytes and the unlock. Rank 0 meanwhile
spins on Iprobe, as the master's loop does in a job (its MPI progresses the epochs; a Barrier that yields the
core would make each epoch wait for the target to be scheduled again), until rank 1 says it is done. Per size: `warmup`
untimed epochs, then `repeats` timings of `iters` epochs (fewer for large sizes, as the ping-pong's); the
time is the median repeat's seconds per epoch, every repeat kept beside it (`samples_s`).
"""

from __future__ import annotations

import statistics

import numpy as np

from scaledl.comm import transport
from scaledl.comm.transport import MPI
from scaledl.net.ladder import iters_for

ORIGIN, TARGET = 1, 0  # the worker that runs the epochs, the master that holds the window
DONE = 71  # the origin's message: this size's epochs are over


def window_epochs(comm, sizes: list[int], iters: int, warmup: int, repeats: int) -> list[dict] | None:
    """Seconds per epoch at each size, as rows on rank 0 (None on the others); every rank must call it."""
    rank = comm.Get_rank()
    top = max(sizes) // 4
    win = MPI.Win.Allocate(top * 4 if rank == TARGET else 0, disp_unit=4, comm=comm)
    delta, out = np.ones(top, dtype=np.float32), np.zeros(top, dtype=np.float32)
    done = np.zeros(1, dtype=np.float32)

    def epoch(count: int) -> None:
        win.Lock(TARGET, MPI.LOCK_EXCLUSIVE)
        win.Accumulate(delta[:count], TARGET, op=MPI.SUM)
        win.Flush(TARGET)
        win.Get(out[:count], TARGET)
        win.Unlock(TARGET)

    rows = []
    for size in sizes:
        count, n_iter = size // 4, iters_for(size, iters)
        samples = []
        if rank == ORIGIN:
            for _ in range(warmup):
                epoch(count)
            for _ in range(repeats):
                t0 = transport.clock()
                for _ in range(n_iter):
                    epoch(count)
                samples.append((transport.clock() - t0) / n_iter)
            comm.Send(done, dest=TARGET, tag=DONE)
        elif rank == TARGET:
            while not comm.Iprobe(source=ORIGIN, tag=DONE):  # progress, as the master's spin
                pass
            comm.Recv(done, source=ORIGIN, tag=DONE)
        if rank == ORIGIN:
            rows.append({"bytes": size, "iters": n_iter, "time_s": statistics.median(samples), "samples_s": samples})
    win.Free()
    rows = comm.bcast(rows if rank == ORIGIN else None, root=ORIGIN)
    return sorted(rows, key=lambda r: r["bytes"]) if rank == 0 else None
