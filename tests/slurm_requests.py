"""The sbatch lines `snakemake --profile slurm` would submit, from a dry run's job listing.

A dry run (`-n`) never reaches the Slurm plugin, but it prints each job's rule,
wildcards and evaluated resources. Feeding those resources to the plugin's own
submit-string code (snakemake_executor_plugin_slurm.submit_string and
utils.set_gres_string, the functions its run_job calls) gives the sbatch line
the plugin would run, without a cluster. Run as a script to print them:

    python tests/slurm_requests.py --configfile config/cluster.yaml   # in the repo root
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string
from snakemake_executor_plugin_slurm.validation import validate_slurm_extra


class Resources(dict):
    """The attribute-and-get access the plugin uses on job.resources."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Job:
    def __init__(self, rule, wildcards, resources, threads=1):
        self.name, self.wildcards, self.resources, self.threads = rule, wildcards, resources, threads


def _value(text: str):
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def jobs_of(dry_run_output: str) -> list[Job]:
    """Every job block (`rule NAME:` ... `resources: ...`) of a dry run's output."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run_output):
        head = re.match(r"(?:local)?rule (\w+):", block)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if not head or not resources:
            continue
        wildcards = re.search(r"^\s+wildcards: (.*)$", block, re.M)
        pairs = re.split(r", (?=\w+=)", resources.group(1))
        values = Resources((key, _value(value)) for key, value in (pair.split("=", 1) for pair in pairs))
        jobs.append(Job(head.group(1), wildcards.group(1) if wildcards else "", values))
    return jobs


def sbatch_line(job: Job) -> str:
    """The plugin's sbatch call for `job`, up to the --wrap of the job step."""
    validate_slurm_extra(job)
    partition = job.resources.get("slurm_partition")
    account = job.resources.get("slurm_account")
    params = {
        "run_uuid": "RUN",
        "slurm_logfile": f".snakemake/slurm_logs/rule_{job.name}/%j.log",
        "comment_str": f"rule_{job.name}",
        "account": f" -A {shlex.quote(str(account))}" if account else "",
        "partition": f" -p {shlex.quote(str(partition))}" if partition else "",
        "workdir": None,
    }
    return get_submit_command(job, params) + set_gres_string(job)


def requests(dry_run_output: str) -> list[tuple[Job, str]]:
    return [(job, sbatch_line(job)) for job in jobs_of(dry_run_output)]


if __name__ == "__main__":
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--profile", "slurm", *sys.argv[1:]],
        capture_output=True,
        text=True,
        cwd=Path.cwd(),
    )
    if result.returncode:
        sys.exit(result.stdout + result.stderr)
    for job, line in requests(result.stdout + result.stderr):
        if job.name == "all":
            continue  # a target without a command: nothing is submitted
        flags = re.sub(r"^sbatch --parsable --job-name RUN --output \S+ --export=ALL --comment \S+ ?", "", line)
        print(f"{job.name:<22} {job.wildcards}\n    sbatch {' '.join(flags.split())}")
