"""A configuration's identity: the settings its runs ran with, so that no report pools two of them as seeds.

A run's *settings* are the values its algorithm used, as run.json records them
(`hyper` and, for the averaging engine, `averaging`: scaledl.algorithms.settings)
less what follows from the others (α = ηρ always; ρ where β gave it, since
ρ = β/(ηP) then changes with P alone), and any other setting its grid point varied
(`arguments.sweep`: max_steps, say). Two runs are seeds of one configuration only
when their run keys less the seed and their settings agree, whether a setting was
swept or not: every table, figure, claim and comparison groups by them, and the
summary carries them as columns (the run's `setting` column names a sweep's point).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

# run.json's `hyper` then `averaging` keys (scaledl.algorithms.settings.HYPER, AVERAGING, kept equal by a test),
# in the order the columns print; spelt out so that the report never imports the algorithms (torch).
HYPER = (
    "lr", "batch_size", "weight_decay", "rho", "alpha", "beta", "momentum", "nesterov", "momentum_at", "age_weight",
    "tau",
)  # fmt: skip
AVERAGING = (
    "inner", "worker_rule", "outer", "outer_lr", "outer_momentum", "outer_delay", "graph", "tau", "compress", "quorum",
)  # fmt: skip
DERIVED = ("alpha",)  # α = ηρ
# A setting at its neutral value is the method as it was before the setting existed: not part of the identity,
# so a run recorded with it and one recorded before it are seeds of one configuration.
NEUTRAL = {"age_weight": "none", "outer_delay": 0, "graph": "complete"}
NAMES = tuple(name for name in dict.fromkeys([*HYPER, *AVERAGING]) if name not in DERIVED)

Item = TypeVar("Item")


def settings_of(record: Mapping) -> dict[str, Any]:
    """A run.json's settings (the module docstring), in NAMES order, then the other swept ones."""
    given = {**(record.get("hyper") or {}), **(record.get("averaging") or {})}
    if given.get("beta") is not None:
        given.pop("rho", None)  # ρ = β/(ηP): set by β and P
    found = {name: given[name] for name in NAMES if given.get(name) not in (None, NEUTRAL.get(name))}
    arguments = record.get("arguments") or {}
    for name in (arguments.get("sweep") or "").split(","):
        if name and name not in found and name not in DERIVED and name != "rho":
            found[name] = arguments.get(name)
    return found


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def value_text(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def settings_text(settings: Mapping, names: Iterable[str] | None = None) -> str:
    """ "lr=0.05, beta=0.9": the settings named (default: all) that have a value."""
    names = list(settings) if names is None else list(names)
    return ", ".join(f"{name}={value_text(settings[name])}" for name in names if not missing(settings.get(name)))


def frozen(settings: Mapping) -> tuple:
    """The settings as a hashable key (missing values dropped, so NaN and absent agree)."""
    return tuple(sorted((name, value_text(value)) for name, value in settings.items() if not missing(value)))


def differing(settings: Iterable[Mapping]) -> list[str]:
    """The names whose values differ between the settings given (a missing value counts as one), NAMES first."""
    settings = [dict(frozen(s)) for s in settings]
    names = list(dict.fromkeys(name for s in settings for name in s))
    found = [name for name in names if len({s.get(name) for s in settings}) > 1]
    return sorted(found, key=lambda name: (NAMES.index(name) if name in NAMES else len(NAMES), name))


def configurations(items: Iterable[Item], settings: Callable[[Item], Mapping]) -> list[tuple[str, list[Item]]]:
    """The items split by their settings: (what tells this configuration from the others, "" if it is the only
    one; its items), in a stable order."""
    groups: dict[tuple, tuple[Mapping, list[Item]]] = {}
    for item in items:
        found = settings(item)
        groups.setdefault(frozen(found), (found, []))[1].append(item)
    names = differing(found for found, _ in groups.values())
    return [(settings_text(found, names), members) for _, (found, members) in sorted(groups.items())]
