"""The thousand-rank bench's record: cells added later keep the first ones, and the page names who measured what."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import bench_thousand as bench  # noqa: E402


def cell(seconds: float) -> dict:
    return {"s_per_step": seconds, "wall_s": 1.0, "max_rss_mb": 1000}


def record(cells: dict, meta: dict | None = None) -> dict:
    meta = {"cells": cells, "nodes": [1, 1024], "steps": 5, "seeds": [0], **(meta or {})}
    return {"meta": meta, "git": {"commit": "aaaaaaa0000"}, "timestamp": "2026-12-06T04:00:00+0000"}


def test_added_seeds_join_the_first_cells_and_the_page_names_both_commits():
    first = record({"weak sync_easgd P=1": cell(0.36), "weak sync_easgd P=1024": cell(0.42)})
    before = bench.added_to(first, steps=5)
    now = {"cells": {f"weak sync_easgd P={n} s{s}": cell(0.37 if n == 1 else t)
                     for s, t in ((1, 0.44), (2, 0.43)) for n in (1, 1024)},
           "nodes": [1, 1024], "steps": 5, "seeds": [1, 2]}  # fmt: skip
    meta = bench.merged(before, now, "bbbbbbb1111")
    assert len(meta["cells"]) == 6 and meta["seeds"] == [0, 1, 2]
    assert set(meta["added"]) == set(now["cells"]) and meta["base"]["commit"] == "aaaaaaa0000"
    rows = bench.weak_rows(meta["cells"], meta["nodes"])
    assert rows[1]["sync_easgd E"].endswith("n=3")  # an interval where one seed was
    block = bench.thousand_block(record(meta["cells"], meta))
    assert block.startswith("`bench/raw/thousand.json`, measured at commit aaaaaaa 2026-12-06 (cells added at bbbbbbb)")


def test_cells_of_another_length_are_not_added():
    with pytest.raises(SystemExit, match="5 steps, not 20"):
        bench.added_to(record({"cost P=64": cell(0.4)}), steps=20)
