"""How sensitive a simulated verdict is: "A is faster than B" with each assumed platform constant varied alone.

    scaledl sensitivity --platform-file k80x8 --claim sync_easgd3:easgd --workers 8 --data data/hdf5/mnist.h5 \\
        --model lenet --runs RUN_JSON... --out-dir results/NAME/report/sensitivity/sync_easgd3-vs-easgd

A simulated platform's constants are not all measured: a device's efficiency
and per-operation overhead, the PCIe and network bandwidths, the memory
bandwidth and the timing noise are datasheet values, assumptions or
calibrations with an error (each shipped platform's header says which). This
varies each of them alone (scaledl.sim.platform.CONSTANTS), by each of
`--factors` (default ×0.5 and ×2), judges the claim at every point as the
regime map does (scaledl.report.regime: time to target = steps to target ×
simulated seconds per step, the steps of each seed from the given runs; holds
where every seed's T_A / T_B is below 1, reversed where every one is above,
inconclusive otherwise), and says per constant whether the verdict at the base
platform survives the whole range, or the first factor on each side of 1,
going outward, where it changes.

That reuse of steps to target is exact for synchronous and round-robin pairs
only. An asynchronous side's steps to target follow the timing (staleness),
which the simulator's seeded noise makes a real schedule: `--whole-runs`
simulates every seed's whole training (to its target, or `--max-steps`) at
every point instead, each seed with its own run's settings; a point then costs
a training run per seed and side. Without it such a pair is refused.

Outputs: points.csv (every point: each side's seconds per step or median time
to target, the ratios, the verdict), sensitivity.csv and sensitivity.md (one
row per constant: its base value, the verdict at each factor, the conclusion),
which `scaledl claims --sensitivity` puts beside the simulated verdict.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scaledl.atomic import atomic_path, write_text
from scaledl.config import to_argv
from scaledl.errors import UserError
from scaledl.report import regime
from scaledl.validate.bands import band_factors, bands

# pandas and the simulator's platforms are imported where they are used, so that `scaledl sensitivity --help`
# does without them.

HELP = "vary each assumed platform constant alone and say whether a simulated claim's verdict survives (needs SimGrid)"

BASE = "base"  # the point at the platform as it is
VALIDATED, ASSUMED = "validated", "assumed"  # a constant's range: the band `scaledl validate` measured, or --factors
NOT_SWEPT = "not swept"
# What a whole run takes from its own run.json besides the settings that shape a step.
WHOLE_RUN_SETTINGS = (
    *regime.STEP_SETTINGS, "seed", "max_steps", "epochs", "time_budget", "target_accuracy", "eval_every",
    "validation_fraction",
)  # fmt: skip


# ---- the verdicts over a constant's factors (pure) -------------------------------------------------------------


def flips(base: str, verdicts: Mapping[float, str]) -> list[float]:
    """The first factor below 1 and the first above, each going outward from 1, whose verdict is not `base`."""
    below = sorted((f for f in verdicts if f < 1), reverse=True)
    above = sorted(f for f in verdicts if f > 1)
    found = (next((f for f in side if verdicts[f] != base), None) for side in (below, above))
    return [f for f in found if f is not None]


def span_text(factors: Sequence[float]) -> str:
    low, high = min(factors), max(factors)
    return f"×{low:g}" if low == high else f"×{low:g}-×{high:g}"


def values_text(values: Sequence[float], unit: str = "", factor: float = 1.0) -> str:
    """A constant's values (× factor) as one number or a range, with its unit; "" for none."""
    if not values:
        return ""
    low, high = min(values) * factor, max(values) * factor
    number = f"{low:.3g}" if f"{low:.3g}" == f"{high:.3g}" else f"{low:.3g}-{high:.3g}"
    return f"{number} {unit}" if unit else number


def conclusion(constant: str, base: str, verdicts: Mapping[float, str], values: Sequence[float], unit: str = "") -> str:
    """One constant's finding: the base verdict across the whole range, or where it flips (to what)."""
    if not any(values):
        return "not on this platform"
    changed = flips(base, verdicts)
    if not changed:
        return f"{base} across {span_text(list(verdicts))}"
    where = " and ".join(f"{constant} ×{f:g} ({values_text(values, unit, f)}: {verdicts[f]})" for f in changed)
    return f"{base}; flips at {where}"


