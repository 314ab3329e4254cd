"""bench_scale's grid, learning rates and tables, from a hand-made raw record; no MPI here."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from test_bench_overhead_hogwild import record_file  # noqa: E402

from bench import bench_scale as bench  # noqa: E402
from scaledl.algorithms import ALGORITHMS  # noqa: E402


def test_every_algorithm_at_p_and_the_master_based_ones_at_the_larger_p():
    cells = bench.grid(list(ALGORITHMS), 8, 16)
    assert cells[: len(ALGORITHMS)] == [(a, 8) for a in ALGORITHMS]
    large = [a for a, p in cells if p == 16]
    assert large == [a for a, info in ALGORITHMS.items() if info.needs_master]
    assert {"easgd", "async_easgd", "hogwild_sgd"} <= set(large) and "sync_easgd" not in large
    assert bench.grid(["easgd", "sync_sgd"], 8, 0) == [("easgd", 8), ("sync_sgd", 8)]


def test_learning_rates_keep_the_step_of_p_stale_or_summed_gradients():
    assert bench.learning_rate("sync_sgd", 8) == bench.learning_rate("easgd", 16) == 0.05
    for algorithm in ("async_sgd", "hogwild_sgd"):  # η·P fixed: 0.05 at P = 2, as config/config.yaml
        assert bench.learning_rate(algorithm, 2) == 0.05 and bench.learning_rate(algorithm, 8) == 0.0125
    assert bench.learning_rate("chip_partition", 8) * 8 == 0.05  # the sum of 8 gradients: sync_sgd's step
    assert bench.learning_rate("async_msgd", 2) == 0.005  # config/config.yaml's


def run(algorithm, workers, reached=True, **extra):
    ranks = workers + ALGORITHMS[algorithm].needs_master
    base = {"algorithm": algorithm, "workers": workers, "ranks": ranks, "lr": 0.05, "wall_s": 20.0}
    base.update(load_before=1.0, load_after=1.0)
    if extra.get("exit", 0) != 0:
        return {**base, **extra, "tail": ["scaledl train: error: something"]}
    return {
        **base,
        "exit": 0,
        "reached": reached,
        "stop": "target_accuracy" if reached else "diverged",
        "steps": 40 if reached else 10,
        "final_accuracy": 0.9056 if reached else 0.1,
        "time_to_target_s": 5.5 if reached else None,
        "train_s": 5.5,
        "seconds_per_step": 0.131,
        **extra,
    }


def record(tmp_path, dirty=True) -> Path:
    details = {
        "sync_easgd P=8": [run("sync_easgd", 8)],
        "async_sgd P=8": [run("async_sgd", 8, reached=False)],
        "easgd P=8": [run("easgd", 8, exit="timeout")],
        "easgd P=16": [run("easgd", 16, wall_s=202.8)],
    }
    samples = {name: [d["wall_s"]] for name, (d,) in details.items()}
    meta = {"target": 0.9, "max_steps": 300, "eval_every": 10, "details": details, "raw": "x.json", "wall_s": 400.0}
    path = record_file(tmp_path, "scale", samples, meta)
    data = json.loads(path.read_text())
    data["git"] = {"commit": "0" * 40, "dirty": dirty}
    path.write_text(json.dumps(data))
    return path


def test_tables_by_p_say_what_reached_missed_and_failed(tmp_path):
    title, intro, tables, notes = bench.render(json.loads(record(tmp_path).read_text()))
    eight, sixteen = tables.split("P = 16")
    assert "| sync_easgd | 8 | yes | 40 | 0.9056 | 5.5 s | 0.131 | 20.0 s |" in eight
    assert "| async_sgd | 9 | no | 10 | 0.1000 | — | 0.131 | 20.0 s |" in eight
    assert "| easgd | 9 | failed (exit timeout) | — | — | — | — | 20.0 s |" in eight
    assert "| easgd | 17 | yes | 40 |" in sixteen and "sync_easgd" not in sixteen
    assert "to test accuracy 0.9" in intro and "within 300 steps" in intro


def test_a_record_of_uncommitted_code_never_rewrites_the_benchmarks_page(tmp_path, capsys):
    page = REPO / "docs" / "benchmarks.md"
    before = page.read_bytes()
    assert bench.main(["--render", "--raw", str(record(tmp_path, dirty=True))]) == 0
    assert page.read_bytes() == before
    assert "docs/benchmarks.md left alone" in capsys.readouterr().out
