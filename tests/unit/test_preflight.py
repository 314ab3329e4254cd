"""The checks before anything runs (scaledl.grid.preflight), driven with stand-ins for Snakemake's objects."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from scaledl.grid import fit, preflight
from scaledl.grid.keys import GridError

NODE = "node1|debug*|4|16000|(null)|(null)|infinite"  # one node of 4 CPUs in the default partition


class Logger:
    """Snakemake's logger as far as the checks use it: each level's lines, in order."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []

    def info(self, text):
        self.lines.append(("info", text))

    def warning(self, text):
        self.lines.append(("warning", text))

    def error(self, text):
        self.lines.append(("error", text))


# ---- the config's problems ------------------------------------------------------------------------------


def test_a_config_problem_is_one_line_naming_the_files_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    given = SimpleNamespace(overwrite_configfiles=[tmp_path / "config/a.yaml", Path("/elsewhere/b.yaml")])
    assert preflight.config_files(given) == ["config/a.yaml", "/elsewhere/b.yaml"]
    # without --configfile: the Snakefile's own
    assert preflight.config_files(SimpleNamespace(overwrite_configfiles=[], configfiles=["config/config.yaml"])) == [
        "config/config.yaml"
    ]
    logger = Logger()
    with pytest.raises(SystemExit) as stopped:
        preflight.stop("config: train.lr: 'x' is not a number", ["config/a.yaml", "config/b.yaml"], logger)
    assert stopped.value.code == 1
    assert logger.lines == [("error", "config/a.yaml + config/b.yaml: train.lr: 'x' is not a number")]


def test_a_slurm_extra_the_plugin_writes_itself_names_the_platform():
    preflight.check_slurm_extra({"ok": {"slurm_extra": "--exclusive"}, "none": {"slurm_extra": None}})
    with pytest.raises(GridError, match=r"^platform 'ci': slurm_extra '-p debug': The --partition option"):
        preflight.check_slurm_extra({"ok": {"slurm_extra": None}, "ci": {"slurm_extra": "-p debug"}})


# ---- sinfo ------------------------------------------------------------------------------------------------


def sinfo(stdout="", returncode=0, stderr=""):
    """A stand-in for subprocess.run that answers SINFO_COMMAND only."""

    def run(command, **kwargs):
        assert tuple(command) == fit.SINFO_COMMAND
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    return run


def test_the_partitions_are_read_from_sinfo_and_a_failure_is_said_once():
    logger = Logger()
    found = preflight.sinfo_partitions(logger, sinfo(NODE), which=lambda name: "/usr/bin/sinfo")
    assert list(found) == ["debug"] and found["debug"].nodes["node1"].cpus == 4 and not logger.lines
    for run, which, said in (
        (sinfo(NODE), lambda name: None, "no sinfo here"),
        (sinfo("", 1, "sinfo: error: no controller\nmore"), lambda name: "sinfo", "sinfo failed (sinfo: error: no co"),
        (sinfo("garbage"), lambda name: "sinfo", "sinfo failed (unexpected sinfo line 'garbage')"),
    ):
        logger = Logger()
        assert preflight.sinfo_partitions(logger, run, which) is None
        assert len(logger.lines) == 1 and logger.lines[0][0] == "warning" and said in logger.lines[0][1]


# ---- the check before the first submission ----------------------------------------------------------------


def job(rule: str, tasks: int, minutes: int = 60, local: bool = False, **wildcards):
    return SimpleNamespace(
        rule=SimpleNamespace(name=rule),
        is_local=local,
        threads=1,
        resources={"tasks": tasks, "nodes": 1, "cpus_per_task": 1, "mem_mb": 1000, "runtime": minutes},
        wildcards_dict=wildcards,
    )


def workflow(*jobs, executor="slurm", remote=False):
    return SimpleNamespace(
        executor_plugin=SimpleNamespace(name=executor),
        remote_exec=remote,
        dag=SimpleNamespace(needrun_jobs=lambda: list(jobs)),
    )


