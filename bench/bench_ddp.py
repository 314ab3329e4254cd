"""Our sync_sgd against PyTorch DistributedDataParallel: same ranks, model, batch, data order and steps.

    python bench/bench_ddp.py [--ranks 2] [--warmup 20] [--steps 60] [--rounds 5] [--bucket-mb 1]
                              [--raw bench/raw/ddp.json] [--render] [--no-doc]

Variants, all at the same ranks, model, data, batch, learning rate, warm-up and steps:

  ours (MPI)          `scaledl train --algorithm sync_sgd --backend mpi --wait-probe none`
  ours (gloo)         the same with `--backend gloo`: our framework on DDP's transport
  DDP defaults        DistributedDataParallel as constructed by default (bucket_cap_mb 25,
                      gradient_as_bucket_view False, static_graph False)
  DDP tuned           gradient_as_bucket_view=True, static_graph=True, bucket_cap_mb=--bucket-mb
  ours (MPI) [A/A]    ours (MPI) a second time in every round: the noise floor

ours (MPI) vs ours (gloo) is the transport, ours (gloo) vs DDP (gloo) the
framework. Ours: steady-state seconds per step (the workers' mean over the
timed steps, warm-up and evaluation excluded: bench.common.train) with its
per-phase split. DDP: this script's --worker mode under the same mpiexec,
torch.distributed over gloo (NCCL only with a GPU per rank) with rank and
size from mpi4py, the same LeNet from the same seed, scaledl's ShardLoader
(same batches in the same order), plain SGD; warm-up untimed, then the timed
steps, the slowest rank's time kept; on CPU each step is split into data,
forward+backward+allreduce (DDP overlaps its allreduce with backward, so the
two cannot be separated) and the optimizer update.

Every round measures every variant once, in the order bench.stats.rotate
gives for that round (the first variant changes each round). Cells print
median [min–max] n over the rounds; ratios are paired per round; a ratio's verdict
reads the bootstrap interval of its median against the A/A floor (bench.stats.verdict:
slower, faster, no difference within ±x %, not resolved at ±x %). Every raw sample and its metadata go to --raw
(bench.common.write_raw; bench/compare.py compares two such files).
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

from bench import common, stats  # noqa: E402

OURS_MPI, OURS_GLOO, DDP_DEFAULT, DDP_TUNED = "ours (MPI)", "ours (gloo)", "DDP defaults", "DDP tuned"
AA = stats.aa_cell(OURS_MPI)
VARIANTS = (OURS_MPI, OURS_GLOO, DDP_DEFAULT, DDP_TUNED, AA)
OURS_BACKEND = {OURS_MPI: "mpi", OURS_GLOO: "gloo", AA: "mpi"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ddp_settings(tuned: bool, bucket_mb: float) -> dict:
    """The DistributedDataParallel keyword arguments of a variant (defaults spelled out, as torch has them)."""
    if tuned:
        return {"bucket_cap_mb": bucket_mb, "gradient_as_bucket_view": True, "static_graph": True}
    return {"bucket_cap_mb": 25, "gradient_as_bucket_view": False, "static_graph": False}


def ddp_worker(args) -> None:
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as `python -m scaledl` sets for ours (before torch)
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
        device = torch.device("cuda", rank % torch.cuda.device_count())  # ranks share GPUs as ours do
        torch.cuda.set_device(device)
    dist.init_process_group(ddp_backend(args.device, size), rank=rank, world_size=size)

    info = read_info(args.data)
    torch.manual_seed(0)  # every replica starts from the same W_0, as ours
    model = build_model(args.model, info.image_shape, info.classes).to(device)
    settings = ddp_settings(args.ddp_tuned, args.bucket_mb)
    ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None, **settings)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loader = ShardLoader(
        args.data, shard=rank, num_shards=size, batch_size=args.batch, seed=0, pin_memory=device.type == "cuda"
    )
    normalize = Normalizer(info.mean, info.std, device)
    split = device.type == "cpu"  # on a GPU the host clock would not see the kernels: no split
    phases = {"data_s": 0.0, "fwd_bwd_allreduce_s": 0.0, "update_s": 0.0}
    clock = time.perf_counter

    def step() -> None:
        t0 = clock()
        x, y = normalize(*loader.next_batch())
        t1 = clock()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()  # the allreduce hooks finish inside backward
        t2 = clock()
        opt.step()
        t3 = clock()
        phases["data_s"] += t1 - t0
        phases["fwd_bwd_allreduce_s"] += t2 - t1
        phases["update_s"] += t3 - t2

    def settled() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        comm.Barrier()

    for _ in range(args.warmup):
        step()
    settled()
    phases.update(dict.fromkeys(phases, 0.0))
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    settled()
    seconds = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    means = {k: comm.allreduce(v, op=MPI.SUM) / size / args.steps for k, v in phases.items()}  # workers' mean
    buckets = None
    try:
        logged = ddp._get_ddp_logging_data()  # bytes per bucket, as rebuilt after the first step
        buckets = logged.get("rebuilt_bucket_sizes") or logged.get("bucket_sizes") or None
    except Exception:  # noqa: BLE001 - private API, informative only
        pass
    dist.destroy_process_group()
    if rank == 0:
        Path(args.worker).write_text(
            json.dumps(
                {
                    "seconds_per_step": seconds / args.steps,
                    "settings": settings,
                    "buckets": buckets,
                    "split": means if split else None,
                }
            )
        )


def ddp_backend(device: str, ranks: int) -> str:
    """NCCL when every rank has a GPU of its own (NCCL refuses two ranks on one GPU), else Gloo."""
    import torch

    return "nccl" if device == "cuda" and ranks <= torch.cuda.device_count() else "gloo"


def ddp_label(device: str, ranks: int) -> str:
    """ "gloo", "nccl", or "gloo, ranks share one GPU": DDP over gloo on shared GPUs is not DDP as deployed, and is labelled so."""
    import torch

    backend = ddp_backend(device, ranks)
    if device == "cuda" and ranks > torch.cuda.device_count():
        g = torch.cuda.device_count()
        return f"{backend}, ranks share {'one GPU' if g == 1 else f'{g} GPUs'}"
    return backend


def run_ddp(ranks: int, data: Path, out: Path, args, tuned: bool = False) -> dict:
    """One DDP run: {"seconds_per_step", "settings", "buckets", "split"} (split None on a GPU)."""
    cmd = [
        str(Path(__file__).resolve()),
        "--worker",
        str(out),
        "--data",
        str(data),
        "--model",
        args.model,
        "--warmup",
        str(args.warmup),
        "--steps",
        str(args.steps),
        "--batch",
        str(args.batch),
        "--lr",
        str(args.lr),
        "--device",
        args.device,
        "--bucket-mb",
        str(getattr(args, "bucket_mb", 1.0)),
    ]
    common.run_mpi(ranks, cmd + (["--ddp-tuned"] if tuned else []))
    return json.loads(out.read_text())


def run_ours(ranks: int, data: Path, out_dir: Path, args, backend: str | None = None) -> dict:
    extra = ("--device", args.device, "--wait-probe", "none")  # DDP has no timing barrier
    if backend:
        extra += ("--backend", backend)
    return common.train(
        ranks,
        data,
        out_dir,
        algorithm="sync_sgd",
        warmup=args.warmup,
        steps=args.steps,
        batch=args.batch,
        model=args.model,
        lr=args.lr,
        extra=extra,
    )


OURS_SPLIT = ("data_s", "h2d_s", "param_copy_s", "compute_s", "comm_s", "update_s", "wait_s")


def ours_split(state: dict) -> dict:
    return {k: state.get(k) for k in OURS_SPLIT}


def measure(args, ranks: int, data: Path, tmp: Path) -> dict:
    """Ours (backend auto) and DDP defaults at `ranks`, alternating for args.rounds rounds; the fastest
    round of each is kept. The two-variant form bench_gpu.py uses; this script's table is `measure_all`."""
    ours, ddp, states = [], [], []
    for r in range(args.rounds):
        state = run_ours(ranks, data, tmp / f"ours{ranks}-{r}", args)
        ours.append(state["seconds_per_step"])
        states.append(state)
        ddp.append(run_ddp(ranks, data, tmp / f"ddp{ranks}-{r}.json", args)["seconds_per_step"])
    best = min(states, key=lambda s: s["seconds_per_step"])
    return {
        "ours_s": min(ours),
        "ddp_s": min(ddp),
        "ours_rounds": ours,
        "ddp_rounds": ddp,
        "ours_backend": best["run"]["codesign"]["backend"],
        "ddp_backend": ddp_backend(args.device, ranks),
        "ours_split": ours_split(best),
    }


