"""Aggregation and plots on hand-written run directories with known values."""

from __future__ import annotations

import argparse
import json

import pandas as pd
import pytest

from scaledl.algorithms import ALGORITHMS
from scaledl.errors import UserError
from scaledl.report.commands import aggregate, plot
from scaledl.report.plots import curves_figure, load_curve
from scaledl.report.summary import summarize
from scaledl.report.tables import markdown_table
from scaledl.run_record import read_run_json

add_aggregate_arguments, run_aggregate = aggregate.add_arguments, aggregate.run
add_plot_arguments, run_plot = plot.add_arguments, plot.run

PHASES = ["data_s", "h2d_s", "compute_s", "comm_s", "update_s", "center_update_s", "eval_s", "wait_s"]


def make_run(
    root,
    algorithm,
    *,
    workers=2,
    seed=0,
    platform="local",
    accuracies=(0.5, 0.8, 0.95),
    time_to_target=2.0,
    comm_share=0.25,
    spp=0.02,
):
    """A run directory laid out as the workflow writes it, with a contract-shaped run.json."""
    run_dir = root / "results/runs/digits/lenet" / algorithm / platform / f"p{workers}" / f"s{seed}"
    run_dir.mkdir(parents=True)
    steps = [50 * (i + 1) for i in range(len(accuracies))]
    metrics = pd.DataFrame(
        {
            "step": steps,
            "epoch": [s / 10 for s in steps],
            "wall_s": [1.0 * (i + 1) for i in range(len(steps))],
            "samples": [s * 64 * workers for s in steps],
            "train_loss": [1.0 / (i + 1) for i in range(len(steps))],
            "test_loss": [1.2 / (i + 1) for i in range(len(steps))],
            "test_accuracy": list(accuracies),
            **{phase: [0.1 * (i + 1) for i in range(len(steps))] for phase in PHASES},
        }
    )
    metrics.to_csv(run_dir / "metrics.csv", index=False)
    run = {
        "scaledl_version": "0.1.0",
        "arguments": {"seed": seed, "algorithm": algorithm, "model": "lenet"},
        "algorithm": {"key": algorithm, "paper_name": algorithm, "needs_master": False, "deterministic": True},
        "hyper": {
            "lr": 0.05,
            "rho": None,
            "alpha": 0.45,
            "momentum": 0.0,
            "weight_decay": 0.0,
            "batch_size": 64,
            "tau": 1,
        },
        "world": {
            "size": workers,
            "workers": workers,
            "dedicated_master": False,
            "ranks_per_node": workers,
            "nodes": 1,
        },
        "model": {"name": "lenet", "parameters": 61706, "bytes": 246824},
        "data": {
            "path": "data/hdf5/digits.h5",
            "dataset": "digits",
            "classes": 10,
            "n_train": 1437,
            "n_test": 360,
            "image_shape": [1, 28, 28],
        },
        "stop": {"reason": "max_steps", "steps": steps[-1], "epochs": steps[-1] / 10, "wall_s": float(len(steps))},
        "phases": {**{phase: 0.3 for phase in PHASES}, "per_rank": [{phase: 0.3 for phase in PHASES}]},
        "comm_share": comm_share,
        "exposed_share": comm_share,
        "seconds_per_step": spp,
        "time": {
            "warmup_steps": 5,
            "seconds_per_step": spp,
            "transfer_per_step_s": comm_share * spp,
            "wait_per_step_s": 0.0,
            "compute_per_step_s": (1 - comm_share) * spp,
            "comm_share": comm_share,
            "exposed_share": comm_share,
        },
        "evaluation": {"every_steps": 50},
        "final": {"test_accuracy": accuracies[-1], "test_loss": 0.4},
        "target_accuracy": 0.9,
        "time_to_target_s": time_to_target,
        "versions": {"python": "3.11"},
        "devices": ["cpu"],
    }
    run["platform"] = platform
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def parse(add_arguments, argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


def test_summary_values(tmp_path):
    easgd = make_run(tmp_path, "sync_easgd", accuracies=(0.6, 0.97, 0.93), time_to_target=1.5, comm_share=0.1)
    sgd = make_run(tmp_path, "sync_sgd", accuracies=(0.5, 0.7, 0.8), time_to_target=None, spp=0.03)

    table = summarize([sgd / "run.json", easgd])  # a run.json or its directory

    assert list(table["algorithm"]) == ["sync_easgd", "sync_sgd"]  # sorted by the run key
    first, second = table.iloc[0], table.iloc[1]
    assert (first["dataset"], first["model"], first["platform"]) == ("digits", "lenet", "local")
    assert (first["workers"], first["ranks"], first["seed"], first["steps"]) == (2, 2, 0, 150)
    assert first["final_test_accuracy"] == pytest.approx(0.93)
    assert first["best_test_accuracy"] == pytest.approx(0.97)
    assert first["time_to_target_s"] == pytest.approx(1.5)
    assert first["comm_share"] == pytest.approx(0.1)
    assert first["wall_s"] == pytest.approx(3.0)
    assert first["stop_reason"] == "max_steps"
    assert pd.isna(second["time_to_target_s"])
    assert second["seconds_per_step"] == pytest.approx(0.03)
    assert second["run"].endswith("sync_sgd/local/p2/s0")


def test_config_name_and_throughput_columns(tmp_path):
    """`config` is the NAME of the results/NAME/ the workflow gave the run (run.json's out_dir, so a moved
    folder keeps it; none for a run trained elsewhere by hand); samples_per_s is P × b / seconds_per_step."""
    run = make_run(tmp_path, "sync_sgd", workers=4, spp=0.02)
    record = read_run_json(run / "run.json")
    record["arguments"]["out_dir"] = "results/paper_small/runs/digits/lenet/sync_sgd/local/p4/s0"
    (run / "run.json").write_text(json.dumps(record))
    by_hand = make_run(tmp_path, "sync_easgd", spp=0.05)

    table = summarize([run, by_hand])
    assert list(table.columns[:2]) == ["config", "dataset"]
    table = table.set_index("algorithm")
    assert table.loc["sync_sgd", "config"] == "paper_small"
    assert pd.isna(table.loc["sync_easgd", "config"])
    assert table.loc["sync_sgd", "samples_per_s"] == pytest.approx(4 * 64 / 0.02)
    assert table.loc["sync_easgd", "samples_per_s"] == pytest.approx(2 * 64 / 0.05)


def test_platform_comes_from_run_json(tmp_path):
    run = make_run(tmp_path, "sync_sgd", platform="gpu")
    moved = tmp_path / "elsewhere"
    run.rename(moved)
    assert summarize([moved])["platform"].tolist() == ["gpu"]


def test_cli_writes_csv_and_markdown(tmp_path):
    runs = [make_run(tmp_path, key, workers=w) for key in ("sync_sgd", "sync_easgd") for w in (1, 2)]
    out = tmp_path / "results/tables/summary.csv"

    assert run_aggregate(parse(add_aggregate_arguments, [*map(str, runs), "--out", str(out)])) == 0

    table = pd.read_csv(out)
    assert len(table) == 4
    assert table[["algorithm", "workers"]].values.tolist() == [
        ["sync_easgd", 1],
        ["sync_easgd", 2],
        ["sync_sgd", 1],
        ["sync_sgd", 2],
    ]
    markdown = out.with_suffix(".md").read_text().splitlines()
    assert markdown[0].startswith("| config | dataset | model | algorithm | platform | workers |")
    assert "run" not in markdown[0].split(" | ")
    assert set(markdown[1]) <= set("|-:")
    assert len(markdown) == 2 + 4
    assert "| 0.95 |" in markdown[2]
    assert not list(out.parent.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_markdown_formats_missing_and_pipes():
    table = pd.DataFrame({"name": ["a|b"], "value": [float("nan")], "count": [3]})
    assert markdown_table(table).splitlines() == ["| name | value | count |", "|---|---:|---:|", r"| a\|b | — | 3 |"]


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"data": {}}'])
def test_corrupt_run_json_names_the_file(tmp_path, content):
    run = make_run(tmp_path, "sync_sgd")
    (run / "run.json").write_text(content)
    with pytest.raises(UserError) as error:
        summarize([run])
    message = str(error.value)
    assert str(run / "run.json") in message and "\n" not in message


def test_every_column_reads_a_path_the_run_record_declares():
    """The reader's table of paths (report.runs.RUN_FIELDS) and the writer's RunRecord are one contract:
    a column naming a path the record does not declare is refused when the table is built."""
    from scaledl.report.runs import RUN_FIELDS
    from scaledl.run_record import checked_paths, declared

    assert all(declared(path) for path in RUN_FIELDS.values())
    assert declared("phases.comm_s") and declared("provenance.code.commit")  # a spread block, an open one
    assert not declared("world.gpus") and not declared("seconds_per_step.mean") and not declared("nothing")
    with pytest.raises(ValueError, match="world.gpus"):
        checked_paths({"gpus": "world.gpus"})


def test_missing_run_json_names_the_file(tmp_path):
    with pytest.raises(UserError, match="nowhere/run.json"):
        summarize([tmp_path / "nowhere/run.json"])


def test_corrupt_metrics_names_the_file(tmp_path):
    run = make_run(tmp_path, "sync_sgd")
    (run / "metrics.csv").write_bytes(b"")
    with pytest.raises(UserError, match="metrics.csv"):
        summarize([run])


def test_no_output_on_error(tmp_path):
    good = make_run(tmp_path, "sync_sgd")
    out = tmp_path / "summary.csv"
    with pytest.raises(UserError):
        run_aggregate(parse(add_aggregate_arguments, [str(good), str(tmp_path / "missing"), "--out", str(out)]))
    assert not out.exists() and not out.with_suffix(".md").exists()


def test_plot_writes_png(tmp_path):
    runs = [make_run(tmp_path, key) for key in ("sync_sgd", "sync_easgd")]
    out = tmp_path / "results/plots/accuracy_vs_time.png"
    args = parse(add_plot_arguments, [str(runs[0] / "metrics.csv"), str(runs[1]), "--out", str(out)])
    assert run_plot(args) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_algorithm_of_a_plot_has_its_own_colour_marker_and_line_style(tmp_path):
    # all sixteen algorithms on one panel: more than the ten colours of the cycle (the default config has twelve)
    curves = [load_curve(make_run(tmp_path, key), "wall_s", "test_accuracy") for key in ALGORITHMS]
    (ax,) = curves_figure(curves).axes
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("target")]
    assert sorted(line.get_label() for line in lines) == sorted(ALGORITHMS)
    styles = {(line.get_color(), line.get_marker(), line.get_linestyle()) for line in lines}
    assert len(styles) == len(ALGORITHMS)


