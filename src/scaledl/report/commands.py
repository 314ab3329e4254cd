"""The report's subcommands: aggregate, plot, comm-model, claims, figures, tune, compare, timeline.

Each is a `Subcommand` with what scaledl.cli needs of one: its one-line
`HELP`, `add_arguments(parser)` and `run(args)`. Here are the arguments,
their checks and the lines printed; the numbers are in the modules named
in each help text, which hold no argparse.

    scaledl aggregate RUN... --out results/NAME/tables/summary.csv [--table summary|scaling|averaging]
    scaledl plot RUN... --out results/NAME/plots/accuracy_vs_time.png
    scaledl comm-model --netbench netbench.json RUN_JSON... --out results/NAME/tables/comm_model.csv
    scaledl claims --summary results/NAME/tables/summary.csv --device-of gpu=gpu --device-of knl_chip=knl \\
        --out-md results/NAME/tables/claims.md --out-csv results/NAME/tables/claims.csv
    scaledl figures --runs RUN_JSON... [--netbench [PLATFORM=]JSON] --out-dir DIR [--metrics-out CSV]
    scaledl tune TRIAL_RUN_JSON... --out-csv results/NAME/tune/chosen.csv --out-md results/NAME/tune/chosen.md
    scaledl compare A B --out comparison.csv     (A, B: summary CSVs or results folders)
    scaledl timeline RUN_DIR/timeline.h5 [--chrome trace.json] [--steps FIRST:LAST]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scaledl.errors import UserError
from scaledl.grid import tune as grid_tune
from scaledl.net.alphabeta import NETWORKS, PAPER_WEAK_SCALING
from scaledl.report.catalogue import FIGURE_NAMES
from scaledl.report.plots import FIGURE_FORMATS, X_COLUMNS, Y_COLUMNS, plot_runs
from scaledl.report.stats import plural  # numpy only: light enough for --help

# The modules that compute (pandas, scipy, matplotlib, and torch through the timeline's reader) are imported
# in the functions that use them: `scaledl --help` and a subcommand's --help import only what their text needs.


@dataclass(frozen=True)
class Subcommand:
    """The three names scaledl.cli reads of a subcommand."""

    HELP: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def markdown_beside(csv: Path, given: Path | None) -> Path | None:
    """--markdown: the CSV's path with the suffix .md unless given, None for 'none'."""
    markdown = given if given is not None else csv.with_suffix(".md")
    return None if str(markdown).lower() == "none" else markdown


def add_markdown_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--markdown", type=Path, metavar="MD", help=f"{what} (default: CSV with the suffix .md; 'none' to skip)"
    )


# ---------------------------------------------------------------- aggregate


def aggregate_arguments(parser: argparse.ArgumentParser) -> None:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.tables import TABLES

    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run.json files, run directories (results/NAME/runs/.../s0) or folders above them (results/NAME)",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="CSV",
        help="table to write (e.g. results/NAME/tables/summary.csv)",
    )
    parser.add_argument(
        "--table",
        choices=tuple(TABLES),
        default="summary",
        help="; ".join(f"{name}: {table.what}" for name, table in TABLES.items()),
    )
    add_markdown_argument(parser, "markdown copy of the table")


def aggregate_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.runs import expand_runs
    from scaledl.report.tables import TABLES, write_table

    if args.out.suffix != ".csv":
        raise UserError(f"--out {args.out}: the {args.table} table must be a .csv file")
    markdown = markdown_beside(args.out, args.markdown)
    table = TABLES[args.table]
    frame, notes = table.build(expand_runs(args.runs))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    rows = (
        plural(len(frame), "run")
        if table.row_per_run
        else plural(len(frame), "row") + f" from {plural(len(args.runs), 'run')}"
    )
    write_table(frame, args.out, markdown)
    print(f"wrote {args.out}" + (f" and {markdown}" if markdown else "") + f" ({rows})")
    return 0


aggregate = Subcommand("collect run.json files into a summary table", aggregate_arguments, aggregate_run)


# --------------------------------------------------------------------- plot


def plot_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="metrics.csv files or run directories; labels come from the run.json beside each",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="FIGURE",
        help=f"figure to write ({', '.join(FIGURE_FORMATS)}), e.g. results/NAME/plots/accuracy_vs_time.png",
    )
    parser.add_argument(
        "--x",
        default="wall_s",
        choices=list(X_COLUMNS),
        help="horizontal axis (default: wall_s, wall-clock seconds since training began; train_s excludes evaluation)",
    )
    parser.add_argument(
        "--y", default="test_accuracy", choices=list(Y_COLUMNS), help="vertical axis (default: test_accuracy)"
    )
    parser.add_argument("--title", help="figure title (default: none)")


