"""A run's timeline.h5 read back: every rank's steps and phases, as a summary or a Chrome / Perfetto trace.

timeline.h5 (scaledl.train.outputs.write_timeline) holds, per rank, when
each step ended (seconds since that rank's training began) and how many
seconds of the step each phase took (scaledl.comm.timing.PHASES). It records how
long, not in which order: the trace lays a step's phases out back to back
from the step's start in TRACE_ORDER (a step's usual order), and the rest of
the step, time outside every phase, is left empty.

The trace is the Trace Event Format that chrome://tracing and
https://ui.perfetto.dev load: one process per rank (pid = rank, named with
its role), a thread `steps` with one complete ("X") event per step and a
thread `phases` with one per phase of each step, times in microseconds.
Each rank's clock starts when its training starts (after setup), so ranks
line up to within that start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from scaledl.atomic import atomic_path
from scaledl.comm.timing import COMPUTE, OFF_CLOCK, TRANSFER, WAIT
from scaledl.errors import UserError

# A step's phases in the order a step usually runs them: the batch, the gradient, the exchange, the update;
# an evaluation or a checkpoint comes at the step's end.
TRACE_ORDER = ("data", "h2d", "compute", "param_copy", "wait", "comm", "update", "center_update", "checkpoint", "eval")
GROUP_OF = {
    **dict.fromkeys(COMPUTE, "compute"),
    **dict.fromkeys(TRANSFER, "transfer"),
    **dict.fromkeys(WAIT, "wait"),
    **dict.fromkeys(OFF_CLOCK, "off clock"),
}
STEPS_TID, PHASES_TID = 0, 1
US = 1e6  # the format's unit: microseconds


@dataclass(frozen=True)
class RankTimeline:
    rank: int
    role: str
    step_end_s: np.ndarray  # (steps,)
    phase_s: np.ndarray  # (steps, phases)
    phases: tuple[str, ...]

    @property
    def step_start_s(self) -> np.ndarray:
        return np.concatenate([[0.0], self.step_end_s[:-1]])

    def totals(self) -> dict[str, float]:
        """Seconds per phase over every step."""
        return dict(zip(self.phases, self.phase_s.sum(axis=0).tolist()))


def read_timeline(path: str | Path) -> list[RankTimeline]:
    """Every rank of a timeline.h5, in rank order; UserError naming the file if it is missing or not one."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such timeline.h5 (a finished run writes one beside its run.json)")
    try:
        with h5py.File(path, "r") as f:
            phases = tuple(str(p) for p in f.attrs["phases"])
            ranks = []
            for name in f:
                if not name.startswith("rank") or not name[4:].isdigit():
                    continue
                group = f[name]
                ends = np.asarray(group["step_end_s"][()], dtype=np.float64).reshape(-1)
                rows = np.asarray(group["phase_s"][()], dtype=np.float64).reshape(len(ends), len(phases))
                ranks.append(RankTimeline(int(name[4:]), str(group.attrs.get("role", "")), ends, rows, phases))
    except (OSError, KeyError, ValueError, TypeError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not a readable scaledl timeline.h5 ({first}); rerun that training") from None
    if not ranks:
        raise UserError(f"{path}: not a scaledl timeline.h5 (no /rank<r> group); rerun that training")
    return sorted(ranks, key=lambda r: r.rank)


def summary_lines(ranks: list[RankTimeline]) -> list[str]:
    """One line per rank: its steps, its last step's end, and its seconds by group of phases."""
    lines = []
    for r in ranks:
        groups: dict[str, float] = {}
        for phase, seconds in r.totals().items():
            groups[GROUP_OF.get(phase, phase)] = groups.get(GROUP_OF.get(phase, phase), 0.0) + seconds
        end = float(r.step_end_s[-1]) if len(r.step_end_s) else 0.0
        spent = ", ".join(f"{group} {seconds:.3f} s" for group, seconds in groups.items())
        lines.append(f"rank {r.rank} ({r.role}): {len(r.step_end_s)} steps in {end:.3f} s; {spent}")
    return lines


def select_steps(r: RankTimeline, first: int, last: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, phase seconds) of steps first..last of a rank (1-based, both included; last None: to
    the end)."""
    keep = slice(first - 1, len(r.step_end_s) if last is None else last)
    return r.step_start_s[keep], r.step_end_s[keep], r.phase_s[keep]


def trace_events(ranks: list[RankTimeline], first: int = 1, last: int | None = None) -> Iterator[dict]:
    """The Trace Event Format's events of steps first..last: names of processes and threads, then every
    rank's steps and their phases."""
    for r in ranks:
        yield {"name": "process_name", "ph": "M", "pid": r.rank, "args": {"name": f"rank {r.rank} ({r.role})"}}
        yield {"name": "process_sort_index", "ph": "M", "pid": r.rank, "args": {"sort_index": r.rank}}
        for tid, name in ((STEPS_TID, "steps"), (PHASES_TID, "phases")):
            yield {"name": "thread_name", "ph": "M", "pid": r.rank, "tid": tid, "args": {"name": name}}
    order = [p for p in TRACE_ORDER if p in ranks[0].phases] + [p for p in ranks[0].phases if p not in TRACE_ORDER]
    for r in ranks:
        starts, ends, rows = select_steps(r, first, last)
        columns = [r.phases.index(p) for p in order]
        for offset, (start, end, row) in enumerate(zip(starts.tolist(), ends.tolist(), rows.tolist())):
            step = first + offset
            seconds = {phase: row[column] for phase, column in zip(order, columns) if row[column] > 0}
            yield {
                "name": f"step {step}",
                "cat": "step",
                "ph": "X",
                "ts": round(start * US, 3),
                "dur": round(max(end - start, 0.0) * US, 3),
                "pid": r.rank,
                "tid": STEPS_TID,
                "args": {"step": step, **{f"{phase}_s": value for phase, value in seconds.items()}},
            }
            at = start
            for phase, value in seconds.items():
                value = min(value, max(end - at, 0.0))  # a step's phases fill at most the step
                if value <= 0:
                    continue
                yield {
                    "name": phase,
                    "cat": GROUP_OF.get(phase, "other"),
                    "ph": "X",
                    "ts": round(at * US, 3),
                    "dur": round(value * US, 3),
                    "pid": r.rank,
                    "tid": PHASES_TID,
                    "args": {"step": step},
                }
                at += value


def write_chrome_trace(ranks: list[RankTimeline], path: str | Path, first: int = 1, last: int | None = None) -> int:
    """The trace as one JSON object ({"traceEvents": [...]}), streamed to `path` atomically; returns the
    number of complete events (steps and phases) written."""
    count = 0
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write('{"displayTimeUnit": "ms", "otherData": {"source": "scaledl timeline.h5"}, "traceEvents": [\n')
        for index, event in enumerate(trace_events(ranks, first, last)):
            f.write((",\n" if index else "") + json.dumps(event, separators=(",", ":")))
            count += event["ph"] == "X"
        f.write("\n]}\n")
    return count
