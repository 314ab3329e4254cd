"""The band each platform constant was validated to: what `scaledl sensitivity --bands` sweeps instead of a
blanket ×0.5–×2.

A held-out row of a validation record (scaledl validate --out-json) says by what factor the simulator missed its
reference. Where one constant decides that row's price, the same factor is how far that constant would have to
move for the row to come out exact:

    step        compute-bound: seconds ∝ 1 / efficiency, so efficiency × (simulated / reference)
    flop_rate   rate ∝ efficiency, so efficiency × (reference / simulated)
    p2p         a message of 1 MiB or more is bandwidth-bound: seconds ∝ 1 / bandwidth, so network_bw ×
                (simulated / reference) (smaller ones are the latency's, which no swept constant moves)

A constant's band is the span of its rows' factors, with 1 (the platform as it is) inside it. A constant no row
bounds has no band here: the sweep keeps its assumed factors for it, and says so.
"""

from __future__ import annotations

from scaledl.validate.table import rows_of

BANDWIDTH_BOUND = 1 << 20  # bytes from which a message's time is its bandwidth's
CONSTANT_OF = {"step": "efficiency", "flop_rate": "efficiency", "p2p": "network_bw"}


def factor_of(row) -> float | None:
    """How far the constant that decides `row` would have to move for it to match its reference; None where
    no swept constant decides it."""
    kind = row.anchor.kind
    if kind == "step":
        return row.ratio
    if kind == "flop_rate":
        return 1.0 / row.ratio
    if kind == "p2p" and (row.anchor.nbytes or 0) >= BANDWIDTH_BOUND:
        return row.ratio
    return None


def bands(record: dict, platform: str) -> dict[str, tuple[float, float]]:
    """Per constant bounded by a held-out row of `platform`, its (low, high) factors, 1 inside them."""
    found: dict[str, list[float]] = {}
    for row in rows_of(record):
        factor = factor_of(row)
        if row.anchor.platform == platform and row.anchor.role == "held_out" and factor is not None:
            found.setdefault(CONSTANT_OF[row.anchor.kind], []).append(factor)
    return {c: (min(1.0, *f), max(1.0, *f)) for c, f in found.items()}


def band_factors(band: tuple[float, float]) -> list[float]:
    """A band's ends as sweep factors, 1 left out (the base point is always simulated), rounded to 3 digits."""
    return [f for f in dict.fromkeys(float(f"{end:.3g}") for end in band) if f != 1.0]
