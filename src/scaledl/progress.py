"""Progress lines for long work: how far, how fast, how long is left (on stderr, throttled)."""

from __future__ import annotations

import sys
import time


def duration(seconds: float) -> str:
    """12s, 3m05s, 2h04m: a remaining time as a person reads it."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """`advance(n)` as work gets done; a line at most every `every_s` seconds and one at the end.

    The lines go to stderr so that a command's own output (and a workflow's log of it) stays parseable.
    """

    def __init__(
        self, what: str, total: int, unit: str = "images", every_s: float = 10.0, stream=None, clock=time.monotonic
    ):
        self.what, self.total, self.unit, self.every_s = what, total, unit, every_s
        self.stream = stream or sys.stderr
        self.clock = clock
        self.done = 0
        self.started = self.last = clock()

    def advance(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.last >= self.every_s and self.done < self.total:
            self.last = now
            self._print(now)

    def finish(self) -> None:
        self._print(self.clock(), final=True)

    def line(self, now: float, final: bool = False) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        head = f"{self.what}: {self.done:,}/{self.total:,} {self.unit} ({self.done / max(self.total, 1):.0%})"
        if final:
            return f"{head} in {duration(elapsed)}, {rate:,.0f} {self.unit}/s"
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        return f"{head}, {rate:,.0f} {self.unit}/s, ~{duration(left) if left != float('inf') else '?'} left"

    def _print(self, now: float, final: bool = False) -> None:
        print(self.line(now, final), file=self.stream, flush=True)
