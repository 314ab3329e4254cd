"""Small statistics for the benchmark tables (no MPI, no torch): summaries, paired ratios, the A/A noise floor,
verdicts and goals, and the Williams order of the rounds.

Intervals are distribution-free: [x(k), x(n+1−k)] of the sorted values, the narrowest that reaches 95 %,
labelled with its exact coverage (with fewer than 6 values, [min, max] and its lower coverage). Headline
ratios need ≥ HEADLINE_ROUNDS rounds, every variant (and the A/A twin) once a round in the order
`round_order(variants, round)`, so drift and carry-over hit every variant alike and rounds can be paired.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

# DASH is re-exported: the benches' own cells put it between bounds too
from scaledl.report.stats import DASH, Interval, Spread, fixed, paired_ratio, unpaired_ratio  # noqa: F401
from scaledl.report.stats import median_interval as exact_median_interval


def _clean(samples: Iterable[float]) -> list[float]:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError("no samples")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("samples must be finite numbers")
    return values


def summary(samples: Iterable[float]) -> dict:
    """{"n", "median", "min", "max", "q1", "q3"} of the samples (quartiles interpolated linearly)."""
    values = sorted(_clean(samples))
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return {"n": len(values), "median": median, "min": values[0], "max": values[-1], "q1": q1, "q3": q3}


# --------------------------------------------------------------- formatting

_SCALES = {
    "s": [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")],
    "B/s": [(1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")],
}


def _sig(x: float, digits: int = 3) -> str:
    """`x` with `digits` significant digits, without exponent for everyday magnitudes."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def _scale(value: float, unit: str | None) -> tuple[float, str]:
    """The factor and unit name that put `value` in [1, 1000) for a known unit ('s', 'B/s')."""
    if unit not in _SCALES:
        return 1.0, f" {unit}" if unit else ""
    for factor, name in _SCALES[unit]:
        if abs(value) >= factor:
            return factor, f" {name}"
    factor, name = _SCALES[unit][-1]
    return factor, f" {name}"


def format_cell(s: dict, unit: str | None = "s", spread: str = "range") -> str:
    """A summary as "12.3 ms [11.9–13.0] n=5" (or [q1–q3] with spread="iqr"); units "s" and "B/s" get a prefix
    chosen by the median, any other is printed as given, None prints bare numbers."""
    factor, name = _scale(s["median"], unit)
    lo, hi = (s["q1"], s["q3"]) if spread == "iqr" else (s["min"], s["max"])

    def fmt(x: float, unit: bool = True) -> str:
        return _sig(x / factor) + (name if unit else "")

    return Spread(s["median"], lo, hi, s["n"]).text(fmt, bounds_label="IQR " if spread == "iqr" else "")


def fmt_seconds(x: float) -> str:
    """`x` seconds with 3 significant digits in s, ms or µs."""
    factor, unit = next(((f, u) for f, u in ((1.0, "s"), (1e-3, "ms")) if abs(x) >= f), (1e-6, "µs"))
    return f"{x / factor:.3g} {unit}"


def ratio_cells(samples: dict, cell: str, ref: str, noise: float) -> tuple[str, str]:
    """The paired ratio cell/ref and its verdict, or the reference marker."""
    if cell == ref:
        return "1 (reference)", "–"
    r = ratio(samples[cell], samples[ref])
    return format_ratio(r), verdict(r, noise)


def format_ratio(r: dict) -> str:
    """A ratio as "1.04× [0.98–1.09] n=5" (median [bounds] n; the bounds as `ratio` defines them)."""
    return Spread(r["median"], r["min"], r["max"], r["n"]).text(fixed(".3f", "×"))


# ----------------------------------------------------------------- ratios

LEVEL = 0.95  # the coverage every interval is asked for; each prints the coverage it really has
# n rounds give [min, max] of the per-round ratios at coverage 1 − 2^(1−n): 93.8 % at 5, 96.9 % at 6. So a
# headline goal gets at least 6 rounds (headline_rounds), the fewest whose interval reaches 95 %.
HEADLINE_ROUNDS = 6


