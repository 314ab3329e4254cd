"""bench_ladder's rendering, from hand-made raw records (nothing is measured here, no timing is asserted)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import bench_ladder as ladder  # noqa: E402
from bench import common, stats  # noqa: E402

TTT_S = {"easgd": 2.0, "sync_easgd1": 1.0, "sync_easgd2": 0.8, "sync_easgd3": 0.7}
HEAVY_S = {"sync_easgd1": 1.2, "sync_easgd2": 1.0, "sync_easgd3": 0.9}
LENET_BYTES, ALEXNET_BYTES = 1_724_320, 143_000_000


def detail(seconds: float, nbytes: int, *, accuracy: float = 0.9, steps: int = 48, hidden=None) -> dict:
    return {
        "train_s": seconds,
        "steps": steps,
        "final_accuracy": accuracy,
        "final_loss": 0.4,
        "seconds_per_step": seconds / steps,
        "compute_s": 0.6 * seconds / steps,
        "transfer_s": 0.1 * seconds / steps,
        "wait_s": 0.05 * seconds / steps,
        "exposed_s": 0.15 * seconds / steps,
        "transfer_share": 0.1,
        "exposed_share": 0.15,
        "steady_steps": steps - 5,
        "warmup": 5,
        "backend": "mpi",
        "phase_gap": 0.01,
        "model_bytes": nbytes,
        "hidden_s": hidden,
        "run_wall_s": 6.0,
    }


def record(*, network: bool = True, accuracy_off: bool = False, rounds: int = 5) -> dict:
    """A raw record shaped like bench_ladder's, with the A/A twin a few percent off its original."""
    ttt = ladder.ttt_variants(2, fair=False)
    heavy = ladder.heavy_variants(2, list(ladder.HEAVY_LEVELS))
    samples, ttt_detail, heavy_detail = {}, {}, {}
    for v in ttt:
        base = TTT_S[v.level]
        values = [base * (1 + 0.01 * ((r + v.twin) % 3)) for r in range(rounds)]
        samples[v.cell(ladder.TTT_TABLE)] = values
        steps = 45 if v.level == "easgd" else 48
        ttt_detail[v.cell(ladder.TTT_TABLE)] = [
            detail(x, LENET_BYTES, steps=steps, accuracy=0.5 if accuracy_off and v.level == "sync_easgd3" else 0.9)
            for x in values
        ]
    for v in heavy:
        values = [HEAVY_S[v.level] * (1 + 0.02 * ((r + v.twin) % 2)) for r in range(3)]
        samples[v.cell(ladder.HEAVY_TABLE)] = values
        heavy_detail[v.cell(ladder.HEAVY_TABLE)] = [
            detail(x, ALEXNET_BYTES, steps=10, hidden=0.3 if v.level == "sync_easgd3" else None) for x in values
        ]
    net = (
        {"alpha_s": 2e-6, "beta_s_per_byte": 2e-10, "gamma_s_per_byte": 4e-11, "source": "hand-made"}
        if network
        else {"missing": "netbench failed here (exit 1)"}
    )
    machine = {
        "cpu": "test CPU",
        "cores": 2,
        "memory": "1 GiB",
        "gpus": "no GPU",
        "mpi": "MPICH",
        "torch": "x",
        "numpy": "x",
        "python": "3",
        "date": "today",
        "load_before": 0.0,
        "load_after": 0.0,
    }
    return {
        "bench": ladder.NAME,
        "machine": machine,
        "launch": {"threads": 1, "thp": True, "yield_poll": True, "bind": True},
        "samples": samples,
        "meta": {
            "workers": 2,
            "target": 0.9,
            "cost_model": "paper",
            "network": net,
            "targets": {"easgd, P=2": {"step": 45, "accuracy": 0.9}, "sync_easgd, P=2": {"step": 48, "accuracy": 0.9}},
            "variants": {"ttt": [ladder.vars_of(v) for v in ttt], "heavy": [ladder.vars_of(v) for v in heavy]},
            "ttt": {**ladder.TTT, "rounds": rounds, "order": [], "detail": ttt_detail},
            "heavy": {**ladder.HEAVY, "rounds": 3, "warmup": 3, "steps": 10, "order": [], "detail": heavy_detail},
            "wall_s": 250.0,
            "blocks_s": {"netbench_s": 6.0, "target_steps_s": 15.0},
        },
    }


def row(tables: str, level: str, nth: int = 0) -> list[str]:
    """The cells of the nth markdown row of `tables` whose first cell is `level`."""
    rows = [line for line in tables.splitlines() if line.startswith(f"| {level} |")]
    return [c.strip() for c in rows[nth].strip("|").split("|")]


def test_render_marks_the_oversubscribed_baseline_and_compares_each_level_with_the_previous():
    title, intro, tables, notes = ladder.render(record())
    assert title == ladder.TITLE
    easgd = row(tables, "easgd")
    assert easgd[2] == "3†"  # P + 1 ranks on 2 cores
    assert row(tables, "sync_easgd2")[2] == "2"
    s1 = row(tables, "sync_easgd1")
    # previous ÷ this, paired per round: easgd 2.0 s over sync_easgd1 1.0 s, every round
    assert "easgd" in s1 and "2.000× [2.000–2.000] n=5" in s1 and "faster" in s1
    assert "3.7×" in s1  # the paper's, beside ours
    assert "no difference" in row(tables, "sync_easgd2 [A/A]")  # inside its own floor by construction
    assert "noise floor" in tables and "Resolution: one step" in tables
    assert "† marks" in intro and "α = 2 µs" in intro


