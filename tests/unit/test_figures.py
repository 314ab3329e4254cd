"""The report's figures and long table, from hand-written run directories with known values."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaledl.cli import main
from scaledl.errors import UserError
from scaledl.net.measure import KIND
from scaledl.report.catalogue import CATALOGUE, FIGURE_NAMES
from scaledl.report.figures import (
    FIGURES,
    KINDS,
    PAIRS,
    Inputs,
    averaging,
    compared_pairs,
    load_runs,
    metrics_long,
    pair_breakdown,
    phase_seconds_per_step,
    predicted_efficiency,
    reached_seconds,
    seed_band,
    write_figures,
)

REPO = Path(__file__).resolve().parents[2]
PHASES = ["data", "h2d", "param_copy", "comm", "compute", "update", "center_update", "wait", "eval"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_run(
    root,
    algorithm,
    *,
    workers=2,
    seed=0,
    platform="local",
    batch_size=64,
    accuracies=(0.5, 0.8, 0.95),
    times=(1.0, 2.0, 3.0),
    time_to_target=2.5,
    spp=0.02,
    transfer=0.005,
    wait=0.002,
    compute=0.012,
    algorithm_report=(),
):
    """A run directory laid out as the workflow writes it, with the run.json fields the figures read."""
    run_dir = root / "results/runs/digits/lenet" / algorithm / platform / f"p{workers}" / f"s{seed}"
    run_dir.mkdir(parents=True)
    steps = [50 * (i + 1) for i in range(len(accuracies))]
    pd.DataFrame(
        {
            "step": steps,
            "epoch": [s / 10 for s in steps],
            "wall_s": [t + 0.5 for t in times],
            "train_s": list(times),
            "samples": [s * batch_size * workers for s in steps],
            "train_loss": [1.0 / (i + 1) for i in range(len(steps))],
            "test_loss": [1.2 / (i + 1) for i in range(len(steps))],
            "test_accuracy": list(accuracies),
            **{f"{phase}_s": [0.1 * (i + 1) for i in range(len(steps))] for phase in PHASES},
        }
    ).to_csv(run_dir / "metrics.csv", index=False)
    totals = {
        "data_s": 1.0,
        "h2d_s": 1.0,
        "param_copy_s": 0.0,
        "comm_s": 3.0,
        "compute_s": 2.0,
        "update_s": 1.0,
        "center_update_s": 0.0,
        "wait_s": 0.5,
        "eval_s": 0.1,
    }
    run = {
        "arguments": {"seed": seed},
        "platform": platform,
        "algorithm": {"key": algorithm},
        "hyper": {"batch_size": batch_size, "tau": 1, "momentum_at": "master"},
        "codesign": {"overlap": None, "message": "packed"},
        "world": {"size": workers, "workers": workers, "nodes": 1},
        "model": {"name": "lenet", "bytes": 246824},
        "data": {"dataset": "digits"},
        "phases": {"workers_mean": totals},
        "time": {
            "warmup_steps": 5,
            "seconds_per_step": spp,
            "transfer_per_step_s": transfer,
            "wait_per_step_s": wait,
            "compute_per_step_s": compute,
        },
        "seconds_per_step": spp,
        "target_accuracy": 0.9,
        "time_to_target_s": time_to_target,
        "final": {"test_accuracy": accuracies[-1]},
        "algorithm_report": list(algorithm_report),
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def load_run(path):
    """One run as the figures read it."""
    (run,) = load_runs([path])
    return run


def write_netbench(path, alpha=1e-5, beta=1e-9):
    path.write_text(json.dumps({"kind": KIND, "alpha_s": alpha, "beta_s_per_byte": beta, "gamma_s_per_byte": 0.0}))
    return path


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = Path(path).read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def full_set(root) -> list[Path]:
    """Runs for every figure: each pair (2 seeds), the ladder, a weak sweep, chip partitioning."""
    runs = []
    for algorithm in (
        "async_easgd",
        "async_sgd",
        "async_measgd",
        "async_msgd",
        "hogwild_easgd",
        "hogwild_sgd",
        "sync_easgd3",
        "easgd",
        "sync_easgd1",
        "sync_easgd2",
    ):
        runs += [make_run(root, algorithm, seed=seed, accuracies=(0.4 + 0.1 * seed, 0.7, 0.92)) for seed in (0, 1)]
    runs += [
        make_run(root, "sync_sgd", workers=p, seed=seed, spp=0.02 * (1 + 0.1 * p)) for p in (1, 4) for seed in (0, 1)
    ]
    runs += [
        make_run(
            root,
            "chip_partition",
            workers=p,
            seed=seed,
            platform="knl_chip",
            time_to_target=None if p == 4 else 10.0 / p + seed,
        )
        for p in (1, 2, 4)
        for seed in (0, 1)
    ]
    runs += [
        make_run(root, algorithm, seed=seed, algorithm_report=[engine_report(tau=8)])
        for algorithm in ("diloco", "local_sgd")
        for seed in (0, 1)
    ]
    return runs


def engine_report(tau: int, compress: str = "fp32", parameters: int = 61706, exchanges: int = 19) -> dict:
    """An averaging-engine rank's algorithm_report (scaledl.algorithms.averaging)."""
    per_exchange = 2 * {"fp32": 4 * parameters, "int8": parameters + 4}[compress]
    return {
        "rank": 0,
        "exchanges": exchanges,
        "bytes_per_exchange": per_exchange,
        "bytes_exchanged": per_exchange * exchanges,
        "averaging": {
            "inner": "sgd",
            "worker_rule": "reset",
            "outer": "nesterov",
            "outer_lr": 0.7,
            "outer_momentum": 0.9,
            "tau": tau,
            "compress": compress,
        },
    }


