"""Correctness fixes (window start-up, backend for a host center, the determinism flag, chip partitioning), checked without MPI worlds or GPUs.

- the center window holds W_0 before W_0 is broadcast (no worker can read its zeros);
- a center in host memory never gets NCCL (which refuses CPU tensors);
- run.json's `deterministic` holds only where the run's conditions make it so;
- chip_partition updates with the summed gradients, sync_sgd with their mean.
"""

from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import mpi4py
import pytest
import torch

mpi4py.rc.initialize = False  # the library loaded, no MPI world in pytest's process

from scaledl.algorithms import (
    ALGORITHMS,  # noqa: E402
    engine_class,  # noqa: E402
)
from scaledl.algorithms.settings import resolve  # noqa: E402
from scaledl.algorithms.sync_sgd import SyncSGD  # noqa: E402
from scaledl.comm.collectives import choose_backend  # noqa: E402
from scaledl.config import TrainConfig  # noqa: E402
from scaledl.errors import UserError  # noqa: E402
from scaledl.run_record import read_run_json

CPU, GPU = torch.device("cpu"), torch.device("cuda", 0)  # a device object needs no GPU


class Timer:
    def phase(self, name):
        return nullcontext()


# ---- 1. the window holds W_0 before any worker can read it


@pytest.mark.parametrize("key", ["async_easgd", "async_sgd", "hogwild_easgd", "hogwild_sgd"])
def test_master_writes_the_window_before_broadcasting_w0(key):
    calls = []
    algo = object.__new__(engine_class(key))  # WindowEngine.start: the same for every window algorithm
    algo.roles = SimpleNamespace(is_master=True, is_worker=False, master=0)
    algo.timer = Timer()
    algo.center = SimpleNamespace(data=torch.arange(4, dtype=torch.float32))
    algo.window = SimpleNamespace(write=lambda values: calls.append(("write", values.clone())))
    algo.world = SimpleNamespace(Bcast=lambda buf, root: calls.append(("bcast", torch.from_numpy(buf.copy()))))
    algo.start()
    assert [name for name, _ in calls] == ["write", "bcast"]
    assert torch.equal(calls[0][1], algo.center.data) and torch.equal(calls[1][1], algo.center.data)


# ---- 2. sync_easgd1 (center on the host) under a GPU per rank


@pytest.fixture
def gpu_node(monkeypatch):
    """Eight GPUs and NCCL, as far as choose_backend can tell."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)


def config(algorithm, **settings):
    return TrainConfig(
        data=Path("d.h5"), model="lenet", algorithm=algorithm, out_dir=Path("out"), max_steps=1, **settings
    )


def on_gpus(requested, host_buffers):
    """The setup's backend choice on a rank with a GPU of its own (scaledl.train.setup.build_local)."""
    return choose_backend(requested, GPU, gpu_per_rank=True, host_buffers=host_buffers)


def test_auto_picks_mpi_for_host_buffers_even_with_a_gpu_per_rank(gpu_node):
    assert choose_backend("auto", GPU, gpu_per_rank=True, host_buffers=True) == "mpi"
    assert choose_backend("auto", GPU, gpu_per_rank=True) == "nccl"  # device buffers: unchanged


def test_forced_nccl_with_a_host_center_is_refused_naming_the_alternative():
    with pytest.raises(UserError, match="host memory") as error:
        choose_backend("nccl", GPU, gpu_per_rank=True, host_buffers=True)
    message = str(error.value)
    assert "use --backend mpi or auto" in message and "\n" not in message
    assert choose_backend("mpi", GPU, gpu_per_rank=True, host_buffers=True) == "mpi"


@pytest.mark.parametrize(
    "algorithm, settings, backend",
    [
        ("sync_easgd1", {}, "mpi"),  # the paper's CPU master: MPI on host buffers
        ("sync_easgd", {"center_on": "host"}, "mpi"),
        ("sync_easgd2", {}, "nccl"),  # weights on the devices: NCCL as before
        ("sync_easgd3", {}, "nccl"),
        ("sync_sgd", {}, "nccl"),
    ],
)
def test_the_settings_keep_host_centers_off_nccl(gpu_node, algorithm, settings, backend):
    resolved = resolve(config(algorithm, **settings), ALGORITHMS[algorithm], workers=8, choose_backend=on_gpus)
    assert resolved.backend == backend


def test_the_settings_refuse_nccl_for_sync_easgd1(gpu_node):
    with pytest.raises(UserError, match="--backend nccl takes device tensors only"):
        resolve(config("sync_easgd1", backend="nccl"), ALGORITHMS["sync_easgd1"], workers=8, choose_backend=on_gpus)


# ---- 3. run.json's deterministic flag


