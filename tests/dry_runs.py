"""Dry runs (`snakemake -n -p`) of every shipped config, with and without `--profile slurm`, in one interpreter.

A `snakemake` subprocess spends most of its seconds importing Snakemake and
its plugins before it reads the workflow; twenty of them cost about 80 s on
two cores. Here one subprocess per worker runs its share of the dry runs in
turn through Snakemake's own command line (`snakemake.cli`), in a copy of the
workflow files, and hands back each run's exit status and printed text.

What a dry run prints depends on the machine in two places, both fixed here
to those of the record (tests/workflow/dryruns.json, taken on two cores):
the cores (`os.cpu_count`: a local platform's launcher adds MPICH's yield
mode when its ranks outnumber them) and the temporary folder (Snakemake's
`tmpdir` resource).

`jobs_of` reads the printed jobs as the record holds them: keyed by their
outputs, with rule, input, output, log, benchmark, wildcards, resources and
the shell command (whitespace collapsed).

    python tests/dry_runs.py --record tests/workflow/dryruns.json   # write the record anew (repository root)
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from workflow_env import snakemake_env

REPO = Path(__file__).resolve().parents[1]
RECORD = Path(__file__).parent / "workflow/dryruns.json"
WORKFLOW_FILES = ("Snakefile", "workflow", "config", "slurm")
CORES = 2  # the record's machine
TMPDIR = "/tmp"
JOB_FIELDS = ("input", "output", "log", "benchmark", "wildcards", "resources")
DEFAULT = "(no --configfile)"  # the Snakefile's own config/config.yaml, under the results name `default`


def invocations(repo: Path = REPO) -> dict[str, list[str]]:
    """Every recorded dry run: its key (the config's file name, ` slurm` with the profile) → snakemake's arguments."""
    configs = {DEFAULT: []} | {
        path.name: ["--configfile", f"config/{path.name}"] for path in sorted((repo / "config").glob("*.yaml"))
    }
    return {
        f"{name}{' slurm' if profile else ''}": ["-n", "-p", *args, *(["--profile", "slurm"] if profile else [])]
        for name, args in configs.items()
        for profile in (False, True)
    }


def copy_workflow(workdir: Path, repo: Path = REPO) -> Path:
    """The workflow files, and nothing else (no results, no prepared data), under `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    for name in WORKFLOW_FILES:
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, workdir / name)
        else:
            shutil.copy2(source, workdir / name)
    return workdir


def run_all(workdir: Path, keys: list[str] | None = None, workers: int = 2) -> dict[str, subprocess.CompletedProcess]:
    """The dry runs `keys` (default: all) in a copy of the workflow under `workdir`, split over `workers`
    subprocesses; each as a CompletedProcess whose stdout holds everything the run printed."""
    copy_workflow(workdir)
    commands = invocations()
    keys = list(commands) if keys is None else keys
    return run_many({key: (workdir, commands[key]) for key in keys}, workers)


def run_many(
    runs: dict[str, tuple[Path, list[str]]], workers: int = 2, scratch: Path | None = None
) -> dict[str, subprocess.CompletedProcess]:
    """`snakemake ARGS` in WORKDIR for each {key: (WORKDIR, ARGS)}, split over `workers` subprocesses that run
    their share in turn in one interpreter each (Snakemake's import paid once a worker, not once a run); each
    result a CompletedProcess whose stdout holds everything the run printed. Only for runs that start nothing
    (dry runs, lint, config errors): a worker's runs share its process."""
    keys = list(runs)
    scratch = Path(tempfile.mkdtemp(prefix="scaledl-snakemake-runs-")) if scratch is None else scratch
    env = snakemake_env(OMP_NUM_THREADS="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1", TMPDIR=TMPDIR)

    def batch(index: int) -> dict:
        share = {key: [str(runs[key][0]), list(runs[key][1])] for key in keys[index::workers]}
        if not share:
            return {}
        jobs, out = scratch / f"runs-{index}.json", scratch / f"results-{index}.json"
        jobs.write_text(json.dumps(share))
        proc = subprocess.run(
            [sys.executable, __file__, "--runs", str(jobs), str(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        if proc.returncode:
            raise RuntimeError(f"the runs {list(share)} did not complete:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        return json.loads(out.read_text())

    with ThreadPoolExecutor(max_workers=workers) as pool:
        found = {key: value for share in pool.map(batch, range(workers)) for key, value in share.items()}
    return {
        key: subprocess.CompletedProcess(["snakemake", *runs[key][1]], found[key]["exit"], found[key]["text"], "")
        for key in keys
    }


def jobs_of(text: str) -> dict[str, dict[str, str]]:
    """The jobs a dry run printed, keyed by their outputs (a target rule without any: its name)."""
    found = {}
    for block in re.split(r"\n\s*\n", text):
        head = re.search(r"^(?:local)?rule (\w+):$", block, re.M)
        if not head:
            continue
        job = {"rule": head.group(1)}
        for line in block.splitlines():
            key, _, value = line.strip().partition(": ")
            if key in JOB_FIELDS:
                job[key] = value
            elif line.startswith("Shell command: "):
                job["shell"] = " ".join(line[len("Shell command: ") :].split())
        found[job.get("output", job["rule"])] = job
    return dict(sorted(found.items()))


def resources_of(text: str) -> dict[str, str]:
    """A job's printed resources as a mapping (their order is Snakemake's, not the workflow's)."""
    return dict(pair.split("=", 1) for pair in re.split(r", (?=\w+=)", text)) if text else {}


def _dry_run(args: list[str]) -> tuple[int, str]:
    """`snakemake ARGS` in this interpreter: its exit status and everything it printed."""
    from snakemake.cli import args_to_api, parse_args
    from snakemake.exceptions import print_exception

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            parser, parsed = parse_args(args)
            status = 0 if args_to_api(parsed, parser) else 1
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else 1
        except Exception as error:  # what snakemake's main() prints before it exits 1
            print_exception(error)
            status = 1
    return status, printed.getvalue()


class Planner:
    """One Snakemake interpreter for the session's planning runs (`-n`, `--lint`, `--list-rules`: runs that start
    no job), each answered in a fraction of a second instead of a new process's import of Snakemake. Requests go
    in on its stdin, answers come back on its stdout, one JSON line each (`serve`); it is started on first use
    and again if it died."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None

    def run(self, workdir: Path, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
        if self.proc is None or self.proc.poll() is not None:
            env = snakemake_env(OMP_NUM_THREADS="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1", TMPDIR=TMPDIR)
            self.proc = subprocess.Popen(
                [sys.executable, __file__, "--serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=env,
            )
        self.proc.stdin.write(json.dumps({"workdir": str(workdir), "args": list(args)}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        answer = self.proc.stdout.readline() if ready else ""
        if not answer:
            self.proc.kill()
            raise subprocess.TimeoutExpired(["snakemake", *args], timeout)
        found = json.loads(answer)
        return subprocess.CompletedProcess(["snakemake", *args], found["exit"], found["text"], "")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


PLANNER = Planner()  # the session's (tests/workflow/test_workflow.py's `snakemake`); ends when its stdin closes
atexit.register(PLANNER.close)


def serve() -> None:
    """--serve: each request line {"workdir", "args"} from stdin run in this interpreter, answered on the
    original stdout with one line {"exit", "text"}."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever else writes to fd 1 (a child process) cannot get into the answers
    os.cpu_count = lambda: CORES
    for line in sys.stdin:
        request = json.loads(line)
        os.chdir(request["workdir"])
        status, text = _dry_run(request["args"])
        answers.write(json.dumps({"exit": status, "text": text}) + "\n")
        answers.flush()


def main(argv: list[str]) -> None:
    if argv[0] == "--serve":
        serve()
        return
    if argv[0] == "--record":  # write the record: every dry run, run from the repository root
        runs = run_all(Path(tempfile.mkdtemp(prefix="scaledl-dry-runs-")) / "workflow")
        record = {key: {"exit": run.returncode, "jobs": jobs_of(run.stdout)} for key, run in runs.items()}
        Path(argv[1]).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        return
    _, jobs, out = argv  # --runs JOBS OUT: a worker, running JOBS' {key: [workdir, args]}, writing results to OUT
    os.cpu_count = lambda: CORES
    results = {}
    for key, (workdir, args) in json.loads(Path(jobs).read_text()).items():
        os.chdir(workdir)
        status, text = _dry_run(args)
        results[key] = {"exit": status, "text": text}
    Path(out).write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
