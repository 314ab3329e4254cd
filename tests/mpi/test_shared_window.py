"""--center-window shared: the center in an MPI shared-memory window that the workers update directly.

Same arithmetic as the RMA window (bitwise, one worker), the exclusive lock
still excludes, the elastic algorithms with one worker are still plain SGD,
and a job whose ranks span nodes is refused in one line.
"""

from pathlib import Path

import pytest

from mpi_run import run_mpi, run_train
from scaledl.algorithms import ALGORITHMS, accepting, tasks_for
from scaledl.run_record import read_run_json

pytestmark = pytest.mark.mpi
HERE = Path(__file__).parent
CHECK = HERE / "check_shared_window.py"
PARITY = HERE / "check_parity.py"
WINDOW_ALGORITHMS = ["async_easgd", "async_measgd", "async_msgd", "async_sgd", "hogwild_easgd", "hogwild_sgd"]


def test_the_window_algorithms_and_only_they_take_the_setting():
    assert sorted(accepting("center_window")) == WINDOW_ALGORITHMS
    assert all(ALGORITHMS[key].pattern.endswith("_window") for key in WINDOW_ALGORITHMS)


def test_shared_window_computes_what_the_rma_window_computes_and_locks_alike():
    result = run_mpi(3, [str(CHECK)], timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "shared window: OK" in result.stdout
    assert "shared exclusive: W in [80, 80] of 80, 0 of 80 epochs overlapped" in result.stdout


@pytest.mark.parametrize("algorithm", ["async_easgd", "hogwild_easgd", "async_measgd"])
def test_one_worker_rho_zero_is_local_sgd_on_the_shared_window(digits_h5, tmp_path, algorithm):
    result = run_mpi(tasks_for(algorithm, 1), [str(PARITY), str(digits_h5), algorithm, str(tmp_path / "run"), "shared"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "identical to local" in result.stdout
    assert "center window: shared" in result.stdout


def test_hogwild_sgd_trains_on_the_shared_window_and_records_it(digits_h5, tmp_path):
    out = tmp_path / "run"
    result = run_train(
        3,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "hogwild_sgd",
            "--out-dir",
            str(out),
            "--max-steps",
            "6",
            "--eval-every",
            "3",
            "--center-window",
            "shared",
        ],
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = read_run_json(out / "run.json")
    assert run["arguments"]["center_window"] == "shared"


def test_shared_window_across_nodes_is_refused_in_one_line(digits_h5, tmp_path):
    """MPICH's MPIR_CVAR_NUM_CLIQUES=2 makes one machine look like two nodes to MPI_Comm_split_type."""
    result = run_train(
        3,
        [
            "--data",
            str(digits_h5),
            "--model",
            "lenet",
            "--algorithm",
            "async_sgd",
            "--out-dir",
            str(tmp_path / "run"),
            "--max-steps",
            "2",
            "--center-window",
            "shared",
        ],
        timeout=120,
        env={"MPIR_CVAR_NUM_CLIQUES": "2"},
    )
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    if result.returncode == 0:
        pytest.skip("this MPI ignores MPIR_CVAR_NUM_CLIQUES (not MPICH): cannot fake two nodes")
    assert result.returncode == 2, result.stderr[-2000:]
    assert errors == [
        "scaledl train: error: --center-window shared needs every rank on one node, but the 3 ranks "
        "span 2 nodes; use --center-window rma (RMA works across nodes)"
    ]
    # refused before the board's window exists: no MPI teardown warnings (UCX's "not returned to mpool") follow
    assert result.stdout.strip() == "", result.stdout[-2000:]


@pytest.mark.parametrize("algorithm", ["async_sgd", "async_msgd", "async_easgd"])
def test_one_worker_trains_bit_for_bit_alike_on_either_window(digits_h5, tmp_path, algorithm):
    """push_then_pull (async_sgd), momentum_step (async_msgd, V at the master), pull_then_push with ρ > 0 (async_easgd)."""
    import torch

    saved = {}
    for kind in ("rma", "shared"):
        out = tmp_path / kind
        result = run_train(
            2,
            [
                "--data",
                str(digits_h5),
                "--model",
                "lenet",
                "--algorithm",
                algorithm,
                "--out-dir",
                str(out),
                "--max-steps",
                "8",
                "--eval-every",
                "4",
                "--center-window",
                kind,
            ],
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        saved[kind] = torch.load(out / "model.pt", map_location="cpu")
    rma, shared = (saved[k]["state_dict"] if "state_dict" in saved[k] else saved[k] for k in ("rma", "shared"))
    assert rma.keys() == shared.keys()
    assert all(torch.equal(rma[k], shared[k]) for k in rma), algorithm
