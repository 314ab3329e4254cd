"""The gradient buckets' plan: contiguous ranges of the flat gradient, last parameter first, DDP's sizes."""

import pytest

from scaledl.comm.buckets import MB, plan_buckets


def covers_once(buckets, total):
    ranges = sorted((b.lo, b.hi) for b in buckets)
    return ranges[0][0] == 0 and ranges[-1][1] == total and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_buckets_start_from_the_last_parameter_and_cover_the_gradient_once():
    numels = [100, 2000, 50, 300_000, 10]  # floats
    buckets = plan_buckets(numels, 4, bucket_mb=1.0, first_mb=0.001)
    assert covers_once(buckets, sum(numels))
    assert buckets[0].params[0] == len(numels) - 1, "backward produces the last parameter's gradient first"
    assert buckets[0].hi == sum(numels) and [b.lo for b in buckets] == sorted((b.lo for b in buckets), reverse=True)
    assert sorted(i for b in buckets for i in b.params) == list(range(len(numels)))


def test_the_first_bucket_is_small_and_the_others_fill_to_the_cap():
    numels = [MB // 4] * 8  # eight 1 MiB tensors of floats
    buckets = plan_buckets(numels, 4, bucket_mb=3.0, first_mb=1.0)
    assert [len(b.params) for b in buckets] == [1, 3, 3, 1]
    assert plan_buckets(numels, 4, bucket_mb=100.0, first_mb=100.0)[0].params == tuple(range(7, -1, -1))


@pytest.mark.parametrize("bucket_mb", [1e-6, 0.5, 25.0])
def test_any_size_plans_whole_parameters(bucket_mb):
    numels = [7, 300, 1, 4096]
    buckets = plan_buckets(numels, 4, bucket_mb)
    assert covers_once(buckets, sum(numels))
    for b in buckets:
        assert b.hi - b.lo == sum(numels[i] for i in b.params)
