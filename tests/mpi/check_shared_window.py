"""The shared-memory center window against the RMA one (run under mpiexec, 2 or 3 ranks; rank 0 is the master).

    mpiexec -n R python -m mpi4py tests/mpi/check_shared_window.py

1. One worker (rank 1) makes the same exchanges (push_then_pull, pull_then_push,
   momentum_step) with the same random increments on an "rma" and a "shared"
   window: W, what it reads back, and V are bitwise equal.
2. Every worker adds 1.0 K times under the exclusive lock on either window:
   no add is lost, and no two traced epochs overlap (the lock excludes).
3. The same under the shared lock (Hogwild): it completes, and W never exceeds
   the N·K adds made (some may be lost on the shared window: plain stores).
Prints "shared window: OK" on the master.
"""

import numpy as np
import torch
from mpi4py import MPI

from scaledl.comm.center_window import CenterWindow, SharedCenterWindow, open_center_window

world = MPI.COMM_WORLD
rank, size, master = world.Get_rank(), world.Get_size(), 0
workers = size - 1
NUMEL, K = 4099, 40


def serve_until_workers_done() -> None:
    """Master: keep MPI progressing (lock grants) until every worker has entered the barrier."""
    request = world.Ibarrier()
    if rank == master:
        while not request.Test():
            pass
    else:
        request.Wait()


def overlaps(traces) -> int:
    spans = [(a, b, r) for r, trace in traces for a, b in trace]
    return sum(any(r2 != r and a2 < b and a < b2 for a2, b2, r2 in spans) for a, b, r in spans)


# ---- 1. one worker: the two windows compute the same bits
results = {}
for kind in ("rma", "shared"):
    win = open_center_window(kind, world, master, NUMEL, locked=True, with_momentum=True)
    assert isinstance(win, {"rma": CenterWindow, "shared": SharedCenterWindow}[kind])
    if rank == master:
        win.write(torch.from_numpy(np.random.default_rng(0).standard_normal(NUMEL).astype(np.float32)))
    world.Barrier()
    if rank == 1:
        rng = np.random.default_rng(1)
        out, velocity, seen = np.empty(NUMEL, np.float32), np.empty(NUMEL, np.float32), []
        for _ in range(5):
            win.push_then_pull(rng.standard_normal(NUMEL).astype(np.float32) * 1e-3, out)
            seen.append(out.copy())
            win.pull_then_push(
                out, lambda w: (0.1 * (rng.standard_normal(NUMEL).astype(np.float32) - w)).astype(np.float32)
            )
            seen.append(out.copy())

            def update_velocity(v):
                v *= np.float32(0.9)
                v -= np.float32(0.05) * rng.standard_normal(NUMEL).astype(np.float32)

            win.momentum_step(velocity, out, update_velocity)
            seen.append(out.copy())
            seen.append(velocity.copy())
        results[kind] = np.stack(seen)
    serve_until_workers_done()
    if rank == master:
        final = torch.empty(NUMEL)
        win.snapshot(final)
        results[kind] = final.numpy().copy()
    win.free()
if rank in (master, 1):
    a, b = results["rma"], results["shared"]
    assert a.tobytes() == b.tobytes(), f"rank {rank}: rma and shared differ by {np.abs(a - b).max()}"

# ---- 2, 3. every worker adds 1.0 K times, locked and lock-free
for kind in ("rma", "shared"):
    for locked in (True, False):
        win = open_center_window(kind, world, master, NUMEL, locked=locked)
        if rank == master:
            win.write(torch.zeros(NUMEL))
        world.Barrier()
        trace = []
        if rank != master:
            win.trace = trace
            ones, out = np.ones(NUMEL, np.float32), np.empty(NUMEL, np.float32)
            for i in range(K):
                if i % 2:
                    win.push_then_pull(ones, out)
                else:
                    win.pull_then_push(out, lambda w: ones)
            assert len(trace) == K
        serve_until_workers_done()
        traces = world.gather((rank, trace), root=master)
        if rank == master:
            final = torch.empty(NUMEL)
            win.snapshot(final)
            made = workers * K
            assert final.max().item() <= made and final.min().item() >= 1, (kind, locked, final.min(), final.max())
            if locked or kind == "rma":  # an Accumulate is element-wise atomic: none lost even without the lock
                assert torch.equal(final, torch.full((NUMEL,), float(made))), (kind, locked, final.min().item())
            if locked:
                assert overlaps(traces) == 0, f"{kind}: exclusive-lock epochs overlapped"
            print(
                f"{kind} {'exclusive' if locked else 'shared'}: W in [{final.min().item():.0f}, "
                f"{final.max().item():.0f}] of {made}, {overlaps(traces)} of {made} epochs overlapped another",
                flush=True,
            )
        win.free()

if rank == master:
    print("shared window: OK", flush=True)