def test_the_slurm_check_sums_the_hours_then_refuses_a_job_no_node_can_run():
    jobs = [job("train", 3, platform="local"), job("train", 8, 120, platform="big"), job("aggregate", 1, local=True)]
    logger = Logger()
    with pytest.raises(SystemExit) as stopped:
        preflight.check(workflow(*jobs), logger, sinfo(NODE), which=lambda name: "sinfo")
    assert stopped.value.code == 1
    (info, summary), (error, refusal) = logger.lines
    assert (info, error) == ("info", "error")
    # the local rule is not submitted; 1 h + 2 h on one node each
    assert summary.startswith("scaledl: 2 Slurm job(s) ask for up to 3.0 node-hours and 0.0 GPU-hours")
    assert refusal.startswith("scaledl: rule train (platform=big) asks for 8 task(s) × 1 CPU(s) = 8 CPUs")
    assert refusal.endswith("nothing was submitted: change the platform in the config (or its partition) and run again")


def test_the_slurm_check_passes_what_fits_and_skips_other_executors_and_job_steps():
    fits = workflow(job("train", 3, platform="local"))
    logger = Logger()
    preflight.check(fits, logger, sinfo(NODE), which=lambda name: "sinfo")
    assert [level for level, _ in logger.lines] == ["info"]

    def no_sinfo(*args, **kwargs):
        raise AssertionError("sinfo must not run")

    for skipped in (workflow(job("train", 99), executor="local"), workflow(job("train", 99), remote=True)):
        logger = Logger()
        preflight.check(skipped, logger, no_sinfo, which=lambda name: "sinfo")
        assert logger.lines == []
    no_plugin = SimpleNamespace(executor_plugin=None, remote_exec=False)
    preflight.check(no_plugin, Logger(), no_sinfo)


def test_a_failed_workflow_names_the_trainings_the_same_command_resumes(tmp_path):
    stopped, done, fresh = (tmp_path / name for name in ("stopped", "done", "fresh"))
    (stopped / preflight.CHECKPOINTS).mkdir(parents=True)  # interrupted: its outputs deleted, its checkpoints kept
    (done / preflight.CHECKPOINTS).mkdir(parents=True)
    (done / "run.json").write_text("{}")  # finished (a finished run keeps no checkpoints, but say it is not resumable)
    fresh.mkdir()
    assert preflight.interrupted([str(stopped), str(done), str(fresh), str(tmp_path / "never")]) == [str(stopped)]
    logger = Logger()
    preflight.say_interrupted([str(stopped), str(fresh)], logger)
    assert logger.lines == [
        (
            "warning",
            f"scaledl: 1 training(s) stopped with a checkpoint (e.g. {stopped}): rerun the same command to resume "
            "them where they stopped",
        )
    ]
    quiet = Logger()
    preflight.say_interrupted([str(fresh)], quiet)
    assert quiet.lines == []


def test_the_log_of_an_unfinished_attempt_is_kept_under_its_own_name_before_the_rerun(tmp_path):
    import os

    def run(name: str, finished: bool, logged: bool) -> tuple[str, str]:
        folder, log = tmp_path / "results" / name, tmp_path / "logs" / f"{name}.log"
        folder.mkdir(parents=True), log.parent.mkdir(exist_ok=True)
        if finished:
            (folder / "run.json").write_text("{}")
        if logged:
            log.write_text(f"{name}'s first attempt\n")
            os.utime(log, (0, 86400 + 3661))  # 1970-01-02 01:01:01 UTC
        return str(folder), str(log)

    stopped, done, never = run("stopped", False, True), run("done", True, True), run("never", False, False)
    logger = Logger()
    kept = preflight.keep_attempt_logs([stopped, done, never], logger)
    assert kept == [str(tmp_path / "logs" / "stopped.attempt-19700102T010101.log")]
    assert Path(kept[0]).read_text() == "stopped's first attempt\n" and not Path(stopped[1]).exists()
    assert Path(done[1]).exists() and not Path(never[1]).exists()  # a finished run's log stays for the rerun
    assert logger.lines == [
        ("info", f"scaledl: kept the log of 1 earlier attempt(s) that did not finish (e.g. {kept[0]})")
    ]
    quiet = Logger()
    assert preflight.keep_attempt_logs([done, never], quiet) == [] and quiet.lines == []


def test_the_checkpoint_folder_is_the_trainings():
    from scaledl.train.checkpoint import FOLDER

    assert preflight.CHECKPOINTS == FOLDER
