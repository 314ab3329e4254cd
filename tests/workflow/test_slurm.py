"""`snakemake --profile slurm` against a real one-node Slurm cluster.

.ci/slurm_up.sh installs Debian's slurmctld, slurmd, slurm-client and munge
(apt, as root), writes a one-node slurm.conf and starts the daemons;
.ci/slurm_down.sh stops them by pid file and restores /etc/slurm. Where Slurm
cannot be installed (not root, no apt) the tests skip and say why.

The workflow runs with the repository's profile plus the overrides a cluster
without slurmdbd needs: job status by squeue and a short first status wait.
Every computing stage goes through sbatch (the reporting rules run where
Snakemake runs); each training job must run in an MPI world of
exactly the tasks Slurm gave it, so a launcher that starts singletons fails
(--expect-ranks makes the job exit 2, and the world size in run.json is checked).
Last, the training command is taken from its Slurm log and run by hand under
`srun --mpi=none`, which starts singletons: it must fail.

A second workflow, run at the same time on the same cluster, signals its running
training job as Slurm does before a time limit or a preemption (SIGUSR1,
`scancel --signal`): the job checkpoints and exits 130, the profile's retries
resubmit it, and it resumes and completes.

Both workflows start in the background as soon as pytest has collected these
tests (tests/slurm_background.py), so their minute of waiting on Slurm overlaps
the rest of the suite; the tests here check what they did. Both run
tests/snakemake_steady_polling.py, Snakemake with the Slurm plugin's status
checks at a steady 2 s (the plugin waits 10 s longer after each check that
finds nothing finished, which here only adds idle time).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import slurm_background
import yaml
from slurm_background import RESUME_CONFIG, RESUME_RUN
from test_workflow import REPO, output_of

from scaledl.run_record import read_run_json

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]


@pytest.fixture(scope="module")
def slurm_cluster():
    """The session's one-node cluster (tests/slurm_background.py: up since collection, its two workflows
    running); skips where it cannot be installed."""
    cluster = slurm_background.start()
    cluster.ready()
    if cluster.skip_reason:
        pytest.skip(cluster.skip_reason)
    assert cluster.failure is None, cluster.failure
    return cluster


def scontrol_job(job_id):
    """`scontrol show job` of a (finished) job as a dict; MinJobAge keeps it there for an hour."""
    text = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True).stdout
    return dict(field.split("=", 1) for field in text.split() if "=" in field)


SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


def submissions(result):
    """{slurm job id: slurm log path} of every job the plugin submitted."""
    return dict(SUBMITTED.findall(output_of(result)))


def logs_of(workdir):
    return "\n".join(f"== {log}\n{log.read_text()}" for log in sorted(workdir.glob("logs/**/*.log")))


@pytest.mark.timeout(480)
def test_profile_submits_every_stage_and_wires_the_mpi_world(slurm_cluster):
    workflow = slurm_cluster.profile
    result, workdir = workflow.finish(), workflow.workdir
    print(f"workflow through Slurm: {time.monotonic() - workflow.started:.0f} s")
    assert result.returncode == 0, output_of(result) + logs_of(workdir)

    # every computing stage went through sbatch: one job id per job, with its Slurm log kept; the
    # reporting rules (tables, plot, claims, figures, comm_model) ran where Snakemake runs
    jobs = submissions(result)
    rules = {job_id: scontrol_job(job_id)["Comment"] for job_id in jobs}
    assert sorted(re.sub(r"_wildcards_.*", "", comment) for comment in rules.values()) == [
        "rule_netbench",
        "rule_prepare",
        "rule_train",
        "rule_train",
        "rule_train_single",
    ]
    # before the first submission, the requests were checked against the node sinfo lists (8 CPUs)
    assert "were not checked" not in output_of(result) and "Slurm job(s) ask for up to" in output_of(result)
    for job_id, log in jobs.items():
        assert Path(log).name == f"{job_id}.log" and Path(log).exists(), log
    # a job's Slurm log names its request and command, for a rerun by hand (README)
    train_logs = "".join(Path(jobs[job_id]).read_text() for job_id in rules if rules[job_id].startswith("rule_train"))
    assert "tasks=3, nodes=1, cpus_per_task=1, slurm_partition=debug, slurm_extra=--ntasks-per-node=3" in train_logs
    assert "Shell command: SRUN_CPUS_PER_TASK=1 srun --mpi=pmi2 -n 3 python -m mpi4py -m scaledl train" in train_logs

    summary = pd.read_csv(workdir / "results/test_slurm/tables/summary.csv")
    assert sorted(zip(summary["algorithm"], summary["workers"])) == [
        ("async_easgd", 2),
        ("sync_sgd", 1),
        ("sync_sgd", 2),
    ]
    assert set(summary["platform"]) == {"ci"}
    scaling = pd.read_csv(workdir / "results/test_slurm/tables/scaling.csv")
    assert list(zip(scaling["algorithm"], scaling["workers"], scaling["scaling"])) == [
        ("sync_sgd", 1, "weak"),
        ("sync_sgd", 2, "weak"),
    ]

    # netbench ran as an MPI job of 2 one-core tasks (the runs fit one node of 2 ranks), under the training launcher
    netbench = json.loads((workdir / "results/test_slurm/netbench/ci.json").read_text())
    assert netbench["machine"]["ranks"] == 2 and netbench["alpha_s"] > 0, netbench["machine"]
    comm_model = pd.read_csv(workdir / "results/test_slurm/tables/comm_model/ci.csv")
    assert sorted(zip(comm_model["algorithm"], comm_model["workers"])) == sorted(
        zip(summary["algorithm"], summary["workers"])
    )

    # inside each training job, the MPI world is exactly the tasks Slurm allocated
    for job_id, comment in rules.items():
        if not comment.startswith("rule_train"):
            continue
        job = scontrol_job(job_id)
        workers = 1 if comment.startswith("rule_train_single_") else 2
        algorithm = "async_easgd" if "async_easgd" in comment else "sync_sgd"
        run = json.loads(
            (workdir / f"results/test_slurm/runs/synthetic/lenet/{algorithm}/ci/p{workers}/s0/run.json").read_text()
        )
        expected = workers + (algorithm == "async_easgd")  # the master is one more task
        assert int(job["NumTasks"]) == expected and int(job["NumNodes"]) == 1, job
        assert run["world"]["size"] == expected, (algorithm, run["world"])
        assert run["world"]["ranks_per_node"] == expected and run["platform"] == "ci"

    # By hand, as the README says: the command from the job's Slurm log, under srun.
    # With a launcher that starts singletons the run fails instead of passing silently.
    # (the job's comment holds its wildcards: ..._sync_sgd_ci_2_{setting}_0, the setting empty here)
    log = next(Path(jobs[job_id]).read_text() for job_id in rules if re.search(r"sync_sgd_ci_2_+0$", rules[job_id]))
    command = re.search(r"^Shell command: (.*) > logs/.*$", log, re.M).group(1)
    assert command.startswith("SRUN_CPUS_PER_TASK=1 srun --mpi=pmi2 -n 2 python -m mpi4py -m scaledl train ")
    out_dir = workdir / "by_hand"
    singletons = command.replace("srun --mpi=pmi2", "srun --mpi=none").replace(
        "--out-dir results/test_slurm/runs/synthetic/lenet/sync_sgd/ci/p2/s0", f"--out-dir {out_dir}"
    )
    started = time.monotonic()
    broken = subprocess.run(
        ["bash", "-c", singletons],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )
    print(f"singleton launch by hand: {time.monotonic() - started:.0f} s")
    assert broken.returncode == 2, output_of(broken)
    assert "world of 1 rank(s), but 2 were requested" in output_of(broken)
    assert not (out_dir / "run.json").exists()


@pytest.mark.timeout(480)
def test_a_signalled_training_job_checkpoints_is_resubmitted_and_resumes(slurm_cluster):
    workflow = slurm_cluster.signalled
    result = workflow.finish()
    output, workdir, signalled = result.stdout, workflow.workdir, workflow.signalled
    assert signalled, "the training job never ran long enough to be signalled:\n" + output
    assert result.returncode == 0, output + logs_of(workdir)
    trains = {
        job: log for job, log in SUBMITTED.findall(output) if "rule_train" in scontrol_job(job).get("Comment", "")
    }
    assert signalled in trains and len(trains) == 2, output  # the signalled attempt, then its retry
    # the retry's job step knows its attempt and passes it on (a run refused with exit 2 would stop at once)
    (retry,) = set(trains) - {signalled}
    assert "Shell command: SCALEDL_ATTEMPT=2 SRUN_CPUS_PER_TASK=1 srun" in Path(trains[retry]).read_text()
    assert "SCALEDL_ATTEMPT" not in Path(trains[signalled]).read_text()
    run = read_run_json(workdir / RESUME_RUN / "run.json")
    steps = yaml.safe_load((REPO / RESUME_CONFIG).read_text())["train"]["max_steps"]
    assert run["stop"]["reason"] == "max_steps" and run["stop"]["steps"] == steps
    (resume,) = run["checkpoints"]["resumes"]
    assert 0 < resume["step"] < steps, resume
    metrics = pd.read_csv(workdir / RESUME_RUN / "metrics.csv")
    assert (
        metrics["step"].iloc[0] == 0 and metrics["step"].iloc[-1] == steps and metrics["step"].is_monotonic_increasing
    )
