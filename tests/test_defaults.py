"""One source of defaults: TrainConfig, the workflow schema, the command line and config/README.md agree."""

from __future__ import annotations

import argparse
import re
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from scaledl.train import command as train_command
from scaledl.algorithms import ALGORITHMS
from scaledl.config import COMMAND_LINE_ONLY, SET_BY_WORKFLOW, SETTINGS, TrainConfig, defaults
from scaledl.data import prepare
from scaledl.data.converters import CONVERTERS
from scaledl.data.converters.options import PrepareOptions
from scaledl.models import MODELS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
TRAIN = SCHEMA["$defs"]["train"]["properties"]
OVERRIDE = SCHEMA["$defs"]["train_override"]["properties"]
EXPERIMENT = SCHEMA["$defs"]["experiment"]["properties"]


def test_schema_train_keys_are_the_trainconfig_settings():
    assert set(TRAIN) == set(SETTINGS)
    assert set(OVERRIDE) == set(SETTINGS)
    assert set(SETTINGS) | set(SET_BY_WORKFLOW) | set(COMMAND_LINE_ONLY) == {f.name for f in fields(TrainConfig)}


@pytest.mark.parametrize("key", SETTINGS)
def test_schema_train_default_is_null_meaning_the_cli_default(key):
    assert TRAIN[key]["default"] is None
    assert OVERRIDE[key] == {"$ref": f"#/$defs/train/properties/{key}"}


@pytest.mark.parametrize("key", [f.name for f in fields(TrainConfig) if f.metadata["choices"] and f.name in SETTINGS])
def test_schema_enums_are_the_cli_choices(key):
    choices = next(f.metadata["choices"] for f in fields(TrainConfig) if f.name == key)
    assert TRAIN[key]["enum"] == [*choices, None]


def test_schema_names_come_from_the_registries():
    assert EXPERIMENT["algorithms"]["items"]["enum"] == list(ALGORITHMS)
    assert EXPERIMENT["models"]["items"]["enum"] == list(MODELS)
    assert EXPERIMENT["dataset"]["enum"] == list(CONVERTERS)


def test_cli_defaults_are_trainconfig_defaults():
    parser = argparse.ArgumentParser()
    train_command.add_arguments(parser)
    args = parser.parse_args(["--data", "d.h5", "--model", "lenet", "--algorithm", "sync_sgd", "--out-dir", "o"])
    required = {"data", "model", "algorithm", "out_dir"}
    assert {k: v for k, v in vars(args).items() if k not in required} == {
        k: v for k, v in defaults().items() if k not in required}


def documented_train_defaults() -> dict[str, str]:
    """The `train` table of config/README.md: key → the default as written there."""
    text = (ROOT / "config/README.md").read_text()
    section = text[text.index("## `train`"):]
    section = section[:section.index("\n## ", 1)]
    return dict(re.findall(r"^\| `(\w+)` \| `([^`]*)` \|", section, flags=re.M))


def yaml_literal(value) -> str:
    """How a default reads in the docs: YAML's spelling (null, false, 0.05)."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def test_documented_train_defaults_are_the_effective_ones():
    documented = documented_train_defaults()
    assert set(documented) == set(SETTINGS)
    effective = defaults()
    assert {k: v for k, v in documented.items()} == {k: yaml_literal(effective[k]) for k in SETTINGS}


def test_prepare_defaults_agree_with_the_schema():
    parser = argparse.ArgumentParser()
    prepare.add_arguments(parser)
    args = parser.parse_args(["synthetic", "--out", "x.h5"])
    options = PrepareOptions()
    assert prepare.options_from_args(args) == options
    synthetic = SCHEMA["$defs"]["prepare_synthetic"]["properties"]
    assert synthetic["train_count"]["default"] == options.train_count
    assert synthetic["test_count"]["default"] == options.test_count
    assert synthetic["classes"]["default"] == options.classes
    assert tuple(synthetic["shape"]["default"]) == options.shape
