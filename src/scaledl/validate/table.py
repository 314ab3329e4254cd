"""The validation table: each anchor's simulated value beside the published one, its error, and the suite's score.

error = simulated / published - 1. A row within the tolerance passes; one outside it says by how much it misses
(×ratio) and which constant it points to. The score is over the held-out rows only (a row some constant was
fitted to would flatter it): the mean absolute percentage error (MAPE) and the geometric mean of the ratios
(below 1: the simulator is fast on the whole; above 1: slow). The floor is what the published numbers
themselves disagree by where two sources measured the same configuration (two clouds' K80 servers): no
simulator can be judged closer than its anchors agree with each other.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from scaledl.validate.anchors import Anchor


@dataclass(frozen=True)
class Row:
    anchor: Anchor
    simulated: float

    @property
    def ratio(self) -> float:
        return self.simulated / self.anchor.published

    @property
    def error(self) -> float:
        return self.ratio - 1.0

    def passes(self, tolerance: float) -> bool:
        return abs(self.error) <= tolerance


def score(rows: list[Row]) -> dict:
    """MAPE and geometric-mean ratio over the held-out rows; n counts them."""
    held = [r for r in rows if r.anchor.role == "held_out"]
    if not held:
        return {"n": 0, "mape": None, "geomean": None}
    return {
        "n": len(held),
        "mape": sum(abs(r.error) for r in held) / len(held),
        "geomean": math.exp(sum(math.log(r.ratio) for r in held) / len(held)),
    }


def floor(anchors: list[Anchor]) -> float | None:
    """The largest relative disagreement between two published values of one configuration (an anchor and the
    one it is `same_as`, both among `anchors`); None where nothing was measured twice."""
    by_id = {a.id: a for a in anchors}
    gaps = [
        max(a.published, b.published) / min(a.published, b.published) - 1.0
        for a in anchors
        if (b := by_id.get(a.same_as)) is not None
    ]
    return max(gaps) if gaps else None


def verdict(row: Row, tolerance: float) -> str:
    if row.passes(tolerance):
        return "within"
    side = "slow" if row.ratio > 1 else "fast"
    return f"misses: {row.ratio:.2f}× ({side}); points to {row.anchor.constant}"


def _value(value: float, unit: str) -> str:
    if unit == "FLOP/s":
        return f"{value / 1e12:.3g} TFLOP/s"
    return f"{value * 1e6:.3g} µs" if value < 1e-3 else f"{value:.3g} s"


def render(rows: list[Row], tolerance: float, by_kind: dict[str, dict]) -> str:
    """The table as markdown: a line per anchor, then the score per kind and overall, with the floor."""
    lines = [
        f"| anchor | platform | simulated | published | error | within ±{tolerance:.0%}? | role |",
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
        "| rows | held out | MAPE | geomean simulated ÷ published | within tolerance |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind, s in by_kind.items():
        if s["n"]:
            lines.append(f"| {kind} | {s['n']} | {s['mape']:.0%} | {s['geomean']:.2f} | {s['passed']} of {s['n']} |")
    return "\n".join(lines) + "\n"


def to_record(rows: list[Row], tolerance: float, code: dict, created: str) -> dict:
    """The JSON record of a validation: every row with its anchor's fields, the score, the floor, and the code
    that priced it (docs/simulation.md's table is rendered from this, by record_block)."""
    return {
        "kind": "scaledl-validate",
        "created": created,
        "code": code,
        "tolerance": tolerance,
        "floor": floor([r.anchor for r in rows]),
        "score": summary(rows, tolerance),
        "rows": [{**dataclasses.asdict(r.anchor), "simulated": r.simulated, "error": r.error,
                  "within": r.passes(tolerance)} for r in rows],
    }  # fmt: skip


def rows_of(record: dict) -> list[Row]:
    """The rows a record holds, as they were priced."""
    names = {f.name for f in dataclasses.fields(Anchor)}

    def anchor(row: dict) -> Anchor:
        return Anchor(**{k: (tuple(v) if k == "image" and v else v) for k, v in row.items() if k in names})

    return [Row(anchor(row), row["simulated"]) for row in record["rows"]]


def report(rows: list[Row], tolerance: float) -> str:
    """The table, the score per kind and the floor: what the command prints and the page shows."""
    gap = floor([r.anchor for r in rows])
    return render(rows, tolerance, summary(rows, tolerance)) + (
        f"\nFloor: published measurements of one configuration disagree by up to {gap:.1%}.\n"
        if gap is not None
        else "\nFloor: no configuration among these anchors was measured twice.\n"
    )


def record_block(record: dict) -> str:
    """docs/simulation.md's validation table, rendered from the record it cites (tests/workflow/test_docs.py
    checks that the page holds exactly this)."""
    code = record.get("code") or {}
    commit = (code.get("commit") or "uncommitted")[:7] + (" (dirty)" if code.get("dirty") else "")
    return (
        f"`scaledl validate --suite published` (`bench/raw/validate_published.json`: commit {commit}, "
        f"{record['created'][:10]}; every row held out, tolerance ±{record['tolerance']:.0%}):\n\n"
        + report(rows_of(record), record["tolerance"])
    )


def summary(rows: list[Row], tolerance: float) -> dict[str, dict]:
    """The score of each kind's rows and of all of them, with how many pass."""
    kinds = [*dict.fromkeys(r.anchor.kind for r in rows), "all"]
    out = {}
    for kind in kinds:
        chosen = [r for r in rows if kind == "all" or r.anchor.kind == kind]
        out[kind] = {**score(chosen), "passed": sum(r.passes(tolerance) for r in chosen if r.anchor.role == "held_out")}
    return out
