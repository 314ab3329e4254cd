"""`scaledl timeline`: a run's timeline.h5 as a per-rank summary and a Chrome / Perfetto trace."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scaledl.cli import main
from scaledl.comm.timing import PHASES
from scaledl.report.trace import TRACE_ORDER, read_timeline, trace_events
from scaledl.train.outputs import write_timeline


def phase_row(**seconds) -> list[float]:
    return [seconds.get(phase, 0.0) for phase in PHASES]


@pytest.fixture
def timeline(tmp_path):
    """Two ranks of a synchronous run, three steps each, with known seconds (what write_timeline writes)."""
    path = tmp_path / "run" / "timeline.h5"
    path.parent.mkdir()
    worker = {
        "step_end_s": np.array([1.0, 1.5, 2.5]),
        "phase_s": np.array(
            [
                phase_row(data=0.1, compute=0.5, comm=0.2, update=0.1),
                phase_row(data=0.1, compute=0.25, wait=0.05, comm=0.1),
                phase_row(compute=0.4, comm=0.1, eval=0.5),
            ],
            dtype=np.float32,
        ),
    }
    write_timeline(path, [{"rank": 0, "role": "worker", **worker}, {"rank": 1, "role": "worker", **worker}], PHASES)
    return path


def test_the_trace_lays_each_steps_phases_back_to_back_from_its_start(timeline):
    events = list(trace_events(read_timeline(timeline)))
    names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
    assert names == {(0, "rank 0 (worker)"), (1, "rank 1 (worker)")}

    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step" and e["pid"] == 1]
    assert [(e["name"], e["ts"], e["dur"]) for e in steps] == [
        ("step 1", 0.0, 1e6),
        ("step 2", 1e6, 0.5e6),
        ("step 3", 1.5e6, 1e6),
    ]
    second = [e for e in events if e["ph"] == "X" and e["tid"] == 1 and e["pid"] == 1 and e["args"]["step"] == 2]
    assert [e["name"] for e in second] == [p for p in TRACE_ORDER if p in ("data", "compute", "wait", "comm")]
    assert [e["cat"] for e in second] == ["compute", "compute", "wait", "transfer"]
    for before, after in zip(second, second[1:]):  # contiguous: each phase starts where the one before ended
        assert after["ts"] == pytest.approx(before["ts"] + before["dur"], abs=1e-3)
    assert second[0]["ts"] == 1e6 and sum(e["dur"] for e in second) == pytest.approx(0.5e6, rel=1e-6)
    assert all(e["tid"] == 0 or e["dur"] > 0 for e in events if e["ph"] == "X")  # no empty phases


def test_timeline_command_writes_a_loadable_trace_of_the_steps_asked_for(timeline, tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert main(["timeline", str(timeline.parent), "--chrome", str(out), "--steps", "2:3"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("rank 0 (worker): 3 steps in 2.500 s; compute 1.450 s")
    assert printed[-1].startswith(f"wrote {out}: ")
    trace = json.loads(out.read_text())  # one JSON object, as chrome://tracing and Perfetto read it
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["step"] for e in complete} == {2, 3}
    assert {e["pid"] for e in complete} == {0, 1}
    assert f"{len(complete)} events of 2 ranks" in printed[-1]
    assert not list(tmp_path.glob(".trace.json.*"))  # written atomically


@pytest.mark.parametrize("content", [None, b"not an HDF5 file", "no ranks"])
def test_a_missing_or_corrupt_timeline_is_one_line_and_no_trace(tmp_path, capsys, content):
    path = tmp_path / "timeline.h5"
    if content == "no ranks":
        write_timeline(path, [], PHASES)
    elif content is not None:
        path.write_bytes(content)
    out = tmp_path / "trace.json"
    assert main(["timeline", str(path), "--chrome", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"scaledl timeline: error: {path}: ")
    assert not out.exists()


def test_a_step_range_must_be_first_to_last(timeline, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["timeline", str(timeline), "--steps", "3:2"])
    assert exit_.value.code == 2
    assert "expected FIRST:LAST" in capsys.readouterr().err
