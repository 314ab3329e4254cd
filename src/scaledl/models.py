"""Model registry: the paper's networks, by name, and models of your own (plug-ins).

ImageNet-size architectures come from torchvision (random initialisation, no
downloaded weights). The small ones are in scaledl.architectures, because
torchvision has no LeNet and no CIFAR-sized AlexNet. Both are imported on the
first build, so the registry's names cost no torch import (`scaledl train
--help`). A model of your own is a function
`(in_shape, classes) -> nn.Module` in your module, named by a config's
`plugins.models` (`scaledl train --model-from module:function`) or by an
installed package's `scaledl.models` entry point (scaledl.plugins).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING

from scaledl import plugins
from scaledl.errors import UserError

if TYPE_CHECKING:
    from torch import nn


def _written_here(name: str) -> Callable[[tuple[int, int, int], int], nn.Module]:
    """scaledl.architectures' class `name`, imported on first use (it imports torch)."""

    def build(in_shape: tuple[int, int, int], classes: int) -> nn.Module:
        # lazy: what this subcommand computes with; --help and the other subcommands need none of it
        from scaledl import architectures

        return getattr(architectures, name)(in_shape, classes)

    build.__name__ = name
    return build


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
    "lenet": _written_here("LeNet"),
    "lenet_bn": _written_here("LeNetBN"),
    "cifar_net": _written_here("CifarNet"),
    "cifar_alexnet": _written_here("CifarAlexNet"),
    "alexnet": _torchvision("alexnet"),
    "googlenet": _torchvision("googlenet", aux_logits=False, init_weights=True),
    "vgg16": _torchvision("vgg16"),  # with inception_v3: networks of published step times (scaledl validate)
    "vgg19": _torchvision("vgg19"),
    "inception_v3": _torchvision("inception_v3", aux_logits=False, init_weights=True),  # images of 299×299
    "resnet18": _torchvision("resnet18"),  # at 32×32 (CIFAR) too: its global pooling takes any size
    "resnet50": _torchvision("resnet50"),
}


Builder = Callable[[tuple[int, int, int], int], "nn.Module"]  # torch is imported at the first build


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
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from torch import nn

    model = model_builder(name, model_from)(tuple(in_shape), classes)
    if not isinstance(model, nn.Module):
        raise UserError(
            f"model {name}: {model_source(name, model_from)} returned a {type(model).__name__}, not a "
            "torch.nn.Module; it must build the model from (in_shape, classes)"
        )
    return model
