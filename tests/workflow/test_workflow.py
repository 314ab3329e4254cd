"""The Snakemake workflow: lint, dry runs, config validation, and one tiny real run.

Each test works in a fresh copy of the workflow files under tmp_path, so the
checkout never gets a .snakemake/, results/ or logs/ from the tests. Snakemake
runs as a subprocess in `workflow_env.snakemake_env()`: the interpreter's bin/
first on PATH, so that the rules' `python` and `mpiexec` are the ones of this
environment, and no wait on a Slurm client with no cluster behind it. The
shipped configs' plain dry runs are run once per session, all in one go
(the `shipped_dry_runs` fixture, tests/dry_runs.py), and read from there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from dry_runs import DEFAULT, PLANNER, copy_workflow, jobs_of, resources_of

from scaledl.algorithms import ALGORITHMS, BASE_ALGORITHMS
from scaledl.grid.tune import REPLICA
from scaledl.report.catalogue import FIGURE_NAMES
from scaledl.run_record import read_run_json
from scaledl.sim.loader import available as sim_available
from workflow_env import snakemake_env

# The default config compares the nine base algorithms (presets such as sync_easgd1 are variants of them).

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


@pytest.fixture
def workdir(tmp_path):
    """A copy of the workflow's files (tests/dry_runs.copy_workflow) to run Snakemake in."""
    return copy_workflow(tmp_path)


PLANNING = {"-n", "--dry-run", "--lint", "--list-rules"}  # runs that start no job: the session's planner answers


def snakemake(workdir, *args, timeout=120):
    """`snakemake ARGS` in `workdir`: a planning run through the session's one Snakemake interpreter
    (tests/dry_runs.Planner), any other as a process of its own (runs through Slurm: tests/slurm_background.py)."""
    if PLANNING & set(args):
        return PLANNER.run(workdir, list(args), timeout)
    env = snakemake_env(
        OMP_NUM_THREADS="1",
        MPIR_CVAR_ENABLE_HEAVY_YIELD="1",  # MPICH busy-polls; yield when ranks share cores
    )
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
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
    assert sorted(items["anyOf"][0]["enum"]) == sorted(models.MODELS)


def test_schema_datasets_are_the_converters():
    from scaledl.data.converters import CONVERTERS

    spec = schema()
    assert spec["$defs"]["experiment"]["properties"]["dataset"]["anyOf"][0]["enum"] == list(CONVERTERS)
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
            if set(prop) == {"anyOf"} and all("$ref" in str(option) for option in prop["anyOf"]):
                continue  # an override: a documented key's value, or a list of them (a sweep)
            assert "description" in prop, f"{path}.{key} has no description"
            assert "default" in prop, f"{path}.{key} has no default"


def test_ci_runs_the_readme_test_command_as_a_user_does():
    """CI may install packages and build the venv, but sets no variable a user's shell would lack: whatever the
    suite needs it sets itself (a user's run of the README's command must be CI's run)."""
    ci = (REPO / ".ci/run").read_text()
    command = next(line for line in ci.splitlines() if "pytest" in line and not line.startswith("#"))
    assert command.strip() in (REPO / "README.md").read_text()
    assert not re.findall(r"^\s*(?:export|declare -x)\s+\w+", ci, flags=re.MULTILINE), "CI exports a variable"


# ---- Snakemake ---------------------------------------------------------------


@pytest.mark.workflow
def test_lint(workdir):
    result = snakemake(workdir, "--lint")
    assert result.returncode == 0, output_of(result)


@pytest.mark.workflow
def test_rule_list_is_the_snakefile_diagram(workdir):
    result = snakemake(workdir, "--list-rules")
    assert result.returncode == 0, output_of(result)
    rules = set(result.stdout.split()) - {"all", "train_single"}  # the target, and train's one-rank twin
    diagram = (REPO / "Snakefile").read_text().split("# Run:", 1)[0]
    # each arrow is `--rule-->` or `--rule (a note)-->` or `--rule, rule, rule-->`
    arrows = [re.sub(r"\(.*\)", "", arrow) for arrow in re.findall(r"--([^->]+)-->", diagram)]
    drawn = {name.strip() for arrow in arrows for name in arrow.split(",")}
    assert rules == drawn


@pytest.mark.workflow
def test_dry_run_default_config(shipped_dry_runs):
    result = shipped_dry_runs[DEFAULT]  # snakemake -n -p
    assert result.returncode == 0, output_of(result)
    assert job_counts(result) == {
        "prepare": 1,
        "train": len(BASE_ALGORITHMS),
        "aggregate": 3,  # a job per table: summary, scaling, averaging
        "plot_accuracy_vs_time": 1,
        "netbench": 1,
        "comm_model": 1,
        "claims": 1,
        "figures": 1,
        "all": 1,
    }
    text = output_of(result)
    # the network is measured on 2 ranks even though the master-based runs take 3 (no oversubscription)
    assert (
        "mpiexec -n 2 python -m mpi4py -m scaledl netbench --out results/default/netbench/local.json --max-size 16M --repeats 5"
        in text
    )
    for algorithm in BASE_ALGORITHMS:
        assert f"results/default/runs/digits/lenet/{algorithm}/local/p2/s0/run.json" in text
        ranks = 3 if ALGORITHMS[algorithm].needs_master else 2
        assert (
            f"mpiexec -n {ranks} python -m mpi4py -m scaledl train --data data/hdf5/digits.h5 --model lenet --algorithm {algorithm}"
            in text
        )
    assert "python -m scaledl prepare digits --out data/hdf5/digits.h5" in text
    for table in ("summary", "scaling", "averaging"):  # a job each, logged beside the others
        assert f"--table {table} --out results/default/tables/{table}.csv" in text
        assert f"> logs/default/aggregate/{table}.log 2>&1" in text
    # the figures job writes, and `all` asks for, every figure of the catalogue (and no other)
    assert set(re.findall(r"results/default/report/figures/(\w+)\.png", text)) == set(FIGURE_NAMES)