def test_plot_rejects_unknown_format_and_column(tmp_path):
    run = make_run(tmp_path, "sync_sgd")
    with pytest.raises(UserError, match="must end in"):
        run_plot(parse(add_plot_arguments, [str(run), "--out", str(tmp_path / "x.gif")]))
    pd.read_csv(run / "metrics.csv").drop(columns=["wall_s"]).to_csv(run / "metrics.csv", index=False)
    with pytest.raises(UserError, match="wall_s"):
        run_plot(parse(add_plot_arguments, [str(run), "--out", str(tmp_path / "x.png")]))


def test_the_summary_has_a_column_per_setting_swept_or_not_and_target_step(tmp_path):
    folders = []
    for index, lr in enumerate((0.01, 0.05, 0.1)):
        folder = make_run(tmp_path / f"lr{index}", "sync_sgd")
        record = read_run_json(folder / "run.json")
        record["arguments"].update(lr=lr, setting=f"lr{lr:g}", sweep="lr")
        record["hyper"]["lr"] = lr  # what the run used: run.json's hyper
        record["evaluation"]["target_step"] = 100 + index
        (folder / "run.json").write_text(json.dumps(record))
        folders.append(folder)
    plain = make_run(tmp_path / "plain", "sync_easgd")  # unswept: its settings are columns all the same
    table = summarize([*folders, plain])
    columns = list(table.columns)
    assert columns.index("lr") == columns.index("setting") + 1  # the settings beside the setting
    assert table.set_index("setting")["lr"].to_dict() == {"lr0.01": 0.01, "lr0.05": 0.05, "lr0.1": 0.1, "": 0.05}
    assert {"batch_size", "momentum", "tau"} <= set(columns) and "alpha" not in columns  # α = ηρ: derived
    assert sorted(table["target_step"].dropna()) == [100, 101, 102] and "seconds_per_step" in columns


