"""The periodic-averaging engine: Sync EASGD, local SGD, DiLoCo and SlowMo as settings of one round.

Reductions: the engine with Sync EASGD's settings is sync_easgd bit for bit (and sync_easgd's own
determinism, parity and gloo tests run through it); local_sgd equals PyTorch's periodic model
averaging on the same data; two rounds of local_sgd, diloco and slowmo on a two-parameter model
give the numbers worked out by hand, also through compressed messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from mpi_run import run_mpi, run_train
from scaledl.algorithms import rules
from scaledl.comm.codecs import CODECS, codec

CHECKS = Path(__file__).parent / "mpi"


def train_args(data, out, algorithm, *extra):
    return [
        "--data",
        str(data),
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
        "4",
        *extra,
    ]


# ---- through MPI ------------------------------------------------------------------------------


@pytest.mark.mpi
@pytest.mark.parametrize("algorithm", ["local_sgd", "diloco", "slowmo"])
@pytest.mark.parametrize("compress", ["fp32", "int8", "bf16"])
def test_two_rounds_give_the_numbers_worked_out_by_hand(algorithm, compress):
    result = run_mpi(2, [str(CHECKS / "check_averaging_rounds.py"), algorithm, compress], timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "as worked out by hand" in result.stdout


@pytest.mark.mpi
def test_local_sgd_equals_pytorchs_periodic_model_averager(digits_h5, tmp_path):
    result = run_mpi(
        2, [str(CHECKS / "check_local_sgd_parity.py"), str(digits_h5), str(tmp_path / "run"), "4", "13"], timeout=180
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "max |ours − PyTorch's PeriodicModelAverager|" in result.stdout, result.stdout[-2000:]


@pytest.mark.mpi
def test_the_engine_with_sync_easgds_settings_is_sync_easgd_bit_for_bit(digits_h5, tmp_path):
    easgd = run_train(2, train_args(digits_h5, tmp_path / "easgd", "sync_easgd"))
    engine = run_train(
        2,
        train_args(
            digits_h5, tmp_path / "engine", "diloco", "--worker-rule", "elastic", "--outer", "elastic", "--tau", "1"
        ),
    )
    hard = run_train(2, train_args(digits_h5, tmp_path / "diloco", "diloco"))
    for result in (easgd, engine, hard):
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    model = {name: torch.load(tmp_path / name / "model.pt") for name in ("easgd", "engine", "diloco")}
    assert all(torch.equal(model["easgd"][k], model["engine"][k]) for k in model["easgd"])
    assert not all(torch.equal(model["easgd"][k], model["diloco"][k]) for k in model["easgd"]), (
        "diloco's own settings must change the result, else the comparison proves nothing"
    )
    report = json.loads((tmp_path / "engine/run.json").read_text())["algorithm_report"][0]
    # the settings the run used: diloco's outer lr and momentum have no part in the elastic outer step
    assert report["averaging"] == {
        "inner": "sgd",
        "worker_rule": "elastic",
        "outer": "elastic",
        "tau": 1,
        "compress": "fp32",
    }


@pytest.mark.mpi
def test_compressed_rounds_count_their_bytes(digits_h5, tmp_path):
    sizes = {}
    for compress in ("fp32", "fp16", "int8"):
        result = run_train(
            2, train_args(digits_h5, tmp_path / compress, "local_sgd", "--tau", "5", "--compress", compress)
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        report = json.loads((tmp_path / compress / "run.json").read_text())["algorithm_report"][0]
        sizes[compress] = report["bytes_per_exchange"]
        assert report["exchanges"] == 6 and report["bytes_exchanged"] == 6 * report["bytes_per_exchange"]
    parameters = 431_080  # LeNet on 8×8 digits: one message each way per round
    assert sizes == {"fp32": 2 * 4 * parameters, "fp16": 2 * 2 * parameters, "int8": 2 * (parameters + 4)}


@pytest.mark.mpi
def test_overlap_with_a_reset_rule_is_refused_in_one_line(digits_h5, tmp_path):
    result = run_train(2, train_args(digits_h5, tmp_path / "run", "diloco", "--overlap"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "--overlap needs --worker-rule elastic" in lines[0], (
        result.stderr
    )


# ---- the pieces, in-process -------------------------------------------------------------------


def test_diloco_outer_step_is_torch_sgd_with_nesterov_momentum():
    """Two outer steps of ours against torch.optim.SGD(nesterov=True) fed Δ = W − x̄ as the gradient."""
    torch.manual_seed(0)
    center, means = torch.randn(10), [torch.randn(10), torch.randn(10)]
    ours, buf = center.clone(), torch.zeros(10)
    theirs = torch.nn.Parameter(center.clone())
    optimizer = torch.optim.SGD([theirs], lr=0.7, momentum=0.9, nesterov=True)
    for mean in means:
        rules.outer_nesterov_(ours, mean * 2, 2, buf, lr=0.7, mu=0.9)  # Σ of two workers = 2·x̄
        theirs.grad = theirs.detach() - mean
        optimizer.step()
    assert torch.allclose(ours, theirs.detach(), atol=1e-6, rtol=0)


def test_slowmo_without_momentum_at_unit_rate_is_the_average():
    center, total = torch.tensor([1.0, 2.0]), torch.tensor([1.5, 3.5])
    slow = center.clone()
    rules.outer_slowmo_(slow, total, 2, torch.zeros(2), inner_lr=0.1, slow_lr=1.0, beta=0.0)
    mean = center.clone()
    rules.average_(mean, total, 2)
    assert torch.allclose(slow, mean, atol=1e-7) and mean.tolist() == [0.75, 1.75]


@pytest.mark.parametrize("name", CODECS)
def test_codecs_round_trip_within_their_precision(name):
    torch.manual_seed(1)
    x = torch.randn(1000) * 1e-2
    c = codec(name)
    payload = np.zeros(c.nbytes(len(x)), dtype=np.uint8)
    c.encode(x, payload)
    back = c.decode(payload, torch.empty_like(x))
    largest = float(x.abs().max())  # round to nearest: half a unit in the last place, relative for floats
    bound = {"fp32": 0.0, "fp16": largest * 2**-11, "bf16": largest * 2**-8, "int8": largest / 254 * 1.001}[name]
    assert (back - x).abs().max().item() <= bound
    assert len(payload) == {"fp32": 4000, "fp16": 2000, "bf16": 2000, "int8": 1004}[name]


def test_codecs_refuse_an_unknown_name():
    with pytest.raises(ValueError, match="choose from fp32, fp16, bf16, int8"):
        codec("fp8")