@pytest.mark.workflow
def test_every_shipped_config_gives_every_tuned_method_the_same_grid(shipped_dry_runs):
    """The tune stage's first round as `snakemake -n` plans it: per config, every tuned algorithm (one of a
    numerically identical set) the same η values and as many trial seeds, on every cell; the same seeds, but for
    the A/A's replica (tuned apart), whose seeds no other trial uses."""
    tuned = 0
    for key, result in shipped_dry_runs.items():
        assert result.returncode == 0, output_of(result)
        jobs = jobs_of(output_of(result)).values()
        trials = [
            job["wildcards"] for job in jobs if job["rule"].startswith("train") and "stage=tune" in job["wildcards"]
        ]
        grids: dict[str, set] = {}
        for wildcards in trials:
            fields = resources_of(wildcards)  # "name=..., dataset=..., setting=/lr0.004, seed=0" as a mapping
            cell = (fields["dataset"], fields["model"], fields["platform"], fields["workers"])
            grids.setdefault(f"{cell} {fields['algorithm']}", set()).add((fields["setting"], fields["seed"]))
        replica = {name: grid for name, grid in grids.items() if name.endswith(f" {REPLICA}")}
        others = {name: grid for name, grid in grids.items() if name not in replica}
        assert len({frozenset(grid) for grid in others.values()}) <= 1, (key, grids)
        for grid in replica.values():  # the same points, the same count of seeds, none of the others' seeds
            [other] = {frozenset(grid) for grid in others.values()}
            assert {s for s, _ in grid} == {s for s, _ in other} and len(grid) == len(other), key
            assert not {seed for _, seed in grid} & {seed for _, seed in other}, key
        grids = others
        tuned += bool(grids)
        if key == "paper_small.yaml":
            [grid] = {frozenset(grid) for grid in grids.values()}
            lrs = sorted(float(setting.removeprefix("/lr")) for setting, _ in grid)
            assert lrs[0] == 0.001 and lrs[-1] == 0.256 and len(set(lrs)) == 9 and len(grid) == 9 * 2
    assert tuned >= 2  # paper_small, with and without the Slurm profile


