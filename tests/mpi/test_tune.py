"""The tune stage: trials on a validation split (never the test split), the choice, and the tuned runs' settings."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from test_file_integrity import damage

from mpi_run import run_train
from scaledl.config import TrainConfig
from scaledl.errors import UserError
from scaledl.report import tuning
from scaledl.run_record import read_run_json
from scaledl.train.tuned import with_tuned

# ---- the trials never read the test split


@pytest.mark.mpi
def test_a_trial_never_reads_the_test_split(tmp_path, digits_h5):
    """The test split's images damaged beyond reading: a trial (validation split) runs through, while the
    same run scored on the test split stops at its first evaluation, naming the damage."""
    path = tmp_path / "digits.h5"
    shutil.copyfile(digits_h5, path)
    damage(path, "/test/images", nbytes=64 << 10)
    args = [
        "--data",
        str(path),
        "--model",
        "lenet",
        "--algorithm",
        "sync_sgd",
        "--max-steps",
        "20",
        "--eval-every",
        "10",
    ]
    trial = run_train(2, [*args, "--out-dir", str(tmp_path / "trial"), "--validation-fraction", "0.1"])
    assert trial.returncode == 0, trial.stdout[-2000:] + trial.stderr[-2000:]
    record = read_run_json(tmp_path / "trial/run.json")
    assert record["evaluation"]["split"] == "validation"
    assert record["data"]["validation_rows"] > 0
    assert record["data"]["n_train"] + record["data"]["validation_rows"] == 1437  # digits' training images
    on_test = run_train(2, [*args, "--out-dir", str(tmp_path / "test")])
    assert on_test.returncode != 0 and "/test/images" in on_test.stderr, on_test.stderr[-2000:]


# ---- the choice


def trial(
    tmp_path: Path,
    lr: float,
    *,
    seed=0,
    algorithm="async_sgd",
    time=None,
    step=None,
    accuracy=0.9,
    validation=0.1,
    workers=2,
    max_steps=300,
) -> Path:
    """A trial's run.json and metrics.csv, as a tune trial writes them."""
    folder = tmp_path / algorithm / f"lr{lr:g}" / f"s{seed}"
    folder.mkdir(parents=True)
    record = {
        "arguments": {
            "setting": f"lr{lr:g}",
            "sweep": "lr",
            "lr": lr,
            "validation_fraction": validation,
            "seed": seed,
            "max_steps": max_steps,
        },
        "data": {"dataset": "digits"},
        "model": {"name": "lenet"},
        "algorithm": {"key": algorithm},
        "platform": "local",
        "world": {"workers": workers},
        "time_to_target_s": time,
        "evaluation": {"target_step": step},
        "seconds_per_step": 0.05,
        "stop": {"reason": "target_accuracy" if time else "max_steps"},
    }
    (folder / "run.json").write_text(json.dumps(record))
    (folder / "metrics.csv").write_text(f"step,test_accuracy\n0,0.1\n10,{accuracy}\n")
    return folder / "run.json"


def test_the_choice_is_the_point_whose_slowest_seed_reached_the_target_soonest(tmp_path):
    paths = [
        *(trial(tmp_path, 0.01, seed=s, accuracy=0.7) for s in (0, 1)),  # missed
        trial(tmp_path, 0.02, seed=0, time=4.0, step=80),
        trial(tmp_path, 0.02, seed=1, time=4.4, step=88),  # slowest seed 4.4 s
        trial(tmp_path, 0.04, seed=0, time=2.0, step=40),
        trial(tmp_path, 0.04, seed=1, time=None, accuracy=0.85),  # one seed missed: the point is a miss
        *(trial(tmp_path, 0.08, seed=s, time=5.0, step=100) for s in (0, 1)),
    ]
    chosen = tuning.choose(tuning.trial_rows(paths)).iloc[0]
    assert (chosen["lr"], chosen["time_to_target_s"], chosen["scored_by"]) == (0.02, 4.4, "time")
    assert chosen["edge"] == "" and chosen["runner_up_lr"] == 0.08  # interior; the next best point at another η
    assert chosen["effective_step"] == pytest.approx(2 * 0.02)  # P·η: both workers' steps land on the center
    assert (chosen["trials"], chosen["points_reached"], chosen["budget_ok"]) == (4, 2, True)  # 88 × 2 ≤ 300


