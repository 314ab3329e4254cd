"""Timing noise on a simulated rank's executions, with the structure real machines have.

Without it every rank of a homogeneous platform computes in lockstep: the
workers of a lock-free window read the center at the same simulated instant
every round, and asynchrony never happens. With it, each execution a rank
charges (its meter's phases and a collective's arithmetic:
scaledl.sim.roofline.Meter) takes longer by three effects, each a host's
property in its platform file (scaledl.sim.platform):

    noise_node_cv      spatial: the host is slower or faster than its nominal speed by a factor drawn once per
                       run (a lognormal of mean 1 and this coefficient of variation): chips of one model differ
                       (clocks, thermals, memory), and a synchronous step waits for the slowest of them
    noise_cv           per execution: a small lognormal stretch of mean 1 (a kernel's or a core's jitter)
    noise_detour_rate  temporal: the operating system takes the core away now and then, at random instants of
    noise_detour       absolute time: detours arrive at this rate per second of execution (a Poisson
                       process) and each adds this many seconds, however long the execution they land in:
                       a short execution is rarely hit, a long one often, and none is stretched in proportion

The draws come from one stream per rank, seeded by the run's seed and the
rank, in the order the rank charges (SimGrid schedules deterministically, so
that order is fixed), and a host's speed factor from the seed and the host's
name (the ranks on one host share it): one seed is one repeatable schedule,
another seed is another. A host without noise draws nothing and charges the
price as it is.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scaledl.errors import UserError


def _stream(*key) -> np.random.Generator:
    """A random stream named by `key` (the same on every machine and Python: not `hash`)."""
    digest = hashlib.sha256(":".join(map(str, key)).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _lognormal_of_mean_one(stream: np.random.Generator, cv: float) -> float:
    sigma = math.sqrt(math.log1p(cv**2))
    return float(stream.lognormal(-sigma * sigma / 2, sigma))


@dataclass(frozen=True)
class Noise:
    cv: float = 0.0  # per execution
    node_cv: float = 0.0  # per host, drawn once a run
    detour_rate: float = 0.0  # detours per second of execution
    detour_s: float = 0.0  # seconds each detour adds

    def __post_init__(self):
        if min(self.cv, self.node_cv, self.detour_rate, self.detour_s) < 0:
            raise UserError(
                f"timing noise cv {self.cv}, node cv {self.node_cv}, detour rate {self.detour_rate}/s, detour "
                f"{self.detour_s} s: each must be ≥ 0"
            )

    @property
    def detours(self) -> bool:
        return self.detour_rate > 0 and self.detour_s > 0

    @property
    def quiet(self) -> bool:
        return self.cv == 0 and self.node_cv == 0 and not self.detours

    def scaled(self, factor: float) -> Noise:
        """This noise `factor`× as strong: its two spreads and its detours' rate."""
        return Noise(self.cv * factor, self.node_cv * factor, self.detour_rate * factor, self.detour_s)

    def node_factor(self, seed: int, host: str) -> float:
        """The host's speed factor for this run (1.0 without spatial noise): a time multiplier, ≥ 1 is slower."""
        return _lognormal_of_mean_one(_stream("scaledl-node", seed, host), self.node_cv) if self.node_cv else 1.0

    def timer(self, seed: int, rank: int, host: str) -> Callable[[float], float]:
        """The rank's clock for its executions: nominal seconds in, noisy seconds out (the same for quiet
        noise)."""
        if self.quiet:
            return lambda seconds: seconds
        stream = _stream("scaledl-noise", seed, rank)
        node = self.node_factor(seed, host)

        def noisy(seconds: float) -> float:
            seconds *= node * (_lognormal_of_mean_one(stream, self.cv) if self.cv else 1.0)
            if self.detours:
                seconds += int(stream.poisson(self.detour_rate * seconds)) * self.detour_s
            return seconds

        return noisy

    def describe(self) -> dict:
        return {"cv": self.cv, "node_cv": self.node_cv, "detour_rate": self.detour_rate, "detour_s": self.detour_s}
