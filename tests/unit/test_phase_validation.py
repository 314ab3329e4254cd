"""The per-phase validation's arithmetic (bench/bench_phases.py) and the calibration's load line: no MPI, no timing."""

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bench_phases as bench  # noqa: E402
from scaledl.comm.timing import PHASES  # noqa: E402
from scaledl.sim.calibrate import TEMPLATE, calibration_load  # noqa: E402


def timeline(steps: int, per_phase: dict[str, float], extra: float = 0.0):
    """A rank's timeline: every step spends per_phase[p] in phase p, plus `extra` seconds no phase covers."""
    row = np.array([per_phase.get(p, 0.0) for p in PHASES])
    ends = np.cumsum(np.full(steps, row.sum() + extra))
    return ends, np.tile(row, (steps, 1))


def test_rank_phases_groups_the_phases_and_leaves_the_rest_in_other():
    ends, rows = timeline(8, {"compute": 0.010, "update": 0.002, "comm": 0.001, "param_copy": 0.0005,
                              "wait": 0.003, "data": 0.0002}, extra=0.0003)  # fmt: skip
    found = bench.rank_phases(ends, rows, warmup=2)
    assert found["steps"] == 6
    assert found["compute"] == pytest.approx(0.012)
    assert found["comm"] == pytest.approx(0.0015)
    assert found["wait"] == pytest.approx(0.003)
    assert found["data"] == pytest.approx(0.0002)
    assert found["total"] == pytest.approx(0.0170)
    assert found["other"] == pytest.approx(0.0003)


def test_rank_phases_leaves_out_the_warmup():
    ends, rows = timeline(6, {"compute": 0.01})
    rows[0, PHASES.index("compute")] = 5.0  # a slow first step
    ends = np.cumsum(rows.sum(axis=1))
    assert bench.rank_phases(ends, rows, warmup=1)["compute"] == pytest.approx(0.01)


def test_rank_phases_without_steady_steps():
    ends, rows = timeline(2, {"compute": 0.01})
    assert bench.rank_phases(ends, rows, warmup=2) == {"steps": 0}


def test_by_role_averages_the_workers_and_keeps_the_master_apart():
    def rank(n, role, total):
        return {"rank": n, "role": role, "steps": 5, **dict.fromkeys(bench.SHOWN, 0.0), "total": total}

    roles = bench.by_role([rank(0, "master", 1.0), rank(1, "worker", 2.0), rank(2, "worker", 4.0),
                           {"rank": 3, "role": "worker", "steps": 0}])  # fmt: skip
    assert list(roles) == ["worker", "master"]
    assert roles["worker"]["total"] == 3.0
    assert roles["master"]["total"] == 1.0
    assert list(bench.by_role([rank(0, "master+worker", 2.0)])) == ["worker"]


def test_cells_fit_the_cores_unless_oversubscribed():
    plan = bench.cells(["sync_sgd", "easgd"], [1, 2], cores=2, oversubscribed=False)
    assert [(c["cell"], c["ranks"]) for c in plan] == [("easgd P=1", 2), ("sync_sgd P=2", 2)]
    plan = bench.cells(["sync_sgd", "easgd"], [1, 2], cores=2, oversubscribed=True)
    assert [(c["cell"], c["oversubscribed"]) for c in plan][-1] == ("easgd P=2", True)
    assert len(bench.cells(list(bench.ALGORITHMS), [4, 8], cores=16, oversubscribed=False)) == 14


def test_a_round_with_its_own_calibration_is_divided_by_its_own_simulation():
    assert bench.ratios([1.0, 2.0], [2.0, 4.0]) == [0.5, 0.5]  # paired round by round, not 1/4 and 2/2
    assert bench.ratios([1.0], [2.0, 4.0]) == [0.5, 0.25]  # one simulation against every round
    assert bench.ratios([1.0, 2.0], [0.0, 4.0]) == [0.5]


def test_ratio_cell():
    assert bench.ratio_cell([1.0], [2.0, 4.0]).startswith("0.375×")
    assert bench.ratio_cell([1.0], [0.0]) == "–"


def test_phase_rows_one_per_cell_role_and_phase():
    plan = bench.cells(["easgd"], [1], cores=2, oversubscribed=False)
    phases = {"worker": dict.fromkeys(bench.SHOWN, 0.01), "master": dict.fromkeys(bench.SHOWN, 0.02)}
    details = {"easgd P=1": {"measured": [phases, phases], "simulated": [phases]}}
    rows = bench.phase_rows(details, plan)
    assert len(rows) == 2 * len(bench.SHOWN)
    assert {r["rank"] for r in rows} == {"worker", "master"}
    assert rows[0]["simulated ÷ measured"].startswith("1.000×")


def test_calibration_load_reads_the_header_line():
    header = TEMPLATE.split("<platform")[0].format(
        name="x", cores=16, date="d", cpu="c", torch="t", alpha=1e-6, bw=1e10, netbench="nb.json", speed=1e10,
        model="lenet", batch=64, step_ms=18.0, mem=1e10, overhead=1e-6, cv=0.1, detour_rate=0.0, detour_s=0.0, fitted="hot",
        busy=15, stamp="s", host="h", code="v", commit="c", half_rows=70.0, half_columns=3.5, half_depth=56.0,
        conv_overhead=4e-5, shape_count=78, shape_error=0.3, segments_text="", segments_prop="", core_factors=None, cores_text="", cores_prop="",
    )  # fmt: skip
    assert calibration_load(header) == 15
    assert calibration_load("<!-- a platform written by hand -->") is None
    assert calibration_load((REPO / "src/scaledl/sim/platforms/laptop.xml").read_text()) is None


def test_staleness_is_shown_side_by_side_for_the_cells_that_read_a_center():
    plan = [
        {"cell": "hogwild_easgd P=2", "algorithm": "hogwild_easgd", "workers": 2, "oversubscribed": True},
        {"cell": "sync_sgd P=2", "algorithm": "sync_sgd", "workers": 2, "oversubscribed": False},
    ]
    seen = {"median": 1, "p90": 2, "max": 3}
    staleness = {
        "hogwild_easgd P=2": {"measured": [seen, {**seen, "max": 4}], "simulated": [seen]},
        "sync_sgd P=2": {"measured": [None], "simulated": [None]},
    }
    assert bench.staleness_rows(staleness, plan) == [
        {"pattern": "hogwild_easgd†", "P": 2, "measured": "1/2/3, 1/2/4", "simulated": "1/2/3"}
    ]