def test_a_timing_independent_algorithm_is_scored_by_steps_and_an_edge_is_named(tmp_path):
    paths = [
        trial(tmp_path, 0.01, algorithm="sync_sgd", time=1.0, step=120, max_steps=150),  # fastest clock, more steps
        trial(tmp_path, 0.02, algorithm="sync_sgd", time=3.0, step=100, max_steps=150),
    ]
    chosen = tuning.choose(tuning.trial_rows(paths)).iloc[0]
    assert (chosen["lr"], chosen["scored_by"], chosen["edge"]) == (0.02, "steps", "high")
    assert not chosen["budget_ok"]  # 100 steps of a 150-step budget: less than twice
    assert tuning.edges(tuning.choose(tuning.trial_rows(paths))) == ["high"]


def test_a_cell_where_nothing_reached_takes_the_best_accuracy_and_says_so(tmp_path):
    paths = [trial(tmp_path, lr, accuracy=a) for lr, a in ((0.01, 0.6), (0.02, 0.8), (0.04, 0.7))]
    chosen = tuning.choose(tuning.trial_rows(paths))
    assert chosen.iloc[0]["lr"] == 0.02 and chosen.iloc[0]["points_reached"] == 0
    page = tuning.chosen_markdown(chosen, tuning.trial_rows(paths), {"seeds": [0], "lr_grid": {}})
    assert "no point reached the target" in page and "The test split was never read" in page


def test_a_run_scored_on_the_test_split_is_not_a_trial(tmp_path):
    with pytest.raises(UserError, match="not a tune trial"):
        tuning.trial_rows([trial(tmp_path, 0.01, validation=None)])


# ---- the confirmation: the grid's best two points on more seeds

CONFIRM = {"seeds": [100, 101], "confirm": {"seeds": list(range(102, 108)), "misses": 1}, "lr_grid": {}}


def confirmed_trials(tmp_path, fast_misses: int) -> list[Path]:
    """Grid seeds 100, 101: η 0.04 reaches in 2.0 s on both (the grid's choice), η 0.02 in 3.0 s (its runner-up),
    η 0.01 misses. Confirmation seeds 102-107: 0.04 misses in `fast_misses` of them, 0.02 reaches in all."""
    grid = [
        trial(tmp_path, lr, seed=s, time=t, step=10 * (t or 0))
        for lr, t in ((0.04, 2.0), (0.02, 3.0))
        for s in (100, 101)
    ]
    grid += [trial(tmp_path, 0.01, seed=s, accuracy=0.7) for s in (100, 101)]
    again = [trial(tmp_path, 0.04, seed=102 + i, time=None if i < fast_misses else 2.0, step=20) for i in range(6)]
    again += [trial(tmp_path, 0.02, seed=102 + i, time=3.0, step=30) for i in range(6)]
    return grid + again


def test_the_grids_best_point_and_its_runner_up_are_the_points_confirmed(tmp_path):
    trials = tuning.trial_rows(confirmed_trials(tmp_path, 0))
    grid_only = trials[trials["seed"] < 102]
    assert tuning.points_to_confirm(grid_only, CONFIRM) == {"digits/lenet/async_sgd/local/p2": ["lr0.04", "lr0.02"]}
    assert tuning.points_to_confirm(grid_only, {"seeds": [100, 101]}) == {}  # no confirmation: nothing named


def test_a_point_that_misses_in_2_of_8_seeds_is_not_chosen(tmp_path):
    trials = tuning.trial_rows(confirmed_trials(tmp_path, 2))
    chosen = tuning.choose(trials, CONFIRM).iloc[0]
    assert (chosen["lr"], chosen["runner_up_lr"]) == (0.02, 0.04)  # the grid's choice missed in 2 of 8
    assert (chosen["reached"], chosen["seeds"], chosen["reliable"]) == (8, 8, True)
    assert chosen["time_to_target_s"] == 3.0  # the median seed's
    page = tuning.chosen_markdown(tuning.choose(trials, CONFIRM), trials, CONFIRM)
    assert "| 8 of 8 |" in page and "| 6 of 8 |" in page and "no: missed too often" in page
    assert "moved the choice in 1 of 1 cells" in page and "η 0.04 on the grid's seeds → 0.02" in page
    # the grid's seeds alone (the old protocol) would have chosen the point that misses one run in four
    assert tuning.choose(trials[trials["seed"] < 102]).iloc[0]["lr"] == 0.04


