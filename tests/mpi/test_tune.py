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
    name: str,
    *,
    algorithm="sync_sgd",
    lr=0.05,
    time=None,
    step=None,
    accuracy=0.9,
    validation=0.1,
    workers=2,
) -> Path:
    """A trial's run.json and metrics.csv, as a tune trial writes them."""
    folder = tmp_path / algorithm / name
    folder.mkdir(parents=True)
    record = {
        "arguments": {"setting": name, "sweep": "lr", "lr": lr, "validation_fraction": validation, "seed": 0},
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


def test_the_choice_is_the_trial_that_reached_the_target_soonest(tmp_path):
    paths = [
        trial(tmp_path, "t00", lr=0.01, time=None, accuracy=0.7),
        trial(tmp_path, "t01", lr=0.1, time=4.0, step=80),
        trial(tmp_path, "t02", lr=0.05, time=2.5, step=50),
        trial(tmp_path, "t00", algorithm="async_sgd", lr=0.02, time=None, accuracy=0.6),
        trial(tmp_path, "t01", algorithm="async_sgd", lr=0.2, time=None, accuracy=0.8),
    ]
    chosen = tuning.choose(tuning.trial_rows(paths)).set_index("algorithm")
    assert chosen.loc["sync_sgd", "trial"] == "t02" and chosen.loc["sync_sgd", "lr"] == 0.05
    assert chosen.loc["sync_sgd", "reached"] == 2 and chosen.loc["sync_sgd", "trials"] == 3
    # no trial reached it: the best accuracy is chosen, and the table says so
    assert chosen.loc["async_sgd", "trial"] == "t01" and chosen.loc["async_sgd", "reached"] == 0
    page = tuning.chosen_markdown(chosen.reset_index(), tuning.trial_rows(paths), {"seed": 0, "space": {}})
    assert "no trial reached the target" in page and "(**unequal**" in page  # 3 trials against 2


def test_a_run_scored_on_the_test_split_is_not_a_trial(tmp_path):
    with pytest.raises(UserError, match="not a tune trial"):
        tuning.trial_rows([trial(tmp_path, "t00", validation=None)])


def test_the_tune_command_writes_the_choice(tmp_path, capsys):
    from scaledl.cli import main

    paths = [trial(tmp_path, f"t0{i}", lr=lr, time=t, step=10) for i, (lr, t) in enumerate([(0.01, 3.0), (0.1, 2.0)])]
    out = tmp_path / "chosen.csv"
    protocol = json.dumps(
        {
            "trials": 2,
            "seed": 0,
            "validation_fraction": 0.1,
            "train": {"max_steps": 40},
            "space": {"sync_sgd": {"lr": [0.001, 0.3]}},
        }
    )
    assert (
        main(
            [
                "tune",
                *map(str, paths),
                "--protocol",
                protocol,
                "--out-csv",
                str(out),
                "--out-md",
                str(tmp_path / "chosen.md"),
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(out.open()))
    assert [(r["algorithm"], r["trial"], r["tuned"], float(r["lr"])) for r in rows] == [("sync_sgd", "t01", "lr", 0.1)]
    page = (tmp_path / "chosen.md").read_text()
    assert "sync_sgd | lr [0.001, 0.3]" in page and "The test split was never read" in page


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
