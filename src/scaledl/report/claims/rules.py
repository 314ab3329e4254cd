"""The rules a claim names in claims.yaml (`RULES`): each decides a verdict from the runs of one setting."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from scaledl.errors import UserError
from scaledl.net.alphabeta import COST_MODELS, Network, efficiency
from scaledl.report.claims.checks import rule_not_slower, rule_same_numerics
from scaledl.report.claims.context import Context, simulated_platform
from scaledl.report.claims.sides import (
    Side,
    as_verdict,
    compare,
    decided,
    decomposition,
    describe,
    equivalence,
    factors,
    not_reached_note,
    not_slower_test,
    paired,
    ratio_numbers,
    samples,
    seeds_problem,
    sides_or_missing,
    target_problem,
    test_text,
)
from scaledl.report.claims.stability import combined, grid_reach, more_reliable_on_grid, more_stable, seeds_reach
from scaledl.report.claims.words import HOLDS, INCONCLUSIVE, NOT_COMPARABLE, REVERSED, Claim, Verdict
from scaledl.report.comm_model import measured_per_step
from scaledl.report.runs import read_run
from scaledl.report.stats import (
    distinct,
    divide,
    fmt_ratio,
    fmt_share,
    holm,
    median_interval,
    nan_last,
    sign_test,
    spread_of,
)


def rule_faster(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    a, b = sides
    return as_verdict(
        compare(a, b, claim.metric, claim.param("margin"), claim.param("min_seeds"), claim.param("alpha"))
    )


def rule_faster_and_stable(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    a, b = sides
    alpha = claim.param("alpha")
    result = compare(a, b, claim.metric, claim.param("margin"), claim.param("min_seeds"), alpha)
    if result.verdict == NOT_COMPARABLE:
        return as_verdict(result)
    stable, numbers = more_stable(result.a_values, result.b_values, alpha)
    on_grid = [grid_reach(side) for side in sides]
    if None not in on_grid:  # both tuned: the share of the shared grid's points decides, the seeds' reach says
        stable, share = more_reliable_on_grid(*on_grid, alpha)
        numbers = f"{share}; at the tuned points {seeds_reach(result.a_values, result.b_values)}"
    verdict = combined([result.verdict, stable])
    reason = f"faster: {result.verdict} ({result.reason}); more stable: {stable} ({numbers})"
    return Verdict(verdict, f"{result.ours}; {numbers}", reason, result.ratio, decomposition=result.decomposition)


def rule_tied(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    a, b = sides
    verdict, reason, spread, faster = equivalence(a, b, claim.metric, claim.param("tie"), claim.param("min_seeds"))
    values = [[v for _, v in samples(side, claim.metric)] for side in sides]
    ours = (
        f"speedup of {a.label} over {b.label} {spread.text(fmt_ratio)}; "
        f"{describe(a, values[0], claim.metric)}; {describe(b, values[1], claim.metric)}"
    )
    parts = " · ".join(filter(None, (decomposition(a), decomposition(b), factors(a, b))))
    return Verdict(verdict, ours, reason, spread, decomposition=parts, faster=faster)


def rule_unbeaten(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    """No rival is faster than `unbeaten`: reversed when one is, after Holm's correction over the rivals;
    holds when `unbeaten` is shown not slower than each (every test at α: an intersection–union test)."""
    ours_side, rivals = sides[0], sides[1:]
    margin, min_seeds, alpha = claim.param("margin"), claim.param("min_seeds"), claim.param("alpha")
    leads = [compare(ours_side, rival, claim.metric, margin, min_seeds, alpha) for rival in rivals]
    closest = min(range(len(rivals)), key=lambda i: nan_last(leads[i].ratio.median))
    values = [v for _, v in samples(ours_side, claim.metric)]
    rival_values = leads[closest].b_values
    ours = (
        f"{describe(ours_side, values, claim.metric)}; closest rival {rivals[closest].label}: speedup over it "
        f"{leads[closest].ratio.text(fmt_ratio)}; {describe(rivals[closest], rival_values, claim.metric)}"
    )

    def verdict(word: str, reason: str) -> Verdict:
        return Verdict(word, ours, reason, leads[closest].ratio, decomposition=leads[closest].decomposition)

    unjudged = [f"vs {r.label}: {c.reason}" for r, c in zip(rivals, leads) if c.test is None]
    if unjudged:
        return verdict(NOT_COMPARABLE, "; ".join(unjudged))
    m = len(rivals)
    adjusted = holm([c.test.p_against for c in leads])
    beaten = [
        f"{r.label} faster in {c.test.losses} of {c.test.n} seeds (Holm-adjusted p = {p:.3g} over {m} rivals)"
        for r, c, p in zip(rivals, leads, adjusted)
        if p <= alpha
    ]
    if beaten:
        return verdict(REVERSED, f"beaten: {'; '.join(beaten)}")
    best = min(range(m), key=lambda i: adjusted[i])
    no_rival = (
        f"no rival significantly faster after Holm's correction over {m} (smallest adjusted p = "
        f"{adjusted[best]:.3g}, {rivals[best].label} faster in {leads[best].test.losses} of {leads[best].test.n} "
        "seeds)"
    )
    not_slower = [not_slower_test(c.test).p_for for c in leads]
    worst = max(range(m), key=lambda i: not_slower[i])
    if not_slower[worst] <= alpha:
        return verdict(
            HOLDS,
            f"not slower beyond the margin than each of {m} rivals (every sign test p ≤ {alpha:g}; the largest "
            f"p = {not_slower[worst]:.3g}, vs {rivals[worst].label}); {no_rival}",
        )
    shown = sum(p <= alpha for p in not_slower)
    return verdict(
        INCONCLUSIVE,
        f"not slower shown against {shown} of {m} rivals (vs {rivals[worst].label}: "
        f"{test_text(not_slower_test(leads[worst].test), alpha)}); {no_rival}",
    )


def rule_share_lower(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    high, low = sides
    margin, min_seeds, alpha = claim.param("margin"), claim.param("min_seeds"), claim.param("alpha")
    high_samples, low_samples = samples(high, claim.metric), samples(low, claim.metric)
    high_values, low_values = [v for _, v in high_samples], [v for _, v in low_samples]
    ours = f"{describe(high, high_values, claim.metric)} → {describe(low, low_values, claim.metric)}"
    if "exposed_share" in high.rows and claim.metric != "exposed_share":
        exposed = [spread_of([v for _, v in samples(s, "exposed_share")]).median for s in (high, low)]
        ours += f"; with wait (exposed_share): {fmt_share(exposed[0])} → {fmt_share(exposed[1])}"
    numbers = spread_of(low_values) if low_values else None
    if simulated_platform(pd.concat([high.rows, low.rows])):
        return simulated_share_drop(high, low, high_values, low_values, margin, ours, numbers)
    pairs = paired(high_samples, low_samples)
    problem = seeds_problem([high, low], [len(high_values), len(low_values)], min_seeds)
    if problem or len(pairs) < min_seeds:
        return Verdict(NOT_COMPARABLE, ours, problem or f"only {len(pairs)} seeds in common", numbers)
    drops = [h - lo for h, lo in pairs]
    test = sign_test(1 if d > margin else -1 if d < -margin else 0 for d in drops)
    verdict = decided(test, alpha)
    reason = {
        HOLDS: f"{low.label}'s share is lower by more than {100 * margin:g} points",
        REVERSED: f"{low.label}'s share is higher",
        INCONCLUSIVE: "no significant drop",
    }[verdict]
    return Verdict(verdict, ours, f"{reason}: {test_text(test, alpha)}", numbers)


def simulated_share_drop(
    high: Side, low: Side, high_values: list[float], low_values: list[float], margin: float, ours: str, numbers
) -> Verdict:
    """share_lower on simulated runs: a simulated share is a property of the platform, not a sample (its seeds
    differ only by timing noise, a time-only run may have one seed), so each side is one measurement, its
    median over seeds, and the drop decides against the margin with no sign test, from any seed count."""
    if not high_values or not low_values:
        return Verdict(NOT_COMPARABLE, ours, "no share measured on one side", numbers)
    drop = statistics.median(high_values) - statistics.median(low_values)
    points = f"{100 * drop:+.1f} points, one measurement per side in simulation, no sign test"
    if drop > margin:
        return Verdict(
            HOLDS, ours, f"{low.label}'s share is lower by more than {100 * margin:g} points ({points})", numbers
        )
    if drop < -margin:
        return Verdict(REVERSED, ours, f"{low.label}'s share is higher ({points})", numbers)
    return Verdict(
        INCONCLUSIVE, ours, f"the share moves by less than the margin of {100 * margin:g} points ({points})", numbers
    )


def rule_less_communication(sides: list[Side], claim: Claim, ctx: Context) -> Verdict:
    """`less` reaches the target exchanging at most 1/factor of what `than` exchanges (bytes to target per
    worker, paired by seed; not reaching the target is ∞ and counts against)."""
    a, b = sides
    factor, min_seeds, alpha = claim.param("factor"), claim.param("min_seeds"), claim.param("alpha")
    a_samples, b_samples = samples(a, claim.metric), samples(b, claim.metric)
    a_values, b_values = [v for _, v in a_samples], [v for _, v in b_samples]
    savings = [divide(vb, va) for va, vb in paired(a_samples, b_samples)]
    spread, numbers = ratio_numbers(savings)
    ours = f"{numbers} less; {describe(a, a_values, claim.metric)}; {describe(b, b_values, claim.metric)}"
    problem = target_problem(a, b, claim.metric) or seeds_problem([a, b], [len(a_values), len(b_values)], min_seeds)
    if problem:
        return Verdict(NOT_COMPARABLE, ours, problem, spread)
    if all(math.isinf(v) for v in b_values):
        return Verdict(NOT_COMPARABLE, ours, f"{b.label} never reached the target: nothing to match", spread)
    test = sign_test(None if math.isnan(s) else 1 if s >= factor else -1 for s in savings)
    verdict = decided(test, alpha)
    reason = {
        HOLDS: f"{a.label} reached the same target with at least {factor:g}× fewer bytes",
        REVERSED: f"the saving is below {factor:g}×",
        INCONCLUSIVE: f"a {factor:g}× saving is not shown",
    }
    notes = not_reached_note(a, a_values)
    return Verdict(
        verdict, ours, f"{reason[verdict]}: {test_text(test, alpha)}" + (f" ({notes})" if notes else ""), spread
    )


def rule_weak_scaling_efficiency(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    counts = sorted(frame["workers"].unique())
    algorithm = frame["algorithm"].iloc[0]
    if len(counts) < 2:
        return Verdict(
            NOT_COMPARABLE, reason=f"one worker count (P={counts[0]}): no sweep", missing=("a second worker count",)
        )
    smallest = Side(f"P={counts[0]}", frame[frame["workers"] == counts[0]])
    largest = Side(f"P={counts[-1]}", frame[frame["workers"] == counts[-1]])
    base, top = samples(smallest, claim.metric), samples(largest, claim.metric)
    pairs = paired(base, top)
    ratios = [divide(b, t) for b, t in pairs]
    eff = spread_of(ratios)
    ours = f"E(P={counts[-1]} vs {counts[0]}) = {eff.text(fmt_share)}, {distinct(ratios)} distinct, paired by seed"
    network = ctx.network_of(frame)
    if network is not None:
        ours += "; " + alpha_beta_efficiency(frame, algorithm, counts, int(claim.param("extrapolate_to")), network)
    target, margin, alpha = float(claim.paper_value), claim.param("margin"), claim.param("alpha")
    if simulated_platform(frame):
        if math.isnan(eff.median):  # no seed in common at both P, or only undefined ratios
            return Verdict(INCONCLUSIVE, ours, "efficiency undefined: no seed with seconds per step at both P", eff)
        return simulated_efficiency(ratios, target - margin, ours, eff)
    problem = seeds_problem([smallest, largest], [len(base), len(top)], claim.param("min_seeds"))
    if problem:
        return Verdict(NOT_COMPARABLE, ours, problem, eff)
    test = sign_test(None if math.isnan(e) else 1 if e >= target - margin else -1 for e in ratios)
    verdict = decided(test, alpha)
    reason = {
        HOLDS: f"at least {fmt_share(target - margin)}",
        REVERSED: f"below {fmt_share(target - margin)}",
        INCONCLUSIVE: f"{fmt_share(target - margin)} not shown",
    }[verdict]
    return Verdict(verdict, ours, f"{reason}: {test_text(test, alpha)}", eff)


INTERVAL_COVERAGE = 0.9  # a simulated sweep's seeds decide through their median's interval from this coverage (5 seeds)


def simulated_efficiency(ratios: list[float], threshold: float, ours: str, eff) -> Verdict:
    """A simulated sweep: each seed is one schedule of the platform's noise (its nodes' speeds, its detours), so
    the seeds' efficiencies are samples of one platform, and the verdict is their median's distribution-free
    interval against the threshold: above it holds, below it is reversed, across it is inconclusive. With too
    few seeds for that interval's coverage, the median alone decides, and the reason says so."""
    interval = median_interval(ratios)
    if interval.coverage < INTERVAL_COVERAGE:
        holds = eff.median >= threshold
        where = "at least" if holds else "below"
        reason = f"{where} {fmt_share(threshold)} in simulation ({interval.n} seed(s): too few for an interval)"
        return Verdict(HOLDS if holds else REVERSED, ours, reason, eff)
    bounds = (
        f"the median's {interval.label()} interval over {interval.n} seeds "
        f"[{fmt_share(interval.low, unit=False)}–{fmt_share(interval.high)}]"
    )
    if interval.low >= threshold:
        return Verdict(HOLDS, ours, f"at least {fmt_share(threshold)} in simulation: {bounds}", eff)
    if interval.high < threshold:
        return Verdict(REVERSED, ours, f"below {fmt_share(threshold)} in simulation: {bounds}", eff)
    return Verdict(INCONCLUSIVE, ours, f"{fmt_share(threshold)} not shown in simulation: {bounds} spans it", eff)


