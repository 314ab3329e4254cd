"""DiLoCo (Douillard et al.): local SGD whose center takes an outer step of SGD with Nesterov momentum
on the averaged change; a setting of the periodic-averaging engine (scaledl.algorithms.averaging).

Rules, every iteration t of worker i, then at every t with t mod τ = 0:
    inner:   W^i ← W^i − η·ΔW^i                  (--inner momentum: heavy-ball with μ; the paper uses AdamW)
    round:   Δ = W − x̄ (the outer gradient, x̄ = (1/P)·Σ_i W^i)
             B ← μ_o·B + Δ ;  W ← W − η_o·(Δ + μ_o·B) ;  W^i ← W
Defaults from the DiLoCo paper: η_o = 0.7 (--outer-lr), μ_o = 0.9 (--outer-momentum); τ = 8 here
(the paper's is hundreds of steps on language models). The outer momentum B lives with W on
worker 0 and is part of every checkpoint.
Pattern of a round: Reduce(sum) Σ_i W^i to worker 0, its outer step, Bcast W: 2·log P·(α + |W|β).
"""

from __future__ import annotations

from scaledl.algorithms.averaging import PeriodicAveraging

ALGORITHM = PeriodicAveraging
