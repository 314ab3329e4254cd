"""A side's runs, samples and numbers, and the paired comparison of two sides over seeds: the sign test and
the tie band."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pandas as pd

from scaledl.report.claims.words import (
    HOLDS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_TIED,
    REVERSED,
    STEPS_METRIC,
    TIME_METRIC,
    TO_TARGET_METRICS,
    Verdict,
    split_setting,
)
from scaledl.report.identity import NAMES, value_text
from scaledl.report.sides import first_present, side_name, side_spec
from scaledl.report.stats import (
    ALPHA,
    DASH,
    SignTest,
    Spread,
    distinct,
    divide,
    fmt_ratio,
    fmt_value,
    median_interval,
    plural,
    seeds_to_decide,
    sign_test,
    spread_of,
)


@dataclass(frozen=True)
class Side:
    label: str
    rows: pd.DataFrame


def pick_side(frame: pd.DataFrame, spec) -> Side | None:
    """The runs of the side's first alternative with runs in `frame` (at its setting, if it names one, and its
    selected worker count: sides.py); None if there are none."""
    spec, setting = split_setting(spec)
    if setting is not None:
        settings = frame["setting"] if "setting" in frame else pd.Series("", index=frame.index)  # none: shared η
        frame = frame[settings.fillna("").astype(str) == setting]
    algorithm = first_present(spec, frame["algorithm"])
    if algorithm is None:
        return None
    rows, workers = frame[frame["algorithm"] == algorithm], side_spec(spec)[1]
    label = algorithm + (f"@{setting}" if setting else "")
    if workers is None:
        return Side(label, rows)
    count = {"largest": rows["workers"].max(), "smallest": rows["workers"].min()}.get(workers, workers)
    rows = rows[rows["workers"] == count]
    return Side(f"{label} P={count}", rows) if not rows.empty else None


def samples(side: Side, metric: str) -> list[tuple[object, float]]:
    """(seed, value) per run; a to-target value of a run that never reached the target is ∞, other missing
    values are left out (steps to target of a run.json older than the field, say)."""
    out = []
    values = pd.to_numeric(side.rows[metric], errors="coerce")
    times = pd.to_numeric(side.rows[TIME_METRIC], errors="coerce") if TIME_METRIC in side.rows else values
    for seed, value, time in zip(side.rows["seed"], values, times):
        if math.isnan(value):
            if metric not in TO_TARGET_METRICS or not math.isnan(time):
                continue
            value = math.inf
        out.append((seed, float(value)))
    return out


def describe(side: Side, values: list[float], metric: str) -> str:
    if values and all(math.isinf(v) for v in values):
        return f"{side.label} not reached in any of {len(values)} seeds"
    return f"{side.label} {spread_of(values).text(fmt_value(metric))}, {distinct(values)} distinct"


def not_reached_note(side: Side, values: list[float]) -> str:
    missed = sum(math.isinf(v) for v in values)
    return f"{side.label} never reached the target in {missed} of {len(values)} seeds" if missed else ""


def decomposition(side: Side) -> str:
    """A side's time to target as median steps to target × median seconds per step (its reached seeds),
    after the tuned choice that decided it (its η, effective step and place in the grid), if it was tuned."""
    rows = side.rows
    if "target_step" not in rows or "seconds_per_step" not in rows:
        return ""
    label = side.label + tuned_choice_text(rows)
    if not reached_rows(side).shape[0]:
        return f"{label}: not reached"
    steps, per_step = reached_median(side, STEPS_METRIC), reached_median(side, "seconds_per_step")
    if math.isnan(steps) or math.isnan(per_step):  # not recorded (a summary from before target_step)
        return ""
    return f"{label}: {steps:.0f} steps × {1e3 * per_step:.3g} ms/step"


TUNED_COLUMNS = (
    "tuned_lr",
    "tuned_effective_step",
    "tuned_edge",
    "tuned_runner_up_lr",
    "tuned_reached",
    "tuned_points",
    "tuned_swept",
)


def tuned_choice_text(rows: pd.DataFrame) -> str:
    """ " (η 0.064, effective 0.057, interior)" for runs that took a tuned choice (scaledl.report.tuning), else ""."""
    if "tuned_lr" not in rows or rows["tuned_lr"].isna().all():
        return ""
    choice = rows.dropna(subset=["tuned_lr"]).iloc[0]
    place = (
        f"at the {choice['tuned_edge']} edge"
        if isinstance(choice["tuned_edge"], str) and choice["tuned_edge"]
        else "interior"
    )
    return f" (η {choice['tuned_lr']:g}, effective {choice['tuned_effective_step']:.3g}, {place})"


def reached_rows(side: Side) -> pd.DataFrame:
    return side.rows[pd.to_numeric(side.rows[TIME_METRIC], errors="coerce").notna()]


def reached_median(side: Side, column: str) -> float:
    """The median of a column over the side's seeds that reached the target (NaN if none). Steps to target
    are the interpolated ones, the evaluated target_step where a run predates them."""
    rows = reached_rows(side)

    def numbers(name: str) -> pd.Series:
        return pd.to_numeric(rows[name], errors="coerce") if name in rows else pd.Series(math.nan, index=rows.index)

    values = numbers(column).fillna(numbers("target_step")) if column == STEPS_METRIC else numbers(column)
    values = values.dropna()
    return float(statistics.median(values)) if len(values) else math.nan


def factors(a: Side, b: Side) -> str:
    """The speedup of a over b split into its factors: b's steps to target over a's, b's s/step over a's."""
    steps = divide(reached_median(b, STEPS_METRIC), reached_median(a, STEPS_METRIC))
    per_step = divide(reached_median(b, "seconds_per_step"), reached_median(a, "seconds_per_step"))
    if math.isnan(steps) or math.isnan(per_step):
        return ""
    return f"speedup = {fmt_ratio(steps)} fewer steps × {fmt_ratio(per_step)} cheaper steps"


# ---------------------------------------------------------------- the paired comparison


@dataclass(frozen=True)
class Comparison:
    """A paired comparison of side a with side b over seeds, with the verdict of its sign test."""

    verdict: str
    reason: str
    ratio: Spread
    test: SignTest | None
    ours: str
    a_values: list[float]
    b_values: list[float]
    decomposition: str = ""


def decided(test: SignTest, alpha: float) -> str:
    if test.p_for <= alpha:
        return HOLDS
    if test.p_against <= alpha:
        return REVERSED
    return INCONCLUSIVE


def test_text(test: SignTest, alpha: float) -> str:
    """The sign test's outcome and what its n could decide."""
    needed = seeds_to_decide(test.n, alpha)
    can = (
        f"n = {test.n} decides when {needed} of {test.n} agree"
        if needed is not None
        else f"n = {test.n} cannot decide at α = {alpha:g} (5 seeds at least)"
    )
    p = min(test.p_for, test.p_against)
    return f"{test.text()}, sign test p = {p:.3g}; {can}"


def target_problem(a: Side, b: Side, metric: str) -> str:
    """Why the two sides' times to target cannot be compared ("" if they can)."""
    if metric not in TO_TARGET_METRICS:
        return ""
    targets = set(pd.to_numeric(pd.concat([a.rows, b.rows])["target_accuracy"], errors="coerce"))
    if any(math.isnan(t) for t in targets):
        return "no target accuracy was set, so there is no time to target"
    if len(targets) > 1:
        return f"the target accuracies differ ({', '.join(f'{t:g}' for t in sorted(targets))})"
    return ""


def seeds_problem(sides: list[Side], counts: list[int], min_seeds: int) -> str:
    short = [f"{side.label} has {count}" for side, count in zip(sides, counts) if count < min_seeds]
    return f"fewer than {min_seeds} seeds ({', '.join(short)})" if short else ""


def paired(a_samples, b_samples) -> list[tuple[float, float]]:
    """(a, b) values of the seeds both sides have."""
    b_by_seed = dict(b_samples)
    return [(value, b_by_seed[seed]) for seed, value in a_samples if seed in b_by_seed]


def outcome(ratio: float, threshold: float) -> int | None:
    """+1 when the ratio (larger: the claim's way) is beyond `threshold`, −1 beyond 1/threshold, 0 between,
    None when undefined."""
    if math.isnan(ratio):
        return None
    if ratio > threshold:
        return 1
    if ratio < 1 / threshold:
        return -1
    return 0


def ratio_numbers(ratios: list[float]) -> tuple[Spread, str]:
    """The median ratio over seeds with its exact interval (at least 95 %, labelled with its true coverage), as a
    Spread and as text: "median 2.00× [1.91–2.08] 93.8 %, n=5"."""
    spread = spread_of(ratios)
    found = median_interval(ratios)
    interval = (
        f" [{fmt_ratio(found.low, unit=False)}{DASH}{fmt_ratio(found.high, unit=False)}] {found.label()}"
        if found.n
        else ""
    )
    return spread, f"median {fmt_ratio(spread.median)}{interval}, n={spread.n}"


def compare(a: Side, b: Side, metric: str, margin: float, min_seeds: int, alpha: float = ALPHA) -> Comparison:
    """Whether a reaches the target sooner than b (speedup t_b / t_a beyond 1 + margin), seed by seed."""
    a_samples, b_samples = samples(a, metric), samples(b, metric)
    a_values, b_values = [v for _, v in a_samples], [v for _, v in b_samples]
    pairs = paired(a_samples, b_samples)
    ratios = [divide(tb, ta) for ta, tb in pairs]
    spread, numbers = ratio_numbers(ratios)
    ours = f"speedup {numbers}; {describe(a, a_values, metric)}; {describe(b, b_values, metric)}"
    parts = " · ".join(filter(None, (decomposition(a), decomposition(b), factors(a, b))))

    def result(verdict: str, reason: str, test: SignTest | None = None) -> Comparison:
        return Comparison(verdict, reason, spread, test, ours, a_values, b_values, parts)

    problem = target_problem(a, b, metric) or seeds_problem([a, b], [len(a_values), len(b_values)], min_seeds)
    if not problem and len(pairs) < min_seeds:
        problem = f"only {len(pairs)} seeds in common"
    if problem:
        return result(NOT_COMPARABLE, problem)
    if all(math.isinf(v) for v in a_values + b_values):
        return result(NOT_COMPARABLE, f"neither {a.label} nor {b.label} reached the target in any seed")
    test = sign_test(outcome(r, 1 + margin) for r in ratios)
    verdict = decided(test, alpha)
    who = {
        HOLDS: f"{a.label} faster",
        REVERSED: f"{b.label} faster, the opposite of the claim",
        INCONCLUSIVE: "no significant difference",
    }[verdict]
    notes = "; ".join(n for n in (not_reached_note(a, a_values), not_reached_note(b, b_values)) if n)
    smallest = smallest_decidable(ratios, 1 + margin, seeds_to_decide(test.n, alpha))
    can = f"; at these seeds' spread a gap under {fmt_ratio(smallest)} either way cannot be decided" if smallest else ""
    return result(verdict, f"{who}: {test_text(test, alpha)}{can}" + (f" ({notes})" if notes else ""), test)


def smallest_decidable(ratios: list[float], threshold: float, needed: int | None) -> float | None:
    """The smallest median gap (a ratio ≥ 1) that these seeds' spread lets the sign test decide either way: the
    paired ratios' log spread about their median, shifted until `needed` of them lie beyond `threshold` (or
    below 1/threshold). None where some ratio is undefined or infinite (a miss), or n cannot decide."""
    if needed is None or not ratios or not all(math.isfinite(r) and r > 0 for r in ratios):
        return None
    logs = sorted(math.log(r) for r in ratios)
    centred = [x - statistics.median(logs) for x in logs]
    n = len(centred)
    towards = math.log(threshold) - centred[n - needed]  # needed of them above log(threshold)
    away = math.log(threshold) + centred[needed - 1]  # needed of them below −log(threshold)
    return math.exp(max(towards, away))


