"""What every figure shares: the runs' settings, the seeds' curves and bars, the panels' drawing."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from scaledl.comm.timing import COMPUTE, TRANSFER, WAIT
from scaledl.net.alphabeta import Network
from scaledl.report.identity import configurations
from scaledl.report.runs import Run, read_runs
from scaledl.report.sides import first_present
from scaledl.report.stats import fixed, spread_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


SYNC_EASGD = "sync_easgd3|sync_easgd"  # the paper's Sync EASGD: the overlapped variant where it ran
PAIRS = {  # name → (title, faster side, slower side)
    "fig6_1": ("Async EASGD vs Async SGD", "async_easgd", "async_sgd"),
    "fig6_2": ("Async MEASGD vs Async MSGD", "async_measgd", "async_msgd"),
    "fig6_3": ("Hogwild EASGD vs Hogwild SGD", "hogwild_easgd", "hogwild_sgd"),
    "fig6_4": ("Sync EASGD vs original EASGD", SYNC_EASGD, "easgd"),
}
ALL_METHODS = (
    SYNC_EASGD,
    "hogwild_easgd",
    "easgd",
    "async_sgd",
    "async_msgd",
    "hogwild_sgd",
    "async_easgd",
    "async_measgd",
)
LADDER = ("easgd", "sync_easgd1", "sync_easgd2", "sync_easgd3")
AVERAGING = ("sync_easgd", "local_sgd", "diloco", "slowmo", "sync_sgd")  # the averaging family, and its baseline
CHIP_PARTITION = "chip_partition"

# Stacking order of the time breakdown; `other` is the step's time outside every phase (loop overhead).
BREAKDOWN = ("compute", "data", "h2d", "param_copy", "comm", "wait", "update", "center_update", "other")
KINDS = ("compute", "transfer", "wait", "other")  # a step's time by kind (docs/time.md), in stacking order
STEADY_GROUPS = (("transfer_per_step_s", TRANSFER), ("wait_per_step_s", WAIT), ("compute_per_step_s", COMPUTE))

PLACEHOLDER_TEXT = "not run in this config"


class NotDrawn(Exception):
    """The runs a figure needs are not in the set; the message says which."""


@dataclass
class Inputs:
    runs: list[Run]
    networks: dict[str, Network] = field(default_factory=dict)  # platform → measured network; "*": any
    notes: list[str] = field(default_factory=list)  # what a drawn figure had to leave out

    def network_for(self, platform: str) -> Network | None:
        return self.networks.get(platform, self.networks.get("*"))


# ------------------------------------------------------------------ inputs


def checked(run: Run) -> Run:
    """A run whose key and metrics.csv the figures can use; UserError naming the file if not."""
    _ = run.key  # its key now: a run.json without one is refused before any figure is drawn
    run.require_metrics(("train_s", "test_accuracy"))
    return run


def load_runs(paths: list[str | Path]) -> list[Run]:
    """The runs at `paths` with their metrics.csv, each once (scaledl.report.runs)."""
    return [checked(run) for run in read_runs(paths)]


def run_setting(run: Run) -> tuple:
    """What a comparison holds fixed, with the run's grid setting (tuned, swept values): the claims judge
    tuned runs, runs at a shared η and each point of a sweep apart."""
    return (*run.setting, run.key["setting"] or "")


def by_setting(runs: list[Run]) -> dict[tuple, list[Run]]:
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault(run_setting(run), []).append(run)
    return dict(sorted(groups.items(), key=lambda item: tuple(map(str, item[0]))))


def pick(runs: list[Run], side: str) -> tuple[str, list[Run]] | None:
    """(algorithm, its runs) of the first alternative in "a|b" with runs; None if none has any."""
    algorithm = first_present(side, (run.algorithm for run in runs))
    return None if algorithm is None else (algorithm, [run for run in runs if run.algorithm == algorithm])


def lines(label: str, runs: list[Run]) -> list[tuple[str, list[Run]]]:
    """An algorithm's runs as one (label, runs) per configuration: its seeds only, each labelled with what
    tells it from the others when there are several (`label lr=0.01`)."""
    found = configurations(runs, lambda run: run.settings)
    return [(f"{label} {apart}" if apart else label, group) for apart, group in found]


def setting_title(setting: tuple) -> str:
    dataset, model, platform, workers, *grid = setting
    point = f", {grid[0]}" if grid and grid[0] else ""
    return f"{dataset} / {model}, {platform}, P={workers}{point}"


# --------------------------------------------------------------- numbers


def accuracy_curve(metrics: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(training seconds, test accuracy) of the evaluated rows, in time order."""
    rows = metrics[["train_s", "test_accuracy"]].dropna().sort_values("train_s", kind="stable")
    return rows["train_s"].to_numpy(float), rows["test_accuracy"].to_numpy(float)


