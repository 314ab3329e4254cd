"""`scaledl cost`: the node-hours and GPU-hours a config asks of Slurm, per platform and rule, before submitting.

Every job `snakemake --profile slurm` would submit for the config, from the
same functions that size the workflow's jobs (scaledl.grid.jobs: job_resources,
netbench_resources, prepare_resources; scaledl.grid.fit.request_of): each
training run (train, train_single), each network measurement (netbench) and
each dataset's conversion (prepare), every job for its full time limit. The
reporting rules and downloads run where Snakemake runs and cost nothing here.
The whole config is counted, finished runs included (`snakemake -n --profile
slurm` lists what remains). Above --warn-node-hours or --warn-gpu-hours it
says so. No torch, no MPI: it reads YAML and does arithmetic.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from snakemake.utils import update_config, validate

from scaledl.errors import UserError
from scaledl.grid import jobs as sizes
from scaledl.grid.check import first_problem
from scaledl.grid.fit import SlurmRequest, request_of
from scaledl.grid.keys import GridError
from scaledl.grid.runs import expand

HELP = "the node-hours and GPU-hours a config asks of Slurm, per platform and rule, before submitting"
BASE_CONFIG = Path("config/config.yaml")  # the Snakefile's `configfile:`, which --configfile merges over
SCHEMA = Path("workflow/schemas/config.schema.yaml")
PROFILE = Path("slurm/config.yaml")
WARN_NODE_HOURS = 100.0
WARN_GPU_HOURS = 100.0


@dataclass(frozen=True)
class Job:
    rule: str
    platform: str  # "-" for a job of no platform (prepare)
    request: SlurmRequest

    @property
    def hours(self) -> float:
        return (self.request.minutes or 0) / 60

    @property
    def node_hours(self) -> float:
        return self.request.nodes * self.hours

    @property
    def gpu_hours(self) -> float:
        return self.request.nodes * self.request.gpus_per_node * self.hours


def slurm_jobs(config: Mapping) -> list[Job]:
    """Every Slurm job of a validated config (schema defaults filled in), as the workflow sizes it."""
    runs = expand(config)
    jobs = []
    for key in runs:
        placement = sizes.placement_of(key, config)
        resources = sizes.job_resources(placement, config["platforms"][key.platform])
        rule = (
            "train_simulated" if placement.kind == "simulated" else "train_single" if placement.ranks == 1 else "train"
        )  # train.smk: which rule runs it
        jobs.append(Job(rule, key.platform, request_of(resources)))
    if config["netbench"]["enabled"]:
        for platform in sorted(sizes.netbench_groups(runs, config)):
            placement = sizes.netbench_placement(platform, runs, config)
            resources = sizes.netbench_resources(placement, config["platforms"][platform], config["netbench"])
            simulated = placement.kind == "simulated"
            jobs.append(Job("netbench_simulated" if simulated else "netbench", platform, request_of(resources)))
    for dataset in sorted({key.dataset for key in runs}):
        resources = sizes.prepare_resources(dataset, config["datasets"][dataset])
        jobs.append(Job("prepare", "-", request_of(resources, threads=resources["cpus_per_task"])))
    return jobs


def _span(values: Iterable[float], fmt: str = "{:g}") -> str:
    values = sorted(set(values))
    return fmt.format(values[0]) if len(values) == 1 else f"{fmt.format(values[0])}-{fmt.format(values[-1])}"


def table(jobs: list[Job]) -> list[dict]:
    """One row per platform and rule: jobs, nodes and hours per job, node-hours, GPU-hours."""
    rows = []
    ordered = sorted(jobs, key=lambda job: (job.platform, job.rule))
    for (platform, rule), group in itertools.groupby(ordered, key=lambda job: (job.platform, job.rule)):
        group = list(group)
        rows.append(
            {
                "platform": platform,
                "rule": rule,
                "jobs": len(group),
                "nodes": _span(job.request.nodes for job in group),
                "hours": _span((job.hours for job in group), "{:.2f}"),
                "node_hours": sum(job.node_hours for job in group),
                "gpu_hours": sum(job.gpu_hours for job in group),
            }
        )
    return rows


def render(rows: list[dict]) -> str:
    """The rows and their total as an aligned text table."""
    header = ("platform", "rule", "jobs", "nodes/job", "hours/job", "node-hours", "GPU-hours")
    lines = [
        (
            r["platform"],
            r["rule"],
            str(r["jobs"]),
            r["nodes"],
            r["hours"],
            f"{r['node_hours']:.1f}",
            f"{r['gpu_hours']:.1f}",
        )
        for r in rows
    ]
    total = (
        "total",
        "",
        str(sum(r["jobs"] for r in rows)),
        "",
        "",
        f"{sum(r['node_hours'] for r in rows):.1f}",
        f"{sum(r['gpu_hours'] for r in rows):.1f}",
    )
    widths = [max(len(row[i]) for row in (header, *lines, total)) for i in range(len(header))]

    def line(cells) -> str:
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(header), *(line(cells) for cells in lines), line(total)])


def load_config(configfiles: list[Path], base: Path = BASE_CONFIG, schema: Path = SCHEMA) -> dict:
    """The config the workflow would run: `base`, then each --configfile merged over it (mappings key by
    key, lists replaced, as Snakemake merges), checked and completed with the schema's defaults."""
    if not schema.is_file():
        raise UserError(f"{schema} not found: run scaledl cost in the repository root, where the Snakefile is")
    config: dict = {}
    for path in [base, *configfiles]:
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except OSError as error:
            raise UserError(f"cannot read {path}: {error.strerror or error}") from None
        except yaml.YAMLError as error:
            raise UserError(f"{path} is not valid YAML ({str(error).splitlines()[0]})") from None
        if not isinstance(loaded, dict):
            raise UserError(f"{path} does not hold a mapping of config keys")
        update_config(config, loaded)
    problem = first_problem(config, schema)
    if problem:
        raise UserError(problem)
    validate(config, str(schema.resolve()))  # fills in the defaults, exactly as the workflow's common.smk
    return config


