"""The message sizes and repetitions of `scaledl netbench`, and a bound on how long they take.

Pure arithmetic (no MPI, no numpy): scaledl.net.measure runs this ladder, and
the workflow (scaledl.grid.jobs, while Snakemake parses) sizes the netbench
job's time limit from the same numbers.
"""

from __future__ import annotations

import math
import re

from scaledl.errors import UserError

DEFAULT_MAX_SIZE = 64 << 20
DEFAULT_MIN_SIZE = 8
DEFAULT_ITERS = 50  # timed operations per repeat, small messages
DEFAULT_WARMUP = 5  # untimed operations per size
DEFAULT_REPEATS = 5
ITER_BYTES = 256 << 20  # bytes per repeat at most, for large messages
PINGPONG_PAIRS = 2  # ranks 0-1, and 0 with the first rank on another node
COLLECTIVES = 3  # Allreduce, Reduce, Bcast

# A deliberately slow network for the bound: slower than any cluster interconnect (1 GbE moves 125 MB/s).
SLOW_BANDWIDTH_BPS = 100e6
SLOW_LATENCY_S = 100e-6
STARTUP_S = 120.0  # launching the ranks, imports, γ, writing the file

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "KIB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "MIB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "GIB": 1 << 30,
}


def parse_size(text: str) -> int:
    """'8', '4K', '64MiB' → bytes (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise UserError(
            f"cannot read message size {text!r}: use bytes with an optional K, M or G suffix, e.g. 8, 4K, 64M"
        )
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def default_sizes(max_size: int = DEFAULT_MAX_SIZE, min_size: int = DEFAULT_MIN_SIZE) -> list[int]:
    """min_size, ×4, ×4, … below max_size, then max_size itself."""
    sizes, s = [], min_size
    while s < max_size:
        sizes.append(s)
        s *= 4
    return sizes + [max_size]


def iters_for(size: int, iters: int) -> int:
    """Timed operations per repeat at `size`: at most ITER_BYTES moved, at least 2."""
    return max(2, min(iters, ITER_BYTES // max(size, 1)))


def bound_seconds(
    sizes: list[int],
    ranks: int,
    *,
    iters: int = DEFAULT_ITERS,
    warmup: int = DEFAULT_WARMUP,
    repeats: int = DEFAULT_REPEATS,
) -> float:
    """An upper bound on a netbench run's seconds: every operation it makes (both ping-pong pairs and the
    three collectives, at every size, warm-up included) over SLOW_BANDWIDTH_BPS and SLOW_LATENCY_S, a
    collective as a ring's 2(P − 1) latencies and twice its message, plus STARTUP_S."""
    total = STARTUP_S
    for size in sizes:
        operations = warmup + repeats * iters_for(size, iters)
        round_trip = 2 * (SLOW_LATENCY_S + size / SLOW_BANDWIDTH_BPS)
        collective = 2 * (max(ranks, 2) - 1) * SLOW_LATENCY_S + 2 * size / SLOW_BANDWIDTH_BPS
        total += operations * (PINGPONG_PAIRS * round_trip + COLLECTIVES * collective)
    return total


def bound_minutes(max_size: str, repeats: int, ranks: int) -> int:
    """bound_seconds of the default ladder up to `max_size` (a netbench --max-size), in whole minutes."""
    return math.ceil(bound_seconds(default_sizes(parse_size(max_size)), ranks, repeats=repeats) / 60)
