"""The environment the tests run snakemake in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

NO_SLURM = Path(__file__).parent / "no_slurm"


def snakemake_env(*, slurm: bool = False, **extra: str) -> dict[str, str]:
    """This interpreter's bin/ first on PATH, so the rules' `python` and `mpiexec` are this environment's.

    Without `slurm`, a stand-in `scontrol` that fails at once comes next: the tests that run no Slurm
    then never wait on a client whose controller is down.
    """
    path = [str(Path(sys.executable).parent), *([] if slurm else [str(NO_SLURM)]), os.environ.get("PATH", "")]
    return {**os.environ, "PATH": os.pathsep.join(path), **extra}
