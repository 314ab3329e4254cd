"""The effective step per round that chosen.md and the claims print: what one round moves the center by."""

from __future__ import annotations

import math

import pytest

from scaledl.report.tuning import effective_step


@pytest.mark.parametrize(
    "algorithm, momentum, expected",
    [
        ("async_sgd", None, 2 * 0.01),  # both workers' steps land on the center
        ("async_msgd", 0.9, 2 * 0.01 / (1 - 0.9)),  # ... each carried by momentum: 0.2, not 0.02
        ("async_easgd", None, 2 / 3 * 0.01),  # the elastic center moves P/(P+1)·η
        ("async_measgd", 0.9, 2 / 3 * 0.01 / (1 - 0.9)),
        ("sync_sgd", None, 0.01),  # the workers' steps averaged
        ("sync_easgd", math.nan, 2 / 3 * 0.01),  # a summary's empty momentum column: no momentum
    ],
)
def test_the_effective_step_counts_workers_and_momentum(algorithm, momentum, expected):
    assert effective_step(algorithm, 0.01, 2, momentum) == pytest.approx(expected)
