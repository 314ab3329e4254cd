"""Weak and strong scaling efficiency on hand-written run.json files with known times."""

from __future__ import annotations

import argparse
import json
import math

import pandas as pd
import pytest

from scaledl.report.commands import aggregate
from scaledl.report.scaling import efficiency_table, scaling_table

add_aggregate_arguments, run_aggregate = aggregate.add_arguments, aggregate.run


def make_run(root, *, workers, batch, spp, algorithm="sync_easgd", platform="knl", seed=0, nodes=None):
    """A run directory holding only what the scaling table reads, shaped like train.py's run.json."""
    run_dir = root / "results/runs/cifar10/cifar_alexnet" / algorithm / platform / f"p{workers}" / f"s{seed}"
    run_dir.mkdir(parents=True)
    run = {
        "platform": platform,
        "arguments": {"seed": seed},
        "algorithm": {"key": algorithm},
        "hyper": {"batch_size": batch},
        "world": {"size": workers, "workers": workers, "nodes": nodes or max(1, workers // 4)},
        "model": {"name": "cifar_alexnet"},
        "data": {"dataset": "cifar10"},
        "seconds_per_step": spp,
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_weak_scaling_efficiency_is_base_time_over_time(tmp_path):
    # fixed 64 per worker; T_iter grows from 0.10 s to 0.125 s and 0.20 s
    runs = [
        make_run(tmp_path, workers=4, batch=64, spp=0.10),
        make_run(tmp_path, workers=8, batch=64, spp=0.125),
        make_run(tmp_path, workers=32, batch=64, spp=0.20),
    ]
    table, notes = scaling_table(runs)
    assert notes == []
    assert list(table["scaling"]) == ["weak"] * 3
    assert list(table["workers"]) == [4, 8, 32]
    assert list(table["nodes"]) == [1, 2, 8]
    assert table["efficiency"].tolist() == pytest.approx([1.0, 0.8, 0.5])  # T(4)/T(P)
    assert table["speedup"].tolist() == pytest.approx([1.0, 1.6, 4.0])  # efficiency × P/4
    assert table["samples_per_s"].tolist() == pytest.approx([2560, 4096, 10240])
    assert table["global_batch"].tolist() == [256, 512, 2048]


def test_strong_scaling_efficiency_accounts_for_the_smaller_batch(tmp_path):
    # global batch 2048: 512, 256, 64 per worker
    runs = [
        make_run(tmp_path, workers=4, batch=512, spp=0.40),
        make_run(tmp_path, workers=8, batch=256, spp=0.25),  # ideal would be 0.20
        make_run(tmp_path, workers=32, batch=64, spp=0.05),  # ideal
    ]
    table, _ = scaling_table(runs)
    assert list(table["scaling"]) == ["strong"] * 3
    # E = T(P0) / ((P / P0) T(P))
    assert table["efficiency"].tolist() == pytest.approx([1.0, 0.40 / (2 * 0.25), 1.0])
    assert table["speedup"].tolist() == pytest.approx([1.0, 1.6, 8.0])


def test_sweeps_are_split_by_algorithm_platform_and_seed(tmp_path):
    runs = [
        make_run(tmp_path, workers=4, batch=64, spp=0.1, algorithm="sync_sgd"),
        make_run(tmp_path, workers=8, batch=64, spp=0.2, algorithm="sync_sgd"),
        make_run(tmp_path, workers=4, batch=64, spp=0.1, algorithm="sync_sgd", seed=1),
        make_run(tmp_path, workers=8, batch=64, spp=0.1, algorithm="sync_sgd", seed=1),
        make_run(tmp_path, workers=4, batch=64, spp=0.1, platform="gpu"),  # alone: no sweep
    ]
    table, notes = scaling_table(runs)
    assert notes == []
    assert table[["seed", "workers", "efficiency"]].values.tolist() == [
        [0, 4, 1.0],
        [0, 8, 0.5],
        [1, 4, 1.0],
        [1, 8, 1.0],
    ]


def test_a_group_that_is_neither_weak_nor_strong_is_skipped_with_a_note(tmp_path):
    runs = [
        make_run(tmp_path, workers=4, batch=64, spp=0.1),
        make_run(tmp_path, workers=8, batch=48, spp=0.1),
    ]
    table, notes = scaling_table(runs)
    assert table.empty
    assert len(notes) == 1 and "neither" in notes[0] and "cifar10/cifar_alexnet/sync_easgd/knl/0" in notes[0]


def test_a_run_without_steps_has_no_efficiency(tmp_path):
    table, _ = efficiency_table(
        [
            {
                "dataset": "d",
                "model": "m",
                "algorithm": "a",
                "platform": "p",
                "seed": 0,
                "nodes": 1,
                "workers": 2,
                "ranks": 2,
                "batch_size": 8,
                "seconds_per_step": 0.1,
                "run": "x",
            },
            {
                "dataset": "d",
                "model": "m",
                "algorithm": "a",
                "platform": "p",
                "seed": 0,
                "nodes": 1,
                "workers": 4,
                "ranks": 4,
                "batch_size": 8,
                "seconds_per_step": None,
                "run": "y",
            },
        ]
    )
    assert table["efficiency"].iloc[0] == 1.0 and math.isnan(table["efficiency"].iloc[1])


def test_cli_writes_the_scaling_table(tmp_path, capsys):
    runs = [make_run(tmp_path, workers=p, batch=64, spp=0.1 * p / 4) for p in (4, 8)]
    parser = argparse.ArgumentParser()
    add_aggregate_arguments(parser)
    out = tmp_path / "tables/scaling.csv"
    args = parser.parse_args([*map(str, runs), "--table", "scaling", "--out", str(out)])
    assert run_aggregate(args) == 0
    table = pd.read_csv(out)
    assert table["efficiency"].tolist() == pytest.approx([1.0, 0.5])
    markdown = out.with_suffix(".md").read_text()
    assert markdown.startswith(
        "| dataset | model | algorithm | platform | seed | settings | scaling | nodes | workers |"
    )
    assert "| weak |" in markdown and "0.5 |" in markdown
    assert "2 rows from 2 runs" in capsys.readouterr().out


def test_two_step_sizes_are_two_sweeps_and_a_rho_set_by_beta_and_p_is_one(tmp_path):
    """The same algorithm swept over P at η 0.01 and 0.05: two sweeps, each named by its η, never one sweep with
    two runs per P; ρ = β/(ηP) changes with P alone, so it does not split a sweep."""
    runs = []
    for lr in (0.01, 0.05):
        for workers, spp in ((4, 0.10), (8, 0.125)):
            run_dir = make_run(tmp_path / f"lr{lr}", workers=workers, batch=64, spp=spp)
            record = json.loads((run_dir / "run.json").read_text())
            record["hyper"].update(lr=lr, beta=0.9, rho=0.9 / (lr * workers), alpha=0.9 / workers)
            (run_dir / "run.json").write_text(json.dumps(record))
            runs.append(run_dir)
    table, notes = scaling_table(runs)
    assert notes == []  # no "several runs share a worker count"
    assert table.groupby("settings")["workers"].apply(list).to_dict() == {"lr=0.01": [4, 8], "lr=0.05": [4, 8]}
    assert table["efficiency"].tolist() == pytest.approx([1.0, 0.8, 1.0, 0.8])
