"""Compare two raw bench records and report the changes beyond the measured noise.

    python bench/compare.py OLD.json NEW.json [--threshold 0.02] [--alpha 0.01]

For every cell in both files (cells in one only are listed, not compared), the noise is the largest of
--threshold, either file's "noise_floor", the cell's A/A floor ("NAME" and "NAME [A/A]") and the cell's own
spread (its median interval's reach). A cell has changed when BOTH its new median lies outside the old
[min, max] widened by the noise AND, where the sample sizes can reach p < --alpha, a two-sided Mann–Whitney U
test gives p < --alpha. Times: higher is "slower"; rates ("/s" units): the other way round. Exit status 0
when nothing changed, 1 when some cell did, 2 on bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import RawError, read_raw, table  # noqa: E402
from bench.stats import AA_SUFFIX, aa_cell, format_cell, median_interval, noise_floor, ratio, summary  # noqa: E402

DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = 0.01


def aa_floor(record: dict, cell: str) -> float:
    """The A/A floor of `cell` and its twin in one record (0 where it has none)."""
    base = cell.removesuffix(AA_SUFFIX)
    samples = record["samples"]
    first, twin = samples.get(base), samples.get(aa_cell(base))
    if first is None or twin is None or len(first) != len(twin) or len(first) < 2:
        return 0.0
    return noise_floor(zip(first, twin))


def spread(samples: list[float]) -> float:
    """How far the order-statistic interval of the samples' median reaches from the median, as a fraction."""
    middle = summary(samples)["median"]
    if middle == 0:
        return 0.0
    interval = median_interval(samples)
    low, high = interval.low, interval.high
    return max(abs(low / middle - 1), abs(high / middle - 1))


def cell_noise(cell: str, old: dict, new: dict, threshold: float) -> float:
    """The noise `cell` is judged against (the module docstring's rule)."""
    floors = [threshold, old.get("noise_floor") or 0.0, new.get("noise_floor") or 0.0]
    for record in (old, new):
        floors += [aa_floor(record, cell), spread(record["samples"][cell])]
    return max(floors)


def mann_whitney_p(old: list[float], new: list[float], alpha: float) -> float | None:
    """Two-sided Mann–Whitney U p-value, or None where p < alpha is out of reach of these sample sizes."""
    from scipy.stats import mannwhitneyu

    n1, n2 = len(old), len(new)
    if 2 / math.comb(n1 + n2, n1) >= alpha:  # the smallest exact two-sided p these sizes allow
        return None
    return float(mannwhitneyu(old, new, alternative="two-sided").pvalue)


def compare_cell(
    old: list[float], new: list[float], noise: float, alpha: float = DEFAULT_ALPHA, rate: bool = False
) -> dict:
    """One cell's comparison: summaries, the new/old ratio of medians, p (or None), verdict, flagged."""
    so, sn = summary(old), summary(new)
    r = ratio(new, old, paired=False)
    above = sn["median"] > so["max"] * (1 + noise)
    below = sn["median"] < so["min"] * (1 - noise)
    p = mann_whitney_p(old, new, alpha)
    flagged = (above or below) and (p is None or p < alpha)
    if not flagged:
        verdict = "no difference"
    elif above:
        verdict = "faster" if rate else "slower"
    else:
        verdict = "slower" if rate else "faster"
    return {"old": so, "new": sn, "ratio": r, "p": p, "noise": noise, "verdict": verdict, "flagged": flagged}


def compare(old: dict, new: dict, threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> dict:
    """{"cells": {cell: compare_cell(...)}, "added": [...], "removed": [...]} for two records; each cell
    carries the noise it was judged against."""
    unit = new.get("unit") or old.get("unit") or "s"
    rate = unit != "s" and unit.endswith("/s")
    common = [c for c in old["samples"] if c in new["samples"]]
    cells = {
        c: compare_cell(old["samples"][c], new["samples"][c], cell_noise(c, old, new, threshold), alpha, rate)
        for c in common
    }
    return {
        "unit": unit, "cells": cells, "added": [c for c in new["samples"] if c not in old["samples"]],
        "removed": [c for c in old["samples"] if c not in new["samples"]],
    }  # fmt: skip


def _describe(label: str, path: str, record: dict) -> str:
    git = record.get("git") or {}
    commit = (git.get("commit") or "no git")[:10] + (" (dirty)" if git.get("dirty") else "")
    m = record.get("machine") or {}
    load = record.get("load") or {}
    return (
        f"{label}: {path}  bench {record.get('bench', '?')}, {commit}, {record.get('timestamp', '?')}; "
        f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; load {load.get('start', '?')} → {load.get('end', '?')}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("old", help="the reference run's raw JSON")
    parser.add_argument("new", help="the run to check, raw JSON")
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="smallest noise fraction assumed")
    parser.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="the Mann-Whitney U test's level")
    args = parser.parse_args(argv)
    if not (args.threshold >= 0 and 0 < args.alpha < 1):
        print("compare: --threshold must be >= 0 and --alpha in (0, 1)", file=sys.stderr)
        return 2
    try:
        old, new = read_raw(args.old), read_raw(args.new)
    except RawError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    result = compare(old, new, args.threshold, args.alpha)
    if not result["cells"]:
        print(f"compare: {args.old} and {args.new} have no cell in common", file=sys.stderr)
        return 2

    print(_describe("old", args.old, old))
    print(_describe("new", args.new, new))
    if old.get("bench") != new.get("bench"):
        print(f"warning: different benches ({old.get('bench')} vs {new.get('bench')})")
    for key in ("cpu", "cores"):
        a, b = (old.get("machine") or {}).get(key), (new.get("machine") or {}).get(key)
        if a != b:
            print(f"warning: different machines ({key}: {a} vs {b})")
    tested = any(c["p"] is not None for c in result["cells"].values())
    print(
        "rule: changed = new median outside old [min, max] widened by the cell's noise (column noise)"
        + (f" AND Mann-Whitney U p < {args.alpha:g}" if tested else " (no rank test: too few samples)")
    )
    print()

    unit = result["unit"] if result["unit"] in ("s", "B/s") else None
    columns = ["cell", "old median [min–max] n", "new median [min–max] n", "new/old", "noise", "p", "verdict"]
    rows = [
        dict(zip(columns, [cell, format_cell(c["old"], unit), format_cell(c["new"], unit), f"{c['ratio']['median']:.3f}×",
             f"±{c['noise']:.1%}", "–" if c["p"] is None else f"{c['p']:.2g}",
             c["verdict"].upper() if c["flagged"] else c["verdict"]]))
        for cell, c in result["cells"].items()
    ]  # fmt: skip
    print(table(rows, columns))
    for label in ("added", "removed"):
        if result[label]:
            print(f"{label} (not compared): {', '.join(result[label])}")
    changed = [cell for cell, c in result["cells"].items() if c["flagged"]]
    print()
    print(
        f"{len(changed)} of {len(result['cells'])} cells changed beyond the noise"
        + (f": {', '.join(changed)}" if changed else "")
    )
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
