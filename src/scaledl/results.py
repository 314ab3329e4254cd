"""What a run leaves behind: metrics.csv, run.json and model.pt, each written atomically.

run.json is written last, so its presence means the run finished and the
other two files belong to it.
"""

from __future__ import annotations

import csv
import json
import platform
import socket
import sys
from pathlib import Path

import torch

from scaledl.atomic import atomic_path, write_text

METRICS_COLUMNS = (
    "step", "epoch", "wall_s", "train_s", "samples", "train_loss", "test_loss", "test_accuracy",
    "data_s", "h2d_s", "compute_s", "comm_s", "update_s", "center_update_s", "eval_s", "wait_s",
)


def write_metrics(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRICS_COLUMNS, extrasaction="raise")
        writer.writeheader()
        writer.writerows(rows)


def save_model(path: Path, state_dict: dict[str, torch.Tensor]) -> None:
    cpu_state = {name: t.detach().cpu().clone() for name, t in state_dict.items()}
    with atomic_path(path) as tmp:
        torch.save(cpu_state, tmp)


def write_run_json(path: Path, record: dict) -> None:
    write_text(path, json.dumps(record, indent=2, sort_keys=False) + "\n")


def versions() -> dict[str, str]:
    from importlib.metadata import version

    import h5py
    import mpi4py
    import numpy
    from mpi4py import MPI

    import scaledl

    return {
        "scaledl": scaledl.__version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torchvision": version("torchvision"),
        "mpi4py": mpi4py.__version__,
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_standard": "%d.%d" % MPI.Get_version(),
        "h5py": h5py.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }


def host() -> str:
    return socket.gethostname()