def median_interval(values: Iterable[float], level: float = LEVEL) -> Interval:
    """The exact distribution-free interval of the median of `values` (scaledl.report.stats.median_interval):
    the narrowest [x(k), x(n+1−k)] whose coverage reaches `level`, else [min, max] with its lower coverage."""
    return exact_median_interval(_clean(values), level)


def ratio(a_samples: Iterable[float], b_samples: Iterable[float], paired: bool | None = None) -> dict:
    """`a` over `b` (times: > 1, a is slower): {"median", "min", "max", "n", "paired", "ci_low", "ci_high",
    "coverage"}. Paired (by default when the lengths match: sample i of each from round i), from the per-round
    ratios, ci_low–ci_high the order-statistic interval of their median. Unpaired, median(a) / median(b) within
    the most extreme ratios the two ranges allow, `coverage` the chance both ranges hold their medians."""
    a, b = _clean(a_samples), _clean(b_samples)
    if paired is None:
        paired = len(a) == len(b)
    if paired and len(a) != len(b):
        raise ValueError("paired ratio needs as many samples on both sides")
    if any(y == 0 for y in b):
        raise ValueError("ratio over a zero sample")
    if paired:
        r, _ = paired_ratio(list(enumerate(a)), list(enumerate(b)))  # round i of a over round i of b
        interval = median_interval(x / y for x, y in zip(a, b))
        low, high, coverage = interval.low, interval.high, interval.coverage
    else:
        r = unpaired_ratio(a, b)
        low, high = r.low, r.high
        coverage = exact_median_interval(a, 1.0).coverage * exact_median_interval(b, 1.0).coverage
    return {
        "median": r.median, "min": r.low, "max": r.high, "n": r.n, "paired": paired, "ci_low": low, "ci_high": high,
        "coverage": coverage,
    }  # fmt: skip


def _interval(r: dict) -> tuple[float, float]:
    return (r["ci_low"], r["ci_high"]) if "ci_low" in r else (r["min"], r["max"])


def interval_text(r: dict) -> str:
    """The ratio's interval with its true coverage: "0.964–1.266 (98.4 % interval of the median)"."""
    low, high = _interval(r)
    coverage = r.get("coverage")
    label = f"{100 * coverage:.1f} %" if coverage is not None and not math.isnan(coverage) else "min–max"
    return f"{low:.3f}{DASH}{high:.3f} ({label} interval of the median)"


def noise_floor(aa_pairs: Iterable[tuple[float, float]]) -> float:
    """The noise floor from A/A measurements (x, y: the same configuration twice in one round): how far from 1
    the interval of the median per-round ratio reaches, read both ways (x / y and y / x), so it does not
    depend on which twin is named first. 0.04 means the median of two identical configurations is known
    only to ±4 %. With ≥ 10 rounds one cold round does not set it; with fewer, the interval is [min, max]."""
    pairs = [(float(x), float(y)) for x, y in aa_pairs]
    if not pairs:
        raise ValueError("no A/A pairs")
    if any(y == 0 or x == 0 for x, y in pairs):
        raise ValueError("A/A pair with a zero sample")
    interval = median_interval(x / y for x, y in pairs)
    return max(abs(interval.low - 1), abs(interval.high - 1), abs(1 / interval.low - 1), abs(1 / interval.high - 1))


def verdict(r: dict, noise: float) -> str:
    """What a ratio a/b of times says against the noise floor (one of VERDICTS), from its interval [lo, hi]:
    "slower" when lo > 1 and the median exceeds 1 + noise, "faster" the mirror, "no difference" when [lo, hi]
    lies within 1 ± noise, else "not resolved" (the rounds allow a difference beyond the noise, show none)."""
    if noise < 0:
        raise ValueError("noise must be >= 0")
    low, high = _interval(r)
    if low > 1 and r["median"] > 1 + noise:
        return "slower"
    if high < 1 and r["median"] < 1 - noise:
        return "faster"
    if low >= 1 - noise and high <= 1 + noise:
        return "no difference"
    return "not resolved"


