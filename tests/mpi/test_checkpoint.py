"""Checkpoints and resume: a run killed at step k and rerun with the same command continues where its
newest checkpoint left it; synchronous algorithms end bitwise where an uninterrupted run ends.

The kill is real (SIGKILL, delivered by the rank to itself at a chosen step through
SCALEDL_KILL_AT=RANK:STEP), so nothing of the dying run gets a chance to tidy up.
"""

from __future__ import annotations

import json
import re
import shutil

import h5py
import pandas as pd
import pytest
import torch

from mpi_run import run_train
from scaledl.config import TrainConfig
from scaledl.data.hdf5 import write_dataset
from scaledl.errors import UserError
from scaledl.report.summary import summarize
from scaledl.run_record import read_run_json
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
        "16",
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
        # each worker's own center and outer momentum, and the round before's sum, received at the checkpoint
        # (a ring's own centers take the same path; at two workers a ring is the complete graph)
        ("diloco", ("--tau", "3", "--lr", "0.01", "--outer-delay", "1")),
    ],
    ids=["sync_easgd-tau3", "sync_sgd", "diloco-momentum-int8", "diloco-replicated", "diloco-delayed"],
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
    run = read_run_json(out / "run.json")
    assert run["stop"]["steps"] == STEPS and [r["step"] for r in run["checkpoints"]["resumes"]] == [20]
    whole_run = read_run_json(tmp_path / "whole/run.json")
    assert [r["exchanges"] for r in run["algorithm_report"]] == [r["exchanges"] for r in whole_run["algorithm_report"]]
    assert not (out / "checkpoints").exists()


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["async_easgd", "easgd"])
def test_an_asynchronous_run_killed_and_rerun_resumes_and_finishes(digits_h5, tmp_path, algorithm):
    out = tmp_path / "killed"
    rerun = killed_then_rerun(digits_h5, out, algorithm, 3)
    start = resumed_step(rerun.stdout)
    assert EVERY <= start < STEPS
    run = read_run_json(out / "run.json")
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
    assert read_run_json(out / "run.json")["checkpoints"]["resumes"] == []


@pytest.mark.mpi
def test_a_damaged_checkpoint_is_refused_in_one_line(digits_h5, tmp_path):
    """Rank 1's file alone is damaged: every rank stops with its line (none goes on to build what the
    others never reach)."""
    out = tmp_path / "run"
    run_train(2, args(digits_h5, out, "sync_sgd"), timeout=120, env={"SCALEDL_KILL_AT": "0:15"})
    _, path, _ = checkpoint.complete(out)[-1]
    damaged = checkpoint.rank_file(path, 1)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    result = run_train(2, args(digits_h5, out, "sync_sgd"), timeout=60)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "checksum" in lines[0] and str(damaged) in lines[0], (
        result.stderr
    )


@pytest.mark.mpi
def test_a_resume_with_a_changed_target_reports_the_uninterrupted_runs_time_to_target(digits_h5, tmp_path):
    """A run without a target is killed after its checkpoint at step 20 and resumed with a target its
    restored rows crossed earlier: like a run with that target from the start, it reports the step of the
    first evaluation at or above it, and that evaluation's training clock (the first attempt's), and stops.
    The clocks of two runs differ; sync_sgd's rows, and so the step, are bitwise alike."""
    out, whole = tmp_path / "resumed", tmp_path / "whole"
    every_5 = ("--eval-every", "5")
    killed = run_train(1, args(digits_h5, out, "sync_sgd", *every_5), timeout=120, env={"SCALEDL_KILL_AT": "0:25"})
    assert killed.returncode != 0 and checkpoint.complete(out)[-1][0] == 20, killed.stdout[-2000:]
    before = pd.read_csv(out / "metrics.csv")
    early = before[(before["step"] > 0) & (before["step"] <= 15)]
    target = float(early["test_accuracy"].max())
    crossed = before[before["test_accuracy"] >= target].iloc[0]
    assert 0 < crossed["step"] < 20, before  # crossed before the checkpoint, strictly

    with_target = ("--target-accuracy", repr(target), *every_5)
    resumed = run_train(1, args(digits_h5, out, "sync_sgd", *with_target), timeout=120)
    assert resumed.returncode == 0 and resumed_step(resumed.stdout) == 20, resumed.stdout[-2000:] + resumed.stderr
    uninterrupted = run_train(1, args(digits_h5, whole, "sync_sgd", *with_target), timeout=120)
    assert uninterrupted.returncode == 0, uninterrupted.stdout[-2000:] + uninterrupted.stderr[-2000:]

    ours, theirs = (read_run_json(folder / "run.json") for folder in (out, whole))
    assert ours["stop"]["reason"] == theirs["stop"]["reason"] == "target_accuracy"
    assert ours["evaluation"]["target_step"] == theirs["evaluation"]["target_step"] == crossed["step"]
    # the restored row's clock: the target is that row's own accuracy, so the interpolation ends exactly on it
    assert ours["time_to_target_s"] == crossed["train_s"] and ours["steps_to_target"] == crossed["step"]
    theirs_rows = pd.read_csv(whole / "metrics.csv").set_index("step")
    assert theirs["time_to_target_s"] == theirs_rows.loc[crossed["step"], "train_s"]
    assert (
        theirs_rows.loc[: crossed["step"], "test_accuracy"].tolist()
        == before.set_index("step").loc[: crossed["step"], "test_accuracy"].tolist()
    )
    assert summarize([out, whole]).set_index("run")["resumed"].to_dict() == {str(out): True, str(whole): False}


