"""The messages of a LeNet step, timed alone: over MPI on this machine, or simulated on a platform.

    mpiexec -n 2 python -m mpi4py bench/comm_probe.py [--bytes N]              # measured
    python bench/comm_probe.py --simulate PLATFORM [--bytes N]                 # simulated, 2 ranks

The same code on both sides (scaledl.comm.transport). Each operation `iters` times after 3 untimed, printed
as one JSON line of seconds per operation: p2p_small (8 bytes one way: α), p2p_weights (the weights one way),
allreduce (the weights at 2 ranks), window_epoch (an exclusive lock, Get, Accumulate, unlock). bench_phases.py
runs it on both sides.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

LENET_BYTES = 431_080 * 4
OPERATIONS = ("p2p_small", "p2p_weights", "allreduce", "window_epoch")


def probe(nbytes: int, iters: int) -> dict[str, float]:
    """Every operation's seconds, from inside a (real or simulated) 2-rank job."""
    import numpy as np

    from scaledl.comm import transport

    MPI = transport.MPI
    comm, clock = MPI.COMM_WORLD, transport.clock
    rank = comm.Get_rank()
    peer = 1 - rank
    times = {}

    def ping_pong(buf: np.ndarray, n: int) -> float:
        comm.Barrier()
        t0 = clock()
        for _ in range(n):
            if rank == 0:
                comm.Send(buf, dest=peer, tag=1)
                comm.Recv(buf, source=peer, tag=1)
            else:
                comm.Recv(buf, source=peer, tag=1)
                comm.Send(buf, dest=peer, tag=1)
        return (clock() - t0) / (2 * n)

    small, weights = np.zeros(2, dtype=np.float32), np.ones(nbytes // 4, dtype=np.float32)
    for name, buf, n in (("p2p_small", small, 10 * iters), ("p2p_weights", weights, iters)):
        ping_pong(buf, 3)
        times[name] = ping_pong(buf, n)

    def allreduce(n: int) -> float:
        comm.Barrier()
        t0 = clock()
        for _ in range(n):
            comm.Allreduce(MPI.IN_PLACE, weights, op=MPI.SUM)
        return comm.allreduce((clock() - t0) / n, op=MPI.MAX)

    allreduce(3)
    times["allreduce"] = allreduce(iters)

    win = MPI.Win.Allocate(nbytes, 4, comm=comm)
    got = np.empty_like(weights)

    def epochs(n: int) -> float:
        comm.Barrier()
        t0 = clock()
        if rank == 1:
            for _ in range(n):
                win.Lock(0, MPI.LOCK_EXCLUSIVE)
                win.Get(got, 0)
                win.Accumulate(weights, 0, op=MPI.SUM)
                win.Unlock(0)
        comm.Barrier()
        return (clock() - t0) / n

    epochs(3)
    times["window_epoch"] = comm.bcast(epochs(iters), root=1)
    win.Free()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulate", metavar="PLATFORM", help="simulate on this platform (a name or a file)")
    parser.add_argument("--bytes", type=int, default=LENET_BYTES, help="the weights' bytes (default LeNet's)")
    parser.add_argument("--iters", type=int, default=20, help="timed operations of each kind (default 20)")
    args = parser.parse_args(argv)
    found = {}

    def job() -> None:
        times = probe(args.bytes, args.iters)
        found.update(times)

    if args.simulate:
        from scaledl.sim.platform import load
        from scaledl.sim.run import Simulation

        outcome = Simulation(load(args.simulate), 2, False).run(job)
        if outcome.status != 0:
            raise SystemExit(f"comm_probe: the simulation failed: {outcome}")
    else:
        from scaledl.comm.transport import MPI

        if MPI.COMM_WORLD.Get_size() != 2:
            raise SystemExit("comm_probe: run it on 2 ranks (mpiexec -n 2)")
        job()
        if MPI.COMM_WORLD.Get_rank() != 0:
            return 0
    print("probe: " + json.dumps({"bytes": args.bytes, "iters": args.iters, **found}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
