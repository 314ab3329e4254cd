"""The report's statistics: a spread over seeds, ratios paired by seed, and how they print.

A `Spread` is the median and bounds of n samples; every table, claim, figure
and benchmark prints one the same way, "median [low–high] n=…", the unit
once, after the median (`Spread.text`, with a formatter of the `fmt_*`
family or one made by `fixed`). A time to target that was never reached is
+∞: t/∞ = 0, ∞/t = ∞, and ∞/∞ is undefined (NaN), counted apart.

Ratios of two sides (`paired_ratio`): when both have the same keys (seeds,
or a benchmark's rounds) once each, one ratio per key, of which the median
and min–max are taken, n = the number of keys. Otherwise they are unpaired
(`unpaired_ratio`): median(a) / median(b), bounds min(a) / max(b) and
max(a) / min(b), n = the smaller side.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

DASH = "–"  # en dash between the bounds of a range


@dataclass(frozen=True)
class Spread:
    """Median and bounds of n samples; `undefined` counts the undefined ones (∞/∞ pairs)."""

    median: float
    low: float
    high: float
    n: int
    undefined: int = 0

    def text(self, fmt: Callable[..., str], *, sep: str = " ", bounds_label: str = "") -> str:
        """ "median [low–high] n=…": `fmt(x)` prints the median with its unit, `fmt(x, unit=False)` a bound;
        `sep` goes between the median and the bounds, `bounds_label` before the bounds (e.g. "IQR ")."""
        body = (
            f"{fmt(self.median)}{sep}[{bounds_label}{fmt(self.low, unit=False)}{DASH}"
            f"{fmt(self.high, unit=False)}] n={self.n}"
        )
        return body + (f", neither reached in {self.undefined}" if self.undefined else "")


def spread_of(values: Iterable[float]) -> Spread:
    """Median, min and max of the defined values; n counts all of them, undefined the NaNs."""
    values = list(values)
    defined = sorted(v for v in values if not math.isnan(v))
    undefined = len(values) - len(defined)
    if not defined:
        return Spread(math.nan, math.nan, math.nan, len(values), undefined)
    return Spread(statistics.median(defined), defined[0], defined[-1], len(values), undefined)


def measured(values: Iterable) -> list[float]:
    """The values that are measurements: None and NaN (nothing measured) left out."""
    return [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


# ----------------------------------------------------------------- ratios


def divide(numerator: float, denominator: float) -> float:
    """numerator / denominator where either may be ∞ (not reached): t/∞ = 0, ∞/t = ∞; ∞/∞, 0/0 undefined."""
    if math.isinf(numerator) and math.isinf(denominator):
        return math.nan
    if denominator == 0:
        return math.nan if numerator == 0 else math.inf
    return numerator / denominator


def per_key_ratios(over: Iterable[tuple[Hashable, float]], under: Iterable[tuple[Hashable, float]]) -> list[float]:
    """`over` / `under` for every key of `over` that `under` has too, in `over`'s order."""
    by_key = dict(under)
    return [divide(value, by_key[key]) for key, value in over if key in by_key]


def unpaired_ratio(over: list[float], under: list[float]) -> Spread:
    """median(over) / median(under), bounds min/max and max/min, n the smaller side (NaNs if either is empty)."""
    if not over or not under:
        return Spread(math.nan, math.nan, math.nan, 0)
    median = divide(statistics.median(over), statistics.median(under))
    return Spread(
        median,
        divide(min(over), max(under)),
        divide(max(over), min(under)),
        min(len(over), len(under)),
        int(math.isnan(median)),
    )


def paired_ratio(over: list[tuple[Hashable, float]], under: list[tuple[Hashable, float]]) -> tuple[Spread, bool]:
    """`over` / `under` as (Spread, paired): paired by key when both have the same keys once each."""
    keys_over, keys_under = [k for k, _ in over], [k for k, _ in under]
    if sorted(keys_over) == sorted(keys_under) and len(set(keys_over)) == len(keys_over):
        return spread_of(per_key_ratios(over, under)), True
    return unpaired_ratio([v for _, v in over], [v for _, v in under]), False


def nan_last(x: float) -> float:
    """A sort key that puts undefined values after every number."""
    return math.inf if math.isnan(x) else x


# ------------------------------------------------------------- formatting


def fmt_seconds(x: float, unit: bool = True) -> str:
    if math.isnan(x):
        return "undefined"
    if math.isinf(x):
        return "not reached"
    return (f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}") + (" s" if unit else "")


def fmt_ratio(x: float, unit: bool = True) -> str:
    if math.isnan(x):
        return "undefined"
    return ("∞" if math.isinf(x) else f"{x:.2f}") + ("×" if unit else "")


def fmt_share(x: float, unit: bool = True) -> str:
    return "undefined" if math.isnan(x) else f"{100 * x:.1f}" + (" %" if unit else "")


def fmt_bytes(x: float, unit: bool = True) -> str:
    if math.isnan(x):
        return "undefined"
    if math.isinf(x):
        return "not reached"
    return f"{x / 1e6:.3g}" + (" MB" if unit else "")


def fmt_steps(x: float, unit: bool = True) -> str:
    if math.isnan(x):
        return "undefined"
    if math.isinf(x):
        return "not reached"
    return f"{x:.4g}" + (" steps" if unit else "")


def fmt_value(metric: str) -> Callable[..., str]:
    """How a metric's values print: seconds, steps, a share of a step, or bytes."""
    if metric.startswith("bytes"):
        return fmt_bytes
    if metric.startswith("steps"):
        return fmt_steps
    return fmt_share if metric.endswith("_share") else fmt_seconds


def fixed(spec: str, suffix: str = "", scale: float = 1.0) -> Callable[..., str]:
    """A formatter of x / scale in the format `spec` ("not reached" for ∞), `suffix` after the median."""

    def fmt(x: float, unit: bool = True) -> str:
        number = "not reached" if math.isinf(x) else f"{x / scale:{spec}}"
        return number + (suffix if unit else "")

    return fmt


def plural(count: int, noun: str) -> str:
    """ "1 run", "3 runs"."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


# ------------------------------------------------------ tests over seeds


ALPHA = 0.05  # the claims' significance level (one-sided)


@dataclass(frozen=True)
class SignTest:
    """The exact sign test of paired outcomes: each seed +1 (for the claim), −1 (against), 0 (a tie within the
    margin) or None (undefined: neither side reached the target).

    Every seed counts: n is all of them, and a tie or an undefined seed counts against whichever direction is
    tested (p_for takes it as not for, p_against as not against), so the evaluation spacing or the margin can
    move a seed between for, tied and against without making a claim easier to decide. (Leaving ties out of n,
    as this once did, decided "5 of 5 for" where 5 of 8 seeds were for and 3 tied.)"""

    wins: int
    losses: int
    ties: int
    undefined: int

    @property
    def n(self) -> int:
        return self.wins + self.losses + self.ties + self.undefined

    @property
    def p_for(self) -> float:
        """One-sided p of `wins` or more out of n under no difference (1 with n = 0)."""
        return _binomial_tail(self.wins, self.n)

    @property
    def p_against(self) -> float:
        return _binomial_tail(self.losses, self.n)

    def text(self) -> str:
        neither = f", {self.undefined} neither reached" if self.undefined else ""
        return f"{self.wins} for, {self.losses} against, {self.ties} tied{neither} of {self.n} seeds"


def sign_test(outcomes: Iterable[int | None]) -> SignTest:
    outcomes = list(outcomes)
    return SignTest(
        wins=outcomes.count(1),
        losses=outcomes.count(-1),
        ties=outcomes.count(0),
        undefined=sum(o is None for o in outcomes),
    )


def _binomial_tail(k: int, n: int) -> float:
    """P(X ≥ k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n if n else 1.0


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment of p-values (family-wise error at most α over all of them), in the input's
    order: the i-th smallest p times (m − i + 1), made non-decreasing along that order, capped at 1. Rejecting
    each adjusted p ≤ α rejects what Holm's sequential procedure rejects at α."""
    m = len(p_values)
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: p_values[j])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def distinct(values: Iterable[float]) -> int:
    """How many different values there are (to 6 significant digits; NaNs left out): n seeds that give one
    number n times are one observation, not n (a deterministic simulated time, say)."""
    return len({float(f"{v:.6g}") for v in values if not math.isnan(v)})


def seeds_to_decide(n: int, alpha: float = ALPHA) -> int | None:
    """How many of n seeds must agree for the sign test to decide at `alpha`; None if n cannot decide."""
    return next((k for k in range(n + 1) if _binomial_tail(k, n) <= alpha), None)


@dataclass(frozen=True)
class Interval:
    """A distribution-free interval of a median: [x(k), x(n+1-k)] of the sorted values, which holds the true median
    with probability `coverage` whatever the distribution (exact, from the binomial: no resampling)."""

    low: float
    high: float
    coverage: float
    n: int

    def label(self) -> str:
        """ "95.3 %" style: the interval's true coverage, never the level that was asked for."""
        return f"{100 * self.coverage:.1f} %" if not math.isnan(self.coverage) else "no"


def median_interval(values: Iterable[float], level: float = 0.95) -> Interval:
    """The narrowest order-statistic interval of the median whose exact coverage is at least `level`; with
    too few values for that level, [min, max] and its own (lower) coverage, 1 − 2^(1−n). NaNs are left out,
    ±∞ kept (a time never reached); (nan, nan) without values."""
    data = sorted(v for v in values if not math.isnan(v))
    n = len(data)
    if not n:
        return Interval(math.nan, math.nan, math.nan, 0)
    k = 1  # the interval [x(k), x(n+1-k)], 1-based; its coverage is P(k ≤ B ≤ n−k), B ~ Binomial(n, 1/2)
    while k + 1 <= (n + 1) // 2 and _coverage(k + 1, n) >= level:
        k += 1
    return Interval(data[k - 1], data[n - k], _coverage(k, n), n)


def _coverage(k: int, n: int) -> float:
    """P(x(k) ≤ median ≤ x(n+1−k)) for n values of any continuous distribution."""
    return 1.0 - 2.0 * (1.0 - _binomial_tail(k, n)) if 2 * k <= n else 0.0
