"""The `scaledl train` command line written beside its parser (scaledl.config.to_argv): what it writes is
what the parser built from the same TrainConfig fields reads back."""

from __future__ import annotations

import argparse

import pytest

from scaledl.config import NEGATABLE, TrainConfig, as_argv, defaults, flag_of, to_argv


def test_the_argv_is_sorted_and_leaves_null_and_false_to_the_defaults():
    assert to_argv({"lr": 0.1, "batch_size": 8, "momentum": None, "nesterov": False}) == [
        "--batch-size",
        "8",
        "--lr",
        "0.1",
    ]
    assert to_argv({"nesterov": True, "overlap": False}) == ["--nesterov", "--no-overlap"]  # overlap: negatable
    assert NEGATABLE == {"overlap"}
    assert as_argv({"shape": [1, 28, 28], "raw": "my data"}) == ["--raw", "my data", "--shape", "1,28,28"]
    assert flag_of("fast_memory_gb") == "--fast-memory-gb"


def test_a_setting_the_parser_does_not_know_is_refused():
    with pytest.raises(ValueError, match="not a scaledl train setting: learning_rate"):
        to_argv({"learning_rate": 0.1})


def test_the_train_parser_reads_back_what_to_argv_writes():
    from scaledl.train.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    settings = {"batch_size": 32, "lr": 0.05, "tau": 4, "overlap": False, "nesterov": True, "momentum": 0.9,
                "setting": "lr0.05-tau4", "sweep": "lr,tau", "device": "cpu", "threads": 2}  # fmt: skip
    required = ["--data", "d.h5", "--model", "lenet", "--algorithm", "easgd", "--out-dir", "out"]
    parsed = vars(parser.parse_args([*required, *to_argv(settings)]))
    assert {name: parsed[name] for name in settings} == settings
    untouched = set(defaults()) - set(settings) - {"data", "model", "algorithm", "out_dir"}
    assert {name: parsed[name] for name in untouched} == {name: defaults()[name] for name in untouched}
    assert set(parsed) == {f for f in TrainConfig.__dataclass_fields__}
