"""Deployment the HPC ways: `--sdm conda` (workflow/envs/scaledl.yaml and its post-deploy script) and
`--sdm apptainer` (workflow/envs/scaledl.def, the rules' `container:` and the MPI rules' ranks).

Neither conda nor Apptainer runs here: the conda environment's own step, the post-deploy script, runs in
a plain venv standing in for the environment, and a stand-in `apptainer` records each call and runs the
command on the host, so a workflow run shows every job going through the image.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from test_workflow import REPO, output_of, workdir  # noqa: F401  (workdir is a fixture)

from workflow_env import snakemake_env

ENV_FILE = REPO / "workflow/envs/scaledl.yaml"
POST_DEPLOY = REPO / "workflow/envs/scaledl.post-deploy.sh"
DEFINITION = REPO / "workflow/envs/scaledl.def"
# pyproject names → conda-forge names, where they differ; the workflow tools themselves are not in the env
CONDA_NAMES = {"torch": "pytorch"}
NOT_IN_ENV = {"snakemake", "snakemake-executor-plugin-slurm"}


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower() for spec in requirements}


def test_the_conda_environment_holds_every_dependency_and_its_post_deploy_script():
    env = yaml.safe_load(ENV_FILE.read_text())
    assert env["channels"] == ["conda-forge"]
    conda = requirement_names(env["dependencies"])
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    needed = {CONDA_NAMES.get(name, name) for name in requirement_names(pyproject["project"]["dependencies"])}
    assert needed - NOT_IN_ENV <= conda, needed - NOT_IN_ENV - conda
    assert {"python", "mpich", "pip", "setuptools", "wheel"} <= conda
    # Snakemake runs ENV.post-deploy.sh beside ENV.yaml, in the new environment, after creating it
    assert POST_DEPLOY == ENV_FILE.with_suffix("").with_name(ENV_FILE.stem + ".post-deploy.sh")
    common = (REPO / "workflow/rules/common.smk").read_text()
    assert 'os.environ.setdefault("SCALEDL_SOURCE", workflow.basedir)' in common


def stand_in_environment(tmp_path: Path) -> Path:
    """A venv of its own standing in for the conda environment: its python first on PATH, pip and
    setuptools (the environment's) visible from the test's interpreter, no scaledl installed."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (site,) = env.glob("lib/python3*/site-packages")
    host = next(Path(p) for p in sys.path if p.endswith("site-packages") and (Path(p) / "pip").is_dir())
    (site / "host_tools.pth").write_text(f"{host}\n")  # a plain path: the host's .pth hooks (scaledl) stay off
    return env


@pytest.mark.timeout(300)
def test_the_post_deploy_script_makes_the_checkout_importable_in_the_environment(tmp_path):
    source = tmp_path / "checkout"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "src"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, source / name)
    env = stand_in_environment(tmp_path)
    # the environment as conda activates it: its bin/ first on PATH, nothing else on the import path
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SCALEDL_SOURCE")}
    base["PATH"] = f"{env / 'bin'}{os.pathsep}{os.environ['PATH']}"
    where = [str(env / "bin/python"), "-c", "import scaledl; print(scaledl.__file__)"]

    def run(command, **extra):
        return subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=base | extra)

    assert run(where).returncode != 0  # not there yet
    unset = run(["bash", str(POST_DEPLOY)])
    assert unset.returncode != 0 and "SCALEDL_SOURCE" in unset.stderr
    deployed = run(["bash", str(POST_DEPLOY)], SCALEDL_SOURCE=str(source), PIP_NO_INDEX="1")
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    found = run(where)
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()) == source / "src/scaledl/__init__.py"  # editable: the checkout's code


def definition_sections(text: str) -> tuple[dict[str, str], dict[str, list[str]]]:
    """(header keywords, {section: its lines}) of an Apptainer definition file."""
    header, sections, current = {}, {}, None
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line.startswith("%"):
            current = line[1:].split()[0]
            sections[current] = []
        elif current is None:
            key, _, value = line.partition(":")
            header[key.strip()] = value.strip()
        else:
            sections[current].append(line.strip())
    return header, sections


def test_the_apptainer_definition_installs_the_project_cpu_torch_mpich_and_numactl():
    header, sections = definition_sections(DEFINITION.read_text())
    assert header["Bootstrap"] == "docker" and header["From"].startswith("python:3.11")
    arguments = dict(line.split("=", 1) for line in sections["arguments"])
    assert arguments["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"  # CPU-only by default
    # %files sources are relative to where `apptainer build` runs: the repository root
    for line in sections["files"]:
        source, destination = line.split()
        assert (REPO / source).exists() and destination.startswith("/opt/scaledl/"), line
    post = "\n".join(sections["post"])
    assert "--index-url {{ TORCH_INDEX }} torch torchvision" in post
    assert 'pip install --no-cache-dir "/opt/scaledl[mpich]"' in post and "numactl" in post
    assert any("import scaledl, torch, mpi4py" in line for line in sections["test"])


FAKE_APPTAINER = """#!{python}
# Stands in for apptainer: records each call, then runs the command (after the image) on the host.
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("apptainer version 1.3.4")
    sys.exit(0)
with open(os.environ["APPTAINER_RECORD"], "a") as record:
    record.write(json.dumps(args) + "\\n")
command = args[args.index(os.environ["SCALEDL_IMAGE"]) + 1 :]
os.execvp(command[0], command)
"""


# One short training: a plain rule, a local rule and an MPI rule.
ONE_RUN = """
experiments:
  - {dataset: synthetic, algorithms: [sync_sgd], workers: [2]}
datasets:
  synthetic: {train_count: 64, test_count: 32}
platforms:
  local: {device: cpu, threads: 1}
train: {max_steps: 2, batch_size: 16, eval_every: 2}
"""


@pytest.mark.workflow
@pytest.mark.timeout(600)
def test_with_sdm_apptainer_every_job_and_every_rank_runs_in_the_image(workdir):
    fake = workdir / "fake_bin"
    fake.mkdir()
    (fake / "apptainer").write_text(FAKE_APPTAINER.format(python=sys.executable))
    (fake / "apptainer").chmod(0o755)
    image = workdir / "images/scaledl.sif"
    image.parent.mkdir()
    image.write_bytes(b"")
    record = workdir / "apptainer.jsonl"
    env = snakemake_env(OMP_NUM_THREADS="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1")
    env.update(PATH=f"{fake}{os.pathsep}{env['PATH']}", SCALEDL_IMAGE=str(image), APPTAINER_RECORD=str(record))
    (workdir / "config/one.yaml").write_text(ONE_RUN)
    targets = ["results/one/tables/summary.csv"]
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "--cores", "2", "--sdm", "apptainer"]
        + ["--configfile", "config/one.yaml"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert result.returncode == 0, output_of(result)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert all(call[0] == "exec" and str(image) in call for call in calls), calls
    # Snakemake wraps the plain rules' commands (prepare, a local rule: aggregate) in the image
    wrapped = [call for call in calls if "-c" in call]
    assert sorted(re.search(r"scaledl (\w+)", call[-1]).group(1) for call in wrapped) == ["aggregate", "prepare"]
    # the training starts its ranks in it itself: the image's mpiexec here (no Slurm), and its command is
    # not wrapped a second time (netbench's ranks go the same way: common.smk's netbench_launcher)
    (ranks,) = [call for call in calls if "mpiexec" in call]
    assert ranks[ranks.index("mpiexec") :][:3] == ["mpiexec", "-n", "2"] and "train" in ranks
