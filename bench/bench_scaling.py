"""Weak and strong scaling of sync_sgd and sync_easgd on digits/LeNet, beside the α-β cost model (section `scaling`).

    python bench/bench_scaling.py [--workers 1,2] [--warmup 10] [--steps 30] [--rounds 5]
                                  [--batch 64] [--global-batch 128] [--netbench FILE]
                                  [--raw bench/raw/scaling.json] [--render] [--no-doc]

Cells are (algorithm, P, batch per worker) configurations (`plan`); with the default batches strong P = 2 is
weak P = 2's configuration, so it is measured as that cell's A/A twin. Each row carries the α-β prediction
(scaledl.net.alphabeta, the runs' own exchange, T_c = the compute measured at that P and round). The page's
words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "scaling"
TITLE = "Weak and strong scaling: sync_sgd and sync_easgd"
ALGORITHMS = ("sync_sgd", "sync_easgd")
COST_MODEL = "bandwidth_optimal"  # what MPICH selects for messages of LeNet's size (scaledl.net.alphabeta)
SCALINGS = ("weak", "strong")
# Steady-state quantities per step kept for every run (docs/time.md); "compute_s" is the COMPUTE group
# (data + compute + update + center_update), the cost model's T_c, not the forward/backward phase alone.
SPLIT_KEYS = ("compute_s", "transfer_s", "wait_s", "exposed_s")


# ------------------------------------------------------------------- plan


def cell_name(algorithm: str, workers: int, batch: int) -> str:
    return f"{algorithm} P={workers} batch={batch}"


def plan(algorithms, workers, batch: int, global_batch: int) -> dict:
    """{"rows": [{"algorithm", "scaling", "workers", "batch", "cell"}], "cells": {name: {"algorithm", "workers",
    "batch"}}, "aa": {algorithm: [cell, twin]}}: each algorithm's A/A cell is its weak row at the smallest P > 1,
    and a strong row of the same configuration reads the twin (no extra run)."""
    rows, cells, aa = [], {}, {}
    for algorithm in algorithms:
        aa_workers = min([p for p in workers if p > 1], default=1)
        base = cell_name(algorithm, aa_workers, batch)
        twin = stats.aa_cell(base)
        aa[algorithm] = [base, twin]
        for scaling in SCALINGS:
            for p in workers:
                per_worker = batch if scaling == "weak" else global_batch // p
                name = cell_name(algorithm, p, per_worker)
                if scaling == "strong" and name == base:
                    name = twin
                rows.append(
                    {"algorithm": algorithm, "scaling": scaling, "workers": p, "batch": per_worker, "cell": name}
                )
                cells[name] = {"algorithm": algorithm, "workers": p, "batch": per_worker}
        cells.setdefault(twin, {"algorithm": algorithm, "workers": aa_workers, "batch": batch})
    return {"rows": rows, "cells": cells, "aa": aa}


# ---------------------------------------------------------------- measure


def split_of(state: dict) -> dict:
    """One run's steady-state seconds per step: compute (T_c), transfer, wait, exposed, and every phase."""
    from scaledl.comm.timing import COMPUTE, PHASES

    return {
        "compute_s": sum(state[f"{p}_s"] for p in COMPUTE), "transfer_s": state["transfer_s"],
        "wait_s": state["exposed_s"] - state["transfer_s"], "exposed_s": state["exposed_s"],
        "phases": {p: state[f"{p}_s"] for p in PHASES},
        "exchange": common.run_exchange(state["run"]),  # the model column prices the messages the run sent
    }  # fmt: skip


def measure(cells: dict, args, data: Path, tmp: Path) -> dict:
    """Every cell once per round (common.rotating_rounds): {"samples", "splits", "order", "conditions",
    "message_bytes"}."""
    sizes = []

    def measure_one(cell: str, r: int, i: int):
        cfg = cells[cell]
        state = common.train(
            cfg["workers"], data, tmp / f"r{r}-{i}", algorithm=cfg["algorithm"], warmup=args.warmup,
            steps=args.steps, batch_size=cfg["batch"], lr=args.lr,
        )  # fmt: skip
        sizes.append(state["run"]["model"]["bytes"])
        return state["seconds_per_step"], split_of(state)

    result = common.rotating_rounds(NAME, list(cells), args.rounds, measure_one)
    return {**result, "splits": result["details"], "message_bytes": sizes[-1]}


# ----------------------------------------------------------------- render


def _seconds(x: float) -> str:
    return f"{x * 1e3:.3g} ms"


def _cell(values) -> str:
    return stats.format_cell(stats.summary(values))


def _quantity(record: dict, cell: str, key: str) -> list[float]:
    return [split[key] for split in record["meta"]["splits"][cell]]


