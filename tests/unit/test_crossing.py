"""The crossing of the target accuracy, interpolated between evaluations, on hand-made metrics rows."""

import pytest

from scaledl.train.monitor import Crossing, crossing


def rows(*points):
    """Metrics rows of (step, train_s, test_accuracy)."""
    return [{"step": s, "train_s": t, "test_accuracy": a} for s, t, a in points]


def test_the_crossing_is_interpolated_between_the_last_evaluation_below_and_the_first_at_or_above():
    metrics = rows((0, 0.0, 0.1), (40, 4.0, 0.5), (80, 10.0, 0.7), (120, 16.0, 0.9))
    # 0.6 is half way from 0.5 (step 40, 4 s) to 0.7 (step 80, 10 s): step 60 at 7 s, seen at step 80
    found = crossing(metrics, 0.6)
    assert (found.train_s, found.steps, found.step) == (pytest.approx(7.0), pytest.approx(60.0), 80)
    # a quarter of the way from step 80 to 120
    assert crossing(metrics, 0.75) == Crossing(pytest.approx(11.5), pytest.approx(90.0), 120)


def test_an_accuracy_exactly_at_the_target_gives_that_evaluation_to_the_bit():
    metrics = rows((0, 0.0, 0.1), (40, 4.1, 0.5), (80, 10.3, 0.7))
    assert crossing(metrics, 0.7) == Crossing(10.3, 80.0, 80)


def test_the_first_evaluation_at_or_above_decides_not_a_later_dip_and_rise():
    metrics = rows((0, 0.0, 0.2), (10, 1.0, 0.8), (20, 2.0, 0.6), (30, 3.0, 0.9))
    # 0.7 is first crossed between steps 0 and 10, whatever step 20's dip below it does
    assert crossing(metrics, 0.7) == Crossing(pytest.approx(5 / 6), pytest.approx(25 / 3), 10)


def test_a_first_evaluation_already_at_the_target_is_taken_as_it_is():
    metrics = rows((10, 1.5, 0.9), (20, 3.0, 0.95))
    assert crossing(metrics, 0.8) == Crossing(1.5, 10.0, 10)


def test_no_crossing_without_a_target_or_below_it():
    metrics = rows((0, 0.0, 0.1), (10, 1.0, 0.5))
    assert crossing(metrics, 0.6) is None and crossing(metrics, None) is None and crossing([], 0.5) is None
