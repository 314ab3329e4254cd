"""The prices that decide the P = 8 verdicts, simulated time-only on k80x8 (deterministic: one run each).

    python bench/bench_prices.py [--steps 100] [--raw bench/raw/prices.json]

(1) Sync EASGD3's seconds per step on a 1,500-row and a 60,000-row synthetic 1×28×28 set: a batch gather is
priced by the rows it reads, so the set's size must not move the step (goal: within 3 %). (2) The window
patterns side by side at P = 8 on the 60,000-row set: each one's seconds a worker holds the algorithm's lock
per exchange (its critical section), P × that against the step (a worker's cycle: P center updates), and
Async EASGD with its exchange split (the default) and atomic (`--elastic-epoch atomic`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402
from scaledl.run_record import read_run_json  # noqa: E402

RANKS = 8
ROWS = (1500, 60000)
WINDOW = (("async_sgd", ()), ("async_easgd", ()), ("async_easgd", ("--elastic-epoch", "atomic")), ("hogwild_easgd", ()))


def prepare(folder: Path, rows: int) -> Path:
    out = folder / f"syn{rows}.h5"
    subprocess.run(
        [sys.executable, "-m", "scaledl", "prepare", "synthetic", "--out", str(out), "--train-count", str(rows),
         "--test-count", "500", "--shape", "1,28,28"],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def simulate(data: Path, out: Path, algorithm: str, steps: int, extra=()) -> dict:
    ranks = RANKS + (1 if algorithm.startswith(("async", "hogwild")) else 0)  # the window patterns' master
    cmd = [sys.executable, "-m", "scaledl", "simulate", "--platform-file", "k80x8", "--ranks", str(ranks),
           "--data", str(data), "--model", "lenet", "--algorithm", algorithm, "--out-dir", str(out),
           "--max-steps", str(steps), "--eval-every", "20", "--time-only", "--seed", "0", *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr[-2000:]}")
    return read_run_json(out / "run.json")


def critical(run: dict) -> dict:
    reports = [r for r in run["algorithm_report"] if "critical_epochs" in r]
    seconds, epochs = sum(r["critical_s"] for r in reports), sum(r["critical_epochs"] for r in reports)
    per_exchange = seconds / epochs
    step = run["seconds_per_step"]
    return {"per_exchange_s": per_exchange, "p_times_s": RANKS * per_exchange, "step_s": step,
            "lock_share": RANKS * per_exchange / step}  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--raw", type=Path, default=common.REPO / "bench" / "raw" / "prices.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = {rows: prepare(tmp, rows) for rows in ROWS}
        gather = {rows: simulate(data[rows], tmp / f"se3-{rows}", "sync_easgd3", args.steps)["seconds_per_step"]
                  for rows in ROWS}  # fmt: skip
        window = {}
        for algorithm, extra in WINDOW:
            name = algorithm + ("" if not extra else f" ({' '.join(extra).removeprefix('--')})")
            window[name] = critical(
                simulate(data[ROWS[-1]], tmp / name.replace(" ", "_"), algorithm, args.steps, extra)
            )
    record = {"machine": common.machine(), "steps": args.steps, "ranks": RANKS, "platform": "k80x8",
              "sync_easgd3_seconds_per_step": {str(k): v for k, v in gather.items()}, "window": window}  # fmt: skip
    args.raw.parent.mkdir(parents=True, exist_ok=True)
    args.raw.write_text(json.dumps(record, indent=1) + "\n")
    ratio = gather[ROWS[-1]] / gather[ROWS[0]]
    print(f"Sync EASGD3, P = {RANKS}, k80x8, time-only, {args.steps} steps: "
          f"{gather[ROWS[0]] * 1e3:.3f} ms/step on {ROWS[0]:,} rows, {gather[ROWS[-1]] * 1e3:.3f} on {ROWS[-1]:,} "
          f"({ratio:.3f}x)\n")  # fmt: skip
    print("| pattern | s/step (ms) | in the lock per exchange (ms) | P × that (ms) | P × that / step |")
    print("|---|---:|---:|---:|---:|")
    for name, row in window.items():
        print(f"| {name} | {row['step_s'] * 1e3:.3f} | {row['per_exchange_s'] * 1e3:.3f} | "
              f"{row['p_times_s'] * 1e3:.3f} | {row['lock_share']:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
