"""Single-rank overhead of our training loop against a plain PyTorch loop (section `overhead`).

    python bench/bench_overhead.py [--cases 64:10:60,4:40:200] [--rounds 6] [--threads 1]
                                   [--raw bench/raw/overhead.json] [--render] [--no-doc]

Per case (batch:warm-up:steps) four cells a round, in a Williams order: ours (`scaledl train --algorithm
sync_sgd` at one rank), the plain loop (this script's --plain-worker mode), and an A/A twin of each. Both
sides run as `mpiexec -n 1` children under the same launch, with the same data, model, seed and update
code (FlatParams views, scaledl.algorithms.rules). What the page says is in docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "overhead"
TITLE = "Training-loop overhead at one rank vs a plain PyTorch loop"
OURS, PLAIN = "ours", "plain PyTorch"
DATASET = "digits"
BUDGET_S = 200
GOAL = 1.03  # ours ÷ plain at one rank; in µs: the loop's own cost ≤ (GOAL − 1) × plain's step


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
    return common.parse_cases(text, "BATCH:WARMUP:STEPS", Case)


def cell(variant: str, label: str) -> str:
    return f"{variant} ({label})"


def case_cells(label: str) -> tuple[str, str, str, str]:
    """ours, plain and the A/A twin of each, for one case."""
    ours, plain = cell(OURS, label), cell(PLAIN, label)
    return ours, plain, stats.aa_cell(ours), stats.aa_cell(plain)


# ----------------------------------------------------------------- measuring


def plain_argv(data: Path, case: Case, out: Path, lr: float, model: str, threads: int) -> list[str]:
    """The plain loop's arguments after `mpiexec -n 1 python -m mpi4py`: this script as its own child, so
    both sides start, allocate and get bound the same way (common.run_mpi)."""
    return [
        str(Path(__file__).resolve()),
        "--plain-worker",
        str(out),
        *("--data", str(data), "--model", model, "--lr", str(lr), "--threads", str(threads)),
        *("--batch", str(case.batch), "--warmup", str(case.warmup), "--steps", str(case.steps)),
    ]


def plain_worker(args) -> None:
    """The plain loop: ours' data, model, seed and update code, none of its loop; writes its timings to
    args.worker. The GEMM ceiling is measured here too, on the core this child is bound to."""
    import torch
    import torch.nn.functional as F

    from scaledl.algorithms import rules
    from scaledl.comm.flat import FlatParams
    from scaledl.data.hdf5 import read_info
    from scaledl.data.loader import Normalizer, ShardLoader
    from scaledl.models import build_model

    torch.set_num_threads(args.threads)
    info = read_info(args.data)
    torch.manual_seed(0)
    model = build_model(args.model, info.image_shape, info.classes)
    flat = FlatParams(model)
    flat.release_grads()  # as ours at one rank: autograd's own .grad, the update view by view
    loader = ShardLoader(args.data, shard=0, num_shards=1, batch_size=args.batch, seed=0)
    normalize = Normalizer(info.mean, info.std, "cpu")
    clock, parts = time.perf_counter, [0.0, 0.0, 0.0]  # data, forward + backward, update

    def step() -> None:
        t = [clock()]
        x, y = normalize(*loader.next_batch())
        t.append(clock())
        flat.zero_grad()
        F.cross_entropy(model(x), y).backward()
        t.append(clock())
        with torch.no_grad():
            for w, grad in flat.pairs():
                rules.mean_sgd_(w, grad, 1, args.lr)  # sync_sgd's update at one worker
        t.append(clock())
        parts[:] = [p + b - a for p, a, b in zip(parts, t, t[1:])]

    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            parts[:], t0 = [0.0, 0.0, 0.0], clock()
        step()
    per = {k: v / args.steps for k, v in zip(("data_s", "compute_s", "update_s"), parts)}
    result = {"seconds_per_step": (clock() - t0) / args.steps, **per}
    result["gemm_peak"] = common.gemm_peak_flops(args.threads)
    Path(args.worker).write_text(json.dumps(result))


def ours_run(data: Path, out_dir: Path, case: Case, lr: float, model: str) -> dict:
    """Ours' steady-state seconds per step and the parts the plain loop has (plus ours' comm and wait)."""
    state = common.train(
        1, data, out_dir, algorithm="sync_sgd", warmup=case.warmup, steps=case.steps, batch_size=case.batch,
        model=model, lr=lr,
    )  # fmt: skip
    part = lambda key: state.get(key) or 0.0  # noqa: E731 - a phase this run did not time is 0
    return {
        "seconds_per_step": state["seconds_per_step"], "data_s": part("data_s") + part("h2d_s"),
        "compute_s": part("compute_s"), "update_s": part("update_s"),
        "comm_wait_s": part("comm_s") + part("wait_s") + part("param_copy_s"),
    }  # fmt: skip


def measure(args, cases: list[Case], data: Path, tmp: Path) -> dict:
    """Every cell of every case once a round (common.rotating_rounds)."""
    by_cell = {}
    for case in cases:
        ours, plain, ours_aa, plain_aa = case_cells(case.label)
        by_cell.update({ours: (OURS, case), plain: (PLAIN, case), ours_aa: (OURS, case), plain_aa: (PLAIN, case)})

    def measure_one(c: str, r: int, i: int):
        variant, case = by_cell[c]
        if variant == OURS:
            res = ours_run(data, tmp / f"ours-r{r}-{i}", case, args.lr, args.model)
        else:
            out = tmp / f"plain-r{r}-{i}.json"
            common.run_mpi(1, plain_argv(data, case, out, args.lr, args.model, common.LAUNCH.threads))
            res = json.loads(out.read_text())
        return res["seconds_per_step"], res

    rounds = stats.headline_rounds(len(by_cell), args.rounds)  # the goal's table: ≥ 6 rounds, whole designs
    return common.rotating_rounds(NAME, list(by_cell), rounds, measure_one)


# ----------------------------------------------------------------- rendering


def loop_s(row: dict) -> float:
    """The step's seconds outside data, forward + backward, update and comm: the loop's own cost."""
    return row["seconds_per_step"] - row["data_s"] - row["compute_s"] - row["update_s"] - row.get("comm_wait_s", 0.0)


def twins(s: dict, ours: str, plain: str, ours_aa: str, plain_aa: str) -> list[tuple[str, str]]:
    """The A/A pairs a record holds: ours' always, plain's in records since the plain loop had a twin."""
    return [(a, b) for a, b in ((ours, ours_aa), (plain, plain_aa)) if a in s and b in s]


def loop_goal(record: dict, label: str) -> dict:
    """The µs goal: ours' loop cost − plain's, per round, against (GOAL − 1) × plain's median step; the floor is
    how far the interval of each twin's own loop-cost difference reaches from 0 (the wider of the two)."""
    splits, s = record["meta"]["splits"], record["samples"]
    ours, plain, ours_aa, plain_aa = case_cells(label)
    diff = lambda a, b: [loop_s(x) - loop_s(y) for x, y in zip(splits[a], splits[b])]  # noqa: E731
    own = diff(ours, plain)
    found = stats.median_interval(own)
    floors = [stats.median_interval(diff(b, a)) for a, b in twins(s, ours, plain, ours_aa, plain_aa)]
    floor = max(max(abs(f.low), abs(f.high)) for f in floors)
    budget = (GOAL - 1) * common.median(s[plain])
    verdict = stats.goal({"ci_low": found.low, "ci_high": found.high, "min": 0, "max": 0}, budget, floor, margin=budget)
    return {
        "median": common.median(own), "n": len(own), "low": found.low, "high": found.high,
        "coverage": found.coverage, "floor": floor, "budget": budget, "goal": verdict,
    }  # fmt: skip


