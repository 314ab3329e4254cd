"""The paper's claims, checked against the summary table with named verdict rules.

The claims are data (claims.yaml beside this module, or a file of the same
shape), fixed before any run: the report prints the file's git blob hash.
Each names a rule from `RULES` and gives its parameters. A rule reads the
runs of one *setting* (the claim's `per` columns, by default
scaledl.report.runs.SETTING: dataset, model, platform and workers) under one
*protocol* and returns a `Verdict`: **holds**, **reversed** (the opposite is
shown), **not tied** (a tie claim whose sides are shown apart: the tie is
refuted, which is not the opposite of the claim), **inconclusive** (neither
is shown at the claims' level) or **not comparable here** (the runs cannot
say), with our numbers and a reason.

Protocols. A claim is judged twice where the config ran both: on the
**tuned** runs (setting `tuned`: each algorithm at its own best settings from
the tune stage, an equal budget of trials per method) and on the
**shared-η** runs (no setting: one step size for every method, the ablation;
and each point of a sweep, `lr0.05`, judged on its own: the row's setting names
it), so a reader sees how much of a verdict the protocol decides. A side is one
configuration (its settings, swept or not: scaledl.report.identity); runs of
one algorithm at several settings are never pooled as seeds, but refused. A claim whose
sides name a setting (`sync_sgd@tuned-lr0.1x`) is judged once, on those runs
(the controls).

Protocol of a comparison, common to every rule:

- **Samples.** A side is the runs of one algorithm (and worker count) in the
  setting; its samples are the metric's values, one per seed. A time, steps
  or bytes to target of a run that never reached it is +∞, never dropped;
  times and steps to target are the crossing interpolated between
  evaluations (scaledl.train.monitor.crossing). Another missing value (no
  steady state) is left out, which lowers n.
- **Pairing and the test.** The sides are paired by seed; each seed is *for*
  the claim (beyond the margin), *against* it (beyond the margin the other
  way), *tied* (within it) or *undefined* (neither reached the target). The
  exact one-sided sign test over every seed decides at α = 0.05 (`alpha`):
  holds when the seeds for are significant among all n, reversed when those
  against are, inconclusive otherwise; a tied or undefined seed counts
  against whichever direction is tested, so the margin or the evaluation
  spacing cannot make a claim easier to decide by moving seeds into ties.
  Each row says k for, j against, t tied of n. With n seeds the test can
  decide only when enough of them agree (all 5 of 5, 6 of 6, 7 of 8, ...):
  the row says how many, the smallest effect n could detect. A side with fewer than
  `min_seeds` samples makes the setting not comparable.
- **Numbers.** The median speedup over the seeds with the exact
  order-statistic interval of that median (stats.median_interval: the
  narrowest [x(k), x(n+1−k)] covering it with at least 95 %, labelled with
  its true coverage, e.g. "93.8 %" for [min, max] of 5), n, and, for times to target, the decomposition
  *time = steps to target × seconds per step* of each side, and of the
  speedup into its two factors: does a method win by needing fewer steps or
  by cheaper steps.

Rules (parameter defaults in the claims file's `defaults`):

- ``faster`` (A reaches the target sooner than B): a seed is for when
  t_B / t_A > 1 + margin, against when t_A / t_B > 1 + margin.
- ``faster_and_stable``: ``faster``, and A more stable than B: A reaches the
  target in more seeds (Fisher's exact test, one-sided), or, both in every
  seed, A's times vary less (the Brown–Forsythe test on log times, one-sided
  by the sign of the spread difference; both sides constant over seeds leave
  no spread to compare: inconclusive). Holds when both hold; reversed when
  either is reversed; inconclusive otherwise.
- ``unbeaten`` (A is beaten by no method of the list B1 … Bm): A is paired
  with each Bi by seed as in ``faster``. **Reversed** when some Bi is
  significantly faster than A after Holm's correction over the m one-sided
  p-values (of "Bi faster"): the reason names each with its adjusted p.
  **Holds** when A is shown not slower than every Bi: for each, the sign
  test of "not slower beyond the margin" (a seed is for when
  t_Bi / t_A ≥ 1 / (1 + margin)) is significant at α; all m must be, so no
  correction applies (an intersection–union test). **Inconclusive**
  otherwise: no rival is shown faster, nor is A shown not slower than all.
- ``tied`` (A and B tied within ±tie): the exact interval of the median log
  speedup of A over B at a coverage of at least 90 % (printed with its true
  coverage) within ±log(1 + tie) (two one-sided tests):
  holds; wholly outside it: **not tied** (its own verdict, naming the faster
  side, never "reversed": a clear winner does not contradict that both are
  the fastest); an interval that straddles the band, or is undefined:
  inconclusive.
- ``share_lower`` (a share falls from A to B): a seed is for when the drop
  exceeds the margin (share points). A simulated share is one measurement
  per side (its median over seeds, which differ only by timing noise; one
  seed suffices), the drop beyond ±margin deciding, with no sign test.
- ``less_communication`` (A reaches the target exchanging at most 1/factor of
  B's bytes): a seed is for when B's bytes over A's is at least `factor`.
- ``weak_scaling_efficiency``: per sweep over the worker count and per seed,
  E = seconds per step at the smallest P over that at the largest; a seed is
  for when E ≥ the paper's value − margin. A simulated sweep is one number per
  configuration (its seeds differ only by timing noise): its median E decides,
  without a sign test. With a netbench file the α-β
  model's efficiency at our largest P and at `extrapolate_to` is printed.
- ``not_slower`` (the inclusion check: a general method tuned must not lose
  to its own special case tuned, e.g. DiLoCo with outer lr 1 and momentum 0
  is local SGD), on time to target for a timing-equivalent pair and on steps
  to target for a pair equivalent only in its numerics (Async MSGD with its
  momentum at the master moves twice the bytes per step of Async SGD). With
  `sided` 1, reversed when the special case is significantly better
  (one-sided); with `sided` 2, a two-sided test at α decides in the
  direction it finds (the general better: holds). Otherwise holds only when
  the general method is shown not worse beyond the margin (a seed within it
  counts for), else inconclusive. A reversal names its cause: where the
  rule's `special_case` (the settings that make the general method its
  special case, e.g. {momentum: 0}) lies outside what the general method's
  tune swept (the tuned runs' `tuned_swept`), "its special case lies outside
  its search space", with the value each setting was fixed at; only inside
  it, "tuning budget too small for" the general method.

- ``same_numerics`` (the A/A check: two algorithms that do the same
  arithmetic, the registry's `numerics_of`, reach the target in the same
  steps): tied on steps to target as in ``tied``; when not, the reason says
  what decided it: the tuning (the sides ran at different chosen settings,
  printed) or, at the same settings, the harness.

**Undefined tests.** A test whose result is undefined (NaN: Levene's test
on two constant sides, an interval or efficiency over undefined ratios) is
inconclusive, its reason saying why; NaN never falls through a comparison
into another verdict.

**Distinct values.** Each side's numbers say how many distinct values its n
seeds gave ("n=5, 2 distinct"): seeds that repeat one number (a
deterministic simulated time, times to target quantised by the evaluation
interval) are fewer observations than n says.

**Needs.** A setting that misses a claim's `needs` (the device, dataset,
model, target or scale the paper's number belongs to) is not comparable here
whatever the rule found; the rule's numbers and finding stay in the reason.
"""