def alpha_beta_efficiency(frame: pd.DataFrame, algorithm: str, counts: list, extrapolate_to: int, net: Network) -> str:
    """The α-β model's weak-scaling efficiency at our largest P and at `extrapolate_to`, in words, from the
    run.json of the runs at the smallest P (their message size and median compute per step)."""
    base = frame[frame["workers"] == counts[0]]
    if "run" not in base:
        return "α-β model: n/a (the summary has no run column to find run.json)"
    sizes, computes = [], []
    for run_dir in base["run"].dropna():
        try:
            run = read_run(run_dir)
            sizes.append(float(run.get("model.bytes")))
            compute = measured_per_step(run)["compute_s"]
        except UserError as error:
            return f"α-β model: n/a ({error})"
        if compute is not None:
            computes.append(compute)
    if not sizes or not computes:
        return "α-β model: n/a (no run.json with a steady-state compute time at the smallest P)"
    n, compute_s = sizes[0], statistics.median(computes)

    def at(p: int) -> str:
        values = [efficiency(algorithm, net, n, p, compute_s, model=model) for model in COST_MODELS]
        return f"{' / '.join(fmt_share(v) for v in values)} at P={p}"

    return f"α-β model ({' / '.join(COST_MODELS)}): {at(int(counts[-1]))}, {at(extrapolate_to)}"


