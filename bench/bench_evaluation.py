"""Evaluation costs the training nothing: the same runs with a test set 100× larger, side by side.

    python bench/bench_evaluation.py [--steps 60] [--every 10] [--factor 100] [--rounds 5]
                                     [--raw bench/raw/evaluation.json] [--render] [--no-doc]

Cells (`cells`): sync_sgd and async_easgd at P = 2 on digits, evaluating every EVERY steps, with the test
split as prepared and FACTOR times larger, and the first a second time (A/A). The goal: seconds per step and
communication share with the large test set within 20 % of the plain one's; the wall time grows by the
evaluations, which no clock counts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "evaluation"
TITLE = "Evaluation beside no training"
BUDGET_S = 600
ALGORITHMS = {"sync_sgd": 2, "async_easgd": 3}  # algorithm → ranks at P = 2
GOAL = 0.20


def large_test_set(digits: Path, out: Path, factor: int) -> Path:
    """`digits` with its test split repeated `factor` times (the same images: only the evaluation's size grows)."""
    import h5py

    from scaledl.data.hdf5 import read_info, write_dataset

    info = read_info(digits)
    with h5py.File(digits) as f:
        train = (f["train/images"][:], f["train/labels"][:])
        test = (np.tile(f["test/images"][:], (factor, 1, 1, 1)), np.tile(f["test/labels"][:], factor))
    write_dataset(
        out, dataset=info.dataset, train=train, test=test, classes=info.classes, class_names=None,
        source_sha256=info.source_sha256, chunked=True,
    )  # fmt: skip
    return out


def cells(factor: int) -> list[str]:
    names = [f"{a} P=2, test ×{k}" for a in ALGORITHMS for k in (1, factor)]
    return [*names, stats.aa_cell(names[0])]


def parse_cell(cell: str) -> tuple[str, bool]:
    """(algorithm, whether the cell evaluates on the large test set)."""
    factor = int(cell.split("test ×")[1].split()[0])
    return cell.split()[0], factor != 1


def one_run(data: Path, out: Path, algorithm: str, steps: int, every: int) -> dict:
    args = common.train_argv(data, out, algorithm, max_steps=steps, eval_every=every, threads=1, checkpoint_interval=0)
    t0 = time.monotonic()
    common.run_mpi(ALGORITHMS[algorithm], args, timeout=600)
    run = common.read_run(out)
    return {
        "seconds_per_step": run["seconds_per_step"], "comm_share": run["comm_share"], "wall_s": time.monotonic() - t0,
        "evaluations": run["evaluation"]["evaluations"], "eval_s": run["evaluation"]["seconds"],
        "test_images": run["data"]["n_test"],
    }  # fmt: skip


def measure(args, tmp: Path) -> dict:
    digits = common.prepare_digits(tmp)
    large = large_test_set(digits, tmp / "digits-large.h5", args.factor)

    def measure_one(cell: str, r: int, i: int) -> tuple[float, dict]:
        algorithm, big = parse_cell(cell)
        res = one_run(large if big else digits, tmp / f"r{r}-{i}", algorithm, args.steps, args.every)
        return res["seconds_per_step"], res

    return common.rotating_rounds(NAME, cells(args.factor), args.rounds, measure_one)


def rows(record: dict) -> list[dict]:
    s, meta = record["samples"], record["meta"]
    names = cells(meta["factor"])
    out = []
    for algorithm in ALGORITHMS:
        small, big = (f"{algorithm} P=2, test ×{k}" for k in (1, meta["factor"]))
        noise = stats.noise_floor(zip(s[names[0]], s[names[-1]]))
        shares = {c: [d["comm_share"] for d in meta["details"][c]] for c in (small, big)}
        step_ratio = stats.ratio(s[big], s[small])
        share_ratio = stats.ratio(shares[big], shares[small])
        within = all(abs(r["median"] - 1) <= GOAL for r in (step_ratio, share_ratio))
        out.append({
            "algorithm (P = 2)": f"{algorithm} ({ALGORITHMS[algorithm]} ranks)",
            "test images": f"{meta['details'][small][0]['test_images']} → {meta['details'][big][0]['test_images']}",
            "s/step ×1": stats.format_cell(stats.summary(s[small])),
            f"s/step ×{meta['factor']}": stats.format_cell(stats.summary(s[big])),
            "s/step ratio": stats.format_ratio(step_ratio),
            "comm share ×1": stats.format_cell(stats.summary(shares[small]), unit=None),
            f"comm share ×{meta['factor']}": stats.format_cell(stats.summary(shares[big]), unit=None),
            "share ratio": stats.format_ratio(share_ratio), "verdict (s/step)": stats.verdict_text(step_ratio, noise),
            f"within ±{GOAL:.0%}": "yes" if within else "no",
            "wall ×1 → ×F": f"{stats.summary(d['wall_s'] for d in meta['details'][small])['median']:.1f} s → {stats.summary(d['wall_s'] for d in meta['details'][big])['median']:.1f} s",
        })  # fmt: skip
    return out


def render(record: dict) -> tuple[str, str, str, str]:
    meta = record["meta"]
    intro = common.text(
        "evaluation.intro", steps=meta["steps"], every=meta["every"], factor=meta["factor"], rounds=meta["rounds"]
    )
    table_rows = rows(record)
    notes = common.text("evaluation.notes") + common.record_tail(meta, BUDGET_S)
    return TITLE, intro, common.table(table_rows, list(table_rows[0])), notes


def measure_record(args) -> Path:
    launch = common.Launch.for_table(max(ALGORITHMS.values()))
    result, m, t_start = common.measured(args, launch, lambda tmp: measure(args, tmp))
    quantity = "seconds per step (steady state, evaluations excluded)"
    return common.write_record(
        args, NAME, result, m, t_start, quantity=quantity, steps=args.steps, every=args.every, factor=args.factor,
        details=result["details"],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="steps per run (default %(default)s)")
    parser.add_argument("--every", type=int, default=10, help="steps between evaluations (default %(default)s)")
    parser.add_argument("--factor", type=int, default=100, help="how much larger the test set (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; ≥ 5 for headline ratios (default %(default)s)")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if min(args.steps, args.every, args.factor, args.rounds) < 1:
        parser.error("--steps, --every, --factor and --rounds must be >= 1")
    raw = args.raw if args.render else measure_record(args)
    return common.publish_record(raw, NAME, render, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