@pytest.mark.parametrize(
    "key, devices, backend, kernels, expected, named",
    [
        ("sync_easgd", ["cpu", "cpu"], "mpi", False, True, "CPU kernels"),
        ("easgd", ["cpu", "cpu", "cpu"], "mpi", False, True, "fixed order"),
        ("sync_sgd", ["cuda:0", "cuda:1"], "cuda_aware_mpi", True, True, "deterministic kernels enforced"),
        ("sync_easgd", ["cuda:0", "cuda:1"], "mpi", False, False, "use_deterministic_algorithms"),
        ("sync_sgd", ["cuda:0", "cuda:1"], "nccl", True, False, "backend nccl"),
        ("sync_sgd", ["cpu", "cpu"], "gloo", False, False, "backend gloo"),
        ("easgd", ["cpu", "cuda:0", "cuda:1"], "mpi", False, False, "CUDA devices"),  # CPU master, GPU workers
        ("async_easgd", ["cpu", "cpu", "cpu"], "mpi", False, False, "arrival order"),
        ("hogwild_sgd", ["cpu", "cpu", "cpu"], "mpi", True, False, "arrival order"),
    ],
)
def test_deterministic_only_where_the_run_makes_it_so(key, devices, backend, kernels, expected, named):
    deterministic, reason = ALGORITHMS[key].deterministic_in(devices, backend, kernels)
    assert deterministic is expected
    assert named in reason


# ---- 4. chip_partition sums the gradients, sync_sgd averages them


def step_of(key, workers=4, lr=0.5):
    """One worker_step of sync_sgd's code as `key`, with a fake allreduce of `workers` equal gradients."""
    algo = object.__new__(SyncSGD)
    algo.info = ALGORITHMS[key]
    algo.settings = resolve(config(key, lr=lr), algo.info, workers=workers)
    algo.combine = algo.settings.gradients
    algo.workers, algo.exchanges, algo.timer = workers, 0, Timer()
    data, grad = torch.zeros(3), torch.tensor([1.0, 2.0, -4.0])
    algo.params = SimpleNamespace(data=data, grad=grad, pairs=lambda: [(data, grad)])  # FlatParams' flat pair
    algo.coll = SimpleNamespace(allreduce_sum_=lambda t: t.mul_(workers))  # Σ_j ΔW^j, ΔW^j all equal
    algo.buckets = None  # one packed message (the buckets' own sums: tests/mpi/check_collectives.py)
    algo.worker_step()
    return algo.params.data


def test_chip_partition_updates_with_the_sum_and_sync_sgd_with_the_mean():
    grad = torch.tensor([1.0, 2.0, -4.0])
    assert torch.equal(step_of("chip_partition"), -0.5 * 4 * grad)  # W − η·Σ_j ΔW^j
    assert torch.equal(step_of("sync_sgd"), -0.5 * grad)  # W − η·(1/P)·Σ_j ΔW^j
    # η_sum = η_mean / P gives sync_sgd's step
    assert torch.equal(step_of("chip_partition", lr=0.5 / 4), step_of("sync_sgd", lr=0.5))


def test_chip_partition_preset_says_sum_and_is_recorded():
    assert ALGORITHMS["chip_partition"].preset["gradients"] == "sum"
    assert "gradients" not in ALGORITHMS["sync_sgd"].preset


# ---- run.json records the run's own determinism and the preset (one short 2-worker run each)


@pytest.mark.mpi
@pytest.mark.parametrize(
    "algorithm, backend, deterministic",
    [
        ("chip_partition", "mpi", True),
        ("async_sgd", "mpi", False),
    ],
)
def test_run_json_records_determinism_with_its_reason(digits_h5, tmp_path, algorithm, backend, deterministic):

    from mpi_run import run_train
    from scaledl.algorithms import tasks_for

    out = tmp_path / "run"
    result = run_train(
        tasks_for(algorithm, 2),
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            algorithm,
            "--out-dir",
            str(out),
            "--max-steps",
            "4",
            "--eval-every",
            "4",
        ],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    record = read_run_json(out / "run.json")
    assert record["codesign"]["backend"] == backend
    assert record["algorithm"]["deterministic"] is deterministic
    assert record["algorithm"]["deterministic_reason"]
    assert record["algorithm"]["preset"] == dict(ALGORITHMS[algorithm].preset)


def test_an_overlap_this_mpi_cannot_thread_is_refused_before_any_window(monkeypatch):
    """Both overlapping engines ask before they open a window or duplicate a communicator: nothing to free."""
    from mpi4py import MPI

    from scaledl.algorithms.averaging import PeriodicAveraging
    from scaledl.errors import UserError

    algo = object.__new__(PeriodicAveraging)
    algo.info = ALGORITHMS["sync_easgd3"]
    monkeypatch.setattr(MPI, "Query_thread", lambda: MPI.THREAD_SINGLE)
    with pytest.raises(UserError, match="sync_easgd3 overlaps its exchange on a helper thread.*--no-overlap"):
        algo.require_helper_thread()
    monkeypatch.setattr(MPI, "Query_thread", lambda: MPI.THREAD_MULTIPLE)
    algo.require_helper_thread()  # allowed: returns
