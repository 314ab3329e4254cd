"""One worker and ρ = 0: each elastic algorithm is plain local SGD (momentum SGD for MEASGD), bit for bit."""

from pathlib import Path

import pytest

from mpi_run import run_mpi
from scaledl.algorithms import tasks_for

pytestmark = pytest.mark.mpi
CHECK = Path(__file__).parent / "check_parity.py"


@pytest.mark.parametrize("algorithm", ["easgd", "async_easgd", "hogwild_easgd", "async_measgd", "sync_easgd"])
def test_one_worker_rho_zero_is_local_sgd(digits_h5, tmp_path, algorithm):
    result = run_mpi(tasks_for(algorithm, 1), [str(CHECK), str(digits_h5), algorithm, str(tmp_path / "run")])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "identical to local" in result.stdout


# The overlapped exchange (helper thread) and the unoverlapped one do the same arithmetic: both are
# local SGD at one worker with ρ = 0, bit for bit (the async EASGD family overlaps by default).
@pytest.mark.parametrize(
    "algorithm, overlap",
    [
        ("async_easgd", "no-overlap"),
        ("hogwild_easgd", "no-overlap"),
        ("async_measgd", "no-overlap"),
        ("async_easgd", "overlap"),
        ("sync_easgd", "overlap"),
        ("sync_easgd3", "overlap"),
    ],
)
def test_one_worker_rho_zero_is_local_sgd_overlapped_or_not(digits_h5, tmp_path, algorithm, overlap):
    result = run_mpi(tasks_for(algorithm, 1), [str(CHECK), str(digits_h5), algorithm, str(tmp_path / "run"), overlap])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "identical to local" in result.stdout
    assert f"(overlap {overlap == 'overlap'})" in result.stdout
