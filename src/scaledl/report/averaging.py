"""The averaging family side by side (`scaledl aggregate --table averaging`).

One row per variant (dataset, model, platform, workers, algorithm, τ, codec, straggler) and
configuration (the settings it ran with, swept or not: scaledl.report.identity; those that differ
between the table's rows are columns after `algorithm`), its seeds summarised as median [min–max] n;
bytes as scaledl.report.communication counts them. Runs at other settings (a sweep's points) are
rows of their own, never seeds of one row. A row
run with a straggler (--straggler) also shows how much longer it took to reach the target than
the same variant without one, paired by seed (the uniform run is the row with no straggler that
differs only in its platform name, at the same settings, as configs name such variants).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from scaledl.report.communication import bytes_to_target, communication
from scaledl.report.identity import differing, frozen
from scaledl.report.runs import Run, read_runs
from scaledl.report.stats import fixed, measured, per_key_ratios, spread_of

VARIANT = ["dataset", "model", "workers", "algorithm", "tau", "compress", "straggler"]
AVERAGING_COLUMNS = [
    "dataset", "model", "platform", "workers", "algorithm", "tau", "compress", "straggler", "seeds",
    "MB_per_step", "final_test_accuracy", "reached", "steps_to_target", "MB_to_target",
    "time_to_target_s", "slowdown_vs_uniform", "seconds_per_step",
]  # fmt: skip

# How a cell's seeds print: 4 significant digits, bytes in MB, a ratio with ×.
PLAIN, MEGABYTES, TIMES = fixed(".4g"), fixed(".4g", " MB", scale=1e6), fixed(".4g", "×")


def averaging_row(run: Run) -> dict:
    record = run.record
    comm = communication(record)
    report = next((r for r in record.get("algorithm_report") or [] if "averaging" in r), None)
    target_step = run.get("evaluation.target_step")
    reached = record.get("time_to_target_s") is not None
    return {
        **run.fields(["dataset", "model", "platform", "workers", "algorithm", "seed"]),
        "tau": comm["tau"],
        "compress": report["averaging"]["compress"] if report else "fp32",
        "straggler": run.get("arguments").get("straggler") or "none",
        "bytes_per_step": comm["bytes_per_exchange"] / comm["tau"],
        "final_test_accuracy": run.get("final.test_accuracy"),
        "reached": reached,
        "steps_to_target": target_step if reached else math.inf,
        "bytes_to_target": bytes_to_target(record),
        "time_to_target_s": record["time_to_target_s"] if reached else math.inf,
        "seconds_per_step": record.get("seconds_per_step"),
        # the configuration beyond the variant's own columns (hashable, to group by)
        "settings": frozen({k: v for k, v in run.settings.items() if k not in VARIANT}),
        "settings_values": run.settings,
    }


def spread(values, fmt=PLAIN) -> str:
    """median [min–max] n of the measured values, ∞ (not reached) counted; "—" for none."""
    values = measured(values)
    return spread_of(values).text(fmt) if values else "—"


def slowdown(group: pd.DataFrame, uniform: pd.DataFrame | None) -> str:
    """Time to target with a straggler ÷ without, paired by seed (seeds whose uniform run reached the target)."""
    if uniform is None or uniform.empty:
        return "—"
    by_seed = dict(zip(uniform["seed"], uniform["time_to_target_s"]))
    reached = [(seed, t) for seed, t in by_seed.items() if not math.isinf(t)]
    ratios = per_key_ratios(zip(group["seed"], group["time_to_target_s"]), reached)
    return spread(ratios, TIMES) if ratios else "—"


def averaging_table(paths: list[str | Path]) -> tuple[pd.DataFrame, list[str]]:
    """One row per variant; notes for straggler rows without a uniform twin."""
    rows = pd.DataFrame([averaging_row(run) for run in read_runs(paths)])
    out, notes = [], []
    if rows.empty:
        return pd.DataFrame(columns=AVERAGING_COLUMNS), notes
    shown = [n for n in differing(rows["settings_values"]) if n not in VARIANT]  # what tells the rows apart
    for key, group in rows.groupby([*VARIANT, "platform", "settings"], sort=True, dropna=False):
        variant = dict(zip([*VARIANT, "platform", "settings"], key))
        variant.pop("settings")
        settings = group["settings_values"].iloc[0]
        uniform = None
        if variant["straggler"] != "none":
            match = rows[rows["settings"].map(key[-1].__eq__)]
            for column in VARIANT[:-1]:
                match = match[match[column] == variant[column]]
            uniform = match[match["straggler"] == "none"]
            if uniform.empty:
                label = "/".join(str(v) for v in variant.values())
                notes.append(f"{label}: no run without a straggler to compare with")
        out.append(
            {
                **variant,
                **{name: settings.get(name) for name in shown},
                "seeds": len(group),
                "MB_per_step": float(group["bytes_per_step"].iloc[0]) / 1e6,
                "final_test_accuracy": spread(group["final_test_accuracy"]),
                "reached": f"{int(group['reached'].sum())}/{len(group)}",
                "steps_to_target": spread(group["steps_to_target"]),
                "MB_to_target": spread(group["bytes_to_target"], MEGABYTES),
                "time_to_target_s": spread(group["time_to_target_s"]),
                "slowdown_vs_uniform": slowdown(group, uniform),
                "seconds_per_step": spread(group["seconds_per_step"]),
            }
        )
    at = AVERAGING_COLUMNS.index("algorithm") + 1
    return pd.DataFrame(out, columns=[*AVERAGING_COLUMNS[:at], *shown, *AVERAGING_COLUMNS[at:]]), notes
