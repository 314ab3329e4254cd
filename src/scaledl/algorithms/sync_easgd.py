"""Sync EASGD (You, Buluç, Demmel, SC'17 §4, Eqs. 1–2) and its codesign ladder (§3, Algorithms 2–3).

Rules:
    (1) worker i:  W^i_{t+1} = W^i_t − η·ΔW^i_t − η·ρ·(W^i_t − W_t)
    (2) master:    W_{t+1}   = W_t + η·ρ·Σ_{i=1..P} (W^i_t − W_t)
Pattern, per iteration t (paper's five steps):
    1. every worker computes ΔW^i_t at W^i_t            (the training loop)
    2. the master broadcasts W_t to all workers           Bcast, tree, |W| words
    3. Σ_i W^i_t is reduced to the master                 Reduce(sum), tree, |W| words
    4. every worker applies Eq. 1 with the W_t it received
    5. the master applies Eq. 2 with the reduced sum
Cost: 2·log P·(α + |W|β) per iteration instead of original EASGD's P·(α + |W|β).
Weights, not gradients, are reduced. No arrival order enters, so it is
deterministic for a given seed and world size. The master is worker 0.

The ladder: sync_easgd1/2/3 are the registry's presets of sync_easgd, each
fixing the switches --center-on and --overlap (the math is identical at
every level, so their results are bitwise equal, only the time differs):
    sync_easgd1  tree collectives; the center W stays in host memory (the paper's
                 CPU master): W and ΣW^i cross host↔device every iteration, through
                 page-locked host buffers on a GPU (as the device levels' staging)
    sync_easgd2  W lives on the master's device beside W^0: device-resident
                 weights, GPU–GPU messages where the backend allows
    sync_easgd3  sync_easgd2, and steps 2–3 run on a helper thread while the
                 batch is fetched and ΔW^i computed (steps 1 ∥ 2–3): they depend
                 only on W^i_t and W_t, never on ΔW^i_t
With τ > 1 the exchange happens every τ-th iteration and the others are
plain local SGD steps (Zhang et al.'s communication period).
Defaults: α = ηρ = 0.9/P (Zhang et al.), τ = 1.

Sync EASGD is a setting of the periodic-averaging engine (scaledl.algorithms.averaging):
the elastic worker rule and the elastic outer step, inner SGD, τ = 1, float32
messages; its other settings (--inner momentum, --compress, --tau) are the
engine's ablations of it.
"""

from __future__ import annotations

from scaledl.algorithms.averaging import PeriodicAveraging

ALGORITHM = PeriodicAveraging
