"""Checkpoint overhead: what writing checkpoints costs a training run, measured side by side with none.

    python bench/bench_checkpoint.py [--cases lenet:digits:10:60:10,cifar_alexnet:synthetic32:2:8:2]
                                     [--ranks 2] [--rounds 5] [--raw bench/raw/checkpoint.json] [--render] [--no-doc]

A case is MODEL:DATASET:WARMUP:STEPS:EVERY; per case `scaledl train --algorithm sync_easgd` with no
checkpoint, with one every EVERY steps, and the first again (A/A). Per run: s/step with checkpoints excluded
and included, and one checkpoint's cost (the slowest rank's `checkpoint` phase), from which the share at the
default 300 s interval follows. The page's words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "checkpoint"
TITLE = "Checkpoint overhead"
BUDGET_S = 240
DEFAULT_INTERVAL_S = 300.0  # scaledl train's --checkpoint-interval default
NONE, EVERY = "none", "every"


@dataclass(frozen=True)
class Case:
    model: str
    dataset: str
    warmup: int
    steps: int
    every: int

    @property
    def label(self) -> str:
        return f"{self.model} on {self.dataset}"


def parse_cases(text: str) -> list[Case]:
    return common.parse_cases(text, "MODEL:DATASET:WARMUP:STEPS:EVERY", Case)


def case_cells(case: Case) -> tuple[str, str, str]:
    """none, every K and none's A/A twin of one case."""
    none = f"{NONE} ({case.label})"
    return none, f"{EVERY} {case.every} steps ({case.label})", stats.aa_cell(none)


def one_run(data: Path, out: Path, case: Case, ranks: int, checkpoints: bool) -> dict:
    """Seconds per step without and with the checkpoint phase, and what one checkpoint cost."""
    state = common.train(
        ranks, data, out, algorithm="sync_easgd", warmup=case.warmup, steps=case.steps, batch_size=32,
        model=case.model, checkpoint_every=case.every if checkpoints else None,
        checkpoint_interval=None if checkpoints else 0,
    )  # fmt: skip
    run = state["run"]
    written = run["checkpoints"]["written"]
    slowest = max(rank["checkpoint_s"] for rank in run["phases"]["per_rank"])
    return {
        "seconds_per_step": state["seconds_per_step"],
        "with_checkpoints_s": state["seconds_per_step"] + state["checkpoint_s"], "count": len(written),
        "per_checkpoint_s": slowest / len(written) if written else None,
        "bytes": written[0]["bytes"] if written else None,
    }  # fmt: skip


def measure(args, cases: list[Case], tmp: Path) -> dict:
    data = {name: common.DATASETS[name](tmp / name) for name in {c.dataset for c in cases}}
    by_cell = {}
    for case in cases:
        none, every, aa = case_cells(case)
        by_cell.update({none: (case, False), every: (case, True), aa: (case, False)})

    def measure_one(cell: str, r: int, i: int) -> tuple[float, dict]:
        case, checkpoints = by_cell[cell]
        res = one_run(data[case.dataset], tmp / f"r{r}-{i}", case, args.ranks, checkpoints)
        return res["with_checkpoints_s"], res

    return common.rotating_rounds(NAME, list(by_cell), args.rounds, measure_one)


# ----------------------------------------------------------------- rendering


def share(cost: float, interval: float) -> float:
    """The share of wall time one checkpoint of `cost` seconds takes when written every `interval` seconds."""
    return cost / (interval + cost)


def rows(record: dict) -> list[dict]:
    s, meta = record["samples"], record["meta"]
    out = []
    for c in meta["cases"]:
        case = Case(**c)
        none, every, aa = case_cells(case)
        details = meta["details"][every]
        noise = stats.noise_floor(zip(s[none], s[aa]))
        r = stats.ratio(s[every], s[none])
        costs = [d["per_checkpoint_s"] for d in details]
        cost = stats.summary(costs)["median"]
        step_s = stats.summary(s[none])["median"]
        out.append({
            "case": f"{case.label}, P = {meta['ranks']}",
            "checkpoint size": f"{details[0]['bytes'] / 2**20:.1f} MiB ({details[0]['count']} written per run)",
            "one checkpoint c": stats.format_cell(stats.summary(costs)),
            "s/step, none (t)": stats.format_cell(stats.summary(s[none])),
            "s/step, every K, excl. checkpoints": stats.format_cell(stats.summary(d["seconds_per_step"] for d in details)),
            "s/step, every K, incl.": stats.format_cell(stats.summary(s[every])),
            "every K ÷ none": stats.format_ratio(r), "verdict": stats.verdict_text(r, noise),
            "direct cost alone: 1 + c/(K·t)": f"{1 + cost / (case.every * step_s):.3f}×",
            "share at 300 s (default)": f"{share(cost, DEFAULT_INTERVAL_S):.4%}",
        })  # fmt: skip
    return out


def render(record: dict) -> tuple[str, str, str, str]:
    meta = record["meta"]
    runs = "; ".join(
        f"{c['model']} on {c['dataset']}: {c['warmup']} warm-up + {c['steps']} timed steps, a checkpoint "
        f"every {c['every']} of them"
        for c in meta["cases"]
    )
    intro = common.text("checkpoint.intro", ranks=meta["ranks"], runs=runs, rounds=meta["rounds"])
    table_rows = rows(record)
    tables = common.table(table_rows, list(table_rows[0])) + "\n" + common.text("checkpoint.reading") + "\n"
    return TITLE, intro, tables, common.text("checkpoint.notes") + common.record_tail(meta, BUDGET_S)


def measure_record(args, cases: list[Case]) -> Path:
    launch = common.Launch.for_table(args.ranks)
    result, m, t_start = common.measured(args, launch, lambda tmp: measure(args, cases, tmp))
    cases_meta = [{k: getattr(c, k) for k in ("model", "dataset", "warmup", "steps", "every")} for c in cases]
    quantity = "seconds per step, checkpoints included (steady state)"
    return common.write_record(
        args, NAME, result, m, t_start, quantity=quantity, ranks=args.ranks, details=result["details"], cases=cases_meta
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", default="lenet:digits:10:60:10,cifar_alexnet:synthetic32:2:8:2",
        help="MODEL:DATASET:WARMUP:STEPS:EVERY,... (default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--ranks", type=int, default=2, help="ranks of every run (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; ≥ 5 for headline ratios (default %(default)s)")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    try:
        cases = parse_cases(args.cases)
    except ValueError as exc:
        parser.error(f"--cases: {exc}")
    if args.rounds < 1 or args.ranks < 1:
        parser.error("--rounds and --ranks must be >= 1")
    raw = args.raw if args.render else measure_record(args, cases)
    return common.publish_record(raw, NAME, render, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
