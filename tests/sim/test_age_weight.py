"""--age-weight on the simulated cluster, whose asynchrony is seeded: the neutral value is the paper's method bit for
bit, and weighing stale updates changes the numerics."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from mpi_run import run_python
from scaledl.run_record import read_run_json
from scaledl.sim.loader import available

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

TRAIN = ["--model", "lenet", "--batch-size", "16", "--eval-every", "10", "--lr", "0.05", "--max-steps", "12"]


def simulate_pair(digits_h5, tmp_path, algorithm: str, ranks: int, platform: str) -> dict[str, dict]:
    """The same run unweighted and age-weighted (inverse), side by side: each one's weights and staleness."""

    def run(weighting: str):
        out = tmp_path / f"{algorithm}-{weighting}"
        proc = run_python(
            ["-m", "scaledl", "simulate", "--platform-file", platform, "--ranks", str(ranks), "--data", str(digits_h5),
             "--out-dir", str(out), "--algorithm", algorithm, "--age-weight", weighting, *TRAIN],
            timeout=240,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        record = read_run_json(out / "run.json")
        return {"weights": torch.load(out / "model.pt"), "staleness": record["staleness"], "hyper": record["hyper"]}

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(("none", "inverse"), pool.map(run, ("none", "inverse"))))


@pytest.mark.parametrize("algorithm", ["async_sgd", "async_easgd"])
def test_one_worker_is_never_stale_so_its_age_weighted_run_is_the_unweighted_one_bit_for_bit(
    digits_h5, tmp_path, algorithm
):
    runs = simulate_pair(digits_h5, tmp_path, algorithm, ranks=2, platform="laptop")
    assert runs["none"]["staleness"]["max"] == runs["inverse"]["staleness"]["max"] == 0
    assert runs["inverse"]["hyper"]["age_weight"] == "inverse" and runs["none"]["hyper"]["age_weight"] == "none"
    for name, tensor in runs["none"]["weights"].items():
        assert torch.equal(tensor, runs["inverse"]["weights"][name]), name


def test_weighing_stale_updates_changes_the_numerics(digits_h5, tmp_path):
    runs = simulate_pair(digits_h5, tmp_path, "async_sgd", ranks=5, platform="k80x8")
    assert runs["inverse"]["staleness"]["max"] > 0  # some updates were stale, so some were weighed down
    differ = [n for n, t in runs["none"]["weights"].items() if not torch.equal(t, runs["inverse"]["weights"][n])]
    assert differ