def test_a_point_that_misses_in_1_of_8_is_chosen_by_its_median_seed(tmp_path):
    trials = tuning.trial_rows(confirmed_trials(tmp_path, 1))
    chosen = tuning.choose(trials, CONFIRM).iloc[0]
    assert (chosen["lr"], chosen["reached"], chosen["time_to_target_s"]) == (0.04, 7, 2.0)


def test_where_both_confirmed_points_miss_too_often_the_one_missing_least_is_chosen_and_flagged(tmp_path):
    paths = confirmed_trials(tmp_path, 3)
    for seed in (102, 103):  # the runner-up now misses in 2 of 8 as well
        record = json.loads(paths[-6 + seed - 102].read_text())
        record["time_to_target_s"] = None
        paths[-6 + seed - 102].write_text(json.dumps(record))
    trials = tuning.trial_rows(paths)
    chosen = tuning.choose(trials, CONFIRM)
    assert (chosen.iloc[0]["lr"], chosen.iloc[0]["reliable"]) == (0.02, False)
    assert "took the one that missed least (6 of 8)" in tuning.chosen_markdown(chosen, trials, CONFIRM)


def test_the_tune_command_names_the_points_to_confirm(tmp_path):
    from scaledl.cli import main

    paths = [p for p in confirmed_trials(tmp_path / "t", 0) if "/s10" in str(p) and int(p.parent.name[1:]) < 102]
    out = tmp_path / "confirm.json"
    assert main(["tune", *map(str, paths), "--protocol", json.dumps(CONFIRM), "--out-confirm", str(out)]) == 0
    assert json.loads(out.read_text()) == {"digits/lenet/async_sgd/local/p2": ["lr0.04", "lr0.02"]}


# ---- a trial that can no longer matter stops (scaledl.train.pace)


def test_the_pace_to_beat_is_the_runner_up_etas_score_over_finished_points(tmp_path):
    paths = [
        *(trial(tmp_path, 0.01, seed=s, accuracy=0.7) for s in (0, 1)),  # missed
        *(trial(tmp_path, 0.02, seed=s, time=t, step=80) for s, t in ((0, 4.0), (1, 4.4))),  # the best: 4.4 s
        *(trial(tmp_path, 0.08, seed=s, time=5.0, step=100) for s in (0, 1)),  # the runner-up: 5.0 s
        trial(tmp_path, 0.16, seed=0, time=1.0, step=20),  # its second seed still runs: not a finished point
    ]
    trials = tuning.trial_rows(paths)
    assert tuning.pace_to_beat(trials, seeds=2) == ("time", 5.0)
    assert tuning.pace_to_beat(trials, seeds=1) == ("time", 4.4)  # 0.16 (1.0 s) now counts: 0.02 is runner-up
    assert tuning.pace_to_beat(trials[trials["lr"] != 0.08], seeds=2) is None  # one η reached: no runner-up


@pytest.mark.mpi
def test_a_trial_stops_at_the_first_evaluation_where_it_can_no_longer_be_runner_up(tmp_path, digits_h5):
    """Two finished points beside it reached the target in 20 and 30 steps (steps decide for sync_sgd): a trial
    at a tiny η stops at its evaluation of step 30, behind the runner-up, and chosen.md says so; the choice and
    runner-up are those of the finished points. A sibling of another protocol (budget) is not a bar."""
    cell = tmp_path / "sync_sgd"
    protocol = {"max_steps": 200, "target_accuracy": 0.9, "eval_every": 10, "tune_seeds": 1, "algorithm": "sync_sgd"}
    for lr, step in ((0.2, 20.0), (0.1, 30.0), (0.4, 5.0)):
        path = trial(tmp_path, lr, algorithm="sync_sgd", time=1.0, step=step)
        record = json.loads(path.read_text())
        other = {"max_steps": 100} if lr == 0.4 else {}  # another protocol: ignored
        record["arguments"].update(protocol, **other)
        path.write_text(json.dumps(record))
    out = cell / "lr0.001" / "s0"
    args = ["--data", str(digits_h5), "--model", "lenet", "--algorithm", "sync_sgd", "--lr", "0.001"]
    args += ["--validation-fraction", "0.1", "--setting", "lr0.001", "--sweep", "lr", "--seed", "0"]
    args += [f"--{k.replace('_', '-')}={v}" for k, v in protocol.items() if k != "algorithm"]
    result = run_train(2, [*args, "--out-dir", str(out)])
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    record = read_run_json(out / "run.json")
    assert record["stop"]["reason"] == "outpaced" and record["time_to_target_s"] is None
    assert _steps(out) == [0, 10, 20, 30]  # stopped at step 30: the runner-up crossed at 30.0
    trials = tuning.trial_rows(sorted(cell.glob("*/s0/run.json")))
    kept = trials[trials["max_steps"] == 200]
    chosen = tuning.choose(kept).iloc[0]
    assert (chosen["lr"], chosen["runner_up_lr"]) == (0.2, 0.1)
    page = tuning.chosen_markdown(tuning.choose(kept), kept, {"seeds": [0], "lr_grid": {}})
    assert "stopped: behind the runner-up" in page