def test_every_measured_row_carries_an_alpha_beta_prediction():
    _, _, tables, _ = ladder.render(record())
    for level in ("easgd", "sync_easgd1", "sync_easgd2", "sync_easgd3", "sync_easgd2 [A/A]"):
        cells = row(tables, level)
        assert any(c.endswith(" s") and c[0].isdigit() for c in cells[5:6]), cells  # steps × predicted s/step
        assert any("ms" in c for c in row(tables, level, 1)), level  # the per-step table
    assert "P·(T_c + 2(Lα + nβ))" in tables  # round-robin's formula for easgd


def test_the_model_columns_price_the_exchange_each_run_used():
    """Sync EASGD's α-β cells follow the runs' recorded exchange; a record from before it was kept prices the
    Allreduce default its runs used (step_cost's own default is Bcast + Reduce)."""
    rec = record()
    _, _, tables, _ = ladder.render(rec)
    assert "allreduce[" in tables and "bcast[" not in tables
    for table in ("ttt", "heavy"):
        for details in rec["meta"][table]["detail"].values():
            for d in details:
                d["exchange"] = "rooted"
    _, _, rooted, _ = ladder.render(rec)
    assert "bcast[" in rooted and rooted != tables


def test_without_alpha_beta_the_tables_say_so():
    _, intro, tables, _ = ladder.render(record(network=False))
    assert "no α-β prediction: netbench failed here" in intro
    assert row(tables, "easgd")[5] == "–"


def test_transfer_and_exposed_shares_are_separate_labelled_columns():
    _, _, tables, notes = ladder.render(record())
    assert "transfer share (h2d+param_copy+comm)" in tables and "exposed share (transfer+wait)" in tables
    assert "paper comm share" not in tables
    assert "the exposed share adds `wait`" in notes


def test_heavy_table_shows_hidden_time_for_the_overlapped_level_only():
    _, _, tables, notes = ladder.render(record())
    header = next(line for line in tables.splitlines() if "hidden (helper − waited)" in line)
    column = [c.strip() for c in header.strip("|").split("|")].index("hidden (helper − waited)")
    heavy_rows = [line for line in tables.splitlines() if line.count("|") == header.count("|")]
    hidden = {
        cells[0]: cells[column]
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in heavy_rows)
        if cells[0].startswith("sync")
    }
    assert hidden["sync_easgd3"] == "300 [300–300]"  # ms per step
    assert hidden["sync_easgd2"] == "–"
    assert "easgd is left out of this table by default" in tables


def test_a_timed_run_that_misses_the_target_accuracy_is_reported():
    _, _, _, notes = ladder.render(record(accuracy_off=True))
    assert "did not reproduce the target-step run" in notes and "sync_easgd3, P=2 round 1" in notes
    _, _, _, notes = ladder.render(record())
    assert "same test accuracy, to the last digit" in notes


def test_few_rounds_are_flagged():
    _, _, _, notes = ladder.render(record(rounds=2))
    assert "Only 2 round(s)" in notes


def test_hidden_per_step_uses_the_steady_state_exchanges_of_every_worker():
    run = {
        "algorithm_report": [
            {"rank": 0, "overlap_per_exchange": {"exchange_s": [9.0, 9.0, 1.0, 1.0], "waited_s": [0.0, 0.0, 0.2, 0.4]}},
            {"rank": 1, "overlap_per_exchange": {"exchange_s": [9.0, 9.0, 2.0, 2.0], "waited_s": [0.0, 0.0, 0.0, 0.0]}},
        ]
    }
    assert ladder.hidden_per_step(run, warmup=2) == pytest.approx((0.7 + 2.0) / 2)
    assert ladder.hidden_per_step({"algorithm_report": [{"rank": 0}]}, warmup=2) is None


def test_variants_rotate_with_the_twin_and_previous_levels():
    variants = ladder.ttt_variants(2, fair=True)
    assert [v.cell("t") for v in variants].count(stats.aa_cell("t: sync_easgd2, P=2")) == 1
    assert ladder.previous_of(ladder.Variant("sync_easgd3", 2), variants).level == "sync_easgd2"
    assert ladder.previous_of(ladder.Variant("sync_easgd2", 1), variants) == ladder.Variant("easgd", 1)
    assert ladder.previous_of(ladder.Variant("easgd", 2), variants) is None
    assert ladder.arithmetic("sync_easgd1") == ladder.arithmetic("sync_easgd3") != ladder.arithmetic("easgd")


def test_render_flag_rebuilds_the_section_from_a_raw_file(tmp_path, capsys):
    rec = record()
    path = common.write_raw(
        tmp_path / "ladder.json", ladder.NAME, rec["samples"], {"machine": rec["machine"], **rec["meta"]}
    )
    assert ladder.main(["--render", "--no-doc", "--raw", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"## {ladder.TITLE}") and "sync_easgd2 [A/A]" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["--render", "--raw", "missing.json"], "bench_ladder: missing.json: no such file"),
        (["--heavy-levels", "easgd,sgd"], "--heavy-levels: choose among"),
        (["--target", "1.5"], "--target must be a test accuracy in (0, 1]"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path, args, message):
    raw = [] if "--raw" in args else ["--raw", str(tmp_path / "ladder.json")]  # any tree may write there
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "bench_ladder.py"), "--no-doc", *raw, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr
