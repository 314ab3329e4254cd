"""The paper's claims, checked against the summary table with named verdict rules.

The claims are data (claims.yaml beside this module, or a file of the same
shape); each names a rule from `RULES` and gives its parameters. A rule reads
the long-format results (one row per run, the columns of
scaledl.report.summary.SUMMARY_COLUMNS) of one *setting* (the claim's `per`
columns, by default scaledl.report.runs.SETTING: dataset, model, platform
and workers) and returns a `Verdict`: "holds", "does not hold" or "not
comparable here", our numbers as "median [min–max] n=…", and a one-sentence
reason.

Protocol, common to every rule:

- **Samples.** A side of a comparison is the runs of one algorithm (and
  worker count) in the setting; its samples are the metric's values, one
  per run. For time to target, a run that never reached the target counts
  as not reached (+∞): it is never dropped, so a median may read "not
  reached". For any other metric, a missing value is a measurement that
  does not exist (too few steps for a steady state) and is left out, which
  lowers n.
- **Seeds.** A side with fewer than `min_seeds` samples (default 3) makes
  the setting "not comparable here"; its numbers are still printed.
- **Speedup** of A over B is t_B / t_A (> 1: A is faster). When both sides
  have the same seeds, once each, they are paired: one speedup per seed, of
  which the median and min–max are printed, n = the number of seeds.
  Otherwise they are unpaired: median(t_B) / median(t_A), bounds
  min(t_B) / max(t_A) and max(t_B) / min(t_A), n = the smaller side. With
  "not reached": t / ∞ = 0, ∞ / t = ∞, ∞ / ∞ is undefined (neither reached).
  (scaledl.report.stats.paired_ratio computes it.)

Rules (parameter defaults in the claims file's `defaults`):

- ``faster`` (A faster than B): **holds** when the median speedup exceeds
  1 + margin, its lower bound exceeds 1 (every seed, or the whole unpaired
  ranges, agree that A was faster) and no seed is undefined. Otherwise it
  **does not hold**, and the reason says why: B is faster (median below
  1 / (1 + margin) and upper bound below 1), no difference (median within
  the margin), no difference because the seeds disagree (bounds on both
  sides of 1: the difference is inside the spread over seeds), or neither
  reached the target in some seed. **Not comparable here**: a side has no
  runs, too few seeds, the sides' target accuracies differ or are unset, or
  no run of either side reached the target.
- ``faster_and_stable``: ``faster``, and A more stable than B. More stable:
  A reaches the target in a larger share of its seeds than B, or both reach
  it in every seed and A's relative spread of time to target,
  (max − min) / median, satisfies spread_A · (1 + margin) < spread_B.
- ``fastest_tied`` (fastest F1, F2 of others O): holds when each F is
  ``faster`` than every O, and F1 and F2 are tied: neither is ``faster``
  than the other and the median speedup of F1 over F2 lies within
  [1 / (1 + tie), 1 + tie].
- ``share_lower`` (a share falls from A to B): holds when median_B <
  median_A − margin (margin in share points) and max_B < min_A (the ranges
  do not overlap). Otherwise does not hold.
- ``weak_scaling_efficiency``: per sweep over the worker count, E =
  seconds per step at the smallest P over that at the largest P (per seed,
  paired as above). Holds when median E ≥ the paper's value and min E ≥
  the paper's value − margin. With a netbench file, the α-β model's
  efficiency at our largest P and at `extrapolate_to` workers is printed
  beside ours (scaledl.net.cost.efficiency, compute time from the runs).

**Needs.** A setting that misses a claim's `needs` (the device, dataset,
model, target or scale the paper's number belongs to) is "not comparable
here" whatever the rule found; the rule's numbers are still printed and its
finding is kept in the reason, so a hardware-dependent number measured on
the wrong hardware says what it shows and why it is not the paper's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import pandas as pd
import yaml

from scaledl.algorithms import ALGORITHMS
from scaledl.errors import UserError
from scaledl.net.cost import COST_MODELS, Network, efficiency
from scaledl.report.comm_model import measured_per_step
from scaledl.report.runs import RUN_KEY, SETTING, read_run
from scaledl.report.sides import first_present, side_name, side_spec
from scaledl.report.stats import (
    DASH,
    Spread,
    fmt_ratio,
    fmt_share,
    fmt_value,
    nan_last,
    paired_ratio,
    plural,
    spread_of,
)
from scaledl.report.tables import markdown_table

HOLDS, DOES_NOT_HOLD, NOT_COMPARABLE = "holds", "does not hold", "not comparable here"
VERDICTS = (HOLDS, DOES_NOT_HOLD, NOT_COMPARABLE)

TIME_METRIC = "time_to_target_s"
TO_TARGET_METRICS = (TIME_METRIC, "bytes_to_target")  # a missing value means "not reached"
DEVICE_KINDS = ("cpu", "gpu", "knl")  # the hardware a claim may need (--device-of)
CLAIM_KEYS = {"id", "figure", "claim", "compares", "paper", "metric", "rule", "per", "needs", "note", "stable"}
NEEDS_KEYS = {"device", "dataset", "model", "target_accuracy", "min_workers"}


# --------------------------------------------------------------- claims


@dataclass(frozen=True)
class Claim:
    id: str
    figure: str
    text: str
    compares: dict
    paper_text: str
    paper_value: float | None
    metric: str
    rule: str
    params: dict
    per: tuple[str, ...]
    needs: dict
    note: str = ""

    def param(self, name: str):
        if name not in self.params:
            raise UserError(
                f"claim {self.id}: rule {self.rule} needs the parameter {name!r}; "
                "give it under the claim's rule or the file's defaults"
            )
        return self.params[name]


@dataclass(frozen=True)
class Verdict:
    verdict: str
    ours: str = ""
    reason: str = ""
    numbers: Spread | None = None
    missing: tuple[str, ...] = ()  # sides with no runs in the setting (collapsed over settings by `evaluate`)


@dataclass
class Context:
    """What the results do not say about themselves: each platform's device, and the measured network."""

    devices: dict[str, str] = field(default_factory=dict)
    network: Network | None = None

    def device_of(self, platform: str, rows: pd.DataFrame) -> str | None:
        """cpu, gpu or knl: the caller's mapping first (only it can tell a KNL), else a `device` column."""
        if platform in self.devices:
            return self.devices[platform]
        if "device" not in rows:
            return None
        found = {normalise_device(str(d)) for d in rows["device"].dropna()}
        found.discard(None)
        return found.pop() if len(found) == 1 else None


