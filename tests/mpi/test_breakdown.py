"""Where the time goes: the phases cover the wall time, the timeline is complete,
messages are counted, and the Sync EASGD ladder changes the time, not the result."""

import h5py
import numpy as np
import pandas as pd
import pytest
import torch

from mpi_run import run_train
from scaledl.algorithms import tasks_for
from scaledl.comm.timing import PHASES
from scaledl.run_record import read_run_json

pytestmark = pytest.mark.mpi


def train(digits_h5, out, algorithm, *extra, workers=2, steps=40):
    result = run_train(
        tasks_for(algorithm, workers),
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            algorithm,
            "--out-dir",
            str(out),
            "--batch-size",  # a quarter of the default: the same phases, a quarter of the compute
            "16",
            "--max-steps",
            str(steps),
            "--eval-every",
            "20",
            *extra,
        ],
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return read_run_json(out / "run.json")


@pytest.mark.parametrize("algorithm", ["sync_easgd3", "easgd", "async_sgd"])
def test_phases_add_up_to_the_wall_time(digits_h5, tmp_path, algorithm):
    run = train(digits_h5, tmp_path / "run", algorithm)
    for rank in run["phases"]["per_rank"]:
        # Every rank's main timer is contiguous and stops at the end of its last phase, so its phases add up to
        # its wall time at any load (docs/time.md): an identity; the seconds between phases, charged to the
        # phase after them, are reported beside.
        accounted = sum(rank[f"{p}_s"] for p in PHASES)
        assert accounted == pytest.approx(rank["wall_s"], rel=1e-9, abs=1e-9), (rank["role"], rank)
        assert rank["unaccounted_s"] == pytest.approx(rank["wall_s"] - accounted)
        assert 0 <= rank["between_phases_max_s"] <= rank["between_phases_s"] < rank["wall_s"]
    workers = [r for r in run["phases"]["per_rank"] if "worker" in r["role"]]
    assert all(r["compute_s"] > 0 and r["comm_s"] + r["wait_s"] > 0 for r in workers)
    assert 0 < run["comm_share"] < 1
    metrics = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert [f"{p}_s" for p in PHASES] == [
        c for c in metrics.columns if c.endswith("_s") and c not in ("wall_s", "train_s")
    ]
    assert (metrics[[f"{p}_s" for p in PHASES]].diff().dropna() >= 0).all().all(), "cumulative columns never decrease"


def test_timeline_holds_every_step_of_every_rank(digits_h5, tmp_path):
    run = train(digits_h5, tmp_path / "run", "sync_easgd", steps=30)
    with h5py.File(tmp_path / "run" / "timeline.h5") as f:
        assert list(f.attrs["phases"]) == list(PHASES)
        assert sorted(f) == ["rank0", "rank1"]
        for rank in run["phases"]["per_rank"]:
            group = f[f"rank{rank['rank']}"]
            steps = group["phase_s"][:]
            assert steps.shape == (30, len(PHASES))
            assert np.all(np.diff(group["step_end_s"][:]) > 0)
            # The steps' seconds add up to the run's totals, less what happened before the first step.
            compute = steps[:, PHASES.index("compute")].sum()
            assert compute == pytest.approx(rank["compute_s"], rel=1e-3)


@pytest.mark.parametrize("algorithm, per_exchange", [("sync_sgd", 1), ("sync_easgd", 1), ("sync_easgd_rooted", 2)])
def test_per_layer_sends_one_message_per_tensor(digits_h5, tmp_path, algorithm, per_exchange):
    """Per exchange: one Allreduce (sync_sgd's gradients, Sync EASGD's allreduce round) or a Bcast and a
    Reduce (the rooted round) of the packed W, or of every tensor."""
    tensors = 8  # LeNet: two conv and two linear layers, weight and bias each
    algorithm, *extra = ("sync_easgd", "--exchange", "rooted") if algorithm.endswith("_rooted") else (algorithm,)
    packed = train(digits_h5, tmp_path / "packed", algorithm, *extra, "--message", "packed", steps=10)
    layered = train(digits_h5, tmp_path / "layered", algorithm, *extra, "--message", "per_layer", steps=10)
    for report in packed["algorithm_report"]:
        assert report["messages_per_exchange"] == per_exchange and report["exchanges"] == 10
    for report in layered["algorithm_report"]:
        assert report["messages_per_exchange"] == per_exchange * tensors
    assert packed["codesign"]["message"] == "packed" and layered["codesign"]["message"] == "per_layer"


def test_ladder_levels_give_bitwise_identical_models(digits_h5, tmp_path):
    """1, 2 and 3 change where W lives and when the exchange runs, never the arithmetic."""
    models = {}
    for level in ("sync_easgd", "sync_easgd1", "sync_easgd2", "sync_easgd3"):
        run = train(digits_h5, tmp_path / level, level, steps=25)
        models[level] = torch.load(tmp_path / level / "model.pt")
        assert run["codesign"]["overlap"] == (level == "sync_easgd3")
        assert run["codesign"]["center_on"] == ("host" if level == "sync_easgd1" else "device")
    reference = models.pop("sync_easgd")
    for level, state in models.items():
        assert all(torch.equal(reference[k], state[k]) for k in reference), level


def test_preset_contradiction_is_refused(digits_h5, tmp_path):
    result = run_train(
        2,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "sync_easgd1",
            "--center-on",
            "device",
            "--out-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "5",
        ],
    )
    assert result.returncode == 2 and "contradicts sync_easgd1" in result.stderr


def test_chip_partition_replicates_data_and_checks_memory(digits_h5, tmp_path):
    run = train(digits_h5, tmp_path / "run", "chip_partition", steps=10)
    assert run["codesign"]["data"] == "replicated"
    memory = run["replica_memory"]
    assert memory["replicas"] == 2 and memory["data_bytes"] == run["data"]["n_train"] * 28 * 28
    assert memory["needed_bytes"] == 2 * (memory["weights_bytes"] + memory["data_bytes"])
    refused = run_train(
        2,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "chip_partition",
            "--out-dir",
            str(tmp_path / "small"),
            "--max-steps",
            "5",
            "--fast-memory-gb",
            "0.001",
        ],
    )
    assert refused.returncode == 2 and "2 replicas need" in refused.stderr and "use fewer partitions" in refused.stderr
    assert not (tmp_path / "small").exists()
