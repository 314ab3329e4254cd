"""Models and datasets of your own: plug-ins, by name, beside the built-in registries.

A plug-in is a name bound to a function of your module, written `module:function`:

- in a workflow config: `plugins.models.NAME: module:function` (a model) and
  `plugins.datasets.NAME: {converter: module:function or null, raw: DIR or null}` (a dataset);
- on the command line: `scaledl train --model NAME --model-from module:function`,
  `scaledl prepare NAME --converter module:function`;
- in a package you install: an entry point of the group `scaledl.models` or
  `scaledl.datasets` (pyproject.toml: `[project.entry-points."scaledl.models"]`,
  `NAME = "module:function"`); its names then work everywhere a built-in name
  does, with no line in a config.

A model function is `(in_shape: (C, H, W), classes: int) -> torch.nn.Module`;
a converter is `(raw: Path | None, out: Path, options: PrepareOptions) -> None`
and writes the prepared layout (scaledl.data.hdf5.write_dataset) with the
dataset's NAME as its `dataset` attribute. A dataset without a converter is
a file in that layout put at data/hdf5/NAME.h5 by hand.

A module is imported where it is used (every rank of a training job, the
prepare job) as Python finds modules: the folder the command runs in (the
workflow's jobs run where snakemake runs), the folders on PYTHONPATH, the
installed packages. The workflow imports none while it parses (its jobs'
torch and MPI would come with them): it checks each name and that each
module can be found (`findable`).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

from scaledl.errors import UserError

GROUPS = {"models": "scaledl.models", "datasets": "scaledl.datasets"}  # entry-point group of each kind
IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
TARGET = rf"{IDENTIFIER}(\.{IDENTIFIER})*:{IDENTIFIER}"  # module:function, as the workflow schema writes it
NAME = r"[A-Za-z][A-Za-z0-9_.-]*"  # a plug-in's name: a folder of the results, a wildcard value


def installed(kind: str) -> dict[str, str]:
    """{name: module:function} of the installed packages' entry points of `kind` (models or datasets); none
    is imported."""
    return {ep.name: ep.value for ep in entry_points(group=GROUPS[kind])}


def split_target(target: str, what: str) -> tuple[str, str]:
    """(module, function) of `module:function`; UserError naming `what` if it is not written so."""
    if not re.fullmatch(TARGET, target):
        raise UserError(f"{what}: {target!r} is not MODULE:FUNCTION (e.g. my_models:tiny_mlp)")
    module, _, function = target.partition(":")
    return module, function


def _search_path() -> list[str]:
    """Where modules are looked for: sys.path, and the current folder as `python -m` has it (the console
    script `scaledl` starts without it)."""
    here = os.getcwd()
    return sys.path if here in sys.path or "" in sys.path else [*sys.path, here]


def findable(target: str) -> bool:
    """Whether the top-level package of `target`'s module can be found (nothing is imported or run)."""
    top = target.partition(":")[0].split(".")[0]
    if top in sys.modules:
        return True
    return importlib.machinery.PathFinder.find_spec(top, _search_path()) is not None or (
        importlib.util.find_spec(top) is not None
    )


def load(target: str, what: str) -> Callable:
    """The function `module:function`, its module imported; UserError of one line (what is wrong, with
    `what` it was for) if the module cannot be imported or has no such function."""
    module_name, function = split_target(target, what)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # as `python -m` would have it, after every other folder
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name) and module_name[len(error.name) :][:1] in ("", "."):
            raise UserError(
                f"{what}: no module {module_name!r} in {os.getcwd()}, on PYTHONPATH or installed "
                "(put it in the folder the command runs in, add its folder to PYTHONPATH, or install it)"
            ) from None
        raise UserError(f"{what}: importing {module_name} failed: {error}") from None
    except Exception as error:  # the user's module raised while importing: one line saying so and where
        where = f" ({error.filename}:{error.lineno})" if isinstance(error, SyntaxError) else ""
        raise UserError(f"{what}: importing {module_name} failed: {type(error).__name__}: {error}{where}") from None
    found = getattr(module, function, None)
    if found is None:
        raise UserError(f"{what}: module {module_name} ({module.__file__}) has no {function!r}")
    if not callable(found):
        raise UserError(f"{what}: {target} is a {type(found).__name__}, not a function")
    return found