VERDICTS = ("slower", "faster", "no difference", "not resolved")
# The rule in one sentence, for the tables' notes.
RULE = (
    "intervals are the exact order-statistic intervals of the median per-round ratio, the narrowest that reaches "
    "95 % (with fewer than 6 rounds [min, max], below 95 %), labelled with their true coverage; the noise floor is "
    "how far from 1 the interval of the A/A ratio reaches, either way; a verdict is 'slower' or 'faster' when the "
    "ratio's interval excludes 1 and its median lies beyond 1 ± the floor, 'no difference within ±x' when the "
    "whole interval lies inside 1 ± the floor, else 'not resolved at ±x'; a goal 'at most L' is met only when the "
    "interval lies at or below L and the floor is narrower than L − 1, else 'not certifiable at ±floor'"
)


def verdict_text(r: dict, noise: float) -> str:
    """`verdict` in words with the floor it was judged against: "slower (beyond ±3.0%)",
    "no difference within ±3.0%", "not resolved at ±3.0%"."""
    v = verdict(r, noise)
    words = {"no difference": "no difference within", "not resolved": "not resolved at"}
    return f"{words[v]} ±{noise:.1%}" if v in words else f"{v} (beyond ±{noise:.1%})"


GOALS = ("met", "missed", "not certified", "not certifiable")


def goal(r: dict, limit: float, floor: float, margin: float | None = None) -> str:
    """A goal "at most `limit`" against the A/A floor: "not certifiable" when the floor is at least the goal's
    margin (limit − 1, or `margin` for a goal on a difference: identical cells differ by as much as the goal
    allows); else "met" / "missed" / "not certified" as the interval lies below, above or across the limit."""
    if floor < 0:
        raise ValueError("floor must be >= 0")
    if floor >= (limit - 1 if margin is None else margin):
        return "not certifiable"
    low, high = _interval(r)
    if high <= limit:
        return "met"
    if low > limit:
        return "missed"
    return "not certified"


def goal_text(r: dict, limit: float, floor: float) -> str:
    """`goal` in words with the floor and interval it was read from:
    "goal ≤ 1.15×: not certifiable at ±19.2 % (A/A floor ≥ the goal's margin 15 %); 0.964–1.266 (98.4 % ...)"."""
    g = goal(r, limit, floor)
    head = f"goal ≤ {limit:.2f}×: "
    if g == "not certifiable":
        head += f"not certifiable at ±{floor:.1%} (A/A floor ≥ the goal's margin {max(limit - 1, 0):.0%})"
    else:
        head += f"{g} (A/A floor ±{floor:.1%})"
    return f"{head}; {interval_text(r)}"


def headline_row(what: str, r: dict, floor: str, goal: str, verdict: str, fmt=lambda x: f"{x:.3f}×") -> dict:
    """One row of the page's headline table: a ratio (or, with `fmt`, a difference) with its exact interval."""
    low, high = _interval(r)
    coverage = r.get("coverage")
    label = f"{100 * coverage:.1f} %" if coverage is not None and not math.isnan(coverage) else "min–max"
    return {
        "what": what, "median": fmt(r["median"]), "interval (coverage)": f"{fmt(low)}{DASH}{fmt(high)} ({label})",
        "n": r["n"], "A/A floor": floor, "goal": goal, "verdict": verdict,
    }  # fmt: skip


def within(r: dict, margin: float, floor: float) -> str:
    """Whether a ratio meets a goal "≈ 1 within ±margin" (one of GOALS): "not certifiable" when the A/A
    floor is at least the margin; "met" when the interval lies inside 1 ± margin, "missed" when it lies
    wholly outside it, else "not certified"."""
    if floor >= margin:
        return "not certifiable"
    low, high = _interval(r)
    if 1 - margin <= low and high <= 1 + margin:
        return "met"
    if high < 1 - margin or low > 1 + margin:
        return "missed"
    return "not certified"


def within_text(r: dict, margin: float, floor: float) -> str:
    """`within` in words: "goal ≈ 1× within ±10%: met (A/A floor ±4.0%); 0.93–1.02 (97.9 % ...)"."""
    g = within(r, margin, floor)
    how = f"at ±{floor:.1%} (A/A floor ≥ the margin)" if g == "not certifiable" else f"(A/A floor ±{floor:.1%})"
    return f"goal ≈ 1× within ±{margin:.0%}: {g} {how}; {interval_text(r)}"


