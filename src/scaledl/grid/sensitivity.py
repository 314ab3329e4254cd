"""The sensitivity sweeps' part of the workflow (config `sensitivity`): their check, runs, command lines, outputs.

`scaledl sensitivity` (scaledl.report.sensitivity) varies each assumed
constant of a simulated platform alone and says whether a claim "A is faster
than B" keeps its verdict there, from this config's runs of both sides on the
platform. Each claim pair of the config is one sweep, in
results/NAME/report/sensitivity/FASTER-vs-SLOWER/; the claims report puts its
finding beside the simulated verdict (scaledl claims --sensitivity). A pair
with an asynchronous side needs whole runs (every seed's training simulated
at every point): listed under `asynchronous_claims` it gets them over the
validated bands' ends alone (`--bands-only`); `check` refuses it otherwise,
while the grid expands.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from scaledl.algorithms import ALGORITHMS
from scaledl.config import as_argv
from scaledl.data.datasets import PREPARED
from scaledl.grid import calibration
from scaledl.grid.keys import GridError, RunKey
from scaledl.grid.regime import TIMING_FREE_PATTERNS, sides_run_files

SEPARATOR = "-vs-"  # FASTER-vs-SLOWER: a sweep's folder (algorithm keys hold no hyphen)
RESULT = "{results}/report/sensitivity/{pair}/sensitivity.csv"
BANDS = "{results}/validate/published.json"  # `scaledl validate --suite published`'s record: the bands swept


def spec_of(config: Mapping) -> dict | None:
    """The config's `sensitivity` when it is enabled (the schema fills its defaults), else None."""
    spec = config.get("sensitivity") or {}
    return spec if spec.get("enabled") else None


def claims_of(spec: Mapping) -> list[str]:
    """Every pair swept: `claims`, then `asynchronous_claims` (whole runs over the validated bands alone)."""
    return [*spec["claims"], *spec.get("asynchronous_claims", [])]


def check(config: Mapping) -> None:
    """GridError unless `sensitivity` (when given) names a simulated platform and pairs of algorithms it can
    sweep: timing-free ones, or any with whole_runs."""
    spec = spec_of(config)
    if not spec:
        return
    platform = config["platforms"].get(spec.get("platform") or "")
    if platform is None or platform.get("kind") != "simulated":
        raise GridError(
            f"sensitivity: platform {spec['platform']!r} is not a platform of kind simulated in this config"
        )
    if spec.get("asynchronous_claims") and not spec.get("bands"):
        raise GridError("sensitivity: asynchronous_claims sweep the validated bands alone; set bands: true")
    for claim in claims_of(spec):
        whole = spec["whole_runs"] or claim in spec.get("asynchronous_claims", [])
        for side in claim.split(":"):
            if side not in ALGORITHMS:
                raise GridError(f"sensitivity: claim {claim}: {side!r} is not an algorithm")
            if ALGORITHMS[side].pattern not in TIMING_FREE_PATTERNS and not whole:
                raise GridError(
                    f"sensitivity: claim {claim}: {side}'s numerics depend on the timing (pattern "
                    f"{ALGORITHMS[side].pattern}); list it under asynchronous_claims (whole runs over the "
                    "validated bands), set whole_runs: true, or sweep a synchronous or round-robin pair"
                )


def pair_of(claim: str) -> str:
    """FASTER:SLOWER as its sweep's folder name, FASTER-vs-SLOWER."""
    return claim.replace(":", SEPARATOR)


def run_files(runs: Mapping[RunKey, object], config: Mapping, name: str, pair: str) -> list[str]:
    """run.json of both sides' runs of the sweep `pair` on the platform, dataset, model and P, in config
    `name`'s results (scaledl.grid.regime.sides_run_files)."""
    spec = spec_of(config)
    return sides_run_files(runs, spec, pair.split(SEPARATOR), name) if spec else []


def result_files(runs: Mapping[RunKey, object], config: Mapping, name: str) -> list[str]:
    """Each sweep's sensitivity.csv whose pair has runs of both sides in this config ([] without sweeps)."""
    spec = spec_of(config)
    files = []
    for claim in claims_of(spec) if spec else []:
        pair = pair_of(claim)
        have = {path.split("/")[5] for path in run_files(runs, config, name, pair)}  # results/N/runs/D/M/ALGO/...
        if have == set(claim.split(":")):
            files.append(RESULT.format(results=f"results/{name}", pair=pair))
    return files


def data_file(config: Mapping) -> str:
    """The prepared dataset the sweeps' simulations train on."""
    return PREPARED.format(dataset=config["sensitivity"]["dataset"])


def bands_inputs(config: Mapping, name: str) -> dict[str, str]:
    """What a sweep waits for besides its runs (named, for `unpack`): with `bands`, the published validation's
    record whose bands it sweeps (the workflow's validate_published); else nothing."""
    spec = spec_of(config)
    return {"bands": BANDS.format(results=f"results/{name}")} if spec and spec.get("bands") else {}


def inputs(config: Mapping, name: str) -> dict[str, str]:
    """What a sweep waits for besides its runs and data (named, for `unpack`): its platform's calibration, where
    it is this machine's twin, and the bands it sweeps."""
    platform = config["platforms"][config["sensitivity"]["platform"]]
    return {**calibration.calibration_inputs(platform, name), **bands_inputs(config, name)}


def flags(config: Mapping, pair: str, name: str) -> str:
    """`scaledl sensitivity`'s options for the sweep `pair`; each side is simulated with its own runs' settings,
    which the command reads from their run.json."""
    spec = spec_of(config)
    options = {key: spec[key] for key in ("workers", "model", "factors", "steps", "whole_runs", "max_steps")}
    options["constants"] = spec["constants"]
    options["bands"] = bands_inputs(config, name).get("bands")
    platform_file = calibration.platform_file(config["platforms"][spec["platform"]], name)
    claim = pair.replace(SEPARATOR, ":")
    if claim in spec.get("asynchronous_claims", []):  # whole runs, over the validated bands' ends alone
        options.update(whole_runs=True, bands_only=True)
    return shlex.join(as_argv({**options, "claim": claim, "platform_file": platform_file}))


def claims_flags(files: list[str]) -> str:
    """`scaledl claims`'s --sensitivity for each sweep's result."""
    return shlex.join([arg for path in files for arg in ("--sensitivity", path)])