def test_every_figure_is_drawn_from_a_full_set(tmp_path, capsys):
    runs = full_set(tmp_path)
    netbench = write_netbench(tmp_path / "net.json")
    out = tmp_path / "figures"

    status = main(["figures", "--runs", *map(str, runs), "--netbench", f"local={netbench}", "--out-dir", str(out)])

    assert status == 0
    captured = capsys.readouterr()
    assert f"wrote {len(FIGURES)} of {len(FIGURES)} figures" in captured.out
    assert "not run in this config" not in captured.err
    placeholder_size = png_size_of_placeholder(tmp_path)
    for name in FIGURES:
        assert png_size(out / f"{name}.png") != placeholder_size, name
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries


def png_size_of_placeholder(tmp_path) -> tuple[int, int]:
    out = tmp_path / "empty"
    assert write_figures(Inputs([]), out)  # nothing to draw: every figure is a placeholder
    sizes = {png_size(out / f"{name}.png") for name in FIGURES}
    assert len(sizes) == 1
    return sizes.pop()


def test_a_missing_pair_gives_a_placeholder_and_one_note(tmp_path, capsys):
    runs = [make_run(tmp_path, algorithm, seed=seed) for algorithm in ("async_easgd", "async_sgd") for seed in (0, 1)]
    out = tmp_path / "figures"

    assert main(["figures", "--runs", *map(str, runs), "--out-dir", str(out)]) == 0

    captured = capsys.readouterr()
    notes = [line for line in captured.err.splitlines() if "not run in this config" in line]
    assert len(notes) == 1
    for name in ("fig6_2", "fig6_3", "fig6_4", "ladder_breakdown", "scaling", "chip_partition"):
        assert f"{name} (" in notes[0]
    assert "fig6_1 (" not in notes[0] and "fig8 (" not in notes[0]  # both drawn: fig8 needs two methods
    assert "pair_breakdown (" not in notes[0]  # Fig. 6.1's pair, by kind
    assert "async_measgd and async_msgd" in notes[0]
    placeholder = png_size_of_placeholder(tmp_path)
    assert png_size(out / "fig6_2.png") == placeholder
    assert png_size(out / "fig6_1.png") != placeholder
    assert f"wrote 3 of {len(FIGURES)} figures" in captured.out


def test_the_averaging_figure_starts_at_the_first_exchange_and_its_title_fits(tmp_path):
    runs = [
        make_run(tmp_path, algorithm, seed=seed, algorithm_report=[engine_report(tau=8)])
        for algorithm in ("diloco", "local_sgd")
        for seed in (0, 1)
    ]
    figure = averaging(Inputs(load_runs(runs)))
    (ax,) = figure.axes
    drawn = np.concatenate([line.get_xdata() for line in ax.get_lines() if not line.get_label().startswith("target")])
    left = ax.get_xlim()[0]
    # the axis starts at half the first exchange (where a 0-byte evaluation is drawn), not at 1 B decades before it
    assert drawn.min() >= left == pytest.approx(drawn[drawn > left].min() / 2)
    figure.canvas.draw()  # the title wrapped within the figure, not cut at its edges
    (title,) = figure.texts
    extent = title.get_window_extent(figure.canvas.get_renderer())
    assert 0 <= extent.x0 and extent.x1 <= figure.bbox.width and "synchronous SGD" in title.get_text()


