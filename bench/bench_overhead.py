"""Single-rank overhead of our training loop against a plain PyTorch loop: same model, data order and batch.

    python bench/bench_overhead.py [--warmup 40] [--steps 200] [--rounds 3] [--no-doc]

ours:  `mpiexec -n 1 python -m mpi4py -m scaledl train --algorithm sync_sgd` on digits
       with LeNet; steady-state seconds per step and per phase from metrics.csv
       (between the evaluation after the warm-up and the last one; evaluation excluded).
plain: in this process, one thread: scaledl's ShardLoader (shard 0 of 1, same seed,
       so the same batches in the same order) and Normalizer, the same LeNet with the
       same initial weights, torch.optim.SGD with the same learning rate; the step is
       batch → forward/backward → optimizer step, timed per part with perf_counter.

The two alternate for --rounds rounds; the fastest round of each is reported
(the machine may be shared: other jobs only ever add time). What ours adds at
one rank: the flat parameter buffer, the phase timers, a one-rank Allreduce of
the gradient and of the stop flag, the monitor's per-step bookkeeping.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402


def plain_loop(data: Path, warmup: int, steps: int, batch: int, lr: float, model_name: str) -> dict:
    """Seconds per step (total and per part) of the plain PyTorch loop, after `warmup` steps."""
    import torch
    import torch.nn.functional as F

    from scaledl.data.hdf5 import read_info
    from scaledl.data.loader import Normalizer, ShardLoader
    from scaledl.models import build_model

    torch.set_num_threads(1)
    info = read_info(data)
    torch.manual_seed(0)
    model = build_model(model_name, info.image_shape, info.classes)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = ShardLoader(data, shard=0, num_shards=1, batch_size=batch, seed=0)
    normalize = Normalizer(info.mean, info.std, "cpu")
    parts = {"data": 0.0, "compute": 0.0, "update": 0.0}

    def step(account: bool) -> None:
        t0 = time.perf_counter()
        x, y = normalize(*loader.next_batch())
        t1 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if account:
            parts["data"] += t1 - t0
            parts["compute"] += t2 - t1
            parts["update"] += t3 - t2

    for _ in range(warmup):
        step(False)
    t0 = time.perf_counter()
    for _ in range(steps):
        step(True)
    total = time.perf_counter() - t0
    return {"seconds_per_step": total / steps, **{f"{k}_s": v / steps for k, v in parts.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=40, help="untimed steps (default %(default)s)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps, a multiple of --warmup (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each (default %(default)s)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--model", default="lenet")
    common.common_arguments(parser)
    args = parser.parse_args(argv)
    if args.steps % args.warmup:
        parser.error("--steps must be a multiple of --warmup")
    m = common.machine()
    ours, plain = [], []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        data = common.prepare_digits(tmp)
        for r in range(args.rounds):
            ours.append(common.train(1, data, tmp / f"ours{r}", algorithm="sync_sgd", warmup=args.warmup,
                                     steps=args.steps, batch=args.batch, model=args.model, lr=args.lr))
            plain.append(plain_loop(data, args.warmup, args.steps, args.batch, args.lr, args.model))

    # the fastest round of each (other jobs only ever add time), with its own per-part split
    best_ours = min(ours, key=lambda r: r["seconds_per_step"])
    best_plain = min(plain, key=lambda r: r["seconds_per_step"])
    o = {k: best_ours.get(k) for k in ("seconds_per_step", "data_s", "h2d_s", "compute_s", "comm_s", "update_s", "wait_s")}
    p = {k: best_plain[k] for k in ("seconds_per_step", "data_s", "compute_s", "update_s")}
    ours_data = (o["data_s"] or 0.0) + (o["h2d_s"] or 0.0)
    accounted = sum(v for k, v in o.items() if k != "seconds_per_step" and v is not None)
    rows = [
        {"part": "batch (read + normalise)", "ours ms": ours_data * 1e3, "plain ms": p["data_s"] * 1e3},
        {"part": "forward + backward", "ours ms": o["compute_s"] * 1e3, "plain ms": p["compute_s"] * 1e3},
        {"part": "update", "ours ms": o["update_s"] * 1e3, "plain ms": p["update_s"] * 1e3},
        {"part": "comm (1-rank Allreduce + stop flag)", "ours ms": (o["comm_s"] or 0.0) * 1e3, "plain ms": 0.0},
        {"part": "untimed (loop, monitor)", "ours ms": (o["seconds_per_step"] - accounted) * 1e3,
         "plain ms": (p["seconds_per_step"] - p["data_s"] - p["compute_s"] - p["update_s"]) * 1e3},
        {"part": "**step**", "ours ms": o["seconds_per_step"] * 1e3, "plain ms": p["seconds_per_step"] * 1e3},
    ]
    for row in rows:
        row["ours / plain"] = row["ours ms"] / row["plain ms"] if row["plain ms"] > 1e-9 else None
    ratio = o["seconds_per_step"] / p["seconds_per_step"]
    tables = common.table(rows, ["part", "ours ms", "plain ms", "ours / plain"])
    tables += (f"\n**Overhead ratio ours / plain = {ratio:.3f}** per step (rounds: ours "
               + ", ".join(f"{r['seconds_per_step'] * 1e3:.2f}" for r in ours) + " ms; plain "
               + ", ".join(f"{r['seconds_per_step'] * 1e3:.2f}" for r in plain) + " ms).\n")
    intro = (f"One rank, one thread, {args.model} on digits, batch {args.batch}, lr {args.lr}, plain SGD; "
             f"{args.warmup} warm-up steps then {args.steps} timed steps; {args.rounds} alternating rounds, the fastest "
             "round of each kept (with its own split into parts). "
             "Same initial weights and the same batches in the same order.")
    common.report("overhead", "Training-loop overhead at one rank vs a plain PyTorch loop", m, intro, tables,
                  write=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
