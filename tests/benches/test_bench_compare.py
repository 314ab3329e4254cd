"""bench/stats.py and bench/compare.py on synthetic samples: no MPI, no benchmark runs."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import common, stats  # noqa: E402
from bench.compare import compare, main  # noqa: E402

CELLS = ["ours", "raw", "torch.cat", "ddp"]
FAKE_MACHINE = {"cpu": "test CPU", "cores": 2, "memory": "4 GiB", "load_before": 0.1}


def synthetic(seed: int, slow: dict[str, float] | None = None, n: int = 7) -> dict[str, list[float]]:
    """Every cell around 10 ms with ±3 % uniform noise, n samples, plus the A/A twin of "ours";
    `slow` multiplies the named cells' samples (the deliberately slowed variant)."""
    rng = random.Random(seed)
    slow = slow or {}
    samples = {}
    for i, cell in enumerate([*CELLS, stats.aa_cell("ours")]):
        base = 0.010 * (1 + 0.1 * (i % len(CELLS)))
        samples[cell] = [base * slow.get(cell, 1.0) * (1 + rng.uniform(-0.03, 0.03)) for _ in range(n)]
    return samples


def write(tmp_path, name, samples, **meta):
    return common.write_raw(tmp_path / name, "synthetic", samples, {"machine": FAKE_MACHINE, **meta})


def run_cli(*args):
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "compare.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


# ------------------------------------------------------------------ stats


def test_summary_on_hand_made_numbers():
    s = stats.summary([5, 1, 3, 2, 4])
    assert s == {"n": 5, "median": 3, "min": 1, "max": 5, "q1": 2, "q3": 4}
    assert stats.summary([1, 2, 3, 4])["median"] == 2.5
    assert stats.summary([7])["q1"] == stats.summary([7])["q3"] == 7
    with pytest.raises(ValueError):
        stats.summary([])
    with pytest.raises(ValueError):
        stats.summary([1, float("nan")])


def test_format_cell_scales_units_and_shows_n():
    s = stats.summary([0.0119, 0.0123, 0.0130, 0.0121, 0.0125])
    assert stats.format_cell(s) == "12.3 ms [11.9–13.0] n=5"
    assert stats.format_cell(stats.summary([2.5e-6, 2.5e-6])) == "2.50 µs [2.50–2.50] n=2"
    assert stats.format_cell(stats.summary([1.5, 2.0, 2.5]), unit=None) == "2.00 [1.50–2.50] n=3"
    assert "IQR" in stats.format_cell(s, spread="iqr")


def test_ratio_paired_and_unpaired():
    r = stats.ratio([2, 4, 6], [1, 2, 2])  # per-round ratios 2, 2, 3
    assert {k: r[k] for k in ("median", "min", "max", "n", "paired")} == {
        "median": 2,
        "min": 2,
        "max": 3,
        "n": 3,
        "paired": True,
    }
    assert 2 <= r["ci_low"] <= r["median"] <= r["ci_high"] <= 3  # the order-statistic interval of the median
    u = stats.ratio([2, 4, 6], [1, 2])  # medians 4 / 1.5, bounds 2/2 and 6/1
    assert u["paired"] is False and u["n"] == 2
    assert u["median"] == pytest.approx(4 / 1.5) and u["min"] == 1 and u["max"] == 6
    assert (u["ci_low"], u["ci_high"]) == (1, 6)  # unpaired: the widest ratios the ranges allow
    assert stats.format_ratio(r) == "2.000× [2.000–3.000] n=3"


def test_the_median_interval_is_exact_and_labelled_with_its_coverage():
    """The order-statistic interval, never a bootstrap: 7 rounds give [min, max] at 98.4 % (a percentile
    bootstrap gave [x(2), x(6)] and called its 87.5 % "95 %"); 10 give [x(2), x(9)] at 97.9 %."""
    seven = stats.median_interval([1.00, 1.02, 0.99, 1.01, 1.03, 0.98, 1.00])
    assert (seven.low, seven.high, seven.n) == (0.98, 1.03, 7) and seven.label() == "98.4 %"
    ten = stats.median_interval(range(10))
    assert (ten.low, ten.high) == (1, 8) and ten.coverage >= 0.95
    assert stats.median_interval([3.0, 1.0]).coverage == 0.5  # too few for 95 %: the range, labelled honestly
    r = stats.ratio([1.0, 1.1, 0.9, 1.2, 1.0, 1.05, 0.95], [1.0] * 7)
    assert stats.interval_text(r) == "0.900–1.200 (98.4 % interval of the median)"
    five = stats.ratio([1.0, 1.1, 0.9, 1.2, 1.0], [1.0] * 5)
    assert "93.8 % interval" in stats.interval_text(five)  # five rounds cannot reach 95 %, and say so
    assert stats.headline_rounds(3, 5) == 6 and stats.headline_rounds(7, 5) == 14 and stats.headline_rounds(7, 1) == 1


