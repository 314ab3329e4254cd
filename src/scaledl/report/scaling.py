"""Weak and strong scaling efficiency of sweeps over the worker count, from run.json files.

A sweep is a set of runs that differ only in the worker count P: same dataset,
model, algorithm, platform and seed (the workflow's run key without `p{P}`), and
the same settings besides the batch (scaledl.report.identity: two η are two
sweeps; the `settings` column names those that tell the table's sweeps apart).
Its kind follows from what the runs did, as recorded in run.json:

- weak: every run has the same per-worker batch b (`hyper.batch_size`), so the
  work per worker is fixed and ideally the time per iteration stays constant;
- strong: every run has the same global batch P·b, so the total work per
  iteration is fixed and ideally the time per iteration falls as 1/P.

A group with one P is no sweep; a group where neither stays fixed is skipped
with a note. The base of a sweep is its run with the fewest workers P0 (the
paper's weak-scaling base is one node: start the node sweep at 1 to match).

With T(P) the training seconds per iteration of a worker (`seconds_per_step`,
evaluation excluded) and the throughput X(P) = P·b(P) / T(P) samples per second:

    speedup     S(P) = X(P) / X(P0)
    efficiency  E(P) = S(P) / (P / P0)

which is, for weak scaling, E = T(P0) / T(P) (the paper's weak-scaling convention:
T_iter(1 node) / T_iter(N nodes) at a fixed per-node batch) and, for strong
scaling, E = T(P0) / ((P / P0) · T(P)). E = 1 is perfect scaling.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from scaledl.report.identity import differing, frozen, settings_text
from scaledl.report.runs import Run, read_runs

# The run.json columns a sweep's row reads (scaledl.report.runs.RUN_FIELDS), in the order they are read.
SWEEP_FIELDS = [
    "dataset",
    "model",
    "algorithm",
    "platform",
    "seed",
    "nodes",
    "workers",
    "ranks",
    "batch_size",
    "seconds_per_step",
]

SWEEP = ["dataset", "model", "algorithm", "platform", "seed"]

SCALING_COLUMNS = [
    *SWEEP, "settings", "scaling", "nodes", "workers", "ranks", "batch_size", "global_batch",
    "seconds_per_step", "samples_per_s", "speedup", "efficiency", "run",
]  # fmt: skip


def sweep_row(run: Run) -> dict:
    """A run's row before its sweep is known: the SWEEP_FIELDS, its settings but the batch (which a sweep may
    scale with P) and its folder."""
    settings = {name: value for name, value in run.settings.items() if name != "batch_size"}
    return {**run.fields(SWEEP_FIELDS), "settings": frozen(settings), "settings_values": settings, "run": run.folder}


def sweep_kind(group: pd.DataFrame) -> str | None:
    """weak, strong, or None when neither the per-worker nor the global batch stays fixed."""
    if group["batch_size"].nunique() == 1:
        return "weak"
    if (group["batch_size"] * group["workers"]).nunique() == 1:
        return "strong"
    return None


def samples_per_second(samples: float, seconds) -> float:
    """Throughput: the samples of a step over its seconds; NaN without a step time."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)) or seconds <= 0:
        return math.nan
    return samples / seconds


def efficiency_table(rows: list[dict]) -> tuple[pd.DataFrame, list[str]]:
    """The scaling table of `rows` (sweep_row dicts) and notes on groups that are no sweep."""
    runs = pd.DataFrame(rows, columns=[*SWEEP_FIELDS, "settings", "settings_values", "run"])
    runs["settings"] = runs["settings"].map(lambda found: () if found is None or found != found else found)
    runs["settings_values"] = runs["settings_values"].map(lambda found: found if isinstance(found, dict) else {})
    shown = differing(runs["settings_values"])
    out, notes = [], []
    for key, group in runs.groupby([*SWEEP, "settings"], sort=True, dropna=False):
        key, text = key[:-1], settings_text(group["settings_values"].iloc[0], shown)
        if group["workers"].nunique() < 2:
            continue  # one worker count: nothing to scale
        label = "/".join(str(value) for value in key) + (f" ({text})" if text else "")
        if group["workers"].nunique() != len(group):
            notes.append(f"{label}: several runs share a worker count; skipped")
            continue
        kind = sweep_kind(group)
        if kind is None:
            notes.append(
                f"{label}: neither the per-worker batch (weak) nor the global batch (strong) "
                "is the same in every run; skipped"
            )
            continue
        group = group.sort_values("workers", kind="stable")
        base = group.iloc[0]
        base_rate = samples_per_second(base["workers"] * base["batch_size"], base["seconds_per_step"])
        for record in group.drop(columns="settings_values").to_dict("records"):
            rate = samples_per_second(record["workers"] * record["batch_size"], record["seconds_per_step"])
            speedup = rate / base_rate if base_rate and not math.isnan(base_rate) else math.nan
            out.append(
                {
                    **record,
                    "settings": text,
                    "scaling": kind,
                    "global_batch": record["workers"] * record["batch_size"],
                    "samples_per_s": rate,
                    "speedup": speedup,
                    "efficiency": speedup / (record["workers"] / base["workers"]),
                }
            )
    return pd.DataFrame(out, columns=SCALING_COLUMNS), notes


def scaling_table(paths: list[str | Path]) -> tuple[pd.DataFrame, list[str]]:
    """The scaling table of the runs at `paths` (run.json files or run directories)."""
    return efficiency_table([sweep_row(run) for run in read_runs(paths)])
