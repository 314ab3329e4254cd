"""The regime map's part of the workflow (config `regime_map`): its check, the runs it reads, its command line.

`scaledl regime-map` (scaledl.report.regime) simulates, on a scaled copy of a
simulated platform, where a claim "A is faster than B" holds over network
bandwidth × device speed, from the steps to target of this config's runs of
both sides. That reuse is sound only for algorithms whose numerics the timing
cannot change (synchronous and round-robin patterns), and only on a platform
the simulator knows: `check` refuses anything else while the grid expands.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from scaledl.algorithms import ALGORITHMS
from scaledl.config import as_argv
from scaledl.data.datasets import PREPARED
from scaledl.grid import calibration
from scaledl.grid.keys import RUNS_STAGE, GridError, RunKey, run_dir
from scaledl.grid.tune import TUNED

# The patterns whose numerics the timing cannot change: a regime map reuses their steps to target anywhere.
TIMING_FREE_PATTERNS = ("collectives", "round_robin")


def map_of(config: Mapping) -> dict | None:
    """The config's `regime_map` when it is enabled (the schema fills its defaults), else None."""
    spec = config.get("regime_map") or {}
    return spec if spec.get("enabled") else None


def check(config: Mapping) -> None:
    """GridError unless `regime_map` (when given) names a simulated platform and two timing-free algorithms."""
    spec = map_of(config)
    if not spec:
        return
    platform = config["platforms"].get(spec.get("platform") or "")
    if platform is None or platform.get("kind") != "simulated":
        raise GridError(f"regime_map: platform {spec['platform']!r} is not a platform of kind simulated in this config")
    for side in spec["claim"].split(":"):
        if side not in ALGORITHMS:
            raise GridError(f"regime_map: claim {spec['claim']}: {side!r} is not an algorithm")
        if ALGORITHMS[side].pattern not in TIMING_FREE_PATTERNS:
            raise GridError(
                f"regime_map: claim {spec['claim']}: {side}'s numerics depend on the timing (pattern "
                f"{ALGORITHMS[side].pattern}); map a synchronous or round-robin pair"
            )


def run_files(runs: Mapping[RunKey, object], config: Mapping, name: str) -> list[str]:
    """run.json of both sides' runs on the map's platform, dataset, model and P, in config `name`'s results;
    [] without a map."""
    spec = map_of(config)
    return sides_run_files(runs, spec, spec["claim"].split(":"), name) if spec else []


def sides_run_files(runs: Mapping[RunKey, object], spec: Mapping, sides: list[str], name: str) -> list[str]:
    """run.json of the runs of `sides` on `spec`'s platform, dataset, model and P (a regime map's or a
    sensitivity sweep's), in config `name`'s results: the tuned ones where the config tunes them, else those
    at the shared settings."""
    found = [
        key
        for key in runs
        if key.stage == RUNS_STAGE
        and key.algorithm in sides
        and (key.platform, key.dataset, key.model, key.workers)
        == (spec["platform"], spec["dataset"], spec["model"], spec["workers"])
    ]
    setting = TUNED if any(key.setting == TUNED for key in found) else ""
    return [f"{run_dir(key, name)}/run.json" for key in found if key.setting == setting]


def data_file(config: Mapping) -> str:
    """The prepared dataset the map's simulations train on."""
    return PREPARED.format(dataset=config["regime_map"]["dataset"])


def flags(config: Mapping, name: str) -> str:
    """`scaledl regime-map`'s options from the config; each side is simulated with its own runs' settings,
    which the command reads from their run.json (scaledl.report.regime.read_side)."""
    spec = map_of(config)
    options = {key: spec[key] for key in ("claim", "workers", "model", "bandwidth_factors", "speed_factors", "steps")}
    platform_file = calibration.platform_file(config["platforms"][spec["platform"]], name)
    return shlex.join(as_argv({**options, "platform_file": platform_file}))
