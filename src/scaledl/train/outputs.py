"""What a run leaves behind: metrics.csv, timeline.h5, model.pt and run.json, each written atomically.

run.json's shape and its writer are scaledl.run_record's (the record itself is filled by
scaledl.train.results); the other files' are here.

run.json is written last, so its presence means the run ended (its
`stop.reason` says how: a budget, the target, `diverged` or `interrupted`)
and the other files belong to it. While the run goes on, metrics.csv grows
by one row per evaluation (MetricsLog), so a crash leaves its progress so
far; at the end it is rewritten whole, atomically, with the same rows.
"""

from __future__ import annotations

import csv
import platform
import sys
from importlib.metadata import version
from pathlib import Path

import h5py
import mpi4py
import numpy
import torch

import scaledl
from scaledl.atomic import atomic_path
from scaledl.comm import transport
from scaledl.comm.timing import PHASES
from scaledl.comm.transport import MPI
from scaledl.run_record import RUN_JSON

METRICS_COLUMNS = (
    "step",
    "epoch",
    "wall_s",
    "train_s",
    "samples",
    "train_loss",
    "test_loss",
    "test_accuracy",
    *(f"{phase}_s" for phase in PHASES),
)


def write_metrics(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=METRICS_COLUMNS, extrasaction="raise")
        writer.writeheader()
        writer.writerows(rows)


class MetricsLog:
    """metrics.csv while the run goes on: the header, then each row appended and flushed as it comes.

    The out-of-date run.json of an earlier run in the same directory goes first:
    it must not vouch for files this run is now replacing.
    """

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / RUN_JSON).unlink(missing_ok=True)
        self._file = open(path, "w", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=METRICS_COLUMNS, extrasaction="raise")
        self._writer.writeheader()
        self._file.flush()

    def append(self, row: dict) -> None:
        self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def write_timeline(path: Path, timelines: list[dict], phases: tuple[str, ...]) -> None:
    """Every step of every rank: /rank{r}/step_end_s (seconds since start) and /rank{r}/phase_s (steps × phases)."""
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["phases"] = list(phases)
        f.attrs["description"] = "per-step seconds in each phase of each rank's main thread (scaledl.comm.timing)"
        for t in timelines:
            group = f.create_group(f"rank{t['rank']}")
            group.attrs["role"] = t["role"]
            group.create_dataset("step_end_s", data=t["step_end_s"])
            group.create_dataset("phase_s", data=t["phase_s"])


def save_tensors(path: Path, obj) -> None:
    """torch.save, atomically and byte-for-byte repeatable: written through a file object, the
    archive's inner folder is torch's fixed name instead of the random temporary file's stem."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def save_model(path: Path, state_dict: dict[str, torch.Tensor]) -> None:
    cpu_state = {name: t.detach().cpu().clone() for name, t in state_dict.items()}
    save_tensors(path, cpu_state)


def versions() -> dict[str, str]:
    return {
        "scaledl": scaledl.__version__,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torchvision": version("torchvision"),
        "mpi4py": mpi4py.__version__,
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0],
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "h5py": h5py.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
    }


def host() -> str:
    return transport.current().host_name()