def _floor(first, second) -> float:
    """stats.noise_floor of an A/A pair; infinite (no verdict can pass it) where a sample is zero."""
    try:
        return stats.noise_floor(zip(first, second))
    except ValueError:
        return math.inf


def _ratio_text(a, b) -> str:
    try:
        return stats.format_ratio(stats.ratio(a, b))
    except ValueError:  # a zero sample in the denominator
        return "–"


def aa_series(record: dict, algorithm: str) -> dict:
    """{quantity: (first, A/A twin)} for one algorithm's A/A pair: s/step and every SPLIT_KEYS quantity."""
    base, twin = record["meta"]["aa"][algorithm]
    series = {"s/step": (record["samples"][base], record["samples"][twin])}
    series.update({key: (_quantity(record, base, key), _quantity(record, twin, key)) for key in SPLIT_KEYS})
    return series


def noise_floors(record: dict) -> dict:
    """The table's noise floor per quantity: the largest stats.noise_floor over the algorithms' A/A pairs."""
    pairs = [aa_series(record, a) for a in record["meta"]["aa"]]
    return {key: max(_floor(*series[key]) for series in pairs) for key in ("s/step", *SPLIT_KEYS)}


def predictions(record: dict, row: dict) -> dict | None:
    """The cost model's prediction for one row, per round: {"exposed_s", "step_s": [T_c(P, round) + comm],
    "formula"}; None without α, β."""
    from scaledl.net.alphabeta import step_cost

    net = common.recorded_network(record["meta"])
    if net is None:
        return None
    n = record["meta"]["message_bytes"]
    exchange = common.priced_exchange(record["meta"]["splits"][row["cell"]])  # what the runs sent
    costs = [
        step_cost(
            row["algorithm"], net, n, row["workers"], model=COST_MODEL, compute_s=t_c, control=True, exchange=exchange
        )
        for t_c in _quantity(record, row["cell"], "compute_s")
    ]
    return {"exposed_s": costs[0].exposed_s, "step_s": [c.step_s for c in costs], "formula": costs[0].formula}


def ideal_verdict(r: dict, noise: float) -> str:
    """A paired ratio (time at P, scaled to the ideal) over t(1), as words against the ideal."""
    v = stats.verdict(r, noise)
    return {"slower": "below ideal", "faster": "above ideal"}.get(v, v)


def _p_label(record: dict, row: dict) -> str:
    return f"{row['workers']}{record['meta']['marks'].get(str(row['workers']), '')}"


def _scaling_label(record: dict, row: dict) -> str:
    twin = row["cell"] == record["meta"]["aa"][row["algorithm"]][1]
    return f"{row['scaling']} (A/A twin)" if twin and row["scaling"] == "strong" else row["scaling"]


def _reference(record: dict, row: dict) -> dict:
    same = lambda r: r["algorithm"] == row["algorithm"] and r["scaling"] == row["scaling"]  # noqa: E731
    return next(r for r in record["meta"]["rows"] if same(r) and r["workers"] == 1)


def scaling_table(record: dict, floors: dict) -> str:
    s = record["samples"]
    out = []
    for row in record["meta"]["rows"]:
        p, t = row["workers"], s[row["cell"]]
        t1 = s[_reference(record, row)["cell"]]
        entry = {
            "algorithm": row["algorithm"], "scaling": _scaling_label(record, row), "P": _p_label(record, row),
            "batch/worker": row["batch"], "s/step": _cell(t),
        }  # fmt: skip
        pred = predictions(record, row)
        entry["predicted s/step"] = _cell(pred["step_s"]) if pred else "no prediction"
        entry["measured ÷ predicted"] = stats.format_ratio(stats.ratio(t, pred["step_s"])) if pred else "–"
        if p == 1:
            entry.update({"efficiency": "1 (reference)", "speedup": "1 (reference)", "vs ideal": "–"})
        else:
            # Ideal: weak t(P) = t(1); strong P·t(P) = t(1). Both as paired per-round ratios.
            scaled = t if row["scaling"] == "weak" else [p * x for x in t]
            speedup = stats.ratio([p * x for x in t1], t) if row["scaling"] == "weak" else stats.ratio(t1, t)
            entry.update({
                "efficiency": stats.format_ratio(stats.ratio(t1, scaled)), "speedup": stats.format_ratio(speedup),
                "vs ideal": ideal_verdict(stats.ratio(scaled, t1), floors["s/step"]),
            })  # fmt: skip
        out.append(entry)
    return common.table(out, list(out[0]))


