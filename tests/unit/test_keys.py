"""A run's name and place (scaledl.grid.keys): the one template, the key's fields, the results name."""

from __future__ import annotations

import re

import pytest

from scaledl.grid import keys
from scaledl.grid.keys import GridError, RunKey


def test_folder_log_and_benchmark_are_one_template():
    key = RunKey("mnist", "lenet", "easgd", "knl", 8, 1, "lr0.1-tau4")
    fields = {**key._asdict(), "setting": "/lr0.1-tau4", "name": "paper"}
    assert keys.run_dir(key, "paper") == keys.RUN_DIR.format(**fields)
    assert keys.run_dir(key, "paper") == "results/paper/runs/mnist/lenet/easgd/knl/p8/lr0.1-tau4/s1"
    assert keys.RUN_LOG.format(**fields) == "logs/paper/runs/mnist/lenet/easgd/knl/p8/lr0.1-tau4/s1.log"
    assert keys.RUN_BENCHMARK.format(**fields) == "benchmarks/paper/runs/mnist/lenet/easgd/knl/p8/lr0.1-tau4/s1.tsv"
    assert keys.run_dir(key._replace(setting="")) == "results/{name}/runs/mnist/lenet/easgd/knl/p8/s1"


def test_a_key_parses_its_wildcards_and_names_itself():
    wildcards = {"dataset": "digits", "model": "lenet", "algorithm": "sync_sgd", "platform": "local",
                 "workers": "4", "seed": "2", "setting": "/t03", "stage": keys.TUNE_STAGE}  # fmt: skip
    key = RunKey.parse(wildcards)
    assert key == RunKey("digits", "lenet", "sync_sgd", "local", 4, 2, "t03", "tune")
    assert key.cell == ("digits", "lenet", "sync_sgd", "local", 4)
    assert keys.run_label(key) == "tune: digits/lenet/sync_sgd/local/p4/t03/s2"
    assert keys.run_label(key._replace(stage=keys.RUNS_STAGE, setting="")) == "digits/lenet/sync_sgd/local/p4/s2"


def test_the_results_name_and_where_a_run_folder_belongs():
    assert keys.results_name({"name": "mine"}, ["config/a.yaml"]) == "mine"
    assert keys.results_name({}, ["/x/config/a.yaml", "config/short.yaml"]) == "short"
    assert keys.results_name({}) == keys.DEFAULT_NAME
    with pytest.raises(GridError, match="^name 'a b': a results folder name takes"):
        keys.results_name({"name": "a b"})
    assert keys.results_name_of("/home/u/results/paper/runs/mnist/lenet/easgd/knl/p8/s0") == "paper"
    assert keys.results_name_of("results/x.1/tune/digits/lenet/easgd/local/p2/t00/s0") == "x.1"
    assert keys.results_name_of("runs/by/hand") is None


def test_one_of_matches_exactly_its_words():
    assert keys.one_of(["b.c", "a", "a"]) == r"a|b\.c"
    assert not re.fullmatch(keys.one_of([]), "")
