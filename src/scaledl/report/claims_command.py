"""`scaledl claims`: the paper's claims, each with our numbers and a verdict, from the summary table.

    scaledl claims --summary results/NAME/tables/summary.csv --device-of gpu=gpu --device-of knl_chip=knl \\
        --out-md results/NAME/tables/claims.md --out-csv results/NAME/tables/claims.csv

The claims and their verdict rules are in scaledl.report.claims (claims.yaml
beside it; `--claims FILE` reads another file of the same shape).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from scaledl.atomic import atomic_path, write_text
from scaledl.errors import UserError
from scaledl.report.aggregate import plural, to_markdown
from scaledl.report.claims import DEVICES, VERDICTS, Context, evaluate, load_claims, normalise_device
from scaledl.report.comm_model import read_netbench

HELP = "check the paper's claims against the summary table: our numbers and a verdict per claim"

MARKDOWN_COLUMNS = ["figure", "claim", "setting", "paper", "ours", "verdict", "reason"]
CSV_COLUMNS = ["id", "figure", "claim", "setting", "paper", "ours", "verdict", "reason",
               "paper_value", "ours_median", "ours_min", "ours_max", "ours_n"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--summary", required=True, type=Path, metavar="CSV",
                        help="the summary table of scaledl aggregate (results/NAME/tables/summary.csv)")
    parser.add_argument("--netbench", type=Path, metavar="JSON",
                        help="a scaledl netbench file: adds the α-β model's weak-scaling efficiency")
    parser.add_argument("--device-of", action="append", default=[], metavar="PLATFORM=DEVICE",
                        help=f"the hardware a platform ran on ({', '.join(DEVICES)}); repeat per platform. "
                             "Claims that need a GPU or a KNL are not comparable on platforms not named here")
    parser.add_argument("--claims", type=Path, metavar="YAML",
                        help="claims file to check instead of the packaged claims.yaml")
    parser.add_argument("--out-md", required=True, type=Path, metavar="MD", help="markdown table to write")
    parser.add_argument("--out-csv", required=True, type=Path, metavar="CSV", help="CSV table to write")


def parse_devices(pairs: list[str]) -> dict[str, str]:
    """{platform: device} from PLATFORM=DEVICE strings."""
    devices = {}
    for pair in pairs:
        platform, sep, device = pair.partition("=")
        normal = normalise_device(device) if sep and platform else None
        if normal is None:
            raise UserError(f"--device-of {pair}: expected PLATFORM=DEVICE with DEVICE one of {', '.join(DEVICES)}")
        devices[platform] = normal
    return devices


def read_summary(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such summary table (write it with scaledl aggregate)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        # pandas' parser and empty-data errors are ValueErrors
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not a readable summary table ({first_line})") from None


def markdown(table: pd.DataFrame, summary: Path) -> str:
    counts = ", ".join(f"{v}: {int((table['verdict'] == v).sum())}" for v in VERDICTS)
    return (f"# The paper's claims against {summary}\n\nRows by verdict: {counts}. Ours is median [min–max] "
            "over seeds and n; the verdict rules are in scaledl.report.claims.\n\n"
            + to_markdown(table[MARKDOWN_COLUMNS]))


def run(args: argparse.Namespace) -> int:
    for flag, path in (("--out-md", args.out_md), ("--out-csv", args.out_csv)):
        if path.suffix != f".{flag[6:]}":
            raise UserError(f"{flag} {path}: must end in .{flag[6:]}")
    devices = parse_devices(args.device_of)
    claims = load_claims(args.claims)
    network = read_netbench(args.netbench)[0] if args.netbench is not None else None
    results = read_summary(args.summary)
    table = evaluate(results, claims, Context(devices=devices, network=network), where=str(args.summary))
    with atomic_path(args.out_csv) as tmp:
        table[CSV_COLUMNS].to_csv(tmp, index=False)
    write_text(args.out_md, markdown(table, args.summary))
    print(f"wrote {args.out_md} and {args.out_csv} ({plural(len(claims), 'claim')}, {plural(len(table), 'row')})")
    return 0
