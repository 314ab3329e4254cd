"""SlowMo (Wang et al., slow momentum): local SGD whose center keeps a slow momentum of the averaged
change; a setting of the periodic-averaging engine (scaledl.algorithms.averaging).

Rules, every iteration t of worker i (inner learning rate η = γ), then at every t with t mod τ = 0:
    inner:   W^i ← W^i − γ·ΔW^i                  (--inner momentum: heavy-ball with μ)
    round:   Δ = W − x̄ ;  U ← β·U + Δ/γ ;  W ← W − α·γ·U ;  W^i ← W
with α the slow learning rate (--outer-lr, default 1.0) and β the slow momentum (--outer-momentum,
default 0.5); α = 1, β = 0 is local SGD. U lives with W on worker 0 and is checkpointed.
Pattern of a round: Reduce(sum) Σ_i W^i to worker 0, its outer step, Bcast W: 2·log P·(α + |W|β).
"""

from __future__ import annotations

from scaledl.algorithms.averaging import PeriodicAveraging

ALGORITHM = PeriodicAveraging
