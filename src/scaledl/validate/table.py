"""The validation table: each row's simulated value beside the reference (published or measured here), its error,
and the suite's score.

error = simulated / reference - 1. A row within the tolerance passes; one outside it says by how much it misses
(×ratio) and which constant it points to. The score is over the held-out rows only (a row some constant was
fitted to would flatter it): the mean absolute percentage error (MAPE) and the geometric mean of the ratios
(below 1: the simulator is fast on the whole; above 1: slow), per kind of row. Beside it the floor: how far the
reference disagrees with itself (`aa` of a row: two sources that measured one configuration, or two halves of
one measurement here), the median over the kind's rows; no simulator can be judged closer than that.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from scaledl.validate.anchors import Anchor

REFERENCE = {"published": "published", "here": "measured"}  # what a suite's reference column is called


@dataclass(frozen=True)
class Row:
    anchor: Anchor
    simulated: float
    aa: float | None = None  # the reference's disagreement with itself (relative), where known

    @property
    def ratio(self) -> float:
        return self.simulated / self.anchor.published

    @property
    def error(self) -> float:
        return self.ratio - 1.0

    def passes(self, tolerance: float) -> bool:
        return abs(self.error) <= tolerance


def score(rows: list[Row]) -> dict:
    """MAPE and geometric-mean ratio over the held-out rows, n counting them; the floor over every row."""
    held = [r for r in rows if r.anchor.role == "held_out"]
    gaps = [r.aa for r in rows if r.aa is not None]
    return {
        "n": len(held),
        "mape": sum(abs(r.error) for r in held) / len(held) if held else None,
        "geomean": math.exp(sum(math.log(r.ratio) for r in held) / len(held)) if held else None,
        "floor": statistics.median(gaps) if gaps else None,
    }


def twin_gaps(anchors: list[Anchor]) -> dict[str, float]:
    """Each anchor measured twice (it and its `same_as`, both among `anchors`): how far the two disagree."""
    by_id = {a.id: a for a in anchors}
    gaps = {}
    for a in anchors:
        if (b := by_id.get(a.same_as)) is not None:
            gap = max(a.published, b.published) / min(a.published, b.published) - 1.0
            gaps[a.id] = gaps[b.id] = gap
    return gaps


def verdict(row: Row, tolerance: float) -> str:
    if row.passes(tolerance):
        return "within"
    side = "slow" if row.ratio > 1 else "fast"
    return f"misses: {row.ratio:.2f}× ({side}); points to {row.anchor.constant}"


def _value(value: float, unit: str) -> str:
    if unit == "FLOP/s":
        return f"{value / 1e12:.3g} TFLOP/s"
    return f"{value * 1e6:.3g} µs" if value < 1e-3 else f"{value:.3g} s"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}" if value >= 0.01 else f"{value:.1%}"


def summary(rows: list[Row], tolerance: float) -> dict[str, dict]:
    """The score of each kind's rows and of all of them, with how many held-out rows pass."""
    kinds = [*dict.fromkeys(r.anchor.kind for r in rows), "all"]
    out = {}
    for kind in kinds:
        chosen = [r for r in rows if kind == "all" or r.anchor.kind == kind]
        passed = sum(r.passes(tolerance) for r in chosen if r.anchor.role == "held_out")
        out[kind] = {**score(chosen), "passed": passed}
    return out


def report(rows: list[Row], tolerance: float, suite: str = "published") -> str:
    """A line per row, then the score per kind and overall beside its floor: what the command prints and the
    page shows."""
    reference = REFERENCE[suite]
    lines = [
        f"| row | platform | simulated | {reference} | error | within ±{tolerance:.0%}? | role |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        a = r.anchor
        lines.append(
            f"| {a.id} | {a.platform}{'/' + a.host if a.host else ''} | {_value(r.simulated, a.unit)} | "
            f"{_value(a.published, a.unit)} | {r.error:+.0%} | {verdict(r, tolerance)} | {a.role} |"
        )
    lines += [
        "",
        f"| rows | held out | MAPE | geomean simulated ÷ {reference} | within tolerance | floor ({reference} vs "
        "itself) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, s in summary(rows, tolerance).items():
        if s["n"]:
            lines.append(
                f"| {kind} | {s['n']} | {_percent(s['mape'])} | {s['geomean']:.2f} | {s['passed']} of {s['n']} | "
                f"{_percent(s['floor'])} |"
            )
    return "\n".join(lines) + "\n"


def to_record(rows: list[Row], tolerance: float, suite: str, code: dict, created: str) -> dict:
    """The JSON record of a validation: every row with its anchor's fields, the score, and the code that priced
    it (a docs page's table is rendered from this, by record_block)."""
    return {
        "kind": "scaledl-validate",
        "suite": suite,
        "created": created,
        "code": code,
        "tolerance": tolerance,
        "score": summary(rows, tolerance),
        "rows": [{**dataclasses.asdict(r.anchor), "simulated": r.simulated, "aa": r.aa, "error": r.error,
                  "within": r.passes(tolerance)} for r in rows],
    }  # fmt: skip


def rows_of(record: dict) -> list[Row]:
    """The rows a record holds, as they were priced."""
    names = {f.name for f in dataclasses.fields(Anchor)}

    def anchor(row: dict) -> Anchor:
        return Anchor(**{k: (tuple(v) if k == "image" and v else v) for k, v in row.items() if k in names})

    return [Row(anchor(row), row["simulated"], row.get("aa")) for row in record["rows"]]


def record_block(record: dict) -> str:
    """A docs page's validation table, rendered from the record it cites (tests/workflow/test_docs.py checks
    that the page holds exactly this)."""
    code = record.get("code") or {}
    commit = (code.get("commit") or "uncommitted")[:7] + (" (dirty)" if code.get("dirty") else "")
    suite = record["suite"]
    fit_half = bool(record.get("fit_half"))
    return (
        f"`scaledl validate --suite {suite}{' --fit-half' if fit_half else ''}` (`bench/raw/validate_{suite}"
        f"{'_fit_half' if fit_half else ''}.json`: commit {commit}, {record['created'][:10]}; tolerance "
        f"±{record['tolerance']:.0%}):\n\n"
        + report(rows_of(record), record["tolerance"], suite)
        + "".join(f"\n{note}\n" for note in record.get("notes") or [])
    )
