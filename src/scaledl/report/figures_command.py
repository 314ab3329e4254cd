"""`scaledl figures`: the report's figures (scaledl.report.figures) and the long metrics table.

    scaledl figures --runs RUN_JSON... [--netbench [PLATFORM=]JSON] --out-dir DIR [--metrics-out CSV]

Every figure of `FIGURES` is written as DIR/NAME.png; one whose runs are not
in the set is written as a placeholder saying so, and named in one note line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaledl.errors import UserError
from scaledl.report.aggregate import plural
from scaledl.report.comm_model import read_netbench
from scaledl.report.figures import FIGURES, Inputs, load_runs, write_figures, write_metrics_long

HELP = "draw the report's figures (accuracy vs time, time breakdown, scaling, chip partitioning)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", nargs="+", required=True, metavar="RUN",
                        help="run.json files or run directories; the metrics.csv beside each is read too")
    parser.add_argument("--out-dir", required=True, type=Path, metavar="DIR",
                        help=f"folder for {', '.join(f'{name}.png' for name in FIGURES)}")
    parser.add_argument("--netbench", action="append", default=[], metavar="[PLATFORM=]JSON",
                        help="a scaledl netbench file: adds the α-β model's efficiency to the scaling figure, "
                             "for runs on PLATFORM (every platform without PLATFORM=); repeat per platform")
    parser.add_argument("--metrics-out", type=Path, metavar="CSV",
                        help="also write every metrics.csv row with its run's dataset, model, algorithm, "
                             "platform, workers and seed (one long table)")


def parse_netbench(values: list[str]) -> dict:
    """{platform or "*": Network} from the --netbench values."""
    networks = {}
    for value in values:
        platform, sep, path = value.partition("=")
        key, path = (platform, path) if sep else ("*", value)
        if key in networks:
            raise UserError(f"--netbench {value}: a second network for {'every platform' if key == '*' else key}; "
                            "give one file per platform")
        networks[key] = read_netbench(path)[0]
    return networks


def run(args: argparse.Namespace) -> int:
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
    wrote = f"{len(FIGURES) - len(skipped)} of {len(FIGURES)} figures in {args.out_dir}"
    if args.metrics_out is not None:
        rows = write_metrics_long(runs, args.metrics_out)
        wrote += f" and {args.metrics_out} ({plural(rows, 'row')})"
    print(f"wrote {wrote} from {plural(len(runs), 'run')}")
    return 0