def _steps(out: Path) -> list[int]:
    with (out / "metrics.csv").open() as f:
        return [int(float(row["step"])) for row in csv.DictReader(f)]


def test_the_tune_command_writes_the_choice_and_a_round_names_the_next_grid(tmp_path):
    from scaledl.cli import main

    paths = [trial(tmp_path, lr, time=t, step=10) for lr, t in [(0.01, 3.0), (0.02, 2.0)]]
    out = tmp_path / "chosen.csv"
    protocol = json.dumps(
        {
            "lr_grid": {"low": 0.01, "factor": 2, "count": 2},
            "extend": 1,
            "axes": {},
            "seeds": [0],
            "validation_fraction": 0.1,
            "train": {"max_steps": 40},
            "tuned": {"async_sgd": ["lr"]},
        }
    )
    args = ["tune", *map(str, paths), "--protocol", protocol]
    assert main([*args, "--out-csv", str(out), "--out-md", str(tmp_path / "chosen.md")]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [(r["algorithm"], r["tuned"], float(r["lr"]), r["edge"]) for r in rows] == [
        ("async_sgd", "lr", 0.02, "high")
    ]
    page = (tmp_path / "chosen.md").read_text()
    assert "at the high edge of the grid" in page and "The test split was never read" in page
    assert main([*args, "--out-round", str(tmp_path / "round0.json")]) == 0
    assert json.loads((tmp_path / "round0.json").read_text()) == {
        "grid": [0.01, 0.02],
        "edges": ["high"],
        "next": [0.01, 0.02, 0.04],
    }


def test_a_platform_tuned_on_another_gets_that_platforms_rows_under_its_name(tmp_path):
    from scaledl.cli import main

    paths = [trial(tmp_path, lr, time=t, step=10) for lr, t in [(0.01, 3.0), (0.02, 2.0)]]
    out = tmp_path / "chosen.csv"
    protocol = {"lr_grid": {"low": 0.01, "factor": 2, "count": 2}, "extend": 0, "axes": {}, "seeds": [0],
                "validation_fraction": 0.1, "train": {}, "tuned": {"async_sgd": ["lr"]}}  # fmt: skip
    protocol["tuned_on"] = {"slow": "local", "elsewhere": "unknown"}  # a platform with no trials: no rows
    args = ["tune", *map(str, paths), "--protocol", json.dumps(protocol), "--out-md", str(tmp_path / "chosen.md")]
    assert main([*args, "--out-csv", str(out)]) == 0
    rows = [(r["platform"], float(r["lr"]), r["tuned_on"]) for r in csv.DictReader(out.open())]
    assert rows == [("local", 0.02, ""), ("slow", 0.02, "local")]
    page = (tmp_path / "chosen.md").read_text()
    assert "slow (on local)" in page and "| slow |" not in page  # the page's tables: the cells tuned


def test_refine_names_each_cells_points_around_its_choice_and_chosen_md_says_what_moved(tmp_path):
    from scaledl.cli import main

    protocol = {
        "lr_grid": {"low": 0.01, "factor": 2, "count": 3},
        "extend": 0,
        "refine": True,
        "seeds": [0],
        "validation_fraction": 0.1,
        "tuned": {"async_sgd": ["lr"]},
    }
    grid = [trial(tmp_path, lr, time=t, step=10) for lr, t in [(0.01, 3.0), (0.02, 2.0), (0.04, 2.5)]]
    args = ["tune", *map(str, grid), "--protocol", json.dumps(protocol)]
    assert main([*args, "--out-round", str(tmp_path / "round0.json")]) == 0
    result = json.loads((tmp_path / "round0.json").read_text())
    assert result["next"] is None and result["refine"] == {"digits/lenet/async_sgd/local/p2": [0.01414, 0.02828]}
    around = [trial(tmp_path, lr, time=t, step=10) for lr, t in [(0.01414, 2.2), (0.02828, 1.5)]]
    out = tmp_path / "chosen.csv"
    assert main(["tune", *map(str, grid + around), "--protocol", json.dumps(protocol), "--out-csv", str(out),
                 "--out-md", str(tmp_path / "chosen.md")]) == 0  # fmt: skip
    assert [float(r["lr"]) for r in csv.DictReader(out.open())] == [0.02828]
    page = (tmp_path / "chosen.md").read_text()
    assert "the choice moved in 1 of 1 cells" in page and "η 0.02 on the grid → 0.02828 refined" in page


# ---- the tuned runs' settings


def chosen_csv(tmp_path: Path, **values) -> Path:
    path = tmp_path / "chosen.csv"
    row = {
        "dataset": "digits",
        "model": "lenet",
        "algorithm": "async_easgd",
        "platform": "local",
        "workers": 2,
        "tuned": "lr,beta",
        "lr": 0.02,
        "beta": 0.7,
        **values,
    }
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    return path


def config(data: Path, **settings) -> TrainConfig:
    return TrainConfig(data=data, model="lenet", algorithm="async_easgd", out_dir=Path("o"), max_steps=1, **settings)


def test_a_tuned_run_takes_its_row_and_scales_it(tmp_path, digits_h5):
    path = chosen_csv(tmp_path)
    tuned = with_tuned(config(digits_h5, tuned_from=path, rho=3.0), world_size=3)  # master + 2 workers
    assert (tuned.lr, tuned.beta, tuned.rho) == (0.02, 0.7, None)  # ρ follows from the tuned β
    scaled = with_tuned(config(digits_h5, tuned_from=path, tuned_scale="lr=0.1"), world_size=3)
    assert scaled.lr == pytest.approx(0.002) and scaled.beta == 0.7
    assert with_tuned(config(digits_h5), world_size=3).lr == TrainConfig.lr  # nothing to take


def test_a_runner_up_run_takes_the_second_best_eta(tmp_path, digits_h5):
    path = chosen_csv(tmp_path, runner_up_lr=0.04)
    tuned = with_tuned(config(digits_h5, tuned_from=path, tuned_pick="runner_up"), world_size=3)
    assert (tuned.lr, tuned.beta) == (0.04, 0.7)  # η the runner-up, the other tuned settings the choice's


def test_a_numerically_identical_algorithm_takes_the_row_tuned_for_its_twin(tmp_path, digits_h5):
    path = chosen_csv(tmp_path, algorithm="sync_easgd2")
    cfg = TrainConfig(data=digits_h5, model="lenet", algorithm="sync_easgd3", out_dir=Path("o"), tuned_from=path)
    assert with_tuned(cfg, world_size=2).lr == 0.02
    other = TrainConfig(data=digits_h5, model="lenet", algorithm="sync_sgd", out_dir=Path("o"), tuned_from=path)
    with pytest.raises(UserError, match="has no choice"):
        with_tuned(other, world_size=2)


@pytest.mark.parametrize(
    "case, message",
    [
        ("other_cell", "has no choice for digits/lenet/async_easgd/local/4"),
        ("untuned_scale", "momentum was not tuned for async_easgd"),
        ("missing_file", "cannot read it"),
    ],
)
def test_a_tuned_run_without_its_choice_is_refused_in_one_line(tmp_path, digits_h5, case, message):
    path = chosen_csv(tmp_path)
    cfg = {
        "other_cell": config(digits_h5, tuned_from=path),
        "untuned_scale": config(digits_h5, tuned_from=path, tuned_scale="momentum=0.5"),
        "missing_file": config(digits_h5, tuned_from=tmp_path / "nowhere.csv"),
    }[case]
    with pytest.raises(UserError, match=message) as error:
        with_tuned(cfg, world_size=5 if case == "other_cell" else 3)
    assert "\n" not in str(error.value)
