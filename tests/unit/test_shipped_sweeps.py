"""The shipped configs' sweeps over P, expanded as the workflow does (no Snakemake run): a timing sweep runs
the same number of steps at every P."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from scaledl.algorithms import ALGORITHMS
from scaledl.data import datasets
from scaledl.grid import runs as grid
from scaledl.grid.keys import run_label

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted(p.name for p in (REPO / "config").glob("*.yaml") if p.name != "config.yaml")


def expanded(name: str) -> dict:
    """config/NAME merged over config/config.yaml and validated with the schema's defaults, as
    `snakemake --configfile config/NAME` sees it, expanded into its runs."""
    from snakemake.utils import update_config, validate

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    if name != "config.yaml":
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    validate(config, schema=str(REPO / "workflow/schemas/config.schema.yaml"))
    return config, grid.expand(config)


def steps_budget(key, settings: dict, config: dict) -> float:
    """The steps a run can take before its step or epoch budget ends it (the loader's steps per epoch:
    the smallest shard's whole batches)."""
    images = datasets.train_images(key.dataset, config["datasets"].get(key.dataset) or {})
    batch = settings["batch_size"] or 64
    replicated = ALGORITHMS[key.algorithm].preset.get("data") == "replicated"
    steps_per_epoch = (images if replicated else images // key.workers) // batch
    budgets = [settings["max_steps"], settings["epochs"] and settings["epochs"] * steps_per_epoch]
    return min(b for b in budgets if b) if any(budgets) else float("inf")


@pytest.mark.parametrize("name", ["config.yaml", *CONFIGS])
def test_a_timing_sweep_runs_the_same_steps_at_every_p(name):
    """A sweep over P that measures time per step (no target accuracy) gives every P the same steps: an
    epoch budget would end the runs with the smallest shards (weak scaling: shard ∝ 1/P) sooner."""
    config, runs = expanded(name)
    timed = {
        key: s
        for key, s in runs.items()
        if s["target_accuracy"] is None
        and datasets.train_images(key.dataset, config["datasets"].get(key.dataset) or {})
    }
    cell = lambda key: key._replace(workers=0)
    sweeps = 0
    for _, members in itertools.groupby(sorted(timed, key=lambda k: (str(cell(k)), k.workers)), key=cell):
        members = list(members)
        if len(members) < 2:
            continue
        sweeps += 1
        steps = {key.workers: steps_budget(key, timed[key], config) for key in members}
        assert len(set(steps.values())) == 1, f"{name}: {run_label(members[0])}: steps by P {steps}"
    if name == "paper.yaml":  # the 64-node weak-scaling sweep of Sync EASGD, 3 seeds
        assert sweeps == 3