def headline(record: dict) -> list[dict]:
    """The page's headline rows: per case, the loop's own µs per step and ours ÷ plain, each against its goal."""
    s, rows = record["samples"], []
    for case in record["meta"]["cases"]:
        label, g = case["label"], loop_goal(record, case["label"])
        us, r = lambda x: f"{micro(x)} µs", {**g, "ci_low": g["low"], "ci_high": g["high"]}  # noqa: E731
        what = f"the loop's own cost per step, ours − plain, {label}"
        rows.append(stats.headline_row(what, r, f"±{g['floor'] * 1e6:.0f} µs", f"≤ {us(g['budget'])}", g["goal"], us))
        r, noise = ratio_and_floor(s, label)
        rows.append(stats.headline_row(
            f"one rank, ours ÷ a plain loop, {label}", r, f"±{noise:.1%}", f"≤ {GOAL:.2f}×", stats.goal(r, GOAL, noise)
        ))  # fmt: skip
    return rows


def micro(seconds: float) -> str:
    """Signed whole µs, "+0" for what rounds to nothing."""
    return f"{round(seconds * 1e6):+d}"


def loop_goal_text(g: dict) -> str:
    head = f"goal ≤ +{g['budget'] * 1e6:.0f} µs: {g['goal']}"
    return f"{head} (A/A floor ±{g['floor'] * 1e6:.0f} µs); {micro(g['low'])}{stats.DASH}{micro(g['high'])} µs ({100 * g['coverage']:.1f} %)"


