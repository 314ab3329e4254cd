"""bench_averaging renders its two tables from a raw record alone; no MPI, no timing here.

The record is hand-made: int8 a fifth faster than fp32 and fp16 inside the A/A floor; a straggler
that triples the synchronous runs' time to target and leaves the asynchronous ones nearly alone.
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from test_bench_overhead_hogwild import record_file  # noqa: E402

from bench import bench_averaging as bench  # noqa: E402
from bench import stats  # noqa: E402

ROUNDS = [1.0, 1.02, 0.99, 1.01, 1.0]


def record(tmp_path) -> Path:
    samples, details = {}, {}
    parameters = 431_080
    for algorithm in bench.COMPRESSED:
        for codec, speed, size in (
            ("fp32", 1.0, 4 * parameters),
            ("fp16", 1.01, 2 * parameters),
            ("bf16", 0.98, 2 * parameters),
            ("int8", 0.8, parameters + 4),
        ):
            cell = bench.compression_cell(algorithm, codec)
            samples[cell] = [0.02 * speed * f for f in ROUNDS]
            details[cell] = [
                {
                    "seconds_per_step": v,
                    "transfer_s": 0.002,
                    "bytes_per_exchange": 2 * size,
                    "accuracy": 0.9 - (0.01 if codec == "int8" else 0.0) + 0.001 * i,
                }
                for i, v in enumerate(samples[cell])
            ]
    aa = stats.aa_cell(bench.compression_cell("sync_easgd", "fp32"))
    samples[aa] = [v * 1.02 for v in samples[bench.compression_cell("sync_easgd", "fp32")]]
    details[aa] = details[bench.compression_cell("sync_easgd", "fp32")]
    for algorithm in bench.STRAGGLED:
        factor = 1.05 if algorithm in bench.MASTER_BASED else 3.0
        samples[bench.straggler_cell(algorithm, None)] = [2.0 * f for f in ROUNDS]
        samples[bench.straggler_cell(algorithm, "1:3")] = [2.0 * factor * f for f in ROUNDS]
    samples[stats.aa_cell(bench.straggler_cell("sync_sgd", None))] = [2.02 * f for f in ROUNDS]
    meta = {
        "rounds": 5,
        "steps": 100,
        "target": 0.9,
        "straggler": "1:3",
        "details": details,
        "raw": "bench/raw/averaging.json",
        "wall_s": 300.0,
    }
    return record_file(tmp_path, "averaging", samples, meta)


def test_render_states_bytes_verdicts_and_slowdowns(tmp_path):
    title, intro, tables, notes = bench.render(json.loads(record(tmp_path).read_text()))
    lines = tables.splitlines()
    int8 = next(line for line in lines if line.startswith("| sync_easgd (τ = 1) | int8"))
    fp16 = next(line for line in lines if line.startswith("| sync_easgd (τ = 1) | fp16"))
    assert "0.862 MB" in int8 and "faster" in int8 and "no difference" in fp16
    diloco = next(line for line in lines if line.startswith("| diloco (τ = 8) | fp32"))
    assert "3.449 MB" in diloco and "0.431 MB" in diloco  # bytes per round, and per step (÷ τ)
    sync = next(line for line in lines if line.startswith("| sync_sgd |"))
    async_ = next(line for line in lines if line.startswith("| async_easgd"))
    assert "3.000×" in sync and "slower" in sync
    assert "1.050×" in async_ and "†" in async_ and "asynchronous" in async_
    assert "rank 1 slowed by a factor 3" in intro


def test_render_flag_rebuilds_the_section_from_the_file(tmp_path, capsys):
    assert bench.main(["--render", "--raw", str(record(tmp_path)), "--no-doc"]) == 0
    assert capsys.readouterr().out.startswith("## The averaging family")
