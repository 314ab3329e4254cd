"""The averaging family side by side (`scaledl aggregate --table averaging`).

One row per variant (dataset, model, platform, workers, algorithm, τ, codec, straggler), its
seeds summarised as median [min–max] n; bytes as scaledl.report.communication counts them. A row
run with a straggler (--straggler) also shows how much longer it took to reach the target than
the same variant without one, paired by seed (the uniform run is the row with no straggler that
differs only in its platform name, as configs name such variants).
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pandas as pd

from scaledl.report.aggregate import lookup, read_run, run_json_path
from scaledl.report.communication import bytes_to_target, communication

VARIANT = ["dataset", "model", "workers", "algorithm", "tau", "compress", "straggler"]
COLUMNS = [
    "dataset", "model", "platform", "workers", "algorithm", "tau", "compress", "straggler", "seeds",
    "MB_per_step", "final_test_accuracy", "reached", "steps_to_target", "MB_to_target",
    "time_to_target_s", "slowdown_vs_uniform", "seconds_per_step",
]  # fmt: skip


def averaging_row(path: str | Path) -> dict:
    path = run_json_path(path)
    run = read_run(path)
    comm = communication(run)
    report = next((r for r in run.get("algorithm_report") or [] if "averaging" in r), None)
    target_step = lookup(run, "evaluation.target_step", path)
    reached = run.get("time_to_target_s") is not None
    return {
        "dataset": lookup(run, "data.dataset", path), "model": lookup(run, "model.name", path),
        "platform": run["platform"], "workers": lookup(run, "world.workers", path),
        "algorithm": lookup(run, "algorithm.key", path), "seed": lookup(run, "arguments.seed", path),
        "tau": comm["tau"], "compress": report["averaging"]["compress"] if report else "fp32",
        "straggler": run["arguments"].get("straggler") or "none",
        "bytes_per_step": comm["bytes_per_exchange"] / comm["tau"],
        "final_test_accuracy": run["final"]["test_accuracy"], "reached": reached,
        "steps_to_target": target_step if reached else math.inf, "bytes_to_target": bytes_to_target(run),
        "time_to_target_s": run["time_to_target_s"] if reached else math.inf,
        "seconds_per_step": run.get("seconds_per_step"),
    }


def spread(values, unit: str = "") -> str:
    """median [min–max] n, with ∞ (not reached) counted; "—" for no values. unit "MB": bytes shown in MB."""
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return "—"
    ordered = sorted(values)

    def fmt(x: float) -> str:
        if math.isinf(x):
            return "not reached"
        return f"{x / 1e6:.4g}" if unit == "MB" else f"{x:.4g}"
    suffix = {"": "", "×": "×"}.get(unit, " " + unit)
    return (f"{fmt(statistics.median(ordered))}{suffix} "
            f"[{fmt(ordered[0])}–{fmt(ordered[-1])}] n={len(ordered)}")


def slowdown(group: pd.DataFrame, uniform: pd.DataFrame | None) -> str:
    """Time to target with a straggler ÷ without, paired by seed."""
    if uniform is None or uniform.empty:
        return "—"
    base = dict(zip(uniform["seed"], uniform["time_to_target_s"]))
    ratios = [t / base[s] for s, t in zip(group["seed"], group["time_to_target_s"]) if s in base
              and not math.isinf(base[s])]
    return spread(ratios, "×") if ratios else "—"


def averaging_table(paths: list[str | Path]) -> tuple[pd.DataFrame, list[str]]:
    """One row per variant; notes for straggler rows without a uniform twin."""
    rows = pd.DataFrame([averaging_row(p) for p in dict.fromkeys(str(p) for p in paths)])
    out, notes = [], []
    if rows.empty:
        return pd.DataFrame(columns=COLUMNS), notes
    for key, group in rows.groupby([*VARIANT, "platform"], sort=True, dropna=False):
        variant = dict(zip([*VARIANT, "platform"], key))
        uniform = None
        if variant["straggler"] != "none":
            match = rows
            for column in VARIANT[:-1]:
                match = match[match[column] == variant[column]]
            uniform = match[match["straggler"] == "none"]
            if uniform.empty:
                notes.append(f"{'/'.join(str(v) for v in key)}: no run without a straggler to compare with")
        out.append({
            **variant, "seeds": len(group), "MB_per_step": float(group["bytes_per_step"].iloc[0]) / 1e6,
            "final_test_accuracy": spread(group["final_test_accuracy"]),
            "reached": f"{int(group['reached'].sum())}/{len(group)}",
            "steps_to_target": spread(group["steps_to_target"]), "MB_to_target": spread(group["bytes_to_target"], "MB"),
            "time_to_target_s": spread(group["time_to_target_s"]), "slowdown_vs_uniform": slowdown(group, uniform),
            "seconds_per_step": spread(group["seconds_per_step"]),
        })
    return pd.DataFrame(out, columns=COLUMNS), notes
