"""Accuracy against training time (Figs. 6.1-6.4 and 8), and against the bytes exchanged (the averaging
family): a line per configuration, the median over seeds with their min–max band."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from scaledl.report.communication import communication, rounds_by
from scaledl.report.figures.parts import (
    ALL_METHODS,
    AVERAGING,
    PAIRS,
    Inputs,
    NotDrawn,
    accuracy_curve,
    by_setting,
    draw_band,
    draw_targets,
    figure_title,
    lines,
    new_figure,
    pick,
    seed_band,
    setting_title,
)
from scaledl.report.runs import Run
from scaledl.report.sides import side_names

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


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
