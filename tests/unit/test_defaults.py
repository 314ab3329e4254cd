"""One source of defaults: TrainConfig, the workflow schema, the command line and config/README.md agree.

The schema's `train` blocks are generated from TrainConfig (scaledl.grid.schema); the tests below check
both the committed file and what the generator writes.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import fields
from pathlib import Path

import jsonschema
import pytest
import yaml

from scaledl import plugins as plugin_module
from scaledl.algorithms import ALGORITHMS
from scaledl.config import COMMAND_LINE_ONLY, SET_BY_WORKFLOW, SETTINGS, TrainConfig, defaults
from scaledl.data import prepare
from scaledl.data.converters import CONVERTERS
from scaledl.data.converters.options import PrepareOptions
from scaledl.grid import schema as schema_generator
from scaledl.models import MODELS
from scaledl.train import command as train_command

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "workflow/schemas/config.schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
TRAIN = SCHEMA["$defs"]["train"]["properties"]
OVERRIDE = SCHEMA["$defs"]["train_override"]["properties"]
EXPERIMENT = SCHEMA["$defs"]["experiment"]["properties"]


FIELDS = {f.name: f for f in fields(TrainConfig)}


def test_committed_schema_is_what_the_generator_writes():
    text = SCHEMA_PATH.read_text()
    assert schema_generator.rendered(text) == text, (
        f"workflow/schemas/config.schema.yaml's train blocks differ from TrainConfig: run "
        f"{schema_generator.WRITE_COMMAND}"
    )


@pytest.mark.parametrize("key", SETTINGS)
def test_schema_description_is_the_cli_help(key):
    assert TRAIN[key]["description"].strip() == FIELDS[key].metadata["help"]


# Values on either side of every bound the command line's types enforce.
PROBES = (-1, 0, 0.5, 1, 1.5, 2)


@pytest.mark.parametrize("key", [k for k in SETTINGS if FIELDS[k].metadata["type"] not in (None, str)])
def test_schema_bounds_are_the_cli_types(key):
    """The schema accepts a number exactly when `scaledl train`'s type for the flag does."""
    cli_type = FIELDS[key].metadata["type"]
    for value in PROBES:
        try:
            accepted_by_cli = cli_type(str(value)) is not None
        except (argparse.ArgumentTypeError, ValueError):
            accepted_by_cli = False
        errors = list(jsonschema.Draft202012Validator(TRAIN[key]).iter_errors(value))
        assert (not errors) == accepted_by_cli, (key, value, [e.message for e in errors])
    assert jsonschema.Draft202012Validator(TRAIN[key]).is_valid(None)


def test_schema_pattern_is_the_fields_pattern():
    patterned = {k for k in SETTINGS if FIELDS[k].metadata["pattern"]}
    assert patterned and {k for k in SETTINGS if "pattern" in TRAIN[k]} == patterned
    validator = jsonschema.Draft202012Validator(TRAIN["straggler"])
    assert validator.is_valid("1:2.5,3:4") and not validator.is_valid("1:x")


def test_the_generator_check_names_the_command_that_fixes_a_stale_schema(tmp_path, capsys):
    stale = tmp_path / "config.schema.yaml"
    stale.write_text(SCHEMA_PATH.read_text().replace("iterations per worker", "iterations per rank", 1))
    assert schema_generator.main(["--schema", str(stale), "--check"]) == 1
    assert schema_generator.WRITE_COMMAND in capsys.readouterr().err
    assert schema_generator.main(["--schema", str(stale), "--write"]) == 0
    assert stale.read_text() == SCHEMA_PATH.read_text()
    assert schema_generator.main(["--schema", str(stale), "--check"]) == 0


