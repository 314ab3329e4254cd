"""`scaledl validate`: what a simulated platform predicts, beside what was measured, row by row, with its error.

    scaledl validate --suite published [--platform k80x8] [--fit-half] [--out-md F] [--out-json F] [--strict]
    scaledl validate --suite here --platform-file results/NAME/platform/calibrated.xml \
        --netbench results/NAME/netbench/local.json [--models MODEL:BATCH:CxHxW,...] [--repeats N]

The published suite: each anchor of scaledl/validate/anchors.yaml (a step time, a node's FLOP rate, a
ping-pong time, each measured on the hardware a shipped platform describes, with its source) against the
platform's price for the same quantity, time-only (scaledl.validate.predict): about a minute here. It prints
the table, the score of the held-out rows (MAPE, geometric-mean ratio) per kind beside the floor (how far two
published measurements of one configuration disagree), and with --strict exits 1 when a held-out row misses
the tolerance. With --fit-half, each GPU's efficiency is fitted to every other step configuration and the
rest are scored at it (scaledl.validate.fit_half); the platform files are not changed.

The here suite (scaledl.validate.here): a platform calibrated to this machine against this machine, on what
its calibration did not see: the training step of models other than the calibration's, measured and priced,
and netbench's collectives at 2 ranks, measured (the record given) and simulated; the calibration's own model
and the ping-pong it was fitted to are shown as `fit` rows, outside the score. Time it on a quiet machine, one
rank's thread per core: a minute or two.
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
from scaledl.validate.fit_half import fit_half
from scaledl.validate.here import DEFAULT_MODELS, TOLERANCE, netbench_rows, parse_models, phase_rows, step_rows
from scaledl.validate.predict import host_efficiency, predict, step_price
from scaledl.validate.table import Row, report, to_record, twin_gaps

HELP = "check a simulated platform's prices against published measurements, with each row's error and the score"
SUITES = ("published", "here")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--suite", choices=SUITES, default="published",
        help="published: the shipped platforms against published measurements (default); here: a platform "
        "calibrated to this machine against this machine (--platform-file, --netbench)",
    )  # fmt: skip
    parser.add_argument(
        "--platform", action="append", metavar="NAME",
        help="only this platform's anchors (repeat for more); default every platform with an anchor",
    )  # fmt: skip
    parser.add_argument("--only", metavar="ID,...", help="only these anchors, by id (comma-separated)")
    parser.add_argument(
        "--platform-file", type=Path,
        help="here: the calibrated platform (scaledl calibrate's file, or a shipped one's name: laptop)",
    )  # fmt: skip
    parser.add_argument("--netbench", type=Path, help="here: a scaledl netbench result of this machine, 2 ranks")
    parser.add_argument(
        "--models", default=DEFAULT_MODELS, metavar="MODEL:BATCH:CxHxW,...",
        help="here: the models whose step is measured and priced (default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--repeats", type=int, default=20, help="here: timings per half of a step's measurement")
    parser.add_argument(
        "--phases", type=Path, help="here: a bench/bench_phases.py record, its per-phase runs as rows (held out)"
    )
    parser.add_argument("--out-md", type=Path, help="write the table as markdown here")
    parser.add_argument("--out-json", type=Path, help="write every row and the score as JSON here")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a held-out row is outside the tolerance")
    parser.add_argument(
        "--fit-half", action="store_true",
        help="published: fit each GPU's efficiency to half its step anchors (every other configuration) and "
        "judge it on the other half (scaledl.validate.fit_half); the platform files are not changed",
    )  # fmt: skip


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


def published_rows(args: argparse.Namespace) -> tuple[list[Row], float, list[str]]:
    anchors, tolerance = anchor_file.load()
    picked = chosen(anchors, args.platform, args.only)
    efficiencies, notes = None, []
    if args.fit_half:
        picked, efficiencies, fitted = fit_half(picked, host_efficiency, _cached_step_seconds())
        notes = ["fitted on half (the fit rows are outside the score): " + f.line() for f in fitted] or [
            "fitted on half: no host has two step configurations to split"
        ]
    values = predict(picked, efficiencies)
    gaps = twin_gaps(picked)
    return [Row(a, values[a.id], gaps.get(a.id)) for a in picked], tolerance, notes


def _cached_step_seconds():
    """price(anchor, efficiency) → seconds, each configuration priced once per efficiency."""
    cache: dict[tuple, float] = {}

    def price(anchor, efficiency: float) -> float:
        key = (anchor.platform, anchor.host, anchor.model, anchor.batch, anchor.image, anchor.classes, efficiency)
        if key not in cache:
            cache[key] = step_price(anchor, efficiency)[0]
        return cache[key]

    return price


def here_rows(args: argparse.Namespace) -> tuple[list[Row], float]:
    missing = [flag for flag, value in (("--platform-file", args.platform_file), ("--netbench", args.netbench))
               if value is None]  # fmt: skip
    if missing:
        raise UserError(
            f"--suite here needs {' and '.join(missing)}: the calibrated platform and this machine's netbench"
        )
    # lazy: the platform's reader imports torch (the cost model); --help needs none of it
    from scaledl.sim.platform import resolve

    platform_file = resolve(args.platform_file)  # a path, or a shipped platform's name (laptop: an example)
    if args.repeats < 2:
        raise UserError("--repeats: at least 2 timings per half")
    models = parse_models(args.models)
    rows = step_rows(platform_file, models, args.repeats) + netbench_rows(platform_file, args.netbench)
    if args.phases is not None:
        rows += phase_rows(args.phases)
    return rows, TOLERANCE, []


def run(args: argparse.Namespace) -> int:
    # lazy: the code's commit and version (it imports torch, as the pricing does)
    from scaledl.train.provenance import code_state

    started = time.monotonic()
    if args.fit_half and args.suite != "published":
        raise UserError("--fit-half fits to published step times: use it with --suite published")
    rows, tolerance, notes = {"published": published_rows, "here": here_rows}[args.suite](args)
    text = report(rows, tolerance, args.suite) + "".join(f"\n{note}" for note in notes)
    text += f"\nwall time {time.monotonic() - started:.0f} s\n"
    print(text, end="", flush=True)
    if args.out_md:
        write_text(args.out_md, text)
    if args.out_json:
        created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        write_text(
            args.out_json,
            json.dumps(
                {
                    **to_record(rows, tolerance, args.suite, code_state(), created),
                    "fit_half": args.fit_half,
                    "notes": notes,
                },
                indent=2,
            )
            + "\n",
        )
    misses = [r for r in rows if r.anchor.role == "held_out" and not r.passes(tolerance)]
    return 1 if args.strict and misses else 0
