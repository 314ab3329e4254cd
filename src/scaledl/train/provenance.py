"""Where and with what a run ran, for run.json: the code, the batch job, the hardware, the libraries.

Everything here is read, never assumed: a field that cannot be known on this
machine (no git checkout, not under Slurm, no GPU) is None with the reason
beside it, so a reader can tell "absent" from "not recorded". Collected once,
by the rank that writes run.json; the per-rank hostnames are in
`phases.per_rank[*].host` and `world.hosts`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import torch

from scaledl.codehash import code_version, source_sha256  # noqa: F401 (re-exported: run records, checkpoints)
from scaledl.comm.transport import MPI
from scaledl.net.measure import cpu_model

PACKAGE_DIR = Path(__file__).resolve().parent.parent
# What Slurm says about the job, by the name it has in run.json.
SLURM_VARIABLES = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "step_id": "SLURM_STEP_ID",
    "job_name": "SLURM_JOB_NAME",
    "partition": "SLURM_JOB_PARTITION",
    "nodelist": "SLURM_JOB_NODELIST",
    "nodes": "SLURM_JOB_NUM_NODES",
    "ntasks": "SLURM_NTASKS",
    "cpus_per_task": "SLURM_CPUS_PER_TASK",
    "account": "SLURM_JOB_ACCOUNT",
    "cluster": "SLURM_CLUSTER_NAME",
}


def collect(device: torch.device) -> dict:
    """The provenance block of run.json for a run whose workers compute on `device`'s kind."""
    return {"code": code_state(), "slurm": slurm_job(), "hardware": hardware(device), "libraries": libraries()}


def _stdout(*cmd: str) -> str | None:
    """stdout of a command, None where the program is missing, fails or hangs."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _git(*args: str) -> str | None:
    """stdout of `git -C <this package's checkout> ARGS`, None where git or the checkout is missing."""
    return _stdout("git", "-C", str(PACKAGE_DIR), *args)


def code_state() -> dict:
    """The code's `code_version`, the commit of the checkout scaledl runs from, whether it has uncommitted
    changes, and a hash of those changes (two runs with equal hashes ran the same edits); None fields with a
    reason for an installed copy."""
    version = code_version()
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {
            "version": version,
            "commit": None,
            "dirty": None,
            "diff_sha256": None,
            "reason": "not run from a git checkout",
        }
    status = _git("status", "--porcelain", "--untracked-files=no") or ""
    diff = _git("diff", "HEAD", "--binary") or ""
    return {
        "version": version,
        "commit": commit.strip(),
        "dirty": bool(status.strip()),
        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest() if diff else None,
    }


def slurm_job() -> dict | None:
    """The job's Slurm identity from its environment; None outside a Slurm allocation."""
    if "SLURM_JOB_ID" not in os.environ:
        return None
    return {name: os.environ.get(variable) for name, variable in SLURM_VARIABLES.items()}


def gpu_driver() -> str | None:
    """The NVIDIA driver version from nvidia-smi, where it is on PATH."""
    lines = (_stdout("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader") or "").strip().splitlines()
    return lines[0].strip() if lines else None


def hardware(device: torch.device) -> dict:
    gpus = None
    if device.type == "cuda" and torch.cuda.is_available():
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "gpus": gpus,
        "gpu_driver": gpu_driver() if gpus else None,
    }


def libraries() -> dict:
    """The accelerator and MPI libraries this run linked: CUDA, cuDNN and NCCL as torch was built with them,
    the MPI library's vendor and version as mpi4py sees them."""
    cuda = torch.version.cuda
    nccl = None
    if cuda and torch.cuda.is_available():
        try:
            nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError):
            nccl = None
    vendor, vendor_version = MPI.get_vendor()
    return {
        "cuda": cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "nccl": nccl,
        "mpi_vendor": vendor,
        "mpi_vendor_version": ".".join(str(part) for part in vendor_version),
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
    }
