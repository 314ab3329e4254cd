"""Model registry: the paper's networks, by name, and models of your own (plug-ins).

ImageNet-size architectures come from torchvision (random initialisation, no
downloaded weights). The small ones are written here because torchvision has
no LeNet and no CIFAR-sized AlexNet. A model of your own is a function
`(in_shape, classes) -> nn.Module` in your module, named by a config's
`plugins.models` (`scaledl train --model-from module:function`) or by an
installed package's `scaledl.models` entry point (scaledl.plugins).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable

import torch
from torch import nn

from scaledl import plugins
from scaledl.errors import UserError


class LeNet(nn.Module):
    """Caffe's LeNet for MNIST (paper Fig. 3): conv20-5 → pool → conv50-5 → pool → fc500 → ReLU → fc."""

    def __init__(self, in_shape: tuple[int, int, int], classes: int):
        super().__init__()
        c, h, w = in_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 20, 5),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(flat, 500), nn.ReLU(inplace=True), nn.Linear(500, classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class LeNetBN(nn.Module):
    """LeNet with BatchNorm2d after each convolution: a small BatchNorm model (BN statistics are buffers,
    which the algorithms do not exchange; see train._center_evaluator)."""

    def __init__(self, in_shape: tuple[int, int, int], classes: int):
        super().__init__()
        c, h, w = in_shape
        self.features = nn.Sequential(
            nn.Conv2d(c, 20, 5),
            nn.BatchNorm2d(20),
            nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5),
            nn.BatchNorm2d(50),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(flat, 500), nn.ReLU(inplace=True), nn.Linear(500, classes)
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class CifarAlexNet(nn.Module):
    """AlexNet's 5 conv + 3 fc layers adapted to 32×32 inputs.

    The paper's AlexNet on CIFAR has 249 MB of weights, i.e. the full
    ImageNet-width network. Here the convolutions keep AlexNet's widths
    (64-192-384-256-256) with 3×3 kernels and stride 1 (an 11×11/4 stem would
    reduce 32×32 to 7×7), and the classifier keeps the 4096-4096 widths, so
    the weight count stays in AlexNet's regime (~37 M parameters).
    """

    def __init__(self, in_shape: tuple[int, int, int], classes: int, width: int = 4096):
        super().__init__()
        c = in_shape[0]
        self.features = nn.Sequential(
            nn.Conv2d(c, 64, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 192, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(192, 384, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(),
            nn.Linear(flat, width),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(width, width),
            nn.ReLU(inplace=True),
            nn.Linear(width, classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


class CifarNet(nn.Module):
    """A small CIFAR CNN (Caffe's cifar10_quick shape) for fast CPU runs."""

    def __init__(self, in_shape: tuple[int, int, int], classes: int):
        super().__init__()
        c = in_shape[0]
        self.features = nn.Sequential(
            nn.Conv2d(c, 32, 5, padding=2),
            nn.MaxPool2d(2),
            nn.ReLU(inplace=True),
            nn.Conv2d(32, 32, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.AvgPool2d(2),
        )
        flat = _flat_size(self.features, in_shape)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(flat, 64), nn.Linear(64, classes))

    def forward(self, x):
        return self.classifier(self.features(x))


def _flat_size(features: nn.Module, in_shape: tuple[int, int, int]) -> int:
    was_training = features.training
    features.eval()  # BatchNorm: a batch of one has no variance in train mode, and no statistics may change
    with torch.no_grad():
        n = features(torch.zeros(1, *in_shape)).numel()
    features.train(was_training)
    return n


def _torchvision(name: str, **kwargs) -> Callable[[tuple[int, int, int], int], nn.Module]:
    """A torchvision architecture, imported on first use (torchvision costs ~1.5 s to import)."""

    def build(in_shape: tuple[int, int, int], classes: int) -> nn.Module:
        from torchvision import models  # lazy: ~1.5 s to import, and only these models need it

        if in_shape[0] != 3:
            raise UserError(f"model {name} expects 3-channel images, but the data has {in_shape[0]} channel(s)")
        return getattr(models, name)(weights=None, num_classes=classes, **kwargs)

    build.__name__ = name
    return build


MODELS: dict[str, Callable[[tuple[int, int, int], int], nn.Module]] = {
    "lenet": LeNet,
    "lenet_bn": LeNetBN,
    "cifar_net": CifarNet,
    "cifar_alexnet": CifarAlexNet,
    "alexnet": _torchvision("alexnet"),
    "googlenet": _torchvision("googlenet", aux_logits=False, init_weights=True),
    "vgg19": _torchvision("vgg19"),
    "resnet18": _torchvision("resnet18"),  # at 32×32 (CIFAR) too: its global pooling takes any size
    "resnet50": _torchvision("resnet50"),
}


Builder = Callable[[tuple[int, int, int], int], nn.Module]


def model_source(name: str, model_from: str | None = None) -> str:
    """Where model `name` comes from: `scaledl` (built in), or the plug-in's module:function (given, or an
    installed package's entry point); UserError with the names known if it is none of them."""
    if model_from is not None:
        if name in MODELS:
            raise UserError(f"--model {name} is a built-in model: give your model from {model_from} another name")
        plugins.split_target(model_from, f"--model-from for model {name}")
        return model_from
    if name in MODELS:
        return "scaledl"
    found = plugins.installed("models")
    if name in found:
        return found[name]
    known = [*MODELS, *found]
    near = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {near[0]}?)" if near else f"; known: {', '.join(known)}"
    raise UserError(
        f"--model {name}: no such model{hint}; a model of your own: --model-from MODULE:FUNCTION "
        "(in a workflow config, plugins.models)"
    )


def model_builder(name: str, model_from: str | None = None) -> Builder:
    """The function that builds model `name` (model_source says which); a plug-in's module is imported."""
    source = model_source(name, model_from)
    return MODELS[name] if source == "scaledl" else plugins.load(source, f"model {name}")


def build_model(name: str, in_shape: tuple[int, int, int], classes: int, model_from: str | None = None) -> nn.Module:
    """Instantiate model `name` for images of shape (C, H, W) and `classes` outputs."""
    model = model_builder(name, model_from)(tuple(in_shape), classes)
    if not isinstance(model, nn.Module):
        raise UserError(
            f"model {name}: {model_source(name, model_from)} returned a {type(model).__name__}, not a "
            "torch.nn.Module; it must build the model from (in_shape, classes)"
        )
    return model
