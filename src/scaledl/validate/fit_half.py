"""`scaledl validate --suite published --fit-half`: a device efficiency fitted to half the published step times,
judged on the other half.

The shipped platforms' GPU and KNL efficiencies are assumptions, and every published row tests them held out.
Fitting one to published numbers is only honest if the rows it was fitted to are then left out of the score, so:

- the step anchors of each platform and host are grouped into configurations (an anchor and its `same_as` are
  one configuration: the same network and batch measured twice); the FLOP-rate rows are left held out (a
  node's rate on other networks is a plausibility check, not a number to fit to);
- in the file's order, the first, third, ... configuration is the fit half, the second, fourth, ... the held-out
  half (declared here, before any number is seen; a platform with one configuration is left as it is);
- the efficiency is scaled until the fit half's simulated ÷ published has a geometric mean of 1 (the price of a
  compute-bound step is inversely proportional to it, so a few multiplicative corrections converge; the rows'
  memory-bound parts make it not exactly so);
- every row of that host is then priced with the fitted efficiency: the fit half marked `fit` (outside the
  score), the rest `held_out`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from scaledl.validate.anchors import Anchor

ROUNDS = 8  # multiplicative corrections at most
CONVERGED = 0.002  # |geomean − 1| below this: done


@dataclasses.dataclass(frozen=True)
class Fitted:
    platform: str
    host: str
    efficiency: float  # the platform file's
    fitted: float
    fit_ids: tuple[str, ...]
    held_ids: tuple[str, ...]

    def line(self) -> str:
        return (
            f"{self.platform}/{self.host}: efficiency {self.efficiency:.3g} → {self.fitted:.3g}, fitted on "
            f"{', '.join(self.fit_ids)}; held out: {', '.join(self.held_ids) or 'none'}"
        )


def configurations(anchors: list[Anchor]) -> list[list[Anchor]]:
    """The anchors grouped by configuration (an anchor with its `same_as`), in the order the first of each
    appears."""
    root = {a.id: a.same_as or a.id for a in anchors}
    groups: dict[str, list[Anchor]] = {}
    for a in anchors:
        key = root[a.id]
        while root.get(key, key) != key:  # a chain of same_as: its first
            key = root[key]
        groups.setdefault(key, []).append(a)
    return list(groups.values())


def halves(anchors: list[Anchor]) -> tuple[list[list[Anchor]], list[list[Anchor]]]:
    """(fit, held out) configurations: alternate ones, the first one fitted."""
    groups = configurations(anchors)
    return groups[0::2], groups[1::2]


def fit_efficiency(fit: list[list[Anchor]], efficiency: float, price: Callable[[Anchor, float], float]) -> float:
    """The efficiency at which the fit configurations' simulated ÷ published seconds have a geometric mean of 1
    (each configuration once: the mean log ratio of its anchors); `price(anchor, efficiency)` is the seconds of
    its step (which fall as the efficiency rises)."""

    def log_ratio(group: list[Anchor], e: float) -> float:
        return sum(math.log(price(a, e) / a.published) for a in group) / len(group)

    e = efficiency
    for _ in range(ROUNDS):
        g = math.exp(sum(log_ratio(group, e) for group in fit) / len(fit))  # > 1: the device is too slow
        if abs(g - 1.0) < CONVERGED:
            break
        e *= g
    return e


def fit_half(anchors: list[Anchor], efficiency_of, price) -> tuple[list[Anchor], dict, list[Fitted]]:
    """Every anchor (the steps of a host with two configurations or more re-marked `fit` or `held_out`), the
    efficiency each (platform, host) is fitted to, and what was fitted. `efficiency_of(platform, host)` reads
    the platform file's; `price(anchor, efficiency)` is a step's seconds."""
    by_host: dict[tuple[str, str], list[Anchor]] = {}
    for a in anchors:
        if a.kind == "step":
            by_host.setdefault((a.platform, a.host), []).append(a)
    roles, efficiencies, fitted = {}, {}, []
    for (platform, host), members in by_host.items():
        fit, held = halves(members)
        if not held:
            continue  # one configuration: nothing to hold out
        base = efficiency_of(platform, host)
        e = fit_efficiency(fit, base, price)
        efficiencies[(platform, host)] = e
        fit_ids, held_ids = (tuple(a.id for g in groups for a in g) for groups in (fit, held))
        roles.update({i: "fit" for i in fit_ids} | {i: "held_out" for i in held_ids})
        fitted.append(Fitted(platform, host, base, e, fit_ids, held_ids))
    marked = [dataclasses.replace(a, role=roles[a.id]) if a.id in roles else a for a in anchors]
    return marked, efficiencies, fitted
