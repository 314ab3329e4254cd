import sys
from pathlib import Path

# tests/ holds helpers (mpi_run.py) imported by the test modules.
sys.path.insert(0, str(Path(__file__).parent))

import pytest


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
