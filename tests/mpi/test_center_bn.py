"""The center of a BatchNorm model carries the statistics it is evaluated with, and model.pt is
exactly the evaluated center."""

import pytest
import torch

from mpi_run import run_train, torch_threads
from scaledl.data.hdf5 import read_info
from scaledl.data.loader import Normalizer, iter_split
from scaledl.models import build_model
from scaledl.run_record import read_run_json
from scaledl.train.evaluation import CenterEvaluator, Snapshot


def bn_buffers(state: dict) -> dict[str, torch.Tensor]:
    return {k: v for k, v in state.items() if k.endswith(("running_mean", "running_var"))}


def assert_not_initial(state: dict) -> None:
    buffers = bn_buffers(state)
    assert len(buffers) == 4, sorted(state)  # lenet_bn: two BatchNorm2d layers
    for name, t in buffers.items():
        initial = torch.zeros_like(t) if name.endswith("mean") else torch.ones_like(t)
        assert not torch.allclose(t, initial), f"{name} still has its initial value"


def evaluator(digits_h5, center, worker=None) -> CenterEvaluator:
    info = read_info(digits_h5)
    return CenterEvaluator(
        digits_h5, center, worker, Normalizer(info.mean, info.std, "cpu"), eval_batch_size=1000, bn_batch_size=64
    )


def snapshot(step: int) -> Snapshot:
    return Snapshot(step=step, epoch=0.0, wall_s=0.0, train_s=0.0, train_loss=None, phases={})


def test_dedicated_master_reestimates_bn_and_keeps_the_evaluated_copy(digits_h5):
    info = read_info(digits_h5)
    torch.manual_seed(0)
    center = build_model("lenet_bn", info.image_shape, info.classes)
    before = {k: v.clone() for k, v in center.state_dict().items()}
    ev = evaluator(digits_h5, center)
    first = ev.evaluate(snapshot(0))
    evaluated = {k: v.clone() for k, v in ev.evaluated_state.items()}
    assert_not_initial(evaluated)
    assert evaluated.keys() == center.state_dict().keys()
    # the center's weights were evaluated; the live center was not touched by the re-estimate
    assert all(
        torch.equal(evaluated[k], before[k])
        for k in before
        if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))
    )
    assert all(torch.equal(before[k], v) for k, v in center.state_dict().items())
    with torch.no_grad():  # the center moves after the evaluation ...
        for p in center.parameters():
            p.add_(1.0)
    assert all(torch.equal(evaluated[k], v) for k, v in ev.evaluated_state.items())  # ... the evaluated copy does not
    with torch.no_grad():
        for p in center.parameters():
            p.sub_(1.0)
    again = ev.evaluate(snapshot(1))
    assert (again.test_loss, again.test_accuracy) == (first.test_loss, first.test_accuracy)  # same batches each time


def test_model_without_bn_is_untouched(digits_h5):
    info = read_info(digits_h5)
    center = build_model("lenet", info.image_shape, info.classes)
    before = {k: v.clone() for k, v in center.state_dict().items()}
    ev = evaluator(digits_h5, center)
    ev.evaluate(snapshot(0))
    assert not ev.re_estimate_bn
    assert all(torch.equal(before[k], v) for k, v in ev.evaluated_state.items())


@pytest.mark.mpi
def test_async_easgd_saves_the_evaluated_bn_center(digits_h5, tmp_path):
    out = tmp_path / "run"
    result = run_train(
        3,
        [  # master + 2 workers
            "--data",
            str(digits_h5),
            "--model",
            "lenet_bn",
            "--algorithm",
            "async_easgd",
            "--out-dir",
            str(out),
            "--max-steps",
            "20",
            "--eval-every",
            "10",
            "--seed",
            "5",
        ],
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    run = read_run_json(out / "run.json")
    assert run["world"]["dedicated_master"] and run["world"]["workers"] == 2
    state = torch.load(out / "model.pt")
    assert_not_initial(state)

    # Re-evaluate the saved model as the master did: it must give the reported final accuracy exactly.
    info = read_info(digits_h5)
    model = build_model("lenet_bn", info.image_shape, info.classes)
    model.load_state_dict(state)
    model.eval()
    normalize = Normalizer(info.mean, info.std, "cpu")
    with torch_threads(run["world"]["threads_per_rank"]):
        loss_sum, correct, count = 0.0, 0, 0
        with torch.no_grad():
            for images, labels in iter_split(digits_h5, "test", run["arguments"]["eval_batch_size"]):
                x, y = normalize(images, labels)
                logits = model(x)
                loss_sum += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
                correct += (logits.argmax(1) == y).sum().item()
                count += len(y)
    assert correct / count == run["final"]["test_accuracy"]
    assert loss_sum / count == pytest.approx(run["final"]["test_loss"], rel=1e-6)
