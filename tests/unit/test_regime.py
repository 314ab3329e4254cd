"""The regime map's and the sensitivity sweeps' part of the workflow (scaledl.grid.regime, .sensitivity): their
checks, the runs they read, their options."""

from __future__ import annotations

import shlex

import pytest
from shipped_configs import shipped

from scaledl.grid import regime, sensitivity
from scaledl.grid.keys import RUNS_STAGE, TUNE_STAGE, GridError, RunKey
from scaledl.grid.runs import expand
from scaledl.sim.platform import CONSTANTS


def test_the_map_is_read_only_when_enabled_and_checked():
    config = shipped("paper_simulated.yaml")
    assert regime.map_of(config)["claim"] == "sync_easgd3:easgd"
    regime.check(config)
    assert regime.map_of({"regime_map": {"enabled": False}}) is None and regime.map_of({}) is None
    regime.check({"platforms": {}})  # no map, nothing to check
    for change, words in (
        ({"platform": "local"}, "not a platform of kind simulated"),
        ({"claim": "sync_easgd3:nope"}, "'nope' is not an algorithm"),
        ({"claim": "async_easgd:async_sgd"}, "depend on the timing"),
    ):
        with pytest.raises(GridError, match=words):
            regime.check({**config, "regime_map": {**config["regime_map"], **change}})


def key(algorithm, seed=0, setting="", platform="sim", stage=RUNS_STAGE, workers=8, model="lenet"):
    return RunKey("mnist", model, algorithm, platform, workers, seed, setting, stage)


def test_the_map_reads_both_sides_on_its_cell_tuned_where_tuned():
    config = {"regime_map": {"enabled": True, "claim": "sync_easgd3:easgd", "platform": "sim", "dataset": "mnist",
                             "model": "lenet", "workers": 8}}  # fmt: skip
    runs = [
        key("sync_easgd3"),
        key("easgd", 1),
        key("sync_sgd"),  # not a side
        key("easgd", platform="gpu"),  # another platform
        key("easgd", workers=4),  # another P
        key("easgd", model="mlp"),  # another model
        key("easgd", setting="t00", stage=TUNE_STAGE),  # a trial
    ]
    assert regime.run_files(runs, config, "x") == [
        "results/x/runs/mnist/lenet/sync_easgd3/sim/p8/s0/run.json",
        "results/x/runs/mnist/lenet/easgd/sim/p8/s1/run.json",
    ]
    tuned = [*runs, key("easgd", setting="tuned"), key("sync_easgd3", setting="tuned")]
    assert regime.run_files(tuned, config, "x") == [
        "results/x/runs/mnist/lenet/easgd/sim/p8/tuned/s0/run.json",
        "results/x/runs/mnist/lenet/sync_easgd3/sim/p8/tuned/s0/run.json",
    ]
    assert regime.run_files(runs, {"regime_map": {"enabled": False}}, "x") == []


def test_the_shipped_map_needs_the_mnist_runs_and_then_reads_the_tuned_ones(tmp_path, monkeypatch):
    config = shipped("paper_simulated.yaml")
    monkeypatch.chdir(tmp_path)  # a checkout's own data/raw/mnist must not decide
    assert regime.run_files(expand(config), config, "paper_simulated") == []  # its blocks need data/raw/mnist
    (tmp_path / "data/raw/mnist").mkdir(parents=True)
    found = regime.run_files(expand(config), config, "paper_simulated")
    assert found and all("/mnist/lenet/" in path and "/gpu8_sim/p8/tuned/" in path for path in found)
    assert {path.split("/")[5] for path in found} == {"sync_easgd3", "easgd"}


def test_the_maps_options_and_data():
    config = shipped("paper_simulated.yaml")
    assert regime.data_file(config) == "data/hdf5/mnist.h5"
    flags = shlex.split(regime.flags(config, "x"))
    steps = str(config["regime_map"]["steps"])
    assert flags == [
        "--bandwidth-factors", "0.01,0.1,1,10", "--claim", "sync_easgd3:easgd", "--model", "lenet",
        "--platform-file", config["platforms"]["gpu8_sim"]["platform_file"], "--speed-factors", "0.1,1,10",
        "--steps", steps, "--workers", "8",
    ]  # fmt: skip


def test_the_sensitivity_sweeps_are_checked_and_read_their_pairs_runs(tmp_path, monkeypatch):
    config = shipped("paper_simulated.yaml")
    spec = sensitivity.spec_of(config)
    assert spec["constants"] == list(CONSTANTS)  # the schema's default and enum: every constant there is
    sensitivity.check(config)
    for change, words in (
        ({"platform": "local"}, "not a platform of kind simulated"),
        ({"claims": ["sync_easgd3:nope"]}, "'nope' is not an algorithm"),
        ({"claims": ["async_easgd:sync_sgd"]}, "set whole_runs: true"),
        ({"bands": False}, "asynchronous_claims sweep the validated bands alone; set bands: true"),
    ):
        with pytest.raises(GridError, match=words):
            sensitivity.check({**config, "sensitivity": {**spec, **change}})
    sensitivity.check({**config, "sensitivity": {**spec, "claims": ["async_easgd:sync_sgd"], "whole_runs": True}})
    monkeypatch.chdir(tmp_path)  # a checkout's own data/raw/mnist must not decide
    assert sensitivity.result_files(expand(config), config, "paper_simulated") == []  # its blocks need mnist
    (tmp_path / "data/raw/mnist").mkdir(parents=True)
    runs = expand(config)
    assert sensitivity.result_files(runs, config, "p") == [
        f"results/p/report/sensitivity/{pair}/sensitivity.csv"
        for pair in ("sync_easgd3-vs-easgd", "sync_easgd3-vs-sync_easgd2", "async_easgd-vs-async_sgd",
                     "async_measgd-vs-async_msgd", "hogwild_easgd-vs-hogwild_sgd")
    ]  # fmt: skip
    asynchronous = shlex.split(sensitivity.flags(config, "async_easgd-vs-async_sgd", "x"))
    assert "--whole-runs" in asynchronous and "--bands-only" in asynchronous  # whole runs over the bands alone
    found = sensitivity.run_files(runs, config, "p", "sync_easgd3-vs-easgd")
    assert found and {path.split("/")[5] for path in found} == {"sync_easgd3", "easgd"}
    assert all("/gpu8_sim/p8/tuned/" in path for path in found)
    flags = shlex.split(sensitivity.flags(config, "sync_easgd3-vs-easgd", "x"))
    assert flags[flags.index("--claim") + 1] == "sync_easgd3:easgd" and flags[flags.index("--factors") + 1] == "0.5,2"
    assert (
        "--whole-runs" not in flags
        and "--max-steps" not in flags
        and sensitivity.data_file(config).endswith("mnist.h5")
    )
    assert shlex.split(sensitivity.claims_flags(["a.csv", "b.csv"])) == [
        "--sensitivity",
        "a.csv",
        "--sensitivity",
        "b.csv",
    ]
