"""Where a step's time goes, as stacked bars: the codesign ladder by phase, and every pair the claims
compare by kind (compute, transfer, wait)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from scaledl.report.claims import load_claims, sides_of, split_setting
from scaledl.report.figures.parts import (
    BREAKDOWN,
    KINDS,
    LADDER,
    Inputs,
    NotDrawn,
    bar_label,
    by_setting,
    figure_title,
    kind_seconds_per_step,
    lines,
    new_figure,
    phase_seconds_per_step,
    pick,
    setting_title,
)
from scaledl.report.runs import Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


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
