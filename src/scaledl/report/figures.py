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
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from scaledl.atomic import atomic_path
from scaledl.comm.timing import COMPUTE, TRANSFER, WAIT
from scaledl.net.alphabeta import COST_MODELS, Network, efficiency
from scaledl.report.catalogue import FIGURE_NAMES
from scaledl.report.claims import load_claims, sides_of, split_setting
from scaledl.report.comm_model import cost_options
from scaledl.report.communication import communication, rounds_by
from scaledl.report.identity import configurations
from scaledl.report.runs import RUN_KEY, Run, read_runs
from scaledl.report.scaling import efficiency_table, sweep_row
from scaledl.report.sides import first_present, side_names
from scaledl.report.stats import fixed, fmt_ratio, paired_ratio, spread_of
from scaledl.report.tables import write_table

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


def accuracy_panel(ax: Axes, setting: tuple, chosen: list[tuple[str, list[Run]]]) -> None:
    drawn = [line for found in chosen for line in lines(*found)]
    for index, (algorithm, runs) in enumerate(drawn):
        curves = [curve for curve in (accuracy_curve(run.metrics) for run in runs) if len(curve[0])]
        draw_band(ax, seed_band(curves), f"{algorithm} (n={len(curves)})", f"C{index % 10}")
    draw_targets(ax, [run for _, runs in chosen for run in runs])
    ax.set(title=setting_title(setting), xlabel="training time (s, evaluation excluded)", ylabel="test accuracy")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")


def accuracy_figure(inputs: Inputs, sides: tuple[str, ...], title: str, *, min_sides: int | None = None) -> Figure:
    """One panel per setting where at least `min_sides` of `sides` (default: all) have runs."""
    needed = len(sides) if min_sides is None else min_sides
    panels = []
    for setting, runs in by_setting(inputs.runs).items():
        chosen = [found for side in sides if (found := pick(runs, side))]
        if len(chosen) >= needed:
            panels.append((setting, chosen))
    if not panels:
        which = (
            f"both {side_names(sides[:1])} and {side_names(sides[1:])}"
            if needed == len(sides) == 2
            else f"at least {needed} of {side_names(sides)}"
        )
        raise NotDrawn(f"no dataset/model/platform/workers/grid setting has runs of {which}")
    figure, axes = new_figure(len(panels))
    for ax, (setting, chosen) in zip(axes, panels):
        accuracy_panel(ax, setting, chosen)
    figure_title(figure, f"{title}\nmedian over seeds, band: min–max")
    return figure


def pair_figure(name: str) -> Callable[[Inputs], Figure]:
    title, faster, than = PAIRS[name]

    def draw(inputs: Inputs) -> Figure:
        return accuracy_figure(inputs, (faster, than), title)

    return draw


def fig8(inputs: Inputs) -> Figure:
    return accuracy_figure(inputs, ALL_METHODS, "All methods", min_sides=2)


# ------------------------------------------------------- the averaging family