from __future__ import annotations

import csv
import hashlib
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import yaml
from scipy import stats as scipy_stats

from scaledl.algorithms import ALGORITHMS
from scaledl.config import TrainConfig
from scaledl.errors import UserError
from scaledl.grid.tune import RUNNER_UP as RUNNER_UP_SETTING
from scaledl.grid.tune import TUNED as TUNED_SETTING
from scaledl.grid.tune import same_cell
from scaledl.net.alphabeta import COST_MODELS, Network, efficiency
from scaledl.report.comm_model import measured_per_step
from scaledl.report.identity import NAMES, value_text
from scaledl.report.runs import RUN_KEY, SETTING, read_run
from scaledl.report.sensitivity import claim_text
from scaledl.report.sides import first_present, side_name, side_spec
from scaledl.report.stats import (
    ALPHA,
    DASH,
    SignTest,
    Spread,
    distinct,
    divide,
    fmt_ratio,
    fmt_share,
    fmt_value,
    holm,
    median_interval,
    nan_last,
    plural,
    seeds_to_decide,
    sign_test,
    spread_of,
)
from scaledl.report.summary import SUMMARY_COLUMNS
from scaledl.report.tables import markdown_table
from scaledl.report.tuning import effective_step

HOLDS, REVERSED, INCONCLUSIVE, NOT_COMPARABLE = "holds", "reversed", "inconclusive", "not comparable here"
NOT_TIED = "not tied"  # a tie claim refuted by a clear winner (the `tied` rule): not the claim's opposite
VERDICTS = (HOLDS, REVERSED, NOT_TIED, INCONCLUSIVE, NOT_COMPARABLE)
TUNED, SHARED, CONTROL = "tuned", "shared η", "control"  # the protocols a claim is judged under
RUNNER_UP = "runner-up η"  # the tuned runs again at each side's second-best η: does the verdict survive it?
PROTOCOLS = (TUNED, RUNNER_UP, SHARED)  # the order of the report's columns
# the summary's `setting` of each protocol's runs
PROTOCOL_SETTINGS = {TUNED: ("tuned",), RUNNER_UP: (f"tuned-{RUNNER_UP_SETTING}",), SHARED: ("",)}
# ... and a sweep's points ("lr0.05"), judged as shared-η runs each apart; "tuned-lr0.1x" only by the controls
TUNED_PREFIX = "tuned"

TIME_METRIC = "time_to_target_s"
STEPS_METRIC = "steps_to_target"  # interpolated, as the time (scaledl.train.monitor.crossing)
TO_TARGET_METRICS = (TIME_METRIC, STEPS_METRIC, "bytes_to_target")  # missing in a run that missed: "not reached"
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

    @property
    def names_settings(self) -> bool:
        """Its sides name their runs' settings (a control, judged once on those runs)."""
        return any("@" in spec for spec in sides_of(self))


@dataclass(frozen=True)
class Verdict:
    verdict: str
    ours: str = ""
    reason: str = ""
    numbers: Spread | None = None
    missing: tuple[str, ...] = ()  # sides with no runs in the setting (collapsed over settings by `evaluate`)
    decomposition: str = ""  # time to target = steps × seconds per step, per side and for the speedup
    faster: str = ""  # the side that won where the verdict names one (a tie refuted: not tied)


