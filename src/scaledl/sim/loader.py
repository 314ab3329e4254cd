"""SimGrid's Python bindings, an optional dependency: found where the system put them, or one line saying how.

Debian and Ubuntu ship the bindings as `python3-simgrid` for the system Python
(/usr/lib/python3/dist-packages/simgrid.cpython-3XX-….so). A virtual
environment does not see that folder, and adding the whole folder to its path
would mix the system's packages into it; so when `import simgrid` fails, the
module file itself is loaded from the system's folders (same Python minor
version only), or from the file that SCALEDL_SIMGRID names.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import sysconfig
from pathlib import Path

from scaledl.errors import UserError

SYSTEM_FOLDERS = ("/usr/lib/python3/dist-packages", "/usr/local/lib/python3/dist-packages")
INSTALL_HINT = (
    "install SimGrid's Python bindings: Debian/Ubuntu `apt install python3-simgrid` (found from a venv of the "
    "same Python version), conda-forge `simgrid`, or `pip install simgrid` (builds from source with cmake and "
    "Boost); or point SCALEDL_SIMGRID at the simgrid module file"
)


def module_file_name() -> str:
    """simgrid.cpython-311-x86_64-linux-gnu.so for this interpreter."""
    return "simgrid" + sysconfig.get_config_var("EXT_SUFFIX")


def candidates() -> list[Path]:
    named = os.environ.get("SCALEDL_SIMGRID")
    if named:
        return [Path(named)]
    return [Path(folder) / module_file_name() for folder in SYSTEM_FOLDERS]


def load():
    """The simgrid module; UserError with the install hint when it is nowhere."""
    if "simgrid" in sys.modules:
        return sys.modules["simgrid"]
    try:
        import simgrid  # lazy: an optional dependency, needed by simulated runs only

        return simgrid
    except ImportError:
        pass
    for path in candidates():
        if path.is_file():
            spec = importlib.util.spec_from_file_location("simgrid", path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except ImportError as error:
                raise UserError(f"SimGrid's bindings at {path} do not load here ({error}); {INSTALL_HINT}") from None
            sys.modules["simgrid"] = module
            return module
    raise UserError(f"simulated runs need SimGrid, which this Python cannot import; {INSTALL_HINT}")


def available() -> bool:
    """Whether SimGrid loads here (tests and the workflow's checks ask before relying on it)."""
    try:
        load()
    except UserError:
        return False
    return True
