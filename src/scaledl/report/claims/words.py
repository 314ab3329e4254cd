"""The vocabulary of judging: the verdicts, the protocols, the metrics; a claim, a verdict, a row of claims.csv;
and how a claim writes its sides."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaledl.errors import UserError
from scaledl.grid.tune import protocol_of
from scaledl.report.sides import side_spec
from scaledl.report.stats import (
    Spread,
)

HOLDS, REVERSED, INCONCLUSIVE, NOT_COMPARABLE = "holds", "reversed", "inconclusive", "not comparable here"
NOT_TIED = "not tied"  # a tie claim refuted by a clear winner (the `tied` rule): not the claim's opposite
VERDICTS = (HOLDS, REVERSED, NOT_TIED, INCONCLUSIVE, NOT_COMPARABLE)
TUNED, SHARED, CONTROL = "tuned", "shared η", "control"  # the protocols a claim is judged under
RUNNER_UP = "runner-up η"  # the tuned runs again at each side's second-best η: does the verdict survive it?
LATER = "tuned, later target"  # the tuned runs judged at their later target (later_target_accuracy)
PROTOCOLS = (TUNED, LATER, RUNNER_UP, SHARED)  # the order of the report's columns
PROTOCOL_WORDS = {"tuned": TUNED, "runner_up": RUNNER_UP, "control": CONTROL, "shared": SHARED}  # grid.tune's keys


def protocol_word(setting: str) -> str:
    """The protocol a run's summary `setting` puts it under, as the page names it (scaledl.grid.tune.protocol_of
    decodes the setting where it is encoded)."""
    return PROTOCOL_WORDS[protocol_of(setting)]


TIME_METRIC = "time_to_target_s"
STEPS_METRIC = "steps_to_target"  # interpolated, as the time (scaledl.train.monitor.crossing)
TO_TARGET_METRICS = (TIME_METRIC, STEPS_METRIC, "bytes_to_target")  # missing in a run that missed: "not reached"


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


def split_setting(spec):
    """A side and the setting it names ("sync_sgd@tuned-lr0.1x"), or None when it names none."""
    if isinstance(spec, dict):
        algorithm, _, setting = str(spec["algorithm"]).partition("@")
        return {**spec, "algorithm": algorithm}, (setting if "@" in str(spec["algorithm"]) else None)
    algorithm, sep, setting = str(spec).partition("@")
    return algorithm, (setting if sep else None)


def sides_of(claim: Claim) -> list:
    """Every side a claim's `compares` names."""
    found = []
    for value in claim.compares.values():
        found += value if isinstance(value, list) else [value]
    return found


def algorithms_of(claim: Claim) -> list[str]:
    """Every algorithm key a claim's `compares` mentions (alternatives included)."""
    return list(dict.fromkeys(a for spec in sides_of(claim) for a in side_spec(split_setting(spec)[0])[0]))


def row(
    claim: Claim,
    protocol: str,
    setting: str,
    verdict: Verdict,
    simulated_on: str = "",
    sensitivity: str = "",
    oversubscribed: str = "",
    any_platform: str = "",
) -> dict:
    numbers = verdict.numbers
    reason = verdict.reason + (f" Oversubscribed: {oversubscribed}." if oversubscribed else "")
    return {
        "simulated_on": simulated_on,
        "id": claim.id,
        "rule": claim.rule,  # what kind of claim it is: a paper claim, an inclusion or an A/A check
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
        "setting_any_platform": any_platform,  # the setting but its platform: one claim's rows across platforms
    }


CLAIM_COLUMNS = [
    "id", "rule", "figure", "claim", "protocol", "setting", "paper", "ours", "verdict", "faster", "reason",
    "decomposition", "paper_value", "ours_median", "ours_min", "ours_max", "ours_n", "simulated_on", "sensitivity",
    "oversubscribed", "setting_any_platform",
]  # fmt: skip
