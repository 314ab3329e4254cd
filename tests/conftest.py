"""The suite's tiers, its shared data, and a record of every process it starts.

The folder a test lives in says what it needs and sets its marker: `unit/` runs in this process (seconds in all:
`pytest tests/unit`), `mpi/` starts MPI jobs, `process/` tests processes themselves (signals, killed and hung
ranks, refusals at start-up, fresh interpreters), `workflow/` runs Snakemake, `sim/` the simulated cluster,
`benches/` the benchmark scripts. `pytest -m "not workflow"` and the like select by it.
"""

import compileall
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# tests/ holds helpers (mpi_run.py, warm_ranks.py, ...) imported by the test modules, and a test module may
# import another's helpers whatever its folder (every folder's modules are top-level, by their file name).
sys.path[:0] = [
    str(Path(__file__).parent),
    *(
        str(p)
        for p in sorted(Path(__file__).parent.glob("*/"))
        if p.name in ("unit", "mpi", "process", "workflow", "sim", "benches")
    ),
]

import pytest
import slurm_background

# One torch thread in this process unless the shell chose otherwise: tests that start ranks leave the cores to
# them. (Every rank is started with one thread or its --threads, and a test that compares its own computation
# with a rank's sets both sides' count itself: mpi_run.torch_threads. Nothing needs exporting.)
os.environ.setdefault("OMP_NUM_THREADS", "1")
# MPICH's ranks busy-poll: on a machine with fewer cores than a test's ranks, waiting ones yield theirs.
os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")

TESTS = Path(__file__).parent
REPO = TESTS.parent
FOLDER_MARKERS = {
    "unit": "unit",
    "mpi": "mpi",
    "process": "process",
    "workflow": "workflow",
    "sim": "sim",
    "benches": "bench",
}
LAUNCHES = "launches.jsonl"  # under pytest's cache folder: one line per process a test started


def pytest_sessionstart(session):
    # Every rank and every subprocess imports the package: compiled once here, not by each of them (a machine
    # that sets PYTHONDONTWRITEBYTECODE still reads the compiled files).
    for folder in (REPO / "src", REPO / "bench", TESTS):
        compileall.compile_dir(folder, quiet=2, workers=1)
    if getattr(session.config, "cache", None) is not None:
        path = session.config.cache.mkdir("scaledl") / LAUNCHES
        path.unlink(missing_ok=True)
        _RecordedPopen.record = path


def pytest_collection_modifyitems(config, items):
    for item in items:
        marker = FOLDER_MARKERS.get(Path(item.fspath).parent.name)
        if marker:
            item.add_marker(marker)


def pytest_collection_finish(session):
    """The real-Slurm tests' cluster and workflows start now, in the background (tests/slurm_background.py)."""
    if not session.config.option.collectonly and any(item.get_closest_marker("slurm") for item in session.items):
        slurm_background.start()


def pytest_sessionfinish(session):
    slurm_background.stop()


def pytest_terminal_summary(terminalreporter):
    """How many processes the tests started, and the longest: the suite's time is mostly theirs."""
    path = _RecordedPopen.record
    if path is None or not path.exists():
        return
    launches = [json.loads(line) for line in path.read_text().splitlines()]
    if not launches:
        return
    total = sum(launch["wall_s"] for launch in launches)
    terminalreporter.section("processes started by the tests")
    terminalreporter.write_line(f"{len(launches)} launches, {total:.0f} s of wall time in all (every one: {path})")
    for launch in sorted(launches, key=lambda launch: -launch["wall_s"])[:10]:
        terminalreporter.write_line(
            f"{launch['wall_s']:7.1f} s  {launch['ranks']} rank(s)  {launch['program']:<12} {launch['test']}"
        )


class _RecordedPopen(subprocess.Popen):
    """subprocess.Popen that appends a line per process to the session's launch record once it has ended:
    the test, the program, its ranks and its wall time."""

    record: Path | None = None

    def __init__(self, args, *rest, **kwargs):
        self._started = time.monotonic()
        self._test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        self._recorded = False
        super().__init__(args, *rest, **kwargs)

    def _note(self):
        if self.returncode is None or self._recorded or self.record is None:
            return
        self._recorded = True
        argv = [str(a) for a in self.args] if isinstance(self.args, (list, tuple)) else str(self.args).split()
        ranks = int(argv[argv.index("-n") + 1]) if "mpiexec" in Path(argv[0]).name and "-n" in argv else 1
        program = next((argv[i + 1] for i in range(len(argv) - 1) if argv[i] == "-m" and argv[i + 1] != "mpi4py"), "")
        line = {
            "test": self._test,
            "program": program or Path(argv[0]).name,
            "ranks": ranks,
            "wall_s": round(time.monotonic() - self._started, 2),
            "status": self.returncode,
            "argv": argv[:12],
        }
        with open(self.record, "a") as out:
            out.write(json.dumps(line) + "\n")

    def wait(self, timeout=None):
        try:
            return super().wait(timeout)
        finally:
            self._note()

    def poll(self):
        try:
            return super().poll()
        finally:
            self._note()


subprocess.Popen = _RecordedPopen


@pytest.fixture(scope="session")
def digits_h5(tmp_path_factory):
    """The embedded default dataset, prepared once per test session."""
    from scaledl.data.converters import CONVERTERS
    from scaledl.data.converters.options import PrepareOptions

    out = tmp_path_factory.mktemp("data") / "digits.h5"
    CONVERTERS["digits"].convert(None, out, PrepareOptions(image_size=28))
    return out


@pytest.fixture(scope="session")
def shipped_dry_runs(tmp_path_factory):
    """Every shipped config's `snakemake -n -p`, with and without `--profile slurm` (tests/dry_runs.py),
    run once per session in a copy of the workflow: {key: CompletedProcess}, keys as in
    tests/workflow/dryruns.json (`cluster.yaml slurm`, `(no --configfile)`, ...)."""
    from dry_runs import run_all

    return run_all(tmp_path_factory.mktemp("dry-runs") / "workflow")