def test_seed_band_median_and_range_on_a_hand_made_case():
    curves = [
        (np.array([1.0, 3.0]), np.array([0.2, 0.6])),
        (np.array([2.0, 4.0, 5.0]), np.array([0.3, 0.5, 0.9])),
        (np.array([1.5, 4.5]), np.array([0.1, 0.7])),
    ]
    band = seed_band(curves)
    # from the latest first evaluation (2.0) on; each seed held at its last value before a point and after its end
    assert band["time"].tolist() == [2.0, 3.0, 4.0, 4.5, 5.0]
    assert band["median"].tolist() == pytest.approx([0.2, 0.3, 0.5, 0.6, 0.7])
    assert band["low"].tolist() == pytest.approx([0.1, 0.1, 0.1, 0.5, 0.6])
    assert band["high"].tolist() == pytest.approx([0.3, 0.6, 0.6, 0.7, 0.9])


def test_one_seed_band_is_its_own_curve():
    band = seed_band([(np.array([1.0, 2.0]), np.array([0.4, 0.8]))])
    assert band["median"].tolist() == band["low"].tolist() == band["high"].tolist() == [0.4, 0.8]


def test_phase_breakdown_shares_each_steady_group_among_its_phases(tmp_path):
    run = load_run(make_run(tmp_path, "sync_easgd1", spp=0.02, transfer=0.008, wait=0.002, compute=0.008))
    phases = phase_seconds_per_step(run)
    # transfer 0.008 over h2d : param_copy : comm = 1 : 0 : 3; compute 0.008 over data : compute : update = 1 : 2 : 1
    assert phases["h2d"] == pytest.approx(0.002)
    assert phases["param_copy"] == 0
    assert phases["comm"] == pytest.approx(0.006)
    assert (phases["data"], phases["compute"], phases["update"]) == pytest.approx((0.002, 0.004, 0.002))
    assert phases["wait"] == pytest.approx(0.002)
    assert phases["other"] == pytest.approx(0.002)  # the step's time outside every phase
    assert sum(phases.values()) == pytest.approx(0.02)


def test_the_compared_pairs_are_the_two_sided_claims():
    pairs = {(a, b): figures for a, b, figures in compared_pairs()}
    assert pairs[("async_easgd", "async_sgd")] == ["Fig. 6.1"]
    assert pairs[("sync_easgd3|sync_easgd", "easgd")] == ["Fig. 6.4"]
    assert pairs[("sync_easgd3", "easgd")] == ["Table 3", "Fig. 11"]  # ladder_total and comm_share_drop: once
    assert ("diloco", "sync_sgd") in pairs and ("slowmo", "local_sgd") in pairs
    # chip partitioning compares worker counts, the control names its runs' setting, Fig. 8 and the weak-scaling
    # claim compare more than two sides
    assert not {a for pair in pairs for a in pair} & {"chip_partition", "sync_sgd@tuned", "hogwild_easgd|x"}
    assert not any("sync_easgd1" in pair and "sync_easgd2" not in pair and "easgd" not in pair for pair in pairs)


