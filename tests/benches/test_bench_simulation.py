"""The simulation bench's section, rendered from a hand-made record: the validation verdicts, the α-β column,
the cost goal."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import bench_simulation, common  # noqa: E402


def record(tmp_path) -> dict:
    samples = {}
    for pattern in bench_simulation.PATTERNS:
        measured = [0.050, 0.052, 0.049]
        factor = 1.1 if "sync_sgd" not in pattern else 1.5  # one pattern outside ±20 %
        samples[f"{pattern}: measured"] = measured
        samples[f"{pattern}: simulated"] = [x * factor for x in measured]
    times = {"alpha": 1e-6}
    for n in bench_simulation.COLLECTIVE_SIZES:
        for op in ("allreduce", "bcast", "reduce"):
            times[f"{op} {n}"] = 1e-3
    run = {"simulated_s": 0.05, "wall_s": 10.0, "cpu_s": 9.5, "real_compute_s": 8.0, "process_wall_s": 14.0}
    meta = {
        "warmup": 10,
        "steps": 30,
        "rounds": 3,
        "collectives": {str(p): times for p in bench_simulation.COLLECTIVE_RANKS},
        "cost": {"k80x8 P=8 (digits)": [{**run, "eval_real_s": 0.5}] * 3},
        "raw": "x.json",
        "wall_s": 100.0,
        "machine": {},
    }
    return common.read_raw(common.write_raw(tmp_path / "simulation.json", "simulation", samples, meta))


def test_the_simulation_section_reads_its_goals(tmp_path):
    title, intro, tables, notes = bench_simulation.render(record(tmp_path))
    row = lambda words: next(line for line in tables.splitlines() if words in line)  # noqa: E731
    assert row("round robin (easgd)").endswith("| yes |")  # 1.1×: within ±20 %
    assert row("collectives (sync_sgd)").endswith("| no |")  # 1.5×: outside
    assert "| 64 | 67108864 | allreduce | rabenseifner |" in tables  # the algorithm the simulated MPI runs at that size
    # 10 s of wall over 8 + 0.5 s of real compute: 1.18×, within the 1.3× goal
    assert "1.18" in row("k80x8 P=8 (digits)") and row("k80x8 P=8 (digits)").count("| yes |") == 1
    assert "Only 3 round(s)" in notes
