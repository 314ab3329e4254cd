"""Bad input gives one clear line and exit 2; a dead or hung worker ends the job, naming the rank."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from mpi_run import mpi_env, run_train
from scaledl.grid.launch import Job

pytestmark = pytest.mark.mpi


def error_lines(result):
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_master_based_algorithm_on_one_rank(digits_h5, tmp_path):
    result = run_train(
        1,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "async_easgd",
            "--out-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "5",
        ],
    )
    assert result.returncode == 2
    assert error_lines(result) == [error_lines(result)[0]]
    assert "needs a master rank plus at least one worker" in result.stderr and "mpiexec -n P+1" in result.stderr
    assert not (tmp_path / "run").exists()


def test_missing_and_corrupt_data(tmp_path):
    (tmp_path / "bad.h5").write_bytes(b"not hdf5 at all")
    for data, says in ((tmp_path / "missing.h5", "no such file"), (tmp_path / "bad.h5", "not an HDF5 file")):
        result = run_train(
            2,
            [
                "--data",
                str(data),
                "--model",
                "lenet",
                "--algorithm",
                "sync_sgd",
                "--out-dir",
                str(tmp_path / "run"),
                "--max-steps",
                "5",
            ],
        )
        assert result.returncode == 2
        lines = error_lines(result)
        assert len(lines) == 1 and says in lines[0] and str(data) in lines[0], result.stderr
        assert "Traceback" not in result.stdout + result.stderr
        assert not (tmp_path / "run").exists()


def test_no_budget(digits_h5, tmp_path):
    result = run_train(
        2,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "sync_sgd",
            "--out-dir",
            str(tmp_path / "run"),
            "--target-accuracy",
            "0.9",
        ],
    )
    assert result.returncode == 2 and "give at least one budget" in result.stderr


@pytest.mark.parametrize("how", ["kill", "hang"])
@pytest.mark.parametrize("algorithm", ["async_easgd", "hogwild_sgd", "easgd"])
def test_lost_worker_ends_the_job_naming_the_rank(digits_h5, tmp_path, algorithm, how):
    timeout = 5
    job = Job(
        3,
        [
            "-m",
            "scaledl",
            "train",
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            algorithm,
            "--out-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "100000",
            "--eval-every",
            "100000",
            "--worker-timeout",
            str(timeout),
        ],
    )
    pid = int(job.wait_for(r"rank 2/3 \(worker 1, pid (\d+) on").group(1))
    job.wait_for(r"step\s+0[/ ]")  # training has started
    time.sleep(2)
    os.kill(pid, signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    started = time.monotonic()
    # A hung worker is waited for as long as its own pace allows (comm/liveness.py: 10× its longest
    # interval, at least the floor), which a loaded machine can stretch; the bound only has to tell
    # "ended at its limit" from "never ends" (100000 steps take many minutes).
    returncode = job.finish(timeout=timeout + 85)
    elapsed = time.monotonic() - started
    assert returncode != 0
    ours = [line for line in job.output.splitlines() if "scaledl train: error:" in line]
    assert len(ours) == 1, job.output[-3000:]  # one report, not one per killed rank
    if how == "kill":
        assert f"rank 2/3 (worker 1, pid {pid} on" in ours[0] and "died without finishing" in ours[0], ours
        assert elapsed < timeout + 30
    else:
        assert "worker rank 2 " in ours[0], ours
        limit = float(re.search(r"limit ([\d.]+) s", ours[0]).group(1))
        assert limit >= timeout and elapsed < limit + 30, (limit, elapsed, ours[0])  # it ended at its own limit
    assert not (tmp_path / "run" / "run.json").exists()


def test_singletons_are_refused(digits_h5, tmp_path):
    """A launcher that starts two unconnected singletons instead of one 2-rank job must fail, not train twice."""
    cmd = [
        sys.executable,
        "-m",
        "mpi4py",
        "-m",
        "scaledl",
        "train",
        "--data",
        str(digits_h5),
        "--model",
        "lenet",
        "--algorithm",
        "sync_sgd",
        "--out-dir",
        str(tmp_path / "run"),
        "--max-steps",
        "5",
        "--expect-ranks",
        "2",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=mpi_env(1))
    assert result.returncode == 2
    assert (
        error_lines(result) == [error_lines(result)[0]] and "world of 1 rank(s), but 2 were requested" in result.stderr
    )
    assert not (tmp_path / "run").exists()
