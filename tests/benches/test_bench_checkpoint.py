"""bench_checkpoint renders its section from a raw record alone; no MPI, no timing here.

The record is hand-made: one case whose checkpoints stay inside the A/A noise floor, one beyond it,
so the test checks what the table says about each, not any machine's speed.
"""

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from test_bench_overhead_hogwild import record_file  # noqa: E402

from bench import bench_checkpoint  # noqa: E402

SMALL = bench_checkpoint.Case("lenet", "digits", 10, 60, 10)
LARGE = bench_checkpoint.Case("cifar_alexnet", "synthetic32", 2, 8, 2)


def details(step, cost, every, nbytes, count):
    return {
        "seconds_per_step": step,
        "with_checkpoints_s": step + cost / every,
        "count": count,
        "per_checkpoint_s": cost,
        "bytes": nbytes,
    }


def record(tmp_path) -> Path:
    samples, meta_details = {}, {}
    for case, step, cost, nbytes in ((SMALL, 0.010, 0.0002, 7 << 20), (LARGE, 0.45, 1.4, 547 << 20)):
        none, every, aa = bench_checkpoint.case_cells(case)
        base = [step * f for f in (1.0, 1.02, 0.99, 1.01, 1.0)]
        samples[none], samples[aa] = base, [b * 1.01 for b in base]
        meta_details[every] = [details(b, cost, case.every, nbytes, case.steps // case.every) for b in base]
        samples[every] = [d["with_checkpoints_s"] for d in meta_details[every]]
        meta_details[none] = meta_details[aa] = [details(b, 0.0, case.every, None, 0) for b in base]
    meta = {
        "ranks": 2,
        "rounds": 5,
        "details": meta_details,
        "raw": "bench/raw/checkpoint.json",
        "wall_s": 200.0,
        "cases": [vars(c) for c in (SMALL, LARGE)],
    }
    return record_file(tmp_path, "checkpoint", samples, meta)


def test_render_gives_each_case_its_cost_verdict_and_share_at_the_default_interval(tmp_path):
    title, intro, tables, notes = bench_checkpoint.render(json.loads(record(tmp_path).read_text()))
    small, large = [line for line in tables.splitlines() if line.startswith("| lenet") or line.startswith("| cifar")]
    assert "no difference" in small and "slower" in large
    assert "7.0 MiB (6 written per run)" in small and "547.0 MiB (4 written per run)" in large
    # c / (300 s + c): 1.4 s of checkpoint every 300 s is 0.4645 %; alone at K = 2 steps of 0.45 s: 1 + 1.4/0.9
    assert "0.4645%" in large and "2.556×" in large
    assert "P = 2" in intro and "A/A" in intro


def test_render_flag_rebuilds_the_section_from_the_file(tmp_path, capsys):
    assert bench_checkpoint.main(["--render", "--raw", str(record(tmp_path)), "--no-doc"]) == 0
    assert capsys.readouterr().out.startswith("## Checkpoint overhead")


@pytest.mark.parametrize(
    "text, message",
    [
        ("lenet:digits:10:60", "MODEL:DATASET"),
        ("lenet:mnist:10:60:10", "dataset must be one of"),
        ("lenet:digits:10:65:10", "multiple of WARMUP"),
        ("lenet:digits:10:60:100", "EVERY at most STEPS"),
    ],
)
def test_bad_cases_are_refused_in_one_line(text, message):
    with pytest.raises(ValueError, match=message):
        bench_checkpoint.parse_cases(text)


def test_rotating_rounds_measure_every_cell_once_per_round_in_the_designs_order(capsys):
    from bench import common

    seen = []

    def measure_one(cell, r, i):
        seen.append((r, i, cell))
        return float(10 * r + i), {"round": r}

    result = common.rotating_rounds("test", ["a", "b", "c"], 2, measure_one)
    assert result["order"] == [["a", "b", "c"], ["c", "b", "a"]]  # rows 0 and 3 of the 6-row Williams design
    assert result["samples"] == {"a": [0.0, 12.0], "b": [1.0, 11.0], "c": [2.0, 10.0]}
    assert [len(result["conditions"][c]) for c in "abc"] == [2, 2, 2]  # the load and steal each run met
    assert result["details"]["a"] == [{"round": 0}, {"round": 1}]
    assert capsys.readouterr().out.count("bench_test: round") == 6
