"""Config mistakes get one line naming the key, what is wrong, and a fix (no schema dump)."""

import copy
from pathlib import Path

import pytest
import yaml

from scaledl.grid.check import first_problem, problems

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture(scope="module")
def config():
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_the_shipped_configs_are_valid(config):
    assert first_problem(config, SCHEMA) is None


def test_a_misspelt_key_gets_did_you_mean(config):
    bad = copy.deepcopy(config)
    bad["train"]["batch_sise"] = 32
    assert first_problem(bad, SCHEMA) == "config: train.batch_sise: unknown key (did you mean 'batch_size'?)"
    bad["train"]["zzz"] = 1
    line = first_problem(bad, SCHEMA)
    assert line.endswith("(also unknown here: zzz)")
    bad["platforms"]["local"]["threads"] = "two"
    assert first_problem(bad, SCHEMA).endswith("(and 1 more: fix this one and rerun)")
    bad = copy.deepcopy(config)
    bad["trian"] = {}
    line = first_problem(bad, SCHEMA)
    assert line == "config: trian: unknown key (did you mean 'train'?)"


def test_a_number_yaml_reads_as_text_gets_the_fix(config):
    bad = copy.deepcopy(config)
    bad["train"]["lr"] = yaml.safe_load("lr: 1e-3")["lr"]  # PyYAML: '1e-3' (a string)
    line = first_problem(bad, SCHEMA)
    assert line.startswith("config: train.lr: '1e-3' is a string, not a number") and "0.001" in line
    assert "\n" not in line


def test_an_unknown_algorithm_is_named_with_the_nearest(config):
    bad = copy.deepcopy(config)
    bad["experiments"][0]["algorithms"] = ["sync_easdg"]
    found = problems(bad, yaml.safe_load(SCHEMA.read_text()))
    assert any("experiments[0].algorithms[0]" in line and "did you mean 'sync_easgd'" in line for line in found)


def test_a_swept_key_with_a_typo_or_a_bad_value_is_one_line(config):
    bad = copy.deepcopy(config)
    bad["experiments"][0]["train"] = {"lrr": [0.01, 0.05]}
    assert first_problem(bad, SCHEMA) == "config: experiments[0].train.lrr: unknown key (did you mean 'lr'?)"
    bad["experiments"][0]["train"] = {"lr": [0.01, -1]}
    line = first_problem(bad, SCHEMA)
    assert line.startswith("config: experiments[0].train.lr") and "\n" not in line
    good = copy.deepcopy(config)
    good["experiments"][0]["train"] = {**good["experiments"][0]["train"], "lr": [0.01, 0.05, 0.1]}
    assert first_problem(good, SCHEMA) is None
    top = copy.deepcopy(config)
    top["train"]["lr"] = [0.01, 0.05]  # a sweep is a block's: the top-level train takes one value
    assert first_problem(top, SCHEMA).startswith("config: train.lr")
