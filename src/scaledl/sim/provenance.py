"""Which code, host and time calibrated a platform file, and the refusal of one calibrated by other code.

`scaledl calibrate` writes a `provenance:` line into the header of the file it makes; a simulation by other code
refuses the file (its prices are another loop's). Light on purpose: the simulator and the CLI read it.
"""

from __future__ import annotations

import re
from pathlib import Path

from scaledl.codehash import code_version
from scaledl.errors import UserError

PROVENANCE_LINE = re.compile(r"provenance: code (\S+) commit (\S+) host (\S+) at (\S+)")


def calibration_provenance(text: str) -> dict | None:
    """Where and by which code a platform file was calibrated: its header's `provenance:` line as
    {code, commit, host, at}; None for a file without one (written by hand, or calibrated before the line)."""
    found = PROVENANCE_LINE.search(text)
    return dict(zip(("code", "commit", "host", "at"), found.groups())) if found else None


def refuse_stale_calibration(path: Path) -> dict | None:
    """A platform calibrated by other code (`calibration_provenance`'s `code` is not this code's version) prices
    a loop that no longer runs: refused in one line. Returns the provenance (None for a file without one)."""
    provenance = calibration_provenance(path.read_text(errors="replace"))
    if provenance is not None and provenance["code"] != code_version():
        raise UserError(
            f"platform file {path} was calibrated by code {provenance['code']} (commit {provenance['commit']}, "
            f"{provenance['at']}), and this is code {code_version()}: its prices are another loop's; recalibrate "
            "it (`scaledl calibrate`, or rerun the workflow, which does)"
        )
    return provenance
