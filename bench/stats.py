"""Small statistics for the benchmark tables (no MPI, no torch).

Every cell of a bench table is a list of raw samples (seconds, or any other
unit); every comparison is a ratio between two such lists. This module turns
them into what the tables print, always with n and a spread:

    summary(samples)        n, median, min, max, q1, q3
    format_cell(summary)    "12.3 ms [11.9–13.0] n=5"    (median [min–max] n)
    ratio(a, b)             a over b: median, min, max, n, paired, and (paired) a bootstrap
                            interval of the median per-round ratio, ci_low–ci_high
    format_ratio(ratio)     "1.04× [0.98–1.09] n=5"
    median_interval(values) the percentile-bootstrap 95 % interval of a median (scipy.stats.bootstrap)
    noise_floor(aa_pairs)   how far from 1 the bootstrap interval of an A/A pair's median ratio reaches
                            (the same configuration twice a round): one cold round cannot set it
    verdict(ratio, noise)   "slower" / "faster" / "no difference" / "not resolved" (rule in its docstring)
    goal(ratio, limit)      "met" / "missed" / "not certified": a goal "at most limit" against the interval
    rotate(items, round, rounds)  the order in which round `round` measures the variants: a Latin square
                            (fewer rounds than variants: offsets spread evenly over the order)

Headline ratios should come from ≥ 5 rounds in which every variant (and the
A/A twin) is measured once, in the order `rotate(variants, round)`, so that
drift in the machine's load and warm-up effects hit every variant alike and
the rounds can be paired; `balanced_rounds(cells, rounds)` says how many
rounds put every cell in every position equally often.

Cells and ratios print, and ratios pair (by round), as the report's do
(scaledl.report.stats); what is the bench's own is the checks on raw
samples, the quartiles, the unit prefixes and the noise floor.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

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


CONFIDENCE = 0.95  # of every bootstrap interval
RESAMPLES = 4000
SEED = 0  # the intervals are reproducible: one record gives one table


def median_interval(values: Iterable[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile-bootstrap interval of the median of `values` (scipy.stats.bootstrap, fixed seed).

    Fewer than 3 values cannot be resampled usefully: their range is returned instead.
    """
    data = np.asarray(_clean(values))
    if len(data) < 3 or np.all(data == data[0]):
        return float(data.min()), float(data.max())
    from scipy.stats import bootstrap  # lazy: the benches' tables only

    result = bootstrap(
        (data,), np.median, confidence_level=confidence, n_resamples=RESAMPLES, method="percentile", rng=SEED
    )
    low, high = result.confidence_interval
    return float(low), float(high)


def ratio(a_samples: Iterable[float], b_samples: Iterable[float], paired: bool | None = None) -> dict:
    """`a` over `b` (with times, > 1 means a is slower): {"median", "min", "max", "n", "paired", "ci_low", "ci_high"}.

    Paired (the default when both have the same length: sample i of each comes from the same round),
    the per-round ratios a_i / b_i give the median and the min–max, n is the number of rounds, and
    ci_low–ci_high is the bootstrap interval of their median. Unpaired, the median is
    median(a) / median(b) and the bounds, the interval too, are the most extreme ratios the two
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
        low, high = median_interval(x / y for x, y in zip(a, b))
    else:
        r = unpaired_ratio(a, b)
        low, high = r.low, r.high
    return {"median": r.median, "min": r.low, "max": r.high, "n": r.n, "paired": paired, "ci_low": low, "ci_high": high}


def noise_floor(aa_pairs: Iterable[tuple[float, float]]) -> float:
    """The noise floor from A/A measurements (x, y: the same configuration twice in one round): how far
    from 1 the bootstrap interval of the median per-round ratio x / y reaches. 0.04 means the median of
    two identical configurations is known only to ±4 %. A single cold round moves it little, where the
    largest |x / y − 1| would have taken that round's deviation whole."""
    pairs = [(float(x), float(y)) for x, y in aa_pairs]
    if not pairs:
        raise ValueError("no A/A pairs")
    if any(y == 0 for _, y in pairs):
        raise ValueError("A/A pair with a zero sample")
    low, high = median_interval(x / y for x, y in pairs)
    return max(abs(low - 1), abs(high - 1))