def bytes_curve(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(bytes a worker had exchanged at each evaluation, test accuracy), in step order."""
    comm = communication(run.record)
    rows = run.metrics[["step", "test_accuracy"]].dropna().sort_values("step", kind="stable")
    sent = [rounds_by(int(step), comm["tau"]) * comm["bytes_per_exchange"] for step in rows["step"]]
    return np.asarray(sent, dtype=float), rows["test_accuracy"].to_numpy(float)


def variant_label(run: Run) -> str:
    comm = communication(run.record)
    report = next((r for r in run.record.get("algorithm_report") or [] if "averaging" in r), None)
    codec = report["averaging"]["compress"] if report else "fp32"
    return run.algorithm + (f", τ={comm['tau']}" if report else "") + ("" if codec == "fp32" else f", {codec}")


def averaging(inputs: Inputs) -> Figure:
    """Test accuracy against the bytes a worker has exchanged, one curve per algorithm variant (median over
    seeds, min–max band): read at one abscissa, the curves compare at an equal communication budget."""
    panels = []
    for setting, runs in by_setting(
        [r for r in inputs.runs if r.algorithm in AVERAGING and not r.record["arguments"].get("straggler")]
    ).items():
        variants: dict[str, list[Run]] = {}
        for run in runs:
            variants.setdefault(variant_label(run), []).append(run)
        variants = {line: members for label, found in variants.items() for line, members in lines(label, found)}
        if len({run.algorithm for run in runs}) >= 2:
            panels.append((setting, variants))
    if not panels:
        raise NotDrawn(
            f"no dataset/model/platform/workers/grid setting has runs of at least 2 of {side_names(AVERAGING)} "
            "(without a straggler)"
        )
    figure, axes = new_figure(len(panels))
    for ax, (setting, variants) in zip(axes, panels):
        curves_of = {
            label: [curve for curve in (bytes_curve(run) for run in runs) if len(curve[0])]
            for label, runs in sorted(variants.items())
        }
        # The log axis starts at the data: W_0's evaluation (0 bytes) is drawn at its left edge, half the
        # smallest exchange of the panel, not at 1 B, seven decades before the first exchange.
        sent = [x[x > 0] for curves in curves_of.values() for x, _ in curves]
        left = min((x.min() for x in sent if len(x)), default=2.0) / 2
        for index, (label, curves) in enumerate(curves_of.items()):
            band = seed_band([(np.maximum(x, left), y) for x, y in curves])
            draw_band(ax, band, f"{label} (n={len(curves)})", f"C{index % 10}")
        draw_targets(ax, [run for runs in variants.values() for run in runs])
        ax.set_xscale("log")
        ax.set_xlim(left=left)
        ax.set(title=setting_title(setting), xlabel="bytes a worker exchanged (up + down)", ylabel="test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    figure_title(
        figure,
        "Accuracy at equal communication:\nthe averaging family and synchronous SGD\nmedian over seeds, band: min–max",
    )
    return figure


# ------------------------------------------------------------ the ladder


Bar = tuple[str, dict[str, float], list[float]]  # (label, median seconds per step of each segment, seeds' totals)


def stacked_bars(labelled: list[tuple[str, list[Run]]], seconds_of: Callable, segments: tuple[str, ...]) -> list[Bar]:
    """A bar per (label, runs) with a steady state: each segment's median over the runs of `seconds_of(run)`
    (a dict of `segments`, or None), and each run's total seconds per step."""
    bars = []
    for label, runs in labelled:
        parts = [p for p in map(seconds_of, runs) if p]
        if parts:
            medians = {segment: statistics.median(p[segment] for p in parts) for segment in segments}
            totals = [run.get("time.seconds_per_step") for run in runs]
            bars.append((label, medians, [t for t in totals if t is not None]))
    return bars


def ladder_bars(runs: list[Run]) -> list[Bar]:
    """The ladder's levels with a steady state, each a bar of BREAKDOWN phases."""
    levels = [line for level in LADDER for line in lines(level, [run for run in runs if run.algorithm == level])]
    return stacked_bars(levels, phase_seconds_per_step, BREAKDOWN)


def stacked_panel(ax: Axes, title: str, bars: list[Bar], segments: tuple[str, ...], *, legend=True) -> None:
    x = np.arange(len(bars))
    bottom = np.zeros(len(bars))
    for index, segment in enumerate(segments):
        heights = np.array([medians[segment] for _, medians, _ in bars])
        ax.bar(x, heights, bottom=bottom, color=f"C{index % 10}", label=segment, width=0.6)
        bottom += heights
    for xi, top, (_, _, totals) in zip(x, bottom, bars):
        ax.text(xi, top, bar_label(totals, "s/step"), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [label for label, _, _ in bars], rotation=15)
    ax.set_ylim(0, 1.25 * max(bottom.max(), 1e-12))
    ax.set(title=title, ylabel="seconds per step (steady state)")
    ax.grid(axis="y", alpha=0.3)
    if legend:
        handles, labels = ax.get_legend_handles_labels()  # top of the stack first, as the bars read
        ax.legend(handles[::-1], labels[::-1], fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))


def ladder_breakdown(inputs: Inputs) -> Figure:
    panels = []
    for setting, runs in by_setting(inputs.runs).items():
        bars = ladder_bars([run for run in runs if run.algorithm in LADDER])
        if len(bars) >= 2:
            panels.append((setting, bars))
    if not panels:
        raise NotDrawn(f"no setting has runs with a steady state of two or more of {', '.join(LADDER)}")
    figure, axes = new_figure(len(panels), columns=2, width=6.5)
    for ax, (setting, bars) in zip(axes, panels):
        stacked_panel(ax, setting_title(setting), bars, BREAKDOWN)
    figure_title(
        figure,
        "Codesign ladder: time per step by phase\n"
        "segments: medians over seeds; label: total s/step, median [min–max] n",
    )
    return figure


# ------------------------------------------------- the compared pairs, by kind


