"""The flat parameter buffer: every parameter and gradient is a view into one tensor."""

import torch
from torch import nn

from scaledl.comm.flat import FlatParams
from scaledl.models import MODELS, build_model


def small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_values_preserved_and_params_are_views():
    net = small_net()
    before = [p.detach().clone() for p in net.parameters()]
    flat = FlatParams(net)
    assert flat.numel == sum(b.numel() for b in before) == 3 * 4 + 4 + 4 * 2 + 2
    for p, b in zip(net.parameters(), before):
        assert torch.equal(p, b)
    flat.data.fill_(7.0)
    assert all(torch.all(p == 7.0) for p in net.parameters())
    assert flat.is_intact()


def test_backward_accumulates_into_flat_grad():
    net = small_net()
    flat = FlatParams(net)
    x = torch.randn(5, 3)
    net(x).sum().backward()
    assert flat.is_intact()
    expected = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    assert torch.equal(flat.grad, expected)
    assert flat.grad.abs().sum() > 0
    flat.zero_grad()
    assert all(torch.all(p.grad == 0) for p in net.parameters())
    # A second backward after zeroing still lands in the same buffer.
    net(x).sum().backward()
    assert torch.equal(flat.grad, expected)


def test_in_place_update_on_flat_moves_the_model():
    net = small_net()
    flat = FlatParams(net)
    x = torch.randn(5, 3)
    out_before = net(x).detach()
    flat.data.mul_(0.0)
    assert torch.equal(net(x), torch.zeros_like(out_before))


def test_layer_views_one_per_parameter_and_aliasing():
    net = small_net()
    flat = FlatParams(net)
    views = flat.layer_views(flat.data)
    assert len(views) == len(list(net.parameters())) == 4
    assert [v.numel() for v in views] == [p.numel() for p in net.parameters()]
    views[2].fill_(3.0)
    assert torch.all(net[2].weight == 3.0)


def test_every_registered_model_flattens():
    shapes = {"lenet": (1, 28, 28), "cifar_net": (3, 32, 32)}
    for name in ("lenet", "cifar_net"):
        model = build_model(name, shapes[name], 10)
        flat = FlatParams(model)
        assert flat.numel == sum(p.numel() for p in model.parameters())
    assert set(MODELS) >= {"lenet", "cifar_alexnet", "alexnet", "googlenet", "vgg19", "resnet50"}
