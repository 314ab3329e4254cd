"""The checks of the harness, not of the paper: the inclusion check (a general method tuned never loses to its
special case tuned) and the A/A check (two algorithms that do the same arithmetic come out tied)."""

from __future__ import annotations

from dataclasses import fields

import pandas as pd

from scaledl.config import TrainConfig
from scaledl.errors import UserError
from scaledl.report.claims.context import (
    Context,
)
from scaledl.report.claims.sides import (
    Side,
    as_verdict,
    compare,
    describe,
    equivalence,
    not_slower_test,
    samples,
    test_text,
)
from scaledl.report.claims.words import (
    HOLDS,
    INCONCLUSIVE,
    NOT_COMPARABLE,
    REVERSED,
    STEPS_METRIC,
    Claim,
    Verdict,
)
from scaledl.report.stats import (
    fmt_ratio,
)
from scaledl.report.summary import SUMMARY_COLUMNS


def outside_search_space(general: Side, special_case: dict) -> str:
    """Why the tuning could not find the special case (`special_case`: the settings that make the general method
    its special case, e.g. {momentum: 0}): each such setting the general side's tune did not sweep, with the
    value it was fixed at; "" when every one was searched (or none is declared)."""
    rows = general.rows
    swept = {name for value in rows.get("tuned_swept", pd.Series(dtype=str)).dropna() for name in str(value).split(",")}
    fixed = []
    for name, value in special_case.items():
        if name in swept:
            continue
        used = sorted(
            {float(v) for v in pd.to_numeric(rows.get(name, pd.Series(dtype=float)), errors="coerce").dropna()}
        )
        at = f"fixed at {', '.join(f'{v:g}' for v in used)}" if used else "fixed"
        fixed.append(f"{name} {at}; {name} = {value:g} not searched")
    if not fixed:
        return ""
    return f"its special case lies outside {general.label}'s search space ({'; '.join(fixed)})"


# The settings a run's configuration may choose: a summary column that is one of these, or that the summary does
# not define (a setting the grid swept or tuned, beside its runs), is part of what a side ran at.
HYPERPARAMETERS = frozenset(
    f.name for f in fields(TrainConfig) if f.metadata["group"] == "hyperparameters" and f.name != "seed"
)


NOT_SETTINGS = frozenset({"device"})  # columns a claim may read that say nothing of the settings


def chosen_settings(side: Side) -> str:
    """The settings the side's runs ran at, "lr=0.066, beta=0.57"; values that differ between its runs are
    joined by "/"."""
    rows = side.rows
    columns = [
        column
        for column in rows.columns
        if (column not in SUMMARY_COLUMNS or column in HYPERPARAMETERS)
        and column not in NOT_SETTINGS
        and rows[column].notna().any()
    ]

    def shown(value) -> str:
        return f"{value:g}" if isinstance(value, float) else str(value)

    return ", ".join(f"{c}={'/'.join(shown(v) for v in rows[c].dropna().unique())}" for c in columns)


def rule_not_slower(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    """The inclusion check: the general method tuned is not worse than its special case tuned, on the claim's
    metric (time to target for a timing-equivalent pair, steps to target for a pair equivalent only in its
    numerics). `sided` 1: the special case significantly better at α reverses it; 2: a significant difference
    either way at α two-sided decides, in its direction. Without one, holds only when the general method is
    shown not worse beyond the margin (a seed within it counts for), else inconclusive: nothing passes by
    default."""
    general, special = sides
    sided, alpha = claim.param("sided"), claim.param("alpha")
    if sided not in (1, 2):
        raise UserError(f"claim {claim.id}: rule not_slower takes sided: 1 or 2, not {sided!r}")
    result = compare(general, special, claim.metric, claim.param("margin"), claim.param("min_seeds"), alpha)
    if result.test is None:
        return as_verdict(result)
    test, what = result.test, "in fewer steps" if claim.metric == STEPS_METRIC else "sooner"

    def verdict(word: str, reason: str) -> Verdict:
        return Verdict(word, result.ours, reason, result.ratio, decomposition=result.decomposition)

    p_special, p_general = (min(1.0, sided * p) for p in (test.p_against, test.p_for))
    kind = "two-sided" if sided == 2 else "one-sided"
    if p_special <= alpha:
        found = f"{special.label} reaches the target {what} ({test.text()}, {kind} sign test p = {p_special:.3g})"
        outside = outside_search_space(general, claim.params.get("special_case") or {})
        if outside:  # the tuning never saw the special case: not a budget too small
            return verdict(REVERSED, f"{found}; {outside}")
        return verdict(REVERSED, f"tuning budget too small for {general.label}: its special case {found}")
    if sided == 2 and p_general <= alpha:
        return verdict(
            HOLDS,
            f"{general.label} reaches the target {what} than {special.label} ({test.text()}, two-sided sign test "
            f"p = {p_general:.3g})",
        )
    no_difference = (
        f"{special.label} not shown to reach it {what} ({test.text()}, one-sided p = {p_special:.3g})"
        if sided == 1
        else f"no significant difference either way ({test.text()}, two-sided p = {min(p_special, p_general):.3g})"
    )
    within = not_slower_test(test)
    if within.p_for <= alpha:
        return verdict(
            HOLDS,
            f"{general.label} is not slower than {special.label} beyond the margin ({within.wins} of {within.n} "
            f"seeds within it or better, sign test p = {within.p_for:.3g}); {no_difference}",
        )
    return verdict(
        INCONCLUSIVE,
        f"{general.label} not shown not slower than {special.label} beyond the margin "
        f"({test_text(within, alpha)}); {no_difference}",
    )


def rule_same_numerics(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    """The A/A check: two algorithms that do the same arithmetic (the registry's `numerics_of`) must reach the
    target in the same steps, tied as the ``tied`` rule ties. When they are not, the reason says what decided
    it: different chosen settings (the tuning decided it), or, at the same settings, the harness (a bug)."""
    a, b = sides
    tie, min_seeds = claim.param("tie"), claim.param("min_seeds")
    verdict, reason, spread, _ = equivalence(a, b, claim.metric, tie, min_seeds, ratio="ratio of steps")
    values = [[v for _, v in samples(side, claim.metric)] for side in sides]
    ours = (
        f"steps of {b.label} over {a.label} {spread.text(fmt_ratio)}; "
        f"{describe(a, values[0], claim.metric)}; {describe(b, values[1], claim.metric)}"
    )
    settings = [chosen_settings(side) for side in sides]
    if verdict in (HOLDS, NOT_COMPARABLE):
        return Verdict(verdict, ours, reason, spread)
    if settings[0] != settings[1]:
        decided_by = f"the tuning decided it: {a.label} at {settings[0]}, {b.label} at {settings[1]}"
    else:
        at = settings[0] or "the same settings"
        decided_by = f"not the tuning: both at {at}, so the harness made identical arithmetic differ"
    return Verdict(verdict, ours, f"{reason}; {decided_by}", spread)
