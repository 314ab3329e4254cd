"""A regime map: where a claim "A is faster than B" holds, over network bandwidth × device speed, simulated.

    scaledl regime-map --platform-file k80x8 --claim sync_easgd3:easgd --workers 8 --data data/hdf5/mnist.h5 \\
        --model lenet --runs RUN_JSON... --out-dir results/NAME/regime/sync_easgd3-vs-easgd

A claim is judged on time to target = steps to target × seconds per step. For
a pair whose numerics do not depend on timing (synchronous algorithms and the
round robin: the same seed gives the same weights on any platform, bitwise),
the steps to target of each seed are those of the given runs (`--runs`: the
pair's runs on the base platform, each seed of each side), and only the
seconds per step change with the platform: each grid point scales the base
platform (scaledl.sim.platform.scaled: every link's bandwidth by the
column's factor, every device's speed by the row's) and simulates each side
for `--steps` steps with the settings its runs had (batch size, η, τ, message,
...: whatever shapes a step's work, from the lowest seed's run.json). A pair
whose numerics follow the timing (the
asynchronous algorithms: staleness) is refused, since its steps to target
would need a whole training run per point.

Per point and seed the ratio T_A / T_B: the claim holds where every seed's
ratio is below 1, is reversed where every one is above, and is inconclusive
otherwise; a side that never reached its target counts as infinitely slow.
Outputs: map.csv (every point, side and seed), map.md and map.png (the median
ratio as colour, the verdict in words, the base platform framed).
"""

from __future__ import annotations

import argparse
import math
import shlex
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from scaledl.algorithms import ALGORITHMS
from scaledl.atomic import atomic_path, write_text
from scaledl.config import to_argv
from scaledl.errors import UserError
from scaledl.grid.regime import TIMING_FREE_PATTERNS

# pandas, the simulator's platforms (torch) and the grid (scipy) are imported where they are used, so that
# `scaledl --help` and `scaledl regime-map --help` do without them.

HELP = "map where a claim holds over network bandwidth × device speed, by simulation (needs SimGrid)"


