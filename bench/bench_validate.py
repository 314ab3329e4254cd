"""The validation of the simulated platforms, kept as records and shown on docs/simulation.md.

    python bench/bench_validate.py                  # published: price every anchor (about 30 s)
    python bench/bench_validate.py --suite published_fit_half   # the GPU's efficiency fitted to half the steps
    python bench/bench_validate.py --suite here     # here: netbench, calibrate, then validate (a few minutes;
                                                    # a quiet machine: it times)
    python bench/bench_validate.py --render         # rebuild the page's blocks from the records, pricing nothing

Each suite writes bench/raw/validate_SUITE.json (from a clean commit only) and the page's block rendered from
it. The published record is `scaledl validate --suite published --out-json`'s. The here record is the same
command's for `--suite here`, on this machine as the workflow makes its twin: `scaledl netbench` at 2 ranks
(16 sizes drawn log-uniform from 8 B to 64 MiB, measured in a shuffled order, the ping-pong hot and cold),
then `scaledl calibrate --busy 1` on it (the training loop's step timed with the other core busy), then the
models and collectives that calibration did not see, and the per-phase runs of bench/raw/phases.json. The page's block between `<!-- record:validate_SUITE -->`
and its end is `scaledl.validate.table.record_block` of the record (tests/workflow/test_docs.py checks it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `bench` as a package, run as a script

from bench import common  # noqa: E402
from scaledl.validate.table import record_block  # noqa: E402

SUITES = ("published", "published_fit_half", "here")  # published_fit_half: --suite published --fit-half
PAGE = common.REPO / "docs" / "simulation.md"


def block_name(suite: str) -> str:
    return f"validate_{suite}"  # docs/simulation.md's block: <!-- record:validate_SUITE -->


def scaledl(*args: str) -> None:
    if subprocess.run([sys.executable, "-m", "scaledl", *args], cwd=common.REPO).returncode != 0:
        raise SystemExit(f"bench_validate: scaledl {args[0]} failed")


def random_sizes(count: int = 16, seed: int = 0) -> list[int]:
    """Message sizes between 8 B and 64 MiB (multiples of 4), one drawn log-uniform in each of `count` equal
    slices of that log range: every regime is sampled, and none only at the powers of two of netbench's ladder."""
    import numpy as np  # a bench's own measurement helper: imported where used, as the benches do

    edges = np.linspace(np.log(8), np.log(64 << 20), count + 1)
    drawn = np.exp(np.random.default_rng(seed).uniform(edges[:-1], edges[1:]))
    return sorted({max(8, int(n) // 4 * 4) for n in drawn})


def measure(suite: str, raw: Path) -> None:
    if suite.startswith("published"):
        fit_half = ["--fit-half"] if suite == "published_fit_half" else []
        scaledl("validate", "--suite", "published", *fit_half, "--out-json", str(raw))
        return
    with tempfile.TemporaryDirectory() as tmp:
        netbench, platform = Path(tmp) / "netbench.json", Path(tmp) / "calibrated.xml"
        sizes = ",".join(map(str, random_sizes()))
        common.run_mpi(2, ["-m", "scaledl", "netbench", "--out", str(netbench), "--sizes", sizes, "--cold",
                           "--shuffle", "0"])  # fmt: skip
        scaledl("calibrate", "--netbench", str(netbench), "--out", str(platform), "--name", "calibrated",
                "--cores", str(common.usable_cores()), "--busy", str(common.usable_cores() - 1))  # fmt: skip
        phases = common.raw_path("phases")  # the per-phase runs' record, where one was kept: its rows too
        scaledl("validate", "--suite", "here", "--platform-file", str(platform), "--netbench", str(netbench),
                "--out-json", str(raw), *(["--phases", str(phases)] if phases.exists() else []))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=SUITES, default="published")
    parser.add_argument("--raw", type=Path, help="the record (default bench/raw/validate_SUITE.json)")
    parser.add_argument("--render", action="store_true", help="price nothing: rebuild the page's block from --raw")
    parser.add_argument("--no-doc", action="store_true", help="leave docs/simulation.md as it is")
    args = parser.parse_args(argv)
    args.raw = args.raw or common.raw_path(block_name(args.suite))
    if not args.render:
        try:
            common.check_raw_destination(args.raw)  # before anything is measured
        except common.RawError as error:
            parser.error(str(error))
        measure(args.suite, args.raw)
    block = record_block(json.loads(args.raw.read_text()))
    if not args.no_doc:
        common.write_record_block(PAGE, block_name(args.suite), block)
    print(block, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
