"""Synchronous algorithms and round-robin EASGD are bitwise repeatable for a given seed and world size."""

import json

import pytest
import torch

from mpi_run import run_train
from scaledl.algorithms import tasks_for

pytestmark = pytest.mark.mpi


def train_once(digits_h5, out, algorithm, seed, workers=2, extra=()):
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
            "--max-steps",
            "30",
            "--eval-every",
            "10",
            "--seed",
            str(seed),
            *extra,
        ],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return torch.load(out / "model.pt")


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("algorithm", ["sync_easgd", "sync_sgd", "easgd"])
def test_same_seed_bitwise_identical_model(digits_h5, tmp_path, algorithm):
    first = train_once(digits_h5, tmp_path / "a", algorithm, seed=7)
    second = train_once(digits_h5, tmp_path / "b", algorithm, seed=7)
    assert same(first, second), f"{algorithm}: two runs with one seed differ"
    other = train_once(digits_h5, tmp_path / "c", algorithm, seed=8)
    assert not same(first, other), "a different seed must change the result (else the check proves nothing)"


@pytest.mark.parametrize(
    "algorithm, extra",
    [
        ("sync_sgd", ["--message", "per_layer"]),
        ("sync_easgd3", []),  # the exchange on the helper thread
    ],
)
def test_gloo_backend_equals_mpi_bit_for_bit(digits_h5, tmp_path, algorithm, extra):
    """torch.distributed's code path (NCCL's on a GPU; Gloo here) against MPI's on the same run.

    With two workers a sum has one rounding (a + b = b + a), so the backends
    must agree bit for bit; any mistake in the torch.distributed path (a wrong
    root, a stale scratch buffer, a missed piece) shows up as a difference.
    """
    by_mpi = train_once(digits_h5, tmp_path / "mpi", algorithm, seed=3, extra=["--backend", "mpi", *extra])
    by_gloo = train_once(digits_h5, tmp_path / "gloo", algorithm, seed=3, extra=["--backend", "gloo", *extra])
    assert same(by_mpi, by_gloo), f"{algorithm}: gloo and mpi backends disagree"
    run = json.loads((tmp_path / "gloo" / "run.json").read_text())
    assert run["codesign"]["backend"] == "gloo"
    layers = len(by_gloo) if "per_layer" in extra else 1  # LeNet's parameter tensors (no buffers)
    per_exchange = {"sync_sgd": 1, "sync_easgd3": 2}[algorithm] * layers
    assert {r["messages_per_exchange"] for r in run["algorithm_report"]} == {per_exchange}
