"""The real-Slurm tests' cluster and their two workflows, started in the background as soon as pytest has
collected those tests (tests/conftest.py), so the minute they spend waiting on Slurm overlaps the rest of the
suite; tests/workflow/test_slurm.py checks what they did once its turn comes.

The cluster is .ci/slurm_up.sh's one node (root and apt; where it cannot be installed the tests skip, saying
why), stopped by .ci/slurm_down.sh when the session ends. Both workflows run tests/snakemake_steady_polling.py:
Snakemake with the Slurm plugin's status checks at a steady 2 s.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from dry_runs import copy_workflow

REPO = Path(__file__).resolve().parents[1]
STEADY_POLLING = REPO / "tests/snakemake_steady_polling.py"
CONFIG = "config/test_slurm.yaml"
RESUME_CONFIG = "config/test_slurm_resume.yaml"
RESUME_RUN = "results/test_slurm_resume/runs/synthetic/lenet/sync_sgd/ci/p2/s0"
RESUME_LOG = "logs/test_slurm_resume/runs/synthetic/lenet/sync_sgd/ci/p2/s0.log"
# What a cluster without slurmdbd needs (notes: snakemake-slurm-mpi-hdf5.md §3.3)
CI_OVERRIDES = [
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--seconds-between-status-checks",  # a finished job is seen within 2 s (steadily: snakemake_steady_polling.py)
    "2",
    "--slurm-keep-successful-logs",
    "--latency-wait",
    "5",
]
LIMIT_S = 300  # what a workflow may take


def running_train_job(config_name: str) -> str | None:
    """The Slurm job id of config `config_name`'s running training job, if there is one."""
    listing = subprocess.run(["squeue", "-h", "-t", "R", "-o", "%i %k"], capture_output=True, text=True).stdout
    return next(
        (
            job
            for job, comment in (line.split(maxsplit=1) for line in listing.splitlines() if " " in line)
            if comment.startswith("rule_train") and f"_{config_name}_runs_" in comment
        ),
        None,
    )


class Workflow:
    """`snakemake --profile slurm --configfile CONFIG TARGETS` in a copy of the workflow, running; `finish()` waits
    for it."""

    def __init__(self, workdir: Path, config: str, targets: tuple[str, ...] = ()):
        self.workdir = copy_workflow(workdir)
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "OMP_NUM_THREADS": "1",
            "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",
        }
        self._output = (workdir.parent / f"{workdir.name}.out").open("w+")  # a file: a pipe left unread fills up
        command = [sys.executable, str(STEADY_POLLING), "--profile", "slurm", "--configfile", config, *CI_OVERRIDES]
        command += targets  # after the options: --configfile takes every word up to the next option
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            command, cwd=self.workdir, env=env, stdout=self._output, stderr=subprocess.STDOUT, text=True
        )

    def finish(self) -> subprocess.CompletedProcess:
        try:
            self.process.wait(timeout=max(self.started + LIMIT_S - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._output.seek(0)
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, self._output.read(), "")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()


class SignalledWorkflow(Workflow):
    """The preemption workflow, and a thread that signals its training job once that has logged a step, as
    Slurm does warn_before_limit_s before a time limit (SIGUSR1 to every task of the job's steps)."""

    def __init__(self, workdir: Path):
        super().__init__(workdir, RESUME_CONFIG, (f"{RESUME_RUN}/run.json",))
        self.signalled: str | None = None
        self._signaller = threading.Thread(target=self._signal_when_running, daemon=True)
        self._signaller.start()

    def _signal_when_running(self) -> None:
        while time.monotonic() < self.started + LIMIT_S and self.process.poll() is None:
            log = self.workdir / RESUME_LOG
            job = running_train_job("test_slurm_resume")
            if job and log.exists() and re.search(r"^step\s+[1-9]\d*/", log.read_text(), re.M):
                subprocess.run(["scancel", "--signal=USR1", job], check=True, timeout=30)
                self.signalled = job
                return
            time.sleep(0.5)

    def finish(self) -> subprocess.CompletedProcess:
        result = super().finish()
        self._signaller.join(timeout=30)
        return result


class SlurmSession:
    """The cluster, brought up on a thread of its own, then the two workflows (the one-node cluster runs both
    at once: their jobs ask for 3 of the node's 8 CPUs at most)."""

    def __init__(self):
        # not under pytest's private tmp: munged wants every folder above its socket world-searchable
        self.prefix = Path(tempfile.mkdtemp(prefix="scaledl-slurm-"))
        self.prefix.chmod(0o755)
        self.skip_reason: str | None = None
        self.failure: str | None = None
        self.work = Path(tempfile.mkdtemp(prefix="scaledl-slurm-work-"))
        self.profile: Workflow | None = None
        self.signalled: SignalledWorkflow | None = None
        self._up = threading.Thread(target=self._bring_up, daemon=True)
        self._up.start()

    def _bring_up(self) -> None:
        if os.name != "posix" or os.geteuid() != 0:
            self.skip_reason = "real-Slurm test needs root: it installs Slurm with apt and writes /etc/slurm/slurm.conf"
            return
        script = str(REPO / ".ci/slurm_up.sh")
        up = subprocess.run(["bash", script, str(self.prefix)], capture_output=True, text=True, timeout=600)
        if up.returncode == 3:
            self.skip_reason = up.stderr.strip().splitlines()[-1]
        elif up.returncode != 0:
            self.failure = f"Slurm did not start:\n{up.stdout}\n{up.stderr}"
        else:
            self.signalled = SignalledWorkflow(self.work / "resume")
            self.profile = Workflow(self.work / "profile", CONFIG)

    def ready(self) -> None:
        """Wait until the cluster is up and the workflows started."""
        self._up.join(timeout=660)

    def stop(self) -> None:
        self._up.join(timeout=660)
        for workflow in (self.profile, self.signalled):
            if workflow is not None:
                workflow.kill()
        subprocess.run(["bash", str(REPO / ".ci/slurm_down.sh"), str(self.prefix)], capture_output=True, timeout=120)
        shutil.rmtree(self.prefix, ignore_errors=True)
        shutil.rmtree(self.work, ignore_errors=True)


_session: SlurmSession | None = None


def start() -> SlurmSession:
    """The session's cluster and workflows, started on first call."""
    global _session
    if _session is None:
        _session = SlurmSession()
    return _session


def stop() -> None:
    if _session is not None:
        _session.stop()
