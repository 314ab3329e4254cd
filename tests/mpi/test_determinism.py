"""Synchronous algorithms and round-robin EASGD are bitwise repeatable for a given seed and world size."""

import re
from pathlib import Path

import pytest
import torch

from mpi_run import run_mpi, run_train, torch_threads
from scaledl.algorithms import tasks_for
from scaledl.run_record import read_run_json

pytestmark = pytest.mark.mpi
BATCH = 16  # a quarter of the default: the same arithmetic to repeat, a quarter of the compute


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
            "--batch-size",
            str(BATCH),
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
        ("sync_sgd", ["--bucket-mb", "0.05"]),  # gradient buckets allreduced during backward, several of them
        ("sync_easgd", ["--exchange", "rooted"]),  # Bcast + Reduce instead of the default Allreduce
    ],
)
def test_the_default_exchange_repeats_and_equals_the_plain_one_at_two_workers(digits_h5, tmp_path, algorithm, extra):
    """Bucketed gradients and the allreduce exchange are bitwise repeatable at 3 workers (where a sum has two
    roundings in an order the message sizes fix) and, at 2 workers (one rounding: a + b = b + a), bitwise
    equal to one packed message and to Bcast + Reduce: any bucket lost, summed twice or applied stale shows."""
    plain = ["--message", "packed"] if algorithm == "sync_sgd" else extra
    default = extra if algorithm == "sync_sgd" else []
    three = [train_once(digits_h5, tmp_path / f"p3-{k}", algorithm, seed=5, workers=3, extra=default) for k in "ab"]
    assert same(*three), f"{algorithm} {default}: two runs with one seed differ at 3 workers"
    by_default = train_once(digits_h5, tmp_path / "default", algorithm, seed=5, extra=default)
    by_plain = train_once(digits_h5, tmp_path / "plain", algorithm, seed=5, extra=plain)
    assert same(by_default, by_plain), f"{algorithm}: {default or 'the default'} and {plain} disagree at 2 workers"
    run = read_run_json(tmp_path / "default" / "run.json")
    per_exchange = {r["messages_per_exchange"] for r in run["algorithm_report"]}
    if algorithm == "sync_sgd":
        assert run["codesign"]["message"] == "bucketed" and min(per_exchange) > 1, per_exchange
    else:
        assert run["codesign"]["exchange"] == "allreduce" and per_exchange == {1}, per_exchange


@pytest.mark.parametrize(
    "algorithm, extra",
    [
        ("sync_sgd", ["--message", "per_layer"]),
        ("sync_sgd", ["--bucket-mb", "0.05"]),
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
    run = read_run_json(tmp_path / "gloo" / "run.json")
    assert run["codesign"]["backend"] == "gloo"
    by_mpi_run = read_run_json(tmp_path / "mpi" / "run.json")
    counts = [{r["messages_per_exchange"] for r in r_["algorithm_report"]} for r_ in (run, by_mpi_run)]
    assert counts[0] == counts[1], f"gloo and mpi sent different message counts: {counts}"
    if "per_layer" in extra:
        assert counts[0] == {len(by_gloo)}  # one per LeNet parameter tensor (it has no buffers)
    elif algorithm == "sync_easgd3":
        assert counts[0] == {1}  # one Allreduce a round


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("weight_decay", ["0", "0.01"])
def test_one_worker_equals_a_plain_pytorch_loop_bit_for_bit(digits_h5, tmp_path, weight_decay, threads):
    """One worker keeps no flat gradient (autograd's own .grad, the update view by view): it must still be
    exactly torch.optim.SGD on the same model, batches and learning rate, so nothing was lost or doubled.
    Both sides run at the same torch thread count (a convolution's backward sums in an order that depends on it),
    whatever OMP_NUM_THREADS the shell exported."""
    import torch.nn.functional as F

    from scaledl.data.hdf5 import read_info
    from scaledl.data.loader import Normalizer, ShardLoader
    from scaledl.models import build_model

    extra = ["--weight-decay", weight_decay, "--threads", str(threads)]
    ours = train_once(digits_h5, tmp_path / "ours", "sync_sgd", seed=4, workers=1, extra=extra)
    assert read_run_json(tmp_path / "ours" / "run.json")["world"]["threads_per_rank"] == threads
    info = read_info(digits_h5)
    with torch_threads(threads):
        torch.manual_seed(4)
        model = build_model("lenet", info.image_shape, info.classes)
        opt = torch.optim.SGD(model.parameters(), lr=0.05, weight_decay=float(weight_decay))
        loader = ShardLoader(digits_h5, shard=0, num_shards=1, batch_size=BATCH, seed=4)
        normalize = Normalizer(info.mean, info.std, "cpu")
        for _ in range(30):
            x, y = normalize(*loader.next_batch())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    assert same(ours, model.state_dict()), f"one-worker sync_sgd and a plain SGD loop disagree at {threads} thread(s)"


def test_train_runs_on_the_communicator_it_is_given(digits_h5, tmp_path):
    """Two jobs in one MPI world, each on a communicator of its own, compute what a job of their size does alone."""
    check = Path(__file__).parent / "check_world.py"
    result = run_mpi(3, [str(check), str(digits_h5), str(tmp_path / "world")], timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    said = sorted(re.findall(r"rank \d: world size \d", result.stdout))  # ranks' lines may share one
    assert said == ["rank 0: world size 2", "rank 1: world size 2", "rank 2: world size 1"], result.stdout
    alone = run_train(
        2,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "sync_sgd",
            "--out-dir",
            str(tmp_path / "alone"),
            "--max-steps",
            "6",
            "--eval-every",
            "3",
            "--lr",
            "0.05",
            "--seed",
            "7",
        ],
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    a, b = torch.load(tmp_path / "world" / "pair" / "model.pt"), torch.load(tmp_path / "alone" / "model.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
