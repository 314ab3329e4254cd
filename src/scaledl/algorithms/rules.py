"""The paper's update rules as pure in-place functions on flat tensors.

No MPI here: an algorithm composes one of these rules with one message
pattern from `scaledl.comm`. Notation follows the paper (PAPER.md §2): W^i is
a worker's weights, W the center, ΔW^i the stochastic gradient, η the learning
rate, ρ the elasticity, μ the momentum, V a momentum buffer. The moving rate
of Zhang et al. is α = ηρ. Trailing underscore: modifies its first argument.
"""

from __future__ import annotations

import torch


def sgd_(w: torch.Tensor, grad: torch.Tensor, lr: float) -> None:
    """W ← W − η·ΔW."""
    w.add_(grad, alpha=-lr)


def velocity_(v: torch.Tensor, grad: torch.Tensor, lr: float, mu: float) -> None:
    """Eq. 3: V ← μ·V − η·ΔW."""
    v.mul_(mu).add_(grad, alpha=-lr)


def momentum_(w: torch.Tensor, v: torch.Tensor, grad: torch.Tensor, lr: float, mu: float) -> None:
    """Eqs. 3–4: V ← μ·V − η·ΔW ; W ← W + V."""
    velocity_(v, grad, lr, mu)
    w.add_(v)


def elastic_worker_(w: torch.Tensor, grad: torch.Tensor, center: torch.Tensor, lr: float, rho: float) -> None:
    """Eq. 1: W^i ← W^i − η·ΔW^i − η·ρ·(W^i − W)."""
    pull = torch.sub(w, center).mul_(lr * rho)
    w.add_(grad, alpha=-lr).sub_(pull)


def elastic_center_(center: torch.Tensor, sum_workers: torch.Tensor, num_workers: int, lr: float, rho: float) -> None:
    """Eq. 2: W ← W + η·ρ·Σ_i (W^i − W), with Σ_i W^i given (P = num_workers)."""
    center.add_(torch.sub(sum_workers, center, alpha=num_workers), alpha=lr * rho)


def elastic_center_one_(center: torch.Tensor, w_worker: torch.Tensor, lr: float, rho: float) -> None:
    """Eq. 2 for a single worker (the asynchronous form): W ← W + η·ρ·(W^i − W)."""
    center.add_(torch.sub(w_worker, center), alpha=lr * rho)


def momentum_elastic_worker_(
    w: torch.Tensor, v: torch.Tensor, grad: torch.Tensor, center: torch.Tensor, lr: float, rho: float, mu: float
) -> None:
    """Eqs. 5–6 (MEASGD worker): V^i ← μ·V^i − η·ΔW^i ; W^i ← W^i + V^i − η·ρ·(W^i − W).

    The gradient is taken at W^i as given; the Nesterov variant (gradient at
    W^i + μV^i, Zhang et al.'s EAMSGD) is the caller's choice of where to
    evaluate ΔW^i, not a different rule.
    """
    pull = torch.sub(w, center).mul_(lr * rho)
    velocity_(v, grad, lr, mu)
    w.add_(v).sub_(pull)


def default_rho(lr: float, num_workers: int, beta: float = 0.9) -> float:
    """ρ from Zhang et al.'s moving rate α = ηρ = β/P with β = 0.9 (DESIGN.md defaults)."""
    return beta / (num_workers * lr)