@pytest.mark.mpi
def test_a_resume_across_a_changed_data_file_or_code_is_refused_in_one_line(digits_h5, tmp_path):
    """The data file prepared again (one train pixel differs) under the same name: refused. Other code:
    refused, unless --resume-across-versions, which run.json then records with both versions."""
    data, out = tmp_path / "data.h5", tmp_path / "run"
    shutil.copyfile(digits_h5, data)
    killed = run_train(1, args(data, out, "sync_sgd"), timeout=120, env={"SCALEDL_KILL_AT": "0:15"})
    assert killed.returncode != 0 and checkpoint.complete(out)[-1][0] == 10
    with h5py.File(digits_h5, "r") as f:
        images, labels = f["train/images"][()], f["train/labels"][()]
        images[0, 0, 0, 0] ^= 1
        write_dataset(
            data,
            dataset="digits",
            train=(images, labels),
            test=(f["test/images"][()], f["test/labels"][()]),
            classes=int(f.attrs["classes"]),
            class_names=None,
            source_sha256=f.attrs["source_sha256"],
            attrs={"seed": f.attrs["seed"]},
        )

    def refused(*extra) -> str:
        result = run_train(1, args(data, out, "sync_sgd", *extra), timeout=120)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1 and not result.stdout.strip(), result.stdout + result.stderr
        return lines[0]

    line = refused("--resume-across-versions")  # other data is never resumed
    assert "was trained on other data" in line and "--restart" in line, line
    shutil.copyfile(digits_h5, data)  # the file it was trained on, back
    manifest_path = checkpoint.complete(out)[-1][1] / checkpoint.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    now = manifest["fingerprint"][checkpoint.CODE_KEY]
    manifest["fingerprint"][checkpoint.CODE_KEY] = "0.0.1+0123456789abcdef"  # as an older version wrote it
    manifest["code"]["version"] = "0.0.1+0123456789abcdef"
    manifest_path.write_text(json.dumps(manifest))
    line = refused()
    assert f"other code (scaledl 0.0.1+0123456789abcdef there, {now} now)" in line, line
    assert "--resume-across-versions" in line, line
    across = run_train(1, args(data, out, "sync_sgd", "--resume-across-versions"), timeout=120)
    assert across.returncode == 0 and resumed_step(across.stdout) == 10, across.stdout[-2000:] + across.stderr
    assert f"across code versions (0.0.1+0123456789abcdef there, {now} now)" in across.stdout
    run = read_run_json(out / "run.json")
    assert run["arguments"]["resume_across_versions"] is True
    assert run["checkpoints"]["across_versions"] is True
    assert run["checkpoints"]["code_versions"] == ["0.0.1+0123456789abcdef", now]
    assert run["provenance"]["code"]["version"] == now


@pytest.mark.mpi
@pytest.mark.parametrize("refusal", ["other-settings", "unwritable-out-dir"])
def test_a_refusal_of_a_run_with_windows_is_one_line_and_nothing_else(digits_h5, tmp_path, refusal):
    """async_easgd's RMA windows: a checkpoint's refusal comes before any exists; the master's unwritable
    run folder after them, which are then freed on every rank. Either way no MPI library's teardown
    warnings (UCX: `... was not returned to mpool`) follow the one line."""
    out = tmp_path / "run"
    if refusal == "other-settings":
        write_checkpoint(out, 10, {"lr": 0.1})
    else:
        (out / "metrics.csv").mkdir(parents=True)  # cannot be opened as a file (root writes anywhere)
    result = run_train(3, args(digits_h5, out, "async_easgd"), timeout=120)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert {"other-settings": "other settings", "unwritable-out-dir": "cannot write there"}[refusal] in lines[0]
    assert result.stdout.strip() == "", result.stdout[-3000:]