def compared_pairs() -> list[tuple[str, str, list[str]]]:
    """(side, other side, the paper figures of the claims comparing them) for every claim of claims.yaml
    that compares two algorithms (sides as "a|b", either order; sides naming their runs' setting or worker count, and
    claims of more than two sides, are left out), each pair once, in the claims' order."""
    pairs: dict[frozenset, tuple[str, str, list[str]]] = {}
    for claim in load_claims():
        sides = sides_of(claim)
        if len(sides) != 2 or any(isinstance(s, dict) or split_setting(s)[1] is not None for s in sides):
            continue
        a, b = map(str, sides)
        _, _, figures = pairs.setdefault(frozenset((a, b)), (a, b, []))  # either way round: one pair
        if claim.figure not in figures:
            figures.append(claim.figure)
    return list(pairs.values())


def pair_breakdown(inputs: Inputs) -> Figure:
    """A step's time by kind (compute, transfer, wait, other) for the two algorithms of every pair a claim
    compares, one panel per pair and setting where both have a steady state."""
    panels: dict[tuple, tuple[list[Bar], list[str]]] = {}  # (setting, side, side) → bars, the claims' figures
    for setting, runs in by_setting(inputs.runs).items():
        for a, b, figures in compared_pairs():
            chosen = [found for side in (a, b) if (found := pick(runs, side))]
            drawn = [line for found in chosen for line in lines(*found)] if len(chosen) == 2 else []
            bars = stacked_bars(drawn, kind_seconds_per_step, KINDS)
            if len(bars) == len(drawn) >= 2:  # two pairs may pick the same algorithms ("sync_easgd3|sync_easgd")
                _, named = panels.setdefault((setting, *(label for label, _, _ in bars)), (bars, []))
                named += [f for f in figures if f not in named]
    if not panels:
        raise NotDrawn(
            "no setting has runs with a steady state of both algorithms of any of the "
            f"{len(compared_pairs())} pairs the claims compare (async_easgd vs async_sgd, ...: claims.yaml)"
        )
    figure, axes = new_figure(len(panels), columns=4, width=4.4, height=3.8)
    for ax, ((setting, *sides), (bars, named)) in zip(axes, panels.items()):
        title = f"{' vs '.join(sides)} ({', '.join(named)})\n{setting_title(setting)}"
        stacked_panel(ax, title, bars, KINDS, legend=False)
        ax.title.set_fontsize("small")
    handles, labels = axes[0].get_legend_handles_labels()  # one legend: every panel stacks the same kinds
    figure.legend(handles[::-1], labels[::-1], loc="outside right upper", fontsize="small")
    figure_title(
        figure,
        "Where a step goes, for each pair the claims compare: compute, transfer, wait\n"
        "segments: medians over seeds; label: total s/step, median [min–max] n",
    )
    return figure


# -------------------------------------------------------------- scaling


def sweep_table(runs: list[Run]) -> pd.DataFrame:
    """scaledl.report.scaling's table of these runs: one row per run in a sweep over the worker count."""
    table, _ = efficiency_table([sweep_row(run) for run in runs])
    return table


def predicted_efficiency(
    base: list[Run], workers: list[int], kind: str, net: Network, cost_model: str
) -> list[float] | None:
    """The α-β model's efficiency at each P (scaledl.net.alphabeta.efficiency), from the smallest sweep point's
    runs: their message size, options and median compute per step (per worker: fixed in weak scaling,
    ∝ 1/P in strong)."""
    computes = [c for c in (run.record.get("time", {}).get("compute_per_step_s") for run in base) if c is not None]
    if not computes:
        return None
    first = base[0]
    n, p0 = first.get("model.bytes"), min(workers)
    options, compute = cost_options(first), statistics.median(computes)
    return [
        efficiency(first.algorithm, net, n, p, compute, base_workers=p0, scaling=kind, model=cost_model, **options)
        for p in workers
    ]


