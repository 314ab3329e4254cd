"""Config mistakes get one line naming the key, what is wrong, and a fix (no schema dump)."""

import copy
from pathlib import Path

import pytest
import yaml

from scaledl.grid.check import first_problem, problems

REPO = Path(__file__).resolve().parents[2]
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


def test_plugin_names_are_known_names_and_a_misspelt_one_gets_the_nearest(config, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_models.py").write_text("def tiny_mlp(in_shape, classes): ...\n")
    mine = copy.deepcopy(config)
    mine["plugins"] = {"models": {"tiny_mlp": "my_models:tiny_mlp"}, "datasets": {"survey": {}}}
    mine["experiments"] = [{"dataset": "survey", "models": ["tiny_mlp", "lenet"]}]
    assert first_problem(mine, SCHEMA) is None

    mine["experiments"][0]["models"] = ["tiny_mpl"]
    line = first_problem(mine, SCHEMA)
    assert line.startswith("config: experiments[0].models[0]: 'tiny_mpl' is not one of lenet,")
    assert line.endswith("tiny_mlp (did you mean 'tiny_mlp'?)")
    mine["experiments"][0]["models"] = ["lenet"]
    mine["experiments"][0]["dataset"] = "survy"
    assert first_problem(mine, SCHEMA).endswith("(did you mean 'survey'?)")
    mine["experiments"][0]["dataset"] = "mnits"  # a built-in's typo is still refused
    assert first_problem(mine, SCHEMA).endswith("(did you mean 'mnist'?)")


@pytest.mark.parametrize(
    "plugins, expected",
    [
        ({"models": {"lenet": "my_models:lenet"}}, "config: plugins.models.lenet: 'lenet' is a built-in model's name"),
        ({"models": {"mine": "absent_mod:f"}}, "config: plugins.models.mine: no module 'absent_mod' to import"),
        ({"models": {"mine": "my_models"}}, "config: plugins.models.mine: 'my_models' is not MODULE:FUNCTION"),
        ({"datasets": {"mnist": {}}}, "config: plugins.datasets.mnist: 'mnist' is a built-in dataset's name"),
        ({"datasets": {"mine": {"converter": "gone.sub:f"}}}, "plugins.datasets.mine: no module 'gone.sub'"),
        ({"datasets": {"mine": {"convertr": "my_models:f"}}}, "unknown key (did you mean 'converter'?)"),
    ],
)
def test_a_plugin_that_cannot_work_stops_the_config(config, tmp_path, monkeypatch, plugins, expected):
    monkeypatch.chdir(tmp_path)
    mine = copy.deepcopy(config)
    mine["plugins"] = plugins
    line = first_problem(mine, SCHEMA)
    assert line is not None and expected in line and "\n" not in line
