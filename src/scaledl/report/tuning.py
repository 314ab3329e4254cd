"""The tune stage's choice: per algorithm and setting, the trial that reached the validation target soonest.

Every trial of a cell (dataset, model, algorithm, platform, workers) ran the
same budget on the same validation split, with its own drawn settings
(scaledl.grid.tune). A trial is scored by its training time to the validation
target; one that never reached it counts as infinitely slow, so it is chosen
only when no trial of its cell reached the target, and then by its best
validation accuracy (flagged in the table: the budget or the space was too
small for that cell). Ties go to the earlier trial. `chosen.csv` holds one row
per cell with the chosen values of its tuned settings (the `tuned` column
names them), which the tuned runs read (scaledl.train.tuned); `chosen.md`
states the protocol and lists every trial.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from scaledl.errors import UserError
from scaledl.report.runs import read_runs
from scaledl.report.stats import fmt_seconds
from scaledl.report.tables import markdown_table

CELL = ["dataset", "model", "algorithm", "platform", "workers"]
TUNABLE = ("lr", "beta", "momentum", "tau", "outer_lr", "outer_momentum")


def trial_rows(paths) -> pd.DataFrame:
    """One row per trial: its cell, its drawn values, its time and steps to the validation target."""
    rows = []
    for run in read_runs(paths):
        arguments = run.get("arguments")
        if not arguments.get("validation_fraction"):
            raise UserError(
                f"{run.path}: not a tune trial (it was evaluated on the test split, not a validation "
                "split); give the trials' run.json only"
            )
        tuned = [name for name in (arguments.get("sweep") or "").split(",") if name]
        rows.append(
            {
                **run.fields(CELL),
                "trial": arguments.get("setting"),
                "tuned": ",".join(tuned),
                **{name: arguments.get(name) if name in tuned else None for name in TUNABLE},
                "time_to_target_s": run.get("time_to_target_s"),
                "target_step": run.get("evaluation.target_step"),
                "seconds_per_step": run.get("seconds_per_step"),
                "best_accuracy": best_accuracy_or_none(run),
                "stop_reason": run.get("stop.reason"),
            }
        )
    if not rows:
        raise UserError("no trials given: the tune stage needs the trials' run.json files")
    return pd.DataFrame(rows)


def best_accuracy_or_none(run) -> float | None:
    """Highest evaluated test accuracy in metrics.csv; None when the trial evaluated nothing (it then ranks last)."""
    accuracy = run.metrics["test_accuracy"] if "test_accuracy" in run.metrics else pd.Series(dtype=float)
    return float(accuracy.max()) if len(accuracy) else None


def choose(trials: pd.DataFrame) -> pd.DataFrame:
    """The chosen trial of every cell, with the cell's trial count and whether any trial reached the target."""
    chosen = []
    for _, group in trials.groupby(CELL, sort=True):
        score = group["time_to_target_s"].fillna(math.inf)
        reached = score < math.inf
        order = group.assign(_score=score, _accuracy=-group["best_accuracy"].fillna(-1.0))
        order = order.sort_values(["_score", "_accuracy", "trial"], kind="stable")
        best = order.iloc[0].drop(["_score", "_accuracy"]).to_dict()
        best.update(trials=len(group), reached=int(reached.sum()))
        chosen.append(best)
    return pd.DataFrame(chosen)


CHOSEN_COLUMNS = [
    *CELL,
    "trial",
    "tuned",
    *TUNABLE,
    "time_to_target_s",
    "target_step",
    "seconds_per_step",
    "best_accuracy",
    "trials",
    "reached",
]


def chosen_markdown(chosen: pd.DataFrame, trials: pd.DataFrame, protocol: dict) -> str:
    """The protocol (trials per algorithm, budget, target, search spaces), the choices, then every trial."""
    counts = sorted(set(chosen["trials"]))
    lines = [
        "# Tune stage",
        "",
        f"Every algorithm had the same number of trials per setting: {', '.join(map(str, counts))}"
        + (" (**unequal**: some trials are missing)" if len(counts) > 1 else "")
        + f", drawn quasi-randomly (scrambled Halton, seed {protocol.get('seed')}) from its search space; each "
        f"trial trained on the training set less a held-out {protocol.get('validation_fraction')} share and "
        "was scored by its training time to the target on that held-out share (a miss counts as infinite). "
        "The test split was never read.",
        "",
        "Trials' own settings: "
        + (", ".join(f"{k} {v}" for k, v in sorted(protocol.get("train", {}).items())) or "their block's"),
        "",
    ]
    space = protocol.get("space") or {}
    if space:
        lines += ["| algorithm | search space |", "|---|---|"]
        lines += [
            f"| {algorithm} | " + ", ".join(f"{name} [{low:g}, {high:g}]" for name, (low, high) in dims.items()) + " |"
            for algorithm, dims in sorted(space.items())
        ]
        lines.append("")
    shown = chosen.assign(
        time_to_target=[fmt_seconds(x) if pd.notna(x) else "not reached" for x in chosen["time_to_target_s"]],
        note=["" if r else "no trial reached the target: best accuracy chosen" for r in chosen["reached"]],
    )
    columns = [
        *CELL,
        "trial",
        *[n for n in TUNABLE if shown[n].notna().any()],
        "time_to_target",
        "target_step",
        "trials",
        "reached",
        "note",
    ]
    lines += ["## Chosen", "", markdown_table(shown[columns]), "", "## Every trial", ""]
    every = trials.assign(
        time_to_target=[fmt_seconds(x) if pd.notna(x) else "missed" for x in trials["time_to_target_s"]]
    )
    columns = [
        *CELL,
        "trial",
        *[n for n in TUNABLE if every[n].notna().any()],
        "time_to_target",
        "target_step",
        "best_accuracy",
        "stop_reason",
    ]
    lines.append(markdown_table(every.sort_values([*CELL, "trial"])[columns]))
    return "\n".join(lines) + "\n"


def read_protocol(text: str | None) -> dict:
    if not text:
        return {}
    try:
        protocol = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"--protocol: not JSON ({error})") from None
    if not isinstance(protocol, dict):
        raise UserError("--protocol: expected a JSON object")
    return protocol
