"""The paper-scale simulation bench's tables, from hand-made cells: the ladder's speedups beside the paper's,
the weak-scaling efficiencies, and the band's verdict against the paper's 91.5 % less 2 points."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import bench_paper_scale as bench  # noqa: E402


def cell(seconds: float, transfer: float = 0.5, exposed: float = 0.6) -> dict:
    return {"s_per_step": seconds, "transfer_share": transfer, "exposed_share": exposed, "wall_s": 1.0}


def test_the_ladder_divides_each_level_by_the_one_before_and_names_the_papers_ratio():
    cells = {"ladder easgd": cell(0.8), "ladder sync_easgd1": cell(0.2), "ladder sync_easgd2": cell(0.1)}
    cells["ladder sync_easgd3"] = cell(0.1, 0.01, 0.14)
    rows = bench.ladder_rows(cells)
    assert [r["speedup"] for r in rows] == ["", "4.00×", "2.00×", "1.00×"]
    assert [r["paper"] for r in rows] == ["", "3.7×", "1.3×", "1.1×"]
    assert (rows[0]["paper_share"], rows[-1]["exposed"], rows[-1]["paper_share"]) == ("87%", "14%", "14%")


def test_weak_scaling_and_its_band_are_efficiencies_against_one_node():
    cells = {f"weak {a} P={n}": cell(1.0 if n == 1 else 1.25) for a in bench.WEAK for n in (1, 64)}
    cells |= {"band noise off P=1": cell(1.0), "band noise off P=64": cell(1.05)}
    assert bench.weak_rows(cells, [1, 64])[1]["sync_easgd E"] == "80.0%"
    band = bench.band_rows(cells, [1, 64])
    assert band == [
        {"platform": "base", "E(P=64)": "80.0%", "≥ 89.5%": "no"},
        {"platform": "noise off", "E(P=64)": "95.2%", "≥ 89.5%": "yes"},
    ]


def test_a_part_measured_again_keeps_the_others_cells_and_says_which_commit_measured_each(tmp_path):
    from bench import common

    cells = {"ladder easgd": cell(0.8), "weak sync_easgd P=1": cell(1.0), "band noise off P=1": cell(1.0)}
    raw = tmp_path / "paper_scale.json"
    common.write_raw(raw, bench.NAME, {k: [c["s_per_step"]] for k, c in cells.items()}, {"cells": cells})
    kept, parts = bench.carried_over(raw, ["ladder"])
    assert set(kept) == {"weak sync_easgd P=1", "band noise off P=1"}
    commit = common.read_raw(raw)["git"]["commit"]
    assert {part: found["commit"] for part, found in parts.items()} == {"weak": commit, "band": commit}
    assert bench.carried_over(raw, list(bench.PARTS)) == ({}, {})
    assert bench.measured_at({"ladder": {"commit": "abcdef12"}, "weak": {"commit": "1234567a"}}) == (
        " Measured at: ladder abcdef1, weak 1234567."
    )
    assert bench.measured_at({"ladder": {"commit": "abc"}, "weak": {"commit": "abc"}}) == ""


def test_weak_scaling_over_seeds_pairs_each_seed_with_its_own_one_node_run_and_prints_an_interval():
    cells = {
        bench.weak_key("sync_easgd", n, s): cell(1.0 if n == 1 else t)
        for s, t in ((0, 1.25), (1, 1.0), (2, 1.0 / 0.9))
        for n in (1, 64)
    }
    assert sorted(bench.weak_seeds(cells, "sync_easgd", 64, 1)) == pytest.approx([0.8, 0.9, 1.0])
    text = bench.weak_rows(cells, [1, 64])[1]["sync_easgd E"]
    assert text.startswith("90.0% [") and text.endswith("n=3")  # the mean, its t-interval, the seeds
    assert "sync_easgd3 E" not in bench.weak_rows(cells, [1, 64])[1]  # an algorithm not measured: no column
