"""Runs that end early end cleanly: a diverged run says so, Ctrl-C leaves partial results, and
neither the summary nor the workflow takes such a run for a complete one."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import time

import pandas as pd
import pytest
import torch
from test_aggregate import make_run
from test_workflow import output_of, snakemake, workdir  # noqa: F401  (workdir is a fixture)

from mpi_run import run_train
from scaledl.errors import UserError
from scaledl.grid.launch import Job
from scaledl.models import build_model
from scaledl.report.summary import summarize
from scaledl.run_record import read_run_json, write_run_json
from scaledl.train.monitor import StopSignals
from scaledl.train.outputs import MetricsLog, write_metrics

BUDGET = 100_000


def train_args(data, out, algorithm, *extra):
    return ["--data", str(data), "--model", "lenet", "--algorithm", algorithm, "--out-dir", str(out), *extra]


# ---- in-process: the pieces ------------------------------------------------------------------


def test_one_ctrl_c_delivered_twice_is_one_request_and_a_later_one_aborts():
    aborted = []
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)  # SIG_IGN under nohup
    with StopSignals(on_second=lambda: aborted.append(True), same_press_s=0.5) as signals:
        assert not signals.requested
        os.kill(os.getpid(), signal.SIGINT)  # the terminal's copy: no KeyboardInterrupt
        os.kill(os.getpid(), signal.SIGINT)  # the launcher's forwarded copy of the same press
        assert signals.requested and aborted == []
        time.sleep(0.6)
        os.kill(os.getpid(), signal.SIGTERM)  # a second press, later
        assert aborted == [True]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # handlers restored


def test_metrics_grow_row_by_row_and_end_as_the_atomic_file(tmp_path):
    rows = [
        {"step": s, "epoch": s / 10, "train_loss": 1 / (s + 1), "test_loss": float("nan"), "test_accuracy": 0.5}
        for s in (0, 5, 10)
    ]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text("{}")  # an earlier run's, now out of date
    log = MetricsLog(run_dir / "metrics.csv")
    assert not (run_dir / "run.json").exists()
    for count, row in enumerate(rows, start=1):
        log.append(row)
        assert len(pd.read_csv(run_dir / "metrics.csv")) == count  # on disk before the run ends
    log.close()
    write_metrics(tmp_path / "final.csv", rows)
    assert (run_dir / "metrics.csv").read_bytes() == (tmp_path / "final.csv").read_bytes()


def test_run_json_is_strict_json(tmp_path):
    write_run_json(
        tmp_path / "run.json",
        {"final": {"test_loss": float("nan"), "test_accuracy": 0.1}, "losses": [float("inf"), 1.5]},
    )
    text = (tmp_path / "run.json").read_text()
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in run.json")) == {
        "final": {"test_loss": None, "test_accuracy": 0.1},
        "losses": [None, 1.5],
    }


# ---- the summary and the workflow --------------------------------------------------------------


def test_summary_shows_runs_that_ended_early_as_such(tmp_path):
    runs = {
        reason: make_run(tmp_path, algorithm)
        for reason, algorithm in (("max_steps", "sync_sgd"), ("interrupted", "sync_easgd"), ("diverged", "async_sgd"))
    }
    for reason, run_dir in runs.items():
        record = read_run_json(run_dir / "run.json")
        record["stop"]["reason"] = reason
        (run_dir / "run.json").write_text(json.dumps(record))
    table = summarize(list(runs.values()))
    assert dict(zip(table["algorithm"], table["stop_reason"])) == {
        "sync_sgd": "max_steps",
        "sync_easgd": "interrupted",
        "async_sgd": "diverged",
    }


def test_summary_refuses_a_run_json_without_its_metrics(tmp_path):
    run_dir = make_run(tmp_path, "sync_sgd")
    (run_dir / "metrics.csv").unlink()
    with pytest.raises(UserError) as error:
        summarize([run_dir])
    message = str(error.value)
    assert "metrics.csv missing" in message and str(run_dir) in message and "\n" not in message


@pytest.mark.workflow
def test_the_timeline_is_an_output_of_rule_train(workdir):
    """Declared, so Snakemake deletes it with the other outputs of a failed, interrupted or rerun job."""
    run_dir = "results/default/runs/digits/lenet/sync_sgd/local/p2/s0"
    result = snakemake(workdir, "-n", f"{run_dir}/timeline.h5")
    assert result.returncode == 0, output_of(result)
    assert re.search(r"^train\s+1$", output_of(result), re.M), output_of(result)
    assert f"{run_dir}/model.pt, {run_dir}/timeline.h5" in output_of(result)


# ---- MPI runs -------------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm, ranks", [("sync_sgd", 2), ("async_sgd", 3)])
def test_a_diverging_run_stops_and_says_so(digits_h5, tmp_path, algorithm, ranks):
    out = tmp_path / "run"
    result = run_train(
        ranks,
        train_args(digits_h5, out, algorithm, "--lr", "1e4", "--max-steps", str(BUDGET), "--eval-every", "5"),
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = read_run_json(out / "run.json")
    assert run["stop"]["reason"] == "diverged"
    assert run["stop"]["steps"] < BUDGET
    assert run["stop"]["nonfinite_loss_step"] <= run["stop"]["steps"]
    metrics = pd.read_csv(out / "metrics.csv")
    last = metrics.iloc[-1]
    assert not (math.isfinite(last["train_loss"]) and math.isfinite(last["test_loss"])), metrics.tail()
    assert "stopped by diverged" in result.stdout and "smaller --lr" in result.stdout
    assert summarize([out])["stop_reason"].tolist() == ["diverged"]


@pytest.mark.mpi
@pytest.mark.parametrize(
    "algorithm, ranks, signum",
    [
        ("sync_sgd", 2, signal.SIGINT),
        ("async_easgd", 3, signal.SIGINT),
        ("sync_sgd", 2, signal.SIGTERM),
        ("easgd", 3, signal.SIGUSR1),
    ],
)
def test_ctrl_c_stops_every_rank_keeps_partial_results_and_resumes(digits_h5, tmp_path, algorithm, ranks, signum):
    """SIGUSR1 is Slurm's warning before a time limit (--signal=USR1@120); all three end alike: a checkpoint at
    the step boundary, partial results, exit 130, and the same command continues from that step."""
    out = tmp_path / "run"
    job = Job(
        ranks,
        [
            "-m",
            "scaledl",
            "train",
            *train_args(digits_h5, out, algorithm, "--max-steps", str(BUDGET), "--eval-every", "10"),
        ],
    )
    job.wait_for(r"step\s+[1-9]\d*/")  # the first progress line after W_0's
    job.signal(signum)
    assert job.finish(timeout=60) == 130, job.output[-3000:]
    assert "Traceback" not in job.output and "KeyboardInterrupt" not in job.output, job.output[-3000:]
    ours = [line for line in job.stderr if line.strip()]  # (mpiexec's own notice of a Ctrl-C is on stdout)
    assert len(ours) == 1, job.output[-3000:]
    said = re.fullmatch(
        rf"scaledl train: interrupted at step (\d+); checkpoint saved in {re.escape(str(out))}/"
        rf"checkpoints: rerun the same command to resume; partial results in {re.escape(str(out))}\n",
        ours[0],
    )
    assert said, ours[0]
    step = int(said.group(1))
    run = read_run_json(out / "run.json")
    assert run["stop"]["reason"] == "interrupted" and run["stop"]["steps"] == step < BUDGET
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["step"].iloc[0] == 0 and len(metrics) >= 2
    assert run["final"]["test_accuracy"] == metrics["test_accuracy"].iloc[-1]
    build_model("lenet", run["data"]["image_shape"], run["data"]["classes"]).load_state_dict(
        torch.load(out / "model.pt")
    )  # the last evaluated center, whole
    assert summarize([out])["stop_reason"].tolist() == ["interrupted"]
    assert run["checkpoints"]["kept"] and run["checkpoints"]["written"][-1]["step"] == step

    # The same command with a budget it can finish (budgets may change across a resume): it continues.
    resumed = run_train(
        ranks, train_args(digits_h5, out, algorithm, "--max-steps", str(step + 12), "--eval-every", "10"), timeout=120
    )
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"at step {step} " in resumed.stdout, resumed.stdout[-2000:]
    run = read_run_json(out / "run.json")
    assert run["stop"]["reason"] == "max_steps" and run["stop"]["steps"] == step + 12
    assert [r["step"] for r in run["checkpoints"]["resumes"]] == [step]
    metrics = pd.read_csv(out / "metrics.csv")
    assert metrics["step"].iloc[0] == 0 and metrics["step"].is_monotonic_increasing  # the rows before, then after
    assert not (out / "checkpoints").exists(), "a finished run keeps no checkpoints"
