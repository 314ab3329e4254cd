"""Scaling efficiency against the worker count, with the α-β model's lines, and chip partitioning's time to
target per part count."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

import pandas as pd

from scaledl.net.alphabeta import COST_MODELS, Network, efficiency
from scaledl.report.comm_model import cost_options
from scaledl.report.figures.parts import (
    CHIP_PARTITION,
    Inputs,
    NotDrawn,
    figure_title,
    new_figure,
    reached_seconds,
)
from scaledl.report.identity import configurations
from scaledl.report.runs import Run
from scaledl.report.scaling import efficiency_table, sweep_row
from scaledl.report.stats import fmt_ratio, paired_ratio, spread_of

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


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