def verdict(r: dict, noise: float) -> str:
    """What a ratio a/b of times (from `ratio`) says, given the noise floor: one of VERDICTS.

    With [lo, hi] the ratio's interval (the bootstrap interval of its median; the min–max where it
    has none): "slower" when lo > 1 and the median exceeds 1 + noise; "faster" when hi < 1 and the
    median is below 1 − noise; "no difference" when the whole interval lies within 1 ± noise (the
    data exclude a difference larger than the noise); "not resolved" otherwise: the rounds allow a
    difference beyond the noise but do not show one, so the honest words are "not resolved at ±noise".
    """
    if noise < 0:
        raise ValueError("noise must be >= 0")
    low, high = r.get("ci_low", r["min"]), r.get("ci_high", r["max"])
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
    "the noise floor is how far from 1 the bootstrap 95 % interval of the A/A median per-round ratio reaches; "
    "a verdict is 'slower' or 'faster' when the ratio's interval excludes 1 and its median lies beyond 1 ± the "
    "floor, 'no difference within ±x' when the whole interval lies inside 1 ± the floor, else 'not resolved at "
    "±x' (a difference beyond the floor is neither shown nor excluded)"
)


def verdict_text(r: dict, noise: float) -> str:
    """`verdict` in words with the floor it was judged against: "slower (beyond ±3.0%)",
    "no difference within ±3.0%", "not resolved at ±3.0%"."""
    v = verdict(r, noise)
    words = {"no difference": "no difference within", "not resolved": "not resolved at"}
    return f"{words[v]} ±{noise:.1%}" if v in words else f"{v} (beyond ±{noise:.1%})"


def goal(r: dict, limit: float) -> str:
    """Whether a ratio of times meets a goal "at most `limit`", read from its interval (as `verdict`): "met"
    when the whole interval is at or below the limit, "missed" when it is wholly above, else "not
    certified" (the rounds allow either side)."""
    low, high = r.get("ci_low", r["min"]), r.get("ci_high", r["max"])
    if high <= limit:
        return "met"
    if low > limit:
        return "missed"
    return "not certified"


def goal_text(r: dict, limit: float) -> str:
    """`goal` in words with the interval it was read from: "goal ≤ 1.15×: met (95 % interval 0.93–1.10)"."""
    low, high = r.get("ci_low", r["min"]), r.get("ci_high", r["max"])
    return f"goal ≤ {limit:.2f}×: {goal(r, limit)} ({CONFIDENCE:.0%} interval of the median {low:.3f}–{high:.3f})"


def rotate(items: Sequence, round_index: int, rounds: int | None = None) -> list:
    """`items` rotated left by round `round_index`'s offset: round 0 → a b c, round 1 → b c a, round 2 → c a b.

    Rounds 0 … len(items) − 1 form a Latin square: every variant takes every position once. Given the run's
    `rounds` and fewer of them than items, the offsets spread evenly over the order instead (round r starts
    at item ⌊r · len / rounds⌋), so every item visits each of `rounds` equal slices of the order once and
    no item is always measured early or late; `balanced_rounds` says how many rounds make whole squares.
    """
    items = list(items)
    if not items:
        return []
    n = len(items)
    k = (round_index * n // rounds if rounds and rounds < n else round_index) % n
    return items[k:] + items[:k]


def balanced_rounds(cells: int, rounds: int) -> int:
    """The fewest rounds ≥ `rounds` in which `rotate` puts each of `cells` cells in every position equally
    often (a whole number of Latin squares)."""
    if cells <= 1:
        return rounds
    return math.ceil(rounds / cells) * cells


# ------------------------------------------------------------ A/A cells

AA_SUFFIX = " [A/A]"


def aa_cell(name: str) -> str:
    """The name of `name`'s A/A twin in a raw record: the same configuration measured a second time in
    every round. bench/compare.py takes the noise floor of a run from these pairs."""
    return name + AA_SUFFIX