def scaling_panel(
    ax: Axes, rows: pd.DataFrame, runs: list[Run], kind: str, net: Network | None, notes: list[str]
) -> None:
    for index, ((algorithm, settings), group) in enumerate(rows.groupby(["algorithm", "settings"], sort=True)):
        algorithm = f"{algorithm} {settings}" if isinstance(settings, str) and settings else algorithm
        color = f"C{index % 10}"
        stats = group.groupby("workers")["efficiency"].agg(["median", "min", "max", "count"]).reset_index()
        whiskers = [stats["median"] - stats["min"], stats["max"] - stats["median"]]
        ax.errorbar(
            stats["workers"],
            stats["median"],
            yerr=whiskers,
            marker="o",
            capsize=3,
            color=color,
            label=f"{algorithm} measured (n={stats['count'].max()})",
        )
        if net is None:
            continue
        workers = stats["workers"].tolist()
        base_runs = set(group.loc[group["workers"] == workers[0], "run"])
        base = [run for run in runs if run.folder in base_runs]
        for cost_model, style in zip(COST_MODELS, ("--", ":")):
            try:
                predicted = predicted_efficiency(base, workers, kind, net, cost_model)
            except ValueError as error:
                notes.append(f"scaling: no α-β line for {algorithm} ({error})")
                break
            if predicted is not None:
                ax.plot(workers, predicted, style, color=color, label=f"{algorithm} α-β {cost_model}")
    ax.axhline(1.0, color="0.5", linewidth=1)
    ax.set_xscale("log", base=2)
    counts = sorted(rows["workers"].unique())
    ax.set_xticks(counts, [str(p) for p in counts], minor=False)
    ax.minorticks_off()
    ax.set(xlabel="workers P", ylabel="efficiency", ylim=(0, None))
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")


def scaling(inputs: Inputs) -> Figure:
    table = sweep_table(inputs.runs)
    if table.empty:
        raise NotDrawn(
            "no sweep over the worker count (each algorithm ran at one worker count, "
            "or neither the per-worker nor the global batch was fixed)"
        )
    panels = list(table.groupby(["dataset", "model", "platform", "scaling"], sort=True))
    figure, axes = new_figure(len(panels), columns=2)
    for ax, ((dataset, model, platform, kind), rows) in zip(axes, panels):
        scaling_panel(ax, rows, inputs.runs, kind, inputs.network_for(platform), inputs.notes)
        ax.set_title(f"{kind} scaling: {dataset} / {model}, {platform}")
    figure_title(figure, "Scaling efficiency vs workers\nmeasured: median over seeds, bars: min–max")
    return figure


# ------------------------------------------------------ chip partitioning


def chip_panel(ax: Axes, runs: list[Run]) -> None:
    counts = sorted({run.key["workers"] for run in runs})
    seconds = {p: [(run.key["seed"], reached_seconds(run)) for run in runs if run.key["workers"] == p] for p in counts}
    finite = [s for values in seconds.values() for _, s in values if math.isfinite(s)]
    top = 1.25 * max(finite) if finite else 1.0
    for x, p in enumerate(counts):
        values = [s for _, s in seconds[p]]
        spread = spread_of(values)
        missed = sum(math.isinf(v) for v in values)
        if math.isinf(spread.median):
            ax.bar(x, top, color="none", edgecolor="0.5", hatch="//")
            ax.text(x, top / 2, f"not reached\n({missed} of {len(values)})", ha="center", va="center", fontsize=8)
            continue
        high = min(spread.high, top)
        ax.bar(x, spread.median, color="C0", yerr=[[spread.median - spread.low], [high - spread.median]], capsize=4)
        speedup, _ = paired_ratio(seconds[counts[0]], seconds[p])
        label = f"{speedup.text(fmt_ratio)}" + (f"\nnot reached in {missed}" if missed else "")
        ax.text(x, high, label, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(counts)), [f"P={p}" for p in counts])
    ax.set(ylim=(0, 1.1 * top), ylabel="time to target (s)", xlabel=f"parts (speedup over P={counts[0]})")
    ax.grid(axis="y", alpha=0.3)


def chip_partition(inputs: Inputs) -> Figure:
    runs = [run for run in inputs.runs if run.algorithm == CHIP_PARTITION]
    if not runs:
        raise NotDrawn(f"no {CHIP_PARTITION} runs")
    groups: dict[tuple, list[Run]] = {}
    for run in runs:
        groups.setdefault((run.key["dataset"], run.key["model"], run.key["platform"]), []).append(run)

    def without_batch(run: Run) -> dict:  # the part count divides the batch; the rest tells configurations apart
        return {name: value for name, value in run.settings.items() if name != "batch_size"}

    panels = [
        (key, found, group)
        for key, members in sorted(groups.items())
        for found, group in configurations(members, without_batch)
    ]
    figure, axes = new_figure(len(panels))
    for ax, (key, found, members) in zip(axes, panels):
        chip_panel(ax, members)
        ax.set_title(" / ".join(map(str, key[:2])) + f", {key[2]}" + (f", {found}" if found else ""))
    figure_title(
        figure,
        "Chip partitioning: time to target per part count\nbars: median over seeds, whiskers: min–max\n"
        "label: speedup over the fewest parts, median [min–max] n",
    )
    return figure


# The catalogue's figures, in its order: the paper's pairs drawn by pair_figure, the others by the function
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