def ratio_and_floor(s: dict, label: str) -> tuple[dict, float]:
    """Ours ÷ plain in a case, and the floor of its wider twin."""
    ours, plain, ours_aa, plain_aa = case_cells(label)
    noise = max(stats.noise_floor(zip(s[a], s[b])) for a, b in twins(s, ours, plain, ours_aa, plain_aa))
    return stats.ratio(s[ours], s[plain]), noise


def headline_rows(record: dict) -> list[dict]:
    s, meta = record["samples"], record["meta"]
    rows = []
    for case in meta["cases"]:
        ours, plain, *_ = case_cells(case["label"])
        r, noise = ratio_and_floor(s, case["label"])
        verdict = stats.verdict_text(r, noise)
        rows.append({
            "case": f"{meta['model']}, {case['label']}", "plain s/step": stats.format_cell(stats.summary(s[plain])),
            "ours s/step": stats.format_cell(stats.summary(s[ours])), "ours ÷ plain": stats.format_ratio(r),
            "verdict": verdict if stats.verdict(r, noise) in ("no difference", "not resolved") else f"ours {verdict}",
            f"goal ours ≤ {GOAL}× plain": stats.goal_text(r, GOAL, noise),
            "loop's own cost, ours − plain": loop_goal_text(loop_goal(record, case["label"])),
        })  # fmt: skip
    return rows


SPLIT_PARTS = (
    ("batch (read + normalise)", lambda row: row["data_s"]), ("forward + backward", lambda row: row["compute_s"]),
    ("update", lambda row: row["update_s"]),
    ("ours' comm + wait (none at one rank)", lambda row: row.get("comm_wait_s", 0.0)),
    ("the loop's own (untimed: loop, bookkeeping)", loop_s), ("**step**", lambda row: row["seconds_per_step"]),
)  # fmt: skip


def split_rows(record: dict) -> list[dict]:
    """Each part's median over rounds per case, ours and plain side by side, with ours − plain."""
    splits, meta = record["meta"]["splits"], record["meta"]
    rows = []
    for name, part in SPLIT_PARTS:
        row = {"part": name}
        for case in meta["cases"]:
            ours, plain, *_ = case_cells(case["label"])
            o = stats.summary(part(x) for x in splits[ours])["median"]
            p = stats.summary(part(x) for x in splits[plain])["median"]
            row[f"ours ({case['label']})"] = stats.fmt_seconds(o)
            row[f"plain ({case['label']})"] = stats.fmt_seconds(p)
            row[f"ours − plain ({case['label']})"] = ("+" if o >= p else "") + stats.fmt_seconds(o - p)
        rows.append(row)
    return rows


def peaks(meta: dict) -> list[float]:
    """The GEMM ceilings of the run: one per plain run (its child), or per round in older records."""
    found = meta.get("gemm_peak") or [
        x["gemm_peak"] for rows in meta["splits"].values() for x in rows if "gemm_peak" in x
    ]
    return [p["flops_per_s"] for p in found]


def limit_rows(record: dict) -> list[dict]:
    """Achieved FLOP/s per step (counted FLOPs ÷ s/step, per round) against the best GEMM rate of the run."""
    s, meta = record["samples"], record["meta"]
    peak = max(peaks(meta))
    rows = []
    for case in meta["cases"]:
        flops = meta["step_flops"][case["label"]]
        ours, plain, *_ = case_cells(case["label"])
        row = {"case": f"{meta['model']}, {case['label']}", "FLOPs per step": f"{flops / 1e6:.1f} M"}
        for name, c in (("plain", plain), ("ours", ours)):
            rates = [flops / t for t in s[c]]
            row[f"{name} GFLOP/s"] = stats.format_cell(stats.summary(r / 1e9 for r in rates), unit=None)
            row[f"{name} ÷ GEMM peak"] = stats.format_cell(stats.summary(100 * r / peak for r in rates), unit="%")
        rows.append(row)
    return rows


