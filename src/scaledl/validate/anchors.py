"""The published measurements a platform is checked against (anchors.yaml beside this module), read and checked.

An anchor is one published number, the quantity it measures (`kind`), the platform and host it stands for, its
source and the constant a miss points to. `published` is always in SI units (seconds, FLOP/s): a step published
as images per second at a batch is `batch / images_per_s` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import yaml

from scaledl.errors import UserError

FILE = resources.files("scaledl.validate") / "anchors.yaml"
KINDS = {  # kind -> (the fields it needs, its unit)
    "step": (("model", "batch", "image", "classes", "images_per_s", "host"), "s"),
    "flop_rate": (("model", "batch", "image", "classes", "flop_per_s", "host"), "FLOP/s"),
    "p2p": (("bytes", "seconds"), "s"),
    # measured here only (scaledl.validate.here): the ping-pong from cold buffers, netbench's collectives and window
    **{kind: (("bytes", "seconds"), "s") for kind in ("p2p_cold", "allreduce", "reduce", "bcast", "window")},
    # ... and the per-phase runs of bench/bench_phases.py: a worker's seconds per step in compute, and in all
    **{kind: (("seconds",), "s") for kind in ("phase_compute", "phase_total")},
}
COMMON = ("id", "kind", "platform", "source", "constant")
ROLES = ("held_out", "fit", "apart")  # apart: shown, outside the score (a cell with more ranks than cores)


@dataclass(frozen=True)
class Anchor:
    id: str
    kind: str
    platform: str
    published: float  # SI units: seconds, or FLOP/s for a rate
    source: str  # the source's text (its key resolved)
    constant: str  # what a miss points to
    role: str = "held_out"
    host: str | None = None
    model: str | None = None
    batch: int | None = None
    image: tuple[int, int, int] | None = None
    classes: int | None = None
    nbytes: int | None = None
    same_as: str | None = None  # another anchor of the same configuration, measured elsewhere

    @property
    def unit(self) -> str:
        return KINDS[self.kind][1]


def load(text: str | None = None) -> tuple[list[Anchor], float]:
    """The anchors and the tolerance of anchors.yaml (or of `text`, the same layout); a malformed entry is one
    line naming it."""
    data = yaml.safe_load(FILE.read_text() if text is None else text) or {}
    sources = data.get("sources") or {}
    anchors = [_anchor(entry, sources) for entry in data.get("anchors") or []]
    ids = [a.id for a in anchors]
    if len(set(ids)) != len(ids):
        raise UserError(f"anchors: an id is used twice ({sorted({i for i in ids if ids.count(i) > 1})[0]})")
    for a in anchors:
        if a.same_as is not None and a.same_as not in ids:
            raise UserError(f"anchor {a.id}: same_as {a.same_as!r} is no anchor's id")
    return anchors, float(data.get("tolerance", 0.25))


def _anchor(entry: dict, sources: dict) -> Anchor:
    name = entry.get("id", "?")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise UserError(f"anchor {name}: kind {kind!r} is not one of {', '.join(KINDS)}")
    missing = [f for f in (*COMMON, *KINDS[kind][0]) if entry.get(f) is None]
    if missing:
        raise UserError(f"anchor {name}: no {', '.join(missing)}")
    if entry["source"] not in sources:
        raise UserError(f"anchor {name}: source {entry['source']!r} is not among the file's sources")
    role = entry.get("role", "held_out")
    if role not in ROLES:
        raise UserError(f"anchor {name}: role {role!r} is not one of {', '.join(ROLES)}")
    try:
        published = {
            "step": lambda: int(entry["batch"]) / float(entry["images_per_s"]),
            "flop_rate": lambda: float(entry["flop_per_s"]),
        }.get(kind, lambda: float(entry["seconds"]))()
    except (TypeError, ValueError):
        published = None
    if not (published and published > 0):
        raise UserError(f"anchor {name}: its published value must be a positive number")
    return Anchor(
        id=name,
        kind=kind,
        platform=entry["platform"],
        published=float(published),
        source=" ".join(str(sources[entry["source"]]).split()),
        constant=entry["constant"],
        role=role,
        host=entry.get("host"),
        model=entry.get("model"),
        batch=entry.get("batch"),
        image=tuple(entry["image"]) if entry.get("image") else None,
        classes=entry.get("classes"),
        nbytes=entry.get("bytes"),
        same_as=entry.get("same_as"),
    )
