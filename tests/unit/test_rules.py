"""Each update rule (paper Eqs. 1-6) against numbers worked out by hand."""

import pytest
import torch

from scaledl.algorithms import rules


def t(*values):
    return torch.tensor(values, dtype=torch.float64)


def test_sgd():
    w = t(1.0, -2.0)
    rules.sgd_(w, t(0.5, 1.0), lr=0.1)
    assert torch.equal(w, t(0.95, -2.1))


def test_sgd_step_is_the_update_sgd_adds():
    out = t(0.0, 0.0)
    rules.sgd_step_(out, t(0.5, 1.0), lr=0.1)
    assert torch.equal(out, t(-0.05, -0.1))
    w = t(1.0, -2.0)
    w.add_(out)
    assert torch.equal(w, t(0.95, -2.1))


def test_mean_sgd_averages_the_summed_gradients():
    # P = 2: W = [1, -2] - 0.1 * [1, 2] / 2 = [0.95, -2.1]; one pass, the sum left as it is
    w, grad_sum = t(1.0, -2.0), t(1.0, 2.0)
    rules.mean_sgd_(w, grad_sum, num_workers=2, lr=0.1)
    assert torch.equal(grad_sum, t(1.0, 2.0))
    assert torch.allclose(w, t(0.95, -2.1))


@pytest.mark.parametrize("workers", [1, 2, 4, 8])
def test_mean_sgd_is_bitwise_dividing_first_at_powers_of_two(workers):
    g = torch.Generator().manual_seed(workers)
    w, grad_sum = torch.randn(10_000, generator=g), torch.randn(10_000, generator=g)
    divided_first = w.clone().add_(grad_sum / workers, alpha=-0.05)
    rules.mean_sgd_(w, grad_sum, num_workers=workers, lr=0.05)
    assert torch.equal(w, divided_first)


def test_elastic_difference():
    # α·(W^i − W) = 0.05·([2, -1] − [1, 3]) = [0.05, -0.2]
    out = t(9.0, 9.0)
    assert rules.elastic_difference_(out, t(2.0, -1.0), t(1.0, 3.0), alpha=0.05) is out
    assert torch.allclose(out, t(0.05, -0.2))


def test_nesterov_look_ahead():
    # W + 0.5·V = [1, 2] + 0.5·[2, -4] = [2, 0]
    w, v = t(1.0, 2.0), t(2.0, -4.0)
    rules.look_ahead_(w, v, mu=0.5)
    assert torch.equal(w, t(2.0, 0.0))


def test_momentum_eqs_3_4():
    # V = 0.9*[1,0] - 0.1*[2,4] = [0.7, -0.4];  W = [1,1] + V = [1.7, 0.6]
    w, v = t(1.0, 1.0), t(1.0, 0.0)
    rules.momentum_(w, v, t(2.0, 4.0), lr=0.1, mu=0.9)
    assert torch.allclose(v, t(0.7, -0.4))
    assert torch.allclose(w, t(1.7, 0.6))


def test_elastic_worker_eq_1():
    # W^i = 2 - 0.1*1 - 0.1*0.5*(2 - 1) = 1.85 ; second coordinate: -1 - 0.1*0 - 0.05*(-1 - 3) = -0.8
    w = t(2.0, -1.0)
    rules.elastic_worker_(w, grad=t(1.0, 0.0), center=t(1.0, 3.0), lr=0.1, rho=0.5)
    assert torch.allclose(w, t(1.85, -0.8))


def test_elastic_center_eq_2():
    # W = 1 + 0.1*0.5*((2 + 4) - 2*1) = 1.2 ; W = 0 + 0.05*((1 - 1) - 0) = 0
    center = t(1.0, 0.0)
    rules.elastic_center_(center, sum_workers=t(6.0, 0.0), num_workers=2, lr=0.1, rho=0.5)
    assert torch.allclose(center, t(1.2, 0.0))


def test_elastic_center_one_is_eq_2_with_one_worker():
    a, b = t(1.0, 5.0), t(1.0, 5.0)
    worker = t(3.0, -1.0)
    rules.elastic_center_one_(a, worker, lr=0.2, rho=0.5)
    rules.elastic_center_(b, worker, num_workers=1, lr=0.2, rho=0.5)
    assert torch.allclose(a, t(1.2, 4.4))
    assert torch.equal(a, b)


def test_momentum_elastic_worker_eqs_5_6():
    # V = 0.9*1 - 0.1*2 = 0.7 ; W = 1 + 0.7 - 0.1*0.5*(1 - 3) = 1.8
    w, v = t(1.0), t(1.0)
    rules.momentum_elastic_worker_(w, v, grad=t(2.0), center=t(3.0), lr=0.1, rho=0.5, mu=0.9)
    assert torch.allclose(v, t(0.7))
    assert torch.allclose(w, t(1.8))


def test_elastic_pair_conserves_sum_for_one_worker():
    """Zhang et al.: with ΔW = 0 the elastic exchange moves W^i and W towards each other symmetrically."""
    w, center = t(4.0, -2.0), t(0.0, 2.0)
    before = w + center
    w_old = w.clone()
    rules.elastic_worker_(w, torch.zeros(2, dtype=torch.float64), center, lr=0.5, rho=0.4)
    rules.elastic_center_one_(center, w_old, lr=0.5, rho=0.4)
    assert torch.allclose(w + center, before)


@pytest.mark.parametrize("lr", [0.01, 0.1])
def test_rho_zero_elastic_is_sgd_and_measgd_is_momentum(lr):
    g, c = t(0.3, -0.7), t(9.0, 9.0)
    w1, w2 = t(1.0, 2.0), t(1.0, 2.0)
    rules.elastic_worker_(w1, g, c, lr=lr, rho=0.0)
    rules.sgd_(w2, g, lr)
    assert torch.equal(w1, w2)
    w3, v3, w4, v4 = t(1.0, 2.0), t(0.1, 0.1), t(1.0, 2.0), t(0.1, 0.1)
    rules.momentum_elastic_worker_(w3, v3, g, c, lr=lr, rho=0.0, mu=0.9)
    rules.momentum_(w4, v4, g, lr, 0.9)
    assert torch.equal(w3, w4) and torch.equal(v3, v4)


def test_default_rho_gives_moving_rate_beta_over_p():
    rho = rules.default_rho(lr=0.05, num_workers=4)
    assert rho * 0.05 == pytest.approx(0.9 / 4)


def test_weight_decay_adds_lambda_w_to_the_gradient():
    grad, w = torch.tensor([1.0, -2.0]), torch.tensor([10.0, 4.0])
    rules.weight_decay_(grad, w, 0.5)
    assert grad.tolist() == [6.0, 0.0]
    assert w.tolist() == [10.0, 4.0]


def test_an_age_weight_divides_a_stale_update_and_leaves_a_fresh_one_bit_for_bit():
    from scaledl.config import AGE_WEIGHTS

    assert tuple(rules.AGE_WEIGHTS) == AGE_WEIGHTS  # the setting's choices are the rules there are
    update = torch.tensor([0.3, -1.7, 2.5e-8], dtype=torch.float32)
    for staleness, weighting in ((0, "inverse"), (5, "none")):
        same = update.clone()
        rules.age_weighted_(same, staleness, weighting)
        assert torch.equal(same, update)
    rules.age_weighted_(update, 3, "inverse")
    assert torch.allclose(update, torch.tensor([0.075, -0.425, 6.25e-9]))
