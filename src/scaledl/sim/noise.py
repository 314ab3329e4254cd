"""Timing noise on a simulated rank's executions, so that identical simulated devices drift apart as real ones do.

Without it every rank of a homogeneous platform computes in lockstep: the
workers of a lock-free window read the center at the same simulated instant
every round, and asynchrony never happens. Each execution a rank charges (its
meter's phases and a collective's arithmetic: scaledl.sim.roofline.Meter) is
stretched by a factor drawn from its host's noise, which a platform file
states per host (scaledl.sim.platform):

    noise_cv          coefficient of variation of a lognormal factor of mean 1 (0: none)
    noise_spike_rate  the probability that one execution is hit by an operating-system spike
    noise_spike       the spike's extra length, a fraction of the execution (1: it takes twice as long)

The draws come from one stream per rank, seeded by the run's seed and the
rank, in the order the rank charges (SimGrid schedules deterministically, so
that order is fixed): one seed is one repeatable schedule, another seed is
another. A host without noise draws nothing and charges the price as it is.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from scaledl.errors import UserError


@dataclass(frozen=True)
class Noise:
    cv: float = 0.0
    spike_rate: float = 0.0
    spike: float = 0.0

    def __post_init__(self):
        if self.cv < 0 or self.spike < 0 or not 0 <= self.spike_rate <= 1:
            raise UserError(
                f"timing noise cv {self.cv}, spike rate {self.spike_rate}, spike {self.spike}: the cv and the "
                "spike must be ≥ 0 and the rate between 0 and 1"
            )

    @property
    def quiet(self) -> bool:
        return self.cv == 0 and (self.spike_rate == 0 or self.spike == 0)

    def scaled(self, factor: float) -> Noise:
        """This noise `factor`× as strong: its cv and its spikes' rate (at most 1)."""
        return Noise(self.cv * factor, min(1.0, self.spike_rate * factor), self.spike)

    def factors(self, seed: int, rank: int) -> Callable[[], float]:
        """The rank's stream of stretch factors (mean 1 without spikes); always 1.0 for quiet noise."""
        if self.quiet:
            return lambda: 1.0
        stream = random.Random(f"scaledl-noise:{seed}:{rank}")
        sigma = math.sqrt(math.log1p(self.cv**2))
        mu = -sigma * sigma / 2  # a lognormal of mean 1

        def draw() -> float:
            factor = stream.lognormvariate(mu, sigma) if self.cv else 1.0
            if self.spike_rate and stream.random() < self.spike_rate:
                factor *= 1.0 + self.spike
            return factor

        return draw

    def describe(self) -> dict:
        return {"cv": self.cv, "spike_rate": self.spike_rate, "spike": self.spike}
