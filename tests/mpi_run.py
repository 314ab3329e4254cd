"""Launch MPI programs from tests through the project's launcher (scaledl.grid.launch), with a timeout so a hang
fails the test.

`warm=True` (the default) starts the ranks from the session's warm server (warm_ranks.py): the same `mpiexec`
and the same program, without each rank importing torch again. Tests of processes themselves (signals, killed
or hung ranks, start-up refusals, an interpreter's fresh import) pass `warm=False` or use `launch.Job`.
"""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import warm_ranks
from scaledl.grid import launch

MPIEXEC = Path(launch.mpiexec())


def mpi_env(ranks: int) -> dict[str, str]:
    return launch.job_env(ranks)


def run_mpi(
    ranks: int,
    args: list[str],
    timeout: float = 180,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    *,
    warm: bool = True,
) -> subprocess.CompletedProcess:
    """`mpiexec -n ranks python -m mpi4py ARGS` (with `env` added to the environment); raises on timeout (a hang)."""
    python, extra = warm_ranks.launch_python() if warm else ((), {})
    return launch.run(ranks, args, timeout=timeout, cwd=cwd, env={**extra, **(env or {})}, python=python)


def run_train(
    ranks: int, train_args: list[str], timeout: float = 240, env: dict[str, str] | None = None, *, warm: bool = True
) -> subprocess.CompletedProcess:
    return run_mpi(ranks, ["-m", "scaledl", "train", *train_args], timeout=timeout, env=env, warm=warm)


def run_python(
    argv: list[str],
    timeout: float = 240,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    *,
    warm: bool = True,
    preload: str = "package",
) -> subprocess.CompletedProcess:
    """`python ARGV` (`-c code`, `-m module ...` or a script) as its own process, from the warm server where `warm`
    (the one that imported `preload`: warm_ranks.PRELOAD)."""
    python, extra = warm_ranks.launch_python(preload) if warm else ((), {})
    return subprocess.run(
        [*(python or [sys.executable]), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**launch.job_env(1), **extra, **(env or {})},
    )


@contextmanager
def torch_threads(threads: int):
    """This process's torch threads set to `threads` inside the block: a test that compares its own computation
    with a rank's (run with `--threads`) sums in the same order at any OMP_NUM_THREADS and on any machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
