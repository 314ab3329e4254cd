"""The checks that stop the workflow before anything runs, each in one line a person can act on.

- A config that cannot run (the schema, the grid, a platform's slurm_extra) is
  named by the user's config file(s) and the key at fault (`stop`), not by the
  line of workflow/rules/common.smk that found it.
- Every platform's slurm_extra goes through the Slurm executor plugin's own
  check while the DAG is built (`check_slurm_extra`): a flag the plugin writes
  itself would otherwise fail each job at submission.
- Under the Slurm executor, once the DAG is built and before anything is
  submitted (`check`, the workflow's `onstart`): one line sums the node-hours
  and GPU-hours the jobs ask for (`scaledl cost` breaks a config down), then
  each job is checked against the nodes of its partition (`sinfo`,
  scaledl.grid.fit); one that no node can run stops the workflow.

Snakemake's objects come in as arguments (the workflow, its logger, a runner
for sinfo), so the tests drive these checks with stand-ins.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

from snakemake_executor_plugin_slurm.validation import validate_slurm_extra
from snakemake_interface_common.exceptions import WorkflowError

from scaledl.grid import fit
from scaledl.grid.keys import GridError
from scaledl.run_record import RUN_JSON


def config_files(workflow) -> list[str]:
    """The config files a person gave (`--configfile`), else the Snakefile's own; relative where they can be."""
    shown = []
    for path in workflow.overwrite_configfiles or workflow.configfiles:
        try:
            shown.append(str(Path(path).relative_to(Path.cwd())))
        except ValueError:
            shown.append(str(path))
    return shown


def stop(problem: str, files: Iterable[str], logger) -> NoReturn:
    """End the workflow with one line naming the config file(s) and the problem (a schema problem's own
    `config: ` gives way to the files)."""
    logger.error(f"{' + '.join(files)}: {problem.removeprefix('config: ')}")
    raise SystemExit(1)


def check_slurm_extra(platforms: Mapping[str, Mapping]) -> None:
    """Every platform's slurm_extra through the Slurm executor plugin's own check (validate_slurm_extra);
    GridError naming the platform for a flag the plugin writes itself (-p, --qos, --mem, ...)."""
    for name, platform in platforms.items():
        extra = platform["slurm_extra"]
        try:
            validate_slurm_extra(SimpleNamespace(resources=SimpleNamespace(slurm_extra=extra)))
        except WorkflowError as error:
            reason = str(error).split(". ")[0]
            raise GridError(
                f"platform {name!r}: slurm_extra {extra!r}: {reason}; use the platform's own key for it "
                "(partition, runtime, constraint, mem_mb_per_node, ...; a QoS: --slurm-qos in slurm/config.yaml)"
            ) from None


def sinfo_partitions(logger, run: Callable = subprocess.run, which: Callable = shutil.which):
    """The partitions and nodes sinfo lists (scaledl.grid.fit.parse_sinfo), or None, said once, without them."""
    if which(fit.SINFO_COMMAND[0]) is None:
        logger.warning("scaledl: no sinfo here: the jobs' requests were not checked against the partitions' nodes")
        return None
    try:
        listing = run(fit.SINFO_COMMAND, capture_output=True, text=True, timeout=60)
        if listing.returncode:
            raise fit.SinfoError((listing.stderr.strip() or f"exit status {listing.returncode}").splitlines()[0])
        return fit.parse_sinfo(listing.stdout)
    except (fit.SinfoError, OSError, subprocess.TimeoutExpired) as error:
        logger.warning(f"scaledl: sinfo failed ({error}): the jobs' requests were not checked against the nodes")
        return None


def check(workflow, logger, run: Callable = subprocess.run, which: Callable = shutil.which) -> None:
    """Under the Slurm executor, before the first submission: the node-hours and GPU-hours of the jobs about to
    be submitted, then each against its partition's nodes; SystemExit(1) after one line if one cannot run
    there. Without sinfo the check is skipped, saying so once. Job steps run with --no-hooks: never there."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm" or workflow.remote_exec:
        return
    jobs = [job for job in workflow.dag.needrun_jobs() if not job.is_local]
    requests = [(job, fit.request_of(job.resources, job.threads)) for job in jobs]
    node_hours = sum(r.nodes * (r.minutes or 0) / 60 for _, r in requests)
    gpu_hours = sum(r.nodes * r.gpus_per_node * (r.minutes or 0) / 60 for _, r in requests)
    logger.info(
        f"scaledl: {len(jobs)} Slurm job(s) ask for up to {node_hours:.1f} node-hours and {gpu_hours:.1f} "
        "GPU-hours, each for its full time limit (scaledl cost --configfile ... breaks a config down)"
    )
    partitions = sinfo_partitions(logger, run, which)
    if partitions is None:
        return
    refused = []
    for job, request in requests:
        wildcards = ", ".join(f"{k}={v}" for k, v in job.wildcards_dict.items())
        line = fit.refusal(f"rule {job.rule.name} ({wildcards})", request, partitions)
        if line:
            refused.append(line)
    if refused:
        more = f" ({len(refused) - 1} more job(s) do not fit either)" if len(refused) > 1 else ""
        logger.error(
            f"scaledl: {refused[0]}{more}; nothing was submitted: change the platform in the config "
            "(or its partition) and run again"
        )
        raise SystemExit(1)


# ---- after a failure -----------------------------------------------------------------------------------------

CHECKPOINTS = "checkpoints"  # a run's checkpoint folder (scaledl.train.checkpoint.FOLDER): not a rule output


def keep_attempt_logs(runs: Iterable[tuple[str, str]], logger) -> list[str]:
    """Before anything runs (the workflow's `onstart`): the log of each training that ran before and did not
    finish (`runs`: (run folder, log) pairs; a log and no run.json) is renamed LOG.attempt-TIME.log, TIME its
    last write, so that the rerun does not overwrite it (Snakemake deletes a job's log before the job runs).
    Returns the new names."""
    kept = []
    for run_dir, log in runs:
        path = Path(log)
        if not path.is_file() or (Path(run_dir) / RUN_JSON).exists():
            continue
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(path.stat().st_mtime))
        target = path.with_name(f"{path.stem}.attempt-{stamp}{path.suffix}")
        path.replace(target)
        kept.append(str(target))
    if kept:
        logger.info(f"scaledl: kept the log of {len(kept)} earlier attempt(s) that did not finish (e.g. {kept[0]})")
    return kept


def interrupted(run_dirs: Iterable[str]) -> list[str]:
    """The run folders a failed workflow leaves with checkpoints and no run.json: trainings stopped by Ctrl-C,
    SIGTERM or a time limit (Snakemake deletes a failed job's outputs, never its checkpoints)."""
    return [d for d in run_dirs if (Path(d) / CHECKPOINTS).is_dir() and not (Path(d) / RUN_JSON).exists()]


def say_interrupted(run_dirs: Iterable[str], logger) -> None:
    """One line, when a failed or interrupted workflow leaves trainings that can resume: the same command resumes
    them from their checkpoints (an interrupted training exits 130, which Snakemake reports as an error)."""
    stopped = interrupted(run_dirs)
    if stopped:
        logger.warning(
            f"scaledl: {len(stopped)} training(s) stopped with a checkpoint (e.g. {stopped[0]}): rerun the same "
            "command to resume them where they stopped"
        )
