"""Single-rank overhead of our training loop against a plain PyTorch loop: same model, data order and batch.

    python bench/bench_overhead.py [--cases 64:10:60,4:40:200] [--rounds 5] [--threads 1]
                                   [--raw bench/raw/overhead.json] [--render] [--no-doc]

Variants, per case (a batch size with its warm-up and timed steps):

  ours           `mpiexec -n 1 python -m mpi4py -m scaledl train --algorithm sync_sgd` on digits
                 with LeNet, `--threads` from the launch environment; steady-state seconds per step
                 and per phase from its timeline (bench.common.train: evaluated only at step 0
                 and after the loop, so no evaluation shares its core during the timed steps)
  plain PyTorch  in this process, the launch's thread count: scaledl's ShardLoader (shard 0 of 1,
                 same seed: the same batches in the same order) and Normalizer, the same LeNet from
                 the same seed, torch.optim.SGD at the same learning rate; a step is batch →
                 forward/backward → optimizer step, each part timed with perf_counter
  ours [A/A]     ours a second time in every round: the noise floor

The default cases are LeNet at batch 64 (tens of ms per step, compute-bound)
and at batch 4 (about a millisecond per step), where a fixed per-step cost of
ours (phase timers, the step boundary, bookkeeping) is a visible share; the
goal is ours ≤ 1.03× plain at both, certified by the ratio's interval. Every round measures every variant of every case once, in the
order bench.stats.round_order gives for that round. Cells print median [min–max] n;
ratios are paired per round; a ratio's verdict
reads the order-statistic interval of its median against the A/A floor (bench.stats.verdict:
slower, faster, no difference within ±x %, not resolved at ±x %). The limits table holds each step's achieved FLOP/s against
the float32 GEMM rate measured in the same run at the same thread count.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "overhead"
TITLE = "Training-loop overhead at one rank vs a plain PyTorch loop"
OURS, PLAIN = "ours", "plain PyTorch"
DATASET = "digits"
BUDGET_S = 150
GOAL = 1.03  # ours ÷ plain at one rank: no fixed per-step cost


@dataclass(frozen=True)
class Case:
    """One batch size and its run length; `steps` is a multiple of `warmup` (bench.common.train)."""

    batch: int
    warmup: int
    steps: int

    @property
    def label(self) -> str:
        return f"batch {self.batch}"


def parse_cases(text: str) -> list[Case]:
    """ "64:10:60,4:40:200" → cases (batch:warmup:steps); ValueError with a one-line reason."""
    cases = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            batch, warmup, steps = (int(x) for x in item.split(":"))
        except ValueError:
            raise ValueError(f"case {item!r} is not BATCH:WARMUP:STEPS (three integers)") from None
        if min(batch, warmup, steps) < 1 or steps % warmup:
            raise ValueError(f"case {item!r}: all three must be >= 1 and STEPS a multiple of WARMUP")
        cases.append(Case(batch, warmup, steps))
    if not cases:
        raise ValueError("no case given")
    if len({c.batch for c in cases}) != len(cases):
        raise ValueError("two cases with the same batch size")
    return cases


def cell(variant: str, label: str) -> str:
    return f"{variant} ({label})"


def case_cells(label: str) -> tuple[str, str, str]:
    """ours, plain and ours' A/A twin of one case, in measuring order before rotation."""
    ours = cell(OURS, label)
    return ours, cell(PLAIN, label), stats.aa_cell(ours)


# ----------------------------------------------------------------- measuring


def rank0_core() -> int | None:
    """The core `mpiexec -bind-to core` pins a one-rank job to (the lowest CPU this process may use), or None
    where the launch does not bind or the platform cannot pin."""
    if not hasattr(os, "sched_getaffinity") or not common.LAUNCH.bound(1):
        return None
    return min(os.sched_getaffinity(0))


@contextlib.contextmanager
def on_rank0_core():
    """Run the block pinned to `rank0_core()`: ours' rank runs there, so the in-process plain loop and the
    GEMM ceiling must too, or on a shared machine they could float to a core idler than ours'."""
    core = rank0_core()
    if core is None:
        yield
        return
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def plain_loop(data: Path, case: Case, lr: float, model_name: str, threads: int) -> dict:
    """Seconds per step of the plain PyTorch loop after `case.warmup` untimed steps, total and per part."""
    import torch
    import torch.nn.functional as F

    from scaledl.data.hdf5 import read_info
    from scaledl.data.loader import Normalizer, ShardLoader
    from scaledl.models import build_model

    torch.set_num_threads(threads)
    info = read_info(data)
    torch.manual_seed(0)
    model = build_model(model_name, info.image_shape, info.classes)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loader = ShardLoader(data, shard=0, num_shards=1, batch_size=case.batch, seed=0)
    normalize = Normalizer(info.mean, info.std, "cpu")
    parts = {"data_s": 0.0, "compute_s": 0.0, "update_s": 0.0}
    clock = time.perf_counter

    def step() -> None:
        t0 = clock()
        x, y = normalize(*loader.next_batch())
        t1 = clock()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        t2 = clock()
        opt.step()
        t3 = clock()
        parts["data_s"] += t1 - t0
        parts["compute_s"] += t2 - t1
        parts["update_s"] += t3 - t2

    for _ in range(case.warmup):
        step()
    parts.update(dict.fromkeys(parts, 0.0))
    t0 = clock()
    for _ in range(case.steps):
        step()
    total = clock() - t0
    return {"seconds_per_step": total / case.steps, **{k: v / case.steps for k, v in parts.items()}}


