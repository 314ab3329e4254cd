"""Our sync_sgd against PyTorch DistributedDataParallel (section `ddp`): same ranks, model, batch, data order, steps.

    python bench/bench_ddp.py [--ranks 2] [--cases lenet:digits:64:10:30,resnet18:synthetic32:8:3:12]
                              [--rounds 7] [--sweep lenet] [--raw bench/raw/ddp.json] [--render] [--no-doc]

Variants per case are BASE, SWEEP and DDP_MPI below, plus ours' A/A twin; the DDP side is this script's
--worker mode under the same mpiexec. The goal: ours ≈ tuned DDP within ±MARGIN, each side at its fastest
bucket size; a case shorter than MIN_WARMUP + MIN_STEPS gets no verdict. The page's words are in
docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "ddp"
BUDGET_S = 25 * 60  # ResNet18 at 3 + 12 steps a run (was 1 + 3): about 8 more minutes on 2 cores (estimate)
MARGIN = 0.10  # ours bucketed ≈ the fastest tuned DDP on the same transport within ±10 %: "≤ 1.0×" had no room
MIN_WARMUP, MIN_STEPS = 3, 12  # fewer, and one slow step moves a round's mean by tens of % (ResNet18 at 1 + 3)


@dataclass(frozen=True)
class Variant:
    """One way to train a case: ours (`scaledl train`) or DDP, over a transport, with its bucket size."""

    name: str
    side: str  # "ours" or "ddp"
    backend: str  # the transport: "gloo" or "mpi"
    message: str = "bucketed"  # ours: bucketed or packed
    bucket_mb: float = 25.0
    tuned: bool = False  # ddp: gradient_as_bucket_view and static_graph


OURS = Variant("ours bucketed (gloo)", "ours", "gloo")
OURS_MPI = Variant("ours bucketed (mpi)", "ours", "mpi")
BASE = (
    OURS, Variant("ours bucketed 1 MB (gloo)", "ours", "gloo", bucket_mb=1.0),
    Variant("ours packed (gloo)", "ours", "gloo", message="packed"), OURS_MPI,
    Variant("DDP defaults (gloo)", "ddp", "gloo"),
    Variant("DDP tuned 1 MB (gloo)", "ddp", "gloo", bucket_mb=1.0, tuned=True),
    Variant("DDP tuned 25 MB (gloo)", "ddp", "gloo", bucket_mb=25.0, tuned=True),
)  # fmt: skip
SWEEP = (
    Variant("ours bucketed 0.25 MB (gloo)", "ours", "gloo", bucket_mb=0.25),
    Variant("DDP tuned 0.25 MB (gloo)", "ddp", "gloo", bucket_mb=0.25, tuned=True),
)
DDP_MPI = Variant("DDP tuned (mpi)", "ddp", "mpi", bucket_mb=1.0, tuned=True)
AA = "ours bucketed (gloo) [A/A]"  # its cells are stats.aa_cell(cell(OURS.name, case)): compare.py pairs them


@dataclass(frozen=True)
class Case:
    """A model on a dataset, the per-worker batch and the run length; `steps` is a multiple of `warmup`."""

    model: str
    dataset: str
    batch: int
    warmup: int
    steps: int

    @property
    def label(self) -> str:
        return f"{self.model}, batch {self.batch}"


def parse_cases(text: str) -> list[Case]:
    return common.parse_cases(text, "MODEL:DATASET:BATCH:WARMUP:STEPS", Case)


def variants_for(sweep: bool, ddp_over_mpi: bool) -> list[Variant]:
    """The variants of one case, measuring order before rotation (the A/A twin is added by the caller)."""
    return [*BASE, *(SWEEP if sweep else ()), *((DDP_MPI,) if ddp_over_mpi else ())]


def cell(variant_name: str, case: Case) -> str:
    return f"{variant_name} — {case.label}"


def ddp_over_mpi_available() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_mpi_available()


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
    backend = "mpi" if args.ddp_backend == "mpi" else ddp_backend(args.device, size)
    dist.init_process_group(backend, rank=rank, world_size=size)

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
        found = {"seconds_per_step": seconds / args.steps, "settings": settings, "buckets": buckets}
        Path(args.worker).write_text(json.dumps({**found, "split": means if split else None}))


def ddp_backend(device: str, ranks: int) -> str:
    """NCCL when every rank has a GPU of its own (NCCL refuses two ranks on one GPU), else Gloo."""
    import torch

    return "nccl" if device == "cuda" and ranks <= torch.cuda.device_count() else "gloo"


def run_ddp(ranks: int, data: Path, out: Path, args, tuned: bool = False, variant: Variant | None = None) -> dict:
    """One DDP run: {"seconds_per_step", "settings", "buckets", "split"} (split None on a GPU). Without a
    variant: DDP over gloo (NCCL with a GPU per rank), defaults or tuned at args.bucket_mb."""
    bucket_mb = variant.bucket_mb if variant else getattr(args, "bucket_mb", 1.0)
    tuned = variant.tuned if variant else tuned
    options = {
        "--worker": out, "--data": data, "--model": args.model, "--warmup": args.warmup, "--steps": args.steps,
        "--batch": args.batch, "--lr": args.lr, "--device": args.device, "--bucket-mb": bucket_mb,
        "--ddp-backend": variant.backend if variant else "auto",
    }  # fmt: skip
    cmd = [str(Path(__file__).resolve()), *(str(x) for pair in options.items() for x in pair)]
    common.run_mpi(ranks, cmd + (["--ddp-tuned"] if tuned else []))
    return json.loads(out.read_text())


def run_ours(ranks: int, data: Path, out_dir: Path, args, backend: str | None = None, variant: Variant | None = None):
    """One run of ours: `common.train`'s state. A variant sets the backend, message and bucket size;
    without one, the defaults."""
    options = {"device": args.device, "wait_probe": "none"}  # DDP has no timing barrier
    if variant is not None:
        backend = variant.backend
        options["message"] = variant.message
        options["bucket_mb"] = variant.bucket_mb if variant.message == "bucketed" else None
    return common.train(
        ranks, data, out_dir, algorithm="sync_sgd", warmup=args.warmup, steps=args.steps, batch_size=args.batch,
        model=args.model, lr=args.lr, backend=backend or None, **options,
    )  # fmt: skip


OURS_SPLIT = ("data_s", "h2d_s", "param_copy_s", "compute_s", "comm_s", "update_s", "wait_s")


def ours_split(state: dict) -> dict:
    return {k: state.get(k) for k in OURS_SPLIT}


def case_args(args, case: Case) -> argparse.Namespace:
    """args with the case's model, batch and run length (what run_ours and run_ddp read)."""
    return argparse.Namespace(
        **{**vars(args), "model": case.model, "batch": case.batch, "warmup": case.warmup, "steps": case.steps}
    )


