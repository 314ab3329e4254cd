"""`scaledl aggregate`: collect run.json files into the summary or the scaling table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaledl.errors import UserError
from scaledl.report.aggregate import plural, summarize, write_summary
from scaledl.report.averaging import averaging_table
from scaledl.report.scaling import scaling_table

HELP = "collect run.json files into a summary table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs", nargs="+", metavar="RUN",
        help="run.json files or run directories (results/NAME/runs/.../s0)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="CSV",
        help="table to write (e.g. results/NAME/tables/summary.csv)",
    )
    parser.add_argument(
        "--table", choices=("summary", "scaling", "averaging"), default="summary",
        help="summary: one row per run (default); scaling: weak and strong scaling efficiency "
             "of every sweep over the worker count (scaledl.report.scaling); averaging: one row per "
             "variant with bytes exchanged, accuracy, time to target and the slowdown a straggler "
             "causes (scaledl.report.averaging)",
    )
    parser.add_argument(
        "--markdown", type=Path, metavar="MD",
        help="markdown copy of the table (default: CSV with the suffix .md; 'none' to skip)",
    )


def run(args: argparse.Namespace) -> int:
    if args.out.suffix != ".csv":
        raise UserError(f"--out {args.out}: the {args.table} table must be a .csv file")
    markdown = args.markdown if args.markdown is not None else args.out.with_suffix(".md")
    if str(markdown).lower() == "none":
        markdown = None
    if args.table in ("scaling", "averaging"):
        table, notes = (scaling_table if args.table == "scaling" else averaging_table)(args.runs)
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        rows = plural(len(table), "row") + f" from {plural(len(args.runs), 'run')}"
    else:
        table = summarize(args.runs)
        rows = plural(len(table), "run")
    write_summary(table, args.out, markdown)
    print(f"wrote {args.out}" + (f" and {markdown}" if markdown else "") + f" ({rows})")
    return 0
