"""The averaging family beyond the paper: compressed rounds, and a straggler against sync and async algorithms.

    python bench/bench_averaging.py [--rounds 5] [--steps 100] [--straggler 1:3] [--target 0.9]
                                    [--raw bench/raw/averaging.json] [--render] [--no-doc]

Compression: sync_easgd and diloco at P = 2 with fp32, fp16, bf16 and int8 messages (steady-state s/step,
bytes per round, final accuracy; round r uses seed r). Stragglers: sync and async algorithms uniform and with
rank 1 slowed by --straggler, each to --target accuracy (time to target). Each table has an A/A twin and runs
its cells once a round in a recorded order. The page's words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "averaging"
TITLE = "The averaging family: compressed rounds, and stragglers"
BUDGET_S = 480
CODECS = ("fp32", "fp16", "bf16", "int8")
COMPRESSED = {"sync_easgd": 1, "diloco": 8}  # algorithm → τ
STRAGGLED = ("sync_sgd", "sync_easgd", "diloco", "async_sgd", "async_easgd")
MASTER_BASED = ("async_sgd", "async_easgd")


def compression_cell(algorithm: str, codec: str) -> str:
    return f"compression: {algorithm} τ={COMPRESSED[algorithm]}, {codec}"


def straggler_cell(algorithm: str, straggler: str | None) -> str:
    return f"stragglers: {algorithm}, {'straggler ' + straggler if straggler else 'uniform'}"


def ranks_of(algorithm: str) -> int:
    return 3 if algorithm in MASTER_BASED else 2


# ----------------------------------------------------------------- measuring


def compression_run(data: Path, out: Path, algorithm: str, codec: str, steps: int, seed: int) -> dict:
    warmup = max(steps // 10, 1)
    state = common.train(
        2, data, out, algorithm=algorithm, warmup=warmup, steps=steps - warmup, tau=COMPRESSED[algorithm],
        compress=codec, seed=seed,
    )  # fmt: skip
    run = state["run"]
    report = run["algorithm_report"][0]
    return {
        "seconds_per_step": state["seconds_per_step"], "transfer_s": state["transfer_s"],
        "bytes_per_exchange": report["bytes_per_exchange"], "accuracy": run["final"]["test_accuracy"],
    }  # fmt: skip


def straggler_run(data: Path, out: Path, algorithm: str, straggler: str | None, target: float, seed: int) -> dict:
    args = common.train_argv(
        data, out, algorithm, max_steps=600, eval_every=10, target_accuracy=target, seed=seed, straggler=straggler
    )
    common.run_mpi(ranks_of(algorithm), args)
    run = common.read_run(out)
    reached = run["time_to_target_s"]
    return {"time_to_target_s": math.inf if reached is None else reached, "seconds_per_step": run["seconds_per_step"]}


def measure(args, tmp: Path) -> dict:
    data = common.DATASETS["digits"](tmp)
    cells = {compression_cell(a, c): ("compression", a, c) for a in COMPRESSED for c in CODECS}
    cells[stats.aa_cell(compression_cell("sync_easgd", "fp32"))] = ("compression", "sync_easgd", "fp32")
    for algorithm in STRAGGLED:
        for straggler in (None, args.straggler):
            cells[straggler_cell(algorithm, straggler)] = ("stragglers", algorithm, straggler)
    cells[stats.aa_cell(straggler_cell("sync_sgd", None))] = ("stragglers", "sync_sgd", None)

    def measure_one(cell: str, r: int, i: int) -> tuple[float, dict]:
        table, algorithm, setting = cells[cell]
        if table == "compression":
            res = compression_run(data, tmp / f"r{r}-{i}", algorithm, setting, args.steps, seed=r)
            return res["seconds_per_step"], res
        res = straggler_run(data, tmp / f"r{r}-{i}", algorithm, setting, args.target, seed=r)
        return res["time_to_target_s"], res

    return common.rotating_rounds(NAME, list(cells), args.rounds, measure_one)


# ----------------------------------------------------------------- rendering


def compression_rows(record: dict) -> list[dict]:
    s, details = record["samples"], record["meta"]["details"]
    noise = stats.noise_floor(
        zip(s[compression_cell("sync_easgd", "fp32")], s[stats.aa_cell(compression_cell("sync_easgd", "fp32"))])
    )
    rows = []
    for algorithm, tau in COMPRESSED.items():
        base = compression_cell(algorithm, "fp32")
        for codec in CODECS:
            c = compression_cell(algorithm, codec)
            d = details[c]
            r = stats.ratio(s[c], s[base])
            gain = [a["accuracy"] - b["accuracy"] for a, b in zip(d, details[base])]
            rows.append({
                "algorithm": f"{algorithm} (τ = {tau})", "codec": codec,
                "bytes per round per worker": f"{d[0]['bytes_per_exchange'] / 1e6:.3f} MB",
                "bytes per step": f"{d[0]['bytes_per_exchange'] / tau / 1e6:.3f} MB",
                "s/step": stats.format_cell(stats.summary(s[c])),
                "transfer per step": stats.format_cell(stats.summary(x["transfer_s"] for x in d)),
                "÷ fp32": "—" if codec == "fp32" else stats.format_ratio(r),
                "verdict": "—" if codec == "fp32" else stats.verdict_text(r, noise),
                "accuracy": stats.format_cell(stats.summary(x["accuracy"] for x in d), unit=None),
                "accuracy − fp32's (same seed)": "—" if codec == "fp32" else stats.format_cell(stats.summary(gain), unit=None),
            })  # fmt: skip
    return rows


def straggler_rows(record: dict) -> list[dict]:
    s, meta = record["samples"], record["meta"]
    straggler = meta["straggler"]
    base = straggler_cell("sync_sgd", None)
    noise = stats.noise_floor(zip(s[base], s[stats.aa_cell(base)]))
    mark = common.Launch.from_dict(record.get("launch")) or common.LAUNCH  # the launch it was measured in
    rows = []
    for algorithm in STRAGGLED:
        uniform, slowed = straggler_cell(algorithm, None), straggler_cell(algorithm, straggler)
        r = stats.ratio(s[slowed], s[uniform])
        rows.append({
            "algorithm": algorithm + mark.mark(ranks_of(algorithm)),
            "family": "asynchronous (master)" if algorithm in MASTER_BASED else "synchronous (collectives)",
            "time to target, uniform": stats.format_cell(stats.summary(s[uniform])),
            f"with rank 1 × {straggler.split(':')[1]}": stats.format_cell(stats.summary(s[slowed])),
            "slowdown": stats.format_ratio(r), "verdict": stats.verdict_text(r, noise),
        })  # fmt: skip
    return rows


def render(record: dict) -> tuple[str, str, str, str]:
    meta = record["meta"]
    intro = common.text(
        "averaging.intro", rounds=meta["rounds"], steps=meta["steps"], target=f"{meta['target']:g}",
        factor=meta["straggler"].split(":")[1], straggler=meta["straggler"],
    )  # fmt: skip
    comp, strag = compression_rows(record), straggler_rows(record)
    tables = (
        f"{common.text('averaging.compression')}\n\n{common.table(comp, list(comp[0]))}\n"
        f"{common.text('averaging.straggler')}\n\n{common.table(strag, list(strag[0]))}\n"
        f"{common.text('averaging.slowdown')}\n"
    )
    return TITLE, intro, tables, common.text("averaging.notes") + common.record_tail(meta, BUDGET_S)


def measure_record(args) -> Path:
    result, m, t_start = common.measured(args, common.Launch.for_table(3), lambda tmp: measure(args, tmp))
    quantity = "seconds per step (compression); seconds to target (stragglers)"
    return common.write_record(
        args, NAME, result, m, t_start, quantity=quantity, steps=args.steps, target=args.target,
        straggler=args.straggler, details=result["details"],
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds; ≥ 5 for headline ratios (default %(default)s)")
    parser.add_argument("--steps", type=int, default=100, help="steps of a compression run (default %(default)s)")
    parser.add_argument("--straggler", default="1:3", help="RANK:FACTOR of the straggler runs (default %(default)s)")
    parser.add_argument(
        "--target", type=float, default=0.9, help="test accuracy of the straggler runs (default %(default)s)"
    )
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.rounds < 1 or args.steps < 10 or args.steps % 10:
        parser.error("--rounds must be >= 1 and --steps a multiple of 10 (a tenth is the warm-up)")
    if not args.straggler.startswith("1:"):
        parser.error("--straggler must slow rank 1 (a worker in every layout), e.g. 1:3")
    raw = args.raw if args.render else measure_record(args)
    return common.publish_record(raw, NAME, render, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