def measure_case(args, case: Case, variants: list[Variant], data: Path, tmp: Path) -> dict:
    """Every variant (and the A/A twin) once per round (common.rotating_rounds), for whole Williams designs,
    at least 6. {"samples", "details", "order", "conditions", "rounds"} keyed by cell."""
    by_cell = {cell(v.name, case): v for v in variants}
    by_cell[stats.aa_cell(cell(OURS.name, case))] = OURS
    run_args = case_args(args, case)

    def measure_one(c: str, r: int, i: int):
        v, tag = by_cell[c], f"{case.model}-r{r}-{i}"
        if v.side == "ours":
            state = run_ours(args.ranks, data, tmp / f"ours-{tag}", run_args, variant=v)
            found = {"split": ours_split(state), "backend": state["run"]["codesign"]["backend"]}
            return state["seconds_per_step"], found
        res = run_ddp(args.ranks, data, tmp / f"ddp-{tag}.json", run_args, variant=v)
        return res["seconds_per_step"], res

    rounds = stats.headline_rounds(len(by_cell), args.rounds)  # the goal's table: ≥ 6 rounds, whole designs
    return {**common.rotating_rounds(NAME, list(by_cell), rounds, measure_one), "rounds": rounds}


def gap_split(samples: dict, splits: dict, ours: str, ddp: str) -> tuple[list[dict], str] | None:
    """The gap ours − DDP per step, split into update, transfer (+ DDP's overlapped backward) and the
    rest, from each side's median per-phase seconds; None where DDP has no split."""
    ddp_rows = [s for s in splits[ddp] if s]
    ours_rows = splits[ours]
    if not ddp_rows or not ours_rows:
        return None
    med = lambda rows, key: common.median([row.get(key) or 0.0 for row in rows])  # noqa: E731
    o_tot, d_tot = common.median(samples[ours]), common.median(samples[ddp])
    o_up, d_up = med(ours_rows, "update_s"), med(ddp_rows, "update_s")
    o_cmp = med(ours_rows, "compute_s")
    o_xfer = sum(med(ours_rows, k) for k in ("h2d_s", "param_copy_s", "comm_s", "wait_s"))
    d_fba = med(ddp_rows, "fwd_bwd_allreduce_s")
    d_xfer = d_fba - o_cmp  # DDP's exposed allreduce, if its forward+backward cost what ours' does
    o_name, d_name = ours.split(" — ")[0], ddp.split(" — ")[0]
    part = lambda name, o, d: {"part": name, o_name: o, d_name: d, "ours − DDP": o - d}  # noqa: E731
    rows = [
        part("update (optimizer step)", o_up, d_up),
        part("exposed transfer (DDP: fwd+bwd+allreduce − ours' fwd+bwd)", o_xfer, d_xfer),
        part("other (data, loop, rest)", o_tot - o_up - o_xfer - o_cmp, d_tot - d_up - d_fba),
        part("total s/step", o_tot, d_tot),
    ]
    return rows, common.text("ddp.gap", fba=f"{d_fba * 1e3:.3f}", compute=f"{o_cmp * 1e3:.3f}")