def ours_run(data: Path, out_dir: Path, case: Case, lr: float, model: str) -> dict:
    """Ours' steady-state seconds per step and the parts the plain loop has (plus ours' comm and wait)."""
    state = common.train(
        1,
        data,
        out_dir,
        algorithm="sync_sgd",
        warmup=case.warmup,
        steps=case.steps,
        batch_size=case.batch,
        model=model,
        lr=lr,
    )
    part = lambda key: state.get(key) or 0.0  # noqa: E731 - a phase this run did not time is 0
    return {
        "seconds_per_step": state["seconds_per_step"],
        "data_s": part("data_s") + part("h2d_s"),
        "compute_s": part("compute_s"),
        "update_s": part("update_s"),
        "comm_wait_s": part("comm_s") + part("wait_s") + part("param_copy_s"),
    }


def measure(args, cases: list[Case], data: Path, tmp: Path) -> dict:
    """Every variant of every case once per round, in the order stats.round_order(cells, round).

    {"samples": {cell: [s/step per round]}, "splits": {cell: [parts per round]}, "order": [[cell, ...]],
     "gemm_peak": [gemm_peak_flops() per round]}
    """
    by_cell = {}
    for case in cases:
        ours, plain, aa = case_cells(case.label)
        by_cell.update({ours: (OURS, case), plain: (PLAIN, case), aa: (OURS, case)})
    cells = list(by_cell)
    samples = {c: [] for c in cells}
    splits = {c: [] for c in cells}
    order, peaks, log = [], [], {}
    threads = common.LAUNCH.threads
    rounds = stats.headline_rounds(len(cells), args.rounds)  # the goal's table: ≥ 6 rounds, whole designs
    for r in range(rounds):
        order.append(stats.round_order(cells, r, rounds))
        for i, c in enumerate(order[-1]):
            variant, case = by_cell[c]
            t0 = time.monotonic()
            with common.conditions(log, c):
                if variant == OURS:
                    res = ours_run(data, tmp / f"ours-r{r}-{i}", case, args.lr, args.model)
                else:
                    with on_rank0_core():
                        res = plain_loop(data, case, args.lr, args.model, threads)
            samples[c].append(res["seconds_per_step"])
            splits[c].append(res)
            print(
                f"bench_overhead: round {r + 1}/{rounds} {c:<32} {res['seconds_per_step'] * 1e3:8.3f} ms/step "
                f"({time.monotonic() - t0:.1f} s)",
                flush=True,
            )
        with on_rank0_core():  # the ceiling, once per round: the best round is the ceiling, the rest its spread
            peaks.append(common.gemm_peak_flops(threads))
    return {"samples": samples, "splits": splits, "order": order, "gemm_peak": peaks, "conditions": log}


# ----------------------------------------------------------------- rendering


def fmt_s(seconds: float) -> str:
    """Seconds as ms (≥ 1 ms) or µs, three significant digits."""
    return f"{seconds * 1e3:.3g} ms" if abs(seconds) >= 1e-3 else f"{seconds * 1e6:.3g} µs"


def format_us(values: list[float]) -> str:
    """Per-round differences in seconds as "+123 µs [+98–+150] n=5" (median [min–max] n)."""
    s = stats.summary(v * 1e6 for v in values)
    return f"{s['median']:+.0f} µs [{s['min']:+.0f}{stats.DASH}{s['max']:+.0f}] n={s['n']}"


def verdict_text(r: dict, noise: float) -> str:
    """The verdict of ours ÷ plain against the A/A noise floor, in words with the floor."""
    text = stats.verdict_text(r, noise)
    return text if stats.verdict(r, noise) in ("no difference", "not resolved") else f"ours {text}"


def rest(row: dict) -> float:
    """The step's seconds outside the timed parts (loop, bookkeeping; for ours also its comm and wait)."""
    return row["seconds_per_step"] - row["data_s"] - row["compute_s"] - row["update_s"]


