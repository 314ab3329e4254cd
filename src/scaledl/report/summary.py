"""The summary table: one row per run, read from run.json (and metrics.csv) files; never from logs.

It answers the paper's questions per run: how accurate, how fast to the
target (with its resolution: the evaluation cadence, in steps), how long a
step takes, how many samples a second that is, and how much of it is transfer
and waiting. Every time quantity is the one docs/time.md defines
(scaledl.comm.timing.steady_state). `config` names the workflow config that ran it,
so that two result sets stay apart once their tables are put together. After
`setting` come the settings the run ran with, swept or not (lr, beta, momentum,
tau, ...: scaledl.report.identity), a column each: with the key less the seed,
they tell one configuration from another.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from scaledl.grid.keys import results_name_of
from scaledl.report.communication import bytes_to_target, communication
from scaledl.report.identity import NAMES
from scaledl.report.runs import RUN_KEY, Run, read_run
from scaledl.report.scaling import samples_per_second

# The columns read as run.json records them, in the order they are read.
RECORDED = [
    "dataset", "model", "algorithm", "platform", "workers", "setting", "ranks", "threads", "seed",
    "final_test_accuracy", "target_accuracy", "time_to_target_s", "target_step", "steps_to_target",
    "later_target_accuracy", "time_to_later_target_s", "steps_to_later_target", "eval_every",
    "seconds_per_step", "transfer_per_step_s", "wait_per_step_s", "comm_share", "exposed_share",
    "staleness_median", "staleness_p90", "staleness_max",
    "steps", "epochs", "wall_s", "stop_reason", "commit", "dirty", "slurm_job_id", "batch_size", "simulated_on",
    "clock",
]  # fmt: skip

SUMMARY_COLUMNS = [
    "config", "dataset", "model", "algorithm", "platform", "workers", "setting", "ranks", "threads", "seed",
    "final_test_accuracy", "best_test_accuracy", "target_accuracy", "time_to_target_s", "target_step",
    "steps_to_target", "later_target_accuracy", "time_to_later_target_s", "steps_to_later_target", "eval_every",
    "seconds_per_step", "samples_per_s", "transfer_per_step_s", "wait_per_step_s", "comm_share", "exposed_share",
    "staleness_median", "staleness_p90", "staleness_max",
    "steps", "epochs", "wall_s", "stop_reason", "resumed", "bytes_exchanged", "bytes_to_target",
    "commit", "dirty", "slurm_job_id", "simulated_on", "clock", "cores", "oversubscribed", "run",
]  # fmt: skip


def best_or_final_accuracy(run: Run, final: float) -> float:
    """Highest evaluated test accuracy in metrics.csv (the final one if it has none)."""
    table = run.metrics
    values = table["test_accuracy"].dropna() if "test_accuracy" in table else []
    return float(max(values)) if len(values) else final


def resumed(run: Run) -> bool:
    """Whether the run continued from a checkpoint: its clocks and phase totals then join the attempts (the
    steps lost to a kill are redone, not counted), and its `commit` is the last attempt's."""
    return bool(run.record.get("checkpoints", {}).get("resumes"))


def oversubscription(record: dict) -> tuple[int | None, bool]:
    """The run's host's logical CPUs, and whether a node held more ranks' threads than that (a real run only:
    ranks that share cores time-slice, so their step prices are the scheduler's). Simulated runs: (None, False)."""
    if record.get("transport", {}).get("kind") == "simulated":
        return None, False
    cores = ((record.get("provenance") or {}).get("hardware") or {}).get("logical_cpus")
    world = record.get("world") or {}
    threads = (world.get("ranks_per_node") or 0) * (world.get("threads_per_rank") or 1)
    return cores, bool(cores and threads > cores)


def summary_row(path: str | Path) -> dict:
    """One run's row. Runs that did not run their course are shown, never hidden, by `stop_reason`
    (`interrupted`, `diverged`): their accuracy is that of the last center evaluated."""
    run = read_run(path)
    run.check_companions()
    row = run.fields(RECORDED)
    # the workflow writes every run under results/NAME/: the config's name is in the folder it gave the run
    row["config"] = results_name_of(run.record.get("arguments", {}).get("out_dir") or run.folder)
    # the steady-state throughput: a step's samples (every worker's batch) over the seconds per step
    row["samples_per_s"] = samples_per_second(row.pop("batch_size") * row["workers"], row["seconds_per_step"])
    row["best_test_accuracy"] = best_or_final_accuracy(run, row["final_test_accuracy"])
    row["resumed"] = resumed(run)
    row["bytes_exchanged"] = communication(run.record)["bytes_exchanged"]  # per worker (report.communication)
    row["bytes_to_target"] = bytes_to_target(run.record)
    row["cores"], row["oversubscribed"] = oversubscription(run.record)
    row["run"] = run.folder
    row.update({name: value for name, value in run.settings.items() if name not in SUMMARY_COLUMNS})
    return row


def summarize(paths: list[str | Path]) -> pd.DataFrame:
    """The summary table of the runs at `paths` (run.json files or run directories): SUMMARY_COLUMNS, with a
    column for every setting a run ran with (swept, tuned or neither) after `setting`."""
    rows = [summary_row(path) for path in dict.fromkeys(str(path) for path in paths)]
    found = dict.fromkeys(name for row in rows for name in row if name not in SUMMARY_COLUMNS)
    settings = sorted(found, key=lambda name: NAMES.index(name) if name in NAMES else len(NAMES))
    at = SUMMARY_COLUMNS.index("setting") + 1
    table = pd.DataFrame(rows, columns=[*SUMMARY_COLUMNS[:at], *settings, *SUMMARY_COLUMNS[at:]])
    return table.sort_values(RUN_KEY, kind="stable").reset_index(drop=True)


def settings_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of a summary frame that are settings (summarize's, between `setting` and `ranks`)."""
    return [column for column in frame.columns if column not in SUMMARY_COLUMNS]
