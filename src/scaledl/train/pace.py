"""A tune trial's early stop: at an evaluation where it can no longer be its cell's best or runner-up point.

The cell's other trials lie beside this one's folder (cell/POINT/sSEED, scaledl.grid.keys); the
finished ones that ran the same protocol (budget, target, evaluation interval, validation share,
seeds per point) give the score to beat (scaledl.report.tuning.pace_to_beat). The stop is exact: a
trial stopped here would have crossed the target later than the runner-up, so neither the choice
nor the runner-up changes; only how many steps the hopeless trials run depends on which trials
finished first. Read again only when a sibling's run.json appears or changes; a sibling that cannot
be read leaves the trial running (the stop only saves time).
"""

from __future__ import annotations

from pathlib import Path

from scaledl.errors import UserError
from scaledl.run_record import RUN_JSON, read_run_json

# run.json arguments that must agree for a sibling to be a trial of the same protocol
PROTOCOL = ("max_steps", "target_accuracy", "eval_every", "validation_fraction", "tune_seeds", "algorithm")


class Pace:
    """`passed(step, train_s)`: whether the trial at `out_dir`, not yet at its target, can no longer matter."""

    def __init__(self, out_dir: Path, seeds: int, arguments: dict):
        self.out_dir = Path(out_dir).resolve()
        self.cell = self.out_dir.parent.parent
        self.seeds = seeds
        self.protocol = {name: arguments.get(name) for name in PROTOCOL}
        self._seen: tuple | None = None
        self._bar: tuple[str, float] | None = None

    def passed(self, step: int, train_s: float) -> bool:
        bar = self.bar()
        if bar is None:
            return False
        by, score = bar
        return (step if by == "steps" else train_s) >= score

    def bar(self) -> tuple[str, float] | None:
        siblings = [p for p in sorted(self.cell.glob(f"*/s*/{RUN_JSON}")) if p.parent != self.out_dir]
        try:
            seen = tuple((str(p), p.stat().st_mtime_ns) for p in siblings)
        except OSError:  # a sibling replaced while listed: the next evaluation looks again
            return self._bar
        if seen != self._seen:
            self._seen, self._bar = seen, self._read(siblings)
        return self._bar

    def _read(self, paths: list[Path]) -> tuple[str, float] | None:
        # pandas: only a tune trial reads its siblings, and only when one has finished
        from scaledl.report.tuning import pace_to_beat, trial_rows

        same = []
        for path in paths:
            try:
                arguments = read_run_json(path).get("arguments") or {}
            except UserError:
                continue
            if {name: arguments.get(name) for name in PROTOCOL} == self.protocol:
                same.append(path)
        if not same:
            return None
        try:
            return pace_to_beat(trial_rows(same), self.seeds)
        except (UserError, KeyError, ValueError):
            return None
