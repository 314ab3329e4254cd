"""A side of a comparison, as claims.yaml and the figures write it.

"a|b" is the first of the algorithms a, b that has runs in the setting (the
paper's Sync EASGD is "sync_easgd3|sync_easgd": the overlapped variant where
it ran). A claim's side may also be {algorithm: "a|b", workers: N, largest or
smallest}, which picks one worker count of that algorithm's runs.
"""

from __future__ import annotations

from collections.abc import Iterable


def side_spec(spec) -> tuple[list[str], object]:
    """(algorithm alternatives, worker selector or None) of a side written as "a|b" or {algorithm:, workers:}."""
    if isinstance(spec, dict):
        return str(spec["algorithm"]).split("|"), spec.get("workers")
    return str(spec).split("|"), None


def first_present(spec, present: Iterable[str]) -> str | None:
    """The first alternative of the side `spec` among the algorithms `present`; None if none is."""
    present = set(present)
    return next((algorithm for algorithm in side_spec(spec)[0] if algorithm in present), None)


def side_name(spec) -> str:
    """A side as a claim's reason names it: "sync_easgd3 (or sync_easgd)", "chip_partition at P=1"."""
    alternatives, workers = side_spec(spec)
    name = alternatives[0] + (f" (or {', '.join(alternatives[1:])})" if len(alternatives) > 1 else "")
    return name + (f" at P={workers}" if workers is not None else "")


def side_names(specs) -> str:
    """Sides as a figure's note lists them: "(sync_easgd3 or sync_easgd), easgd"."""
    names = [" or ".join(side_spec(spec)[0]) for spec in specs]
    return ", ".join(f"({name})" if " or " in name else name for name in names)
