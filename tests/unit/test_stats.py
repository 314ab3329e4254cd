"""The report's exact interval of a median: its coverage is what it says, checked by simulation."""

import numpy as np
import pytest

from scaledl.report.stats import median_interval


@pytest.mark.parametrize("n", [3, 5, 6, 7, 8, 10, 20])
def test_the_order_statistic_interval_covers_the_median_as_often_as_its_label_says(n):
    interval = median_interval(range(n))
    rng = np.random.default_rng(n)
    draws = rng.lognormal(size=(20000, n))  # skewed: the interval must not assume symmetry; true median 1
    ordered = np.sort(draws, axis=1)
    k = int(np.searchsorted(np.arange(n), interval.low))  # the interval's order statistics, 0-based
    covered = (ordered[:, k] <= 1.0) & (ordered[:, n - 1 - k] >= 1.0)
    assert covered.mean() == pytest.approx(interval.coverage, abs=0.01)
    assert interval.coverage >= 0.95 or (interval.low, interval.high) == (0, n - 1)  # short of 95 %: min–max


def test_the_interval_is_the_narrowest_that_reaches_the_level():
    assert (median_interval(range(7)).low, median_interval(range(7)).coverage) == (0, 0.984375)  # [x(2), x(6)]: 87.5 %
    assert median_interval(range(20)).low == 5 and median_interval(range(20)).label() == "95.9 %"
    assert median_interval([float("nan")]).n == 0
