"""What the workflow's rules ask of the grid: wildcard patterns, file lists, command-line options, resources.

workflow/rules/common.smk turns each of these into a one-line getter of a
job's wildcards; the logic lives here, as plain functions of the expanded grid
(scaledl.grid.runs) and the validated config, so that it can be tested without
Snakemake. The file lists and the patterns come from the one run-folder
template (scaledl.grid.keys); the `scaledl train` options from
scaledl.config.to_argv, the writer beside the parser.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scaledl.algorithms import ALGORITHMS
from scaledl.config import as_argv, to_argv
from scaledl.grid import calibration, downloads, launch, plugins
from scaledl.grid.jobs import hardware_of, measured_as, netbench_groups, placement_of
from scaledl.grid.keys import RUNS_STAGE, RunKey, RunSettings, one_of, run_dir
from scaledl.grid.runs import settings_of

# ---- wildcards -----------------------------------------------------------------------------------------------


def wildcard_constraints(runs: Mapping[RunKey, RunSettings]) -> dict[str, str]:
    """The run wildcards' constraints: only names of the grid, so a typo fails instead of matching nothing
    (and names with `_` can never be split the wrong way)."""
    return {
        "dataset": one_of(key.dataset for key in runs),
        "model": one_of(key.model for key in runs),
        "algorithm": one_of(key.algorithm for key in runs),
        "platform": one_of(key.platform for key in runs),
        "workers": r"\d+",
        "seed": r"\d+",
        "stage": one_of(key.stage for key in runs),
        # empty for a run without a setting, else /SETTING (the folder after p{workers})
        "setting": "(?:" + "".join(f"|/{re.escape(s)}" for s in sorted({key.setting for key in runs} - {""})) + ")",
    }


def name_constraint(name: str) -> dict[str, str]:
    """The `{name}` wildcard matches only this config's results namespace."""
    return {"name": re.escape(name)}


def simulated_platforms(runs: Mapping[RunKey, RunSettings], config: Mapping) -> str:
    """A regex of the grid's platforms of kind simulated (their runs are `scaledl simulate`, one process)."""
    return one_of(key.platform for key in runs if config["platforms"][key.platform].get("kind") == "simulated")


def masterless_algorithms(runs: Mapping[RunKey, RunSettings]) -> str:
    """A regex of the grid's algorithms without a dedicated master: with one worker, a job of one rank."""
    return one_of(key.algorithm for key in runs if not ALGORITHMS[key.algorithm].needs_master)


# ---- files ---------------------------------------------------------------------------------------------------


def run_files(
    runs: Iterable[RunKey], name: str, filename: str, *, stage: str = RUNS_STAGE, platform: str | None = None
) -> list[str]:
    """`filename` (run.json, metrics.csv, ...) of every run of `stage` (of `platform`, if given) in config
    `name`'s results, in grid order."""
    return [
        f"{run_dir(key, name)}/{filename}"
        for key in runs
        if key.stage == stage and (platform is None or key.platform == platform)
    ]


class NetbenchPlan:
    """The network stage of a config: the machines it measures, the platforms it models, and the measurement
    each platform's model, claims and figures read. Off (`netbench.enabled: false`): nothing of either."""

    def __init__(self, runs: Mapping[RunKey, RunSettings], config: Mapping, results: str):
        self.runs, self.config, self.results = runs, config, results
        self.enabled = bool(config["netbench"]["enabled"])

    @property
    def measured(self) -> list[str]:
        """One platform per distinct machine with runs: platforms equal but for their time limit or memory
        (a strong-scaling alias) share one measurement, named after the first of them."""
        return sorted(netbench_groups(self.runs, self.config)) if self.enabled else []

    @property
    def modelled(self) -> list[str]:
        """Every platform with runs: each gets its own comm_model table."""
        return sorted({key.platform for key in self.runs}) if self.enabled else []

    def file_of(self, platform: str) -> str:
        """The netbench file measured on `platform`'s machine."""
        return f"{self.results}/netbench/{measured_as(platform, self.runs, self.config)}.json"

    def files(self) -> list[str]:
        """Every modelled platform's netbench file, once each."""
        return sorted({self.file_of(platform) for platform in self.modelled})

    def flags(self) -> str:
        """--netbench PLATFORM=JSON for every modelled platform: a network belongs to its own platform's runs."""
        return " ".join(f"--netbench {platform}={self.file_of(platform)}" for platform in self.modelled)

    @property
    def networks(self) -> str:
        """The networks `scaledl comm-model` extrapolates to, quoted for the shell."""
        return shlex.quote(self.config["netbench"]["networks"])


def claims_flags(runs: Mapping[RunKey, RunSettings], config: Mapping, plan: NetbenchPlan) -> str:
    """--device-of PLATFORM=DEVICE for every platform with runs (a claim needing a GPU or a KNL is judged only
    on runs that had one: a simulated platform's is the device it simulates), then the plan's --netbench."""
    devices = [
        f"--device-of {platform}={hardware_of(config['platforms'][platform])}"
        for platform in sorted({key.platform for key in runs})
    ]
    return " ".join([*devices, *([plan.flags()] if plan.modelled else [])])


# ---- command lines -------------------------------------------------------------------------------------------