def long_enough(case: Case) -> bool:
    return case.warmup >= MIN_WARMUP and case.steps >= MIN_STEPS


def too_short(case: Case) -> str:
    return (
        f"no verdict: {case.warmup} warm-up + {case.steps} timed steps a run, fewer than the "
        f"{MIN_WARMUP} + {MIN_STEPS} a verdict needs (one slow step moves a round by tens of %)"
    )


def case_table(record: dict, case: Case, names: list[str]) -> tuple[str, dict]:
    """The table of one case and its goal line's ingredients."""
    s, meta = record["samples"], record["meta"]
    label = case.label
    ours = cell(OURS.name, case)
    aa = stats.aa_cell(ours)
    noise = stats.noise_floor(zip(s[ours], s[aa]))
    fastest_of = lambda prefix: min(  # noqa: E731 - each side's fastest bucket size, by median over the rounds
        (n for n in names if n.startswith(prefix) and n.endswith("(gloo)")),
        key=lambda n: common.median(s[cell(n, case)]),
    )
    fastest, ours_best = fastest_of("DDP tuned"), fastest_of("ours bucketed")
    rows = []
    per_worker = case.batch * meta["ranks"]
    for n in [*names, AA]:
        c = aa if n == AA else cell(n, case)
        summary = stats.summary(s[c])
        row = {
            "variant": n, "s/step median [min–max] n": stats.format_cell(summary),
            "samples/s": f"{per_worker / summary['median']:.0f}",
        }  # fmt: skip
        for ref, col in ((fastest, "÷ fastest tuned DDP"), ("DDP defaults (gloo)", "÷ DDP defaults")):
            if n == ref:
                row[col], row[col + " verdict"] = "1 (reference)", "–"
            else:
                r = stats.ratio(s[c], s[cell(ref, case)])
                row[col], row[col + " verdict"] = stats.format_ratio(r), stats.verdict(r, noise)
        rows.append(row)
    goal = stats.ratio(s[cell(ours_best, case)], s[cell(fastest, case)])
    judged = long_enough(case)
    judge = lambda r: stats.within_text(r, MARGIN, noise) if judged else too_short(case)  # noqa: E731
    lines = [
        f"Each side's fastest bucket size: {ours_best} ÷ {fastest} = {stats.format_ratio(goal)}: "
        f"{judge(goal)}; {stats.verdict_text(goal, noise)}"
    ]
    if DDP_MPI.name in names:
        r = stats.ratio(s[cell(OURS_MPI.name, case)], s[cell(DDP_MPI.name, case)])
        lines.append(f"{OURS_MPI.name} ÷ {DDP_MPI.name} = {stats.format_ratio(r)}: {judge(r)}")
    text = (
        f"**{label}** ({case.warmup} warm-up + {case.steps} timed steps, {meta['rounds_by_case'][label]} rounds):\n\n"
        + common.table(rows, list(rows[0]))
        + f"\nA/A: {stats.format_ratio(stats.ratio(s[aa], s[ours]))}, noise floor {noise:.1%}. "
        + " ".join(line + "." for line in lines)
        + "\n"
    )
    gap = gap_split(s, meta["splits"], ours, cell(fastest, case))
    if gap:
        g_rows, g_note = gap
        fmt = [{k: (f"{v * 1e3:.3f} ms" if isinstance(v, float) else v) for k, v in r.items()} for r in g_rows]
        text += f"\nWhere {OURS.name} − {fastest} goes:\n\n" + common.table(fmt, list(fmt[0])) + "\n" + g_note + "\n"
    verdict = stats.within(goal, MARGIN, noise) if judged else too_short(case)
    found = {"case": label, "ratio": goal, "goal": verdict, "floor": noise, "reference": fastest, "ours": ours_best}
    return text, found