def plot_run(args: argparse.Namespace) -> int:

    if args.out.suffix.lstrip(".") not in FIGURE_FORMATS:
        raise UserError(f"--out {args.out}: the figure must end in one of .{', .'.join(FIGURE_FORMATS)}")
    plot_runs(args.runs, args.out, x=args.x, y=args.y, title=args.title)
    print(f"wrote {args.out} ({plural(len(dict.fromkeys(args.runs)), 'run')})")
    return 0


plot = Subcommand("plot test accuracy (or another --y) against wall time (or another --x)", plot_arguments, plot_run)


# --------------------------------------------------------------- comm-model


def comm_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run.json files or run directories")
    parser.add_argument("--netbench", required=True, type=Path, metavar="JSON", help="α, β, γ from scaledl netbench")
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="CSV",
        help="per-run table to write (e.g. results/NAME/tables/comm_model.csv)",
    )
    add_markdown_argument(parser, "markdown report")
    parser.add_argument(
        "--scaling-out",
        type=Path,
        metavar="CSV",
        help="weak-scaling extrapolation table (default: <out>_scaling.csv beside --out)",
    )
    parser.add_argument(
        "--networks",
        default="fdr_ib",
        metavar="LIST",
        help=f"networks besides the measured one for the extrapolation: comma list of "
        f"{', '.join(NETWORKS)}, or 'none' (default %(default)s; values from the paper's Table 2)",
    )
    parser.add_argument(
        "--max-workers", type=int, default=4096, help="largest power of two to extrapolate to (default %(default)s)"
    )


def comm_model_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.comm_model import (
        COMM_MODEL_COLUMNS,
        EXTRAPOLATION_COLUMNS,
        as_frame,
        comm_model_markdown,
        comm_model_rows,
        extrapolation_rows,
        read_netbench,
    )
    from scaledl.report.tables import write_table  # lazy, as above

    if args.out.suffix != ".csv":
        raise UserError(f"--out {args.out}: the table must be a .csv file")
    if args.max_workers < 1:
        raise UserError(f"--max-workers must be >= 1, got {args.max_workers}")
    names = (
        []
        if args.networks.strip().lower() == "none"
        else [name.strip() for name in args.networks.split(",") if name.strip()]
    )
    unknown = [s for s in names if s not in NETWORKS]
    if unknown:
        raise UserError(f"--networks: unknown network {unknown[0]!r}; choose from {', '.join(NETWORKS)} or 'none'")
    net, record = read_netbench(args.netbench)
    networks = {"measured": net, **{name: NETWORKS[name] for name in names}}
    rows = comm_model_rows(args.runs, net)
    workers = [2**k for k in range(int(math.log2(args.max_workers)) + 1)]
    if PAPER_WEAK_SCALING["cores"] not in workers:
        workers.append(PAPER_WEAK_SCALING["cores"])
    extrapolation = extrapolation_rows(rows, networks, workers)

    markdown = markdown_beside(args.out, args.markdown)
    scaling_out = args.scaling_out or args.out.with_name(args.out.stem + "_scaling.csv")
    write_table(as_frame(rows, COMM_MODEL_COLUMNS), args.out)
    write_table(
        as_frame(extrapolation, EXTRAPOLATION_COLUMNS),
        scaling_out,
        markdown,
        markdown=comm_model_markdown(rows, extrapolation, net, args.netbench, record) if markdown else None,
    )
    print(f"wrote {args.out}, {scaling_out}" + (f" and {markdown}" if markdown else "") + f" ({len(rows)} run(s))")
    return 0


comm_model = Subcommand(
    "α-β predictions of each run's communication beside the measured times", comm_model_arguments, comm_model_run
)


# ------------------------------------------------------------------- claims


