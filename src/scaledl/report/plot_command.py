"""`scaledl plot`: one figure of metrics.csv columns, a line per run."""

from __future__ import annotations

import argparse
from pathlib import Path

from scaledl.errors import UserError
from scaledl.report.aggregate import plural
from scaledl.report.plots import FIGURE_FORMATS, X_COLUMNS, Y_COLUMNS, plot_runs

HELP = "plot test accuracy (or another --y) against wall time (or another --x)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", metavar="RUN",
        help="metrics.csv files or run directories; labels come from the run.json beside each",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="FIGURE",
        help=f"figure to write ({', '.join(FIGURE_FORMATS)}), e.g. results/NAME/plots/accuracy_vs_time.png",
    )
    parser.add_argument("--x", default="wall_s", choices=list(X_COLUMNS),
                        help="horizontal axis (default: wall_s, wall-clock seconds since training began; "
                             "train_s excludes evaluation)")
    parser.add_argument("--y", default="test_accuracy", choices=list(Y_COLUMNS),
                        help="vertical axis (default: test_accuracy)")
    parser.add_argument("--title", help="figure title (default: none)")


def run(args: argparse.Namespace) -> int:
    if args.out.suffix.lstrip(".") not in FIGURE_FORMATS:
        raise UserError(f"--out {args.out}: the figure must end in one of .{', .'.join(FIGURE_FORMATS)}")
    plot_runs(args.runs, args.out, x=args.x, y=args.y, title=args.title)
    print(f"wrote {args.out} ({plural(len(dict.fromkeys(args.runs)), 'run')})")
    return 0
