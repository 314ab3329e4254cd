"""Staleness of the asynchronous patterns' workers: how many center updates by others landed between a worker's
reading of the center and its own update, per exchange, as a histogram; and a run's summary over its workers.
Pure bookkeeping: no MPI here."""

from __future__ import annotations


class Staleness:
    """How many center updates by others happened between a worker's consecutive exchanges: how far behind the
    newest center the W it read was when its update landed. Kept as a histogram {lag: exchanges}."""

    def __init__(self):
        self.count, self.total, self.max, self._expected = 0, 0, 0, 0
        self.lags: dict[int, int] = {}

    def note(self, version: int) -> int:
        """`version`: the center's update count just before this worker's update; returns its staleness."""
        lag = version - self._expected
        self.count += 1
        self.total += lag
        self.max = max(self.max, lag)
        self.lags[lag] = self.lags.get(lag, 0) + 1
        self._expected = version + 1
        return lag

    def as_dict(self) -> dict:
        mean = self.total / self.count if self.count else None
        histogram = {str(lag): self.lags[lag] for lag in sorted(self.lags)}
        return {"exchanges": self.count, "staleness_mean": mean, "staleness_max": self.max, "staleness": histogram}

    def state_dict(self) -> dict:
        return {"count": self.count, "total": self.total, "max": self.max, "expected": self._expected,
                "lags": dict(self.lags)}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.count, self.total, self.max = state["count"], state["total"], state["max"]
        self._expected = state["expected"]
        self.lags = {int(lag): n for lag, n in state.get("lags", {}).items()}  # none in an older checkpoint


def staleness_summary(reports: list[dict]) -> dict | None:
    """The run's staleness over every worker's exchanges (their reports' histograms merged): exchanges, median,
    90th percentile and max lag, and the histogram; None for an engine whose workers keep none (synchronous
    patterns read the newest center every time)."""
    merged: dict[int, int] = {}
    for report in reports:
        # a window worker reports its own; the round-robin master reports every worker's under `workers`
        for entry in [report, *report.get("workers", [])]:
            for lag, n in (entry.get("staleness") or {}).items():
                merged[int(lag)] = merged.get(int(lag), 0) + n
    if not merged:
        return None
    lags = sorted(merged)
    total = sum(merged.values())

    def quantile(q: float) -> int:  # the smallest lag with at least q of the exchanges at or below it
        seen = 0
        for lag in lags:
            seen += merged[lag]
            if seen >= q * total:
                return lag
        return lags[-1]

    return {"exchanges": total, "median": quantile(0.5), "p90": quantile(0.9), "max": lags[-1],
            "histogram": {str(lag): merged[lag] for lag in lags}}  # fmt: skip