def held_values(times: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The step curve (times, values) at each grid point: the last value at or before it.
    Every grid point must be at or after times[0]; after times[-1] the last value holds."""
    return values[np.searchsorted(times, grid, side="right") - 1]


def seed_band(curves: list[tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """Median, min and max over seeds of their step curves, on the union of their times
    from the latest first time on (before it some seed has no value yet)."""
    curves = [(t, v) for t, v in curves if len(t)]
    if not curves:
        return pd.DataFrame(columns=["time", "median", "low", "high"])
    start = max(t[0] for t, _ in curves)
    grid = np.unique(np.concatenate([t for t, _ in curves]))
    grid = grid[grid >= start]
    values = np.vstack([held_values(t, v, grid) for t, v in curves])
    return pd.DataFrame(
        {"time": grid, "median": np.median(values, axis=0), "low": values.min(axis=0), "high": values.max(axis=0)}
    )


def phase_seconds_per_step(run: Run) -> dict[str, float] | None:
    """Steady-state seconds per step of each BREAKDOWN phase, the workers' mean; None without a steady state.

    run.json's `time` block holds the steady-state transfer, wait and compute per step
    (docs/time.md); each is shared among its phases in proportion to the phases' seconds
    over the whole run (`phases.workers_mean`), the only per-phase figure run.json keeps.
    `other` is the rest of the step: time outside every phase.
    """
    step = run.get("time.seconds_per_step")
    steady = {key: run.get(f"time.{key}") for key, _ in STEADY_GROUPS}
    if step is None or any(value is None for value in steady.values()):
        return None
    out = {}
    for key, phases in STEADY_GROUPS:
        totals = {p: float(run.get(f"phases.workers_mean.{p}_s")) for p in phases}
        whole = sum(totals.values())
        for phase in phases:
            out[phase] = steady[key] * (totals[phase] / whole if whole > 0 else 1 / len(phases))
    out["other"] = max(step - sum(out.values()), 0.0)
    return out


def kind_seconds_per_step(run: Run) -> dict[str, float] | None:
    """Steady-state seconds per step by KINDS, the workers' mean (run.json's `time` block); None without a
    steady state. `other` is the rest of the step: time outside every phase."""
    step = run.get("time.seconds_per_step")
    out = {kind: run.get(f"time.{kind}_per_step_s") for kind in KINDS[:-1]}
    if step is None or any(value is None for value in out.values()):
        return None
    out["other"] = max(step - sum(out.values()), 0.0)
    return out


def reached_seconds(run: Run) -> float:
    """Time to target; +inf when the run never reached it (the claims' protocol: never dropped)."""
    value = run.get("time_to_target_s")
    return math.inf if value is None else float(value)


def bar_label(values: list[float], unit: str = "s") -> str:
    """ "median unit", then "[min–max] n=…" on a second line (it labels a bar)."""
    return spread_of(values).text(fixed(".3g", f" {unit}"), sep="\n")


# ----------------------------------------------------------------- drawing


def new_figure(panels: int, *, columns: int = 3, width: float = 5.2, height: float = 3.9) -> tuple[Figure, list[Axes]]:
    """A figure with one axes per panel, at most `columns` to a row, drawn by the Agg canvas."""
    # matplotlib only here: the tables and the CLI's --help never pay for it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = max(1, min(panels, columns))
    rows = max(1, math.ceil(panels / cols))
    figure = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, cols, squeeze=False).ravel().tolist()
    for extra in axes[panels:]:
        extra.set_visible(False)
    return figure, axes[:panels]


def figure_title(figure: Figure, text: str) -> None:
    """The figure's title, its lines wrapped to the figure's width rather than cut at its edges."""
    figure.suptitle(text, fontsize="medium", wrap=True)


def placeholder(name: str, reason: str) -> Figure:
    figure, (ax,) = new_figure(1, width=6.4, height=2.4)
    ax.axis("off")
    ax.text(0.5, 0.6, f"{name}: {PLACEHOLDER_TEXT}", ha="center", va="center", fontsize=13, transform=ax.transAxes)
    ax.text(0.5, 0.3, textwrap.fill(reason, 90), ha="center", va="center", fontsize=9, transform=ax.transAxes)
    return figure


def draw_band(ax: Axes, band: pd.DataFrame, label: str, color: str) -> None:
    ax.step(band["time"], band["median"], where="post", color=color, label=label)
    ax.fill_between(band["time"], band["low"], band["high"], step="post", color=color, alpha=0.2, linewidth=0)


def draw_targets(ax: Axes, runs: list[Run]) -> None:
    targets = {run.record.get("target_accuracy") for run in runs} - {None}
    for target in sorted(targets):
        ax.axhline(target, color="0.5", linestyle="--", linewidth=1, label=f"target {target:g}")
