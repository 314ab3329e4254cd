"""The published validation of the shipped platforms, kept as a record and shown on docs/simulation.md.

    python bench/bench_validate.py             # price every anchor (about 30 s), write bench/raw/validate_published.json
                                               # (a clean commit only) and the page's block rendered from it
    python bench/bench_validate.py --render    # rebuild the page's block from the record, pricing nothing

The record is `scaledl validate --suite published --out-json`'s; the page's block between
`<!-- record:validate_published -->` and its end is `scaledl.validate.table.record_block` of it
(tests/workflow/test_docs.py checks that they agree).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `bench` as a package, run as a script

from bench import common  # noqa: E402
from scaledl.validate.table import record_block  # noqa: E402

DOC_BLOCK = "validate_published"  # docs/simulation.md's block: <!-- record:validate_published -->
PAGE = common.REPO / "docs" / "simulation.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=common.raw_path(DOC_BLOCK), help="the record (default %(default)s)")
    parser.add_argument("--render", action="store_true", help="price nothing: rebuild the page's block from --raw")
    parser.add_argument("--no-doc", action="store_true", help="leave docs/simulation.md as it is")
    args = common.parse_bench_args(parser, argv)
    if not args.render:
        cmd = [sys.executable, "-m", "scaledl", "validate", "--suite", "published", "--out-json", str(args.raw)]
        if subprocess.run(cmd, cwd=common.REPO).returncode != 0:
            return 1
    block = record_block(json.loads(args.raw.read_text()))
    if not args.no_doc:
        common.write_record_block(PAGE, DOC_BLOCK, block)
    print(block, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
