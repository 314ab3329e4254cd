"""The periodic-averaging engine: Sync EASGD, local SGD, DiLoCo and SlowMo as settings of one round.

Reductions: the engine with Sync EASGD's settings is sync_easgd bit for bit (and sync_easgd's own
determinism, parity and gloo tests run through it); local_sgd equals PyTorch's periodic model
averaging on the same data; two rounds of local_sgd, diloco and slowmo on a two-parameter model
give the numbers worked out by hand, also through compressed messages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mpi_run import run_mpi, run_train
from scaledl.algorithms import rules
from scaledl.algorithms.averaging import EncodedRound
from scaledl.comm.codecs import CODECS, INT8_CHUNK, codec
from scaledl.comm.timing import PhaseTimer
from scaledl.run_record import read_run_json

CHECKS = Path(__file__).parent


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
        "--batch-size",  # a quarter of the default: the same arithmetic, a quarter of the compute
        "16",
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
@pytest.mark.parametrize("algorithm", ["local_sgd", "diloco"])
def test_a_delayed_outer_step_gives_the_numbers_worked_out_by_hand(algorithm):
    result = run_mpi(2, [str(CHECKS / "check_averaging_rounds.py"), algorithm, "fp32", "1"], timeout=120)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.count("as worked out by hand") == 2  # each worker's own center


@pytest.mark.mpi
def test_outer_delay_0_is_diloco_bit_for_bit_and_1_changes_the_numbers(digits_h5, tmp_path):
    runs = {
        "diloco": [],
        "delay0": ["--outer-delay", "0"],
        "delay1": ["--outer-delay", "1"],
    }
    for name, extra in runs.items():
        result = run_train(2, train_args(digits_h5, tmp_path / name, "diloco", "--tau", "4", *extra))
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    model = {name: torch.load(tmp_path / name / "model.pt") for name in runs}
    assert all(torch.equal(model["diloco"][k], model["delay0"][k]) for k in model["diloco"])
    assert not all(torch.equal(model["diloco"][k], model["delay1"][k]) for k in model["diloco"])
    delayed = read_run_json(tmp_path / "delay1/run.json")["algorithm_report"][0]
    assert delayed["averaging"]["outer_delay"] == 1 and delayed["exchanges"] == 8
    assert len(delayed["overlap_per_exchange"]["exchange_s"]) == 7  # the last round's sum is never awaited


@pytest.mark.mpi
def test_a_ring_of_two_is_the_complete_graph_bit_for_bit_and_a_ring_of_four_is_not(digits_h5, tmp_path):
    runs = {
        "default": (2, []),
        "ring2": (2, ["--graph", "ring"]),
        "complete4": (4, []),
        "ring4": (4, ["--graph", "ring"]),
    }
    for name, (ranks, extra) in runs.items():
        result = run_train(ranks, train_args(digits_h5, tmp_path / name, "local_sgd", "--tau", "4", *extra))
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    model = {name: torch.load(tmp_path / name / "model.pt") for name in runs}
    assert all(torch.equal(model["default"][k], model["ring2"][k]) for k in model["default"])  # one neighbour: all
    assert not all(torch.equal(model["complete4"][k], model["ring4"][k]) for k in model["complete4"])
    report = read_run_json(tmp_path / "ring4/run.json")["algorithm_report"]
    assert {r["averaging"]["graph"] for r in report} == {"ring"}
    assert all(r["messages_per_exchange"] == 2 for r in report)  # W^i to each of two neighbours, no Allreduce
    assert report[0]["bytes_per_exchange"] == 2 * 2 * 4 * 431_080  # LeNet on 8×8 digits, both ways, two of each


@pytest.mark.mpi
def test_an_elastic_ring_overlapped_is_the_elastic_ring_bit_for_bit(digits_h5, tmp_path):
    """Sync EASGD3's exchange on the helper thread sums the ring neighbourhood as Sync EASGD's does inline."""
    for algorithm in ("sync_easgd", "sync_easgd3"):
        result = run_train(4, train_args(digits_h5, tmp_path / algorithm, algorithm, "--graph", "ring"))
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    inline, overlapped = (torch.load(tmp_path / a / "model.pt") for a in ("sync_easgd", "sync_easgd3"))
    assert all(torch.equal(inline[k], overlapped[k]) for k in inline)
    assert read_run_json(tmp_path / "sync_easgd3/run.json")["algorithm_report"][0]["averaging"]["graph"] == "ring"


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
    report = read_run_json(tmp_path / "engine/run.json")["algorithm_report"][0]
    # the settings the run used: diloco's outer lr and momentum have no part in the elastic outer step
    assert report["averaging"] == {
        "inner": "sgd",
        "worker_rule": "elastic",
        "outer": "elastic",
        "outer_delay": 0,
        "graph": "complete",
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
        report = read_run_json(tmp_path / compress / "run.json")["algorithm_report"][0]
        sizes[compress] = report["bytes_per_exchange"]
        assert report["exchanges"] == 6 and report["bytes_exchanged"] == 6 * report["bytes_per_exchange"]
    parameters = 431_080  # LeNet on 8×8 digits: one message each way per round
    scales = -(-parameters // INT8_CHUNK)  # int8: a float32 scale per chunk, 106 of them
    assert sizes == {"fp32": 2 * 4 * parameters, "fp16": 2 * 2 * parameters, "int8": 2 * (parameters + 4 * scales)}


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


def test_int8_scales_each_chunk_by_its_own_largest_value():
    """Chunks of very different magnitudes (as a flat vector's layers are): each is rounded to 1/254 of its
    own largest value, where one scale for the whole message would round the small ones to zero."""
    torch.manual_seed(2)
    x = torch.cat([torch.randn(INT8_CHUNK), torch.randn(INT8_CHUNK) * 1e-4, torch.randn(5) * 1e-6])
    c = codec("int8")
    payload = np.zeros(c.nbytes(len(x)), dtype=np.uint8)
    assert len(payload) == len(x) + 4 * 3  # three scales: two whole chunks and the tail
    c.encode(x, payload)
    back = c.decode(payload, torch.empty_like(x))
    for chunk in (slice(0, INT8_CHUNK), slice(INT8_CHUNK, 2 * INT8_CHUNK), slice(2 * INT8_CHUNK, None)):
        assert (back[chunk] - x[chunk]).abs().max() <= x[chunk].abs().max() / 254 * 1.001
    assert (back[INT8_CHUNK:] == 0).float().mean() < 0.05  # one scale for all would zero every one of them
    zeros = torch.zeros(INT8_CHUNK + 1)  # an all-zero chunk decodes to zeros (its scale cannot be 0/127)
    c.encode(zeros, payload[: c.nbytes(len(zeros))])
    assert c.decode(payload[: c.nbytes(len(zeros))], torch.ones_like(zeros)).eq(0).all()


class OneRank:
    """The two patterns of a compressed round in a world of one rank (the master is the only worker)."""

    def bcast_bytes(self, buf, root):
        pass

    def gather_bytes(self, send, recv, root):
        recv[0] = send


def test_the_broadcast_counts_each_rounding_error_once():
    """S moves by exactly what was sent, so the next W − S carries the last rounding error by itself: with
    the center held still, S closes in on it by a factor of about 254 a round. A residual kept and added as
    well would send each error twice, and S would swing to the other side of W by as much as it missed."""
    torch.manual_seed(3)
    center = torch.randn(3 * INT8_CHUNK) * torch.logspace(-3, 0, 3 * INT8_CHUNK)
    wire = EncodedRound(codec("int8"), len(center), workers=1, is_master=True)
    wire.start(torch.zeros_like(center))
    missed = []
    for _ in range(2):
        wire.down(OneRank(), center, PhaseTimer())
        missed.append(float((wire.shared - center).abs().max()))
    assert 0 < missed[1] < missed[0] / 50, missed


def test_a_workers_rounding_errors_are_fed_back_so_none_is_lost():
    """The master's sum moves with S, not with a worker's message: each worker keeps its rounding error and
    adds it to its next message, so what the master receives over k rounds is k·(W^i − S) less one error."""
    torch.manual_seed(4)
    shared = torch.randn(INT8_CHUNK + 7)
    w = shared + torch.randn_like(shared) * 1e-3
    wire = EncodedRound(codec("int8"), len(w), workers=1, is_master=True)
    wire.start(shared)
    received, total, rounds = torch.zeros_like(w), torch.empty_like(w), 20
    for _ in range(rounds):
        wire.up(OneRank(), w, total, PhaseTimer())
        received += total - shared  # the master's view of W^i − S this round
    expected = rounds * (w - shared) - wire.residual_up
    assert torch.allclose(received, expected, atol=1e-5, rtol=0)
    one_round = (w - shared).abs().max() / 254  # what a single message may miss by
    assert (received / rounds - (w - shared)).abs().max() < one_round / 10  # the misses do not add up


def test_codecs_refuse_an_unknown_name():
    with pytest.raises(ValueError, match="choose from fp32, fp16, bf16, int8"):
        codec("fp8")
