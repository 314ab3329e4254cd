"""A workflow config's plug-ins (scaledl.plugins): their names beside the built-in ones, and their jobs.

    plugins:
      models:
        tiny_mlp: my_models:tiny_mlp             # NAME: module:function, (in_shape, classes) -> nn.Module
      datasets:
        blobs: {converter: my_data:convert}      # prepared by `scaledl prepare blobs --converter ...`
        survey: {}                               # no converter: data/hdf5/survey.h5 put in place by hand

An installed package's `scaledl.models` and `scaledl.datasets` entry points
add their names too; a name in the config wins over an installed one. The
schema takes any well-formed name where a model or dataset goes;
`known_names` gives the check (scaledl.grid.check) every name a config may
use, so a misspelt one is still refused with the nearest, and `problems`
refuses a plug-in that shadows a built-in or whose module cannot be found.
Nothing is imported: no torch, no MPI while Snakemake parses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaledl import plugins


def configured(config: Mapping, kind: str) -> dict[str, Any]:
    """The config's `plugins.<kind>` (models or datasets), {} when absent or not yet a mapping."""
    section = config.get("plugins")
    found = section.get(kind) if isinstance(section, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else {}


def model_targets(config: Mapping) -> dict[str, str]:
    """{model name: module:function} of the plug-in models: installed ones, then the config's."""
    return {**plugins.installed("models"), **configured(config, "models")}


def own_converters(config: Mapping) -> dict[str, str | None]:
    """{dataset name: its converter's module:function, or None (a file put in place by hand)} of the config's
    plug-in datasets."""
    return {name: (spec or {}).get("converter") for name, spec in configured(config, "datasets").items()}


def dataset_converters(config: Mapping) -> dict[str, str | None]:
    """As own_converters, for every plug-in dataset: installed ones, then the config's."""
    return {**plugins.installed("datasets"), **own_converters(config)}


def known_names(config: Mapping, builtin_models, builtin_datasets) -> tuple[list[str], list[str]]:
    """(every model name, every dataset name) the config may use: the built-ins, then the plug-ins'."""
    models = list(dict.fromkeys([*builtin_models, *model_targets(config)]))
    datasets = list(dict.fromkeys([*builtin_datasets, *dataset_converters(config)]))
    return models, datasets


def problems(config: Mapping, builtin_models, builtin_datasets) -> list[str]:
    """One line per plug-in of the config that cannot work: a built-in's name, a module nowhere to be found."""
    found = []
    for kind, builtins, targets in (
        ("models", builtin_models, configured(config, "models")),
        ("datasets", builtin_datasets, own_converters(config)),
    ):
        for name, target in targets.items():
            where = f"config: plugins.{kind}.{name}"
            if name in builtins:
                found.append(f"{where}: {name!r} is a built-in {kind[:-1]}'s name; give yours another one")
            elif target is not None and not plugins.findable(target):
                module = target.partition(":")[0]
                found.append(
                    f"{where}: no module {module!r} to import {target} from: put {module.split('.')[0]}.py in the "
                    "folder snakemake runs in, add its folder to PYTHONPATH, or install its package"
                )
    return found


def model_from(config: Mapping, model: str) -> str | None:
    """The `--model-from` of a run of `model`: the config's plug-in function (installed plug-ins and built-ins
    need none: `scaledl train` finds them by name)."""
    return configured(config, "models").get(model)


def is_plugin_dataset(config: Mapping, dataset: str) -> bool:
    return dataset not in config["datasets"] and dataset in dataset_converters(config)


def prepared_here(config: Mapping, dataset: str) -> bool:
    """Whether the workflow's `prepare` makes data/hdf5/DATASET.h5: a built-in, or a plug-in with a converter
    (without one, the file is put in place by hand)."""
    return dataset in config["datasets"] or dataset_converters(config).get(dataset) is not None


def raw_of(config: Mapping, dataset: str) -> str | None:
    """A plug-in dataset's raw folder (`plugins.datasets.NAME.raw`), None when its converter reads none."""
    return (configured(config, "datasets").get(dataset) or {}).get("raw")


def prepare_settings(config: Mapping, dataset: str) -> dict[str, Any]:
    """A plug-in dataset's `scaledl prepare` settings: its converter (the config's; an installed one is found
    by name), its raw folder and its seed."""
    spec = configured(config, "datasets").get(dataset) or {}
    return {"converter": spec.get("converter"), "raw": spec.get("raw"), "seed": spec.get("seed")}