def measure_all(args, ranks: int, data: Path, tmp: Path) -> dict:
    """Every variant once per round, in the order stats.rotate(VARIANTS, round), for args.rounds rounds.

    {"samples": {variant: [s/step per round]}, "splits": {variant: [per-phase dict per round]},
     "order": [[variant, ...] per round], "ddp": {variant: settings}, "buckets": {variant: n}}
    """
    samples = {v: [] for v in VARIANTS}
    splits = {v: [] for v in VARIANTS}
    order, ddp_info, buckets, backends = [], {}, {}, {}
    for r in range(args.rounds):
        order.append(stats.rotate(VARIANTS, r))
        for i, v in enumerate(order[-1]):
            t0 = time.monotonic()
            tag = f"r{r}-{i}"
            if v in OURS_BACKEND:
                state = run_ours(ranks, data, tmp / f"ours-{tag}", args, OURS_BACKEND[v])
                samples[v].append(state["seconds_per_step"])
                splits[v].append(ours_split(state))
                backends[v] = state["run"]["codesign"]["backend"]
            else:
                res = run_ddp(ranks, data, tmp / f"ddp-{tag}.json", args, tuned=v == DDP_TUNED)
                samples[v].append(res["seconds_per_step"])
                splits[v].append(res["split"])
                ddp_info[v], buckets[v] = res["settings"], res["buckets"]
            print(
                f"bench_ddp: round {r + 1}/{args.rounds} {v:<18} {samples[v][-1] * 1e3:8.2f} ms/step "
                f"({time.monotonic() - t0:.1f} s)",
                flush=True,
            )
    return {
        "samples": samples,
        "splits": splits,
        "order": order,
        "ddp": ddp_info,
        "buckets": buckets,
        "ours_backends": backends,
    }