def headline_rows(record: dict) -> list[dict]:
    s, meta = record["samples"], record["meta"]
    rows = []
    for case in meta["cases"]:
        ours, plain, aa = case_cells(case["label"])
        noise = stats.noise_floor(zip(s[ours], s[aa]))
        r = stats.ratio(s[ours], s[plain])
        rows.append(
            {
                "case": f"{meta['model']}, {case['label']}",
                "plain s/step": stats.format_cell(stats.summary(s[plain])),
                "ours s/step": stats.format_cell(stats.summary(s[ours])),
                "ours [A/A] s/step": stats.format_cell(stats.summary(s[aa])),
                "ours ÷ plain": stats.format_ratio(r),
                "verdict": verdict_text(r, noise),
                "goal ours ≤ 1.03× plain": stats.goal_text(r, GOAL, noise),
                "ours − plain per step": format_us([o - p for o, p in zip(s[ours], s[plain])]),
            }
        )
    return rows


SPLIT_PARTS = (
    ("batch (read + normalise)", lambda row: row["data_s"]),
    ("forward + backward", lambda row: row["compute_s"]),
    ("update (optimizer step)", lambda row: row["update_s"]),
    ("ours' comm + wait (none at one rank)", lambda row: row.get("comm_wait_s", 0.0)),
    ("untimed (loop, bookkeeping)", lambda row: rest(row) - row.get("comm_wait_s", 0.0)),
    ("**step**", lambda row: row["seconds_per_step"]),
)


def split_rows(record: dict) -> list[dict]:
    """Each part's median over rounds per case, ours and plain side by side, with ours − plain."""
    splits, meta = record["meta"]["splits"], record["meta"]
    rows = []
    for name, part in SPLIT_PARTS:
        row = {"part": name}
        for case in meta["cases"]:
            ours, plain, _ = case_cells(case["label"])
            o = stats.summary(part(x) for x in splits[ours])["median"]
            p = stats.summary(part(x) for x in splits[plain])["median"]
            row[f"ours ({case['label']})"] = fmt_s(o)
            row[f"plain ({case['label']})"] = fmt_s(p)
            row[f"ours − plain ({case['label']})"] = ("+" if o >= p else "") + fmt_s(o - p)
        rows.append(row)
    return rows


def limit_rows(record: dict) -> list[dict]:
    """Achieved FLOP/s per step (counted FLOPs ÷ s/step, per round) against the best GEMM rate of the run
    (a ceiling: load only ever lowers a measured rate)."""
    s, meta = record["samples"], record["meta"]
    peak = max(p["flops_per_s"] for p in meta["gemm_peak"])
    rows = []
    for case in meta["cases"]:
        flops = meta["step_flops"][case["label"]]
        ours, plain, _ = case_cells(case["label"])
        row = {"case": f"{meta['model']}, {case['label']}", "FLOPs per step": f"{flops / 1e6:.1f} M"}
        for name, c in (("plain", plain), ("ours", ours)):
            rates = [flops / t for t in s[c]]
            row[f"{name} GFLOP/s"] = stats.format_cell(stats.summary(r / 1e9 for r in rates), unit=None)
            row[f"{name} ÷ GEMM peak"] = stats.format_cell(stats.summary(100 * r / peak for r in rates), unit="%")
        rows.append(row)
    return rows


