"""A run refused with a setting to fix (exit 2) is refused again at once on the workflow's retries.

Snakemake and its Slurm plugin retry every failed job alike; the workflow passes a retry's attempt as
SCALEDL_ATTEMPT (scaledl.grid.launch) and `scaledl train` keeps the reason of a refusal in its run
folder (scaledl.train.refusal).
"""

from __future__ import annotations

import pytest

from mpi_run import run_train
from scaledl.train import refusal


def test_the_attempt_comes_from_the_environment():
    assert refusal.attempt_of({}) == 1
    assert refusal.attempt_of({"SCALEDL_ATTEMPT": "3"}) == 3
    assert refusal.attempt_of({"SCALEDL_ATTEMPT": "x"}) == refusal.attempt_of({"SCALEDL_ATTEMPT": "0"}) == 1


def test_a_retry_of_a_refused_run_is_refused_and_a_first_attempt_clears_the_record(tmp_path):
    run = tmp_path / "run"
    refusal.record(run, "no such file data/hdf5/x.h5")
    assert not run.exists()  # a new folder by hand: nothing is left behind
    run.mkdir()  # as Snakemake makes a job's output folders
    refusal.record(run, "no such file data/hdf5/x.h5\n")
    assert (run / refusal.REFUSAL_FILE).read_text() == "no such file data/hdf5/x.h5\n"
    with pytest.raises(refusal.Refused, match=r"^an earlier attempt .* retry 2 cannot change that: no such file"):
        refusal.check(run, 2, clear=True)
    refusal.check(run, 1, clear=False)  # another rank of a first attempt: leaves it to rank 0
    assert (run / refusal.REFUSAL_FILE).exists()
    refusal.check(run, 1, clear=True)
    assert not (run / refusal.REFUSAL_FILE).exists()
    refusal.check(run, 3, clear=True)  # an earlier attempt that failed otherwise (a time limit): run


@pytest.mark.mpi
def test_train_records_a_refusal_and_its_retry_stops_before_reading_data(digits_h5, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    args = ["--model", "lenet", "--algorithm", "sync_sgd", "--out-dir", str(run), "--max-steps", "2"]
    first = run_train(1, ["--data", str(tmp_path / "missing.h5"), *args])
    assert first.returncode == 2, first.stderr
    assert "no such file" in (run / refusal.REFUSAL_FILE).read_text()
    # the retry has good data now, and still stops: a setting to fix cannot change between attempts
    retry = run_train(1, ["--data", str(digits_h5), *args], env={"SCALEDL_ATTEMPT": "2"})
    assert retry.returncode == 2
    (line,) = [text for text in retry.stderr.splitlines() if text.strip()]
    assert line.startswith("scaledl train: error: an earlier attempt of this run was refused")
    assert "no such file" in line
    assert not (run / "run.json").exists()
    # a new `snakemake` command (attempt 1) clears the record and runs
    again = run_train(1, ["--data", str(digits_h5), *args])
    assert again.returncode == 0, again.stderr
    assert (run / "run.json").exists() and not (run / refusal.REFUSAL_FILE).exists()