@pytest.mark.workflow
def test_dry_run_grid(workdir):
    config = write_config(
        workdir,
        """
experiments:
  - dataset: synthetic
    algorithms: [sync_sgd, sync_easgd]
    workers: [1, 2, 4]
    seeds: [0, 1]
    train: {lr: 0.1, max_steps: 10}
""",
    )
    result = snakemake(workdir, "-n", "-p", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    counts = job_counts(result)
    # one-rank runs start without a launcher (rule train_single); the rest under mpiexec
    assert (counts["train"], counts["train_single"]) == (2 * 2 * 2, 2 * 1 * 2)
    text = output_of(result)
    assert "mpiexec -n 4 python -m mpi4py" in text
    assert (
        "\npython -m mpi4py -m scaledl train --data data/hdf5/synthetic.h5 --model lenet --algorithm sync_sgd --seed 0 --platform local --expect-ranks 1 --out-dir results/custom/runs/synthetic/lenet/sync_sgd/local/p1/s0"
        in text.replace("Shell command: ", "\n")
    )
    assert "--lr 0.1" in text


@pytest.mark.workflow
def test_dry_run_strong_scaling_splits_the_global_batch(workdir):
    config = write_config(
        workdir,
        """
experiments:
  - dataset: synthetic
    algorithms: [sync_easgd, easgd]
    workers: [2, 4]
    scaling: strong
    global_batch: 64
    train: {max_steps: 10}
""",
    )
    result = snakemake(workdir, "-n", "-p", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    text = output_of(result)
    for algorithm, ranks in (("sync_easgd", 0), ("easgd", 1)):
        for workers, batch in ((2, 32), (4, 16)):
            assert re.search(
                rf"mpiexec -n {workers + ranks} .* --algorithm {algorithm} .*/p{workers}/s0 .*--batch-size {batch} ",
                text,
            ), (algorithm, workers)


# A config with one mistake each, and what its one line must name.
INVALID_CONFIGS = [
    ("experiments:\n  - algorithms: [sync_sgd, bogus_algo]\n", "bogus_algo"),
    ("train:\n  learning_rate: 0.1\n", "learning_rate"),
    ("experiments:\n  - train: {momentun: 0.5}\n", "momentun"),
    ("experiments:\n  - dataset: svhn\n", "svhn"),
    ("experiments:\n  - platforms: [gpu]\n", "'gpu'"),
    ("experiments:\n  - {}\ntrain:\n  max_steps: null\n", "no budget"),
    ("experiments:\n  - {}\n  - train: {lr: 0.5}\n", "different `train` settings"),
    ("experiments:\n  - nodes: [2]\n", "list `workers` instead of `nodes`"),
    (
        "experiments:\n  - {nodes: [1], workers: [2], platforms: [c]}\n"
        "platforms:\n  c: {kind: cpu, ranks_per_node: 2}\n",
        "both `workers` and `nodes`",
    ),
    ("experiments:\n  - scaling: strong\n", "no global_batch"),
    ("experiments:\n  - {scaling: strong, global_batch: 100, workers: [3]}\n", "does not split evenly over 3"),
    ("experiments:\n  - global_batch: 64\n", "scaling is weak"),
    ("experiments:\n  - platforms: [g]\nplatforms:\n  g: {kind: gpu}\n", "needs gpus_per_node"),
    (
        "experiments:\n  - platforms: [g]\nplatforms:\n  g: {kind: gpu, gpus_per_node: 4}\n",
        "kind gpu needs cores_per_node",
    ),
    (
        "experiments:\n  - {platforms: [k], algorithms: [easgd]}\n"
        "platforms:\n  k: {kind: knl, ranks_per_node: 4, cores_per_node: 68, master_share: false}\n",
        "has master_share: false",
    ),
    (
        "experiments:\n  - platforms: [k]\n"
        "platforms:\n  k: {kind: knl, ranks_per_node: 4, mem_mb_per_node: 86000, mem_mb_per_cpu: 1400}\n",
        "sets both mem_mb_per_node and mem_mb_per_cpu",
    ),
    ("platforms:\n  local: {kind: cluster}\n", "cluster"),
    (
        "experiments:\n  - {platforms: [k], nodes: [1], algorithms: [easgd]}\n"
        "platforms:\n  k: {kind: knl, ranks_per_node: 4, threads: 17, cores_per_node: 68}\n",
        "5 × 17 threads exceed cores_per_node 68",
    ),
    ("platforms:\n  local: {numactl: '-m 1; rm -rf x'}\n", "numactl"),
]


@pytest.fixture(scope="module")
def invalid_config_runs(tmp_path_factory):
    """`snakemake -n --configfile config/custom.yaml` for each INVALID_CONFIGS text, each in a workflow copy of
    its own, run in two Snakemake interpreters (tests/dry_runs.run_many): {text: CompletedProcess}."""
    from dry_runs import copy_workflow, run_many

    runs = {}
    for index, (text, _) in enumerate(INVALID_CONFIGS):
        if not re.search(r"^train:", text, re.M):
            text += "train:\n  max_steps: 10\n"  # a budget, so that the mistake named is the first one found
        workdir = copy_workflow(tmp_path_factory.mktemp(f"invalid-{index}"))
        runs[INVALID_CONFIGS[index][0]] = (workdir, ["-n", "--configfile", write_config(workdir, text)])
    return run_many(runs, scratch=tmp_path_factory.mktemp("invalid-runs"))


@pytest.mark.workflow
@pytest.mark.parametrize("text, named", INVALID_CONFIGS)
def test_invalid_config_fails_naming_the_value(invalid_config_runs, text, named):
    result = invalid_config_runs[text]
    assert result.returncode != 0
    assert named in output_of(result)
    # one line, naming the config file given, not the line of the workflow that found the mistake
    (line,) = [line for line in output_of(result).splitlines() if named in line]
    assert line.startswith("config/custom.yaml: ") and "common.smk" not in output_of(result), output_of(result)


@pytest.mark.workflow
def test_a_config_error_names_the_config_files_not_the_workflow(workdir):
    """`snakemake --configfile A B` with a mistake: one line that starts with the files given, no traceback
    into workflow/rules/common.smk; without --configfile, the Snakefile's own config/config.yaml."""
    (workdir / "config/short.yaml").write_text("train: {max_steps: 6}\n")
    write_config(workdir, "experiments:\n  - platforms: [gpu]\n")
    result = snakemake(workdir, "-n", "--configfile", "config/custom.yaml", "config/short.yaml")
    assert result.returncode == 1
    lines = [line for line in output_of(result).splitlines() if "extended by additional config" not in line]
    assert lines == [
        "config/custom.yaml + config/short.yaml: experiments[0] uses platform 'gpu', which is not defined under "
        "`platforms` (defined: local)"
    ], output_of(result)
    with (workdir / "config/config.yaml").open("a") as config:
        config.write("netbnch: {enabled: false}\n")
    result = snakemake(workdir, "-n")
    assert result.returncode == 1
    assert output_of(result).strip().splitlines() == [
        "config/config.yaml: netbnch: unknown key (did you mean 'netbench'?)"
    ], output_of(result)


@pytest.mark.workflow
def test_slurm_profile_dry_run(shipped_dry_runs):
    result = shipped_dry_runs[f"{DEFAULT} slurm"]  # snakemake -n -p --profile slurm
    assert result.returncode == 0, output_of(result)
    assert "srun --mpi=pmi2 -n 2 python -m mpi4py -m scaledl train" in output_of(result)


@pytest.mark.workflow
def test_a_platforms_numactl_binds_every_rank(workdir):
    """KNL flat mode: each rank of the launch runs under numactl, the one-rank run too."""
    config = write_config(
        workdir,
        """
experiments:
  - {dataset: synthetic, algorithms: [sync_sgd], platforms: [knl], workers: [1, 4], train: {max_steps: 5}}
platforms:
  knl: {kind: knl, ranks_per_node: 4, cores_per_node: 68, numactl: "--preferred=1"}
""",
    )
    result = snakemake(workdir, "-n", "-p", "--profile", "slurm", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    text = output_of(result)
    assert "SRUN_CPUS_PER_TASK=13 srun --mpi=pmi2 -n 4 numactl --preferred=1 python -m mpi4py -m scaledl train" in text
    assert "Shell command: numactl --preferred=1 python -m mpi4py -m scaledl train" in text  # train_single
    assert "numactl --preferred=1 python -m mpi4py -m scaledl netbench" not in text  # the network is not memory


# sinfo, node-oriented as the workflow's check asks (scaledl.grid.fit.SINFO_COMMAND): one node of the
# partition debug, its line in $FAKE_NODE; as the plugin asks (`-o %P`), the partitions.
FAKE_SINFO = 'case "$*" in *--Node*) echo "$FAKE_NODE";; *) echo PARTITION; echo "debug*";; esac'
FAKE_SLURM = {
    # sbatch records its flags and refuses, so nothing runs; the plugin's other queries find no cluster
    "sbatch": 'printf "%s\\n" "$*" >> "$SBATCH_RECORD"; echo "sbatch: error: no cluster in this test" >&2; exit 1',
    "sinfo": FAKE_SINFO,
    **dict.fromkeys(["sacctmgr", "sshare", "scontrol", "sacct", "squeue", "scancel"], "exit 1"),
}
FOUR_CPU_NODE = "node1|debug*|4|16000|(null)|(null)|infinite"


def submit_to_fake_slurm(workdir, *args, node=FOUR_CPU_NODE):
    """`snakemake --profile slurm ARGS` (not a dry run) with stand-in Slurm commands first on PATH:
    sinfo lists `node` in the partition debug; sbatch records each call in the returned file and refuses it."""
    fake = workdir / "fake_slurm"
    fake.mkdir(exist_ok=True)
    for command, body in FAKE_SLURM.items():
        (fake / command).write_text(f"#!/bin/sh\n{body}\n")
        (fake / command).chmod(0o755)
    record = workdir / "sbatch.txt"
    env_path = f"{fake}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    command = [sys.executable, "-m", "snakemake", "--profile", "slurm", "--slurm-init-seconds-before-status-checks"]
    result = subprocess.run(
        [*command, "1", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": env_path, "SBATCH_RECORD": str(record), "FAKE_NODE": node},
    )
    return result, record


@pytest.mark.workflow
def test_slurm_profile_submits_the_default_config_without_cores(workdir):
    """Not a dry run: under the Slurm executor there is no --cores (a dry run sets it to 1), and the
    local platform's jobs must still be sized, as one-node jobs of their ranks. Fake Slurm commands
    first on PATH record each sbatch call and refuse it."""
    result, record = submit_to_fake_slurm(workdir)
    text = output_of(result)
    assert "cores to be defined" not in text and "InputFunctionException" not in text, text
    assert result.returncode != 0 and "no cluster in this test" in text  # every submission was refused
    # the check against sinfo's nodes passed (3 tasks fit 4 CPUs), and the plan was summed up first
    assert re.search(r"scaledl: 15 Slurm job\(s\) ask for up to \d+\.\d node-hours and 0\.0 GPU-hours", text), text
    calls = {re.search(r"--comment (\S+)", line).group(1): line for line in record.read_text().splitlines()}
    # prepare needs nothing upstream: it was submitted, sized from its dataset (netbench too, if the
    # plugin got to it before the first refusal stopped it)
    assert " --mem 4000 --ntasks=1 --cpus-per-task=1 " in calls["rule_prepare_wildcards_digits"], calls
    # no reporting rule is ever submitted: they run where Snakemake runs
    assert all(comment.startswith(("rule_prepare", "rule_netbench", "rule_train")) for comment in calls), calls
    # the profile's retries resubmit a failed job, and the retry's job step gets its attempt (read by
    # mpi_launcher: test_a_retrys_job_step_passes_its_attempt_to_the_ranks)
    assert " --attempt 2 " in record.read_text()


@pytest.mark.workflow
def test_a_retrys_job_step_passes_its_attempt_to_the_ranks(workdir, shipped_dry_runs):
    """A Slurm job step runs `snakemake --attempt N`: the training ranks see SCALEDL_ATTEMPT=N (a run refused
    with exit 2 then stops at once: tests/process/test_refusal.py); a first attempt's command is unchanged."""
    retry = output_of(snakemake(workdir, "-n", "-p", "--profile", "slurm", "--attempt", "2"))
    first = output_of(shipped_dry_runs[f"{DEFAULT} slurm"])  # snakemake -n -p --profile slurm
    assert retry.count("Shell command: SCALEDL_ATTEMPT=2 ") == 13, retry  # every training, no other job
    assert "SCALEDL_ATTEMPT" not in first


@pytest.mark.workflow
def test_a_job_no_node_can_run_is_refused_before_any_submission(workdir):
    """The reviewer's cluster: nodes of 2 CPUs, and the default config's master-based jobs of 3 tasks."""
    result, record = submit_to_fake_slurm(workdir, node="node1|debug*|2|16000|(null)|(null)|infinite")
    text = output_of(result)
    assert result.returncode == 1, text
    refusal = [line for line in text.splitlines() if "no node of" in line]
    assert len(refusal) == 1, text
    assert re.fullmatch(
        r"scaledl: rule train \(name=default, stage=runs, dataset=digits, model=lenet, algorithm=\w+, "
        r"platform=local, workers=2, setting=, seed=0\) asks for 3 task\(s\) × 1 CPU\(s\) = 3 CPUs, 6000 MB "
        r"per node on 1 node\(s\), and no node of partition 'debug' \(the default\) has that: its largest has "
        r"2 CPUs, 16000 MB, 0 GPU\(s\) \(7 more job\(s\) do not fit either\); nothing was submitted: .*",
        refusal[0],
    ), refusal[0]
    assert not record.exists()  # not one sbatch call


@pytest.mark.workflow
def test_without_sinfo_the_check_is_skipped_saying_so(workdir):
    result, record = submit_to_fake_slurm(workdir, node="garbage")
    text = output_of(result)
    assert text.count("were not checked against") == 1, text
    assert record.exists()  # submitted as before (and refused by the stand-in sbatch)


@pytest.mark.workflow
def test_a_platforms_slurm_extra_is_checked_by_the_plugin_when_the_dag_is_built(workdir):
    config = write_config(
        workdir,
        """
experiments:
  - {dataset: synthetic, algorithms: [sync_sgd], platforms: [ci], workers: [2], train: {max_steps: 5}}
platforms:
  ci: {kind: cpu, ranks_per_node: 2, slurm_extra: "-p debug --qos=long"}
""",
    )
    result = snakemake(workdir, "-n", "--configfile", config)  # a dry run without the profile: no submission
    assert result.returncode != 0
    assert "platform 'ci': slurm_extra '-p debug --qos=long': The --partition option is not allowed" in output_of(
        result
    )


@pytest.mark.workflow
@pytest.mark.parametrize("decoders, minutes, mem_mb", [(1, 504, 4000), (8, 120, 7500)])
def test_prepare_asks_for_the_cores_and_time_of_its_dataset(workdir, decoders, minutes, mem_mb):
    """ImageNet's decoding processes are the prepare job's cores; one process needs hours, not the default two."""
    (workdir / "data/raw/imagenet").mkdir(parents=True)
    config = write_config(
        workdir,
        f"""
experiments:
  - {{dataset: imagenet, models: [alexnet], algorithms: [sync_sgd], workers: [2], train: {{max_steps: 5}}}}
datasets:
  imagenet: {{workers: {decoders}}}
""",
    )
    result = snakemake(workdir, "-n", "-p", "--profile", "slurm", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    from slurm_requests import requests

    prepare = [line for job, line in requests(output_of(result)) if job.name == "prepare"]
    assert len(prepare) == 1
    assert prepare[0].split(" --comment rule_prepare ")[1].split() == [
        "-t",
        str(minutes),
        "--mem",
        str(mem_mb),
        "--ntasks=1",
        f"--cpus-per-task={decoders}",
    ]
    assert f"--workers {decoders}" in output_of(result)


def test_slurm_profile_keeps_going_after_a_failed_job():
    profile = yaml.safe_load((REPO / "slurm/config.yaml").read_text())
    assert profile["keep-going"] is True
    # non-training jobs ask for memory per job: no per-CPU default that a multi-core job would multiply
    assert "mem_mb_per_cpu" not in profile["default-resources"]


def sbatch_requests(result):
    """{(algorithm, platform, workers): sbatch flags} of the train jobs of a `-n --profile slurm` run."""
    from slurm_requests import requests

    found = {}
    for job, line in requests(output_of(result)):
        if job.name.startswith("train"):
            wildcards = dict(pair.split("=") for pair in job.wildcards.split(", "))
            found[wildcards["algorithm"], wildcards["platform"], int(wildcards["workers"])] = line
    return found


@pytest.mark.workflow
def test_slurm_requests_for_gpu_and_knl_node_sweeps(shipped_dry_runs):
    # snakemake -n -p --profile slurm --configfile config/cluster.yaml (the raw data need not be there: the
    # download rule makes it)
    result = shipped_dry_runs["cluster.yaml slurm"]
    assert result.returncode == 0, output_of(result)
    requests = sbatch_requests(result)
    assert len(requests) == job_counts(result)["train"] == 2 * 3 * 4 + 2 * 4

    def flags(algorithm, platform, workers):
        return requests[algorithm, platform, workers].split(" --comment rule_train ")[1].split()

    gpu_node = ["-p", "gpu", "-t", "120", "--mem", "64000"]  # memory per node, not per CPU
    WARNING = "--signal=USR1@120"  # SIGUSR1 two minutes before the limit: checkpoint, exit 130, resubmitted
    knl_node = ["-p", "knl", "-t", "120", "-C", "knl", "--mem", "86000"]  # under the 96 GB of a KNL node
    for nodes in (1, 2, 4, 8):
        # GPU: 4 GPUs and 4 ranks of 8 cores a node; the master is a 5th task on the first node
        assert flags("sync_easgd", "gpu", 4 * nodes) == [
            *gpu_node,
            f"--nodes={nodes}",
            f"--ntasks={4 * nodes}",
            "--cpus-per-task=8",
            "--ntasks-per-node=4",
            "--gpus-per-node=4",
            "--exclusive",
            WARNING,
        ]
        assert flags("async_easgd", "gpu", 4 * nodes) == [
            *gpu_node,
            f"--nodes={nodes}",
            f"--ntasks={4 * nodes + 1}",
            "--cpus-per-task=8",
            "--ntasks-per-node=5",
            "--gpus-per-node=4",
            "--exclusive",
            WARNING,
        ]
        # KNL: 68 cores shared by 4 workers and a master's share, 13 each with or without a master
        for algorithm in ("sync_sgd", "sync_easgd"):
            assert flags(algorithm, "knl", 4 * nodes) == [
                *knl_node,
                f"--nodes={nodes}",
                f"--ntasks={4 * nodes}",
                "--cpus-per-task=13",
                "--ntasks-per-node=4",
                "--exclusive",
                WARNING,
            ]
        assert flags("async_easgd", "knl", 4 * nodes) == [
            *knl_node,
            f"--nodes={nodes}",
            f"--ntasks={4 * nodes + 1}",
            "--cpus-per-task=13",
            "--ntasks-per-node=5",
            "--exclusive",
            WARNING,
        ]
    # netbench measures each machine once, on what the α-β model needs: two whole nodes (the sweeps span
    # up to 8) of one-core ranks, no GPU, memory for its buffers, minutes instead of the platform's two
    # hours; the strong-scaling aliases are the same machines, so they add no job; each platform keeps its
    # own comm_model table, fed by its machine's measurement
    from slurm_requests import requests as submit_lines

    netbench = {job.wildcards: line for job, line in submit_lines(output_of(result)) if job.name == "netbench"}
    assert sorted(netbench) == ["name=cluster, platform=gpu", "name=cluster, platform=knl"]
    assert (job_counts(result)["netbench"], job_counts(result)["comm_model"]) == (2, 4)
    gpu, knl = netbench["name=cluster, platform=gpu"], netbench["name=cluster, platform=knl"]
    two_nodes = ["--mem", "2304", "--nodes=2", "--ntasks=8", "--cpus-per-task=1", "--ntasks-per-node=4", "--exclusive"]
    assert gpu.split(" --comment rule_netbench ")[1].split() == ["-p", "gpu", "-t", "9", *two_nodes]
    assert knl.split(" --comment rule_netbench ")[1].split() == ["-p", "knl", "-t", "9", "-C", "knl", *two_nodes]
    text = output_of(result)
    models = re.findall(r"scaledl comm-model (.*) --netbench results/cluster/netbench/gpu.json", text)
    assert len(models) == 2  # gpu and gpu_strong: one machine, one table per sweep
    assert {("/gpu/p32/" in m, "/gpu_strong/p32/" in m) for m in models} == {(True, False), (False, True)}

    # the ranks' threads follow the allocation; strong scaling splits the global batch of 2048
    assert re.search(
        r"srun --mpi=pmi2 -n 17 .* --algorithm async_easgd .*/knl/p16/s0 .*--batch-size 64 .*--threads 13 ", text
    )
    assert re.search(
        r"srun --mpi=pmi2 -n 16 .* --algorithm sync_sgd .*/knl/p16/s0 .*--batch-size 64 .*--threads 13 ", text
    )
    assert re.search(
        r"srun --mpi=pmi2 -n 4 .*/gpu_strong/p4/s0 .*--batch-size 512 .*--device cuda .*--threads 8 ", text
    )
    assert re.search(
        r"srun --mpi=pmi2 -n 32 .*/knl_strong/p32/s0 .*--batch-size 64 .*--device cpu .*--threads 13 ", text
    )
    assert "SRUN_CPUS_PER_TASK=13 srun --mpi=pmi2 -n 17 " in text


@pytest.mark.workflow
def test_paper_config_partitions_one_knl_chip(shipped_dry_runs):
    """Fig. 12: P = 1 … 16 parts of one 68-core KNL node, the cores shared out, MCDRAM checked."""
    result = shipped_dry_runs["paper.yaml slurm"]  # snakemake -n -p --profile slurm --configfile config/paper.yaml
    assert result.returncode == 0, output_of(result)
    requests = sbatch_requests(result)
    # chip_partition has no master and knl_chip keeps no core for one (master_share: false)
    for parts, cores in ((1, 68), (2, 34), (4, 17), (8, 8), (16, 4)):
        flags = requests["chip_partition", "knl_chip", parts].split(" --comment ")[1].split()[1:]
        assert flags == [
            "-t",
            "120",
            "--mem",
            "86000",
            "--nodes=1",
            f"--ntasks={parts}",
            f"--cpus-per-task={cores}",
            f"--ntasks-per-node={parts}",
            "--exclusive",
            "--signal=USR1@120",
        ], (parts, flags)
    # the figures' pairs compare algorithms at equal cores per worker, master or not (one request per figure)
    gpu_requests = {
        tuple(line.split(" --comment ")[1].split()[1:])
        for (_, platform, _), line in requests.items()
        if platform == "gpu"
    }
    assert gpu_requests == {
        (
            "-t",
            "120",
            "--mem",
            "128000",
            "--nodes=1",
            f"--ntasks={ranks}",
            "--cpus-per-task=4",
            f"--ntasks-per-node={ranks}",
            "--gpus-per-node=8",
            "--exclusive",
            "--signal=USR1@120",
        )
        for ranks in (8, 9)
    }
    assert (
        requests["sync_easgd3", "gpu", 8].count("--ntasks=8 ")
        == requests["async_easgd", "gpu", 8].count("--ntasks=9 ")
        == 1
    )
    assert output_of(result).count("--algorithm chip_partition") == 5 * 3  # 5 part counts × 3 seeds
    assert output_of(result).count("--fast-memory-gb 16") == 5 * 3


@pytest.mark.workflow
@pytest.mark.timeout(900)
def test_tiny_run_end_to_end(workdir):
    # an earlier attempt of one training that did not finish (Ctrl-C): its log must survive the run that redoes it
    earlier = workdir / "logs/test/runs/synthetic/lenet/sync_sgd/local/p2/lr0.05/s0.log"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("step 10/40 ... interrupted\n")
    result = snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml", timeout=600)
    logs = "\n".join(f"== {log}\n{log.read_text()}" for log in sorted(workdir.glob("logs/**/*.log")))
    assert result.returncode == 0, output_of(result) + logs
    (kept,) = earlier.parent.glob("s0.attempt-*.log")
    assert kept.read_text() == "step 10/40 ... interrupted\n" and "done: stopped by" in earlier.read_text()
    assert "kept the log of 1 earlier attempt(s) that did not finish (e.g. logs/test/runs/" in output_of(result)

    summary = pd.read_csv(workdir / "results/test/tables/summary.csv")
    assert sorted(zip(summary["algorithm"], summary["lr"], summary["setting"])) == [
        (algorithm, lr, f"lr{lr:g}") for algorithm in ("sync_easgd", "sync_sgd") for lr in (0.05, 0.1)
    ]  # config/test.yaml sweeps η over two values
    assert set(summary["dataset"]) == {"synthetic"} and set(summary["platform"]) == {"local"}
    assert (summary["workers"] == 2).all() and (summary["steps"] > 0).all()
    assert summary["final_test_accuracy"].between(0, 1).all()
    assert (workdir / "results/test/tables/summary.md").read_text().count("\n") == 2 + len(summary)
    assert (workdir / "results/test/plots/accuracy_vs_time.png").read_bytes()[:4] == b"\x89PNG"
    for algorithm in ("sync_sgd", "sync_easgd"):
        assert (workdir / f"benchmarks/test/runs/synthetic/lenet/{algorithm}/local/p2/lr0.1/s0.tsv").exists()
    assert_the_sweeps_points_stay_apart(workdir, output_of(result))

    assert (workdir / "results/test/tables/scaling.csv").exists()  # no sweep here: a header only

    # the network stage: α, β measured on 2 ranks, and every run's communication modelled beside its measurement
    netbench = json.loads((workdir / "results/test/netbench/local.json").read_text())
    assert netbench["machine"]["ranks"] == 2 and netbench["alpha_s"] > 0 and netbench["beta_s_per_byte"] > 0
    assert max(row["bytes"] for row in netbench["p2p"]["links"][0]["table"]) == 64 << 10  # config/test.yaml's max_size
    comm_model = pd.read_csv(workdir / "results/test/tables/comm_model/local.csv")
    assert sorted(comm_model["algorithm"]) == ["sync_easgd", "sync_easgd", "sync_sgd", "sync_sgd"]
    assert (comm_model["measured_exposed_s"] > 0).all() and (comm_model["predicted_bandwidth_optimal_s"] > 0).all()
    scaling_model = pd.read_csv(workdir / "results/test/tables/comm_model/local_scaling.csv")
    assert {"measured", "fdr_ib"} <= set(scaling_model["network"]) and 4253 in set(scaling_model["workers"])

    again = snakemake(workdir, "-n", "--configfile", "config/test.yaml")
    assert "Nothing to be done" in output_of(again)

    # --forcerun cascades: re-preparing the data reruns every training and table
    cascade = snakemake(workdir, "-n", "--configfile", "config/test.yaml", "--forcerun", "prepare")
    assert job_counts(cascade) == {
        "prepare": 1,
        "train": 4,
        "aggregate": 3,  # a job per table: summary, scaling, averaging
        "plot_accuracy_vs_time": 1,
        "comm_model": 1,
        "claims": 1,
        "figures": 1,
        "all": 1,
    }

    # rerunning one training target re-executes that job and the tables downstream, nothing else
    target = "results/test/runs/synthetic/lenet/sync_sgd/local/p2/lr0.05/s0/run.json"
    other = workdir / "results/test/runs/synthetic/lenet/sync_easgd/local/p2/lr0.05/s0/run.json"
    before = other.stat().st_mtime_ns
    rerun = snakemake(workdir, "--cores", "2", "--configfile", "config/test.yaml", "--forcerun", target, timeout=300)
    assert rerun.returncode == 0, output_of(rerun)
    assert job_counts(rerun) == {
        "train": 1,
        "aggregate": 3,  # a job per table: summary, scaling, averaging
        "plot_accuracy_vs_time": 1,
        "comm_model": 1,
        "claims": 1,
        "figures": 1,
        "all": 1,
    }
    assert f"output: results/test/runs/synthetic/lenet/sync_sgd/local/p2/lr0.05/s0/metrics.csv, {target}" in output_of(
        rerun
    )
    assert other.stat().st_mtime_ns == before


def assert_the_sweeps_points_stay_apart(workdir, output):
    """config/test.yaml's two η, one seed each: the averaging table, the figures and the claims keep them apart
    (never one configuration of two seeds whose spread is the η range), and the last line points at the report."""
    averaging = pd.read_csv(workdir / "results/test/tables/averaging.csv")
    assert sorted(zip(averaging["algorithm"], averaging["lr"])) == [
        (algorithm, lr) for algorithm in ("sync_easgd", "sync_sgd") for lr in (0.05, 0.1)
    ]
    assert (averaging["seeds"] == 1).all()

    from scaledl.report.figures import FIGURES, Inputs, load_runs  # the figures of the workflow's runs, redrawn

    runs = load_runs(sorted(workdir.glob("results/test/runs/**/run.json")))
    figure = FIGURES["averaging"](Inputs(runs))
    panels = {
        ax.get_title(): [t.get_text() for t in ax.get_legend().get_texts()] for ax in figure.axes if ax.get_visible()
    }
    assert sorted(panels) == ["synthetic / lenet, local, P=2, lr0.05", "synthetic / lenet, local, P=2, lr0.1"]
    assert all(sum("(n=1)" in label for label in labels) == 2 for labels in panels.values())

    claims = pd.read_csv(workdir / "results/test/report/claims.csv")
    page = (workdir / "results/test/report/claims.md").read_text()
    said_missing = claims["reason"].str.contains(r"no runs of (?:[\w, ]*, )?sync_(?:easgd|sgd)(?:,| in)", regex=True)
    assert not said_missing.any(), claims["reason"].tolist()  # the four runs are there
    assert "| shared η | lr0.05 | sync_easgd |" in page and "| shared η | lr0.1 | sync_easgd |" in page
    assert "A smoke test: one seed per configuration" in page  # two η are not two seeds
    assert "results/test/report/claims.md judges the paper's claims; figures in results/test/report/figures/" in output


# ---- plug-ins ----------------------------------------------------------------


def code_block(doc: Path, first_line: str) -> str:
    """The fenced code block of `doc` whose first line starts with `first_line` (a file's name comment)."""
    blocks = [b for b in re.findall(r"```\w*\n(.*?)```", doc.read_text(), flags=re.S) if b.startswith(first_line)]
    assert blocks, f"{doc.name} has no code block starting with {first_line!r}"
    return blocks[0]


@pytest.mark.workflow
@pytest.mark.timeout(600)
def test_the_readmes_own_model_trains_through_the_workflow(workdir):
    """README's "Extending" as written: a model in a module of the user's, outside the package, beside the
    Snakefile, trained by both ranks of a job the workflow launches (a few steps: a second config file
    shortens the budget) and summarised under its own name."""
    (workdir / "my_models.py").write_text(code_block(REPO / "README.md", "# my_models.py"))
    (workdir / "config/mine.yaml").write_text(code_block(REPO / "README.md", "# config/mine.yaml"))
    (workdir / "config/short.yaml").write_text("name: mine\ntrain: {max_steps: 6, eval_every: 3}\n")
    run = workdir / "results/mine/runs/digits/tiny_mlp/sync_sgd/local/p2/s0"
    target = str((run / "run.json").relative_to(workdir))
    result = snakemake(workdir, target, "-p", "--cores", "2", "--configfile", "config/mine.yaml", "config/short.yaml")
    logs = "\n".join(f"== {log}\n{log.read_text()}" for log in sorted(workdir.glob("logs/**/*.log")))
    assert result.returncode == 0, output_of(result) + logs
    assert "mpiexec -n 2 python -m mpi4py -m scaledl train" in output_of(result)

    record = read_run_json(run / "run.json")
    assert record["model"]["source"] == "my_models:tiny_mlp" and record["world"]["workers"] == 2
    assert record["model"]["parameters"] == 28 * 28 * 64 + 64 + 64 * 10 + 10  # the README's two layers
    assert record["stop"]["steps"] == 6
    summary = subprocess.run(
        [sys.executable, "-m", "scaledl", "aggregate", "results/mine", "--out", "summary.csv"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert summary.returncode == 0, summary.stderr
    row = pd.read_csv(workdir / "summary.csv").iloc[0]
    assert (row["config"], row["model"], row["workers"]) == ("mine", "tiny_mlp", 2) and row["samples_per_s"] > 0


@pytest.mark.workflow
def test_a_plugin_dataset_is_prepared_by_its_converter_or_put_in_place_by_hand(workdir):
    (workdir / "my_data.py").write_text(code_block(REPO / "docs/extending.md", "# my_data.py"))
    config = write_config(
        workdir,
        """
plugins:
  datasets:
    squares: {converter: "my_data:squares"}
    survey: {}
experiments:
  - {dataset: squares, algorithms: [sync_sgd]}
  - {dataset: survey, algorithms: [sync_sgd]}
train: {max_steps: 10}
""",
    )
    target = "results/custom/runs/squares/lenet/sync_sgd/local/p2/s0/run.json"
    result = snakemake(workdir, target, "-n", "-p", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    assert "python -m scaledl prepare squares --out data/hdf5/squares.h5 --converter my_data:squares --seed 0" in (
        output_of(result)
    )
    # no converter: no prepare job; a missing file is named
    missing = snakemake(workdir, "-n", "--configfile", config)
    assert missing.returncode != 0 and "data/hdf5/survey.h5" in output_of(missing)
    assert "prepare survey" not in output_of(missing)


SIMULATED_CONFIG = """
name: simulated
netbench: {enabled: true, max_size: 64K, repeats: 1}
experiments:
  - dataset: digits
    models: [lenet]
    algorithms: [sync_easgd3, easgd]
    platforms: [gpu8_sim]
    workers: [2]
    seeds: [0]
    train: {max_steps: 20, eval_every: 10, target_accuracy: 0.05}
platforms:
  gpu8_sim: {kind: simulated, platform_file: k80x8, simulates: gpu}
regime_map:
  enabled: true
  claim: sync_easgd3:easgd
  platform: gpu8_sim
  dataset: digits
  model: lenet
  workers: 2
  bandwidth_factors: [0.1]
  speed_factors: [1]
  steps: 10
sensitivity:
  enabled: true
  claims: ["sync_easgd3:easgd"]
  platform: gpu8_sim
  dataset: digits
  model: lenet
  workers: 2
  constants: [efficiency]
  factors: [0.5]
  steps: 10
"""


@pytest.mark.skipif(not sim_available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")
def test_a_simulated_platform_runs_through_the_workflow(workdir):
    config = write_config(workdir, SIMULATED_CONFIG)
    dry = snakemake(workdir, "-n", "--configfile", config)
    assert job_counts(dry)["train_simulated"] == 2 and "train" not in job_counts(dry)
    assert job_counts(dry)["netbench_simulated"] == 1
    result = snakemake(workdir, "--cores", "2", "--configfile", config, timeout=600)
    assert result.returncode == 0, output_of(result)
    summary = pd.read_csv(workdir / "results/simulated/tables/summary.csv")
    assert set(summary["simulated_on"]) == {"k80x8"} and set(summary["platform"]) == {"gpu8_sim"}
    run = read_run_json(workdir / "results/simulated/runs/digits/lenet/easgd/gpu8_sim/p2/s0/run.json")
    assert run["transport"]["rank_hosts"] == ["cpu", "gpu0", "gpu1"]  # the CPU master, a GPU per worker
    netbench = json.loads((workdir / "results/simulated/netbench/gpu8_sim.json").read_text())
    assert netbench["machine"]["simulated_on"] == "k80x8"
    claims = (workdir / "results/simulated/report/claims.md").read_text()
    assert "## The paper's claims, simulated on k80x8" in claims and "claims, measured" not in claims
    regime = pd.read_csv(workdir / "results/simulated/report/regime/map.csv")  # each side at its runs' settings
    assert len(regime) == 1 and regime["verdict"].iloc[0] in ("holds", "reversed", "inconclusive")
    swept = pd.read_csv(workdir / "results/simulated/report/sensitivity/sync_easgd3-vs-easgd/sensitivity.csv")
    assert list(swept["constant"]) == ["efficiency"] and swept["base_value"].iloc[0] == "0.3-0.35"
    # efficiency is swept over the band the published validation measured on k80x8 (sensitivity.bands, on by
    # default), not over the config's ×0.5; the claims report shows the sweep beside the simulated verdict
    assert swept["band"].iloc[0] == "validated" and swept["span"].iloc[0] == "×0.76-×2.21"
    assert "efficiency ×0.76-×2.21 (validated)" in claims or "flips when efficiency ×" in claims


TWIN_CONFIG = """
name: twin
netbench: {enabled: true, max_size: 1M, repeats: 1}  # up to where a message's time is its bandwidth's
experiments:
  - dataset: digits
    models: [lenet]
    algorithms: [sync_sgd]
    platforms: [local, twin]
    workers: [2]
    seeds: [0]
    train: {max_steps: 10, eval_every: 10, batch_size: 16}
platforms:
  local: {device: cpu, threads: 1, runtime: 10}
  twin: {kind: simulated, platform_file: calibrated, simulates: cpu}
validate: {models: "resnet18:2:3x32x32", repeats: 3}  # the twin's held-out check, small: a test's, not a verdict's
"""


@pytest.mark.skipif(not sim_available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")
def test_a_twin_is_calibrated_on_this_machine_before_it_simulates(workdir):
    """platform_file calibrated: the workflow calibrates this machine after its netbench, at the code that runs,
    and the twin's runs say which code, host and time measured their platform."""
    from scaledl.codehash import code_version

    config = write_config(workdir, TWIN_CONFIG)
    dry = snakemake(workdir, "-n", "--configfile", config)
    assert job_counts(dry)["calibrate_platform"] == 1 and job_counts(dry)["train_simulated"] == 1
    result = snakemake(workdir, "--cores", "2", "--configfile", config, timeout=600)
    assert result.returncode == 0, output_of(result)
    platform = (workdir / "results/twin/platform/calibrated.xml").read_text()
    assert "provenance: code " + code_version() in platform and re.search(r"busy: \d+ other process\(es\)", platform)
    run = read_run_json(workdir / "results/twin/runs/digits/lenet/sync_sgd/twin/p2/s0/run.json")
    assert run["transport"]["platform_file"].endswith("results/twin/platform/calibrated.xml")
    assert run["transport"]["calibration"]["code"] == code_version()
    here = (workdir / "results/twin/validate/here.md").read_text()  # the config's validate block was its options
    assert "step resnet18 b2 3x32x32" in here and "googlenet" not in here
    again = snakemake(workdir, "-n", "--configfile", config)  # nothing to redo while the code is the same
    assert "Nothing to be done" in output_of(again), output_of(again)
