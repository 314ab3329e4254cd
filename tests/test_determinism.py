"""Synchronous algorithms and round-robin EASGD are bitwise repeatable for a given seed and world size."""

import pytest
import torch

from mpi_run import run_train
from scaledl.algorithms import tasks_for

pytestmark = pytest.mark.mpi


def train_once(digits_h5, out, algorithm, seed, workers=2):
    result = run_train(tasks_for(algorithm, workers), [
        "--data", str(digits_h5), "--model", "lenet", "--algorithm", algorithm, "--out-dir", str(out),
        "--max-steps", "30", "--eval-every", "10", "--seed", str(seed),
    ])
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