def time_table(record: dict, floors: dict) -> str:
    out = []
    for row in record["meta"]["rows"]:
        p = row["workers"]
        q = {k: _quantity(record, row["cell"], k) for k in SPLIT_KEYS}
        entry = {
            "algorithm": row["algorithm"], "scaling": _scaling_label(record, row), "P": _p_label(record, row),
            "compute s/step": _cell(q["compute_s"]),
        }  # fmt: skip
        if p == 1:
            entry["compute/sample ÷ P=1"], entry["contention"] = "1 (reference)", "–"
        else:
            ref = _reference(record, row)
            per_sample = [c / row["batch"] for c in q["compute_s"]]
            ref_per_sample = [c / ref["batch"] for c in _quantity(record, ref["cell"], "compute_s")]
            r = stats.ratio(per_sample, ref_per_sample)
            entry["compute/sample ÷ P=1"] = stats.format_ratio(r)
            v = stats.verdict(r, floors["compute_s"])
            entry["contention"] = {"slower": "compute grows", "faster": "compute shrinks"}.get(v, v)
        entry.update({
            "exposed s/step": _cell(q["exposed_s"]), "wait s/step": _cell(q["wait_s"]),
            "transfer s/step": _cell(q["transfer_s"]),
        })  # fmt: skip
        pred = predictions(record, row)
        if pred is None:
            entry["predicted transfer"], entry["transfer ÷ predicted"] = "no prediction", "–"
        elif pred["exposed_s"] == 0:
            entry["predicted transfer"], entry["transfer ÷ predicted"] = "0 (no messages at P = 1)", "–"
        else:
            entry["predicted transfer"] = _seconds(pred["exposed_s"])
            entry["transfer ÷ predicted"] = _ratio_text(q["transfer_s"], [pred["exposed_s"]] * len(q["transfer_s"]))
        out.append(entry)
    return common.table(out, list(out[0]))