def test_pair_breakdown_stacks_each_sides_kinds_per_step(tmp_path):
    runs = [
        make_run(tmp_path, "async_easgd", seed=s, spp=0.02, transfer=0.005, wait=0.002, compute=0.012) for s in (0, 1)
    ]
    runs += [
        make_run(
            tmp_path, "async_sgd", seed=s, spp=0.03 + 0.01 * s, transfer=0.01, wait=0.004 + 0.002 * s, compute=0.015
        )
        for s in (0, 1)
    ]
    runs += [make_run(tmp_path, "hogwild_easgd", seed=0)]  # its pair's other side did not run: no panel

    figure = pair_breakdown(Inputs(load_runs(runs)))

    (ax,) = [ax for ax in figure.axes if ax.get_visible()]
    assert ax.get_title().startswith("async_easgd vs async_sgd (Fig. 6.1)\ndigits / lenet, local, P=2")
    assert [tick.get_text() for tick in ax.get_xticklabels()] == ["async_easgd", "async_sgd"]
    bars = [patch for patch in ax.patches]  # one rectangle per kind and side, stacked kind by kind
    heights = {(kind, side): bars[2 * k + side].get_height() for k, kind in enumerate(KINDS) for side in (0, 1)}
    assert heights[("compute", 0)] == pytest.approx(0.012) and heights[("compute", 1)] == pytest.approx(0.015)
    assert heights[("transfer", 1)] == pytest.approx(0.01)
    assert heights[("wait", 1)] == pytest.approx(0.005)  # the median over the seeds' 0.004 and 0.006
    assert heights[("other", 0)] == pytest.approx(0.02 - 0.012 - 0.005 - 0.002)
    assert heights[("other", 1)] == pytest.approx(0.035 - 0.015 - 0.01 - 0.005)  # median total less the rest
    assert bars[1].get_y() == pytest.approx(0.0) and bars[3].get_y() == pytest.approx(0.015)  # stacked


def test_a_run_without_steady_state_has_no_breakdown_and_unreached_target_is_infinite(tmp_path):
    run = load_run(make_run(tmp_path, "easgd", spp=None, time_to_target=None))
    assert phase_seconds_per_step(run) is None
    assert reached_seconds(run) == float("inf")


def test_predicted_efficiency_is_one_at_the_base_and_falls_with_communication(tmp_path):
    from scaledl.net.alphabeta import Network

    base = [load_run(make_run(tmp_path, "sync_sgd", workers=1, seed=s)) for s in (0, 1)]
    weak = predicted_efficiency(base, [1, 2, 4], "weak", Network(1e-5, 1e-8), "paper")
    assert weak[0] == pytest.approx(1.0)
    assert weak[0] > weak[1] > weak[2] > 0
    free = predicted_efficiency(base, [1, 2, 4], "strong", Network(0.0, 0.0), "paper")
    assert free == pytest.approx([1.0, 1.0, 1.0])  # no communication cost: perfect strong scaling


def test_long_table_has_one_row_per_metrics_row_with_the_keys(tmp_path, capsys):
    runs = [
        make_run(tmp_path, "async_easgd", seed=0),
        make_run(tmp_path, "async_sgd", seed=1, workers=4, accuracies=(0.3, 0.6), times=(1.5, 2.5)),
    ]
    out = tmp_path / "long.csv"

    assert (
        main(["figures", "--runs", *map(str, runs), "--out-dir", str(tmp_path / "f"), "--metrics-out", str(out)]) == 0
    )

    assert f"{out} (5 rows)" in capsys.readouterr().out
    table = pd.read_csv(out)
    assert len(table) == 3 + 2
    assert table.columns[:7].tolist() == ["dataset", "model", "algorithm", "platform", "workers", "setting", "seed"]
    second = table[table["algorithm"] == "async_sgd"]
    assert second[["workers", "seed"]].drop_duplicates().values.tolist() == [[4, 1]]
    assert second["test_accuracy"].tolist() == [0.3, 0.6]
    assert second["train_s"].tolist() == [1.5, 2.5]
    assert (table["dataset"] == "digits").all() and table["run"].str.endswith("/s0").sum() == 3
    assert metrics_long([]).empty