def headline(record: dict) -> list[dict]:
    """The page's headline rows: per case, each side's fastest bucket size, ours ÷ DDP ≈ 1 within the margin."""
    meta, rows = record["meta"], []
    for case in (Case(**c) for c in meta["cases"]):
        g = case_table(record, case, meta["variants_by_case"][case.label])[1]
        what, goal = f"{g['ours']} ÷ {g['reference']}, {case.label}", f"≈ 1× within ±{MARGIN:.0%}"
        rows.append(stats.headline_row(what, g["ratio"], f"±{g['floor']:.1%}", goal, g["goal"]))
    return rows


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the section, from a raw record alone (so the doc can be rebuilt)."""
    meta = record["meta"]
    cases = [Case(**c) for c in meta["cases"]]
    tables = "\n".join(case_table(record, case, meta["variants_by_case"][case.label])[0] for case in cases)
    launch = common.Launch.from_dict(record["machine"].get("launch")) or common.LAUNCH
    ranks = meta["ranks"]
    intro = common.text(
        "ddp.intro", ranks=f"{ranks}{launch.mark(ranks)}", device=meta["device"], lr=meta["lr"],
        margin=f"{MARGIN:.0%}", short=f"{MIN_WARMUP} warm-up + {MIN_STEPS}", rule=stats.RULE,
    )  # fmt: skip
    settings = "; ".join(
        f"{name}: " + ", ".join(f"{k}={val}" for k, val in values.items())
        for name, values in meta["ddp_settings_by_variant"].items()
    )
    mpi = common.text("ddp.mpi_measured" if meta["ddp_over_mpi"] else "ddp.mpi_missing")
    notes = common.text("ddp.notes", settings=settings, mpi=mpi)
    notes += common.record_tail({**meta, "rounds": min(meta["rounds_by_case"].values())}, BUDGET_S)
    return "sync_sgd vs PyTorch DistributedDataParallel", intro, tables, notes


DEFAULT_CASES = "lenet:digits:64:10:30,resnet18:synthetic32:8:3:12"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--ranks", type=int, default=2, help="MPI ranks = workers (default %(default)s)")
    add("--cases", default=DEFAULT_CASES, help="MODEL:DATASET:BATCH:WARMUP:STEPS,... (default %(default)s)")
    add("--rounds", type=int, default=7, help="rounds per case, whole Williams designs, ≥ 6 (default %(default)s)")
    add("--sweep", default="lenet", help="models whose case adds the bucket sweep (default %(default)s)")
    add("--lr", type=float, default=0.05)
    add("--device", choices=("cpu", "cuda"), default="cpu", help="where both sides train (cuda: DDP over NCCL)")
    add("--section", default="ddp", help="docs/benchmarks.md section to rewrite (default %(default)s)")
    # internal: the DDP side under mpiexec (--worker), its settings
    add("--worker", type=Path, help=argparse.SUPPRESS)
    add("--data", type=Path, help=argparse.SUPPRESS)
    add("--model", default="lenet", help=argparse.SUPPRESS)
    for flag, default in (("--batch", 64), ("--warmup", 20), ("--steps", 60)):
        add(flag, type=int, default=default, help=argparse.SUPPRESS)
    add("--bucket-mb", type=float, default=1.0, help=argparse.SUPPRESS)
    add("--ddp-backend", default="auto", help=argparse.SUPPRESS)
    add("--ddp-tuned", action="store_true", help=argparse.SUPPRESS)
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.worker:
        ddp_worker(args)
        return 0
    if args.render:
        record = common.read_raw(args.raw)
    else:
        try:
            cases = parse_cases(args.cases)
        except ValueError as error:
            parser.error(str(error))
        if args.rounds < 1:
            parser.error("--rounds must be >= 1")
        record = measure_and_record(args, cases)
    title, intro, tables, notes = render(record)
    common.publish(args.section, title, record, intro, tables, notes, write=not args.no_doc)
    return 0


def measure_and_record(args, cases: list[Case]) -> dict:
    """Every case's variants, written to the raw record; returns the record as read back."""
    t_start = time.monotonic()
    common.use_launch(common.Launch.for_table(args.ranks))
    m = common.machine()
    over_mpi = ddp_over_mpi_available()
    sweep = set(filter(None, args.sweep.split(",")))
    merged = {"samples": {}, "splits": {}, "order": [], "ddp": {}, "buckets": {}, "ours_backends": {}, "conditions": {}}
    variants_by_case, rounds_by_case = {}, {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for case in cases:
            variants = variants_for(case.model in sweep, over_mpi)
            data = common.DATASETS[case.dataset](Path(tmp))
            result = measure_case(args, case, variants, data, Path(tmp))
            for key in ("samples", "conditions"):
                merged[key].update(result[key])
            for c, details in result["details"].items():
                merged["splits"][c] = [d["split"] for d in details]
                if "backend" in details[-1]:
                    merged["ours_backends"][c] = details[-1]["backend"]
                else:
                    merged["ddp"][c], merged["buckets"][c] = details[-1]["settings"], details[-1]["buckets"]
            merged["order"] += result["order"]
            variants_by_case[case.label] = [v.name for v in variants]
            rounds_by_case[case.label] = result["rounds"]
    wall = time.monotonic() - t_start
    settings = {v.name: ddp_settings(v.tuned, v.bucket_mb) for v in (*BASE, *SWEEP, DDP_MPI) if v.side == "ddp"}
    raw = common.write_record(
        args, NAME, merged, m, t_start, quantity="seconds per step (steady state)", ranks=args.ranks,
        device=args.device, lr=args.lr, cases=[asdict(c) for c in cases], variants_by_case=variants_by_case,
        variant_specs={v.name: asdict(v) for v in (*BASE, *SWEEP, DDP_MPI)}, rounds_by_case=rounds_by_case,
        rounds=min(rounds_by_case.values()), ddp_over_mpi=over_mpi, ddp_settings_by_variant=settings,
        ddp_buckets=merged["buckets"], ours_backends=merged["ours_backends"], splits=merged["splits"],
    )  # fmt: skip
    print(f"raw samples: {raw}; wall {wall:.0f} s")
    return common.read_raw(raw)


if __name__ == "__main__":
    sys.exit(main())