def claims_arguments(parser: argparse.ArgumentParser) -> None:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.claims import DEVICE_KINDS

    parser.add_argument(
        "--summary",
        required=True,
        type=Path,
        metavar="CSV",
        help="the summary table of scaledl aggregate (results/NAME/tables/summary.csv)",
    )
    parser.add_argument(
        "--netbench",
        action="append",
        default=[],
        metavar="[PLATFORM=]JSON",
        help="a scaledl netbench file: adds the α-β model's weak-scaling efficiency; PLATFORM= gives a platform "
        "its own network (repeat per platform; a simulated platform's comes from netbench --platform-file)",
    )
    parser.add_argument(
        "--device-of",
        action="append",
        default=[],
        metavar="PLATFORM=DEVICE",
        help=f"the hardware a platform ran on ({', '.join(DEVICE_KINDS)}); repeat per platform. "
        "Claims that need a GPU or a KNL are not comparable on platforms not named here",
    )
    parser.add_argument(
        "--claims", type=Path, metavar="YAML", help="claims file to check instead of the packaged claims.yaml"
    )
    parser.add_argument(
        "--sensitivity",
        action="append",
        default=[],
        type=Path,
        metavar="CSV",
        help="a scaledl sensitivity sweep's sensitivity.csv: shown beside the simulated verdict it swept "
        "(repeat per sweep)",
    )
    parser.add_argument(
        "--chosen", type=Path, metavar="CSV", help="the tune stage's chosen.csv: each tuned side's choice beside it"
    )
    parser.add_argument("--out-md", required=True, type=Path, metavar="MD", help="markdown table to write")
    parser.add_argument("--out-csv", required=True, type=Path, metavar="CSV", help="CSV table to write")


def parse_devices(pairs: list[str]) -> dict[str, str]:
    """{platform: device} from PLATFORM=DEVICE strings."""
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.claims import DEVICE_KINDS, normalise_device

    devices = {}
    for pair in pairs:
        platform, sep, device = pair.partition("=")
        normal = normalise_device(device) if sep and platform else None
        if normal is None:
            raise UserError(
                f"--device-of {pair}: expected PLATFORM=DEVICE with DEVICE one of {', '.join(DEVICE_KINDS)}"
            )
        devices[platform] = normal
    return devices


def read_chosen(path: Path | None):
    """The tune stage's chosen.csv (None without one), by its one reader (scaledl.grid.tune.read_choices), so each
    tuned side says which choice decided it."""
    return grid_tune.read_choices(path, "--chosen") if path is not None else None


def claims_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.claims import (
        CLAIM_COLUMNS,
        Context,
        claims_page,
        default_claims_text,
        evaluate,
        load_claims,
        read_sensitivity,
        read_summary,
        with_choices,
    )
    from scaledl.report.tables import write_table  # lazy, as above

    for flag, path in (("--out-md", args.out_md), ("--out-csv", args.out_csv)):
        if path.suffix != f".{flag[6:]}":
            raise UserError(f"{flag} {path}: must end in .{flag[6:]}")
    devices = parse_devices(args.device_of)
    claims = load_claims(args.claims)
    networks = parse_netbench(args.netbench)
    results = with_choices(read_summary(args.summary), read_chosen(args.chosen))
    sensitivity = read_sensitivity(args.sensitivity)
    context = Context(devices=devices, network=networks.pop("*", None), networks=networks, sensitivity=sensitivity)
    table = evaluate(results, claims, context, where=str(args.summary))
    text, where = (args.claims.read_text(), str(args.claims)) if args.claims else (default_claims_text(), "claims.yaml")
    page = claims_page(table, results, args.summary, text, where)
    write_table(table[CLAIM_COLUMNS], args.out_csv, args.out_md, markdown=page)
    print(f"wrote {args.out_md} and {args.out_csv} ({plural(len(claims), 'claim')}, {plural(len(table), 'row')})")
    return 0


claims = Subcommand(
    "check the paper's claims against the summary table: our numbers and a verdict per claim",
    claims_arguments,
    claims_run,
)


# ------------------------------------------------------------------ figures


def figures_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs",
        nargs="+",
        required=True,
        metavar="RUN",
        help="run.json files or run directories; the metrics.csv beside each is read too",
    )
    parser.add_argument(
        "--out-dir",
        required=True,
        type=Path,
        metavar="DIR",
        help=f"folder for {', '.join(f'{name}.png' for name in FIGURE_NAMES)}",
    )
    parser.add_argument(
        "--netbench",
        action="append",
        default=[],
        metavar="[PLATFORM=]JSON",
        help="a scaledl netbench file: adds the α-β model's efficiency to the scaling figure, "
        "for runs on PLATFORM (every platform without PLATFORM=); repeat per platform",
    )
    parser.add_argument(
        "--metrics-out",
        type=Path,
        metavar="CSV",
        help="also write every metrics.csv row with its run's dataset, model, algorithm, "
        "platform, workers and seed (one long table)",
    )


