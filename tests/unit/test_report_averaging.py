"""The averaging table and the bytes a run exchanged, from run.json files (no MPI, no timing)."""

from __future__ import annotations

import json
import math

from test_aggregate import make_run
from test_figures import engine_report

from scaledl.report.averaging import averaging_table
from scaledl.report.communication import bytes_to_target, communication, rounds_by
from scaledl.report.summary import summarize
from scaledl.run_record import read_run_json

PARAMETERS = 61706  # make_run's model: 246,824 bytes of float32


def with_fields(run_dir, **fields):
    path = run_dir / "run.json"
    record = json.loads(path.read_text())
    for dotted, value in fields.items():
        target = record
        *parents, last = dotted.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[last] = value
    path.write_text(json.dumps(record))
    return run_dir


def test_rounds_count_the_first_iteration():
    assert [rounds_by(step, 8) for step in (0, 1, 8, 9, 16, 17)] == [0, 1, 1, 2, 2, 3]
    assert [rounds_by(step, 1) for step in (0, 1, 40)] == [0, 1, 40]


def test_bytes_per_round_and_to_target(tmp_path):
    sync = with_fields(
        make_run(tmp_path, "sync_sgd"),
        algorithm_report=[{"rank": 0, "exchanges": 150}],
        **{"evaluation.target_step": 40},
    )
    diloco = with_fields(
        make_run(tmp_path, "diloco"),
        algorithm_report=[engine_report(8, exchanges=19)],
        **{"evaluation.target_step": 40},
    )
    int8 = with_fields(
        make_run(tmp_path, "diloco", platform="local_int8"),
        algorithm_report=[engine_report(8, "int8", exchanges=19)],
        **{"evaluation.target_step": 40},
    )
    missed = with_fields(
        make_run(tmp_path, "local_sgd", time_to_target=None),
        algorithm_report=[engine_report(8, exchanges=19)],
        **{"evaluation.target_step": None},
    )
    read = {
        name: read_run_json(d / "run.json")
        for name, d in (("sync", sync), ("diloco", diloco), ("int8", int8), ("missed", missed))
    }
    assert communication(read["sync"]) == {
        "bytes_per_exchange": 2 * 4 * PARAMETERS,
        "exchanges": 150,
        "tau": 1,
        "bytes_exchanged": 150 * 2 * 4 * PARAMETERS,
    }
    assert bytes_to_target(read["sync"]) == 40 * 2 * 4 * PARAMETERS  # a round every step
    assert bytes_to_target(read["diloco"]) == 5 * 2 * 4 * PARAMETERS  # rounds at steps 0, 8, ..., 32
    assert bytes_to_target(read["int8"]) == 5 * 2 * (PARAMETERS + 4)
    assert math.isinf(bytes_to_target(read["missed"]))
    summary = summarize([sync, diloco])
    assert list(summary["bytes_to_target"]) == [5 * 2 * 4 * PARAMETERS, 40 * 2 * 4 * PARAMETERS]  # diloco first


def test_the_averaging_table_pairs_a_straggler_with_its_uniform_twin(tmp_path):
    runs = []
    for seed in (0, 1):
        uniform = make_run(tmp_path, "sync_sgd", seed=seed, time_to_target=1.0 + seed)
        runs.append(with_fields(uniform, **{"evaluation.target_step": 50}))
        slowed = make_run(tmp_path, "sync_sgd", seed=seed, platform="local_straggler", time_to_target=3.0 + 3 * seed)
        runs.append(with_fields(slowed, **{"arguments.straggler": "1:3", "evaluation.target_step": 50}))
    table, notes = averaging_table(runs)
    assert notes == [] and len(table) == 2
    row = table.set_index("straggler").loc["1:3"]
    assert row["slowdown_vs_uniform"] == "3× [3–3] n=2" and row["seeds"] == 2
    assert table.set_index("straggler").loc["none", "slowdown_vs_uniform"] == "—"
    lonely, notes = averaging_table(runs[1::2])
    assert "no run without a straggler" in notes[0] and (lonely["slowdown_vs_uniform"] == "—").all()
    assert (
        row["MB_to_target"] == f"{50 * 2 * 4 * PARAMETERS / 1e6:.4g} MB [{50 * 2 * 4 * PARAMETERS / 1e6:.4g}–"
        f"{50 * 2 * 4 * PARAMETERS / 1e6:.4g}] n=2"
    )


def test_a_sweeps_points_are_rows_of_their_own_not_seeds_of_one(tmp_path):
    """One seed at η 0.01 and one at 0.05 of each algorithm (the review's `lr: [0.01, 0.05]`): a row per η with
    its lr and 1 seed, never "seeds 2, n=2" whose spread is the η range; an unvaried setting is no column."""
    runs = [
        with_fields(
            make_run(tmp_path / f"lr{lr}", algorithm, time_to_target=time),
            algorithm_report=[{"rank": 0, "exchanges": 150}],
            **{"hyper.lr": lr, "arguments.setting": f"lr{lr:g}", "arguments.sweep": "lr", "evaluation.target_step": 40},
        )
        for lr, time in ((0.01, 4.0), (0.05, 2.0))
        for algorithm in ("sync_sgd", "sync_easgd")
    ]
    table, notes = averaging_table(runs)
    assert notes == [] and list(table.columns).index("lr") == list(table.columns).index("algorithm") + 1
    assert "momentum" not in table.columns  # the same in every run
    rows = table.set_index(["algorithm", "lr"])
    assert sorted(rows.index) == [("sync_easgd", 0.01), ("sync_easgd", 0.05), ("sync_sgd", 0.01), ("sync_sgd", 0.05)]
    assert (table["seeds"] == 1).all()
    assert rows.loc[("sync_sgd", 0.01), "time_to_target_s"].startswith("4 ")
