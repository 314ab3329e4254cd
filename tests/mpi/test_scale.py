"""Every message pattern at P = 8 workers, more ranks than the machine has cores (marked slow).

One algorithm per pattern (scaledl.algorithms.PATTERNS) runs a few steps of LeNet on digits with
8 workers: round-robin `easgd`, the FCFS window `async_easgd`, the lock-free window `hogwild_easgd`
and the quorum rounds' `quorum_diloco` with a dedicated master (9 ranks), the collectives' `sync_easgd`
(8 ranks). Each must exit 0 with every rank accounted for in run.json: its steps, and every worker's
exchanges.
"""

import pytest

from mpi_run import run_train
from scaledl.algorithms import ALGORITHMS, PATTERNS, tasks_for
from scaledl.run_record import read_run_json

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

WORKERS = 8
STEPS = 3
ONE_PER_PATTERN = {"easgd": "round_robin", "async_easgd": "fcfs_window", "hogwild_easgd": "lock_free_window"}
ONE_PER_PATTERN["sync_easgd"] = "collectives"
ONE_PER_PATTERN["quorum_diloco"] = "quorum_rounds"
EXTRA = {"quorum_diloco": ["--tau", "1", "--quorum", "6"]}  # a round a step, closed by 6 of the 8


def test_one_algorithm_per_pattern():
    assert sorted(ONE_PER_PATTERN.values()) == sorted(PATTERNS)
    assert all(ALGORITHMS[a].pattern == p for a, p in ONE_PER_PATTERN.items())


def exchanges_by_rank(reports: list[dict]) -> dict[int, int]:
    """Every worker's exchanges: in its own report, or (round-robin) in the master's list of workers."""
    found = {}
    for report in reports:
        for worker in report.get("workers", [report] if "exchanges" in report else []):
            found[worker["rank"]] = worker["exchanges"]
    return found


@pytest.mark.parametrize("algorithm", list(ONE_PER_PATTERN))
def test_every_pattern_runs_with_eight_workers(digits_h5, tmp_path, algorithm):
    ranks = tasks_for(algorithm, WORKERS)
    out = tmp_path / "run"
    result = run_train(
        ranks,
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
            str(STEPS),
            "--eval-every",
            str(STEPS),
            "--checkpoint-interval",
            "0",
            "--expect-ranks",
            str(ranks),
            *EXTRA.get(algorithm, []),
        ],
        timeout=150,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run = read_run_json(out / "run.json")
    assert run["world"] == {**run["world"], "size": ranks, "workers": WORKERS}
    assert run["stop"]["reason"] == "max_steps" and run["stop"]["steps"] == STEPS
    assert 0 <= run["final"]["test_accuracy"] <= 1
    workers = exchanges_by_rank(run["algorithm_report"])
    first = 1 if ALGORITHMS[algorithm].needs_master else 0
    assert sorted(workers) == list(range(first, first + WORKERS)), run["algorithm_report"]
    if ALGORITHMS[algorithm].pattern == "round_robin":  # the master served ranks 1..8 in order, every round
        (master,) = [r for r in run["algorithm_report"] if "service_order_head" in r]
        assert master["served_in_rank_order"] and master["service_order_head"] == list(range(1, 9)) * STEPS
    if ALGORITHMS[algorithm].pattern in ("round_robin", "collectives"):
        assert set(workers.values()) == {STEPS}  # one exchange per worker per step
    else:  # a window step is P center updates, taken first come first served
        assert sum(workers.values()) >= STEPS * WORKERS and min(workers.values()) >= 1, workers
