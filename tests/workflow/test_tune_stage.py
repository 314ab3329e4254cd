"""The tune stage through Snakemake: round 0, the confirmation's checkpoint, and the choice made over both.

One tiny tuned block (synthetic images, one worker, two η, a few steps) run to its chosen.csv in a copy of the
workflow files: the checkpoint chain (tune_round → tune_confirm → tune) is what the unit tests cannot reach.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from dry_runs import copy_workflow

from workflow_env import snakemake_env

TUNED = """\
name: tuned
experiments:
  - {dataset: synthetic, models: [lenet], algorithms: [sync_sgd], platforms: [local], workers: [1], seeds: [0],
     tuned: true}
datasets:
  synthetic: {train_count: 256, test_count: 64, shape: [1, 28, 28], classes: 10, seed: 0}
platforms:
  local: {device: cpu, threads: 1, runtime: 10}
train: {max_steps: 6, target_accuracy: 0.05, batch_size: 16, eval_every: 3}
tune:
  lr_grid: {low: 0.05, factor: 2, count: 2}
  extend: 0
  seeds: 1
  confirm: {seeds: 2, misses: 0}
  train: {max_steps: 6, target_accuracy: 0.05, eval_every: 3}
netbench: {enabled: false}
"""


@pytest.mark.workflow
@pytest.mark.timeout(300)
def test_the_best_two_points_run_again_on_the_confirmations_seeds_and_the_choice_reads_them(tmp_path):
    workdir = copy_workflow(tmp_path)
    (workdir / "config/tuned.yaml").write_text(TUNED)
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "results/tuned/tune/chosen.csv", "--cores", "2"]
        + ["--configfile", "config/tuned.yaml"],
        cwd=workdir,
        env=snakemake_env(OMP_NUM_THREADS="1"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    tune = workdir / "results/tuned/tune"
    # a target every trial reaches (chance on 10 classes): both points are the cell's best two, both confirmed
    assert json.loads((tune / "confirm.json").read_text()) == {"synthetic/lenet/sync_sgd/local/p1": ["lr0.1", "lr0.05"]}
    seeds = sorted(p.parent.name for p in tune.glob("synthetic/lenet/sync_sgd/local/p1/*/s*/run.json"))
    assert seeds == ["s100", "s100", "s101", "s101", "s102", "s102"]  # the grid's seed, then the confirmation's
    [row] = list(csv.DictReader((tune / "chosen.csv").open()))
    assert (row["confirmed"], row["seeds"], row["reached"]) == ("True", "3", "3")
    assert "## Confirmed points" in (tune / "chosen.md").read_text()
