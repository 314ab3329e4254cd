"""Checkpoints and resume: a run killed at step k and rerun with the same command continues where its
newest checkpoint left it; synchronous algorithms end bitwise where an uninterrupted run ends.

The kill is real (SIGKILL, delivered by the rank to itself at a chosen step through
SCALEDL_KILL_AT=RANK:STEP), so nothing of the dying run gets a chance to tidy up.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch

from mpi_run import run_train
from scaledl.config import TrainConfig
from scaledl.errors import UserError
from scaledl.train import checkpoint
from scaledl.train.checkpoint import CheckpointPolicy

STEPS, EVERY, KILL_AT = 40, 10, 25


def args(data, out, algorithm, *extra):
    return [
        "--data",
        str(data),
        "--model",
        "lenet",
        "--algorithm",
        algorithm,
        "--out-dir",
        str(out),
        "--max-steps",
        str(STEPS),
        "--eval-every",
        "10",
        "--batch-size",
        "32",
        "--checkpoint-every",
        str(EVERY),
        *extra,
    ]


def killed_then_rerun(digits_h5, out, algorithm, ranks, *extra):
    """The run killed on rank 1 at KILL_AT, then the same command again; returns the rerun's result."""
    killed = run_train(
        ranks, args(digits_h5, out, algorithm, *extra), timeout=120, env={"SCALEDL_KILL_AT": f"1:{KILL_AT}"}
    )
    assert killed.returncode != 0, killed.stdout[-2000:]
    assert not (out / "run.json").exists(), "a killed run leaves no run.json to vouch for it"
    assert [step for step, _, _ in checkpoint.complete(out)], "the killed run left no complete checkpoint"
    rerun = run_train(ranks, args(digits_h5, out, algorithm, *extra), timeout=120)
    assert rerun.returncode == 0, rerun.stdout[-2000:] + rerun.stderr[-2000:]
    return rerun


def resumed_step(stdout: str) -> int:
    said = re.search(r"^resuming from \S+step-0*(\d+) at step (\d+) ", stdout, flags=re.M)
    assert said, stdout[-2000:]
    assert said.group(1) == said.group(2)
    return int(said.group(2))


@pytest.mark.mpi
@pytest.mark.parametrize(
    "algorithm, extra",
    [
        ("sync_easgd", ("--tau", "3")),
        ("sync_sgd", ()),
        # DiLoCo's outer momentum, the inner momentum, and int8's shared center and error-feedback residuals
        ("diloco", ("--tau", "3", "--inner", "momentum", "--lr", "0.01", "--compress", "int8")),
        # every worker's replica of the center and of the outer momentum (the allreduce exchange)
        ("diloco", ("--tau", "3", "--lr", "0.01")),
    ],
    ids=["sync_easgd-tau3", "sync_sgd", "diloco-momentum-int8", "diloco-replicated"],
)
def test_a_synchronous_run_killed_and_rerun_ends_bitwise_like_an_uninterrupted_one(
    digits_h5, tmp_path, algorithm, extra
):
    whole = run_train(2, args(digits_h5, tmp_path / "whole", algorithm, *extra), timeout=120)
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-2000:]
    out = tmp_path / "killed"
    rerun = killed_then_rerun(digits_h5, out, algorithm, 2, *extra)
    # τ = 3 and checkpoints every 10 steps: the resume lands mid-period, so the τ phase must come back too
    assert resumed_step(rerun.stdout) == 20
    assert (out / "model.pt").read_bytes() == (tmp_path / "whole/model.pt").read_bytes()
    ours, theirs = pd.read_csv(out / "metrics.csv"), pd.read_csv(tmp_path / "whole/metrics.csv")
    columns = ["step", "samples", "train_loss", "test_loss", "test_accuracy"]
    pd.testing.assert_frame_equal(ours[columns], theirs[columns])  # the rows before the kill, then the same ones
    run = json.loads((out / "run.json").read_text())
    assert run["stop"]["steps"] == STEPS and [r["step"] for r in run["checkpoints"]["resumes"]] == [20]
    whole_run = json.loads((tmp_path / "whole/run.json").read_text())
    assert [r["exchanges"] for r in run["algorithm_report"]] == [r["exchanges"] for r in whole_run["algorithm_report"]]
    assert not (out / "checkpoints").exists()


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["async_easgd", "easgd"])
def test_an_asynchronous_run_killed_and_rerun_resumes_and_finishes(digits_h5, tmp_path, algorithm):
    out = tmp_path / "killed"
    rerun = killed_then_rerun(digits_h5, out, algorithm, 3)
    start = resumed_step(rerun.stdout)
    assert EVERY <= start < STEPS
    run = json.loads((out / "run.json").read_text())
    assert run["stop"]["reason"] == "max_steps" and run["stop"]["steps"] == STEPS  # the step counter continued
    workers = run["algorithm_report"][0]["workers"] if algorithm == "easgd" else run["algorithm_report"]
    exchanges = [w["exchanges"] for w in workers]
    # Staleness counters continue across the restart: the workers' exchanges cover every step, not only
    # those after the resume (the center's update count, restored, is what the step counter reads).
    assert sum(exchanges) >= 2 * STEPS, exchanges
    if algorithm == "easgd":
        assert exchanges == [STEPS, STEPS] and run["algorithm_report"][0]["served_in_rank_order"]


