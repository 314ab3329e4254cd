"""Figures from metrics.csv files; each curve is labelled from the run.json beside it.

One panel per (dataset, model); one curve per run, styled by algorithm (a colour
and a marker: `algorithm_style`), so the algorithms compare side by side at equal
workers, platform, grid setting (a sweep's point, tuned) and seed; the line style
tells those apart where they vary, and the label names them. Runs of one
algorithm at other settings that are not a grid's point (two configs' runs
plotted together) are named by the settings that differ (scaledl.report.identity).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scaledl.atomic import atomic_path
from scaledl.errors import UserError
from scaledl.report.identity import differing, settings_text
from scaledl.run_record import RUN_JSON

if TYPE_CHECKING:  # pandas, through the run reader, only where a figure is drawn: `scaledl plot --help` needs none
    import pandas as pd

FIGURE_FORMATS = ("png", "pdf", "svg")
# metrics.csv columns a figure may put on its axes, with their axis labels
X_COLUMNS = {
    "wall_s": "wall time (s)",
    "train_s": "training time (s, evaluation excluded)",
    "step": "step",
    "samples": "samples",
    "epoch": "epoch",
}
Y_COLUMNS = {"test_accuracy": "test accuracy", "test_loss": "test loss", "train_loss": "train loss"}
# An algorithm's marker and a second line style after every ten (the colour cycle's length), so that no two
# algorithms of a figure share a colour, a marker and a line style: the default config draws twelve.
MARKERS = ("o", "s", "^", "D", "v")
LINESTYLES = ("-", "--", ":", "-.")


def algorithm_style(index: int) -> dict[str, str]:
    """The colour and marker of the `index`-th algorithm of a figure: one of ten colours, and a marker that
    changes every ten algorithms (distinct for the first fifty)."""
    return {"color": f"C{index % 10}", "marker": MARKERS[index // 10 % len(MARKERS)]}


def line_style(algorithm: int, variant: int) -> str:
    """The line style of a run: by its variant (workers, platform, seed), shifted for every ten algorithms."""
    return LINESTYLES[(variant + algorithm // 10) % len(LINESTYLES)]


@dataclass
class Curve:
    panel: str  # "dataset / model"
    algorithm: str
    variant: tuple[str, ...]  # workers, platform, grid setting, seed: what else tells runs apart
    target: float | None
    frame: pd.DataFrame
    settings: dict = field(default_factory=dict)  # what the run ran with (scaledl.report.identity)


def load_curve(path: str | Path, x: str, y: str) -> Curve:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.report.runs import metrics_path, read_metrics, read_run

    path = metrics_path(path)
    frame = read_metrics(path)
    for column in (x, y):
        if column not in frame.columns:
            raise UserError(f"{path}: metrics.csv has no column {column!r}")
    run_json = path.with_name(RUN_JSON)
    if not run_json.exists():  # a bare metrics.csv: label it by its folder
        return Curve("", path.parent.as_posix(), ("", "", "", ""), None, frame)
    run = read_run(run_json)
    panel = f"{run.get('data.dataset')} / {run.get('model.name')}"
    variant = (
        f"P={run.get('world.workers')}",
        run.get("platform"),
        run.key["setting"] or "",
        f"seed {run.get('arguments.seed')}",
    )
    return Curve(panel, run.get("algorithm.key"), variant, run.record.get("target_accuracy"), frame, run.settings)


def labels(curves: list[Curve]) -> list[str]:
    """Algorithm plus only those variant fields that differ between curves, and the settings that tell two
    curves of one algorithm and variant apart."""
    fields = len(curves[0].variant) if curves else 0
    varying = [i for i in range(fields) if len({c.variant[i] for c in curves}) > 1]
    out = []
    for curve in curves:
        twins = [c.settings for c in curves if (c.algorithm, c.variant) == (curve.algorithm, curve.variant)]
        extra = settings_text(curve.settings, differing(twins)) if len(twins) > 1 else ""
        out.append(" ".join(filter(None, [curve.algorithm, *(curve.variant[i] for i in varying), extra])))
    return out


def plot_curves(
    curves: list[Curve], out: str | Path, x: str = "wall_s", y: str = "test_accuracy", title: str | None = None
) -> None:
    """Draw `y` against `x` for every curve and write the figure to `out` atomically."""
    figure = curves_figure(curves, x=x, y=y, title=title)
    out = Path(out)
    with atomic_path(out) as tmp:
        figure.savefig(tmp, format=out.suffix.lstrip(".") or "png", dpi=120)


def curves_figure(curves: list[Curve], x: str = "wall_s", y: str = "test_accuracy", title: str | None = None):
    """The figure of `y` against `x`, a panel per dataset and model, a line per curve."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    panels = sorted({c.panel for c in curves})
    algorithms = sorted({c.algorithm for c in curves})
    variants = sorted({c.variant for c in curves})
    figure = Figure(figsize=(5.5 * len(panels), 4.2), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels):
        targets = set()
        for curve, label in zip(curves, labels(curves)):
            if curve.panel != panel:
                continue
            data = curve.frame[[x, y]].dropna()
            index = algorithms.index(curve.algorithm)
            ax.plot(
                data[x],
                data[y],
                label=label,
                markersize=3.5,
                linestyle=line_style(index, variants.index(curve.variant)),
                **algorithm_style(index),
            )
            if curve.target is not None:
                targets.add(curve.target)
        if y == "test_accuracy":
            for target in sorted(targets):
                ax.axhline(target, color="0.6", linestyle="--", linewidth=1, label=f"target {target:g}")
        ax.set(title=panel or None, xlabel=X_COLUMNS.get(x, x), ylabel=Y_COLUMNS.get(y, y))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        figure.suptitle(title, wrap=True)
    return figure


def plot_runs(
    paths: list[str | Path], out: str | Path, x: str = "wall_s", y: str = "test_accuracy", title: str | None = None
) -> None:
    """The figure of the runs at `paths` (metrics.csv files or run directories)."""
    curves = [load_curve(path, x, y) for path in dict.fromkeys(str(p) for p in paths)]
    plot_curves(curves, out, x=x, y=y, title=title)
