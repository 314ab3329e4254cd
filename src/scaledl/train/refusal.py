"""A run refused with a setting to fix (exit 2) stays refused on the workflow's retries, at once.

The Slurm profile retries every failed job (`retries`, for the time-limit and
preemption resumes), and neither Snakemake nor its Slurm plugin can retry by
exit status. So `scaledl train` keeps its own record: a run that ends with a
UserError (exit 2: the data, a setting, the launcher) leaves the one-line reason
in REFUSAL_FILE in its folder; the workflow passes a retry's attempt number as
SCALEDL_ATTEMPT (scaledl.grid.launch), and an attempt after the first that finds
that file stops before reading any data, with the same reason. A first attempt
(a new `snakemake` command, or a run by hand) clears the record and runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from scaledl.atomic import write_text
from scaledl.errors import UserError
from scaledl.grid.launch import ATTEMPT_VARIABLE

REFUSAL_FILE = "refused.txt"


class Refused(UserError):
    """This attempt repeats one whose run was refused: nothing was loaded or run."""


def attempt_of(environ: Mapping[str, str] = os.environ) -> int:
    """The workflow's attempt number of this job (1 when not retried, or not under the workflow)."""
    text = environ.get(ATTEMPT_VARIABLE, "1")
    return int(text) if text.isdigit() and int(text) > 0 else 1


def check(out_dir: str | os.PathLike, attempt: int, *, clear: bool) -> None:
    """Raise Refused on a retry of a refused run; on a first attempt, remove the old record (if `clear`:
    one rank does it)."""
    record = Path(out_dir) / REFUSAL_FILE
    if attempt == 1:
        if clear:
            record.unlink(missing_ok=True)
        return
    try:
        reason = record.read_text().strip()
    except FileNotFoundError:
        return  # the earlier attempt failed otherwise (a time limit, a node): run, resuming if it can
    raise Refused(
        f"an earlier attempt of this run was refused, and retry {attempt} cannot change that: {reason} "
        f"(fix it, then run snakemake again; {record} holds the reason)"
    )


def record(out_dir: str | os.PathLike, reason: str) -> None:
    """Leave the reason a run was refused in its folder, for check() on a retry. Only in a folder that
    exists (Snakemake makes a job's output folders before it starts): a refused run by hand into a new
    folder leaves nothing behind, as before."""
    if Path(out_dir).is_dir():
        write_text(Path(out_dir) / REFUSAL_FILE, reason.strip() + "\n")