# ------------------------------------------------------------------- order


def williams(n: int) -> list[list[int]]:
    """A Williams design for n cells (rows: rounds of cell indices): every cell in every position, and every
    ordered pair adjacent, equally often, so carry-over is balanced (a cyclic Latin square fixes each cell's
    predecessor). n rows for even n; for odd n those rows and their reverses (2n)."""
    if n <= 0:
        return []
    first, low, high = [0], 1, n - 1
    while len(first) < n:  # 0, 1, n−1, 2, n−2, ...: the differences between neighbours are all distinct mod n
        if len(first) % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


def design_size(cells: int) -> int:
    """How many rounds one whole Williams design takes for `cells` cells."""
    return cells if cells % 2 == 0 or cells <= 1 else 2 * cells


def round_order(items: Sequence, round_index: int, rounds: int | None = None) -> list:
    """The order in which round `round_index` measures `items`: row `round_index` of their Williams design
    (cycling through it). Given the run's `rounds` and fewer of them than the design has rows, the rows are
    taken evenly spread over the design, so no item is always measured early or late; `balanced_rounds`
    says how many rounds make whole designs. The benches record every round's order."""
    items = list(items)
    if not items:
        return []
    design = williams(len(items))
    size = len(design)
    row = round_index * size // rounds if rounds and rounds < size else round_index % size
    return [items[i] for i in design[row]]


def balanced_rounds(cells: int, rounds: int) -> int:
    """The fewest rounds ≥ `rounds` that make a whole number of Williams designs for `cells` cells."""
    if cells <= 1:
        return rounds
    size = design_size(cells)
    return math.ceil(rounds / size) * size


def headline_rounds(cells: int, rounds: int) -> int:
    """Rounds for a table that judges a headline goal: whole Williams designs and at least HEADLINE_ROUNDS,
    so the interval of the median reaches 95 %; one round stays one round (a trial of the script)."""
    return 1 if rounds == 1 else balanced_rounds(cells, max(rounds, HEADLINE_ROUNDS))


def carryover(orders: Iterable[Sequence]) -> dict:
    """How the recorded orders of the rounds treat carry-over, per table (rounds grouped by their set of cells):
    {"tables", "balanced" (tables where every ordered pair of different cells is adjacent equally often),
    "cells", "fixed" (cells that came right after the same cell in every round they were not first, in ≥ 2)}."""
    groups: dict[frozenset, list[list]] = {}
    for order in orders:
        groups.setdefault(frozenset(order), []).append(list(order))
    found = {"tables": 0, "balanced": 0, "cells": 0, "fixed": 0}
    for cells, rounds in groups.items():
        if len(cells) < 2:
            continue
        pairs = Counter((a, b) for order in rounds for a, b in zip(order, order[1:]))
        before: dict = {}
        for order in rounds:
            for a, b in zip(order, order[1:]):
                before.setdefault(b, []).append(a)
        found["tables"] += 1
        found["balanced"] += len(pairs) == len(cells) * (len(cells) - 1) and len(set(pairs.values())) == 1
        found["cells"] += len(cells)
        found["fixed"] += sum(len(p) >= 2 and len(set(p)) == 1 for p in before.values())
    return found


def carryover_text(orders: Iterable[Sequence] | None) -> str:
    """`carryover` in one sentence for a section's machine paragraph."""
    orders = list(orders or [])
    if not orders:
        return "The order of the rounds was not recorded."
    c = carryover(orders)
    if c["tables"] and c["balanced"] == c["tables"]:
        return "Order: a Williams design, every cell right after every other equally often (carry-over balanced)."
    return (
        f"Order: carry-over not balanced ({c['balanced']} of {c['tables']} table(s) balanced; {c['fixed']} of "
        f"{c['cells']} cells came right after the same cell in every round), so the A/A floor includes what the "
        "cell before does to the next."
    )


# ------------------------------------------------------------ A/A cells

AA_SUFFIX = " [A/A]"


def aa_cell(name: str) -> str:
    """The name of `name`'s A/A twin in a raw record: the same configuration measured a second time in
    every round. bench/compare.py takes the noise floor of a run from these pairs."""
    return name + AA_SUFFIX
