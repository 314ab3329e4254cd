"""Hogwild concurrency: how concurrent shared-lock updates of the center really are, on an RMA and a shared-memory window.

    python bench/bench_hogwild.py [--workers 2,3] [--updates 150] [--rounds 3] [--steps 60] [--no-doc]

(a), (b) contention: a master (rank 0, spinning on MPI as the training master
    does) holds the center window; N worker ranks each make K whole-vector
    updates (`push_then_pull` of ones: W += 1, then read W back) as fast as
    they can, for a LeNet-sized vector (431,080 float32) and a 4 M one. For
    each window ("rma": Get/Accumulate; "shared": loads and stores on an MPI
    shared-memory window) and lock (exclusive: Async; shared: Hogwild) it
    reports the wall time of the N×K updates (first start to last finish),
    the mean epoch length, the fraction of epochs that overlap in time
    another worker's epoch (each epoch stamped with MPI.Wtime from lock held
    to release; one clock on one node) and the adds lost (N·K − W, averaged
    over elements). Rounds alternate the variants; the fastest round is kept.
(c) training: hogwild_sgd vs async_sgd and hogwild_easgd vs async_easgd,
    `scaledl train` with N workers on digits with LeNet, steady-state steps
    per second (a step = one update per worker) on each window.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402

SIZES = {"LeNet (431,080)": 431_080, "4 M": 4_000_000}
VARIANTS = [(kind, locked) for kind in ("rma", "shared") for locked in (True, False)]


def overlapped(spans: list[tuple[float, float, int]]) -> int:
    """How many epochs overlap in time an epoch of another worker."""
    spans = sorted(spans)
    count = 0
    for i, (a, b, r) in enumerate(spans):
        if any(r2 != r and a2 < b and a < b2 for a2, b2, r2 in spans[max(0, i - 64):i + 64]):
            count += 1
    return count


def worker(out: Path, updates: int, rounds: int) -> None:
    """Under mpiexec: every variant, every size, `rounds` alternating rounds; the master writes JSON."""
    import numpy as np
    import torch
    from mpi4py import MPI

    from scaledl.comm.center_window import open_center_window

    world = MPI.COMM_WORLD
    rank, master = world.Get_rank(), 0
    n = world.Get_size() - 1
    results = []
    for r in range(rounds):
        for size_name, numel in SIZES.items():
            k = updates if numel < 1_000_000 else max(updates // 5, 10)
            for kind, locked in VARIANTS:
                win = open_center_window(kind, world, master, numel, locked=locked)
                if rank == master:
                    win.write(torch.zeros(numel))
                trace: list = []
                ones, back = np.ones(numel, np.float32), np.empty(numel, np.float32)
                world.Barrier()
                start = MPI.Wtime()
                if rank == master:
                    request = world.Ibarrier()
                    while not request.Test():    # the master's progress (lock grants), as in training
                        pass
                    start = float("inf")
                else:
                    win.trace = trace
                    for _ in range(k):
                        win.push_then_pull(ones, back)
                    world.Ibarrier().Wait()
                end = MPI.Wtime() if rank != master else float("-inf")
                gathered = world.gather((rank, start, end, trace), root=master)
                if rank == master:
                    final = torch.empty(numel)
                    win.snapshot(final)
                    spans = [(a, b, who) for who, _, _, t in gathered for a, b in t]
                    wall = max(e for _, _, e, _ in gathered) - min(s for _, s, _, _ in gathered)
                    results.append({
                        "round": r, "size": size_name, "numel": numel, "updates": k, "window": kind,
                        "lock": "exclusive" if locked else "shared", "wall_s": wall,
                        "epoch_s": sum(b - a for a, b, _ in spans) / len(spans),
                        "overlap": overlapped(spans) / len(spans),
                        "lost": float(n * k - final.double().mean().item()) / (n * k),
                    })
                win.free()
    if rank == master:
        out.write_text(json.dumps({"workers": n, "results": results}))


def contention(workers: int, updates: int, rounds: int, tmp: Path) -> list[dict]:
    out = tmp / f"contend{workers}.json"
    common.run_mpi(workers + 1, [str(Path(__file__).resolve()), "--worker", str(out), "--updates", str(updates),
                                 "--rounds", str(rounds)], timeout=600)
    result = json.loads(out.read_text())
    best: dict = {}
    for row in result["results"]:
        key = (row["size"], row["window"], row["lock"])
        if key not in best or row["wall_s"] < best[key]["wall_s"]:
            best[key] = row
    rows = []
    for (size, kind, lock), row in best.items():
        total = workers * row["updates"]
        exclusive = best[(size, kind, "exclusive")]["wall_s"]
        rows.append({"N": workers, "vector": size, "window": kind, "lock": lock, "N×K": total,
                     "wall ms": row["wall_s"] * 1e3, "µs / update": row["wall_s"] / total * 1e6,
                     "epoch µs": row["epoch_s"] * 1e6, "overlapping epochs": f"{row['overlap']:.0%}",
                     "lost adds": f"{row['lost']:.1%}", "exclusive / this": exclusive / row["wall_s"]})
    return rows


def training(workers: int, steps: int, rounds: int, tmp: Path, data: Path) -> list[dict]:
    warmup = max(steps // 3, 1)
    steps = warmup * 3
    pairs = [("async_sgd", "hogwild_sgd"), ("async_easgd", "hogwild_easgd")]
    timing: dict = {}
    for r in range(rounds):
        for locked, free in pairs:
            for kind in ("rma", "shared"):
                for algorithm in (locked, free):
                    run = common.train(workers + 1, data, tmp / f"{algorithm}-{kind}-{r}", algorithm=algorithm,
                                       warmup=warmup, steps=steps, extra=("--center-window", kind))
                    key = (algorithm, kind)
                    timing[key] = min(timing.get(key, float("inf")), run["seconds_per_step"])
    rows = []
    for locked, free in pairs:
        for kind in ("rma", "shared"):
            a, h = 1 / timing[(locked, kind)], 1 / timing[(free, kind)]
            rows.append({"pair": f"{free} vs {locked}", "window": kind, "Async steps/s": a, "Hogwild steps/s": h,
                         "Hogwild / Async": h / a})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2,3", help="worker counts N for the contention test (default %(default)s)")
    parser.add_argument("--updates", type=int, default=150, help="K, updates per worker at LeNet's size (a fifth of "
                        "it at 4 M) (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating contention rounds (default %(default)s)")
    parser.add_argument("--train-workers", type=int, default=2, help="workers in the training runs (default %(default)s)")
    parser.add_argument("--steps", type=int, default=60, help="timed training steps after a third as many warm-up "
                        "steps; 0 skips training (default %(default)s)")
    parser.add_argument("--train-rounds", type=int, default=1, help="alternating training rounds (default %(default)s)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)   # internal: run under mpiexec, write JSON here
    common.common_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.updates, args.rounds)
        return 0
    m = common.machine()
    counts = [int(x) for x in args.workers.split(",")]
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        rows = [row for n in counts for row in contention(n, args.updates, args.rounds, tmp)]
        train_rows = training(args.train_workers, args.steps, args.train_rounds, tmp, common.prepare_digits(tmp)) \
            if args.steps else []
    over = ", ".join(f"{n + 1} ranks" + (" (more ranks than cores)" if common.oversubscribed(n + 1) else "")
                     for n in counts)
    tables = ("Contention: N workers × K whole-vector `push_then_pull` updates (W += 1, read W), fastest of "
              f"{args.rounds} rounds; {over}; `exclusive / this` is the exclusive lock's wall time over this "
              "variant's on the same window:\n\n"
              + common.table(rows, list(rows[0])))
    if train_rows:
        tables += (f"\nTraining throughput, {args.train_workers} workers + master "
                   f"({args.train_workers + 1} ranks on {common.usable_cores()} cores), LeNet on digits, batch 64, "
                   f"{args.steps} timed steps after {max(args.steps // 3, 1)} warm-up steps, best of "
                   f"{args.train_rounds} round(s):\n\n" + common.table(train_rows, list(train_rows[0])))
    intro = ("`bench/bench_hogwild.py`. The center window of the window algorithms (`--center-window`): `rma` = "
             "`MPI.Win.Allocate` on the master, workers `Get` and `Accumulate`; `shared` = `MPI.Win.Allocate_shared`, "
             "workers map the master's segment (`Win.Shared_query`) and add with numpy in their own process. The "
             "exclusive lock is Async's, the shared lock Hogwild's; nothing else differs. An epoch is stamped from "
             "the return of `Win.Lock` (MPICH returns once the lock is granted: no two exclusive epochs overlap, "
             "which checks it) to just before `Win.Unlock`, after its operations completed.")
    common.report("hogwild", "Hogwild concurrency", m, intro, tables, NOTES, write=not args.no_doc)
    return 0


NOTES = """\
Reading (as measured in the run above, on 2 cores shared with other jobs; every row has more ranks than cores):