def normalise_device(text: str) -> str | None:
    """cpu, gpu or knl from a device name (a torch device such as cuda:0 counts as gpu)."""
    text = text.strip().lower()
    if text.startswith("cuda") or text == "gpu":
        return "gpu"
    return text if text in DEVICE_KINDS else None


# ---------------------------------------------------------------- sides


@dataclass(frozen=True)
class Side:
    label: str
    rows: pd.DataFrame


def pick_side(frame: pd.DataFrame, spec) -> Side | None:
    """The runs of the side's first alternative with runs in `frame`, at its selected worker count (sides.py);
    None if there are none."""
    algorithm = first_present(spec, frame["algorithm"])
    if algorithm is None:
        return None
    rows, workers = frame[frame["algorithm"] == algorithm], side_spec(spec)[1]
    if workers is None:
        return Side(algorithm, rows)
    count = {"largest": rows["workers"].max(), "smallest": rows["workers"].min()}.get(workers, workers)
    rows = rows[rows["workers"] == count]
    return Side(f"{algorithm} P={count}", rows) if not rows.empty else None


def samples(side: Side, metric: str) -> list[tuple[object, float]]:
    """(seed, value) per run; a missing time to target is ∞ (not reached), other missing values are left out."""
    out = []
    for seed, value in zip(side.rows["seed"], pd.to_numeric(side.rows[metric], errors="coerce")):
        if math.isnan(value):
            if metric not in TO_TARGET_METRICS:
                continue
            value = math.inf
        out.append((seed, float(value)))
    return out


def describe(side: Side, values: list[float], metric: str) -> str:
    if values and all(math.isinf(v) for v in values):
        return f"{side.label} not reached in any of {len(values)} seeds"
    return f"{side.label} {spread_of(values).text(fmt_value(metric))}"


