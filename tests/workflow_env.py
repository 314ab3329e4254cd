"""The environment the tests run snakemake in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import warm_ranks

NO_SLURM = Path(__file__).parent / "no_slurm"


def snakemake_env(*, slurm: bool = False, warm: bool = True, **extra: str) -> dict[str, str]:
    """This interpreter's bin/ first on PATH, so the rules' `python` and `mpiexec` are this environment's.

    Without `slurm`, a stand-in `scontrol` that fails at once comes next: the tests that run no Slurm
    then never wait on a client whose controller is down; and, where `warm`, the rules' `python` starts
    from the session's warm server (warm_ranks.py: the same commands, without importing torch again).
    Jobs submitted to Slurm start fresh interpreters, as on a cluster.
    """
    shim, warm_env = ([warm_ranks.python_shim()], warm_ranks.launch_python()[1]) if warm and not slurm else ([], {})
    path = [*shim, str(Path(sys.executable).parent), *([] if slurm else [str(NO_SLURM)]), os.environ.get("PATH", "")]
    return {**os.environ, "PATH": os.pathsep.join(path), **warm_env, **extra}