def aa_table(record: dict) -> str:
    out = []
    for algorithm, (base, _) in record["meta"]["aa"].items():
        for label, (first, second) in aa_series(record, algorithm).items():
            floor = _floor(first, second)
            out.append({
                "cell": base, "quantity": label.replace("_s", " s/step"), "first": _cell(first),
                "A/A twin": _cell(second), "twin ÷ first": _ratio_text(second, first),
                "noise floor": f"{floor:.1%}" if math.isfinite(floor) else "n/a (a zero sample)",
            })  # fmt: skip
    return common.table(out, list(out[0]))


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes, from the raw record alone (so --render rebuilds the section)."""
    meta = record["meta"]
    floors = noise_floors(record)
    rounds = meta["rounds"]
    intro = common.text(
        "scaling.intro", dataset=meta["dataset"], model=meta["model"], mb=f"{meta['message_bytes'] / 1e6:.3g}",
        lr=meta["lr"], warmup=meta["warmup"], steps=meta["steps"], workers=", ".join(map(str, meta["workers"])),
        rounds=f"{rounds} round{'s' if rounds != 1 else ''}", batch=meta["batch"], global_batch=meta["global_batch"],
    )  # fmt: skip
    parts = [
        common.text("scaling.steps"), scaling_table(record, floors).rstrip(),
        common.text("scaling.vs_ideal", floor=f"{floors['s/step']:.1%}"), common.text("scaling.split"),
        time_table(record, floors).rstrip(), common.text("scaling.contention", floor=f"{floors['compute_s']:.1%}"),
        common.text("scaling.aa", rule=stats.RULE), aa_table(record).rstrip(),
    ]  # fmt: skip
    tables = "\n\n".join(parts) + "\n"
    notes = []
    marked = sorted(int(p) for p, mark in meta["marks"].items() if mark)
    if marked:
        notes.append(
            common.text("scaling.marked", workers=", ".join(map(str, marked)), cores=record["machine"].get("cores", "?")),
        )  # fmt: skip
    net = meta.get("network")
    if net:
        first_rows = {}  # one row per algorithm: its formula is the same at every P
        for r in meta["rows"]:
            first_rows.setdefault(r["algorithm"], r)
        formulas = "; ".join(f"{a}: {predictions(record, row)['formula']}" for a, row in first_rows.items())
        source = f"{net['source']}: {common.netbench_origin(net)}{'; ' + net['note'] if net.get('note') else ''}"
        notes.append(common.text(
            "scaling.model", collectives=COST_MODEL.replace("_", "-"), formulas=formulas, alpha=f"{net['alpha_s']:.3g}",
            beta=f"{net['beta_s_per_byte']:.3g}", gamma=f"{net['gamma_s_per_byte'] or 0:.3g}", source=source,
        ))  # fmt: skip
    else:
        notes.append("No prediction: the record holds no α, β.")
    if rounds < 5:
        notes.append(f"Only {rounds} round(s): not enough for a headline ratio (use ≥ 5).")
    notes.append(f"Raw samples: {meta['raw']}; measuring took {meta['wall_s']:.0f} s of wall time.")
    return TITLE, intro, tables, "\n\n".join(notes)


def check_record(record: dict, path: Path) -> None:
    """One line (RawError) unless `record` is a raw record of this bench that render can read."""
    meta = record.get("meta") or {}
    missing = [k for k in ("rows", "aa", "splits", "marks", "rounds", "message_bytes") if k not in meta]
    if record.get("bench") != NAME or missing:
        raise common.RawError(
            f"{path}: not a bench_scaling record (bench {record.get('bench')!r}"
            f"{', missing ' + ', '.join(missing) if missing else ''}); write one with "
            "python bench/bench_scaling.py"
        )
    absent = [r["cell"] for r in meta["rows"] if r["cell"] not in record["samples"] or r["cell"] not in meta["splits"]]
    if absent:
        raise common.RawError(f"{path}: cell {absent[0]!r} has no samples; measure again")


# ------------------------------------------------------------------- main


def worker_counts(text: str) -> list[int]:
    try:
        workers = sorted({int(w) for w in text.split(",")})
    except ValueError:
        raise SystemExit(
            f"bench_scaling: --workers {text!r} is not a comma-separated list of integers (e.g. 1,2,4)"
        ) from None
    if workers[0] != 1:
        raise SystemExit("bench_scaling: --workers must include 1 (the reference) and only counts >= 1")
    return workers


def check_arguments(args) -> list[int]:
    workers = worker_counts(args.workers)
    if args.warmup < 1 or args.steps < 1 or args.steps % args.warmup:
        raise SystemExit("bench_scaling: --steps and --warmup must be >= 1 and --steps a multiple of --warmup")
    if args.rounds < 1:
        raise SystemExit("bench_scaling: --rounds must be >= 1 (5 or more for headline ratios)")
    if args.batch < 1:
        raise SystemExit("bench_scaling: --batch must be >= 1")
    bad = [p for p in workers if args.global_batch % p or args.global_batch < p]
    if bad:
        raise SystemExit(
            f"bench_scaling: --global-batch {args.global_batch} does not split evenly over {bad[0]} "
            "workers; choose a multiple of every worker count"
        )
    if args.netbench and not args.netbench.is_file():
        raise SystemExit(
            f"bench_scaling: --netbench {args.netbench}: no such file (write one with scaledl netbench, "
            "or leave the option out to measure one)"
        )
    return workers


def run_measurement(args, workers: list[int]) -> None:
    """Measure every cell for args.rounds rounds and write the raw record to args.raw."""
    t_start = time.monotonic()
    common.use_launch(common.Launch.for_table(max(workers)))  # one environment for every cell of the table
    m = common.machine()
    layout = plan(ALGORITHMS, workers, args.batch, args.global_batch)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        net = common.network(args.netbench, tmp, "bench_scaling")
        if "missing" in net:
            raise SystemExit(f"bench_scaling: no α-β prediction: {net['missing']}; pass --netbench FILE")
        result = measure(layout["cells"], args, common.prepare_digits(tmp), tmp)
    common.write_record(
        args, NAME, result, m, t_start, quantity="seconds per step (steady state, workers' mean)", dataset="digits",
        model="lenet", lr=args.lr, algorithms=list(ALGORITHMS), workers=workers, batch=args.batch,
        global_batch=args.global_batch, warmup=args.warmup, steps=args.steps, rows=layout["rows"],
        cells=layout["cells"], aa=layout["aa"], splits=result["splits"], message_bytes=result["message_bytes"],
        marks={str(p): common.LAUNCH.mark(p) for p in workers}, network=net,
    )  # fmt: skip
    print(f"bench_scaling: raw samples in {args.raw}; wall {time.monotonic() - t_start:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--workers", default="1,2", help="comma-separated worker counts, 1 included (default %(default)s)")
    add("--warmup", type=int, default=10, help="untimed steps per run (default %(default)s)")
    add("--steps", type=int, default=30, help="timed steps per run, a multiple of --warmup (default %(default)s)")
    add("--rounds", type=int, default=5, help="rounds; >= 5 for headline ratios (default %(default)s)")
    add("--batch", type=int, default=64, help="weak scaling: batch per worker (default %(default)s)")
    add("--global-batch", type=int, default=128, help="strong scaling: global batch (default %(default)s)")
    add("--lr", type=float, default=0.05, help="learning rate (default %(default)s)")
    add("--netbench", type=Path, help="scaledl netbench JSON with α, β, γ (default: measure one first)")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    try:
        if not args.render:
            run_measurement(args, check_arguments(args))
        record = common.read_raw(args.raw)
        check_record(record, args.raw)
    except common.RawError as error:
        raise SystemExit(f"bench_scaling: {error}") from None
    title, intro, tables, notes = render(record)
    common.publish(NAME, title, record, intro, tables, notes, write=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