def test_one_cold_round_of_ten_does_not_set_the_noise_floor():
    quiet = [(10.0, 10.0), (10.3, 10.0), (9.8, 10.0), (10.1, 10.0), (9.9, 10.0), (10.2, 10.0), (10.0, 10.1)]
    quiet += [(10.1, 10.0), (9.9, 10.0)]
    floor = stats.noise_floor([*quiet, (19.0, 10.0)])  # one round 90 % off, of 10: [x(2), x(9)]
    assert floor < 0.05, floor  # the largest |x/y − 1| would have said 90 %
    assert stats.noise_floor(quiet) <= floor
    assert stats.noise_floor([(1.0, 1.25)] * 3) == stats.noise_floor([(1.25, 1.0)] * 3) == pytest.approx(0.25)


def test_the_four_verdicts():
    noise = 0.03
    assert stats.verdict({"median": 1.10, "min": 1.05, "max": 1.2}, noise) == "slower"
    assert stats.verdict({"median": 0.90, "min": 0.85, "max": 0.95}, noise) == "faster"
    assert stats.verdict({"median": 1.02, "min": 1.01, "max": 1.03}, noise) == "no difference"  # inside the noise
    assert stats.verdict({"median": 1.10, "min": 0.98, "max": 1.2}, noise) == "not resolved"  # rounds disagree
    assert stats.verdict({"median": 1.01, "min": 0.90, "max": 1.10}, noise) == "not resolved"  # too wide to tell
    # with ≥ 10 rounds the interval (not the min–max) decides: 9 of 10 rounds at 2×, one at 1× ...
    r = stats.ratio([2.0, 2.1, 1.9, 2.05, 1.0, 2.0, 1.95, 2.02, 2.03, 1.98], [1.0] * 10)
    assert stats.verdict(r, noise) == "slower" and r["min"] == 1.0  # ... is slower, not "no difference"
    assert stats.verdict_text({"median": 1.01, "min": 0.90, "max": 1.10}, noise) == "not resolved at ±3.0%"
    assert stats.verdict_text({"median": 1.02, "min": 1.01, "max": 1.03}, noise) == "no difference within ±3.0%"


def test_a_goal_is_not_met_while_the_floor_exceeds_its_margin():
    """The exchange's case: the ratio's interval lies below 1.15, but two identical cells differ by 19 %,
    more than the 15 % the goal allows: the table cannot certify the goal either way."""
    inside = {"median": 1.03, "min": 0.99, "max": 1.12, "ci_low": 0.99, "ci_high": 1.12, "coverage": 0.984}
    assert stats.goal(inside, 1.15, floor=0.05) == "met"
    assert stats.goal(inside, 1.15, floor=0.192) == "not certifiable"
    assert stats.goal(inside, 1.15, floor=0.15) == "not certifiable"  # a floor as wide as the margin: no better
    assert stats.goal(inside, 1.0, floor=0.0) == "not certifiable"  # "≤ 1.0×" has no margin at all
    above = {**inside, "ci_low": 1.2, "ci_high": 1.4}
    assert stats.goal(above, 1.15, floor=0.05) == "missed" and stats.goal(above, 1.15, floor=0.2) == "not certifiable"
    straddle = {**inside, "ci_low": 1.1, "ci_high": 1.2}
    assert stats.goal(straddle, 1.15, floor=0.05) == "not certified"
    text = stats.goal_text(inside, 1.15, floor=0.192)
    assert text.startswith("goal ≤ 1.15×: not certifiable at ±19.2%") and "98.4 % interval" in text