def sides_or_missing(frame: pd.DataFrame, specs: list) -> tuple[list[Side], Verdict | None]:
    """The sides of `specs` in `frame`, or a not-comparable Verdict naming those without runs."""
    picked = [pick_side(frame, spec) for spec in specs]
    missing = tuple(f"runs of {side_name(split_setting(spec)[0])}" for spec, side in zip(specs, picked) if side is None)
    if missing:
        return [], Verdict(NOT_COMPARABLE, reason=f"missing {', '.join(missing)}", missing=missing)
    pooled = [f"{side.label}: {apart}" for side in picked if (apart := several_configurations(side.rows))]
    if pooled:
        reason = f"a side is one configuration, never several pooled as seeds; here {'; '.join(pooled)}"
        return [], Verdict(NOT_COMPARABLE, reason=reason)
    labels = [(side.label, tuple(side.rows.index)) for side in picked]
    if len(set(labels)) < len(labels):
        # e.g. chip_partition "largest" and "1" when only P = 1 ran: one set of runs, nothing to compare
        return [], Verdict(NOT_COMPARABLE, reason="both sides are the same runs", missing=("a second worker count",))
    return picked, None


def several_configurations(rows: pd.DataFrame) -> str:
    """ "lr 0.005, 0.004": the settings on which a side's runs differ (scaledl.report.identity), "" for none."""
    names = [name for name in NAMES if name in rows]
    differ = [name for name in names if rows[name].dropna().astype(str).nunique() > 1]
    return "; ".join(f"{n} {', '.join(sorted(set(rows[n].dropna().map(value_text)), key=str))}" for n in differ)


def as_verdict(c: Comparison) -> Verdict:
    return Verdict(c.verdict, c.ours, c.reason, c.ratio, decomposition=c.decomposition)


def equivalence(
    a: Side, b: Side, metric: str, tie: float, min_seeds: int, ratio: str = "speedup"
) -> tuple[str, str, Spread, str]:
    """Whether a and b are tied: the exact interval (coverage ≥ 90 %: two one-sided tests at 5 %) of the median
    log speedup within ±log(1 + tie) (holds), wholly outside it (not tied, naming the faster side: the last
    item), or neither, or undefined (inconclusive)."""
    ratios = [divide(tb, ta) for ta, tb in paired(samples(a, metric), samples(b, metric))]
    spread = spread_of(ratios)
    logs = [math.log(r) if r > 0 else -math.inf for r in ratios if not math.isnan(r)]
    if len(logs) < min_seeds:
        defined = plural(len(logs), "seed")
        return NOT_COMPARABLE, f"a {ratio} is defined in only {defined} (neither side reached in the rest)", spread, ""
    interval = median_interval(logs, level=0.90)
    low, high = interval.low, interval.high
    band = math.log(1 + tie)
    text = (
        f"{interval.label()} interval of the median {ratio} "
        f"{fmt_ratio(math.exp(low), unit=False)}{DASH}{fmt_ratio(math.exp(high))} "
        f"against the tie band {fmt_ratio(1 / (1 + tie), unit=False)}{DASH}{fmt_ratio(1 + tie)}"
    )
    if -band <= low and high <= band:
        return HOLDS, f"tied: {text}", spread, ""
    if high < -band or low > band:
        faster = a if low > band else b
        return NOT_TIED, f"not tied: {faster.label} is faster, {text}", spread, faster.label
    return INCONCLUSIVE, f"tie not shown: {text}", spread, ""


def not_slower_test(test: SignTest) -> SignTest:
    """The sign test of "a is not slower beyond the margin" from that of "a is faster beyond it": a seed
    within the margin counts for a."""
    return SignTest(wins=test.wins + test.ties, losses=test.losses, ties=0, undefined=test.undefined)
