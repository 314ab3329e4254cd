"""Two result sets side by side: every metric of every matched configuration, and whether it changed.

A side is a summary table (`scaledl aggregate`'s CSV) or folders of runs
(a results folder, run directories, run.json files: summarised here). Rows
match on the run key less the seed (dataset, model, algorithm, platform,
workers, setting): the seeds are each side's repeats. Per metric, each
side's median and range over its seeds, B − A and B ÷ A of the medians, and
a verdict:

    changed                         the two ranges over seeds do not overlap: every seed of one side lies
                                    beyond every seed of the other
    not beyond the seeds' spread    they overlap
    one seed                        a side has a single seed, so there is no spread to judge against

A configuration is also its settings, swept or not (lr, beta, momentum, tau, ...: the summary's columns
after `setting`, scaledl.report.identity): runs pair only at identical settings. Where both sides ran a
configuration of that key at other settings (η 0.005 in A, 0.004 in B), its metrics are not compared: a
row per differing setting says "settings differ", with each side's values. A matched configuration that
ran under other conditions (threads per rank, ranks) gets a row per condition with the verdict "setting
changed" beside its compared metrics: they then differ by that too, not only by the code (a thread count
changes a reduction's order, so even a bitwise repeatable accuracy may move).

With s seeds a side, two identical configurations give disjoint ranges with
probability 2 / C(2s, s) (0.1 at 3 seeds, 0.008 at 5): "changed" at 3
seeds is a flag to look at, not a test at 5 %. Timing metrics vary from run
to run even where the arithmetic is bitwise repeatable; accuracies do not.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scaledl.errors import UserError
from scaledl.report.claims import read_summary
from scaledl.report.identity import settings_text
from scaledl.report.runs import RUN_KEY, expand_runs
from scaledl.report.summary import settings_columns, summarize
from scaledl.report.tables import format_cell

MATCH = [column for column in RUN_KEY if column != "seed"]
METRICS = [
    "final_test_accuracy",
    "best_test_accuracy",
    "time_to_target_s",
    "seconds_per_step",
    "samples_per_s",
    "transfer_per_step_s",
    "wait_per_step_s",
    "comm_share",
    "exposed_share",
    "bytes_to_target",
]
COLUMNS = [
    *MATCH, "settings", "metric", "a_seeds", "a_median", "a_min", "a_max", "b_seeds", "b_median", "b_min", "b_max",
    "b_minus_a", "b_over_a", "verdict", "a_values", "b_values",
]  # fmt: skip
SETTINGS_DIFFER = "settings differ"  # not compared: the two sides' runs of this key are other configurations
VERDICTS = (SETTINGS_DIFFER, "setting changed", "changed", "not beyond the seeds' spread", "one seed")
# How a run ran rather than what it measured: a difference is reported, not judged against the seeds.
CONDITIONS = ["ranks", "threads"]


def read_side(path: Path) -> pd.DataFrame:
    """One side as a summary frame: a summary CSV as written, anything else summarised from its runs."""
    path = Path(path)
    if path.is_file() and path.suffix == ".csv":
        frame = read_summary(path)
    elif path.is_dir() and (path / "tables" / "summary.csv").is_file():  # a results folder the workflow wrote
        return read_side(path / "tables" / "summary.csv")
    elif path.exists():
        frame = summarize(expand_runs([path]))
    else:
        raise UserError(f"{path}: no such summary table, results folder or run")
    missing = [column for column in [*MATCH, "seed"] if column not in frame]
    if missing:
        raise UserError(
            f"{path}: not a summary table (no column {', '.join(missing)}); write it with scaledl aggregate"
        )
    frame["setting"] = frame["setting"].astype(object).fillna("")
    return frame


def spread_verdict(a: pd.Series, b: pd.Series) -> str:
    """One metric's verdict by the seeds' ranges (the module docstring's three words): disjoint or not."""
    if len(a) < 2 or len(b) < 2:
        return "one seed"
    return "changed" if a.max() < b.min() or b.max() < a.min() else "not beyond the seeds' spread"


def conditions(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The condition columns both sides have (CONDITIONS)."""
    return [c for c in CONDITIONS if c in a.columns and c in b.columns]


def identity(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The settings columns of either side (the columns a summary holds beyond its own); a side without one
    (a summary of an older version) gets it empty."""
    found = [c for c in [*settings_columns(a), *settings_columns(b)] if c not in METRICS and c != "seed"]
    return list(dict.fromkeys(found))


def settings_label(names: list[str], values: tuple) -> str:
    """ "lr=0.05, beta=0.9": a configuration's settings (those it has)."""
    return settings_text({name: value for name, value in zip(names, values) if value != ""})


def condition_row(key: tuple, name: str, va: pd.Series, vb: pd.Series, verdict: str = "setting changed") -> dict | None:
    """A `verdict` row where the two sides' values of condition (or setting) `name` differ, else None."""
    values_a, values_b = (sorted(set(v.dropna().tolist()), key=str) for v in (va, vb))
    if values_a == values_b:
        return None
    na, nb = pd.to_numeric(va, errors="coerce").dropna(), pd.to_numeric(vb, errors="coerce").dropna()
    numeric = len(na) == len(va.dropna()) and len(nb) == len(vb.dropna()) and len(na) and len(nb)
    spread = {
        f"{side}_{stat}": float(getattr(v, stat)()) if numeric else None
        for side, v in (("a", na), ("b", nb))
        for stat in ("median", "min", "max")
    }
    difference = spread["b_median"] - spread["a_median"] if numeric else None
    ratio = spread["b_median"] / spread["a_median"] if numeric and spread["a_median"] else None
    return {
        **dict(zip(MATCH, key)), "metric": name, "a_seeds": len(va), "b_seeds": len(vb), **spread,
        "b_minus_a": difference, "b_over_a": ratio, "verdict": verdict,
        "a_values": ", ".join(map(str, values_a)), "b_values": ", ".join(map(str, values_b)),
    }  # fmt: skip


def compare(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple], list[tuple]]:
    """(one row per matched configuration and metric, the keys only in A, the keys only in B); a condition
    that differs between the sides is a row of its own (condition_row)."""
    names = identity(a, b)
    a, b = (side.reindex(columns=[*side.columns, *[n for n in names if n not in side]]) for side in (a, b))
    # one spelling of "none" on both sides (two NaN are no equal keys)
    a, b = (side.astype({name: object for name in names}).fillna({name: "" for name in names}) for side in (a, b))
    groups_a = {key: rows for key, rows in a.groupby([*MATCH, *names], dropna=False, sort=True)}
    groups_b = {key: rows for key, rows in b.groupby([*MATCH, *names], dropna=False, sort=True)}
    rows, compared = [], conditions(a, b)
    for key in sorted(set(groups_a) - set(groups_b), key=str):  # other settings on the other side: said, not paired
        for other in sorted(
            (k for k in set(groups_b) - set(groups_a) if k[: len(MATCH)] == key[: len(MATCH)]), key=str
        ):
            for name in names:
                va, vb = groups_a[key][name], groups_b[other][name]
                row = condition_row(key[: len(MATCH)], name, va, vb, SETTINGS_DIFFER)
                rows += [{**row, "settings": settings_label(names, key[len(MATCH) :])}] if row else []
    for key in sorted(set(groups_a) & set(groups_b), key=str):
        settings = settings_label(names, key[len(MATCH) :])
        for name in compared:
            row = condition_row(key[: len(MATCH)], name, groups_a[key][name], groups_b[key][name])
            rows += [{**row, "settings": settings}] if row else []
        for metric in METRICS:
            if metric not in groups_a[key] or metric not in groups_b[key]:
                continue
            va = pd.to_numeric(groups_a[key][metric], errors="coerce").dropna()
            vb = pd.to_numeric(groups_b[key][metric], errors="coerce").dropna()
            if va.empty or vb.empty:
                continue
            ma, mb = float(va.median()), float(vb.median())
            rows.append(
                {
                    **dict(zip(MATCH, key)),
                    "settings": settings,
                    "metric": metric,
                    "a_seeds": len(va),
                    "a_median": ma,
                    "a_min": float(va.min()),
                    "a_max": float(va.max()),
                    "b_seeds": len(vb),
                    "b_median": mb,
                    "b_min": float(vb.min()),
                    "b_max": float(vb.max()),
                    "b_minus_a": mb - ma,
                    "b_over_a": mb / ma if ma else None,
                    "verdict": spread_verdict(va, vb),
                }
            )
    apart = {key[: len(MATCH)] for key in groups_a} & {key[: len(MATCH)] for key in groups_b}  # said above
    only_a = sorted({key[: len(MATCH)] for key in set(groups_a) - set(groups_b)} - apart, key=str)
    only_b = sorted({key[: len(MATCH)] for key in set(groups_b) - set(groups_a)} - apart, key=str)
    return pd.DataFrame(rows, columns=COLUMNS), only_a, only_b


def markdown(table: pd.DataFrame, a: Path, b: Path, only_a: list[tuple], only_b: list[tuple]) -> str:
    """The comparison page: the verdict counts, the changed settings and rows first, then every row."""
    counts = ", ".join(f"{v}: {int((table['verdict'] == v).sum())}" for v in VERDICTS)
    lines = [
        f"# {b} against {a}",
        "",
        f"Rows match on {', '.join(MATCH)} and the settings the runs ran with (lr, beta, ...); each side's "
        f"seeds are its repeats. Verdicts ({counts}): 'changed' when the two ranges over seeds do not overlap; "
        "B − A and B ÷ A are of the medians.",
        "",
    ]
    differ = table[table["verdict"] == SETTINGS_DIFFER]
    if len(differ):
        said = sorted({f"{'/'.join(map(str, (r.algorithm, r.platform, f'p{r.workers}')))} {r.metric} "
                       f"{r.a_values} → {r.b_values}" for r in differ.itertuples()})  # fmt: skip
        lines += [
            f"**Not compared: the sides ran other settings** ({'; '.join(said)}): a configuration is compared "
            "only with the same settings.",
            "",
        ]
    changed = table[table["verdict"] == "setting changed"]
    if len(changed):
        said = sorted({f"{r.metric} {r.a_values} → {r.b_values}" for r in changed.itertuples()})
        lines += [
            f"**The sides ran under other settings** ({'; '.join(said)}): their metrics differ by these too, "
            "not only by the code.",
            "",
        ]
    shown = ["metric", *MATCH, "a_median", "a_min", "a_max", "b_median", "b_min", "b_max", "b_over_a", "verdict"]
    ordered = table.assign(_order=table["verdict"].map(VERDICTS.index)).sort_values("_order", kind="stable")
    lines.append("| " + " | ".join(shown) + " |")
    lines.append("|" + "---|" * len(shown))
    for _, row in ordered.iterrows():
        lines.append("| " + " | ".join(format_cell(row[c]) for c in shown) + " |")
    for side, keys in (("A", only_a), ("B", only_b)):
        if keys:
            lines += ["", f"Only in {side}: " + "; ".join(", ".join(map(str, k)) for k in keys) + "."]
    return "\n".join(lines) + "\n"