@dataclass
class Context:
    """What the results do not say about themselves: each platform's device, and the measured network."""

    devices: dict[str, str] = field(default_factory=dict)
    network: Network | None = None  # every platform's, unless `networks` names the platform
    networks: dict[str, Network] = field(default_factory=dict)  # a platform's own (a simulated one's, say)
    sensitivity: list[dict] = field(default_factory=list)  # sensitivity.csv rows of scaledl sensitivity's sweeps

    def network_of(self, rows: pd.DataFrame) -> Network | None:
        """The network of the rows' platform: its own when `networks` has it, else the common one."""
        platforms = set(rows["platform"].astype(str)) if "platform" in rows else set()
        if len(platforms) == 1 and (platform := platforms.pop()) in self.networks:
            return self.networks[platform]
        return self.network

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


def split_setting(spec):
    """A side and the setting it names ("sync_sgd@tuned-lr0.1x"), or None when it names none."""
    if isinstance(spec, dict):
        algorithm, _, setting = str(spec["algorithm"]).partition("@")
        return {**spec, "algorithm": algorithm}, (setting if "@" in str(spec["algorithm"]) else None)
    algorithm, sep, setting = str(spec).partition("@")
    return algorithm, (setting if sep else None)


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


TUNED_COLUMNS = ("tuned_lr", "tuned_effective_step", "tuned_edge", "tuned_runner_up_lr", "tuned_reached", "tuned_swept")


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


def untuned(sides: list[Side]) -> list[str]:
    """The sides whose tuned choice never reached the validation target: no verdict can rest on them."""
    return [
        s.label
        for s in sides
        if "tuned_reached" in s.rows and (pd.to_numeric(s.rows["tuned_reached"], errors="coerce") == 0).any()
    ]


def with_choices(results: pd.DataFrame, chosen: pd.DataFrame | None) -> pd.DataFrame:
    """The results with each tuned run's choice beside it (TUNED_COLUMNS), found as a tuned run finds its
    settings: its cell's row, or that of an algorithm doing the same arithmetic (scaledl.grid.tune.same_cell)."""
    if chosen is None or chosen.empty:
        return results
    choices = [SimpleNamespace(**row) for row in chosen.to_dict("records")]
    found = []
    for row in results.itertuples(index=False):
        tuned = str(getattr(row, "setting", "")).startswith(TUNED_SETTING)
        match = next((c for c in choices if tuned and same_cell(row, c)), None)
        runner_up = str(row.setting).endswith(RUNNER_UP_SETTING)  # these runs took the runner-up η
        lr = (match.runner_up_lr if runner_up else match.lr) if match else math.nan
        found.append(
            {
                "tuned_lr": lr,
                "tuned_effective_step": (
                    effective_step(row.algorithm, lr, int(row.workers), getattr(row, "momentum", None))
                    if match
                    else math.nan
                ),
                "tuned_edge": (match.edge if isinstance(match.edge, str) else "") if match else "",
                "tuned_runner_up_lr": match.runner_up_lr if match else math.nan,
                "tuned_reached": match.points_reached if match else math.nan,
                "tuned_swept": (getattr(match, "tuned", "") if isinstance(getattr(match, "tuned", ""), str) else "")
                if match
                else "",
            }
        )
    return pd.concat([results.reset_index(drop=True), pd.DataFrame(found)], axis=1)


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


# ---------------------------------------------------------------- tests


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
    return result(verdict, f"{who}: {test_text(test, alpha)}" + (f" ({notes})" if notes else ""), test)


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


# ---------------------------------------------------------------- rules


def rule_faster(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["faster"], claim.compares["than"]])
    if missing:
        return missing
    a, b = sides
    return as_verdict(
        compare(a, b, claim.metric, claim.param("margin"), claim.param("min_seeds"), claim.param("alpha"))
    )


def more_stable(a_values: list[float], b_values: list[float], alpha: float) -> tuple[str, str]:
    """Whether a is more stable than b (holds / reversed / inconclusive) and the numbers that decided it."""
    reached_a, reached_b = (sum(not math.isinf(v) for v in values) for values in (a_values, b_values))
    n_a, n_b = len(a_values), len(b_values)
    reached = f"reached in {reached_a} of {n_a} seeds vs {reached_b} of {n_b}"
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


def combined(verdicts: list[str]) -> str:
    """Holds when every part holds; reversed when one is reversed; not comparable or inconclusive otherwise."""
    if NOT_COMPARABLE in verdicts:
        return NOT_COMPARABLE
    if REVERSED in verdicts:
        return REVERSED
    return HOLDS if all(v == HOLDS for v in verdicts) else INCONCLUSIVE


def rule_faster_and_stable(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["faster"], claim.compares["than"]])
    if missing:
        return missing
    a, b = sides
    alpha = claim.param("alpha")
    result = compare(a, b, claim.metric, claim.param("margin"), claim.param("min_seeds"), alpha)
    if result.verdict == NOT_COMPARABLE:
        return as_verdict(result)
    stable, numbers = more_stable(result.a_values, result.b_values, alpha)
    verdict = combined([result.verdict, stable])
    reason = f"faster: {result.verdict} ({result.reason}); more stable: {stable} ({numbers})"
    return Verdict(verdict, f"{result.ours}; {numbers}", reason, result.ratio, decomposition=result.decomposition)


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