def test_the_generator_refuses_a_schema_without_markers_in_one_line(tmp_path, capsys):
    bare = tmp_path / "config.schema.yaml"
    bare.write_text("type: object\n")
    assert schema_generator.main(["--schema", str(bare), "--write"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "generated-blocks markers" in err[0]
    assert bare.read_text() == "type: object\n"


def algorithm_dependent_values() -> dict[str, set[str]]:
    """Setting → the numbers some registry entry gives it as its default (written there, once)."""
    values: dict[str, set[str]] = {}
    for info in ALGORITHMS.values():
        for key, value in info.defaults.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.setdefault(key, set()).add(str(value))
    return values


def documented_train_meanings() -> dict[str, str]:
    text = (ROOT / "config/README.md").read_text()
    return dict(re.findall(r"^\| `(\w+)` \| `[^`]*` \| (.*) \|$", text, flags=re.M))


@pytest.mark.parametrize("key", sorted(algorithm_dependent_values()))
def test_algorithm_defaults_are_written_only_in_the_registry(key):
    numbers = algorithm_dependent_values()[key]
    for where, text in (("help", FIELDS[key].metadata["help"]), ("config/README.md", documented_train_meanings()[key])):
        repeated = [n for n in numbers if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", text)]
        assert not repeated, f"{key}: its {where} repeats the registry's default {repeated}"


def test_schema_train_keys_are_the_trainconfig_settings():
    assert set(TRAIN) == set(SETTINGS)
    assert set(OVERRIDE) == set(SETTINGS)
    assert set(SETTINGS) | set(SET_BY_WORKFLOW) | set(COMMAND_LINE_ONLY) == {f.name for f in fields(TrainConfig)}


@pytest.mark.parametrize("key", SETTINGS)
def test_schema_train_default_is_null_meaning_the_cli_default(key):
    assert TRAIN[key]["default"] is None
    value = {"$ref": f"#/$defs/train/properties/{key}"}  # a block's value, or a list of them (a sweep)
    assert OVERRIDE[key] == {"anyOf": [value, {"type": "array", "minItems": 1, "uniqueItems": True, "items": value}]}


@pytest.mark.parametrize("key", [f.name for f in fields(TrainConfig) if f.metadata["choices"] and f.name in SETTINGS])
def test_schema_enums_are_the_cli_choices(key):
    choices = next(f.metadata["choices"] for f in fields(TrainConfig) if f.name == key)
    assert TRAIN[key]["enum"] == [*choices, None]


def test_schema_names_come_from_the_registries():
    assert EXPERIMENT["algorithms"]["items"]["enum"] == list(ALGORITHMS)
    assert EXPERIMENT["models"]["items"]["anyOf"][0]["enum"] == list(MODELS)
    assert EXPERIMENT["dataset"]["anyOf"][0]["enum"] == list(CONVERTERS)


def test_schema_plugin_patterns_are_the_plugin_modules():
    """A plug-in's name and module:function are written alike in the schema and in scaledl.plugins."""
    plugins = SCHEMA["properties"]["plugins"]["properties"]
    names = {
        plugins["models"]["propertyNames"]["pattern"],
        plugins["datasets"]["propertyNames"]["pattern"],
        EXPERIMENT["models"]["items"]["anyOf"][1]["pattern"],
        EXPERIMENT["dataset"]["anyOf"][1]["pattern"],
    }
    targets = {
        plugins["models"]["additionalProperties"]["pattern"],
        SCHEMA["$defs"]["plugin_dataset"]["properties"]["converter"]["pattern"],
    }
    assert names == {f"^{plugin_module.NAME}$"}
    assert targets == {f"^{plugin_module.TARGET}$"}


def test_cli_defaults_are_trainconfig_defaults():
    parser = argparse.ArgumentParser()
    train_command.add_arguments(parser)
    args = parser.parse_args(["--data", "d.h5", "--model", "lenet", "--algorithm", "sync_sgd", "--out-dir", "o"])
    required = {"data", "model", "algorithm", "out_dir"}
    assert {k: v for k, v in vars(args).items() if k not in required} == {
        k: v for k, v in defaults().items() if k not in required
    }


def documented_train_defaults() -> dict[str, str]:
    """The `train` table of config/README.md: key → the default as written there."""
    text = (ROOT / "config/README.md").read_text()
    section = text[text.index("## `train`") :]
    section = section[: section.index("\n## ", 1)]
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
