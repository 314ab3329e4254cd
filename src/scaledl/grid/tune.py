"""The tune stage's trials: the same number for every algorithm, quasi-random draws from its own search space.

For each cell of a `tuned` block (dataset, model, algorithm, platform,
workers), `tune.trials` points of a scrambled Halton sequence (scipy.stats.qmc,
seeded by the tune seed and the algorithm, so the draws never change between
parses) are mapped onto the algorithm's search space: the registry's ranges
(scaledl.algorithms.SEARCH_SPACE), replaced or removed per algorithm by the
config's `tune.space`. η and τ are drawn log-uniformly, the rest uniformly,
τ rounded to an integer. Every trial is one run on a validation split held
out of the training set; the choice (scaledl.report.tuning) is the trial with
the least training time to the validation target.

Plain functions of the validated config: no torch, no MPI.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping

from scipy.stats import qmc

from scaledl.algorithms import INTEGER, LOG_SCALED, search_space
from scaledl.grid.keys import TUNE_STAGE

TUNED = "tuned"  # the setting (folder) of a tuned block's runs
CHOSEN = "tune/chosen.csv"  # under results/NAME/
CHOSEN_MD = "tune/chosen.md"


class TuneError(ValueError):
    """A search space that cannot be drawn from; the one-line message says what to change."""


def space_of(algorithm: str, config: Mapping) -> dict[str, tuple[float, float]]:
    """The algorithm's search space: the registry's ranges, with the config's `tune.space` over them."""
    space = dict(search_space(algorithm))
    for name, bounds in ((config.get("tune") or {}).get("space", {}).get(algorithm) or {}).items():
        if bounds is None:
            space.pop(name, None)
            continue
        low, high = bounds
        if not low <= high or (name in LOG_SCALED and low <= 0):
            raise TuneError(
                f"tune.space.{algorithm}.{name}: [{low}, {high}] is not a range"
                + (" of positive values (it is drawn log-uniformly)" if name in LOG_SCALED else "")
            )
        space[name] = (low, high)
    return space


def draws(algorithm: str, space: Mapping[str, tuple[float, float]], trials: int, seed: int) -> list[dict]:
    """`trials` settings for `algorithm`, one per point of a scrambled Halton sequence over `space`."""
    if not space:
        return [{} for _ in range(trials)]
    names = list(space)
    sampler = qmc.Halton(d=len(names), scramble=True, seed=zlib.crc32(f"{seed}:{algorithm}".encode()))
    points = sampler.random(trials)
    return [{name: _scaled(name, space[name], u) for name, u in zip(names, point)} for point in points]


def _scaled(name: str, bounds: tuple[float, float], u: float):
    low, high = bounds
    if name in LOG_SCALED:
        value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
    else:
        value = low + u * (high - low)
    if name in INTEGER:
        return int(round(value))
    return float(f"{value:.4g}")  # four digits: readable in tables, and a flag that never changes between parses


def trial_setting(index: int) -> str:
    """The folder of trial `index` (t00, t01, ...)."""
    return f"t{index:02d}"


def scaled_setting(scale: Mapping[str, float]) -> str:
    """The folder of a tuned block's runs: `tuned`, or with factors `tuned-lr0.1x` (a control)."""
    return TUNED + "".join(f"-{name}{factor:g}x" for name, factor in sorted(scale.items()))


def protocol(runs: Mapping, config: Mapping) -> str:
    """The tune stage as the choice's report states it (JSON): trials per algorithm, their seed, the
    validation share, the trials' own settings (budget, target) and each algorithm's search space."""
    settings = config["tune"]
    algorithms = sorted({key.algorithm for key in runs if key.stage == TUNE_STAGE})
    return json.dumps(
        {
            "trials": settings["trials"],
            "seed": settings["seed"],
            "validation_fraction": settings["validation_fraction"],
            "train": {name: value for name, value in settings["train"].items() if value is not None},
            "space": {
                algorithm: {name: list(bounds) for name, bounds in space_of(algorithm, config).items()}
                for algorithm in algorithms
            },
        },
        sort_keys=True,
    )