def rule_tied(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["tied"], claim.compares["with"]])
    if missing:
        return missing
    a, b = sides
    verdict, reason, spread, faster = equivalence(a, b, claim.metric, claim.param("tie"), claim.param("min_seeds"))
    values = [[v for _, v in samples(side, claim.metric)] for side in sides]
    ours = (
        f"speedup of {a.label} over {b.label} {spread.text(fmt_ratio)}; "
        f"{describe(a, values[0], claim.metric)}; {describe(b, values[1], claim.metric)}"
    )
    parts = " · ".join(filter(None, (decomposition(a), decomposition(b), factors(a, b))))
    return Verdict(verdict, ours, reason, spread, decomposition=parts, faster=faster)


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


def not_slower_test(test: SignTest) -> SignTest:
    """The sign test of "a is not slower beyond the margin" from that of "a is faster beyond it": a seed
    within the margin counts for a."""
    return SignTest(wins=test.wins + test.ties, losses=test.losses, ties=0, undefined=test.undefined)


def rule_unbeaten(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """No rival is faster than `unbeaten`: reversed when one is, after Holm's correction over the rivals;
    holds when `unbeaten` is shown not slower than each (every test at α: an intersection–union test)."""
    rival_specs = list(claim.compares["by"])
    sides, missing = sides_or_missing(frame, [claim.compares["unbeaten"], *rival_specs])
    if missing:
        return missing
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


def rule_share_lower(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    sides, missing = sides_or_missing(frame, [claim.compares["from"], claim.compares["to"]])
    if missing:
        return missing
    high, low = sides
    margin, min_seeds, alpha = claim.param("margin"), claim.param("min_seeds"), claim.param("alpha")
    high_samples, low_samples = samples(high, claim.metric), samples(low, claim.metric)
    high_values, low_values = [v for _, v in high_samples], [v for _, v in low_samples]
    ours = f"{describe(high, high_values, claim.metric)} → {describe(low, low_values, claim.metric)}"
    if "exposed_share" in frame and claim.metric != "exposed_share":
        exposed = [spread_of([v for _, v in samples(s, "exposed_share")]).median for s in (high, low)]
        ours += f"; with wait (exposed_share): {fmt_share(exposed[0])} → {fmt_share(exposed[1])}"
    numbers = spread_of(low_values) if low_values else None
    if simulated_platform(frame):
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


def rule_less_communication(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """`less` reaches the target exchanging at most 1/factor of what `than` exchanges (bytes to target per
    worker, paired by seed; not reaching the target is ∞ and counts against)."""
    sides, missing = sides_or_missing(frame, [claim.compares["less"], claim.compares["than"]])
    if missing:
        return missing
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
        # A simulated sweep's efficiency is a property of the platform, not a sample: its seeds differ only by
        # timing noise, so a sign test over them would test one number repeated. What moves it is the platform's
        # constants (the sensitivity sweep), not the seed.
        if math.isnan(eff.median):  # no seed in common at both P, or only undefined ratios
            return Verdict(INCONCLUSIVE, ours, "efficiency undefined: no seed with seconds per step at both P", eff)
        holds = eff.median >= target - margin
        where = "at least" if holds else "below"
        reason = f"{where} {fmt_share(target - margin)} in simulation (one efficiency per configuration, no sign test)"
        return Verdict(HOLDS if holds else REVERSED, ours, reason, eff)
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


def rule_not_slower(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """The inclusion check: the general method tuned is not worse than its special case tuned, on the claim's
    metric (time to target for a timing-equivalent pair, steps to target for a pair equivalent only in its
    numerics). `sided` 1: the special case significantly better at α reverses it; 2: a significant difference
    either way at α two-sided decides, in its direction. Without one, holds only when the general method is
    shown not worse beyond the margin (a seed within it counts for), else inconclusive: nothing passes by
    default."""
    sides, missing = sides_or_missing(frame, [claim.compares["general"], claim.compares["special"]])
    if missing:
        return missing
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


def rule_same_numerics(frame: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """The A/A check: two algorithms that do the same arithmetic (the registry's `numerics_of`) must reach the
    target in the same steps, tied as the ``tied`` rule ties. When they are not, the reason says what decided
    it: different chosen settings (the tuning decided it), or, at the same settings, the harness (a bug)."""
    sides, missing = sides_or_missing(frame, [claim.compares["same"], claim.compares["as"]])
    if missing:
        return missing
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


@dataclass(frozen=True)
class Rule:
    evaluate: Callable[[pd.DataFrame, Claim, Context], Verdict]
    sides: tuple[str, ...]  # the keys its claim's `compares` must have


RULES: dict[str, Rule] = {
    "faster": Rule(rule_faster, ("faster", "than")),
    "faster_and_stable": Rule(rule_faster_and_stable, ("faster", "than")),
    "unbeaten": Rule(rule_unbeaten, ("unbeaten", "by")),
    "tied": Rule(rule_tied, ("tied", "with")),
    "share_lower": Rule(rule_share_lower, ("from", "to")),
    "weak_scaling_efficiency": Rule(rule_weak_scaling_efficiency, ("algorithms",)),
    "less_communication": Rule(rule_less_communication, ("less", "than")),
    "not_slower": Rule(rule_not_slower, ("general", "special")),
    "same_numerics": Rule(rule_same_numerics, ("same", "as")),
}
INCLUSION_RULES = ("not_slower",)  # judged on the tuned runs only: a check of the tuning, not of the paper


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


def sides_of(claim: Claim) -> list:
    """Every side a claim's `compares` names."""
    found = []
    for value in claim.compares.values():
        found += value if isinstance(value, list) else [value]
    return found


def algorithms_of(claim: Claim) -> list[str]:
    """Every algorithm key a claim's `compares` mentions (alternatives included)."""
    return list(dict.fromkeys(a for spec in sides_of(claim) for a in side_spec(split_setting(spec)[0])[0]))


def setting_label(per: tuple[str, ...], key: tuple) -> str:
    parts = dict(zip(per, key))
    label = "/".join(str(parts.pop(c)) for c in ("dataset", "model") if c in parts)
    rest = [f"P={v}" if c == "workers" else str(v) for c, v in parts.items()]
    return ", ".join([label, *rest] if label else rest)


def grid_point(setting: str) -> str:
    """A sweep's point as a row's setting ends (", lr0.05"); nothing for a protocol's own (none, tuned, the
    runner-up's): the protocol's column says which it is."""
    own = {value for values in PROTOCOL_SETTINGS.values() for value in values}
    return f", {setting}" if setting not in own else ""


def row(
    claim: Claim,
    protocol: str,
    setting: str,
    verdict: Verdict,
    simulated_on: str = "",
    sensitivity: str = "",
    oversubscribed: str = "",
) -> dict:
    numbers = verdict.numbers
    reason = verdict.reason + (f" Oversubscribed: {oversubscribed}." if oversubscribed else "")
    return {
        "simulated_on": simulated_on,
        "id": claim.id,
        "figure": claim.figure,
        "claim": claim.text,
        "protocol": protocol,
        "setting": setting,
        "paper": claim.paper_text,
        "ours": verdict.ours or "—",
        "verdict": verdict.verdict,
        "faster": verdict.faster,
        "reason": reason,
        "decomposition": verdict.decomposition,
        "paper_value": claim.paper_value,
        "ours_median": numbers.median if numbers else math.nan,
        "ours_min": numbers.low if numbers else math.nan,
        "ours_max": numbers.high if numbers else math.nan,
        "ours_n": numbers.n if numbers else 0,
        "sensitivity": sensitivity,
        "oversubscribed": oversubscribed,
    }


def oversubscribed_sides(group: pd.DataFrame) -> str:
    """Which of a setting's sides ran more ranks than their machine's cores ("async_sgd ran 3 ranks on 2
    cores"): "" when none did (or the summary does not say)."""
    if "oversubscribed" not in group:
        return ""
    over = group[group["oversubscribed"].map(lambda v: v is True or v == 1)]
    named = over.drop_duplicates("algorithm")
    return "; ".join(f"{r.algorithm} ran {r.ranks:g} ranks on {r.cores:g} cores" for r in named.itertuples())


def simulated_platform(group: pd.DataFrame) -> str:
    """The simulated platform a setting's runs ran on ("" for real hardware): the summary's `simulated_on`."""
    if "simulated_on" not in group:
        return ""
    found = sorted({str(v) for v in group["simulated_on"].dropna() if str(v)})
    return ", ".join(found)


def sensitivity_of(claim: Claim, group: pd.DataFrame, platform: str, ctx: Context) -> str:
    """Beside a simulated verdict that one side reaches the target sooner: how its sweep over the platform's
    constants came out (a sweep of the claimed faster side against the other on this platform at the group's
    P), else "not swept"; "" beside a measured verdict or another kind of claim."""
    if not platform or claim.metric != TIME_METRIC or set(claim.compares) != {"faster", "than"}:
        return ""
    faster, slower = (side_spec(split_setting(claim.compares[key])[0])[0] for key in ("faster", "than"))
    workers = {str(int(w)) for w in group["workers"].dropna()} if "workers" in group else set()
    rows = [
        r
        for r in ctx.sensitivity
        if r["faster"] in faster and r["slower"] in slower and r["platform"] == platform
        and (not workers or str(r["workers"]) in workers)
    ]  # fmt: skip
    return claim_text(rows)


def read_sensitivity(paths: list[Path]) -> list[dict]:
    """The rows of scaledl sensitivity's sensitivity.csv files."""
    rows = []
    for path in paths:
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                found = list(csv.DictReader(handle))
        except OSError as error:
            raise UserError(f"--sensitivity {path}: cannot read it ({error.strerror})") from None
        if not found or not {"faster", "slower", "platform", "constant", "flips_at"} <= set(found[0]):
            raise UserError(f"--sensitivity {path}: not a sensitivity.csv of scaledl sensitivity")
        rows += found
    return rows


def judge(group: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """The rule's verdict on one setting, made "not comparable here" when the setting misses the claim's needs."""
    verdict = RULES[claim.rule].evaluate(group, claim, ctx)
    if verdict.missing:
        return verdict
    sides = [side for spec in sides_of(claim) if (side := pick_side(group, spec)) is not None]
    if lost := untuned(sides):
        reason = f"{', '.join(lost)}: no point of the tune grid reached the validation target (untuned)"
        return Verdict(NOT_COMPARABLE, verdict.ours, reason, verdict.numbers, decomposition=verdict.decomposition)
    unmet = unmet_needs(group, claim, ctx)
    if not unmet:
        return verdict
    finding = f"here it {verdict.verdict}: {verdict.reason}" if verdict.verdict != NOT_COMPARABLE else verdict.reason
    return Verdict(
        NOT_COMPARABLE, verdict.ours, "; ".join([*unmet, finding]), verdict.numbers, decomposition=verdict.decomposition
    )


def evaluate_claim(results: pd.DataFrame, claim: Claim, ctx: Context, protocol: str) -> list[dict]:
    """One row per setting with runs of the claim's algorithms. Settings lacking a side collapse into one
    "not comparable here" row, shown only when no setting could be judged (a config that runs some of a
    claim's algorithms elsewhere, e.g. sync_easgd in a scaling sweep, does not add a row to that claim)."""
    wanted = algorithms_of(claim)
    runs = results[results["algorithm"].isin(wanted)]
    if runs.empty:
        reason = f"no runs of {', '.join(wanted)} in the summary"
        return [row(claim, protocol, "—", Verdict(NOT_COMPARABLE, reason=reason))]
    rows, incomplete, missing = [], [], {}
    # simulated runs never share a verdict with measured ones, whatever the claim's `per`
    apart = ["simulated_on"] if "simulated_on" in runs and "simulated_on" not in claim.per else []
    # each point of a sweep is judged on its own, its name ending the row's setting (a control's sides name theirs)
    point = ["setting"] if "setting" in runs and "setting" not in claim.per and not claim.names_settings else []
    runs = runs.assign(setting=runs["setting"].fillna("").astype(str)) if point else runs
    for key, group in runs.groupby([*claim.per, *point, *apart], sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        label = setting_label(claim.per, key[: len(claim.per)]) + grid_point(key[len(claim.per)] if point else "")
        verdict = judge(group, claim, ctx)
        if verdict.missing:
            incomplete.append(label)
            missing.update(dict.fromkeys(verdict.missing))
            continue
        platform = simulated_platform(group)
        sensitivity = sensitivity_of(claim, group, platform, ctx)
        rows.append(row(claim, protocol, label, verdict, platform, sensitivity, oversubscribed_sides(group)))
    if incomplete and not rows:
        settings = plural(len(incomplete), "setting")
        shown = "; ".join(incomplete[:3]) + (f" and {len(incomplete) - 3} more" if len(incomplete) > 3 else "")
        reason = f"missing {', '.join(missing)} in {settings}: {shown}"
        rows.append(row(claim, protocol, settings, Verdict(NOT_COMPARABLE, reason=reason), simulated_platform(runs)))
    return rows


CLAIM_COLUMNS = [
    "id", "figure", "claim", "protocol", "setting", "paper", "ours", "verdict", "faster", "reason", "decomposition",
    "paper_value", "ours_median", "ours_min", "ours_max", "ours_n", "simulated_on", "sensitivity", "oversubscribed",
]  # fmt: skip


def protocols_of(results: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The protocols the results hold runs of: {tuned, shared η: their runs}, tuned first."""
    settings = results["setting"].fillna("").astype(str) if "setting" in results else pd.Series("", results.index)
    found = {name: results[settings.isin(values)] for name, values in PROTOCOL_SETTINGS.items()}
    found[SHARED] = results[~settings.str.startswith(TUNED_PREFIX)]  # no setting, or a sweep's point
    return {name: runs for name, runs in found.items() if not runs.empty} or {SHARED: results.iloc[0:0]}


def evaluate(
    results: pd.DataFrame, claims: list[Claim], ctx: Context | None = None, where: str = "results"
) -> pd.DataFrame:
    """The claims table: one row per claim, protocol and setting (CLAIM_COLUMNS); `where` names the results
    in errors. A control is judged once, on the runs its sides name; an inclusion check on the tuned runs."""
    ctx = ctx or Context()
    check_columns(results, claims, where)
    protocols = protocols_of(results)
    rows = []
    for claim in claims:
        if claim.names_settings:
            rows += evaluate_claim(results, claim, ctx, CONTROL)
        elif claim.rule in INCLUSION_RULES:
            rows += evaluate_claim(protocols[TUNED], claim, ctx, TUNED) if TUNED in protocols else []
        else:
            rows += [r for name, runs in protocols.items() for r in evaluate_claim(runs, claim, ctx, name)]
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def required_columns(claims: list[Claim]) -> list[str]:
    columns = [c for c in RUN_KEY if c != "setting"]  # a summary without settings: every run shared-η
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
        return pd.read_csv(path, keep_default_na=False, na_values=[""])
    except FileNotFoundError:
        raise UserError(f"{path}: no such summary table (write it with scaledl aggregate)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        # pandas' parser and empty-data errors are ValueErrors
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not a readable summary table ({first_line})") from None


def blob_hash(text: str) -> str:
    """The git blob hash of a file with this text (what `git hash-object` prints): the claims' fixed version."""
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def claims_markdown(table: pd.DataFrame, summary: Path, claims_text: str, claims_where: str) -> str:
    """The claims page: the protocol, the paper's claims under each protocol side by side, the controls and
    the inclusion checks, each row with its decomposition."""
    counts = ", ".join(f"{v}: {int((table['verdict'] == v).sum())}" for v in VERDICTS)
    lines = [
        f"# The paper's claims against {summary}",
        "",
        f"Claims: {claims_where}, git blob {blob_hash(claims_text)[:12]}, fixed before the runs. Rows by "
        f"verdict: {counts}. Each comparison is paired by seed and decided by the exact sign test at "
        f"α = {ALPHA:g} (holds, reversed, or inconclusive), Holm-corrected where one method is compared with "
        "several; a tie refuted by a clear winner is not tied, never reversed. Ours is the median over seeds "
        "with the exact interval of that median (labelled with its true coverage: 93.8 % is [min, max] of 5), n "
        "and how many distinct values the seeds gave; time to target (the crossing, interpolated between "
        "evaluations) = steps to target × seconds per step for each side. The rules are in scaledl.report.claims.",
        "",
    ]
    checks = table["id"].isin(inclusion_ids(table) + aa_ids(table))  # checks of the harness, not the paper's
    paper = table[~table["protocol"].isin([CONTROL]) & ~checks]
    simulated = paper["simulated_on"].fillna("").astype(str) if "simulated_on" in paper else pd.Series("", paper.index)
    unrun = paper["setting"] == "—"  # a claim with no runs at all: said once, beside the runs there are
    if simulated.any() and not ((simulated == "") & ~unrun).any():
        simulated = simulated.where(~unrun, sorted(set(simulated) - {""})[0])  # only simulated runs here
    if simulated.any():
        lines += [
            "## Measured and simulated, claim by claim",
            "",
            "Each column's verdicts, setting by setting; a simulated platform's runs are judged on their own "
            "(simulated seconds on the platform named), never with measured ones; `agree` says whether the "
            "simulated verdicts are the measured ones (— where either side was not judged; † where a measured "
            "side ran more ranks than cores, whose step prices are the scheduler's, counted apart).",
            "",
            markdown_table(overview(paper, simulated)),
            "",
            *agreement_counts(paper, simulated),
        ]
    for platform in ["", *sorted(set(simulated) - {""})]:
        part = paper[simulated == platform]
        if part.empty:
            continue
        where = f", simulated on {platform}" if platform else (", measured" if simulated.any() else "")
        lines += [
            f"## The paper's claims{where}, tuned and at one shared η",
            "",
            markdown_table(side_by_side(part)),
            "",
        ]
    for title, part in (
        ("Controls (the harness must call these holds)", table[table["protocol"] == CONTROL]),
        (
            "Inclusion checks (a general method tuned never loses to its special case tuned)",
            table[table["id"].isin(inclusion_ids(table))],
        ),
        (
            "A/A check (numerically identical configurations must come out tied; where they do not, the reason "
            "says whether the tuning decided it)",
            table[table["id"].isin(aa_ids(table))],
        ),
    ):
        if not part.empty:
            columns = ["claim", "protocol", "setting", "ours", "verdict", "reason"]
            columns = [c for c in columns if c != "protocol" or part["protocol"].nunique() > 1]
            lines += [f"## {title}", "", markdown_table(part[columns]), ""]
            # a control that could not be judged (not run, too few seeds) says so in its row; it is no failure
            failed = part[part["verdict"].isin([REVERSED, INCONCLUSIVE])]
            if title.startswith("Controls") and not failed.empty:
                lines += [
                    f"**The harness failed a control** ({'; '.join(failed['id'] + ' on ' + failed['setting'])}): "
                    "its other verdicts are not to be trusted.",
                    "",
                ]
    return "\n".join(lines)


def overview(paper: pd.DataFrame, simulated: pd.Series) -> pd.DataFrame:
    """One row per claim; a column per protocol and kind of runs (measured, or simulated on a platform), each
    cell its settings' verdicts."""
    claims = paper.drop_duplicates("id").set_index("id")[["figure", "claim"]]
    verdicts: dict[tuple[str, str], pd.Series] = {}
    for platform in ["", *sorted(set(simulated) - {""})]:
        kind = f"simulated on {platform}" if platform else "measured"
        for protocol in PROTOCOLS:
            part = paper[(simulated == platform) & (paper["protocol"] == protocol)]
            if part.empty:
                continue
            named = verdict_named(part)
            cells = (named + " (" + part["setting"].astype(str) + ")").groupby(part["id"]).agg("; ".join)
            claims[f"{kind} ({protocol})"] = cells
            verdicts[platform, protocol] = named.groupby(part["id"]).agg(lambda v: tuple(sorted(v)))
    for (platform, protocol), agree, over in agreements(paper, simulated, verdicts):
        claims[f"agree ({protocol}, {platform})"] = agree + over.map({True: " †", False: ""})  # the rest print —
    return claims.reset_index(drop=True).fillna("—")


def agreements(paper: pd.DataFrame, simulated: pd.Series, verdicts: dict | None = None):
    """Per (simulated platform, protocol) with measured verdicts beside it: the claims judged on both sides,
    whether their verdicts agree ("yes" / "**no**"), and whether a measured side ran oversubscribed."""
    if verdicts is None:
        verdicts = {}
        for platform in ["", *sorted(set(simulated) - {""})]:
            for protocol in PROTOCOLS:
                part = paper[(simulated == platform) & (paper["protocol"] == protocol)]
                if not part.empty:
                    verdicts[platform, protocol] = (
                        verdict_named(part).groupby(part["id"]).agg(lambda v: tuple(sorted(v)))
                    )
    found = []
    for (platform, protocol), simulated_verdicts in verdicts.items():
        measured = verdicts.get(("", protocol))
        if platform and measured is not None:  # does the simulator give the verdicts this machine gives?
            both = measured.index.intersection(simulated_verdicts.index)
            unjudged = measured[both].map(not_judged) | simulated_verdicts[both].map(not_judged)
            judged = both[~unjudged.to_numpy()]
            agree = (measured[judged] == simulated_verdicts[judged]).map({True: "yes", False: "**no**"})
            rows = paper[(simulated == "") & (paper["protocol"] == protocol)]
            flags = rows["oversubscribed"].fillna("").astype(str) != "" if "oversubscribed" in rows else None
            over = (
                flags.groupby(rows["id"]).any().reindex(judged, fill_value=False)
                if flags is not None
                else pd.Series(False, index=judged)
            )
            found.append(((platform, protocol), agree, over.astype(bool)))
    return found


def agreement_counts(paper: pd.DataFrame, simulated: pd.Series) -> list[str]:
    """One line per simulated platform and protocol: how many claims agree, the unoversubscribed ones apart."""
    lines = []
    for (platform, protocol), agree, over in agreements(paper, simulated):
        if agree.empty:
            continue
        same = agree == "yes"
        lines.append(
            f"- {protocol}, {platform}: agree on {int(same.sum())} of {len(agree)} claims judged on both sides; "
            f"where no measured side was oversubscribed, {int(same[~over].sum())} of {int((~over).sum())}."
        )
    return [*lines, ""] if lines else []


def not_judged(verdicts: tuple[str, ...]) -> bool:
    """Every setting of a claim not comparable here: there is no verdict to agree with."""
    return all(verdict == NOT_COMPARABLE for verdict in verdicts)


def verdict_named(rows: pd.DataFrame) -> pd.Series:
    """Each row's verdict with its winner where it names one ("not tied, hogwild_easgd faster"): two sides
    not tied in opposite directions are two verdicts, not one."""
    faster = rows["faster"].fillna("").astype(str) if "faster" in rows else pd.Series("", rows.index)
    return rows["verdict"].astype(str) + faster.map(lambda side: f", {side} faster" if side else "")


def aa_ids(table: pd.DataFrame) -> list[str]:
    return [str(i) for i in table["id"].unique() if str(i).startswith("aa_")]


def inclusion_ids(table: pd.DataFrame) -> list[str]:
    return [str(i) for i in table["id"].unique() if str(i).startswith("includes_")]


def side_by_side(paper: pd.DataFrame) -> pd.DataFrame:
    """One row per claim and setting, each protocol's verdict and numbers beside the other's."""
    columns = ["figure", "claim", "setting", "paper"]
    if "sensitivity" in paper and paper["sensitivity"].fillna("").astype(str).ne("").any():
        columns.append("sensitivity")  # a simulated verdict's survival of the platform's constants varied
    out = paper[["id", *columns]].drop_duplicates(["id", "setting"]).set_index(["id", "setting"])
    for protocol in PROTOCOLS:
        part = paper[paper["protocol"] == protocol].set_index(["id", "setting"])
        if part.empty:
            continue
        out[f"{protocol}: verdict"] = part["verdict"]
        out[f"{protocol}: ours"] = part["ours"] + part["decomposition"].map(lambda d: f" ({d})" if d else "")
        out[f"{protocol}: reason"] = part["reason"]
    if {f"{TUNED}: verdict", f"{SHARED}: verdict"} <= set(out.columns):
        tuned, shared = out[f"{TUNED}: verdict"], out[f"{SHARED}: verdict"]
        # a setting judged under one protocol only has no verdict to change
        out["changed"] = (tuned.notna() & shared.notna() & (tuned != shared)).map({True: "yes", False: ""})
    if {f"{TUNED}: verdict", f"{RUNNER_UP}: verdict"} <= set(out.columns):
        best, second = out[f"{TUNED}: verdict"], out[f"{RUNNER_UP}: verdict"]
        out["robust"] = [
            "—" if pd.isna(a) or pd.isna(b) else "yes" if a == b else f"**no**: {b} at the runner-up η"
            for a, b in zip(best, second)
        ]
    out = out.reset_index().drop(columns=["id"]).fillna("—")
    return out[[*columns, *[c for c in out.columns if c not in columns]]]


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
    if rule["name"] == "same_numerics":
        numerics = {ALGORITHMS[a].numerics_of for a in algorithms_of(claim)}
        if len(numerics) != 1 or None in numerics:
            raise fail("same_numerics compares algorithms that do the same arithmetic (the registry's numerics_of)")
    if rule["name"] == "weak_scaling_efficiency" and claim.paper_value is None:
        raise fail("weak_scaling_efficiency compares with the paper's value; give paper.value")
    return claim