def aa_sentence(samples: dict, label: str) -> str:
    """ "batch 64: 1.010× [0.98–1.03] n=5, noise floor 3.0%": ours' A/A twin over ours, and the floor it gives."""
    ours, _, aa = case_cells(label)
    return (
        f"{label}: {stats.format_ratio(stats.ratio(samples[aa], samples[ours]))}, "
        f"noise floor {stats.noise_floor(zip(samples[ours], samples[aa])):.1%}"
    )


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the doc section, from a raw record alone."""
    meta, s = record["meta"], record["samples"]
    rounds = meta["rounds"]
    peaks = stats.summary(p["flops_per_s"] / 1e9 for p in meta["gemm_peak"])
    threads = meta["threads"]
    runs = "; ".join(f"{c['label']}: {c['warmup']} warm-up + {c['steps']} timed steps" for c in meta["cases"])
    intro = (
        f"One rank, {threads} thread(s), {meta['model']} on {meta['dataset']}, lr {meta['lr']}, plain SGD; "
        f"{runs}. {rounds} rounds, each measuring every variant of every case once in a recorded order "
        "(bench.stats.round_order), ours twice (the A/A twin). Same initial weights, same batches in the same "
        "order. Ours is `scaledl train --algorithm sync_sgd` at one rank, evaluated only at step 0 and "
        "after the loop (an evaluation runs on a helper thread that would share the bound core with the "
        "timed steps); plain is a hand-written PyTorch loop in the bench process. "
        "Both allocate with THP_MEM_ALLOC_ENABLE=1 and run the launch's thread count"
        + (
            f"; the plain loop is pinned to CPU {meta['plain_core']}, the core mpiexec binds ours' rank to."
            if meta.get("plain_core") is not None
            else "; neither is bound to a core."
        )
    )
    headline = headline_rows(record)
    tables = common.table(headline, list(headline[0]))
    aa_text = "; ".join(aa_sentence(s, c["label"]) for c in meta["cases"])
    tables += (
        "\ns/step: steady-state seconds per step, median [min–max] n over rounds. `ours ÷ plain` is paired "
        "per round (> 1: ours is slower); `ours − plain` is the per-round difference in µs per step, the "
        f"fixed cost ours adds to every step. A/A (ours [A/A] ÷ ours) — {aa_text}; {stats.RULE}.\n"
    )
    split = split_rows(record)
    tables += (
        "\nWhere a step's time goes (each part's median over rounds; medians need not add up to the "
        "step's):\n\n" + common.table(split, list(split[0]))
    )
    limits = limit_rows(record)
    tables += (
        f"\nLimits: FLOPs per step counted by torch's FlopCounterMode (matrix products and convolutions of "
        f"forward + backward; elementwise work not counted) over seconds per step, per round, against the "
        f"float32 GEMM ceiling (1024×1024 matrix product, {threads} thread(s), on the core ours runs on) "
        f"measured once per round of this run: the best round, {peaks['max']:.1f} GFLOP/s (all rounds: "
        f"{stats.format_cell(peaks, unit='GFLOP/s')}).\n\n" + common.table(limits, list(limits[0]))
    )
    notes = (
        "What ours adds at one rank: the phase timers, the step boundary and the monitor's per-step "
        "bookkeeping. It sends nothing (one worker has no one to agree with) and keeps no flat gradient "
        "(autograd's own .grad per parameter, the update view by view: a preset flat gradient cost a zeroing "
        "and an accumulating pass over |W| a step); parameters stay views into one flat buffer. It also runs in a process of its own under mpiexec, while the "
        f"plain loop runs in the bench process. Raw samples: {meta['raw']}; wall time of the measuring run "
        f"{meta['wall_s']:.0f} s (budget {BUDGET_S} s)."
    )
    if rounds < 5:
        notes += f" Only {rounds} round(s): not enough for a headline ratio (use ≥ 5)."
    return TITLE, intro, tables, notes


# ---------------------------------------------------------------------- main


def measure_record(args, cases: list[Case]) -> Path:
    """Measure every case and write the raw record to args.raw."""
    from scaledl.data.hdf5 import read_info

    t_start = time.monotonic()
    common.use_launch(common.Launch.for_table(1, threads=args.threads))
    m = common.machine()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        data = common.DATASETS[DATASET](Path(tmp))
        info = read_info(data)
        flops = {c.label: common.step_flops(args.model, info.image_shape, info.classes, c.batch) for c in cases}
        result = measure(args, cases, data, Path(tmp))
    return common.write_raw(
        args.raw,
        NAME,
        result["samples"],
        {
            "machine": m,
            "unit": "s",
            "quantity": "seconds per step (steady state)",
            "model": args.model,
            "dataset": DATASET,
            "lr": args.lr,
            "threads": common.LAUNCH.threads,
            "rounds": len(result["order"]),
            "cases": [{"label": c.label, "batch": c.batch, "warmup": c.warmup, "steps": c.steps} for c in cases],
            "order": result["order"],
            "conditions": result["conditions"],
            "splits": result["splits"],
            "gemm_peak": result["gemm_peak"],
            "plain_core": rank0_core(),
            "step_flops": flops,
            "raw": common.shown_path(args.raw),
            "wall_s": time.monotonic() - t_start,
        },
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        default="64:10:60,4:40:200",
        help="BATCH:WARMUP:STEPS,... one case per batch size; STEPS a multiple of WARMUP (default %(default)s)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="at least this many rounds, each measuring every variant once in a recorded order, rounded up "
        "to whole Williams designs, at least 6 (default %(default)s)",
    )
    parser.add_argument("--threads", type=int, default=1, help="threads of both loops (default %(default)s)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default %(default)s)")
    parser.add_argument("--model", default="lenet", help="model of both loops (default %(default)s)")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    try:
        cases = parse_cases(args.cases)
    except ValueError as exc:
        parser.error(f"--cases: {exc}")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1 (≥ 5 for headline ratios)")
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    raw = args.raw if args.render else measure_record(args, cases)
    return common.publish_record(raw, NAME, render, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