def parse_netbench(values: list[str]) -> dict:
    """{platform or "*": Network} from the --netbench values."""
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.comm_model import read_netbench

    networks = {}
    for value in values:
        platform, sep, path = value.partition("=")
        key, path = (platform, path) if sep else ("*", value)
        if key in networks:
            raise UserError(
                f"--netbench {value}: a second network for {'every platform' if key == '*' else key}; "
                "give one file per platform"
            )
        networks[key] = read_netbench(path)[0]
    return networks


def figures_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.figures import FIGURES, Inputs, load_runs, write_figures, write_metrics_long

    if args.metrics_out is not None and args.metrics_out.suffix != ".csv":
        raise UserError(f"--metrics-out {args.metrics_out}: the table must be a .csv file")
    networks = parse_netbench(args.netbench)
    runs = load_runs(args.runs)
    inputs = Inputs(runs, networks)
    skipped = write_figures(inputs, args.out_dir)
    for note in inputs.notes:
        print(f"note: {note}", file=sys.stderr)
    if skipped:
        print(f"note: not run in this config, placeholder written: {'; '.join(skipped)}", file=sys.stderr)
    written = f"{len(FIGURES) - len(skipped)} of {len(FIGURES)} figures in {args.out_dir}"
    if args.metrics_out is not None:
        rows = write_metrics_long(runs, args.metrics_out)
        written += f" and {args.metrics_out} ({plural(rows, 'row')})"
    print(f"wrote {written} from {plural(len(runs), 'run')}")
    return 0


figures = Subcommand(
    "draw the report's figures (accuracy vs time, time breakdown, scaling, chip partitioning)",
    figures_arguments,
    figures_run,
)


# ---------------------------------------------------------------- tune


def tune_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trials", nargs="+", type=Path, metavar="RUN_JSON", help="every trial's run.json")
    parser.add_argument("--protocol", help="the tune stage as JSON (scaledl.grid.tune.protocol), for the report")
    parser.add_argument("--out-csv", type=Path, help="chosen.csv: one row per algorithm and setting")
    parser.add_argument("--out-md", type=Path, help="chosen.md: the protocol, the choices, every trial")
    parser.add_argument(
        "--out-round", type=Path, help="a round's result instead: the grid it ran, its edges and the next grid"
    )
    parser.add_argument(
        "--out-confirm", type=Path, help="the points each cell confirms on more seeds instead (its best and runner-up)"
    )


def tune_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report import tuning
    from scaledl.report.tables import write_table

    if not (args.out_round or args.out_confirm or (args.out_csv and args.out_md)):
        raise UserError(
            "scaledl tune: give --out-csv and --out-md (the choice), --out-round (a round) or --out-confirm "
            "(the points to confirm)"
        )
    protocol = tuning.read_protocol(args.protocol)
    trials = tuning.trial_rows(args.trials)
    if args.out_confirm:
        named = tuning.points_to_confirm(trials, protocol)
        grid_tune.write_confirm(str(args.out_confirm), named)
        count = sum(map(len, named.values()))
        print(f"wrote {args.out_confirm}: {plural(count, 'point')} of {plural(len(named), 'cell')} to confirm")
        return 0
    chosen = tuning.choose(trials, protocol)
    if args.out_round:
        grid = sorted({grid_tune.value(lr) for lr in trials["lr"]})
        edges = tuning.edges(chosen)
        following = grid_tune.next_grid(protocol, grid, edges) if protocol else None
        refine = tuning.refine_points(chosen, protocol) if following is None else {}
        grid_tune.write_round(str(args.out_round), grid, edges, following, refine)
        print(
            f"wrote {args.out_round}: {plural(len(chosen), 'cell')}, edges {', '.join(edges) or 'none'}; "
            + (f"next round widens the grid to {following[0]:g}–{following[-1]:g}" if following else "the last round")
            + (f"; each cell's choice refined by η × {protocol['lr_grid']['factor']:g}^±½" if refine else "")
        )
        return 0
    write_table(
        tuning.with_aliases(chosen, protocol)[tuning.CHOSEN_COLUMNS],
        args.out_csv,
        args.out_md,
        markdown=tuning.chosen_markdown(chosen, trials, protocol),
    )
    missed = int((chosen["points_reached"] == 0).sum())
    print(
        f"wrote {args.out_csv} and {args.out_md}: {plural(len(chosen), 'choice')} from "
        f"{plural(len(trials), 'trial run')}" + (f"; {missed} with no point at the target" if missed else "")
    )
    return 0