@pytest.mark.parametrize("n", range(2, 12))
def test_the_williams_design_balances_carry_over(n):
    """Every ordered pair of different cells is adjacent equally often (once per square; odd n needs the
    square and its mirror), and every cell takes every position equally often."""
    from collections import Counter

    cells = [f"c{i}" for i in range(n)]
    rounds = stats.balanced_rounds(n, 1)
    orders = [stats.round_order(cells, r) for r in range(rounds)]
    assert rounds == (n if n % 2 == 0 else 2 * n)
    pairs = Counter((a, b) for order in orders for a, b in zip(order, order[1:]))
    assert len(pairs) == n * (n - 1) and set(pairs.values()) == {rounds // n}
    positions = Counter((c, order.index(c)) for order in orders for c in cells)
    assert set(positions.values()) == {rounds // n}
    assert stats.carryover(orders)["balanced"] == 1 and stats.carryover(orders)["fixed"] == 0
    assert stats.carryover_text(orders).startswith("Order: a Williams design")


def test_a_cyclic_rotation_is_named_for_what_it_is():
    """The old records' orders (a cyclic shift): every cell always follows the same one."""
    cells = ["a", "b", "c", "d"]
    cyclic = [cells[r:] + cells[:r] for r in range(4)]
    found = stats.carryover(cyclic)
    assert found == {"tables": 1, "balanced": 0, "cells": 4, "fixed": 4}
    assert "not balanced" in stats.carryover_text(cyclic) and "not recorded" in stats.carryover_text(None)


def test_fewer_rounds_than_the_design_spread_its_rows():
    """20 cells in 5 rounds: rows spread over the design put every cell early in some round and late in
    another, so no cell's mean position is far from the middle."""
    cells = list(range(20))
    mean = [sum(stats.round_order(cells, r, 5).index(c) for r in range(5)) / 5 for c in cells]
    assert max(mean) - min(mean) <= 8
    assert [stats.round_order("abcd", r, 4) for r in range(4)] == [stats.round_order("abcd", r) for r in range(4)]


def test_each_cell_records_the_load_and_steal_it_met(tmp_path):
    log = {}
    with common.conditions(log, "a"):
        sum(range(10000))
    assert set(log["a"][0]) == {"load", "steal"} and log["a"][0]["load"] >= 0
    record = {"meta": {"conditions": {"a": [{"load": 1.8, "steal": 0.0}]}}, "machine": {"cores": 2}}
    assert "Measured under load" in common.conditions_line(record)
    record["meta"]["conditions"]["a"][0]["load"] = 0.2
    assert "under load" not in common.conditions_line(record)
    assert "not recorded per cell" in common.conditions_line({"meta": {}, "machine": {}})


# ------------------------------------------------------------ raw records


def test_bench_raw_takes_records_of_a_clean_commit_only(tmp_path, monkeypatch):
    """A record in bench/raw must belong to one commit: refused from an edited tree, before any measuring
    (parse_bench_args) and again at the write; anywhere else any tree may write."""
    import argparse

    monkeypatch.setattr(common, "RAW_DIR", tmp_path / "raw")
    monkeypatch.setattr(common, "git_state", lambda repo=None: {"commit": "abc", "dirty": True})
    with pytest.raises(common.RawError, match="committed code only.*uncommitted changes"):
        common.write_raw(tmp_path / "raw" / "x.json", "x", {"a": [1.0]}, {"machine": FAKE_MACHINE})
    assert not (tmp_path / "raw" / "x.json").exists()
    parser = argparse.ArgumentParser()
    parser.add_argument("--raw", type=Path, default=tmp_path / "raw" / "x.json")
    parser.add_argument("--render", action="store_true")
    with pytest.raises(SystemExit):
        common.parse_bench_args(parser, [])
    assert common.parse_bench_args(parser, ["--render"]).render  # reading a record needs no clean tree
    common.write_raw(tmp_path / "elsewhere.json", "x", {"a": [1.0]}, {"machine": FAKE_MACHINE})
    monkeypatch.setattr(common, "git_state", lambda repo=None: {"commit": "abc", "dirty": False})
    common.write_raw(tmp_path / "raw" / "x.json", "x", {"a": [1.0]}, {"machine": FAKE_MACHINE})
    assert common.read_raw(tmp_path / "raw" / "x.json")["git"] == {"commit": "abc", "dirty": False}


def test_write_raw_records_samples_and_metadata(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "1")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    monkeypatch.setattr(common, "machine", lambda: (_ for _ in ()).throw(ImportError("no torch here")))
    samples = synthetic(0)
    path = common.write_raw(tmp_path / "sub" / "run.json", "synthetic", samples, {"rounds": 7, "load_before": 0.5})
    record = common.read_raw(path)
    assert record["samples"] == samples
    assert record["bench"] == "synthetic" and record["meta"] == {"rounds": 7}
    assert record["env"] == {"OMP_NUM_THREADS": "1", "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", "THP_MEM_ALLOC_ENABLE": "1"}
    assert record["launch"] == common.LAUNCH.as_dict() == record["machine"]["launch"]
    assert set(record["git"]) == {"commit", "dirty"}
    assert record["load"]["start"] == 0.5 and record["load"]["end"] >= 0
    assert record["machine"]["cores"] >= 1 and "partial" in record["machine"]  # the torch-less fingerprint
    assert record["command"][0] == sys.executable and record["timestamp"]
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]  # no temporary file left behind


def test_git_state_without_a_repository(tmp_path):
    assert common.git_state(tmp_path) == {"commit": None, "dirty": None}


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        ("{not json", "not JSON"),
        ('{"bench": "x"}', "no 'samples'"),
        ('{"samples": {"a": []}}', "non-empty list"),
        ('{"samples": {"a": [1, "2"]}}', "non-empty list"),
    ],
)
def test_read_raw_one_line_errors(tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(common.RawError) as err:
        common.read_raw(path)
    assert message in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- compare


def test_two_runs_of_the_same_distribution_flag_nothing(tmp_path, capsys):
    old, new = write(tmp_path, "old.json", synthetic(1)), write(tmp_path, "new.json", synthetic(2))
    result = compare(common.read_raw(old), common.read_raw(new))
    assert not [c for c, r in result["cells"].items() if r["flagged"]]
    assert all(r["noise"] >= 0.02 for r in result["cells"].values())  # --threshold is the least
    assert main([str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "0 of 5 cells changed beyond the noise" in out and "rule:" in out


def test_a_deliberately_slowed_cell_is_the_only_one_flagged(tmp_path, capsys):
    old = write(tmp_path, "old.json", synthetic(1))
    slowed = write(tmp_path, "slow.json", synthetic(2, slow={"raw": 1.2}))
    result = compare(common.read_raw(old), common.read_raw(slowed))
    assert [c for c, r in result["cells"].items() if r["flagged"]] == ["raw"]
    assert result["cells"]["raw"]["verdict"] == "slower"
    assert result["cells"]["raw"]["ratio"]["median"] == pytest.approx(1.2, rel=0.05)
    assert main([str(old), str(slowed)]) == 1
    assert "1 of 5 cells changed beyond the noise: raw" in capsys.readouterr().out
    faster = write(tmp_path, "fast.json", synthetic(3, slow={"ddp": 0.8}))
    result = compare(common.read_raw(old), common.read_raw(faster))
    assert {c: r["verdict"] for c, r in result["cells"].items() if r["flagged"]} == {"ddp": "faster"}


def test_a_small_shift_inside_the_recorded_noise_is_no_difference(tmp_path):
    old = write(tmp_path, "old.json", synthetic(1), noise_floor=0.10)
    new = write(tmp_path, "new.json", synthetic(2, slow={"raw": 1.05}))
    result = compare(common.read_raw(old), common.read_raw(new))
    assert all(r["noise"] >= 0.10 for r in result["cells"].values())
    assert not any(r["flagged"] for r in result["cells"].values())


def test_each_cell_has_its_own_floor_so_a_noisy_cell_cannot_hide_a_slowed_one(tmp_path):
    """A cell and its A/A twin at ±40 % noise (Hogwild on a loaded machine): the file's largest floor would
    have been ~40 % for every cell and hidden a 1.2× slowdown; per cell, only the slowed one is flagged."""

    def with_noisy(seed, slow=None):
        samples = synthetic(seed, slow=slow)
        rng = random.Random(seed + 100)
        for cell in ("hogwild", stats.aa_cell("hogwild")):
            samples[cell] = [0.02 * (1 + rng.uniform(-0.4, 0.4)) for _ in range(7)]
        return samples

    old = write(tmp_path, "old.json", with_noisy(1))
    new = write(tmp_path, "new.json", with_noisy(2, slow={"raw": 1.2}))
    result = compare(common.read_raw(old), common.read_raw(new))
    assert [c for c, r in result["cells"].items() if r["flagged"]] == ["raw"]
    assert result["cells"]["hogwild"]["noise"] > 0.15 > result["cells"]["raw"]["noise"]


def test_cells_in_one_file_only_are_listed_not_compared(tmp_path, capsys):
    a, b = synthetic(1), synthetic(2)
    b["new cell"] = b.pop("ddp")
    old, new = write(tmp_path, "old.json", a), write(tmp_path, "new.json", b)
    assert main([str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "added (not compared): new cell" in out and "removed (not compared): ddp" in out


def test_cli_exit_codes_and_one_line_errors(tmp_path):
    old, new = write(tmp_path, "old.json", synthetic(1)), write(tmp_path, "new.json", synthetic(2))
    slowed = write(tmp_path, "slow.json", synthetic(2, slow={"torch.cat": 1.2}))
    assert run_cli(old, new).returncode == 0
    proc = run_cli(old, slowed)
    assert proc.returncode == 1 and "SLOWER" in proc.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{truncated")
    for args in ([old, bad], [old, tmp_path / "missing.json"]):
        proc = run_cli(*args)
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("compare: ")
        assert proc.stdout == ""
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"samples": {"elsewhere": [1.0]}}))
    proc = run_cli(old, other)
    assert proc.returncode == 2 and "no cell in common" in proc.stderr
