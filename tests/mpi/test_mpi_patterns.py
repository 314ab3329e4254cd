"""Message patterns at 1-4 ranks on rank-valued tensors, launched as mpiexec subprocesses with timeouts."""

from pathlib import Path

import pytest

from mpi_run import run_mpi
from scaledl.comm.roles import oversubscribed

HERE = Path(__file__).parent
pytestmark = pytest.mark.mpi


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_collectives_rank_valued(ranks):
    result = run_mpi(ranks, [str(HERE / "check_collectives.py")], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" ok") == ranks


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_master_patterns_rank_valued(ranks):
    """RMA center window (locked and lock-free), master-side momentum, the board, round-robin."""
    result = run_mpi(ranks, [str(HERE / "check_master_patterns.py")], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(" ok") == ranks


def test_ranks_share_the_cores_only_beyond_the_nodes_cpus():
    """Roles.shares_cores: a round-robin worker then waits for its turn asleep (both ways run above)."""
    assert not oversubscribed(2, cpus=2) and oversubscribed(3, cpus=2) and oversubscribed(17, cpus=2)
    assert not oversubscribed(17, cpus=68)