@pytest.mark.parametrize(
    "problem, expected",
    [
        ("no_run", "no such run.json"),
        ("no_metrics", "no such metrics.csv"),
        ("bad_netbench", "not a scaledl netbench file"),
        ("two_networks", "a second network for every platform"),
        ("metrics_not_csv", "must be a .csv file"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, problem, expected):
    run = make_run(tmp_path, "async_sgd")
    args = ["figures", "--runs", str(run), "--out-dir", str(tmp_path / "f")]
    if problem == "no_run":
        args[2] = str(tmp_path / "missing/run.json")
    elif problem == "no_metrics":
        (run / "metrics.csv").unlink()
    elif problem == "bad_netbench":
        (tmp_path / "net.json").write_text("{}")
        args += ["--netbench", str(tmp_path / "net.json")]
    elif problem == "two_networks":
        net = write_netbench(tmp_path / "net.json")
        args += ["--netbench", str(net), "--netbench", str(net)]
    else:
        args += ["--metrics-out", str(tmp_path / "long.txt")]

    assert main(args) == 2

    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scaledl figures: error:") and expected in err[0], err


def test_load_runs_names_the_missing_file(tmp_path):
    with pytest.raises(UserError, match="did the training run finish"):
        load_runs([tmp_path / "nowhere"])


def test_the_catalogue_lists_exactly_the_drawn_figures_with_their_captions():
    # The workflow's figures rule and `rule all` are built from the catalogue (tests/workflow/test_workflow.py's
    # dry run checks the jobs); here: the catalogue is what scaledl.report.figures draws, and every caption exists.
    assert list(FIGURES) == list(FIGURE_NAMES)
    assert set(PAIRS) <= set(FIGURES)
    for entry in CATALOGUE:
        assert (REPO / "workflow/report" / entry.caption).exists(), entry.caption
        assert entry.subcategory


def test_the_workflow_declares_the_figures_from_the_catalogue():
    rule = (REPO / "workflow/rules/figures.smk").read_text()
    common = (REPO / "workflow/rules/common.smk").read_text()
    assert "for figure in CATALOGUE" in rule and "for figure in FIGURE_NAMES" in common
    assert not re.findall(r"report/figures/(\w+)\.png", rule + common), "a figure spelt out by hand"


def with_settings(run_dir, *, lr, setting="", seed=0):
    """The run at `run_dir`, made a run at η `lr` (a sweep's point when `setting` names it)."""
    record = json.loads((run_dir / "run.json").read_text())
    record["hyper"]["lr"] = lr
    record["arguments"].update(setting=setting or None, sweep="lr" if setting else None, lr=lr)
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def legend_labels(figure) -> dict[str, list[str]]:
    """Each visible panel's title → its legend's labels (the targets left out)."""
    return {
        ax.get_title(): [t.get_text() for t in ax.get_legend().get_texts() if not t.get_text().startswith("target")]
        for ax in figure.axes
        if ax.get_visible() and ax.get_legend()
    }


def test_a_sweeps_points_are_panels_of_their_own_never_one_band_over_seeds(tmp_path):
    """A two-value η sweep of Fig. 6.1's pair, one seed each: a panel per η, one line per algorithm with n=1,
    never one line with n=2 whose band is the η range."""
    runs = [
        with_settings(make_run(tmp_path / f"lr{lr}", algorithm, accuracies=accuracies), lr=lr, setting=f"lr{lr:g}")
        for lr, accuracies in ((0.01, (0.3, 0.5, 0.7)), (0.05, (0.5, 0.8, 0.95)))
        for algorithm in ("async_easgd", "async_sgd")
    ]
    figure = FIGURES["fig6_1"](Inputs(load_runs(runs)))
    assert legend_labels(figure) == {
        "digits / lenet, local, P=2, lr0.01": ["async_easgd (n=1)", "async_sgd (n=1)"],
        "digits / lenet, local, P=2, lr0.05": ["async_easgd (n=1)", "async_sgd (n=1)"],
    }
    breakdown = pair_breakdown(Inputs(load_runs(runs)))
    titles = sorted(ax.get_title() for ax in breakdown.axes if ax.get_visible())
    assert [title.splitlines()[1] for title in titles] == [
        "digits / lenet, local, P=2, lr0.01",
        "digits / lenet, local, P=2, lr0.05",
    ]


def test_runs_of_one_algorithm_at_two_settings_are_two_lines_named_by_what_differs(tmp_path):
    """Two configs' runs drawn together (unswept η 0.005 and 0.004, two seeds each): two lines, each of its two
    seeds, labelled with its η; the other side, at one setting, keeps its plain name."""
    runs = [
        with_settings(make_run(tmp_path / f"lr{lr}", "async_msgd", seed=seed), lr=lr, seed=seed)
        for lr in (0.005, 0.004)
        for seed in (0, 1)
    ]
    runs += [with_settings(make_run(tmp_path, "async_measgd", seed=seed), lr=0.01) for seed in (0, 1)]
    figure = FIGURES["fig6_2"](Inputs(load_runs(runs)))
    assert legend_labels(figure) == {
        "digits / lenet, local, P=2": ["async_measgd (n=2)", "async_msgd lr=0.004 (n=2)", "async_msgd lr=0.005 (n=2)"]
    }