def aa_sentence(samples: dict, label: str) -> str:
    """ "batch 64: ours 1.010× [...] (floor 3.0%), plain ...": each twin over its first, and the floor it gives."""
    pairs = twins(samples, *case_cells(label))
    return f"{label}: " + ", ".join(
        f"{a.split(' (')[0]} [A/A] ÷ {a.split(' (')[0]} {stats.format_ratio(stats.ratio(samples[b], samples[a]))} "
        f"(floor {stats.noise_floor(zip(samples[a], samples[b])):.1%})"
        for a, b in pairs
    )


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the doc section, from a raw record alone."""
    meta, s = record["meta"], record["samples"]
    child = meta.get("plain_launch") == "mpiexec -n 1"
    intro = common.text(
        "overhead.intro", threads=meta["threads"], model=meta["model"], dataset=meta["dataset"], lr=meta["lr"],
        runs="; ".join(f"{c['label']}: {c['warmup']} warm-up + {c['steps']} timed steps" for c in meta["cases"]),
        rounds=meta["rounds"], plain=common.text("overhead.plain_child" if child else "overhead.plain_in_process"),
    )  # fmt: skip
    headline = headline_rows(record)
    tables = common.table(headline, list(headline[0]))
    tables += "\n" + common.text(
        "overhead.reading", goal=GOAL, aa="; ".join(aa_sentence(s, c["label"]) for c in meta["cases"]), rule=stats.RULE
    )
    split = split_rows(record)
    tables += "\n\n" + common.text("overhead.split") + "\n\n" + common.table(split, list(split[0]))
    limits = limit_rows(record)
    p = stats.summary(x / 1e9 for x in peaks(meta))
    tables += "\n" + common.text(
        "overhead.limits", threads=meta["threads"], peak=f"{p['max']:.1f}", peaks=stats.format_cell(p, unit="GFLOP/s")
    )
    tables += "\n\n" + common.table(limits, list(limits[0]))
    notes = common.text("overhead.notes") + common.record_tail(meta, BUDGET_S)
    return TITLE, intro, tables, notes


# ---------------------------------------------------------------------- main


def measure_record(args, cases: list[Case]) -> Path:
    """Measure every case and write the raw record to args.raw."""
    from scaledl.data.hdf5 import read_info

    def measure_all(tmp: Path) -> tuple[dict, dict]:
        data = common.DATASETS[DATASET](tmp)
        info = read_info(data)
        flops = {c.label: common.step_flops(args.model, info.image_shape, info.classes, c.batch) for c in cases}
        return measure(args, cases, data, tmp), flops

    (result, flops), m, t_start = common.measured(args, common.Launch.for_table(1, threads=args.threads), measure_all)
    cases_meta = [{"label": c.label, "batch": c.batch, "warmup": c.warmup, "steps": c.steps} for c in cases]
    return common.write_record(
        args, NAME, result, m, t_start, quantity="seconds per step (steady state)", model=args.model, dataset=DATASET,
        lr=args.lr, threads=common.LAUNCH.threads, cases=cases_meta, splits=result["details"],
        plain_launch="mpiexec -n 1", step_flops=flops,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="64:10:60,4:40:200", help="BATCH:WARMUP:STEPS,... (default %(default)s)")
    parser.add_argument(
        "--rounds", type=int, default=6,
        help="at least this many rounds, whole Williams designs, ≥ 6 (default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="threads of both loops (default %(default)s)")
    parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default %(default)s)")
    parser.add_argument("--model", default="lenet", help="model of both loops (default %(default)s)")
    # internal: the plain loop as its own mpiexec child (plain_argv)
    parser.add_argument("--plain-worker", dest="worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    for flag in ("--batch", "--warmup", "--steps"):
        parser.add_argument(flag, type=int, help=argparse.SUPPRESS)
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.worker:
        plain_worker(args)
        return 0
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
