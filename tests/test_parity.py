"""One worker and ρ = 0: each elastic algorithm is plain local SGD (momentum SGD for MEASGD), bit for bit."""

from pathlib import Path

import pytest

from mpi_run import run_mpi
from scaledl.algorithms import tasks_for

pytestmark = pytest.mark.mpi
CHECK = Path(__file__).parent / "mpi" / "check_parity.py"


@pytest.mark.parametrize("algorithm", ["easgd", "async_easgd", "hogwild_easgd", "async_measgd", "sync_easgd"])
def test_one_worker_rho_zero_is_local_sgd(digits_h5, tmp_path, algorithm):
    result = run_mpi(tasks_for(algorithm, 1), [str(CHECK), str(digits_h5), algorithm, str(tmp_path / "run")])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "identical to local" in result.stdout