def gap_split(result: dict) -> tuple[list[dict], str] | None:
    """The gap ours (MPI) − DDP defaults per step, split into update, transfer (+ DDP's overlapped
    backward) and the rest, from each side's median per-phase seconds; None where DDP has no split."""
    ddp = [s for s in result["splits"][DDP_DEFAULT] if s]
    ours = result["splits"][OURS_MPI]
    if not ddp or not ours:
        return None
    med = lambda rows, key: common.median([row.get(key) or 0.0 for row in rows])  # noqa: E731
    o_tot, d_tot = common.median(result["samples"][OURS_MPI]), common.median(result["samples"][DDP_DEFAULT])
    o_up, d_up = med(ours, "update_s"), med(ddp, "update_s")
    o_cmp = med(ours, "compute_s")
    o_xfer = sum(med(ours, k) for k in ("h2d_s", "param_copy_s", "comm_s", "wait_s"))
    d_fba = med(ddp, "fwd_bwd_allreduce_s")
    d_xfer = d_fba - o_cmp  # DDP's exposed allreduce, if its forward+backward cost what ours does
    rows = [
        {"part": "update (optimizer step)", "ours (MPI)": o_up, "DDP defaults": d_up, "ours − DDP": o_up - d_up},
        {
            "part": "transfer (exposed; DDP: fwd+bwd+allreduce − ours' compute)",
            "ours (MPI)": o_xfer,
            "DDP defaults": d_xfer,
            "ours − DDP": o_xfer - d_xfer,
        },
        {
            "part": "other (data, compute, loop, rest)",
            "ours (MPI)": o_tot - o_up - o_xfer,
            "DDP defaults": d_tot - d_up - d_xfer,
            "ours − DDP": (o_tot - o_up - o_xfer) - (d_tot - d_up - d_xfer),
        },
        {"part": "total s/step", "ours (MPI)": o_tot, "DDP defaults": d_tot, "ours − DDP": o_tot - d_tot},
    ]
    note = (
        f"Medians over rounds, seconds per step. Ours: its phases (update = `update`; transfer = h2d + "
        f"param_copy + comm + wait). DDP overlaps its bucketed allreduce with backward, so its transfer cannot "
        f"be timed alone: the transfer row takes DDP's forward+backward+allreduce "
        f"({d_fba * 1e3:.3f} ms) minus ours' forward+backward ({o_cmp * 1e3:.3f} ms), i.e. assumes the same "
        f"compute on both sides (same model, one thread per rank); 'other' is the remainder."
    )
    return rows, note


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the section, from a raw record alone (so the doc can be rebuilt)."""
    meta = record["meta"]
    s = record["samples"]
    noise = stats.noise_floor(zip(s[OURS_MPI], s[AA]))
    label, backends, ranks = meta["ddp_backend"], meta["ours_backends"], meta["ranks"]
    name = {
        OURS_MPI: f"ours sync_sgd ({backends.get(OURS_MPI, 'mpi')})",
        OURS_GLOO: f"ours sync_sgd ({backends.get(OURS_GLOO, 'gloo')})",
        DDP_DEFAULT: f"DDP defaults ({label})",
        DDP_TUNED: f"DDP tuned ({label})",
        AA: f"ours sync_sgd ({backends.get(AA, 'mpi')}) [A/A]",
    }
    samples = meta["batch"] * ranks
    rows = []
    for v in VARIANTS:
        cell = stats.summary(s[v])
        row = {
            "variant": name[v],
            "s/step median [min–max] n": stats.format_cell(cell),
            "samples/s (median)": f"{samples / cell['median']:.0f}",
        }
        for ref, col in ((DDP_DEFAULT, "÷ DDP defaults"), (DDP_TUNED, "÷ DDP tuned")):
            if v == ref:
                row[col], row[col + " verdict"] = "1 (reference)", "–"
            else:
                r = stats.ratio(s[v], s[ref])
                row[col], row[col + " verdict"] = stats.format_ratio(r), stats.verdict(r, noise)
        rows.append(row)
    aa = stats.ratio(s[AA], s[OURS_MPI])
    tables = common.table(rows, list(rows[0]))
    tables += (
        f"\nRatios are s/step over s/step, paired per round (> 1: the row is slower). A/A: ours (MPI) twice "
        f"per round, ratio {stats.format_ratio(aa)}, noise floor {noise:.1%} (max |x/y − 1| over rounds); "
        "a verdict is 'slower' or 'faster' only when the median ratio is beyond 1 ± that floor and every "
        "round agrees, else 'no difference'.\n"
    )
    gap = gap_split({"samples": s, "splits": meta["splits"]})
    if gap:
        g_rows, g_note = gap
        fmt = [{k: (f"{v * 1e3:.3f} ms" if isinstance(v, float) else v) for k, v in r.items()} for r in g_rows]
        tables += (
            "\nWhere the gap ours (MPI) − DDP defaults goes:\n\n"
            + common.table(fmt, list(fmt[0])).rstrip()
            + "\n\n"
            + g_note
            + "\n"
        )
    else:
        tables += (
            "\nThe gap is not split: DDP's per-phase times are taken on CPU only (on a GPU the host clock "
            "does not see its kernels).\n"
        )
    settings = "; ".join(
        f"{v}: "
        + ", ".join(f"{k}={val}" for k, val in meta["ddp_settings"].get(v, {}).items())
        + (f" (buckets of {meta['ddp_buckets'][v]} bytes, as DDP logs them)" if meta["ddp_buckets"].get(v) else "")
        for v in (DDP_DEFAULT, DDP_TUNED)
    )
    launch = common.Launch.from_dict(record["machine"].get("launch")) or common.LAUNCH
    intro = (
        f"{ranks} ranks{launch.mark(ranks)}, {meta['model']} on {meta['dataset']} ({meta['device']}), batch "
        f"{meta['batch']} per worker, lr {meta['lr']}, plain SGD; {meta['warmup']} warm-up steps then "
        f"{meta['steps']} timed steps per run; {meta['rounds']} rounds, each measuring every variant once in "
        "rotating order (bench.stats.rotate). Same initial weights, same shards and batch order everywhere. "
        "Ours (MPI) vs ours (gloo) isolates the transport; ours (gloo) vs DDP (gloo) the framework."
    )
    notes = (
        f"DDP settings — {settings}. DDP on CPU uses gloo (TCP loopback here) and overlaps its bucketed "
        "allreduces with backward; ours sends one packed allreduce after backward (MPI: shared memory; "
        "gloo: the same TCP loopback as DDP), plus a 4-byte stop-flag allreduce per step; ours runs with "
        "--wait-probe none (no timing barrier), as DDP has none. Both sides run in the launch environment "
        f"above. Raw samples: {meta['raw']}."
    )
    if meta["rounds"] < 5:
        notes += f" Only {meta['rounds']} round(s): not enough for a headline ratio (use ≥ 5)."
    return "sync_sgd vs PyTorch DistributedDataParallel", intro, tables, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="MPI ranks = workers (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps (default %(default)s)")
    parser.add_argument(
        "--steps", type=int, default=60, help="timed steps, a multiple of --warmup (default %(default)s)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="rounds, each measuring every variant once in rotating order; ≥ 5 for headline "
        "ratios (default %(default)s)",
    )
    parser.add_argument("--batch", type=int, default=64, help="per-worker batch (default %(default)s)")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--model", default="lenet")
    parser.add_argument(
        "--bucket-mb", type=float, default=1.0, help="bucket_cap_mb of the tuned DDP variant (default %(default)s)"
    )
    parser.add_argument(
        "--dataset",
        choices=common.DATASETS,
        default="digits",
        help="digits (28×28, LeNet) or synthetic32 (CIFAR-sized, for cifar_alexnet) (default %(default)s)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where both sides train; with cuda, DDP uses NCCL when every rank has a GPU, else Gloo",
    )
    parser.add_argument("--section", default="ddp", help="docs/benchmarks.md section to rewrite (default %(default)s)")
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: the DDP side under mpiexec
    parser.add_argument("--ddp-tuned", action="store_true", help=argparse.SUPPRESS)  # internal, worker only
    common.common_arguments(parser, "ddp")
    args = common.parse_bench_args(parser, argv)
    if args.worker:
        ddp_worker(args)
        return 0
    if args.render:
        record = common.read_raw(args.raw)
    else:
        if args.steps % args.warmup:
            parser.error("--steps must be a multiple of --warmup")
        if args.rounds < 1:
            parser.error("--rounds must be >= 1")
        record = measure_and_record(args)
    title, intro, tables, notes = render(record)
    common.publish(args.section, title, record, intro, tables, notes, write=not args.no_doc)
    return 0


def measure_and_record(args) -> dict:
    """Every variant for args.rounds rounds, written to the raw record; returns the record as read back."""
    t_start = time.monotonic()
    common.use_launch(common.Launch.for_table(args.ranks))
    m = common.machine()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        result = measure_all(args, args.ranks, common.DATASETS[args.dataset](Path(tmp)), Path(tmp))
    noise = stats.noise_floor(zip(result["samples"][OURS_MPI], result["samples"][AA]))
    wall = time.monotonic() - t_start
    raw = common.write_raw(
        args.raw,
        "ddp",
        result["samples"],
        {
            "machine": m,
            "unit": "s",
            "quantity": "seconds per step (steady state)",
            "ranks": args.ranks,
            "model": args.model,
            "dataset": args.dataset,
            "device": args.device,
            "batch": args.batch,
            "lr": args.lr,
            "warmup": args.warmup,
            "steps": args.steps,
            "rounds": args.rounds,
            "order": result["order"],
            "ddp_backend": ddp_label(args.device, args.ranks),
            "ddp_settings": result["ddp"],
            "ddp_buckets": result["buckets"],
            "ours_backends": result["ours_backends"],
            "splits": result["splits"],
            "aa_noise_floor": noise,
            "wall_s": wall,
            "raw": common.shown_path(args.raw),
        },
    )
    print(f"raw samples: {raw}; wall {wall:.0f} s")
    return common.read_raw(raw)


if __name__ == "__main__":
    sys.exit(main())
