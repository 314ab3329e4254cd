"""run.json says exactly what ran: the commit and its edits, the Slurm job, the CPU, the libraries."""

import re
import subprocess
from pathlib import Path

import pytest
import torch

from mpi_run import run_train
from scaledl.report.summary import summarize
from scaledl.run_record import read_run_json
from scaledl.train import provenance

REPO = Path(__file__).resolve().parents[2]


def test_outside_a_checkout_the_code_fields_say_why(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "PACKAGE_DIR", tmp_path)  # an installed copy: no .git above it
    state = provenance.code_state()
    assert state["commit"] is None and state["dirty"] is None and "git checkout" in state["reason"]


def test_slurm_fields_come_from_the_job_environment(monkeypatch):
    for variable in provenance.SLURM_VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)
    assert provenance.slurm_job() is None
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_JOB_PARTITION", "gpu")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-02]")
    job = provenance.slurm_job()
    assert job["job_id"] == "4242" and job["partition"] == "gpu" and job["nodelist"] == "node[01-02]"
    assert job["array_task_id"] is None  # not an array job: recorded as absent, not guessed


def test_libraries_and_hardware_are_read_from_this_machine():
    libraries = provenance.libraries()
    assert libraries["cuda"] == torch.version.cuda and libraries["mpi_vendor"]
    assert re.fullmatch(r"\d+(\.\d+)*", libraries["mpi_vendor_version"])
    hardware = provenance.hardware(torch.device("cpu"))
    assert hardware["cpu_model"] and hardware["logical_cpus"] >= 1 and hardware["gpus"] is None


@pytest.mark.mpi
def test_a_run_records_its_commit_cpu_and_slurm_job(digits_h5, tmp_path):
    out = tmp_path / "run"
    result = run_train(
        1,
        ["--data", str(digits_h5), "--model", "lenet", "--algorithm", "sync_sgd", "--out-dir", str(out)]
        + ["--max-steps", "3", "--eval-every", "3"],
        env={"SLURM_JOB_ID": "4242", "SLURM_JOB_PARTITION": "debug"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    record = read_run_json(out / "run.json")["provenance"]
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if git.returncode == 0:
        assert record["code"]["commit"] == git.stdout.strip() and isinstance(record["code"]["dirty"], bool)
    assert record["slurm"]["job_id"] == "4242" and record["slurm"]["partition"] == "debug"
    assert record["hardware"]["cpu_model"] == provenance.cpu_model()
    row = summarize([out]).iloc[0]
    assert row["slurm_job_id"] == "4242" and row["commit"] == record["code"]["commit"]