def factors(text: str, flag: str) -> list[float]:
    try:
        values = sorted({float(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UserError(f"{flag} {text}: expected comma-separated positive numbers such as 0.25,1,4") from None
    if not values or values[0] <= 0:
        raise UserError(f"{flag} {text}: expected comma-separated positive numbers such as 0.25,1,4")
    return values


def algorithm_pair(text: str, flag: str = "--claim") -> tuple[str, str]:
    """FASTER:SLOWER, two algorithm keys."""
    a, _, b = text.partition(":")
    for key in (a, b):
        if key not in ALGORITHMS:
            raise UserError(
                f"{flag} {text}: {key!r} is not an algorithm (expected FASTER:SLOWER, e.g. sync_easgd3:easgd)"
            )
    return a, b


def timing_dependent(pair: tuple[str, str]) -> list[str]:
    """The sides whose numerics depend on the timing: their steps to target change with the platform."""
    return [key for key in pair if ALGORITHMS[key].pattern not in TIMING_FREE_PATTERNS]


def claim_pair(text: str) -> tuple[str, str]:
    pair = algorithm_pair(text)
    for key in timing_dependent(pair):
        raise UserError(
            f"--claim {text}: {key}'s numerics depend on the timing (pattern {ALGORITHMS[key].pattern}), so its "
            "steps to target would need a whole run per point; map a synchronous or round-robin pair"
        )
    return pair


# The `scaledl train` settings that shape a step's work: a side is simulated with those of its own runs.
STEP_SETTINGS = (
    "model_from", "batch_size", "lr", "momentum", "rho", "beta", "weight_decay", "momentum_at", "nesterov",
    "message", "bucket_mb", "center_on", "overlap", "tau", "inner", "worker_rule", "outer", "outer_lr",
    "outer_momentum", "exchange", "compress", "fast_memory_gb", "center_window", "wait_probe", "straggler",
    "device_sync", "eval_batch_size",
)  # fmt: skip


def read_side(run_paths: list[str], algorithm: str) -> tuple[dict[int, float], list[str]]:
    """{seed: steps to target} of `algorithm`'s runs (inf for a run that never reached its target), and the
    step-shaping settings of its lowest seed's run as `scaledl train` flags."""
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.runs import expand_runs, read_run

    found, settings = {}, {}
    for run in (read_run(p) for p in expand_runs(run_paths)):
        if run.get("algorithm.key") != algorithm:
            continue
        step = run.record.get("evaluation", {}).get("target_step")
        seed = int(run.get("arguments.seed"))
        found[seed] = math.inf if step is None else float(step)
        settings[seed] = {k: v for k, v in run.record.get("arguments", {}).items() if k in STEP_SETTINGS}
    if not found:
        raise UserError(f"--runs: no run of {algorithm} among them (give both sides' runs on the base platform)")
    return found, to_argv(settings[min(settings)])


def time_ratio(time_a: float, time_b: float) -> float:
    """T_A / T_B, a side that never reached its target infinitely slow; nan where neither reached it (or both
    at step 0): then the seed cannot decide."""
    if time_a == time_b and (math.isinf(time_a) or time_a == 0):
        return math.nan
    return math.inf if time_b == 0 else time_a / time_b


def unanimous_verdict(ratios: list[float]) -> str:
    """A cell's verdict on T_A / T_B by seed: holds (reversed) only when every seed's ratio is below (above) 1."""
    if all(r < 1 for r in ratios):
        return "holds"
    if all(r > 1 for r in ratios):
        return "reversed"
    return "inconclusive"


def simulate(platform_xml: Path, algorithm: str, flags: list[str], args, out: Path):
    """The run record (scaledl.report.runs.Run) of `algorithm` simulated on the platform file with `flags`
    (then --train-args), at --workers on --data with --model."""
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.runs import read_run

    ranks = args.workers + (1 if ALGORITHMS[algorithm].needs_master else 0)
    cmd = [
        sys.executable, "-m", "scaledl", "simulate", "--platform-file", str(platform_xml), "--ranks", str(ranks),
        "--data", str(args.data), "--model", args.model, "--algorithm", algorithm, "--out-dir", str(out),
        *flags, *shlex.split(args.train_args),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"the simulation of {algorithm} on {platform_xml.name} failed: {last}")
    return read_run(out)


def seconds_per_step(platform_xml: Path, algorithm: str, flags: list[str], args, out: Path) -> float:
    """Simulated steady-state seconds per step of `algorithm` with its runs' settings on the platform file."""
    steps = ["--max-steps", str(args.steps), "--eval-every", str(args.steps), "--seed", "0"]
    return float(simulate(platform_xml, algorithm, [*flags, *steps], args, out).get("seconds_per_step"))


def build_map(args) -> list[dict]:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.sim.platform import resolve, scaled

    a, b = args.claim
    sides = {side: read_side(args.runs, side) for side in (a, b)}
    steps = {side: sides[side][0] for side in (a, b)}
    seeds = sorted(set(steps[a]) & set(steps[b]))
    if not seeds:
        raise UserError(f"--runs: no seed has runs of both {a} and {b}")
    base = resolve(args.platform_file)
    points = [(bw, sp) for sp in args.speed_factors for bw in args.bandwidth_factors]
    rows = []
    with tempfile.TemporaryDirectory(prefix="scaledl-regime-") as tmp:
        tmp = Path(tmp)

        def simulate(point):
            bw, sp = point
            xml = tmp / f"bw{bw:g}-sp{sp:g}.xml"
            write_text(xml, scaled(base, bw, sp))
            return {
                side: seconds_per_step(xml, side, sides[side][1], args, tmp / f"{side}-bw{bw:g}-sp{sp:g}")
                for side in (a, b)
            }

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for (bw, sp), sps in zip(points, pool.map(simulate, points)):
                ratios = [time_ratio(steps[a][s] * sps[a], steps[b][s] * sps[b]) for s in seeds]
                rows.append(
                    {
                        "bandwidth_factor": bw,
                        "speed_factor": sp,
                        f"{a}_s_per_step": sps[a],
                        f"{b}_s_per_step": sps[b],
                        "median_ratio": statistics.median(ratios),
                        "min_ratio": min(ratios),
                        "max_ratio": max(ratios),
                        "seeds": len(seeds),
                        "verdict": unanimous_verdict(ratios),
                    }
                )
    return rows


def write_outputs(rows: list[dict], args) -> None:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    import pandas as pd

    a, b = args.claim
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    with atomic_path(out / "map.csv") as tmp:
        table.to_csv(tmp, index=False)
    grid = table.pivot(index="speed_factor", columns="bandwidth_factor", values="verdict")
    ratio = table.pivot(index="speed_factor", columns="bandwidth_factor", values="median_ratio")
    header = "| device speed × \\ bandwidth × | " + " | ".join(f"{c:g}" for c in grid.columns) + " |"
    lines = [
        f"# Regime map: {a} faster than {b}?",
        "",
        f"Simulated on {Path(args.platform_file).stem} scaled (links × column, devices × row), P = {args.workers}; "
        f"each cell: the verdict over {rows[0]['seeds']} seed(s) and the median of time to target {a} / {b}.",
        "",
        header,
        "|" + "---|" * (len(grid.columns) + 1),
    ]
    for sp in grid.index:
        cells = [f"{grid.loc[sp, c]} ({ratio.loc[sp, c]:.3g}×)" for c in grid.columns]
        lines.append(f"| {sp:g} | " + " | ".join(cells) + " |")
    write_text(out / "map.md", "\n".join(lines) + "\n")
    plot(ratio, grid, out / "map.png", a, b, Path(args.platform_file).stem)


def plot(ratio, grid, path: Path, a: str, b: str, platform: str) -> None:
    import matplotlib  # lazy: the report's heavy libraries, for this subcommand only

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above
    from matplotlib.colors import LogNorm  # lazy: as above

    fig, ax = plt.subplots(figsize=(1.3 * len(ratio.columns) + 2.5, 1.0 * len(ratio.index) + 1.8))
    values = ratio.to_numpy(dtype=float)
    span = max((abs(math.log10(v)) for v in values.flat if v > 0 and math.isfinite(v)), default=0.0) or 1.0
    image = ax.imshow(values, cmap="RdBu_r", norm=LogNorm(10**-span, 10**span), origin="lower", aspect="auto")
    ax.set_xticks(range(len(ratio.columns)), [f"{c:g}×" for c in ratio.columns])
    ax.set_yticks(range(len(ratio.index)), [f"{r:g}×" for r in ratio.index])
    ax.set_xlabel("network bandwidth (× the platform's)")
    ax.set_ylabel("device speed (× the platform's)")
    for i, sp in enumerate(ratio.index):
        for j, bw in enumerate(ratio.columns):
            dark = abs(math.log10(ratio.loc[sp, bw])) > span / 2 if ratio.loc[sp, bw] > 0 else False
            text = f"{grid.loc[sp, bw]}\n{ratio.loc[sp, bw]:.2g}×"
            ax.text(j, i, text, ha="center", va="center", fontsize=7, color="w" if dark else "k")
            if sp == 1 and bw == 1:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2, color="k"))
    fig.colorbar(image, ax=ax, label=f"time to target, {a} / {b}")
    ax.set_title(f"Does {a} beat {b}? (simulated on {platform})", fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform-file", required=True, help="the base platform: a shipped name or a file")
    parser.add_argument("--claim", required=True, type=claim_pair, metavar="FASTER:SLOWER")
    parser.add_argument("--workers", type=int, required=True, help="P")
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--runs", nargs="+", required=True, help="both sides' runs on the base platform (run.json)")
    parser.add_argument("--bandwidth-factors", type=lambda t: factors(t, "--bandwidth-factors"), default="0.1,1,10")
    parser.add_argument("--speed-factors", type=lambda t: factors(t, "--speed-factors"), default="0.1,1,10")
    parser.add_argument(
        "--steps", type=int, default=30, help="simulated steps per point and side (default %(default)s)"
    )
    parser.add_argument(
        "--train-args", default="", help="further `scaledl train` options, one string (after the runs' own settings)"
    )
    parser.add_argument("--jobs", type=int, default=2, help="simulations at once (default %(default)s)")
    parser.add_argument("--out-dir", type=Path, required=True)


def run(args: argparse.Namespace) -> int:
    rows = build_map(args)
    write_outputs(rows, args)
    holds = sum(r["verdict"] == "holds" for r in rows)
    print(f"regime map: the claim holds at {holds} of {len(rows)} points; {args.out_dir}/map.png")
    return 0