tune = Subcommand("choose each algorithm's best tune trial (time to the validation target)", tune_arguments, tune_run)


# ------------------------------------------------------------------ compare


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    for side in ("a", "b"):
        parser.add_argument(
            side,
            type=Path,
            metavar=side.upper(),
            help="a summary CSV (scaledl aggregate's), a results folder (results/NAME) or folders of runs",
        )
    parser.add_argument("--out", required=True, type=Path, metavar="CSV", help="the comparison, one row per metric")
    add_markdown_argument(parser, "the comparison page, changed rows first")


def compare_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report import compare as comparing
    from scaledl.report.tables import write_table

    if args.out.suffix != ".csv":
        raise UserError(f"--out {args.out}: the comparison must be a .csv file")
    table, only_a, only_b = comparing.compare(comparing.read_side(args.a), comparing.read_side(args.b))
    if table.empty:
        raise UserError(
            f"{args.a} and {args.b} share no configuration (rows match on {', '.join(comparing.MATCH)}); "
            "compare results of the same grid"
        )
    markdown = markdown_beside(args.out, args.markdown)
    write_table(table, args.out, markdown, markdown=comparing.markdown(table, args.a, args.b, only_a, only_b))
    changed = int((table["verdict"] == "changed").sum())
    unmatched = f"; {len(only_a)} only in A, {len(only_b)} only in B" if only_a or only_b else ""
    settings = sorted(set(table.loc[table["verdict"] == "setting changed", "metric"]))
    unmatched += f"; the sides ran with other {', '.join(settings)}" if settings else ""
    differ = table[table["verdict"] == comparing.SETTINGS_DIFFER]
    compared = table[table["verdict"] != comparing.SETTINGS_DIFFER]
    if len(differ):
        keys = len(differ.groupby(comparing.MATCH))
        unmatched += (
            f"; {plural(keys, 'configuration')} not compared, the sides ran other "
            f"{', '.join(sorted(set(differ['metric'])))} (the comparison's page says which)"
        )
    print(
        f"wrote {args.out}" + (f" and {markdown}" if markdown else "") + f": {plural(len(compared), 'metric')} of "
        f"{plural(len(compared.groupby(comparing.MATCH)), 'configuration')}, {changed} changed beyond the seeds' "
        f"spread{unmatched}"
    )
    return 0


compare = Subcommand(
    "compare two result sets: every metric per configuration, changed or not beyond the seeds' spread",
    compare_arguments,
    compare_run,
)


# ------------------------------------------------------------------ timeline


def step_range(text: str) -> tuple[int, int | None]:
    """FIRST:LAST (1-based, both included; either may be left out) as (first, last or None)."""
    first, sep, last = text.partition(":")
    try:
        bounds = (int(first) if first else 1, int(last) if last else None)
    except ValueError:
        bounds = (0, None)
    if not sep or bounds[0] < 1 or (bounds[1] is not None and bounds[1] < bounds[0]):
        raise argparse.ArgumentTypeError(f"expected FIRST:LAST with 1 <= FIRST <= LAST (e.g. 100:200), got {text!r}")
    return bounds


def timeline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("timeline", type=Path, metavar="TIMELINE", help="a run's timeline.h5, or its run directory")
    parser.add_argument(
        "--chrome",
        type=Path,
        metavar="JSON",
        help="write the steps and phases of every rank as a Chrome / Perfetto trace (chrome://tracing, "
        "ui.perfetto.dev)",
    )
    parser.add_argument(
        "--steps", type=step_range, default=(1, None), metavar="FIRST:LAST", help="only these steps (1-based)"
    )


def timeline_run(args: argparse.Namespace) -> int:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report import trace

    path = args.timeline / "timeline.h5" if args.timeline.is_dir() else args.timeline
    ranks = trace.read_timeline(path)
    for line in trace.summary_lines(ranks):
        print(line)
    if args.chrome is not None:
        events = trace.write_chrome_trace(ranks, args.chrome, *args.steps)
        print(f"wrote {args.chrome}: {plural(events, 'event')} of {plural(len(ranks), 'rank')}")
    return 0


timeline = Subcommand(
    "a run's timeline.h5: seconds per rank and phase; --chrome writes a Chrome / Perfetto trace",
    timeline_arguments,
    timeline_run,
)
