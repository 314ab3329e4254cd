"""Starting MPI jobs: the prefix of an MPI rule's command, and the jobs that tests and benchmarks start from Python.

The prefix (launcher, memory binding, container, retry) is what the workflow's rules start their ranks with;
`run` and `Job` are how Python code starts `mpiexec -n P python -m mpi4py ...` and waits for, reads,
signals or kills it. No torch, no MPI, no Snakemake.

The train, train_single and netbench rules write `{params.launcher}python -m
mpi4py -m scaledl ...`; workflow/rules/common.smk computes that prefix here from
the job's resources, its platform and how Snakemake runs. A param computed from
resources is no rerun trigger, so none of this reruns a finished job.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ATTEMPT_VARIABLE = "SCALEDL_ATTEMPT"  # read by `scaledl train` (scaledl.train.refusal)


def launcher(
    mpi: str,
    tasks: int,
    cpus_per_task: int,
    *,
    oversubscribed: bool = False,
    attempt: int = 1,
    numactl: str | None = None,
    image: str = "",
) -> str:
    """The prefix that starts a command as an MPI job of `tasks` ranks.

    `mpi` is the launcher (the rule's `mpi` resource: mpiexec, or the profile's
    `srun --mpi=...`); empty, there is none, and MPI starts the command as a
    singleton (a one-rank run: the Slurm plugin refuses an MPI job of one task).
    SRUN_CPUS_PER_TASK gives each rank its cores under srun (srun no longer
    inherits --cpus-per-task, and the plugin's job step drops SLURM_* variables);
    other launchers ignore it. `oversubscribed` (a local job of more ranks than
    cores) sets MPICH's yield mode, so that waiting ranks give their core to the
    ones computing.

    `attempt` > 1 (a retry of the job) is passed on as SCALEDL_ATTEMPT, so that a
    run whose earlier attempt was refused with a setting to fix stops at once.
    `numactl` (the platform's options, e.g. --preferred=1 for a KNL's MCDRAM in
    flat mode) prefixes each rank's command. `image` (`apptainer exec ...
    IMAGE`, under --sdm apptainer) runs each rank in the image: srun starts the
    ranks on the host, each in the container (the hybrid model: srun is not in
    the image); any other launcher runs inside the image, with the image's MPI.
    """
    env = f"{ATTEMPT_VARIABLE}={attempt} " if attempt > 1 else ""
    rank = f"{image} " if image else ""
    rank += f"numactl {numactl} " if numactl else ""
    if not mpi:
        return f"{env}{rank}"
    # More ranks than cores: MPICH's busy-polling ranks would take the cores from the ones computing.
    env += "MPIR_CVAR_ENABLE_HEAVY_YIELD=1 " if oversubscribed else ""
    env += f"SRUN_CPUS_PER_TASK={cpus_per_task} "
    if image and not shlex.split(mpi)[0].endswith("srun"):
        return f"{env}{image} {mpi} -n {tasks} {rank.removeprefix(image + ' ')}"
    return f"{env}{mpi} -n {tasks} {rank}"


def container_exec(image: str, *, home: str, gpus: bool, args: str = "") -> str:
    """`apptainer exec` of `image` as Snakemake runs a rule's command in it (its home the working
    directory, the user's --apptainer-args), with --nv for ranks that use GPUs."""
    flags = " ".join(part for part in ("--nv" if gpus else "", args.strip()) if part)
    return f"apptainer exec --home {shlex.quote(home)} {flags + ' ' if flags else ''}{shlex.quote(image)}"


# ---- starting MPI jobs from Python: tests and bench ------------------------------------------------------------
#
# The workflow's rules start their jobs through the prefix above; tests and the benchmarks start theirs from Python
# through what follows, so that the command line, the environment an oversubscribed job needs and the handling of
# a job that must be read, signalled or killed while it runs are written once.

YIELD_VARIABLE = "MPIR_CVAR_ENABLE_HEAVY_YIELD"  # MPICH's ranks busy-poll; this makes waiting ranks yield


def mpiexec() -> str:
    """The mpiexec beside this interpreter (a venv with the `mpich` extra), else the one on PATH."""
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else (shutil.which("mpiexec") or "mpiexec")


def mpi_flavor(version_text: str) -> str:
    """ "openmpi", "mpich" (MPICH's hydra and the MPIs built on it) or "unknown", from `mpiexec --version`."""
    text = version_text.lower()
    if any(name in text for name in ("open mpi", "openrte", "open-mpi", "prrte", "prterun")):  # 5.x: PRRTE
        return "openmpi"
    if "hydra" in text or "mpich" in text or "intel(r) mpi" in text:
        return "mpich"
    return "unknown"


def job_env(ranks: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment for a job of `ranks` ranks: one torch thread a rank, unbuffered output, this interpreter's
    bin/ first on PATH, and MPICH's yield mode when the ranks outnumber the cores; then `extra`."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if ranks > (os.cpu_count() or 1):
        env[YIELD_VARIABLE] = "1"
    return {**env, **(extra or {})}


def job_argv(ranks: int, argv: Sequence[str], python: Sequence[str] = (), flags: Sequence[str] = ()) -> list[str]:
    """`mpiexec FLAGS -n RANKS PYTHON -m mpi4py ARGV`: `-m mpi4py` turns an exception on one rank into the job's
    end. `python` is the interpreter's command (this one by default); `flags` mpiexec's own (binding, say)."""
    return [mpiexec(), *flags, "-n", str(ranks), *(python or [sys.executable]), "-m", "mpi4py", *argv]


def run(
    ranks: int,
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    python: Sequence[str] = (),
    flags: Sequence[str] = (),
) -> subprocess.CompletedProcess:
    """Run `python -m mpi4py ARGV` on `ranks` ranks to its end, its output captured; a job still running after
    `timeout` seconds is killed, its whole process group, and raises subprocess.TimeoutExpired (a hang)."""
    job = Job(ranks, argv, env=env, cwd=cwd, python=python, flags=flags)
    try:
        status = job.finish(timeout)
    except JobTimeout:
        raise subprocess.TimeoutExpired(job.argv, timeout, "".join(job.stdout), "".join(job.stderr)) from None
    return subprocess.CompletedProcess(job.argv, status, "".join(job.stdout), "".join(job.stderr))


class JobTimeout(AssertionError):
    """A job that did not end, or never printed what was waited for, within its bound (raised after the kill)."""


class Job:
    """An MPI job in its own process group, as a terminal runs it, its output read line by line as it comes.

    `wait_for` a line, `signal` the group (what a terminal's Ctrl-C does), `finish` within a bound; a job that
    overruns a bound is killed, the whole group, before JobTimeout names what it printed last.
    """

    def __init__(
        self,
        ranks: int,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        python: Sequence[str] = (),
        flags: Sequence[str] = (),
    ):
        self.argv = job_argv(ranks, argv, python, flags)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=job_env(ranks, env),
            cwd=cwd,
            start_new_session=True,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=lines.extend, args=(iter(stream.readline, ""),), daemon=True)
            for stream, lines in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))
        ]
        for reader in self._readers:
            reader.start()

    @property
    def output(self) -> str:
        return "".join(self.stdout + self.stderr)

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match:
        """The first line of stdout or stderr that matches `pattern`, once it is printed."""
        deadline = time.monotonic() + timeout
        while True:
            for line in list(self.stdout) + list(self.stderr):
                if found := re.search(pattern, line):
                    return found
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.kill()
        raise JobTimeout(f"never saw {pattern!r}:\n{self.tail()}")

    def signal(self, signum: int) -> None:
        """Signal the job's whole process group: mpiexec and every rank it started here."""
        os.killpg(self.proc.pid, signum)

    def finish(self, timeout: float) -> int:
        """The job's exit status, once it has ended and its last lines are read."""
        try:
            status = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise JobTimeout(f"the job did not end within {timeout:g} s:\n{self.tail()}") from None
        for reader in self._readers:
            reader.join(timeout=10)
        return status

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=10)

    def tail(self, lines: int = 40) -> str:
        return "".join(self.stdout[-lines:] + self.stderr[-lines:])
