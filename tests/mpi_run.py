"""Launch MPI programs from tests as subprocesses, with a timeout so a hang fails the test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MPIEXEC = Path(sys.executable).with_name("mpiexec")


def mpi_env(ranks: int) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PATH"] = f"{MPIEXEC.parent}{os.pathsep}{env.get('PATH', '')}"
    if ranks > (os.cpu_count() or 1):
        # MPICH ranks busy-poll; oversubscribed, they stall each other for seconds without this.
        env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
    return env


def run_mpi(
    ranks: int, args: list[str], timeout: float = 180, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`mpiexec -n ranks python -m mpi4py ARGS` (with `env` added to the environment); raises on timeout (a hang)."""
    cmd = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env={**mpi_env(ranks), **(env or {})}, cwd=cwd
    )


def run_train(
    ranks: int, train_args: list[str], timeout: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return run_mpi(ranks, ["-m", "scaledl", "train", *train_args], timeout=timeout, env=env)
