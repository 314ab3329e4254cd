"""The `aggregate` and `plot` subcommands: arguments and entry points for scaledl.cli.

Kept free of pandas and matplotlib imports so that building the parser stays
cheap; the work is imported when a subcommand runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scaledl.errors import UserError

FIGURE_FORMATS = ("png", "pdf", "svg")
# metrics.csv columns a figure may put on its axes, with their axis labels
X_COLUMNS = {
    "wall_s": "wall time (s)",
    "train_s": "training time (s, evaluation excluded)",
    "step": "step",
    "samples": "samples",
    "epoch": "epoch",
}
Y_COLUMNS = {"test_accuracy": "test accuracy", "test_loss": "test loss", "train_loss": "train loss"}


def add_aggregate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", metavar="RUN",
        help="run.json files or run directories (results/runs/.../s0)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="CSV",
        help="table to write (e.g. results/tables/summary.csv)",
    )
    parser.add_argument(
        "--table", choices=("summary", "scaling"), default="summary",
        help="summary: one row per run (default); scaling: weak and strong scaling efficiency "
             "of every sweep over the worker count (scaledl.report.scaling)",
    )
    parser.add_argument(
        "--markdown", type=Path, metavar="MD",
        help="markdown copy of the table (default: CSV with the suffix .md; 'none' to skip)",
    )


def run_aggregate(args: argparse.Namespace) -> int:
    import sys

    from scaledl.report.aggregate import summarize, write_summary
    from scaledl.report.scaling import scaling_table

    if args.out.suffix != ".csv":
        raise UserError(f"--out {args.out}: the {args.table} table must be a .csv file")
    markdown = args.markdown if args.markdown is not None else args.out.with_suffix(".md")
    if str(markdown).lower() == "none":
        markdown = None
    if args.table == "scaling":
        table, notes = scaling_table(args.runs)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        rows = plural(len(table), "row") + f" from {plural(len(args.runs), 'run')}"
    else:
        table = summarize(args.runs)
        rows = plural(len(table), "run")
    write_summary(table, args.out, markdown)
    print(f"wrote {args.out}" + (f" and {markdown}" if markdown else "") + f" ({rows})")
    return 0


def add_plot_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", metavar="RUN",
        help="metrics.csv files or run directories; labels come from the run.json beside each",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="FIGURE",
        help=f"figure to write ({', '.join(FIGURE_FORMATS)}), e.g. results/plots/accuracy_vs_time.png",
    )
    parser.add_argument("--x", default="wall_s", choices=list(X_COLUMNS), help="horizontal axis (default: wall_s)")
    parser.add_argument("--y", default="test_accuracy", choices=list(Y_COLUMNS),
                        help="vertical axis (default: test_accuracy)")
    parser.add_argument("--title", help="figure title (default: none)")


def run_plot(args: argparse.Namespace) -> int:
    from scaledl.report.plots import plot_runs

    if args.out.suffix.lstrip(".") not in FIGURE_FORMATS:
        raise UserError(f"--out {args.out}: the figure must end in one of .{', .'.join(FIGURE_FORMATS)}")
    plot_runs(args.runs, args.out, x=args.x, y=args.y, title=args.title)
    print(f"wrote {args.out} ({plural(len(dict.fromkeys(args.runs)), 'run')})")
    return 0


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
