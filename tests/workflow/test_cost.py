"""`scaledl cost`: the node-hours and GPU-hours a config asks of Slurm, equal to what the workflow submits."""

from __future__ import annotations

import re

import pytest
from test_workflow import REPO, job_counts, output_of, snakemake, workdir  # noqa: F401  (workdir is a fixture)

from mpi_run import run_python
from scaledl.grid import nodehours


def scaledl_cost(*args, cwd=REPO):
    return run_python(["-m", "scaledl", "cost", *args], cwd=cwd, timeout=120, preload="libraries")


def rows_of(text: str) -> dict[tuple[str, str], list[str]]:
    """{(platform, rule): the row's other cells} of the printed table."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if len(cells) == 7 and cells[2].isdigit():
            rows[cells[0], cells[1]] = cells[2:]
    return rows


def test_the_paper_configs_hours_per_platform_and_rule():
    result = scaledl_cost("--configfile", "config/paper.yaml")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    print(text)
    rows = rows_of(text)
    # 18 algorithm cells × 3 seeds on one 8-GPU node for 2 h each: 108 node-hours, 864 GPU-hours
    assert rows["gpu", "train"] == ["54", "1", "2.00", "108.0", "864.0"]
    # the weak-scaling sweep: 1 + 4 + 16 + 64 nodes × 3 seeds × 1 h
    assert rows["knl", "train"] == ["12", "1-64", "1.00", "255.0", "0.0"]
    # Fig. 12: 5 part counts × 3 seeds on one KNL node; one part is a one-rank run (train_single)
    assert rows["knl_chip", "train"][:4] == ["12", "1", "2.00", "24.0"]
    assert rows["knl_chip", "train_single"][:4] == ["3", "1", "2.00", "6.0"]
    # the network: two KNL nodes for minutes, not 64 for the platform's hour
    knl_net = rows["knl", "netbench"]
    assert knl_net[:2] == ["1", "2"] and float(knl_net[3]) < 1
    assert rows["-", "prepare"][:4] == ["2", "1", "2.00", "4.0"]
    total = re.search(r"^total\s+(\d+)\s+(\d+\.\d)\s+(\d+\.\d)$", text, re.M)
    assert total and int(total.group(1)) == sum(int(cells[0]) for cells in rows.values())
    assert float(total.group(2)) == pytest.approx(sum(float(cells[3]) for cells in rows.values()), abs=0.2)
    assert float(total.group(3)) == 864.0
    # above the thresholds it says so; the profile's retries bound what resubmissions can add
    assert "warning: this config asks for" in text and "more than --warn-node-hours 100" in text
    assert "more than --warn-gpu-hours 100" in text and "(slurm/config.yaml: retries: 2;" in text
    quiet = scaledl_cost("--configfile", "config/paper.yaml", "--warn-node-hours", "1000", "--warn-gpu-hours", "1000")
    assert "warning" not in quiet.stdout


def test_a_missing_config_or_a_grid_that_cannot_run_is_one_line(tmp_path):
    missing = scaledl_cost("--configfile", "config/nothing.yaml")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip() == "scaledl cost: error: cannot read config/nothing.yaml: No such file or directory"
    bad = tmp_path / "bad.yaml"
    bad.write_text("experiments:\n  - platforms: [gpu]\ntrain:\n  max_steps: 5\n")
    refused = scaledl_cost("--configfile", str(bad))
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "uses platform 'gpu', which is not defined" in refused.stderr
    elsewhere = scaledl_cost(cwd=tmp_path)
    assert elsewhere.returncode == 2 and "run scaledl cost in the repository root" in elsewhere.stderr


@pytest.mark.workflow
def test_the_cost_is_what_the_workflow_submits(workdir):
    """Node-hours and GPU-hours summed over the sbatch lines of a dry run equal scaledl cost's, per rule."""
    (workdir / "data/raw/cifar10").mkdir(parents=True)
    result = snakemake(workdir, "-n", "-p", "--profile", "slurm", "--configfile", "config/cluster.yaml")
    assert result.returncode == 0, output_of(result)
    from scaledl.grid.fit import request_of
    from slurm_requests import jobs_of

    submitted: dict[str, list[float]] = {}
    for job in jobs_of(output_of(result)):
        if job.name in ("all", *cost_free_rules()):
            continue
        request = request_of(job.resources)
        hours = request.minutes / 60
        sums = submitted.setdefault(job.name, [0, 0.0, 0.0])
        sums[0] += 1
        sums[1] += request.nodes * hours
        sums[2] += request.nodes * request.gpus_per_node * hours
    config = nodehours.load_config(
        [workdir / "config/cluster.yaml"], workdir / "config/config.yaml", workdir / nodehours.SCHEMA
    )
    counted: dict[str, list[float]] = {}
    for job in nodehours.slurm_jobs(config):
        sums = counted.setdefault(job.rule, [0, 0.0, 0.0])
        sums[0] += 1
        sums[1] += job.node_hours
        sums[2] += job.gpu_hours

    def rounded(sums):
        return {
            rule: (jobs, round(node_hours, 6), round(gpu_hours, 6))
            for rule, (jobs, node_hours, gpu_hours) in sums.items()
        }

    assert rounded(submitted) == rounded(counted)
    assert counted["train"][0] == job_counts(result)["train"] and counted["train"][2] > 0  # GPU-hours counted


def cost_free_rules() -> set[str]:
    """The workflow's local rules: they run where Snakemake runs, never submitted."""
    text = "".join(path.read_text() for path in (REPO / "workflow/rules").glob("*.smk"))
    return {
        name
        for block in re.findall(r"^localrules:\n((?:    \w+,\n)+)", text, re.M)
        for name in re.findall(r"\w+", block)
    }