def profile_retries(profile: Path = PROFILE) -> int:
    """The Slurm profile's `retries` (0 without a profile)."""
    try:
        settings = yaml.safe_load(profile.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return 0
    return int(settings.get("retries") or 0) if isinstance(settings, dict) else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--configfile",
        type=Path,
        nargs="+",
        action="extend",
        default=[],
        metavar="YAML",
        help=f"the config(s) snakemake --configfile would get, merged over {BASE_CONFIG} (default: that alone)",
    )
    parser.add_argument(
        "--warn-node-hours",
        type=float,
        default=WARN_NODE_HOURS,
        metavar="H",
        help="say so when the config asks for more node-hours than this (default %(default)g)",
    )
    parser.add_argument(
        "--warn-gpu-hours",
        type=float,
        default=WARN_GPU_HOURS,
        metavar="H",
        help="say so when the config asks for more GPU-hours than this (default %(default)g)",
    )


def run(args: argparse.Namespace) -> int:
    config = load_config(args.configfile)
    try:
        jobs = slurm_jobs(config)
    except GridError as error:
        raise UserError(str(error)) from None
    rows = table(jobs)
    names = " + ".join(str(path) for path in [BASE_CONFIG, *args.configfile])
    print(f"Slurm jobs of {names}, each for its full time limit (reports and downloads run locally):")
    print(render(rows))
    node_hours, gpu_hours = sum(r["node_hours"] for r in rows), sum(r["gpu_hours"] for r in rows)
    retries = profile_retries()
    if retries:
        print(
            f"A failed job is resubmitted up to {retries} times ({PROFILE}: retries: {retries}; a training job stopped "
            f"by its time limit resumes): at most {(retries + 1) * node_hours:.1f} node-hours and "
            f"{(retries + 1) * gpu_hours:.1f} GPU-hours."
        )
    for what, hours, limit, flag in (
        ("node-hours", node_hours, args.warn_node_hours, "--warn-node-hours"),
        ("GPU-hours", gpu_hours, args.warn_gpu_hours, "--warn-gpu-hours"),
    ):
        if hours > limit:
            print(
                f"warning: this config asks for {hours:.1f} {what}, more than {flag} {limit:g}: check its grid, "
                "seeds and the platforms' runtime before submitting"
            )
    return 0
