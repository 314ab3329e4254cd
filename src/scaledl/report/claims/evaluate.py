"""Claims × protocols × settings → the claims table: which runs each claim is judged on, and the columns it needs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scaledl.errors import UserError
from scaledl.report.claims.context import (
    Context,
    oversubscribed_sides,
    sensitivity_of,
    simulated_platform,
    unmet_needs,
    untuned,
)
from scaledl.report.claims.rules import INCLUSION_RULES, RULES
from scaledl.report.claims.sides import pick_side
from scaledl.report.claims.words import (
    CLAIM_COLUMNS,
    CONTROL,
    LATER,
    NOT_COMPARABLE,
    RUNNER_UP,
    SHARED,
    TO_TARGET_METRICS,
    TUNED,
    Claim,
    Verdict,
    algorithms_of,
    protocol_word,
    row,
    sides_of,
)
from scaledl.report.runs import RUN_KEY
from scaledl.report.stats import (
    plural,
)


def setting_label(per: tuple[str, ...], key: tuple) -> str:
    parts = dict(zip(per, key))
    label = "/".join(str(parts.pop(c)) for c in ("dataset", "model") if c in parts)
    rest = [f"P={v}" if c == "workers" else str(v) for c, v in parts.items()]
    return ", ".join([label, *rest] if label else rest)


def grid_point(setting: str) -> str:
    """A sweep's point as a row's setting ends (", lr0.05"); nothing for a protocol's own (none, tuned, the
    runner-up's): the protocol's column says which it is."""
    return f", {setting}" if setting and protocol_word(setting) not in (TUNED, RUNNER_UP) else ""


def judge(group: pd.DataFrame, claim: Claim, ctx: Context) -> Verdict:
    """The rule's verdict on one setting, made "not comparable here" when the setting misses the claim's needs."""
    verdict = RULES[claim.rule].apply(group, claim, ctx)
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
        others = [(c, v) for c, v in zip(claim.per, key) if c != "platform"]  # pairs a platform's row with another's
        elsewhere = setting_label(tuple(c for c, _ in others), tuple(v for _, v in others))
        elsewhere += grid_point(key[len(claim.per)] if point else "")
        rows.append(row(claim, protocol, label, verdict, platform, sensitivity, oversubscribed_sides(group), elsewhere))
    if incomplete and not rows:
        settings = plural(len(incomplete), "setting")
        shown = "; ".join(incomplete[:3]) + (f" and {len(incomplete) - 3} more" if len(incomplete) > 3 else "")
        reason = f"missing {', '.join(missing)} in {settings}: {shown}"
        rows.append(row(claim, protocol, settings, Verdict(NOT_COMPARABLE, reason=reason), simulated_platform(runs)))
    return rows


def protocols_of(results: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The protocols the results hold runs of: {tuned, shared η: their runs}, tuned first."""
    settings = results["setting"].fillna("").astype(str) if "setting" in results else pd.Series("", results.index)
    protocols = settings.map(protocol_word)
    found = {name: results[protocols == name] for name in (TUNED, RUNNER_UP, SHARED)}  # controls: by their sides
    found[LATER] = later_view(found[TUNED])
    return {name: runs for name, runs in found.items() if not runs.empty} or {SHARED: results.iloc[0:0]}


LATER_METRICS = ("time_to_target_s", "steps_to_target")  # what a later target's crossing gives again


def later_view(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs that ran to a later target, their to-target columns read at it: the same claims judged again
    at a target several hundred steps on (empty where no run set one)."""
    if "later_target_accuracy" not in runs:
        return runs.iloc[0:0]
    later = runs[pd.to_numeric(runs["later_target_accuracy"], errors="coerce").notna()]
    return later.assign(
        target_accuracy=later["later_target_accuracy"],
        time_to_target_s=later["time_to_later_target_s"],
        steps_to_target=later["steps_to_later_target"],
        target_step=float("nan"),  # the interpolated steps stand alone: no evaluated step to fall back on
    )


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
            rows += [
                r
                for name, runs in protocols.items()
                if name != LATER or claim.metric in LATER_METRICS
                for r in evaluate_claim(runs, claim, ctx, name)
            ]
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
