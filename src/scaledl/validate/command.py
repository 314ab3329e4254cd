"""`scaledl validate`: what a simulated platform predicts, beside what was measured, row by row, with its error.

    scaledl validate --suite published [--platform k80x8] [--out-md F] [--out-json F] [--strict]

The published suite: each anchor of scaledl/validate/anchors.yaml (a step time, a node's FLOP rate, a
ping-pong time, each measured on the hardware a shipped platform describes, with its source) against the
platform's price for the same quantity, time-only (scaledl.validate.predict): about a minute here. It prints
the table, the score of the held-out rows (MAPE, geometric-mean ratio) per kind beside the floor (how far two
published measurements of one configuration disagree), and with --strict exits 1 when a held-out row misses
the tolerance.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from scaledl.atomic import write_text
from scaledl.errors import UserError
from scaledl.validate import anchors as anchor_file
from scaledl.validate.predict import predict
from scaledl.validate.table import Row, report, to_record

HELP = "check a simulated platform's prices against published measurements, with each row's error and the score"
SUITES = ("published",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", choices=SUITES, default="published",
        help="published: the shipped platforms against published measurements (default)",
    )  # fmt: skip
    parser.add_argument(
        "--platform", action="append", metavar="NAME",
        help="only this platform's anchors (repeat for more); default every platform with an anchor",
    )  # fmt: skip
    parser.add_argument("--only", metavar="ID,...", help="only these anchors, by id (comma-separated)")
    parser.add_argument("--out-md", type=Path, help="write the table as markdown here")
    parser.add_argument("--out-json", type=Path, help="write every row and the score as JSON here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a held-out row is outside the tolerance")


def chosen(anchors: list, platforms: list[str] | None, only: str | None) -> list:
    """The anchors the options pick; an unknown platform or id is one line listing the known ones."""
    if platforms:
        known = sorted({a.platform for a in anchors})
        unknown = [p for p in platforms if p not in known]
        if unknown:
            raise UserError(f"--platform {unknown[0]}: no anchor for it; anchored platforms: {', '.join(known)}")
        anchors = [a for a in anchors if a.platform in platforms]
    if only:
        ids = [i.strip() for i in only.split(",") if i.strip()]
        unknown = [i for i in ids if i not in {a.id for a in anchors}]
        if unknown:
            raise UserError(f"--only {unknown[0]}: no such anchor; known: {', '.join(a.id for a in anchors)}")
        anchors = [a for a in anchors if a.id in ids]
    return anchors


def run(args: argparse.Namespace) -> int:
    # lazy: the code's commit and version (it imports torch, as the pricing does)
    from scaledl.train.provenance import code_state

    started = time.monotonic()
    anchors, tolerance = anchor_file.load()
    picked = chosen(anchors, args.platform, args.only)
    values = predict(picked)
    rows = [Row(a, values[a.id]) for a in picked]
    text = report(rows, tolerance) + f"wall time {time.monotonic() - started:.0f} s\n"
    print(text, end="", flush=True)
    if args.out_md:
        write_text(args.out_md, text)
    if args.out_json:
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        record = {"suite": args.suite, **to_record(rows, tolerance, code_state(), created)}
        write_text(args.out_json, json.dumps(record, indent=2) + "\n")
    misses = [r for r in rows if r.anchor.role == "held_out" and not r.passes(tolerance)]
    return 1 if args.strict and misses else 0
