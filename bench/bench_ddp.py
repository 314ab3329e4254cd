"""Our sync_sgd against PyTorch DistributedDataParallel: same ranks, model, batch, data order and steps.

    python bench/bench_ddp.py [--ranks 2] [--warmup 40] [--steps 200] [--rounds 3] [--no-doc]

ours: `mpiexec -n RANKS python -m mpi4py -m scaledl train --algorithm sync_sgd`
      on the embedded digits data with LeNet; steady-state seconds per step =
      the training seconds between the evaluation after the warm-up steps and
      the last one (metrics.csv; evaluation excluded), on the master rank.
DDP:  this script's --worker mode under the same mpiexec: torch.distributed
      with the gloo backend (rank and size from mpi4py, MASTER_ADDR=127.0.0.1,
      a free port chosen by rank 0 and broadcast), the same LeNet initialised
      with the same seed, the same per-rank shard loader (scaledl's
      ShardLoader: same batches in the same order), plain SGD with the same
      learning rate; warm-up steps untimed, then the same number of timed
      steps on every rank, the slowest rank's time kept.

Both run one thread per rank. The two alternate (ours, DDP, ours, DDP, ...)
for --rounds rounds and the fastest round per system is reported (the
machine may be shared: other jobs only ever add time).
Differences that stay: DDP moves gradients with gloo over TCP loopback in
buckets overlapped with backward; ours uses MPI (shared memory here) once
per step after backward, plus a 4-byte stop-flag allreduce.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_worker(args) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from mpi4py import MPI
    from torch.nn.parallel import DistributedDataParallel

    from scaledl.data.hdf5 import read_info
    from scaledl.data.loader import Normalizer, ShardLoader
    from scaledl.models import build_model

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    torch.set_num_threads(1)
    port = comm.bcast(free_port() if rank == 0 else None, root=0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())   # ranks share GPUs as ours do
        torch.cuda.set_device(device)
    dist.init_process_group(ddp_backend(args.device, size), rank=rank, world_size=size)

    info = read_info(args.data)
    torch.manual_seed(0)                                   # every replica starts from the same W_0, as ours
    model = build_model(args.model, info.image_shape, info.classes).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loader = ShardLoader(args.data, shard=rank, num_shards=size, batch_size=args.batch, seed=0,
                         pin_memory=device.type == "cuda")
    normalize = Normalizer(info.mean, info.std, device)

    def step() -> None:
        x, y = normalize(*loader.next_batch())
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()

    def settled() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        comm.Barrier()

    for _ in range(args.warmup):
        step()
    settled()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    settled()
    seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    dist.destroy_process_group()
    if rank == 0:
        Path(args.worker).write_text(json.dumps({"seconds_per_step": seconds / args.steps}))


def ddp_backend(device: str, ranks: int) -> str:
    """NCCL when every rank has a GPU of its own (NCCL refuses two ranks on one GPU), else Gloo."""
    import torch

    return "nccl" if device == "cuda" and ranks <= torch.cuda.device_count() else "gloo"


def run_ddp(ranks: int, data: Path, out: Path, args) -> float:
    common.run_mpi(ranks, [str(Path(__file__).resolve()), "--worker", str(out), "--data", str(data),
                           "--model", args.model, "--warmup", str(args.warmup), "--steps", str(args.steps),
                           "--batch", str(args.batch), "--lr", str(args.lr), "--device", args.device])
    return json.loads(out.read_text())["seconds_per_step"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks = workers (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=40, help="untimed steps (default %(default)s)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps, a multiple of --warmup (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each system (default %(default)s)")
    parser.add_argument("--batch", type=int, default=64, help="per-worker batch (default %(default)s)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--dataset", choices=common.DATASETS, default="digits",
                        help="digits (28×28, LeNet) or synthetic32 (CIFAR-sized, for cifar_alexnet) (default %(default)s)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where both sides train; with cuda, DDP uses NCCL when every rank has a GPU, else Gloo")
    parser.add_argument("--section", default="ddp", help="docs/benchmarks.md section to rewrite (default %(default)s)")
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)   # internal: the DDP side under mpiexec
    common.common_arguments(parser)
    args = parser.parse_args(argv)
    if args.worker:
        ddp_worker(args)
        return 0
    if args.steps % args.warmup:
        parser.error("--steps must be a multiple of --warmup")
    m = common.machine()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        result = measure(args, args.ranks, common.DATASETS[args.dataset](Path(tmp)), Path(tmp))
    t_ours, t_ddp = result["ours_s"], result["ddp_s"]
    samples = args.batch * args.ranks
    rows = [
        {"system": f"scaledl sync_sgd ({result['ours_backend']})", "s/step": t_ours, "samples/s": samples / t_ours,
         "rounds s/step": ", ".join(f"{t * 1e3:.1f}ms" for t in result["ours_rounds"])},
        {"system": f"PyTorch DDP ({result['ddp_backend']})", "s/step": t_ddp, "samples/s": samples / t_ddp,
         "rounds s/step": ", ".join(f"{t * 1e3:.1f}ms" for t in result["ddp_rounds"])},
    ]
    tables = common.table(rows, list(rows[0]))
    tables += (f"\n**Throughput ratio ours / DDP = {t_ddp / t_ours:.3f}** (> 1: ours is faster). "
               "Ours per step, the workers' mean (fastest round): "
               + ", ".join(f"{k[:-2]} {v * 1e3:.2f} ms" for k, v in result["ours_split"].items() if v is not None) + ".\n")
    over = " (oversubscribed)" if common.oversubscribed(args.ranks) else ""
    intro = (f"{args.ranks} ranks{over}, {args.model} on {args.dataset} ({args.device}), batch {args.batch} per worker, "
             f"lr {args.lr}, plain SGD; {args.warmup} warm-up steps then {args.steps} timed steps; {args.rounds} "
             "alternating rounds, the fastest kept. Same initial weights, same shards and batch order on both sides.")
    notes = ("DDP on CPU must use gloo (TCP loopback here) and overlaps its bucketed allreduces with backward; ours "
             "sends one packed MPI Allreduce (shared memory) after backward, plus a 4-byte stop-flag allreduce per step; "
             "ours runs with --wait-probe none (no timing barrier), as DDP has none.")
    common.report(args.section, "sync_sgd vs PyTorch DistributedDataParallel", m, intro, tables, notes,
                  write=not args.no_doc)
    return 0


def measure(args, ranks: int, data: Path, tmp: Path) -> dict:
    """Ours and DDP at `ranks`, alternating for args.rounds rounds; the fastest round of each is kept
    (on a shared machine other jobs only ever add time)."""
    ours, ddp, states = [], [], []
    for r in range(args.rounds):
        state = common.train(ranks, data, tmp / f"ours{ranks}-{r}", algorithm="sync_sgd", warmup=args.warmup,
                             steps=args.steps, batch=args.batch, model=args.model, lr=args.lr,
                             extra=("--device", args.device, "--wait-probe", "none"))   # DDP has no barrier
        ours.append(state["seconds_per_step"])
        states.append(state)
        ddp.append(run_ddp(ranks, data, tmp / f"ddp{ranks}-{r}.json", args))
    best = min(states, key=lambda s: s["seconds_per_step"])
    return {
        "ours_s": min(ours), "ddp_s": min(ddp), "ours_rounds": ours, "ddp_rounds": ddp,
        "ours_backend": best["run"]["codesign"]["backend"], "ddp_backend": ddp_backend(args.device, ranks),
        "ours_split": {k: best.get(k) for k in ("data_s", "h2d_s", "param_copy_s", "compute_s", "comm_s", "update_s")},
    }


if __name__ == "__main__":
    sys.exit(main())