def not_reached_note(side: Side, values: list[float]) -> str:
    missed = sum(math.isinf(v) for v in values)
    return f"{side.label} never reached the target in {missed} of {len(values)} seeds" if missed else ""


# ------------------------------------------------------ the faster test


@dataclass(frozen=True)
class Comparison:
    """A speedup of side a over side b, judged by the `faster` rule."""

    verdict: str
    reason: str
    speedup: Spread
    ours: str
    a_values: list[float]
    b_values: list[float]


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


def compare(a: Side, b: Side, metric: str, margin: float, min_seeds: int) -> Comparison:
    """Speedup of a over b (t_b / t_a) and the `faster` rule's verdict on it."""
    a_samples, b_samples = samples(a, metric), samples(b, metric)
    a_values, b_values = [v for _, v in a_samples], [v for _, v in b_samples]
    speedup, paired = paired_ratio(b_samples, a_samples)
    ours = (
        f"{speedup.text(fmt_ratio)}{' paired by seed' if paired else ''}; "
        f"{describe(a, a_values, metric)}; {describe(b, b_values, metric)}"
    )
    notes = "; ".join(n for n in (not_reached_note(a, a_values), not_reached_note(b, b_values)) if n)

    def result(verdict: str, reason: str) -> Comparison:
        reason = f"{reason} ({notes})" if notes and verdict != NOT_COMPARABLE else reason
        return Comparison(verdict, reason, speedup, ours, a_values, b_values)

    problem = target_problem(a, b, metric) or seeds_problem([a, b], [len(a_values), len(b_values)], min_seeds)
    if problem:
        return result(NOT_COMPARABLE, problem)
    if all(math.isinf(v) for v in a_values + b_values):
        return result(NOT_COMPARABLE, f"neither {a.label} nor {b.label} reached the target in any seed")
    beyond = f"the {100 * margin:g} % margin"
    if speedup.undefined:
        return result(DOES_NOT_HOLD, f"neither reached the target in {speedup.undefined} of {speedup.n} seeds")
    if speedup.median > 1 + margin and speedup.low > 1:
        return result(HOLDS, f"{a.label} faster in every seed, median speedup beyond {beyond}")
    if speedup.median < 1 / (1 + margin) and speedup.high < 1:
        return result(DOES_NOT_HOLD, f"{b.label} is faster in every seed")
    if 1 / (1 + margin) <= speedup.median <= 1 + margin:
        return result(DOES_NOT_HOLD, f"no difference: median speedup {fmt_ratio(speedup.median)} is within {beyond}")
    return result(
        DOES_NOT_HOLD,
        f"no difference: the seeds disagree, speedups {fmt_ratio(speedup.low)}{DASH}{fmt_ratio(speedup.high)}",
    )


def sides_or_missing(frame: pd.DataFrame, specs: list) -> tuple[list[Side], Verdict | None]:
    """The sides of `specs` in `frame`, or a not-comparable Verdict naming those without runs."""
    picked = [pick_side(frame, spec) for spec in specs]
    missing = tuple(f"runs of {side_name(spec)}" for spec, side in zip(specs, picked) if side is None)
    if missing:
        return [], Verdict(NOT_COMPARABLE, reason=f"missing {', '.join(missing)}", missing=missing)
    labels = [(side.label, tuple(side.rows.index)) for side in picked]
    if len(set(labels)) < len(labels):
        # e.g. chip_partition "largest" and "1" when only P = 1 ran: one set of runs, nothing to compare
        return [], Verdict(NOT_COMPARABLE, reason="both sides are the same runs", missing=("a second worker count",))
    return picked, None


# ---------------------------------------------------------------- rules


def rule_faster(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["faster"], claim.compares["than"]])
    if missing:
        return missing
    a, b = sides
    result = compare(a, b, claim.metric, claim.param("margin"), claim.param("min_seeds"))
    return Verdict(result.verdict, result.ours, result.reason, result.speedup)


def relative_spread(values: list[float]) -> float:
    """(max − min) / median over the seeds; ∞ when a seed never reached the target."""
    if any(math.isinf(v) for v in values):
        return math.inf
    median = statistics.median(values)
    return (max(values) - min(values)) / median if median > 0 else math.inf