# ---- the pieces, in-process ------------------------------------------------------------------


def test_the_schedule_counts_steps_and_seconds(monkeypatch):
    assert [s for s in range(1, 31) if CheckpointPolicy(every=10).due(s)] == [10, 20, 30]
    jumping = CheckpointPolicy(every=10)  # a step that moves by four (quorum rounds): the first past each ten
    assert [s for s in range(1, 34, 4) if jumping.due(s)] == [13, 21, 33]
    resumed = CheckpointPolicy(every=10)  # a resumed run's first step is past a multiple, not due for it
    assert [resumed.due(s) for s in (21, 25, 29, 33)] == [False, False, False, True]
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


def fingerprint(c, world_size=1, data="d" * 64, code="0.1.0+aaaa"):
    return checkpoint.fingerprint(c, world_size, data, code)


def test_the_newest_complete_checkpoint_is_chosen_and_older_ones_pruned(tmp_path):
    c = cfg(tmp_path)
    fp = fingerprint(c)
    for step in (10, 20, 30):
        write_checkpoint(c.out_dir, step, fp)
    write_checkpoint(c.out_dir, 40, fp, manifest=False)  # cut short: no manifest
    step, path, manifest = checkpoint.newest(c.out_dir, fp)
    assert step == 30 and checkpoint.read_rank(path, 0, manifest)["weights"].tolist() == [30.0] * 3
    checkpoint.prune(c.out_dir)
    assert [s for s, _, _ in checkpoint.complete(c.out_dir)] == [20, 30]
    assert checkpoint.step_folder(c.out_dir, 40).exists(), "a newer, incomplete one is left to be overwritten"
    # budgets may change across a resume, and the data file's path (a staged copy); the arithmetic may not
    assert checkpoint.newest(c.out_dir, fingerprint(cfg(tmp_path, max_steps=99, target_accuracy=0.5)))[0] == 30
    assert checkpoint.newest(c.out_dir, fingerprint(cfg(tmp_path, data=tmp_path / "staged.h5")))[0] == 30
    with pytest.raises(UserError, match=r"batch_size 64 there, 32 now.*--restart"):
        checkpoint.newest(c.out_dir, fingerprint(cfg(tmp_path, batch_size=32)))
    with pytest.raises(UserError, match=r"world_size 1 there, 2 now"):
        checkpoint.newest(c.out_dir, fingerprint(c, 2))


def test_other_data_is_refused_and_other_code_only_when_asked(tmp_path):
    c = cfg(tmp_path)
    write_checkpoint(c.out_dir, 10, fingerprint(c))
    with pytest.raises(UserError, match=r"trained on other data.*dddddddddddd… there, eeeeeeeeeeee… now.*--restart"):
        checkpoint.newest(c.out_dir, fingerprint(c, data="e" * 64), across_versions=True)  # never allowed
    with pytest.raises(UserError) as refused:
        checkpoint.newest(c.out_dir, fingerprint(c, code="0.1.0+bbbb"))
    assert "other code (scaledl 0.1.0+aaaa there, 0.1.0+bbbb now)" in str(refused.value)
    assert "--resume-across-versions" in str(refused.value) and "\n" not in str(refused.value)
    assert checkpoint.newest(c.out_dir, fingerprint(c, code="0.1.0+bbbb"), across_versions=True)[0] == 10
    # other settings are named first, whatever the code
    with pytest.raises(UserError, match=r"other settings \(lr 0.05 there, 0.1 now\)"):
        checkpoint.newest(c.out_dir, fingerprint(cfg(tmp_path, lr=0.1), code="0.1.0+bbbb"), across_versions=True)


