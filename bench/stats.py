"""Small statistics for the benchmark tables (no MPI, no torch).

Every cell of a bench table is a list of raw samples (seconds, or any other
unit); every comparison is a ratio between two such lists. This module turns
them into what the tables print, always with n and a spread:

    summary(samples)        n, median, min, max, q1, q3
    format_cell(summary)    "12.3 ms [11.9–13.0] n=5"    (median [min–max] n)
    ratio(a, b)             a over b: median, min, max, n, paired
    format_ratio(ratio)     "1.04× [0.98–1.09] n=5"
    noise_floor(aa_pairs)   max |x/y − 1| over rounds of an A/A pair (the same configuration twice)
    verdict(ratio, noise)   "slower" / "faster" / "no difference" (rule in its docstring)
    rotate(items, round)    the order in which round `round` measures the variants

Headline ratios should come from ≥ 5 rounds in which every variant (and the
A/A twin) is measured once, in the order `rotate(variants, round)`, so that
drift in the machine's load and warm-up effects hit every variant alike and
the rounds can be paired.

Cells and ratios print, and ratios pair (by round), as the report's do
(scaledl.report.stats); what is the bench's own is the checks on raw
samples, the quartiles, the unit prefixes and the noise floor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

# DASH is re-exported: the benches' own cells put it between bounds too
from scaledl.report.stats import DASH, Spread, fixed, paired_ratio, unpaired_ratio  # noqa: F401


def _clean(samples: Iterable[float]) -> list[float]:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError("no samples")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("samples must be finite numbers")
    return values


def _median(sorted_values: Sequence[float]) -> float:
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else (sorted_values[mid - 1] + sorted_values[mid]) / 2


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, 'inclusive' in `statistics`)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(samples: Iterable[float]) -> dict:
    """{"n", "median", "min", "max", "q1", "q3"} of the samples (quartiles interpolated linearly)."""
    values = sorted(_clean(samples))
    return {
        "n": len(values),
        "median": _median(values),
        "min": values[0],
        "max": values[-1],
        "q1": _quantile(values, 0.25),
        "q3": _quantile(values, 0.75),
    }


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
    """A summary as "12.3 ms [11.9–13.0] n=5": median [min–max] (or [q1–q3] with spread="iqr") and n.

    `unit` "s" (seconds) and "B/s" are scaled to a readable prefix chosen by the median; any other
    unit is printed as given; None prints bare numbers.
    """
    factor, name = _scale(s["median"], unit)
    lo, hi = (s["q1"], s["q3"]) if spread == "iqr" else (s["min"], s["max"])

    def fmt(x: float, unit: bool = True) -> str:
        return _sig(x / factor) + (name if unit else "")

    return Spread(s["median"], lo, hi, s["n"]).text(fmt, bounds_label="IQR " if spread == "iqr" else "")


def format_ratio(r: dict) -> str:
    """A ratio as "1.04× [0.98–1.09] n=5" (median [bounds] n; the bounds as `ratio` defines them)."""
    return Spread(r["median"], r["min"], r["max"], r["n"]).text(fixed(".3f", "×"))


# ----------------------------------------------------------------- ratios


def ratio(a_samples: Iterable[float], b_samples: Iterable[float], paired: bool | None = None) -> dict:
    """`a` over `b` (with times, > 1 means a is slower): {"median", "min", "max", "n", "paired"}.

    Paired (the default when both have the same length: sample i of each comes from the same round),
    the per-round ratios a_i / b_i give the median and the min–max, and n is the number of rounds.
    Unpaired, the median is median(a) / median(b) and the bounds are the most extreme ratios the two
    ranges allow, min(a) / max(b) and max(a) / min(b); n is the smaller sample count.
    """
    a, b = _clean(a_samples), _clean(b_samples)
    if paired is None:
        paired = len(a) == len(b)
    if paired and len(a) != len(b):
        raise ValueError("paired ratio needs as many samples on both sides")
    if any(y == 0 for y in b):
        raise ValueError("ratio over a zero sample")
    if paired:
        r, _ = paired_ratio(list(enumerate(a)), list(enumerate(b)))  # round i of a over round i of b
    else:
        r = unpaired_ratio(a, b)
    return {"median": r.median, "min": r.low, "max": r.high, "n": r.n, "paired": paired}


def noise_floor(aa_pairs: Iterable[tuple[float, float]]) -> float:
    """The noise floor from A/A measurements: max over rounds of |x / y − 1|, where x and y are the
    same configuration measured twice in one round. 0.04 means two identical runs differed by up to 4 %."""
    pairs = [(float(x), float(y)) for x, y in aa_pairs]
    if not pairs:
        raise ValueError("no A/A pairs")
    if any(y == 0 for _, y in pairs):
        raise ValueError("A/A pair with a zero sample")
    return max(abs(x / y - 1) for x, y in pairs)


def verdict(r: dict, noise: float) -> str:
    """ "slower", "faster" or "no difference" for a ratio a/b of times (from `ratio`), given the noise floor.

    Rule: "slower" when the median ratio exceeds 1 + noise AND its lower bound exceeds 1 (every paired
    round, or the whole unpaired ranges, agree that a took longer); "faster" when the median is below
    1 − noise AND the upper bound is below 1; anything else is "no difference": a difference inside
    the measured noise, or one the rounds disagree on, is not reported as a difference.
    """
    if noise < 0:
        raise ValueError("noise must be >= 0")
    if r["median"] > 1 + noise and r["min"] > 1:
        return "slower"
    if r["median"] < 1 - noise and r["max"] < 1:
        return "faster"
    return "no difference"


def verdict_text(r: dict, noise: float) -> str:
    """`verdict` in words with the floor it was judged against: "slower (beyond ±3.0%)",
    "no difference within ±3.0%"."""
    v = verdict(r, noise)
    return f"no difference within ±{noise:.1%}" if v == "no difference" else f"{v} (beyond ±{noise:.1%})"


def rotate(items: Sequence, round_index: int) -> list:
    """`items` rotated left by `round_index` (mod len): round 0 → a b c, round 1 → b c a, round 2 → c a b.

    Measuring round r in this order puts every variant first (and last) equally often over len(items) rounds.
    """
    items = list(items)
    if not items:
        return []
    k = round_index % len(items)
    return items[k:] + items[:k]


# ------------------------------------------------------------ A/A cells

AA_SUFFIX = " [A/A]"


def aa_cell(name: str) -> str:
    """The name of `name`'s A/A twin in a raw record: the same configuration measured a second time in
    every round. bench/compare.py takes the noise floor of a run from these pairs."""
    return name + AA_SUFFIX
