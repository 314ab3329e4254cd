"""The one table writer (CSV at full precision, a GitHub-flavoured markdown copy) and the tables of `aggregate`.

Every report table is a pandas frame; `write_table` writes it atomically
(scaledl.atomic), so a failed command leaves no half-written file. Markdown
cells print floats with 4 significant digits and a missing value as "—";
numeric columns are right-aligned. The markdown copy of a table leaves out
its `run` column (the run folders) unless the caller writes its own text.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from scaledl.atomic import atomic_path, write_text
from scaledl.report.averaging import averaging_table
from scaledl.report.scaling import scaling_table
from scaledl.report.summary import summarize


def format_cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", r"\|")


def right_aligned(column: pd.Series) -> bool:
    """Numeric columns: a numeric dtype, or (for object columns) only numbers besides the missing values."""
    if pd.api.types.is_numeric_dtype(column):
        return True
    values = [v for v in column if not pd.isna(v)]
    return bool(values) and all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in values)


def markdown_table(frame: pd.DataFrame, headers: list[str] | None = None) -> str:
    """`frame` as a GitHub-flavoured markdown table (no tabulate dependency); `headers` replace the column names."""
    header = "| " + " | ".join(headers or [str(column) for column in frame.columns]) + " |"
    rule = "|" + "|".join("---:" if right_aligned(frame[column]) else "---" for column in frame.columns) + "|"
    rows = [
        "| " + " | ".join(format_cell(value) for value in record) + " |"
        for record in frame.astype(object).itertuples(index=False, name=None)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def write_table(
    frame: pd.DataFrame, csv_path: str | Path, markdown_path: str | Path | None = None, *, markdown: str | None = None
) -> None:
    """The CSV at full precision and, when `markdown_path` is given, `markdown` (default: the table without
    its run column) beside it."""
    with atomic_path(csv_path) as tmp:
        frame.to_csv(tmp, index=False)
    if markdown_path is not None:
        if markdown is None:
            markdown = markdown_table(frame.drop(columns=["run"], errors="ignore"))
        write_text(markdown_path, markdown)


# ------------------------------------------------------------ aggregate's tables


def summary_table(paths: list) -> tuple[pd.DataFrame, list[str]]:
    """The summary (scaledl.report.summary): every run is a row, so nothing to note."""
    return summarize(paths), []


@dataclass(frozen=True)
class Table:
    build: Callable[[list], tuple[pd.DataFrame, list[str]]]  # run paths → (table, notes on what it left out)
    what: str  # for --help
    row_per_run: bool = False


TABLES: dict[str, Table] = {
    "summary": Table(summary_table, "one row per run (default)", row_per_run=True),
    "scaling": Table(
        scaling_table,
        "weak and strong scaling efficiency of every sweep over the worker count (scaledl.report.scaling)",
    ),
    "averaging": Table(
        averaging_table,
        "one row per variant with bytes exchanged, accuracy, time to target and "
        "the slowdown a straggler causes (scaledl.report.averaging)",
    ),
}
