"""Staleness of the asynchronous workers (scaledl.algorithms.staleness): each exchange's lag, and a run's summary."""

from __future__ import annotations

from scaledl.algorithms.staleness import Staleness, staleness_summary


def worker(versions: list[int]) -> Staleness:
    """A worker whose updates found the center at these update counts."""
    staleness = Staleness()
    for version in versions:
        staleness.note(version)
    return staleness


def test_each_exchange_counts_the_updates_by_others_since_the_last_one():
    # alone for two updates (0, 1), then 3 others' updates land before its next (version 5), then 1 more
    w = worker([0, 1, 5, 7])
    assert w.as_dict() == {
        "exchanges": 4, "staleness_mean": 1.0, "staleness_max": 3, "staleness": {"0": 2, "1": 1, "3": 1},
    }  # fmt: skip
    again = Staleness()
    again.load_state_dict(w.state_dict())  # a checkpoint keeps the histogram
    again.note(8)
    assert again.as_dict()["staleness"] == {"0": 3, "1": 1, "3": 1}
    old = {k: v for k, v in w.state_dict().items() if k != "lags"}  # a checkpoint from before histograms
    older = Staleness()
    older.load_state_dict(old)
    assert older.as_dict()["staleness"] == {} and older.as_dict()["exchanges"] == 4


def test_a_runs_summary_merges_its_workers_and_reads_the_quantiles_off_the_histogram():
    reports = [worker([0, 1, 5, 7]).as_dict(), worker([2, 3, 4, 9, 10]).as_dict(), {"rank": 0}]
    # lags: 0, 0, 3, 1 and 2, 0, 0, 4, 0: five at 0, one each at 1, 2, 3, 4 (the 90th percentile of 9: the 9th)
    summary = staleness_summary(reports)
    assert summary == {
        "exchanges": 9, "median": 0, "p90": 4, "max": 4, "histogram": {"0": 5, "1": 1, "2": 1, "3": 1, "4": 1},
    }  # fmt: skip
    assert staleness_summary([{"rank": 1, "messages_per_exchange": 1}]) is None  # a synchronous pattern's reports
    # the round-robin master measures its workers' lags itself and reports them under `workers`
    master = {"rank": 0, "workers": [{"rank": 1, **worker([0, 1, 5, 7]).as_dict()}]}
    assert staleness_summary([master])["histogram"] == {"0": 2, "1": 1, "3": 1}
