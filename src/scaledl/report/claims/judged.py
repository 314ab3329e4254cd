"""What the claims judged: each protocol's configurations, and the runs no claim could judge (claims.md's end).

A side of a claim is one configuration (scaledl.report.identity): runs at
other settings are other configurations, never seeds of one. The page lists,
per protocol and point of the grid (tuned, none, a sweep's `lr0.05`), each
algorithm's configurations with the settings that tell them apart and their
runs, and says which sweep points no claim had all its sides at.
"""

from __future__ import annotations

import pandas as pd

from scaledl.report.claims.words import CONTROL, RUNNER_UP, SHARED, TUNED, protocol_word
from scaledl.report.identity import NAMES, differing, settings_text
from scaledl.report.tables import markdown_table


def judged_markdown(results: pd.DataFrame, table: pd.DataFrame) -> str:
    """claims.md's section on the configurations judged (`results`: the summary; `table`: evaluate's rows)."""
    if results.empty:
        return ""
    points = results["setting"].fillna("").astype(str) if "setting" in results else pd.Series("", results.index)
    names = [name for name in NAMES if name in results]
    settings = [{n: v for n, v in zip(names, values) if not pd.isna(v)} for values in results[names].itertuples(False)]
    shown = differing(settings)
    frame = pd.DataFrame(
        {
            "protocol": points.map(protocol_word),
            "point": points.where(points != "", "—"),
            "algorithm": results["algorithm"].astype(str),
            "settings": [settings_text(found, shown) or "—" for found in settings],
        }
    )
    counts = frame.value_counts(sort=False).rename("runs").reset_index()
    order = {TUNED: 0, RUNNER_UP: 1, SHARED: 2, CONTROL: 3}
    counts = counts.assign(_order=counts["protocol"].map(order)).sort_values(["_order", "point", "algorithm"])
    counts = counts.drop(columns="_order")
    lines = [
        "## The configurations judged",
        "",
        "A side of a claim is one configuration: an algorithm at one set of settings (the summary's columns after "
        "`setting`; here those that differ between runs), its seeds its repeats. Tuned runs, runs at one shared "
        "η and each point of a sweep are judged apart (a row's setting names the point): a sweep's points are "
        "other configurations, never pooled as seeds.",
        "",
        markdown_table(counts),
    ]
    shared = table[table["protocol"] == SHARED]["setting"].astype(str)
    for point in sorted(set(points) - {""}):
        if protocol_word(point) != SHARED or shared.str.endswith(f", {point}").any():
            continue
        algorithms = ", ".join(sorted(set(results.loc[points == point, "algorithm"].astype(str))))
        lines.append(f"Not judged: the runs at {point} ({algorithms}): no claim has runs of all its sides there.")
    return "\n".join(lines) + "\n"


SMOKE_TEST = (
    "**A smoke test: one seed per configuration.** No claim can be decided on one seed, so every verdict "
    "below is *not comparable here*; `snakemake --cores 2 --configfile config/paper_small.yaml` (the same "
    "comparisons over 5 seeds, tuned and at a shared η) gives verdicts."
)


def smoke_note(results: pd.DataFrame) -> str:
    """SMOKE_TEST when no configuration of the summary ran more than one seed, else ""."""
    key = [c for c in ("dataset", "model", "algorithm", "platform", "workers", "setting") if c in results]
    names = [name for name in NAMES if name in results]
    if results.empty or "seed" not in results:
        return ""
    seeds = results.astype({c: str for c in [*key, *names]}).groupby([*key, *names], dropna=False)["seed"].nunique()
    return SMOKE_TEST if seeds.max() <= 1 else ""