def test_the_data_identity_reads_no_image_but_sees_every_change(tmp_path, digits_h5):
    import h5py

    from scaledl.data.hdf5 import identity, write_dataset

    with h5py.File(digits_h5, "r") as f:
        train = (f["train/images"][()], f["train/labels"][()])
        test = (f["test/images"][()], f["test/labels"][()])
        attrs = {k: v for k, v in f.attrs.items() if k not in ("dataset", "classes", "mean", "std", "source_sha256")}
        source = f.attrs["source_sha256"]

    def prepared(name, train_, test_=test, source_=source):
        path = tmp_path / name
        write_dataset(path, dataset="digits", train=train_, test=test_, classes=10, class_names=None,
                      source_sha256=source_, attrs=attrs)  # fmt: skip
        return identity(path)

    same = prepared("same.h5", train)
    assert same == prepared("copy.h5", train), "the same content, written again: the same identity"
    pixel = train[0].copy()
    pixel[0, 0, 0, 0] ^= 1
    relabelled = train[1].copy()
    relabelled[0] = (relabelled[0] + 1) % 10
    changed = {
        "a train pixel": prepared("pixel.h5", (pixel, train[1])),
        "a label": prepared("label.h5", (train[0], relabelled)),
        "the order": prepared("order.h5", (train[0][::-1].copy(), train[1][::-1].copy())),
        "the source": prepared("source.h5", train, source_="0" * 64),
        "the test split": prepared("test.h5", train, test_=(test[0][:-1], test[1][:-1])),
    }
    assert all(value != same for value in changed.values()), changed


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


def test_a_changed_target_is_found_again_in_the_restored_rows():
    """The target is a budget, so it may change across a resume: the time to target is the first restored
    row at or above the new one (not the old target's, nor the first evaluation after the resume), and a
    target those rows reach stops the run at its next step boundary, its result that row's."""
    from types import SimpleNamespace

    from scaledl.comm.timing import PhaseTimer
    from scaledl.train.monitor import Monitor, StopRule

    accuracies = {0: 0.1, 5: 0.6, 10: 0.8, 15: 0.7, 20: 0.9}
    rows = [{"step": s, "train_s": s / 10, "test_loss": 1 - a, "test_accuracy": a} for s, a in accuracies.items()]
    at_10, at_20 = {"w": torch.full((2,), 10.0)}, {"w": torch.full((2,), 20.0)}
    written = {  # a checkpoint at step 20 of a run whose target 0.55 was crossed at step 5
        "rows": rows, "step": 20, "epoch": 0.5, "last_accuracy": 0.9, "last_loss": 0.1, "time_to_target": 0.5,
        "target_step": 5, "diverged_at": None, "target_state": {"w": torch.full((2,), 5.0)}, "loss_sum": None,
        "loss_count": 0, "evaluated_step": 20, "next_eval": 25, "evaluated_state": at_20,
    }  # fmt: skip

    def resumed(target):
        evaluator = SimpleNamespace(evaluated_state=None)
        monitor = Monitor(StopRule(max_steps=40, target_accuracy=target), 5, PhaseTimer(), evaluator, 1, lambda: None)
        monitor.load_state_dict(written)
        return monitor

    # the crossing is interpolated between the rows around it; the run stops at the row that reached it
    same = resumed(0.55)  # the same target: unchanged, 0.9 of the way from step 0 (0.1) to step 5 (0.6)
    assert (same.time_to_target, same.steps_to_target, same.target_step) == (pytest.approx(0.45), pytest.approx(4.5), 5)
    changed = resumed(0.75)  # between steps 5 (0.6) and 10 (0.8): not after step 15's dip, nor later
    assert (changed.time_to_target, changed.steps_to_target, changed.target_step) == (
        pytest.approx(0.875),
        pytest.approx(8.75),
        10,
    )
    for target in (0.95, None):
        monitor = resumed(target)
        assert monitor.time_to_target is None and not monitor.after_step(21, 0.52)
    monitor = resumed(0.75)
    assert monitor.after_step(21, 0.52) and monitor.stop_reason == "target_accuracy"
    monitor.finish()  # the center of step 10 is not in the checkpoint: the result is the last evaluated one
    assert monitor.evaluated_state() is at_20 and monitor.last_accuracy == 0.9
    monitor = resumed(0.85)  # reached at the checkpoint's own evaluation: that center is the target's
    assert monitor.target_step == 20 and monitor.after_step(21, 0.52)
    monitor.finish()
    assert monitor.evaluated_state() is at_20 and monitor.last_accuracy == 0.9
    written["target_step"], written["target_state"] = 10, at_10  # the checkpoint holds step 10's center
    monitor = resumed(0.75)
    assert monitor.after_step(21, 0.52)
    monitor.finish()
    assert monitor.evaluated_state() is at_10 and (monitor.last_accuracy, monitor.last_loss) == (0.8, 1 - 0.8)