- The lock still excludes on both windows: no two exclusive epochs overlapped. With the shared lock the
  N×K updates finished 1.5–4.9× faster than with the exclusive one, on either window.
- `rma`: shared-lock epochs overlapped each other most of the time (51–98 %), yet no add was ever lost:
  MPICH applies each whole-vector `Accumulate` atomically and one at a time (per-window mutex or the
  master's progress engine), so what runs concurrently is the lock handling and the `Get`s, not the adds.
  Hogwild on RMA is faster because its critical section is shorter, not because updates are applied in
  parallel.
- `shared`: an epoch is much shorter (about 0.1 ms against 0.5–0.75 ms at LeNet's size, 1.3–2 ms against
  5–6.6 ms at 4 M), because each worker adds in its own process and needs the master only for the lock
  grant. Overlap under the shared lock was rare at LeNet's size (0–4 %: a 70–90 µs epoch seldom loses its
  core mid-way when ranks outnumber cores) and common at 4 M (up to 38 %), where 0.4 % of the adds were
  lost: two workers really did add into the same elements at once, with plain loads and stores, as
  Hogwild allows. That loss is the proof of element-wise concurrent updates, which RMA never showed.
- Training: LeNet's forward/backward dominates a step here, so the window and the lock hardly matter, and
  with 3 ranks on 2 cores under a load average of 5–11 Hogwild was not faster than Async (0.66–1.0×).
  This machine cannot show a throughput gain; the contention rows above are the mechanism to look for on
  a node with a core per rank.
"""

if __name__ == "__main__":
    sys.exit(main())
