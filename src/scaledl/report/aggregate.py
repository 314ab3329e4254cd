"""One row per run, read from run.json (and metrics.csv) files; never from logs.

The summary table answers the paper's questions per run: how accurate, how
fast to the target (with its resolution: the evaluation cadence, in steps),
how long a step takes and how much of it is transfer and waiting. Every time
quantity is the one docs/time.md defines (scaledl.timing.steady_state).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from scaledl.atomic import atomic_path, write_text
from scaledl.errors import UserError
from scaledl.report.communication import bytes_to_target, communication

# (column, path in run.json); dotted paths reach into nested objects.
FIELDS: list[tuple[str, str]] = [
    ("dataset", "data.dataset"),
    ("model", "model.name"),
    ("algorithm", "algorithm.key"),
    ("platform", "platform"),
    ("workers", "world.workers"),
    ("ranks", "world.size"),
    ("seed", "arguments.seed"),
    ("final_test_accuracy", "final.test_accuracy"),
    ("target_accuracy", "target_accuracy"),
    ("time_to_target_s", "time_to_target_s"),
    ("eval_every", "evaluation.every_steps"),
    ("seconds_per_step", "seconds_per_step"),
    ("transfer_per_step_s", "time.transfer_per_step_s"),
    ("wait_per_step_s", "time.wait_per_step_s"),
    ("comm_share", "comm_share"),
    ("exposed_share", "exposed_share"),
    ("steps", "stop.steps"),
    ("epochs", "stop.epochs"),
    ("wall_s", "stop.wall_s"),
    ("stop_reason", "stop.reason"),
]

COLUMNS = [
    "dataset", "model", "algorithm", "platform", "workers", "ranks", "seed",
    "final_test_accuracy", "best_test_accuracy", "target_accuracy", "time_to_target_s", "eval_every",
    "seconds_per_step", "transfer_per_step_s", "wait_per_step_s", "comm_share", "exposed_share",
    "steps", "epochs", "wall_s", "stop_reason", "bytes_exchanged", "bytes_to_target", "run",
]  # fmt: skip

KEY = ["dataset", "model", "algorithm", "platform", "workers", "seed"]

# Files a run writes before its run.json (scaledl.train.outputs); metrics.csv is the one the table reads.
COMPANIONS = ("metrics.csv",)



def run_json_path(path: str | Path) -> Path:
    """`path` itself, or the run.json inside it when it is a run directory."""
    path = Path(path)
    return path / "run.json" if path.is_dir() else path


def read_json_object(path: str | Path, what: str, *, if_missing: str = "", if_unreadable: str = "") -> dict:
    """The JSON object at `path`; UserError naming the file, and what to do, if it is unusable."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}{if_missing}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: not a readable {what} ({error}){if_unreadable}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a scaledl {what} (top level is not an object)")
    return data


def read_run(path: str | Path) -> dict:
    """The parsed run.json at `path`; UserError naming the file if it is unusable."""
    return read_json_object(run_json_path(path), "run.json", if_missing=" (did the training run finish?)",
                            if_unreadable="; rerun that training")


def lookup(run: dict, dotted: str, path: Path):
    value = run
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise UserError(
                f"{path}: run.json lacks {dotted!r} "
                "(not a scaledl run.json, or written by an incompatible version)"
            )
        value = value[key]
    return value


def best_accuracy(run_dir: Path, final: float) -> float:
    """Highest evaluated test accuracy in metrics.csv (the final one if it has none)."""
    table = read_metrics(run_dir / "metrics.csv")
    values = table["test_accuracy"].dropna() if "test_accuracy" in table else []
    return float(max(values)) if len(values) else final


def read_metrics(path: Path) -> pd.DataFrame:
    """metrics.csv as a frame; UserError naming the file if it is unusable."""
    try:
        return pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"{path}: no such metrics.csv (did the training run finish?)") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        # pandas' parser and empty-data errors are ValueErrors
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not a readable metrics.csv ({first_line})") from None


def check_companions(run_json: Path) -> None:
    """A run.json vouches for the files written before it; without them the directory is not a run."""
    missing = [name for name in COMPANIONS if not (run_json.parent / name).exists()]
    if missing:
        raise UserError(f"{run_json}: {' and '.join(missing)} missing beside it, so this run is incomplete; "
                        "rerun that training")


def summary_row(path: str | Path) -> dict:
    """One run's row. Runs that did not run their course are shown, never hidden, by `stop_reason`
    (`interrupted`, `diverged`): their accuracy is that of the last center evaluated."""
    path = run_json_path(path)
    run = read_run(path)
    check_companions(path)
    row = {column: lookup(run, dotted, path) for column, dotted in FIELDS}
    row["best_test_accuracy"] = best_accuracy(path.parent, row["final_test_accuracy"])
    row["bytes_exchanged"] = communication(run)["bytes_exchanged"]   # per worker (report.communication)
    row["bytes_to_target"] = bytes_to_target(run)
    row["run"] = path.parent.as_posix()
    return row


def summarize(paths: list[str | Path]) -> pd.DataFrame:
    """The summary table of the runs at `paths` (run.json files or run directories)."""
    rows = [summary_row(path) for path in dict.fromkeys(str(path) for path in paths)]
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.sort_values(KEY, kind="stable").reset_index(drop=True)


def format_cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", r"\|")


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no tabulate dependency)."""
    numeric = [pd.api.types.is_numeric_dtype(table[column]) for column in table.columns]
    header = "| " + " | ".join(table.columns) + " |"
    rule = "|" + "|".join("---:" if right else "---" for right in numeric) + "|"
    rows = [
        "| " + " | ".join(format_cell(value) for value in record) + " |"
        for record in table.astype(object).itertuples(index=False, name=None)
    ]
    return "\n".join([header, rule, *rows]) + "\n"


def write_summary(table: pd.DataFrame, csv_path: str | Path, markdown_path: str | Path | None) -> None:
    """Write the CSV (full precision) and, if asked, a markdown copy without the run paths."""
    with atomic_path(csv_path) as tmp:
        table.to_csv(tmp, index=False)
    if markdown_path is not None:
        write_text(markdown_path, to_markdown(table.drop(columns=["run"], errors="ignore")))


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