def more_stable(a: Side, a_values: list[float], b: Side, b_values: list[float], margin: float) -> tuple[bool, str]:
    """Whether a is more stable than b (module docstring), and the numbers that decided it."""
    share_a = sum(not math.isinf(v) for v in a_values) / len(a_values)
    share_b = sum(not math.isinf(v) for v in b_values) / len(b_values)
    reached = (
        f"reached in {sum(not math.isinf(v) for v in a_values)} of {len(a_values)} seeds vs "
        f"{sum(not math.isinf(v) for v in b_values)} of {len(b_values)}"
    )
    if share_a != share_b or share_a < 1:
        return share_a > share_b, reached
    spread_a, spread_b = relative_spread(a_values), relative_spread(b_values)
    spreads = f"relative spread of time to target {spread_a:.2f} vs {spread_b:.2f}"
    return spread_a * (1 + margin) < spread_b, spreads


def rule_faster_and_stable(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["faster"], claim.compares["than"]])
    if missing:
        return missing
    a, b = sides
    result = compare(a, b, claim.metric, claim.param("margin"), claim.param("min_seeds"))
    if result.verdict == NOT_COMPARABLE:
        return Verdict(result.verdict, result.ours, result.reason, result.speedup)
    stable, numbers = more_stable(a, result.a_values, b, result.b_values, claim.param("margin"))
    ours = f"{result.ours}; {numbers}"
    if result.verdict == HOLDS and stable:
        return Verdict(HOLDS, ours, f"{result.reason}, and more stable", result.speedup)
    parts = [] if result.verdict == HOLDS else [f"not faster: {result.reason}"]
    parts += [] if stable else [f"not more stable ({numbers})"]
    return Verdict(DOES_NOT_HOLD, ours, "; ".join(parts), result.speedup)


def rule_fastest_tied(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    fastest_specs, other_specs = list(claim.compares["fastest"]), list(claim.compares["of"])
    sides, missing = sides_or_missing(frame, fastest_specs + other_specs)
    if missing:
        return missing
    margin, min_seeds, tie = claim.param("margin"), claim.param("min_seeds"), claim.param("tie")
    first, second = sides[0], sides[1]
    pair = compare(first, second, claim.metric, margin, min_seeds)
    reverse = compare(second, first, claim.metric, margin, min_seeds)
    wins = [compare(f, o, claim.metric, margin, min_seeds) for f in sides[:2] for o in sides[2:]]
    labels = [(f.label, o.label) for f in sides[:2] for o in sides[2:]]
    closest = min(range(len(wins)), key=lambda i: nan_last(wins[i].speedup.median))
    ours = (
        f"{first.label} over {second.label}: {pair.ours}; smallest lead: {labels[closest][0]} over "
        f"{labels[closest][1]} {wins[closest].speedup.text(fmt_ratio)}"
    )
    unusable = [(lab, c) for lab, c in zip(labels, wins) if c.verdict == NOT_COMPARABLE]
    if pair.verdict == NOT_COMPARABLE:
        return Verdict(NOT_COMPARABLE, ours, pair.reason, pair.speedup)
    if unusable:
        (f, o), comparison = unusable[0]
        return Verdict(NOT_COMPARABLE, ours, f"{f} vs {o}: {comparison.reason}", pair.speedup)
    tied = pair.verdict != HOLDS and reverse.verdict != HOLDS and 1 / (1 + tie) <= pair.speedup.median <= 1 + tie
    losses = [f"{f} not faster than {o} ({c.reason})" for (f, o), c in zip(labels, wins) if c.verdict != HOLDS]
    if tied and not losses:
        return Verdict(
            HOLDS,
            ours,
            f"both faster than all {len(sides) - 2} others in every seed, and tied with "
            f"each other within ±{100 * tie:g} %",
            pair.speedup,
        )
    reasons = [] if tied else [f"not tied: {first.label} over {second.label} is {fmt_ratio(pair.speedup.median)}"]
    reasons += losses[:2] + ([f"and {len(losses) - 2} more"] if len(losses) > 2 else [])
    return Verdict(DOES_NOT_HOLD, ours, "; ".join(reasons), pair.speedup)


def rule_share_lower(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["from"], claim.compares["to"]])
    if missing:
        return missing
    high, low = sides
    margin, min_seeds = claim.param("margin"), claim.param("min_seeds")
    high_values = [v for _, v in samples(high, claim.metric)]
    low_values = [v for _, v in samples(low, claim.metric)]
    ours = f"{describe(high, high_values, claim.metric)} → {describe(low, low_values, claim.metric)}"
    if "exposed_share" in frame and claim.metric != "exposed_share":
        exposed = [spread_of([v for _, v in samples(s, "exposed_share")]).median for s in (high, low)]
        ours += f"; with wait (exposed_share): {fmt_share(exposed[0])} → {fmt_share(exposed[1])}"
    numbers = spread_of(low_values) if low_values else None
    problem = seeds_problem([high, low], [len(high_values), len(low_values)], min_seeds)
    if problem:
        return Verdict(NOT_COMPARABLE, ours, f"{problem} with a measured {claim.metric}", numbers)
    h, lo = spread_of(high_values), spread_of(low_values)
    if lo.median < h.median - margin and lo.high < h.low:
        return Verdict(
            HOLDS,
            ours,
            f"{low.label}'s share is lower in every run, by more than {100 * margin:g} points at the median",
            numbers,
        )
    if lo.median < h.median - margin:
        return Verdict(DOES_NOT_HOLD, ours, "the ranges overlap", numbers)
    return Verdict(
        DOES_NOT_HOLD,
        ours,
        f"no drop beyond {100 * margin:g} points: median {fmt_share(h.median)} → {fmt_share(lo.median)}",
        numbers,
    )


