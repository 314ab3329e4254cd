"""A tuned run's settings: its row of the tune stage's choice (results/NAME/tune/chosen.csv).

The row is the run's cell: dataset, model, algorithm (or one doing the same
arithmetic: they are tuned once), platform (any, for an arithmetic that does not
depend on timing) and worker count. Its tuned values
(the columns named in its `tuned` column) replace the run's settings before
anything is built, so run.json's `arguments` hold the
values the run used; `--tuned-scale lr=0.1` multiplies some of them (a
control), `--tuned-pick runner_up` takes the runner-up η instead (a robustness
check). Every rank reads the same file, so a missing row is the same one-line
error everywhere.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

from scaledl.algorithms import ALGORITHMS, INTEGER
from scaledl.config import TrainConfig
from scaledl.data.hdf5 import read_info
from scaledl.errors import UserError
from scaledl.grid.tune import choice_for, read_choices


def with_tuned(cfg: TrainConfig, world_size: int) -> TrainConfig:
    """`cfg` with its tuned settings from cfg.tuned_from (unchanged without one)."""
    if cfg.tuned_from is None:
        return cfg
    workers = world_size - (1 if ALGORITHMS[cfg.algorithm].needs_master else 0)
    cell = {
        "dataset": read_info(cfg.data).dataset,
        "model": cfg.model,
        "algorithm": cfg.algorithm,
        "platform": cfg.platform,
        "workers": str(workers),
    }
    run = SimpleNamespace(**cell)  # a numerically identical algorithm's choice is this one's (same_cell)
    choice = choice_for(read_choices(cfg.tuned_from, "--tuned-from"), run)
    if choice is None:
        raise UserError(
            f"--tuned-from {cfg.tuned_from} has no choice for "
            f"{'/'.join(cell.values())} (dataset/model/algorithm/platform/workers): tune that setting"
        )
    values = {}
    for name in filter(None, (getattr(choice, "tuned", "") or "").split(",")):
        value = float(getattr(choice, name))
        values[name] = int(value) if name in INTEGER else value
    if cfg.tuned_pick == "runner_up":  # the best point at another η (scaledl.report.tuning)
        if getattr(choice, "runner_up_lr", None) is None:
            raise UserError(f"--tuned-from {cfg.tuned_from}: {cfg.algorithm} has no runner-up η (one η was tried)")
        values["lr"] = float(choice.runner_up_lr)
    for name, factor in _factors(cfg.tuned_scale).items():
        if name not in values:
            raise UserError(
                f"--tuned-scale {cfg.tuned_scale}: {name} was not tuned for {cfg.algorithm} "
                f"(tuned: {', '.join(values) or 'nothing'})"
            )
        values[name] = values[name] * factor
    if "beta" in values:
        values["rho"] = None  # ρ follows from the tuned β (α = β/P)
    return dataclasses.replace(cfg, **values)


def _factors(spec: str | None) -> dict[str, float]:
    factors = {}
    for item in filter(None, (spec or "").split(",")):
        name, _, factor = item.partition("=")
        try:
            factors[name] = float(factor)
        except ValueError:
            raise UserError(f"--tuned-scale {spec}: expected KEY=FACTOR[,KEY=FACTOR...] such as lr=0.1") from None
        if not math.isfinite(factors[name]) or factors[name] <= 0:
            raise UserError(f"--tuned-scale {spec}: a factor must be positive")
    return factors
