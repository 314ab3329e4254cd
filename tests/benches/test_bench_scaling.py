"""bench/bench_scaling.py's plan and render on hand-made records: no MPI, no training, no timing."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bench_scaling, common, stats  # noqa: E402
from scaledl.net.alphabeta import Network, step_cost  # noqa: E402

MACHINE = {
    "cpu": "test CPU",
    "cores": 2,
    "memory": "4 GiB",
    "gpus": "no GPU",
    "mpi": "test MPI",
    "torch": "t",
    "numpy": "n",
    "python": "3",
    "date": "today",
    "load_before": 0.1,
    "load_after": 0.1,
    "launch": {"threads": 1, "thp": True, "yield_poll": True, "bind": True},
}
NET = {"alpha_s": 2e-6, "beta_s_per_byte": 1e-10, "gamma_s_per_byte": 5e-11, "source": "test", "note": None}
BYTES = 1_000_000
ROUNDS = 5


def record(step, compute=None, workers=(1, 2, 4), aa_jitter=0.01, network=NET):
    """A raw record as bench_scaling writes it. step(cell config, round) gives s/step; compute(config, round)
    the compute per step (default 80 % of the step); every A/A twin is its first cell × (1 ± aa_jitter)."""
    compute = compute or (lambda cfg, r: 0.8 * step(cfg, r))
    layout = bench_scaling.plan(bench_scaling.ALGORITHMS, list(workers), 64, 128)
    samples, splits = {}, {}
    for cell, cfg in layout["cells"].items():
        twin = cell.endswith(stats.AA_SUFFIX)
        factor = [1 + aa_jitter * (-1) ** r for r in range(ROUNDS)] if twin else [1.0] * ROUNDS
        samples[cell] = [step(cfg, r) * factor[r] for r in range(ROUNDS)]
        splits[cell] = []
        for r in range(ROUNDS):
            c = compute(cfg, r) * factor[r]
            transfer = 0.1 * (samples[cell][r] - c)
            splits[cell].append(
                {
                    "compute_s": c,
                    "transfer_s": transfer,
                    "wait_s": samples[cell][r] - c - transfer,
                    "exposed_s": samples[cell][r] - c,
                    "phases": {},
                }
            )
    meta = {
        "dataset": "digits",
        "model": "lenet",
        "lr": 0.05,
        "algorithms": list(bench_scaling.ALGORITHMS),
        "workers": list(workers),
        "batch": 64,
        "global_batch": 128,
        "warmup": 10,
        "steps": 30,
        "rounds": ROUNDS,
        "rows": layout["rows"],
        "cells": layout["cells"],
        "aa": layout["aa"],
        "order": [stats.round_order(list(layout["cells"]), r, ROUNDS) for r in range(ROUNDS)],
        "splits": splits,
        "message_bytes": BYTES,
        "marks": {str(p): "†" if p > MACHINE["cores"] else "" for p in workers},
        "network": network,
        "raw": "bench/raw/scaling.json",
        "wall_s": 120.0,
    }
    return {"bench": "scaling", "machine": MACHINE, "samples": samples, "meta": meta}


def weak_perfect(cfg, r):
    """Every weak cell at 10 ms (perfect weak scaling), strong cells proportional to the batch."""
    return 0.010 * cfg["batch"] / 64 * (1 + 0.001 * r)


def tables_of(rec: dict) -> tuple[str, str]:
    """The step table and the time-split table of a record."""
    floors = bench_scaling.noise_floors(rec)
    return bench_scaling.scaling_table(rec, floors), bench_scaling.time_table(rec, floors)


def row_of(table: str, *cells: str) -> str:
    """The one row of a markdown table whose first cells are `cells`."""
    prefix = "| " + " | ".join(cells) + " |"
    lines = [line for line in table.splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, (prefix, table)
    return lines[0]


def test_plan_makes_strong_p2_the_twin_of_weak_p2():
    layout = bench_scaling.plan(["sync_sgd"], [1, 2, 4], 64, 128)
    strong = {r["workers"]: r["cell"] for r in layout["rows"] if r["scaling"] == "strong"}
    weak = {r["workers"]: r["cell"] for r in layout["rows"] if r["scaling"] == "weak"}
    assert layout["aa"]["sync_sgd"] == [weak[2], stats.aa_cell(weak[2])]
    assert strong[2] == stats.aa_cell(weak[2])
    assert strong[4] == "sync_sgd P=4 batch=32"
    assert len(layout["cells"]) == 6  # weak 1, 2, 4; strong 1, 4; the twin (= strong 2): no extra run


def test_plan_adds_an_aa_run_when_no_strong_row_repeats_a_weak_one():
    layout = bench_scaling.plan(["sync_sgd"], [1, 2], 64, 256)
    strong = {r["workers"]: r["cell"] for r in layout["rows"] if r["scaling"] == "strong"}
    assert strong[2] == "sync_sgd P=2 batch=128"
    assert stats.aa_cell("sync_sgd P=2 batch=64") in layout["cells"]
    assert len(layout["cells"]) == 5


def test_perfect_weak_scaling_is_no_difference_and_oversubscription_is_marked():
    rec = record(weak_perfect)
    steps, _ = tables_of(rec)
    row = row_of(steps, "sync_sgd", "weak", "2")
    assert "1.000× [1.000–1.000] n=5" in row and row.endswith("| no difference |")
    assert row_of(steps, "sync_sgd", "weak", "4†").endswith("| no difference |")
    assert row_of(steps, "sync_sgd", "strong (A/A twin)", "2").endswith("| no difference |")
    _, _, tables, notes = bench_scaling.render(rec)
    assert "† 4 workers exceed the 2 cores" in notes
    assert "| sync_sgd P=2 batch=64 | s/step |" in tables  # the A/A table


def test_a_slowdown_beyond_the_aa_floor_is_below_ideal_with_paired_spread():
    slow = lambda cfg, r: 0.010 * (2 if cfg["workers"] == 2 and cfg["batch"] == 64 else 1)  # noqa: E731
    steps, _ = tables_of(record(slow))
    row = row_of(steps, "sync_easgd", "weak", "2")
    # efficiency t(1)/t(P), speedup P·t(1)/t(P), verdict
    assert "| 0.500× [0.500–0.500] n=5 | 1.000× [1.000–1.000] n=5 | below ideal |" in row


def test_a_slowdown_inside_the_aa_floor_is_no_difference():
    slow = lambda cfg, r: 0.010 * (1.03 if cfg["workers"] == 2 else 1)  # noqa: E731
    steps, _ = tables_of(record(slow, aa_jitter=0.05))
    row = row_of(steps, "sync_sgd", "weak", "2")
    assert "0.971× [0.971–0.971] n=5" in row and row.endswith("| no difference |")


def test_prediction_takes_t_c_from_the_compute_measured_at_that_p():
    compute = lambda cfg, r: 0.002 * cfg["workers"] + 0.0001 * r  # contention: compute grows with P  # noqa: E731
    rec = record(weak_perfect, compute=compute)
    row = next(
        r for r in rec["meta"]["rows"] if r["algorithm"] == "sync_sgd" and r["scaling"] == "weak" and r["workers"] == 2
    )
    pred = bench_scaling.predictions(rec, row)
    net = Network(NET["alpha_s"], NET["beta_s_per_byte"], NET["gamma_s_per_byte"])
    comm = step_cost("sync_sgd", net, BYTES, 2, model="bandwidth_optimal", control=True).exposed_s
    assert pred["exposed_s"] == pytest.approx(comm)
    assert pred["step_s"] == pytest.approx([0.004 + 0.0001 * r + comm for r in range(ROUNDS)])
    _, split = tables_of(rec)
    assert "| compute grows |" in row_of(split, "sync_sgd", "weak", "2")
    assert "| no difference |" not in row_of(split, "sync_sgd", "weak", "2")


@pytest.mark.parametrize("exchange", ["allreduce", "rooted", None])
def test_the_model_column_prices_the_exchange_the_runs_used(exchange):
    """Sync EASGD's α-β column follows each run's recorded exchange (a record from before it was kept: the
    Allreduce default its runs used), not step_cost's rooted default."""
    rec = record(weak_perfect)
    row = next(r for r in rec["meta"]["rows"] if r["algorithm"] == "sync_easgd" and r["workers"] == 2)
    for split in rec["meta"]["splits"][row["cell"]]:
        split["exchange"] = exchange
    net = Network(NET["alpha_s"], NET["beta_s_per_byte"], NET["gamma_s_per_byte"])
    priced = exchange or common.UNRECORDED_EXCHANGE
    cost = step_cost("sync_easgd", net, BYTES, 2, model="bandwidth_optimal", control=True, exchange=priced)
    pred = bench_scaling.predictions(rec, row)
    assert pred["exposed_s"] == pytest.approx(cost.exposed_s) and pred["formula"] == cost.formula
    assert ("bcast" in pred["formula"]) == (priced == "rooted")


