"""The Snakemake workflow: lint, dry runs, config validation, and one tiny real run.

Each test works in a fresh copy of the workflow files under tmp_path, so the
checkout never gets a .snakemake/, results/ or logs/ from the tests. Snakemake
runs as a subprocess with the interpreter's bin/ first on PATH, so that the
rules' `python` and `mpiexec` are the ones of this environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from scaledl.algorithms import ALGORITHMS

# The nine algorithms the default config compares (presets such as sync_easgd1 are variants of them).
BASE_ALGORITHMS = {key: info for key, info in ALGORITHMS.items() if not info.preset}

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
WORKFLOW_FILES = ["Snakefile", "workflow", "config", "slurm"]


@pytest.fixture
def workdir(tmp_path):
    for name in WORKFLOW_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / name)
        else:
            shutil.copy2(source, tmp_path / name)
    return tmp_path


def snakemake(workdir, *args, timeout=120):
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "OMP_NUM_THREADS": "1",
        "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",  # MPICH busy-polls; yield when ranks share cores
    }
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )


def output_of(result):
    return result.stdout + result.stderr


def job_counts(result):
    """The `Job stats` table of a (dry) run as {rule: count}."""
    table = output_of(result).split("Job stats:", 1)[1]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)$", table, re.M) if rule != "total"}


def write_config(workdir, text):
    path = workdir / "config/custom.yaml"
    path.write_text(text)
    return "config/custom.yaml"


# ---- static checks ---------------------------------------------------------


def schema():
    return yaml.safe_load(SCHEMA.read_text())


def test_schema_algorithm_enum_is_the_registry():
    items = schema()["$defs"]["experiment"]["properties"]["algorithms"]["items"]
    assert items["enum"] == list(ALGORITHMS)


def test_schema_model_enum_is_the_registry():
    models = pytest.importorskip("scaledl.models")
    items = schema()["$defs"]["experiment"]["properties"]["models"]["items"]
    assert sorted(items["enum"]) == sorted(models.MODELS)


def test_schema_datasets_are_the_converters():
    from scaledl.data.converters import CONVERTERS

    spec = schema()
    assert spec["$defs"]["experiment"]["properties"]["dataset"]["enum"] == list(CONVERTERS)
    assert list(spec["properties"]["datasets"]["properties"]) == list(CONVERTERS)


def object_schemas(node, path="schema"):
    """Every (path, schema) in the tree that declares properties."""
    if isinstance(node, dict):
        if "properties" in node:
            yield path, node
        for key, value in node.items():
            yield from object_schemas(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from object_schemas(value, f"{path}[{index}]")


def test_schema_is_closed_and_documented():
    for path, node in object_schemas(schema()):
        assert node.get("additionalProperties") is False, f"{path} is not closed"
        for key, prop in node["properties"].items():
            if set(prop) == {"$ref"}:  # an override pointing at a documented key
                continue
            assert "description" in prop, f"{path}.{key} has no description"
            assert "default" in prop, f"{path}.{key} has no default"


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci/run").read_text()
    command = next(line for line in ci.splitlines() if "pytest" in line and not line.startswith("#"))
    assert command.strip() in (REPO / "README.md").read_text()


# ---- Snakemake ---------------------------------------------------------------


@pytest.mark.workflow
def test_lint(workdir):
    result = snakemake(workdir, "--lint")
    assert result.returncode == 0, output_of(result)


@pytest.mark.workflow
def test_dry_run_default_config(workdir):
    result = snakemake(workdir, "-n", "-p")
    assert result.returncode == 0, output_of(result)
    assert job_counts(result) == {
        "prepare": 1, "train": len(BASE_ALGORITHMS), "aggregate": 1, "plot_accuracy_vs_time": 1, "all": 1,
    }
    text = output_of(result)
    for algorithm, info in BASE_ALGORITHMS.items():
        assert f"results/runs/digits/lenet/{algorithm}/local/p2/s0/run.json" in text
        ranks = 3 if info.needs_master else 2
        assert f"mpiexec -n {ranks} python -m mpi4py -m scaledl train --data data/hdf5/digits.h5 --model lenet --algorithm {algorithm}" in text
    assert "python -m scaledl prepare digits --out data/hdf5/digits.h5" in text


@pytest.mark.workflow
def test_dry_run_grid(workdir):
    config = write_config(workdir, """
experiments:
  - dataset: synthetic
    algorithms: [sync_sgd, sync_easgd]
    workers: [1, 2, 4]
    seeds: [0, 1]
    train: {lr: 0.1}
""")
    result = snakemake(workdir, "-n", "-p", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    assert job_counts(result)["train"] == 2 * 3 * 2
    assert "mpiexec -n 4 python -m mpi4py" in output_of(result)
    assert "--lr 0.1" in output_of(result)


@pytest.mark.workflow
@pytest.mark.parametrize(
    "text, named",
    [
        ("experiments:\n  - algorithms: [sync_sgd, bogus_algo]\n", "bogus_algo"),
        ("train:\n  learning_rate: 0.1\n", "learning_rate"),
        ("experiments:\n  - train: {momentun: 0.5}\n", "momentun"),
        ("experiments:\n  - dataset: svhn\n", "svhn"),
        ("experiments:\n  - platforms: [gpu]\n", "'gpu'"),
        ("train:\n  max_steps: null\n", "no budget"),
        ("experiments:\n  - {}\n  - train: {lr: 0.5}\n", "different `train` settings"),
    ],
)
def test_invalid_config_fails_naming_the_value(workdir, text, named):
    result = snakemake(workdir, "-n", "--configfile", write_config(workdir, text))
    assert result.returncode != 0
    assert named in output_of(result)


@pytest.mark.workflow
def test_slurm_profile_dry_run(workdir):
    result = snakemake(workdir, "-n", "-p", "--profile", "slurm")
    assert result.returncode == 0, output_of(result)
    assert "srun --mpi=pmi2 -n 2 python -m mpi4py -m scaledl train" in output_of(result)


@pytest.mark.workflow
@pytest.mark.timeout(900)
def test_tiny_run_end_to_end(workdir):
    result = snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml", timeout=600)
    logs = "\n".join(f"== {log}\n{log.read_text()}" for log in sorted(workdir.glob("logs/**/*.log")))
    assert result.returncode == 0, output_of(result) + logs

    summary = pd.read_csv(workdir / "results/tables/summary.csv")
    assert sorted(summary["algorithm"]) == ["sync_easgd", "sync_sgd"]
    assert set(summary["dataset"]) == {"synthetic"} and set(summary["platform"]) == {"local"}
    assert (summary["workers"] == 2).all() and (summary["steps"] > 0).all()
    assert summary["final_test_accuracy"].between(0, 1).all()
    assert (workdir / "results/tables/summary.md").read_text().count("\n") == 2 + len(summary)
    assert (workdir / "results/plots/accuracy_vs_time.png").read_bytes()[:4] == b"\x89PNG"
    for algorithm in ("sync_sgd", "sync_easgd"):
        assert (workdir / f"benchmarks/train/synthetic/lenet/{algorithm}/local/p2/s0.tsv").exists()

    again = snakemake(workdir, "-n", "--configfile", "config/test.yaml")
    assert "Nothing to be done" in output_of(again)
