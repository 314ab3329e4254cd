"""Message kinds of the two-sided patterns."""

from enum import IntEnum


class Tag(IntEnum):
    WEIGHTS = 1  # a flat weight buffer (W to a worker, W^i to the master)
    STOP = 2  # the master ends the run
    PAUSE = 3  # the master asks for a checkpoint between turns
    EVALUATE = 4  # the master asks every worker to pause while it evaluates the center
    NEIGHBOUR = 5  # a worker's W^i to a neighbour on the averaging engine's graph (no master)
