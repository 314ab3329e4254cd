"""How reliably and how reproducibly a side reaches the target: the "more stable" half of a claim such as
Fig. 6.2's, over the shared tune grid's points (tuned sides) or over the seeds (untuned ones)."""

from __future__ import annotations

import math
import statistics

import pandas as pd
from scipy import stats as scipy_stats

from scaledl.report.claims.sides import Side
from scaledl.report.claims.words import HOLDS, INCONCLUSIVE, NOT_COMPARABLE, REVERSED


def seeds_reach(a_values: list[float], b_values: list[float]) -> str:
    reached_a, reached_b = (sum(not math.isinf(v) for v in values) for values in (a_values, b_values))
    return f"reached in {reached_a} of {len(a_values)} seeds vs {reached_b} of {len(b_values)}"


def more_stable(a_values: list[float], b_values: list[float], alpha: float) -> tuple[str, str]:
    """Whether a is more stable than b (holds / reversed / inconclusive) and the numbers that decided it."""
    reached_a, reached_b = (sum(not math.isinf(v) for v in values) for values in (a_values, b_values))
    n_a, n_b = len(a_values), len(b_values)
    reached = seeds_reach(a_values, b_values)
    if reached_a < n_a or reached_b < n_b:
        table = [[reached_a, n_a - reached_a], [reached_b, n_b - reached_b]]
        p_for = scipy_stats.fisher_exact(table, alternative="greater").pvalue
        p_against = scipy_stats.fisher_exact(table, alternative="less").pvalue
        verdict = HOLDS if p_for <= alpha else REVERSED if p_against <= alpha else INCONCLUSIVE
        return verdict, f"{reached} (Fisher's exact test p = {min(p_for, p_against):.3g})"
    log_a, log_b = [math.log(v) for v in a_values], [math.log(v) for v in b_values]
    sd_a, sd_b = statistics.stdev(log_a), statistics.stdev(log_b)
    spreads = f"relative spread of time to target {sd_a:.2f} vs {sd_b:.2f} (sd of log time"
    if sd_a == 0 and sd_b == 0:  # Levene's statistic is 0/0
        return INCONCLUSIVE, f"{reached}; {spreads}): both sides constant over seeds, no spread to compare"
    p = scipy_stats.levene(log_a, log_b, center="median").pvalue / 2  # one-sided, by the spreads' order
    if math.isnan(p):
        return INCONCLUSIVE, f"{reached}; {spreads}; Brown–Forsythe test undefined): no spread to compare"
    verdict = INCONCLUSIVE if p > alpha else HOLDS if sd_a < sd_b else REVERSED
    return verdict, f"{reached}; {spreads}; Brown–Forsythe p = {p:.3g})"


def grid_reach(side: Side) -> tuple[int, int] | None:
    """(points that reached the target, points tried) on the side's tune grid, from its choice; None untuned."""
    if not {"tuned_reached", "tuned_points"} <= set(side.rows):
        return None
    known = side.rows[["tuned_reached", "tuned_points"]].apply(pd.to_numeric, errors="coerce").dropna()
    return (int(known.iloc[0, 0]), int(known.iloc[0, 1])) if len(known) else None


def more_reliable_on_grid(a: tuple[int, int], b: tuple[int, int], alpha: float) -> tuple[str, str]:
    """Whether a reaches the target at a larger share of the shared grid's points than b (Fisher's exact test,
    one-sided each way): how reliably a method trains across step sizes, not where its tuned point sits."""
    table = [[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]]
    p_for = scipy_stats.fisher_exact(table, alternative="greater").pvalue
    p_against = scipy_stats.fisher_exact(table, alternative="less").pvalue
    verdict = HOLDS if p_for <= alpha else REVERSED if p_against <= alpha else INCONCLUSIVE
    text = f"reached the target at {a[0]} of {a[1]} grid points vs {b[0]} of {b[1]} (both grid seeds)"
    return verdict, f"{text} (Fisher's exact test p = {min(p_for, p_against):.3g})"


def combined(verdicts: list[str]) -> str:
    """Holds when every part holds; reversed when one is reversed; not comparable or inconclusive otherwise."""
    if NOT_COMPARABLE in verdicts:
        return NOT_COMPARABLE
    if REVERSED in verdicts:
        return REVERSED
    return HOLDS if all(v == HOLDS for v in verdicts) else INCONCLUSIVE
