"""The paper's update rules as pure in-place functions on flat tensors.

No MPI here: an algorithm composes one of these rules with one message
pattern from `scaledl.comm`. Notation follows the paper (§2): W^i is
a worker's weights, W the center, ΔW^i the stochastic gradient, η the learning
rate, ρ the elasticity, μ the momentum, V a momentum buffer. The moving rate
of Zhang et al. is α = ηρ. Trailing underscore: modifies its first argument.
"""

from __future__ import annotations

import torch


def weight_decay_(grad: torch.Tensor, w: torch.Tensor, coefficient: float) -> None:
    """L2 regularisation folded into the gradient: ΔW ← ΔW + λ·W."""
    grad.add_(w, alpha=coefficient)


def sgd_(w: torch.Tensor, grad: torch.Tensor, lr: float) -> None:
    """W ← W − η·ΔW."""
    w.add_(grad, alpha=-lr)


def sgd_step_(out: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """out ← −η·ΔW: the SGD update, for whoever adds it to W (Async SGD's accumulate at the master)."""
    return torch.mul(grad, -lr, out=out)


def mean_sgd_(w: torch.Tensor, grad_sum: torch.Tensor, num_workers: int, lr: float) -> None:
    """Synchronous SGD: W ← W − η·(1/P)·Σ_j ΔW^j, with Σ_j ΔW^j given (P = num_workers).

    One pass over |W| (the step η/P folded into add_'s alpha), as a plain SGD step makes: dividing the sum
    first cost a second pass. For P a power of two η/P is exact, so the result is bitwise that of dividing first.
    """
    w.add_(grad_sum, alpha=-lr / num_workers)


def velocity_(v: torch.Tensor, grad: torch.Tensor, lr: float, mu: float) -> None:
    """Eq. 3: V ← μ·V − η·ΔW."""
    v.mul_(mu).add_(grad, alpha=-lr)


def momentum_(w: torch.Tensor, v: torch.Tensor, grad: torch.Tensor, lr: float, mu: float) -> None:
    """Eqs. 3–4: V ← μ·V − η·ΔW ; W ← W + V."""
    velocity_(v, grad, lr, mu)
    w.add_(v)


def elastic_difference_(out: torch.Tensor, w: torch.Tensor, center: torch.Tensor, alpha: float) -> torch.Tensor:
    """out ← α·(W^i − W), α = η·ρ: the elastic pull of Eq. 1, and what Eq. 2 adds to W for one worker."""
    return torch.sub(w, center, out=out).mul_(alpha)


def elastic_worker_(w: torch.Tensor, grad: torch.Tensor, center: torch.Tensor, lr: float, rho: float) -> None:
    """Eq. 1: W^i ← W^i − η·ΔW^i − η·ρ·(W^i − W)."""
    pull = elastic_difference_(torch.empty_like(w), w, center, lr * rho)
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
    pull = elastic_difference_(torch.empty_like(w), w, center, lr * rho)
    velocity_(v, grad, lr, mu)
    w.add_(v).sub_(pull)


def look_ahead_(w: torch.Tensor, v: torch.Tensor, mu: float) -> None:
    """Nesterov (Zhang et al.'s EAMSGD): W ← W + μ·V, where ΔW is then taken (the worker restores W^i
    from a copy afterwards, exactly: subtracting μ·V back would round)."""
    w.add_(v, alpha=mu)


# ---- the averaging family's outer steps: the center W towards the workers' mean x̄ = (1/P)·Σ_i W^i


def average_(center: torch.Tensor, sum_workers: torch.Tensor, num_workers: int) -> None:
    """Local SGD: W ← x̄."""
    torch.div(sum_workers, num_workers, out=center)


def outer_difference(center: torch.Tensor, sum_workers: torch.Tensor, num_workers: int) -> torch.Tensor:
    """Δ = W − x̄: the outer gradient (what the workers' τ steps moved, with the sign of a gradient)."""
    return torch.sub(center, sum_workers, alpha=1.0 / num_workers)


def outer_nesterov_(
    center: torch.Tensor, sum_workers: torch.Tensor, num_workers: int, buf: torch.Tensor, lr: float, mu: float
) -> None:
    """DiLoCo's outer step, SGD with Nesterov momentum on Δ = W − x̄ (as torch.optim.SGD, nesterov=True,
    with B starting at zero): B ← μ·B + Δ ; W ← W − lr·(Δ + μ·B)."""
    outer_nesterov_step_(center, outer_difference(center, sum_workers, num_workers), buf, lr, mu)


def outer_nesterov_step_(center: torch.Tensor, delta: torch.Tensor, buf: torch.Tensor, lr: float, mu: float) -> None:
    """DiLoCo's outer step on a given outer gradient Δ (overwritten): B ← μ·B + Δ ; W ← W − lr·(Δ + μ·B)."""
    buf.mul_(mu).add_(delta)
    center.sub_(delta.add_(buf, alpha=mu), alpha=lr)


def outer_slowmo_(
    center: torch.Tensor,
    sum_workers: torch.Tensor,
    num_workers: int,
    buf: torch.Tensor,
    inner_lr: float,
    slow_lr: float,
    beta: float,
) -> None:
    """SlowMo's outer step with the inner learning rate γ: U ← β·U + Δ/γ ; W ← W − α·γ·U (α the slow
    learning rate, β the slow momentum; α = 1, β = 0 is local SGD's average)."""
    outer_slowmo_step_(center, outer_difference(center, sum_workers, num_workers), buf, inner_lr, slow_lr, beta)


def outer_slowmo_step_(
    center: torch.Tensor, delta: torch.Tensor, buf: torch.Tensor, inner_lr: float, slow_lr: float, beta: float
) -> None:
    """SlowMo's outer step on a given outer gradient Δ: U ← β·U + Δ/γ ; W ← W − α·γ·U."""
    buf.mul_(beta).add_(delta, alpha=1.0 / inner_lr)
    center.sub_(buf, alpha=slow_lr * inner_lr)


def outer_average_step_(center: torch.Tensor, delta: torch.Tensor) -> None:
    """Local SGD's average on a given outer gradient Δ = W − x̄: W ← W − Δ."""
    center.sub_(delta)


def eager_difference_(
    out: torch.Tensor, own_now: torch.Tensor, sum_before: torch.Tensor, own_before: torch.Tensor, num_workers: int
) -> torch.Tensor:
    """A one-round-late outer gradient with this worker's own part on time (the eager delayed outer step):
    Δ̃^i = (Δ^i_t + Σ_{j≠i} Δ^j_{t−1}) / P, the others' part as the previous round's sum less this worker's own
    share of it (both zero before the first round)."""
    return torch.sub(sum_before, own_before, out=out).add_(own_now).div_(num_workers)


def default_rho(lr: float, num_workers: int, beta: float = 0.9) -> float:
    """ρ from Zhang et al.'s moving rate α = ηρ = β/P with β = 0.9 (our default where the paper is silent)."""
    return beta / (num_workers * lr)


# An asynchronous update weighed by its staleness s (the center's updates by other workers since this worker's
# last one): none leaves it as it is (the paper's); inverse divides it by 1 + s, so an update computed on a
# center many updates old moves the center less.
AGE_WEIGHTS = {"none": lambda staleness: 1.0, "inverse": lambda staleness: 1.0 / (1.0 + staleness)}


def age_weighted_(update: torch.Tensor, staleness: int, weighting: str) -> None:
    """update ← weight(s)·update; an exact no-op at weight 1 (s = 0, or weighting none)."""
    weight = AGE_WEIGHTS[weighting](staleness)
    if weight != 1.0:
        update.mul_(weight)