@pytest.mark.mpi
def test_restart_starts_over_and_other_settings_are_refused_in_one_line(digits_h5, tmp_path):
    out = tmp_path / "run"
    killed = run_train(1, args(digits_h5, out, "sync_sgd"), timeout=120, env={"SCALEDL_KILL_AT": "0:15"})
    assert killed.returncode != 0 and checkpoint.complete(out)[-1][0] == 10
    metrics_before = (out / "metrics.csv").read_bytes()
    other = run_train(1, args(digits_h5, out, "sync_sgd", "--lr", "0.1"), timeout=120)
    assert other.returncode == 2
    assert (out / "metrics.csv").read_bytes() == metrics_before, "a refused rerun leaves the run folder alone"
    lines = [line for line in other.stderr.splitlines() if line.strip()]
    assert (
        len(lines) == 1
        and "other settings" in lines[0]
        and "lr 0.05 there, 0.1 now" in lines[0]
        and "--restart" in lines[0]
    ), other.stderr
    fresh = run_train(1, args(digits_h5, out, "sync_sgd", "--lr", "0.1", "--restart"), timeout=120)
    assert fresh.returncode == 0 and "resuming" not in fresh.stdout, fresh.stdout[-2000:] + fresh.stderr[-2000:]
    assert json.loads((out / "run.json").read_text())["checkpoints"]["resumes"] == []


@pytest.mark.mpi
def test_a_damaged_checkpoint_is_refused_in_one_line(digits_h5, tmp_path):
    out = tmp_path / "run"
    run_train(1, args(digits_h5, out, "sync_sgd"), timeout=120, env={"SCALEDL_KILL_AT": "0:15"})
    _, path, _ = checkpoint.complete(out)[-1]
    damaged = checkpoint.rank_file(path, 0)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    result = run_train(1, args(digits_h5, out, "sync_sgd"), timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "checksum" in lines[0] and str(damaged) in lines[0], (
        result.stderr
    )


# ---- the pieces, in-process ------------------------------------------------------------------


def test_the_schedule_counts_steps_and_seconds(monkeypatch):
    assert [s for s in range(1, 31) if CheckpointPolicy(every=10).due(s)] == [10, 20, 30]
    assert not CheckpointPolicy(every=None, interval=0).enabled
    clock = iter([0.0, 1.0, 5.0, 6.0, 11.0])
    monkeypatch.setattr(checkpoint.time, "monotonic", lambda: next(clock))
    timed = CheckpointPolicy(interval=5.0)  # created at t = 0
    assert [timed.due(step) for step in (1, 2, 3, 4)] == [False, True, False, True]  # t = 1, 5, 6, 11


def cfg(tmp_path, **changes):
    return TrainConfig(
        **{
            "data": tmp_path / "d.h5",
            "model": "lenet",
            "algorithm": "sync_sgd",
            "out_dir": tmp_path / "run",
            "max_steps": 10,
            **changes,
        }
    )


def write_checkpoint(out, step, fingerprint, ranks=1, manifest=True):
    path = checkpoint.step_folder(out, step)
    entries = [
        checkpoint.write_rank(path, r, {"rank": r, "weights": torch.full((3,), float(step))}) for r in range(ranks)
    ]
    if manifest:
        checkpoint.write_manifest(path, step, fingerprint, entries, "test")
    return path


def test_the_newest_complete_checkpoint_is_chosen_and_older_ones_pruned(tmp_path):
    c = cfg(tmp_path)
    fp = checkpoint.fingerprint(c, 1)
    for step in (10, 20, 30):
        write_checkpoint(c.out_dir, step, fp)
    write_checkpoint(c.out_dir, 40, fp, manifest=False)  # cut short: no manifest
    step, path, manifest = checkpoint.newest(c.out_dir, fp)
    assert step == 30 and checkpoint.read_rank(path, 0, manifest)["weights"].tolist() == [30.0] * 3
    checkpoint.prune(c.out_dir)
    assert [s for s, _, _ in checkpoint.complete(c.out_dir)] == [20, 30]
    assert checkpoint.step_folder(c.out_dir, 40).exists(), "a newer, incomplete one is left to be overwritten"
    # budgets may change across a resume; the arithmetic may not
    assert checkpoint.newest(c.out_dir, checkpoint.fingerprint(cfg(tmp_path, max_steps=99), 1))[0] == 30
    with pytest.raises(UserError, match=r"batch_size 64 there, 32 now.*--restart"):
        checkpoint.newest(c.out_dir, checkpoint.fingerprint(cfg(tmp_path, batch_size=32), 1))
    with pytest.raises(UserError, match=r"world_size 1 there, 2 now"):
        checkpoint.newest(c.out_dir, checkpoint.fingerprint(c, 2))


def test_rng_states_come_back(tmp_path):
    import random

    import numpy as np

    state = checkpoint.rng_state(torch.device("cpu"))
    expected = (torch.rand(3), np.random.rand(3), random.random())
    checkpoint.save_tensors(tmp_path / "rng.pt", checkpoint.plain(state))
    checkpoint.restore_rng(torch.load(tmp_path / "rng.pt", weights_only=True), torch.device("cpu"))
    again = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(expected[0], again[0]) and (expected[1] == again[1]).all() and expected[2] == again[2]


def test_saved_tensors_are_byte_for_byte_repeatable(tmp_path):
    state = {"w": torch.arange(5.0)}
    checkpoint.save_tensors(tmp_path / "a.pt", state)
    checkpoint.save_tensors(tmp_path / "b.pt", state)
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