def rule_less_communication(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """`less` reaches the target exchanging at most 1/factor of what `than` exchanges, in every seed
    (bytes to target per worker, paired by seed; not reaching the target is ∞ and fails the claim)."""
    sides, missing = sides_or_missing(frame, [claim.compares["less"], claim.compares["than"]])
    if missing:
        return missing
    a, b = sides
    factor, min_seeds = claim.param("factor"), claim.param("min_seeds")
    a_samples, b_samples = samples(a, claim.metric), samples(b, claim.metric)
    a_values, b_values = [v for _, v in a_samples], [v for _, v in b_samples]
    saving, paired = paired_ratio(b_samples, a_samples)
    ours = (
        f"{saving.text(fmt_ratio)} less{' paired by seed' if paired else ''}; "
        f"{describe(a, a_values, claim.metric)}; {describe(b, b_values, claim.metric)}"
    )
    problem = target_problem(a, b, claim.metric) or seeds_problem([a, b], [len(a_values), len(b_values)], min_seeds)
    if problem:
        return Verdict(NOT_COMPARABLE, ours, problem, saving)
    if all(math.isinf(v) for v in b_values):
        return Verdict(NOT_COMPARABLE, ours, f"{b.label} never reached the target: nothing to match", saving)
    missed = not_reached_note(a, a_values)
    if missed:
        return Verdict(DOES_NOT_HOLD, ours, missed, saving)
    if saving.low >= factor:
        return Verdict(
            HOLDS,
            ours,
            f"{a.label} reached the same target with at least {factor:g}× fewer bytes in every seed",
            saving,
        )
    return Verdict(
        DOES_NOT_HOLD,
        ours,
        f"the saving is below {factor:g}× in some seed ({fmt_ratio(saving.low)} at the least)",
        saving,
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
    eff, paired = paired_ratio(base, top)
    ours = f"E(P={counts[-1]} vs {counts[0]}) = {eff.text(fmt_share)}{' paired by seed' if paired else ''}"
    if ctx.network is not None:
        ours += "; " + alpha_beta_efficiency(frame, algorithm, counts, int(claim.param("extrapolate_to")), ctx.network)
    problem = seeds_problem([smallest, largest], [len(base), len(top)], claim.param("min_seeds"))
    if problem:
        return Verdict(NOT_COMPARABLE, ours, problem, eff)
    target, margin = float(claim.paper_value), claim.param("margin")
    if eff.median >= target and eff.low >= target - margin:
        return Verdict(
            HOLDS,
            ours,
            f"median at least {fmt_share(target)} and no seed below it by more than {100 * margin:g} points",
            eff,
        )
    if eff.median >= target:
        return Verdict(DOES_NOT_HOLD, ours, f"the seeds disagree: lowest {fmt_share(eff.low)}", eff)
    return Verdict(DOES_NOT_HOLD, ours, f"median {fmt_share(eff.median)} is below {fmt_share(target)}", eff)


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
    evaluate: Callable[[pd.DataFrame, Claim, Context], Verdict]
    sides: tuple[str, ...]  # the keys its claim's `compares` must have


RULES: dict[str, Rule] = {
    "faster": Rule(rule_faster, ("faster", "than")),
    "faster_and_stable": Rule(rule_faster_and_stable, ("faster", "than")),
    "fastest_tied": Rule(rule_fastest_tied, ("fastest", "of")),
    "share_lower": Rule(rule_share_lower, ("from", "to")),
    "weak_scaling_efficiency": Rule(rule_weak_scaling_efficiency, ("algorithms",)),
    "less_communication": Rule(rule_less_communication, ("less", "than")),
}


# ---------------------------------------------------------------- needs


def unmet_needs(group: pd.DataFrame, claim: Claim, ctx: Context) -> list[str]:
    """Why this setting's runs are not the paper's kind of measurement (empty when they are)."""
    reasons = []
    needs = claim.needs
    if "device" in needs:
        for platform, rows in group.groupby("platform"):
            device = ctx.device_of(str(platform), rows)
            if device is None:
                reasons.append(
                    f"the device of platform {platform} is unknown (pass --device-of "
                    f"{platform}={needs['device']} if it is one)"
                )
            elif device != needs["device"] and needs["device"] == "gpu":
                reasons.append(f"no GPU: platform {platform} ran on {device}, where CPU–GPU copies do not exist")
            elif device != needs["device"]:
                reasons.append(f"not a {needs['device'].upper()}: platform {platform} ran on {device}")
    for column in ("dataset", "model"):
        wanted = [str(v) for v in needs.get(column, [])]
        found = sorted(set(group[column].astype(str)) - set(wanted))
        if wanted and found:
            reasons.append(f"the paper used {column} {' or '.join(wanted)}, these runs {', '.join(found)}")
    if "target_accuracy" in needs:
        targets = set(pd.to_numeric(group["target_accuracy"], errors="coerce"))
        if any(math.isnan(t) or not math.isclose(t, float(needs["target_accuracy"])) for t in targets):
            shown = ", ".join("none" if math.isnan(t) else f"{t:g}" for t in sorted(targets))
            reasons.append(f"the paper's target is {needs['target_accuracy']:g}, these runs' {shown}")
    if "min_workers" in needs and group["workers"].max() < needs["min_workers"]:
        reasons.append(
            f"our largest P is {group['workers'].max()}; the paper's number needs P ≥ {needs['min_workers']}"
        )
    return reasons


# ------------------------------------------------------------- evaluate


def algorithms_of(claim: Claim) -> list[str]:
    """Every algorithm key a claim's `compares` mentions (alternatives included)."""
    found = []
    for value in claim.compares.values():
        for spec in value if isinstance(value, list) else [value]:
            found += side_spec(spec)[0]
    return list(dict.fromkeys(found))


def setting_label(per: tuple[str, ...], key: tuple) -> str:
    parts = dict(zip(per, key))
    label = "/".join(str(parts.pop(c)) for c in ("dataset", "model") if c in parts)
    rest = [f"P={v}" if c == "workers" else str(v) for c, v in parts.items()]
    return ", ".join([label, *rest] if label else rest)


def row(claim: Claim, setting: str, verdict: Verdict) -> dict:
    numbers = verdict.numbers
    return {
        "id": claim.id,
        "figure": claim.figure,
        "claim": claim.text,
        "setting": setting,
        "paper": claim.paper_text,
        "ours": verdict.ours or "—",
        "verdict": verdict.verdict,
        "reason": verdict.reason,
        "paper_value": claim.paper_value,
        "ours_median": numbers.median if numbers else math.nan,
        "ours_min": numbers.low if numbers else math.nan,
        "ours_max": numbers.high if numbers else math.nan,
        "ours_n": numbers.n if numbers else 0,
    }


def judge(group: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """The rule's verdict on one setting, made "not comparable here" when the setting misses the claim's needs."""
    verdict = RULES[claim.rule].evaluate(group, claim, ctx)
    if verdict.missing:
        return verdict
    unmet = unmet_needs(group, claim, ctx)
    if not unmet:
        return verdict
    finding = f"here it {verdict.verdict}: {verdict.reason}" if verdict.verdict != NOT_COMPARABLE else verdict.reason
    return Verdict(NOT_COMPARABLE, verdict.ours, "; ".join([*unmet, finding]), verdict.numbers)


def evaluate_claim(results: pd.DataFrame, claim: Claim, ctx: Context) -> list[dict]:
    """One row per setting with runs of the claim's algorithms. Settings lacking a side collapse into one
    "not comparable here" row, shown only when no setting could be judged (a config that runs some of a
    claim's algorithms elsewhere, e.g. sync_easgd in a scaling sweep, does not add a row to that claim)."""
    wanted = algorithms_of(claim)
    runs = results[results["algorithm"].isin(wanted)]
    if runs.empty:
        return [row(claim, "—", Verdict(NOT_COMPARABLE, reason=f"no runs of {', '.join(wanted)} in the summary"))]
    rows, incomplete, missing = [], [], {}
    for key, group in runs.groupby(list(claim.per), sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        label = setting_label(claim.per, key)
        verdict = judge(group, claim, ctx)
        if verdict.missing:
            incomplete.append(label)
            missing.update(dict.fromkeys(verdict.missing))
            continue
        rows.append(row(claim, label, verdict))
    if incomplete and not rows:
        settings = plural(len(incomplete), "setting")
        shown = "; ".join(incomplete[:3]) + (f" and {len(incomplete) - 3} more" if len(incomplete) > 3 else "")
        reason = f"missing {', '.join(missing)} in {settings}: {shown}"
        rows.append(row(claim, settings, Verdict(NOT_COMPARABLE, reason=reason)))
    return rows


CLAIM_COLUMNS = [
    "id",
    "figure",
    "claim",
    "setting",
    "paper",
    "ours",
    "verdict",
    "reason",
    "paper_value",
    "ours_median",
    "ours_min",
    "ours_max",
    "ours_n",
]
CLAIM_MARKDOWN_COLUMNS = ["figure", "claim", "setting", "paper", "ours", "verdict", "reason"]


def evaluate(
    results: pd.DataFrame, claims: list[Claim], ctx: Context | None = None, where: str = "results"
) -> pd.DataFrame:
    """The claims table: one row per claim and setting (CLAIM_COLUMNS); `where` names the results in errors."""
    ctx = ctx or Context()
    check_columns(results, claims, where)
    rows = [r for claim in claims for r in evaluate_claim(results, claim, ctx)]
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def required_columns(claims: list[Claim]) -> list[str]:
    columns = list(RUN_KEY)
    for claim in claims:
        columns += [*claim.per, claim.metric] + (["target_accuracy"] if claim.metric in TO_TARGET_METRICS else [])
        columns += ["target_accuracy"] if "target_accuracy" in claim.needs else []
    return list(dict.fromkeys(columns))


def check_columns(results: pd.DataFrame, claims: list[Claim], where: str) -> None:
    missing = [c for c in required_columns(claims) if c not in results.columns]
    if missing:
        raise UserError(
            f"{where}: lacks the column{'s' * (len(missing) > 1)} {', '.join(missing)} "
            "(not a scaledl summary table? write one with scaledl aggregate)"
        )


def read_summary(path: Path) -> pd.DataFrame:
    """The summary table the claims are judged on (scaledl aggregate's CSV)."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such summary table (write it with scaledl aggregate)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        # pandas' parser and empty-data errors are ValueErrors
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not a readable summary table ({first_line})") from None


def claims_markdown(table: pd.DataFrame, summary: Path) -> str:
    """The claims table as a markdown page: the count of rows per verdict, then the table."""
    counts = ", ".join(f"{v}: {int((table['verdict'] == v).sum())}" for v in VERDICTS)
    return (
        f"# The paper's claims against {summary}\n\nRows by verdict: {counts}. Ours is median [min–max] "
        "over seeds and n; the verdict rules are in scaledl.report.claims.\n\n"
        + markdown_table(table[CLAIM_MARKDOWN_COLUMNS])
    )


# ------------------------------------------------------------- loading


def default_claims_text() -> str:
    return resources.files("scaledl.report").joinpath("claims.yaml").read_text(encoding="utf-8")


def load_claims(path: str | Path | None = None) -> list[Claim]:
    """The claims of `path` (default: the packaged claims.yaml), checked; UserError naming what is wrong."""
    where = str(path) if path is not None else "claims.yaml (packaged)"
    try:
        text = Path(path).read_text(encoding="utf-8") if path is not None else default_claims_text()
    except FileNotFoundError:
        raise UserError(f"{where}: no such claims file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(f"{where}: not readable ({error})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UserError(f"{where}: not valid YAML ({' '.join(str(error).split())})") from None
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or not data["claims"]:
        raise UserError(f"{where}: expected a mapping with a non-empty list under 'claims'")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise UserError(f"{where}: 'defaults' must be a mapping of rule parameters")
    claims = [parse_claim(entry, defaults, where, i) for i, entry in enumerate(data["claims"])]
    ids = [c.id for c in claims]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise UserError(f"{where}: claim ids must be unique ({', '.join(duplicates)} repeated)")
    return claims


def parse_claim(entry, defaults: dict, where: str, index: int) -> Claim:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: claim {index + 1} is not a mapping")
    name = entry.get("id", f"#{index + 1}")

    def fail(problem: str) -> UserError:
        return UserError(f"{where}: claim {name}: {problem}")

    missing = [k for k in ("id", "figure", "claim", "compares", "paper", "metric", "rule") if k not in entry]
    if missing:
        raise fail(f"lacks {', '.join(missing)}")
    unknown = sorted(set(entry) - CLAIM_KEYS)
    if unknown:
        raise fail(f"unknown key{'s' * (len(unknown) > 1)} {', '.join(unknown)}")
    rule = entry["rule"] if isinstance(entry["rule"], dict) else {"name": entry["rule"]}
    if rule.get("name") not in RULES:
        raise fail(f"unknown rule {rule.get('name')!r}; known rules: {', '.join(RULES)}")
    compares = entry["compares"]
    expected = RULES[rule["name"]].sides
    if not isinstance(compares, dict) or set(compares) != set(expected):
        raise fail(f"rule {rule['name']} compares {{{', '.join(expected)}}}, got {compares!r}")
    paper = entry["paper"] if isinstance(entry["paper"], dict) else {"text": str(entry["paper"])}
    needs = entry.get("needs") or {}
    if not isinstance(needs, dict) or set(needs) - NEEDS_KEYS:
        raise fail(f"needs takes {', '.join(sorted(NEEDS_KEYS))}")
    if "device" in needs and needs["device"] not in DEVICE_KINDS:
        raise fail(f"needs.device must be one of {', '.join(DEVICE_KINDS)}")
    per = tuple(entry.get("per") or SETTING)
    claim = Claim(
        id=str(entry["id"]),
        figure=str(entry["figure"]),
        text=" ".join(str(entry["claim"]).split()),
        compares=compares,
        paper_text=str(paper.get("text", "")),
        paper_value=paper.get("value"),
        metric=str(entry["metric"]),
        rule=rule["name"],
        params={**defaults, **{k: v for k, v in rule.items() if k != "name"}},
        per=per,
        needs=needs,
        note=" ".join(str(entry.get("note", "")).split()),
    )
    unknown_algorithms = [a for a in algorithms_of(claim) if a not in ALGORITHMS]
    if unknown_algorithms:
        raise fail(
            f"unknown algorithm{'s' * (len(unknown_algorithms) > 1)} {', '.join(unknown_algorithms)}; "
            f"known: {', '.join(ALGORITHMS)}"
        )
    if rule["name"] == "weak_scaling_efficiency" and claim.paper_value is None:
        raise fail("weak_scaling_efficiency compares with the paper's value; give paper.value")
    return claim