@dataclass(frozen=True)
class Rule:
    """A rule of claims.yaml: `decide` gets the sides its claim's `compares` names under `sides` (in that order, a
    list such as `by` flattened), picked from one setting's runs by the one prologue below; a rule that reads the
    setting's runs itself (`whole_setting`) gets them as they are."""

    decide: Callable[..., Verdict]
    sides: tuple[str, ...]  # the keys its claim's `compares` must have
    whole_setting: bool = False

    def apply(self, frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
        if self.whole_setting:
            return self.decide(frame, claim, ctx)
        specs = [spec for key in self.sides for spec in as_list(claim.compares[key])]
        sides, missing = sides_or_missing(frame, specs)
        return missing if missing else self.decide(sides, claim, ctx)


def as_list(spec) -> list:
    """A `compares` entry as a list of side specs: one side, or a list of them (`by`)."""
    return list(spec) if isinstance(spec, (list, tuple)) else [spec]


RULES: dict[str, Rule] = {
    "faster": Rule(rule_faster, ("faster", "than")),
    "faster_and_stable": Rule(rule_faster_and_stable, ("faster", "than")),
    "unbeaten": Rule(rule_unbeaten, ("unbeaten", "by")),
    "tied": Rule(rule_tied, ("tied", "with")),
    "share_lower": Rule(rule_share_lower, ("from", "to")),
    "weak_scaling_efficiency": Rule(rule_weak_scaling_efficiency, ("algorithms",), whole_setting=True),
    "less_communication": Rule(rule_less_communication, ("less", "than")),
    "not_slower": Rule(rule_not_slower, ("general", "special")),
    "same_numerics": Rule(rule_same_numerics, ("same", "as")),
}
INCLUSION_RULES = ("not_slower",)  # judged on the tuned runs only: a check of the tuning, not of the paper
AA_RULES = ("same_numerics",)  # the A/A check: two algorithms doing one arithmetic must come out tied