def test_without_network_every_row_says_no_prediction():
    rec = record(weak_perfect, network=None)
    steps, split = tables_of(rec)
    assert "| no prediction | – |" in row_of(steps, "sync_sgd", "weak", "2")
    assert row_of(split, "sync_sgd", "weak", "2").endswith("| no prediction | – |")
    assert "No prediction" in bench_scaling.render(rec)[3]


def test_render_flag_rebuilds_the_tables_from_the_raw_file(tmp_path, capsys):
    rec = record(weak_perfect)
    path = common.write_raw(tmp_path / "scaling.json", "scaling", rec["samples"], {"machine": MACHINE, **rec["meta"]})
    assert bench_scaling.main(["--render", "--raw", str(path), "--no-doc"]) == 0
    printed = capsys.readouterr().out
    _, intro, tables, _ = bench_scaling.render(common.read_raw(path))
    assert tables.strip() in printed and intro.strip() in printed


def test_render_of_a_missing_or_foreign_file_is_one_line(tmp_path):
    with pytest.raises(SystemExit) as missing:
        bench_scaling.main(["--render", "--raw", str(tmp_path / "none.json"), "--no-doc"])
    assert str(missing.value).startswith("bench_scaling: ") and "no such file" in str(missing.value)
    other = common.write_raw(tmp_path / "ddp.json", "ddp", {"x": [1.0]}, {"machine": MACHINE})
    with pytest.raises(SystemExit) as foreign:
        bench_scaling.main(["--render", "--raw", str(other), "--no-doc"])
    assert "not a bench_scaling record" in str(foreign.value) and "\n" not in str(foreign.value)