def claim_text(rows: Sequence[Mapping[str, str]]) -> str:
    """What the claims report says beside a simulated verdict, from its sweep's sensitivity.csv rows: where every
    constant swept one range, that range; where some swept the band their validation measured, each its own."""
    swept = [r for r in rows if str(r.get("base_value", ""))]
    if not swept:
        return NOT_SWEPT
    base = swept[0]["base_verdict"]
    flipped = [
        f"{r['constant']} ×{float(f):g}" for r in swept for f in str(r.get("flips_at", "")).split(";") if f.strip()
    ]
    if flipped:
        return f"{base}; flips when {', '.join(flipped)}"
    if not any(str(r.get("band", "")) == VALIDATED for r in swept):
        return f"{base} across {swept[0]['span']} of every constant swept"
    ranges = ", ".join(f"{r['constant']} {r['span']} ({r['band']})" for r in swept)
    return f"{base} across every constant's range: {ranges}"


# ---- the sweep ------------------------------------------------------------------------------------------------


def constant_names(text: str) -> list[str]:
    from scaledl.sim.platform import CONSTANTS  # lazy: the simulator's package imports torch

    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in CONSTANTS]
    if unknown or not names:
        wrong = ", ".join(unknown) or "none given"
        raise UserError(f"--constants {text}: {wrong}; one or more of {', '.join(CONSTANTS)}")
    return list(dict.fromkeys(names))


def all_factors(args) -> list[float]:
    """Every factor any constant is swept at, in order (the table's columns)."""
    return sorted({f for c in args.constants for f in args.factors_of[c]})


