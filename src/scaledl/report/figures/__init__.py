"""The report's figures, from run.json and metrics.csv files (our runs, our numbers).

Every figure is one function in `FIGURES` (name → function). A function
returns a matplotlib Figure, or raises `NotDrawn` with the reason when the
runs it needs are not in the set; `write_figures` then writes a placeholder
PNG saying so, so a workflow can always declare every file.

A *setting* is what a comparison holds fixed: dataset, model, platform, worker
count and the run's point of the grid (tuned, a sweep's values: a panel each,
as the claims judge them). In a setting, the seeds of one configuration of an
algorithm (the settings it ran with: scaledl.report.identity) are summarised,
never drawn one by one; two configurations are two lines, each named by what
tells them apart, never one line whose spread is their difference:

- accuracy vs training time (fig6_*, fig8): each seed's test accuracy is a
  step curve over its training clock (`train_s`: evaluation excluded,
  docs/time.md), held from one evaluation to the next and, after the run
  stopped, at its last value. On the union of the seeds' evaluation times,
  from the latest first evaluation on, the line is the median over seeds
  and the band their min–max (`seed_band`);
- bars are medians over seeds with min–max whiskers, labelled with n;
- a stacked bar's segments are medians over seeds, labelled with the median
  total and its [min–max] over seeds.

Algorithm sides are written as in claims.yaml (scaledl.report.sides): "a|b"
means the first of a, b that has runs in the setting.

The package: `parts` (the runs' settings, the seeds' curves and bars, the
panels' drawing), `accuracy` (accuracy against time and against bytes),
`breakdown` (where a step's time goes) and `scaling` (efficiency against P,
chip partitioning); here, the catalogue's registry and the writers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from scaledl.atomic import atomic_path
from scaledl.report.catalogue import FIGURE_NAMES
from scaledl.report.figures.accuracy import averaging, fig8, pair_figure
from scaledl.report.figures.breakdown import compared_pairs, ladder_breakdown, pair_breakdown
from scaledl.report.figures.parts import (
    KINDS,
    PAIRS,
    Inputs,
    NotDrawn,
    load_runs,
    phase_seconds_per_step,
    placeholder,
    reached_seconds,
    seed_band,
)
from scaledl.report.figures.scaling import chip_partition, predicted_efficiency, scaling
from scaledl.report.runs import RUN_KEY, Run
from scaledl.report.tables import write_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "FIGURES",
    "KINDS",
    "PAIRS",
    "Inputs",
    "NotDrawn",
    "averaging",
    "compared_pairs",
    "load_runs",
    "metrics_long",
    "pair_breakdown",
    "phase_seconds_per_step",
    "predicted_efficiency",
    "reached_seconds",
    "seed_band",
    "write_figures",
    "write_metrics_long",
]


# of their name.
_DRAWN_BY_NAME = {
    draw.__name__: draw for draw in (fig8, ladder_breakdown, pair_breakdown, scaling, chip_partition, averaging)
}
FIGURES: dict[str, Callable[[Inputs], Figure]] = {
    name: pair_figure(name) if name in PAIRS else _DRAWN_BY_NAME[name] for name in FIGURE_NAMES
}


# ---------------------------------------------------------------- outputs


def write_png(figure: Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=110)


def write_figures(inputs: Inputs, out_dir: str | Path) -> list[str]:
    """Every figure as out_dir/NAME.png; a placeholder for those not drawn. Returns one note per placeholder."""
    skipped = []
    for name, draw in FIGURES.items():
        try:
            figure = draw(inputs)
        except NotDrawn as reason:
            figure = placeholder(name, str(reason))
            skipped.append(f"{name} ({reason})")
        write_png(figure, Path(out_dir) / f"{name}.png")
    return skipped


def metrics_long(runs: list[Run]) -> pd.DataFrame:
    """Every metrics.csv row, with its run's key columns first and its folder last."""
    frames = [run.metrics.assign(**run.key, run=run.folder) for run in runs]
    if not frames:
        return pd.DataFrame(columns=[*RUN_KEY, "run"])
    table = pd.concat(frames, ignore_index=True)
    return table[[*RUN_KEY, *[c for c in table.columns if c not in RUN_KEY and c != "run"], "run"]]


def write_metrics_long(runs: list[Run], path: str | Path) -> int:
    table = metrics_long(runs)
    write_table(table, path)
    return len(table)