def test_a_sweeps_curves_are_labelled_by_their_point_and_other_settings_by_their_values(tmp_path):
    from scaledl.report.plots import labels

    def run_at(folder, lr, setting):
        folder = make_run(tmp_path / folder, "sync_sgd")
        record = read_run_json(folder / "run.json")
        record["hyper"]["lr"] = lr
        record["arguments"].update(lr=lr, setting=setting, sweep="lr" if setting else None)
        (folder / "run.json").write_text(json.dumps(record))
        return load_curve(folder, "wall_s", "test_accuracy")

    swept = [run_at("a", 0.01, "lr0.01"), run_at("b", 0.05, "lr0.05")]
    assert labels(swept) == ["sync_sgd lr0.01", "sync_sgd lr0.05"]  # no two legend entries alike
    unswept = [run_at("c", 0.005, None), run_at("d", 0.004, None)]  # two configs' runs plotted together
    assert labels(unswept) == ["sync_sgd lr=0.005", "sync_sgd lr=0.004"]


def test_a_real_run_with_more_ranks_than_cores_is_marked_oversubscribed():
    from scaledl.report.summary import oversubscription

    def record(ranks_per_node: int, threads: int = 1, kind: str = "mpi") -> dict:
        return {
            "transport": {"kind": kind},
            "world": {"ranks_per_node": ranks_per_node, "threads_per_rank": threads},
            "provenance": {"hardware": {"logical_cpus": 2}},
        }

    assert oversubscription(record(3)) == (2, True)  # a master and two workers on 2 cores
    assert oversubscription(record(2)) == (2, False)
    assert oversubscription(record(1, threads=4)) == (2, True)
    assert oversubscription(record(9, kind="simulated")) == (None, False)  # a simulation has no cores to share