def sweep_ranges(args) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Each constant's factors and where they come from: with --bands (a `scaledl validate` record), the ends of
    the band its held-out rows on this platform measured (scaledl.validate.bands); otherwise, and for a
    constant no row bounds, --factors."""
    if args.bands is None:
        return {c: args.factors for c in args.constants}, {c: ASSUMED for c in args.constants}
    from scaledl.sim.platform import load, resolve  # lazy: the simulator's package imports torch

    try:
        record = json.loads(Path(args.bands).read_text())
        measured = bands(record, load(resolve(args.platform_file)).name)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"--bands {args.bands}: not a `scaledl validate --out-json` record ({error})") from None
    factors, source = {}, {}
    for c in args.constants:
        own = band_factors(measured[c]) if c in measured else []
        factors[c], source[c] = (own, VALIDATED) if own else (args.factors, ASSUMED)
    return factors, source


def keep_banded(args) -> None:
    """--bands-only: the constants a validated band bounds, the others dropped from the sweep; none is one line."""
    if args.bands is None:
        raise UserError("--bands-only: give --bands, the `scaledl validate` record whose bands are swept")
    banded = [c for c in args.constants if args.band_of[c] == VALIDATED]
    if not banded:
        raise UserError(
            f"--bands-only: {args.bands} validates none of {', '.join(args.constants)} on this platform: "
            "nothing to sweep (drop --bands-only to sweep the assumed factors)"
        )
    args.constants = banded


def sweep_factors(text: str) -> list[float]:
    """--factors without 1 (the base point is always simulated)."""
    values = [f for f in regime.factors(text, "--factors") if f != 1]
    if not values:
        raise UserError(f"--factors {text}: give factors other than 1, such as 0.5,2")
    return values


def whole_runs_of(run_paths: list[str], algorithm: str) -> dict[int, list[str]]:
    """{seed: `scaledl train` flags} of `algorithm`'s runs: each seed's whole run, with its own settings."""
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.runs import expand_runs, read_run

    found = {}
    for run in (read_run(p) for p in expand_runs(run_paths)):
        if run.get("algorithm.key") == algorithm:
            arguments = run.record.get("arguments", {})
            found[int(run.get("arguments.seed"))] = to_argv(
                {k: v for k, v in arguments.items() if k in WHOLE_RUN_SETTINGS}
            )
    if not found:
        raise UserError(f"--runs: no run of {algorithm} among them (give both sides' runs on the base platform)")
    return found


def time_to_target(record) -> float:
    value = record.record.get("time_to_target_s")
    return math.inf if value is None else float(value)


def build_sweep(args) -> tuple[list[dict], dict[str, list[float]]]:
    """Every point's row (points.csv) and each constant's values on the base platform."""
    from scaledl.sim.platform import resolve, varied  # lazy: the simulator's package imports torch

    a, b = args.claim
    base = resolve(args.platform_file)
    before = {c: varied(base, c, 1.0)[1] for c in args.constants}
    points = [(BASE, 1.0)] + [(c, f) for c in args.constants if any(before[c]) for f in args.factors_of[c]]
    if args.whole_runs:
        runs = {side: whole_runs_of(args.runs, side) for side in (a, b)}
    else:
        sides = {side: regime.read_side(args.runs, side) for side in (a, b)}
        runs = {side: sides[side][0] for side in (a, b)}
    seeds = sorted(set(runs[a]) & set(runs[b]))
    if not seeds:
        raise UserError(f"--runs: no seed has runs of both {a} and {b}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="scaledl-sensitivity-") as tmp:
        tmp = Path(tmp)
        files = {(BASE, 1.0): base}
        for constant, factor in points[1:]:
            files[constant, factor] = tmp / f"{constant}-{factor:g}.xml"
            write_text(files[constant, factor], varied(base, constant, factor)[0])
        if args.whole_runs:
            tasks = [(point, side, seed) for point in points for side in (a, b) for seed in seeds]
        else:
            tasks = [(point, side, None) for point in points for side in (a, b)]

        def simulate(task) -> float:
            (constant, factor), side, seed = task
            out = tmp / f"{side}-{constant}-{factor:g}-s{seed}"
            if seed is None:
                return regime.seconds_per_step(files[constant, factor], side, sides[side][1], args, out)
            flags = [*runs[side][seed], *(["--max-steps", str(args.max_steps)] if args.max_steps else [])]
            return time_to_target(regime.simulate(files[constant, factor], side, flags, args, out))

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            found = dict(zip(tasks, pool.map(simulate, tasks)))
    for point in points:
        if args.whole_runs:
            times = {side: {s: found[point, side, s] for s in seeds} for side in (a, b)}
            measured = {f"{side}_median_time_to_target_s": statistics.median(times[side].values()) for side in (a, b)}
        else:
            per_step = {side: found[point, side, None] for side in (a, b)}
            times = {side: {s: runs[side][s] * per_step[side] for s in seeds} for side in (a, b)}
            measured = {f"{side}_s_per_step": per_step[side] for side in (a, b)}
        ratios = [regime.time_ratio(times[a][s], times[b][s]) for s in seeds]
        rows.append(
            {
                "constant": point[0],
                "factor": point[1],
                **measured,
                "median_ratio": statistics.median(ratios),
                "min_ratio": min(ratios),
                "max_ratio": max(ratios),
                "seeds": len(seeds),
                "verdict": regime.unanimous_verdict(ratios),
            }
        )
    return rows, before


def constant_rows(points: list[dict], before: Mapping[str, list[float]], args) -> list[dict]:
    """sensitivity.csv: one row per constant, its verdict at each factor and the conclusion."""
    from scaledl.sim.platform import CONSTANTS  # lazy: the simulator's package imports torch

    a, b = args.claim
    base = next(p["verdict"] for p in points if p["constant"] == BASE)
    out = []
    for constant in args.constants:
        verdicts = {p["factor"]: p["verdict"] for p in points if p["constant"] == constant}
        unit = CONSTANTS[constant].unit
        swept = any(before[constant])
        out.append(
            {
                "faster": a,
                "slower": b,
                "platform": Path(args.platform_file).stem,
                "workers": args.workers,
                "mode": "whole runs" if args.whole_runs else "steps from the runs",
                "constant": constant,
                "base_value": values_text(before[constant], unit) if swept else "",
                "base_verdict": base,
                **{f"x{f:g}": verdicts.get(f, "") for f in all_factors(args)},
                "flips_at": ";".join(f"{f:g}" for f in flips(base, verdicts)) if swept else "",
                "span": span_text(args.factors_of[constant]),
                "band": args.band_of[constant],
                "conclusion": conclusion(constant, base, verdicts, before[constant], unit),
            }
        )
    return out


def write_outputs(points: list[dict], constants: list[dict], args) -> None:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    import pandas as pd

    from scaledl.sim.platform import CONSTANTS  # lazy: as above

    a, b = args.claim
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("points.csv", points), ("sensitivity.csv", constants)):
        with atomic_path(out / name) as tmp:
            pd.DataFrame(rows).to_csv(tmp, index=False)
    base = next(p for p in points if p["constant"] == BASE)
    cells = {(p["constant"], p["factor"]): f"{p['verdict']} ({p['median_ratio']:.3g}×)" for p in points}
    how = (
        f"every seed's whole training simulated at every point (to its target{' or ' if args.max_steps else ''}"
        f"{f'{args.max_steps} steps' if args.max_steps else ''})"
        if args.whole_runs
        else f"steps to target from the runs, seconds per step simulated ({args.steps} steps a side)"
    )
    lines = [
        f'# How sensitive is "{a} is faster than {b}"? Simulated on {Path(args.platform_file).stem}, '
        f"P = {args.workers}",
        "",
        f"At the base platform: {base['verdict']} ({base['median_ratio']:.3g}×, the median over {base['seeds']} "
        f"seed(s) of time to target {a} / {b}; {how}). Each constant varied alone; each cell the verdict and "
        "the median ratio.",
        "",
        "| constant | what | base value | range | "
        + " | ".join(f"×{f:g}" for f in all_factors(args))
        + " | conclusion |",
        "|" + "---|" * (len(all_factors(args)) + 5),
    ]
    for row in constants:
        c = row["constant"]
        verdicts = [cells.get((c, f), "—") for f in all_factors(args)]
        lines.append(
            f"| {c} | {CONSTANTS[c].what} | {row['base_value'] or '—'} | {row['band']} {row['span']} | "
            + " | ".join(verdicts)
            + f" | {row['conclusion']} |"
        )
    lines += ["", f"Beside the claim: {claim_text(constants)}."]
    write_text(out / "sensitivity.md", "\n".join(lines) + "\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform-file", required=True, help="the base platform: a shipped name or a file")
    parser.add_argument(
        "--claim", required=True, type=regime.algorithm_pair, metavar="FASTER:SLOWER", help="the claimed faster side"
    )
    parser.add_argument("--workers", type=int, required=True, help="P")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--runs", nargs="+", required=True, help="both sides' runs on the base platform (run.json)")
    parser.add_argument(
        "--constants",
        type=constant_names,
        default="efficiency,op_overhead,memory_bw,pcie_bw,network_bw,noise",
        help="the platform constants to vary, one at a time (default all: %(default)s)",
    )
    parser.add_argument(
        "--factors", type=sweep_factors, default="0.5,2",
        help="each constant's factors (default %(default)s); with --bands, those of a constant no anchor bounds",
    )  # fmt: skip
    parser.add_argument(
        "--bands", type=Path, metavar="VALIDATE_JSON",
        help="a `scaledl validate --out-json` record: sweep each constant it bounds over the band its held-out "
        "rows on this platform measured, not over --factors",
    )  # fmt: skip
    parser.add_argument(
        "--bands-only", action="store_true",
        help="with --bands: sweep only the constants a band bounds, over its ends (the rest are not swept): what "
        "bounds the cost of an asynchronous pair's whole runs",
    )  # fmt: skip
    parser.add_argument(
        "--steps", type=int, default=30, help="simulated steps per point and side (default %(default)s)"
    )
    parser.add_argument(
        "--whole-runs",
        action="store_true",
        help="simulate every seed's whole training at every point, with its run's settings (needed for an "
        "asynchronous side; a training run per point, seed and side)",
    )
    parser.add_argument("--max-steps", type=int, help="with --whole-runs: each run's step limit (default its run's)")
    parser.add_argument(
        "--train-args", default="", help="further `scaledl train` options, one string (after the runs' own settings)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="simulations at once (default %(default)s)")
    parser.add_argument("--out-dir", type=Path, required=True)


def run(args: argparse.Namespace) -> int:
    if not args.whole_runs:
        for key in regime.timing_dependent(args.claim):
            raise UserError(
                f"--claim {':'.join(args.claim)}: {key}'s numerics depend on the timing, so its steps to target "
                "change with the platform; give --whole-runs to simulate every seed's whole training at every point"
            )
    if args.max_steps is not None and not args.whole_runs:
        raise UserError("--max-steps: only with --whole-runs (otherwise each side runs --steps steps)")
    args.factors_of, args.band_of = sweep_ranges(args)
    if args.bands_only:
        keep_banded(args)
    points, before = build_sweep(args)
    constants = constant_rows(points, before, args)
    write_outputs(points, constants, args)
    print(f"sensitivity: {claim_text(constants)}; {args.out_dir}/sensitivity.md")
    return 0
