"""A simulated platform calibrated on this machine by the workflow (`platform_file: calibrated`).

The twin beside the real runs is this machine, at the code that runs: `calibrate_platform` (net.smk) times the
training loop's step here after the local netbench, and every job that simulates on it waits for the file.
"""

from __future__ import annotations

from collections.abc import Mapping

from scaledl.config import as_argv
from scaledl.grid.keys import GridError, RunKey, RunSettings

CALIBRATED = "calibrated"  # a simulated platform's platform_file: this machine, calibrated by the workflow


def calibrated_platform(name: str) -> str:
    """The platform file the workflow's calibration writes for this config (results/NAME/platform/)."""
    return f"results/{name}/platform/calibrated.xml"


def platform_file(platform: Mapping, name: str) -> str:
    """A simulated platform's file: the shipped name or file its config gives, or, for `calibrated`, the one
    the workflow calibrates on this machine at the code that runs."""
    given = platform["platform_file"]
    return calibrated_platform(name) if given == CALIBRATED else given


def calibration_inputs(platform: Mapping, name: str) -> dict[str, str]:
    """What a simulated job waits for (named inputs, for `unpack`): the calibrated platform file where it uses
    one, else nothing."""
    return {"platform": calibrated_platform(name)} if platform.get("platform_file") == CALIBRATED else {}


def calibration_netbench(runs: Mapping[RunKey, RunSettings], config: Mapping, name: str) -> str:
    """The netbench file the calibration takes this machine's network from: that of the grid's first platform
    that runs here (kind local), else of the config's `local` platform."""
    platforms = config["platforms"]
    here = [key.platform for key in runs if platforms[key.platform].get("kind", "local") == "local"]
    chosen = here[0] if here else "local" if "local" in platforms else None
    if chosen is None:
        raise GridError(
            f"platform_file {CALIBRATED} calibrates this machine from the netbench of a platform of kind local, "
            "and this config has none: add one (`local: {kind: local}` under platforms)"
        )
    return f"results/{name}/netbench/{chosen}.json"


def validation_files(runs: Mapping[RunKey, RunSettings], config: Mapping, name: str) -> list[str]:
    """The twin's validation (`validate_here`: the calibrated platform against this machine on what its
    calibration did not see) where a run of the grid simulates on it; nothing otherwise."""
    platforms = config["platforms"]
    twin = any(platforms[key.platform].get("platform_file") == CALIBRATED for key in runs)
    return [f"results/{name}/validate/here.md"] if twin else []


def validation_flags(config: Mapping) -> str:
    """`scaledl validate --suite here`'s options from the config's `validate` block (a null one is the
    command's default)."""
    return " ".join(as_argv(config["validate"]))