def rank_launcher(resources, platform: Mapping, attempt: int, image: str, cores: int | None) -> str:
    """The prefix that starts an MPI rule's command on its ranks (scaledl.grid.launch.launcher), from the job's
    resources (`mpi`, `tasks`, `cpus_per_task`) on `platform`: its numactl; with more ranks than this
    machine's `cores` on a local platform, MPICH's yield mode; on a retry (`attempt` > 1), the attempt, so
    that a run refused with a setting to fix stops at once; `image`, the container each rank runs in."""
    oversubscribed = platform["kind"] == "local" and resources.tasks > (cores or 1)
    return launch.launcher(
        resources.mpi,
        resources.tasks,
        resources.cpus_per_task,
        oversubscribed=oversubscribed,
        attempt=attempt,
        numactl=platform["numactl"],
        image=image,
    )


def netbench_flags(config: Mapping) -> tuple[str, str]:
    """`scaledl netbench`'s options: for a simulated platform, and for a machine (which also times the cold
    ping-pong with `netbench.cold`: a simulation has no caches)."""
    simulated = as_flags({key: config["netbench"][key] for key in ("max_size", "repeats")})
    return simulated, f"{simulated} --cold" if config["netbench"]["cold"] else simulated


def as_flags(values: Mapping[str, Any]) -> str:
    """A scaledl command's options for these values, as one string (scaledl.config.as_argv)."""
    return shlex.join(as_argv(values))


def train_options(key: RunKey, runs: Mapping[RunKey, RunSettings], config: Mapping) -> RunSettings:
    """Every `scaledl train` setting of a run beyond the wildcards: its `train` settings, device, threads and,
    for a model of the config's plug-ins, the function that builds it."""
    placement = placement_of(key, config)
    own_model = {"model_from": plugins.model_from(config, key.model)}  # a plug-in of the config: its function
    return {**settings_of(runs, key), "device": placement.device, "threads": placement.cpus_per_task, **own_model}


def train_flags(key: RunKey, runs: Mapping[RunKey, RunSettings], config: Mapping) -> str:
    """The `scaledl train` flags of a run beyond the wildcards (null settings left off)."""
    return shlex.join(to_argv(train_options(key, runs, config)))


def simulation_flags(platform: Mapping, name: str, ranks: int) -> str:
    """`scaledl simulate`'s own flags for a run on a simulated platform: its file, the job's ranks, and its clock
    where it is not SimGrid's (`clock: alphabeta`, the clock swap)."""
    flags = ["--platform-file", calibration.platform_file(platform, name), "--ranks", str(ranks)]
    clock = platform.get("clock") or "simgrid"
    return shlex.join(flags if clock == "simgrid" else [*flags, "--clock", clock])


def prepare_input(config: Mapping, dataset: str) -> list[str]:
    """A prepare job's raw download and label files, so missing ones are named before anything runs: with a
    download list, its files (the download rule's outputs), else the raw folder (a plug-in's: its `raw`)."""
    if plugins.is_plugin_dataset(config, dataset):
        return [raw] if (raw := plugins.raw_of(config, dataset)) else []
    if not downloads.needs_raw(config, dataset):
        return []
    settings = config["datasets"][dataset]
    extra = [settings.get(key) for key in ("val_labels", "devkit")]
    raw = downloads.download_targets(config, dataset) or [downloads.raw_dir(config, dataset)]
    return [*raw, *filter(None, extra)]


def verify_raw(config: Mapping, dataset: str) -> str:
    """The command checking hand-placed downloads against their sha256 before `prepare` reads them (Snakemake
    takes an existing output as done), "" without a download list."""
    return "" if plugins.is_plugin_dataset(config, dataset) else downloads.verify_command(config, dataset)


def prepare_flags(config: Mapping, dataset: str) -> str:
    """`scaledl prepare`'s options for a dataset: its `datasets.<name>` settings (a plug-in's: its own)."""
    if plugins.is_plugin_dataset(config, dataset):
        return as_flags(plugins.prepare_settings(config, dataset))
    settings = dict(config["datasets"][dataset])
    settings.pop("download", None)  # the download rule's, not prepare's
    if downloads.needs_raw(config, dataset):
        settings["raw"] = downloads.raw_dir(config, dataset)
    return as_flags(settings)


# ---- resources -----------------------------------------------------------------------------------------------


def resources_of(resources: Callable[[Any], Mapping[str, Any]], names: Iterable[str]) -> dict[str, Callable]:
    """A rule's `resources:`, one function of the job's wildcards per name, each the value of that name in
    resources(wildcards): a job's resources computed in one place, read by Snakemake one at a time."""

    def pick(name: str) -> Callable:
        def value(wildcards):
            return resources(wildcards)[name]

        return value

    return {name: pick(name) for name in names}


def finished_line(name: str, runs: Mapping[RunKey, RunSettings]) -> str:
    """The workflow's last line after a run that succeeded: where its claims and figures are, and, when every
    configuration ran one seed, that they are a smoke test and which config gives verdicts."""
    seeds = {}
    for key in runs:
        if key.stage == RUNS_STAGE:
            seeds.setdefault(key._replace(seed=0), set()).add(key.seed)
    line = f"results/{name}/report/claims.md judges the paper's claims; figures in results/{name}/report/figures/"
    if seeds and max(map(len, seeds.values())) == 1:
        line += (
            "; one seed per configuration: a smoke test, no claim can be decided "
            "(config/paper_small.yaml gives verdicts: snakemake --cores 2 --configfile config/paper_small.yaml)"
        )
    return line
