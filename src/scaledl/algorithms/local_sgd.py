"""Local SGD (periodic model averaging; Lin et al.'s post-local SGD after its warm-up, PyTorch's
PeriodicModelAverager): a setting of the periodic-averaging engine (scaledl.algorithms.averaging).

Rules, every iteration t of worker i, then at every t with t mod τ = 0:
    inner:   W^i ← W^i − η·ΔW^i                  (--inner momentum: heavy-ball with μ)
    round:   x̄ = (1/P)·Σ_i W^i ;  W ← x̄ ;  W^i ← W   (outer `average`, worker rule `reset`)
Pattern of a round: Reduce(sum) Σ_i W^i to worker 0, then Bcast W: 2·log P·(α + |W|β),
once every τ iterations (default τ = 8). No center state beyond W; no elastic pull.
PyTorch's averager allreduces W^i/P instead (the same mean to float32 rounding).
"""

from __future__ import annotations

from scaledl.algorithms.averaging import PeriodicAveraging

ALGORITHM = PeriodicAveraging
