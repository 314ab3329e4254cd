"""What a simulation will cost this machine, said before it starts; one that cannot fit in memory is refused.

Every rank of a simulation lives in this one process. A full simulation holds each rank's model, gradients
and message buffers: about FULL_REPLICAS copies of the weights a rank (GoogLeNet, 26.5 MB of weights: about
195 MB a rank, the slope between full runs of 8 and 16 ranks, one step, 5.5 and 7.0 GB peak at commit df01747).
It leaves out the one rank's forward and backward that runs at a time, which depends on the model and the batch
(GoogLeNet at batch 64: the fit's intercept, 2.7 GB above the base): 64 full GoogLeNet ranks, estimated at
13.6 GB, took 17.6 GB (bench/raw/thousand.json, 2 steps). A time-only one shares one replica of every large buffer
(scaledl.sim.replicas), so its memory barely grows with the ranks, and its wall time is each rank's Python
work per step plus the messages SimGrid moves.

The constants are this project's 2-core development machine's, fitted (least squares) at commit 2076aba on
time-only GoogLeNet runs on cori_knl: bench/bench_thousand.py's (5 steps; 1 to 256 nodes, three seeds, both Sync
EASGD and Sync EASGD3) and bench/bench_paper_scale.py's weak sweep up to 16 nodes (100 steps, five seeds), and
checked on runs they were not fitted on: 1,024 nodes for 5 steps, 478 s estimated against 411 s measured (+16 %),
and the sweep's 32- and 64-node runs of 100 steps, 33 and 60 s estimated against 24-57 and 44-80 s measured
(seeds and algorithms: the machine's own spread is that wide). The wall time grows with P²: SimGrid shares the
network among P flows at every event of a collective, and a long broadcast's ring moves P(P − 1) messages. On
another machine, or for a model far from GoogLeNet, the wall time is an order of magnitude at best; the refusal
rests on the memory, and on the machine's own available memory. A full simulation's estimate counts the ranks'
replicas, not one rank's forward and backward on top of them (GoogLeNet at batch 64: several GB, reused rank after
rank since the process keeps one malloc arena with a fixed mmap threshold: scaledl.sim.run.one_malloc_arena; with
an arena per rank's thread, full runs of 16 and 64 ranks outgrew 22 GB).
"""

from __future__ import annotations

from dataclasses import dataclass

FULL_REPLICAS = 7.34  # weights' bytes a rank holds in a full simulation, in copies (GoogLeNet: 194.5 MB for 26.5)
BASE_BYTES = 1.19e9  # the process before any rank: Python, torch, SimGrid, the data's labels
RANK_BYTES = 1.5e6  # a time-only rank: its actor, modules, inboxes (the fit's slope: 1.51 MB)
SHARED_COPIES = 5  # a time-only job's shared replicas of the weights: weights, gradients, centre, buffers
# Wall seconds of a time-only run: the process's start (the interpreter, torch, the data's index), per rank its
# setup (a copy of the initial model, its loader) and per rank and step its work (the step's price paid, its
# messages), both fitted on GoogLeNet's 173 parameter tensors and scaled by a model's own count (its operations
# go with its layers), and per pair of ranks (the network's sharing among P flows, the broadcast's ring).
START_S = 6.8
SETUP_S_PER_TENSOR = 7.47e-4
STEP_S_PER_TENSOR = 3.95e-5
PAIR_S = 2.9e-4


@dataclass(frozen=True)
class Footprint:
    ranks: int
    steps: int | None  # None: a budget in epochs or seconds, not steps
    time_only: bool
    memory_bytes: float
    wall_s: float | None  # None: not estimated (a full simulation's numerics decide it, or no step budget)

    def line(self) -> str:
        if self.wall_s is None:
            wall = "wall time not estimated"
        else:
            wall = f"about {self.wall_s / 60:.0f} min" if self.wall_s >= 90 else f"about {max(self.wall_s, 1):.0f} s"
        kind = "time-only" if self.time_only else "full"
        steps = f" × {self.steps} steps" if self.steps else ""
        return (
            f"simulation estimate: {self.ranks} ranks{steps}, {kind}: {wall} and about "
            f"{self.memory_bytes / 1e9:.1f} GB of memory on a machine like this project's 2-core one"
        )


def estimate(ranks: int, steps: int | None, weight_bytes: int, tensors: int, time_only: bool) -> Footprint:
    """The memory and (time-only) wall time of a simulation of `ranks` ranks and `steps` steps, for a model of
    `weight_bytes` bytes of weights in `tensors` parameter tensors."""
    if time_only:
        memory = BASE_BYTES + ranks * RANK_BYTES + SHARED_COPIES * weight_bytes
        per_rank = tensors * (SETUP_S_PER_TENSOR + STEP_S_PER_TENSOR * steps) if steps else None
        wall = START_S + ranks * per_rank + PAIR_S * ranks * ranks if steps else None
        return Footprint(ranks, steps, True, memory, wall)
    return Footprint(ranks, steps, False, BASE_BYTES + ranks * FULL_REPLICAS * weight_bytes, None)


def available_bytes() -> float | None:
    """The memory this machine can still give (MemAvailable), or None where /proc/meminfo says nothing."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def refusal(footprint: Footprint, available: float | None) -> str | None:
    """One line when the simulation would need more memory than the machine has left, else None."""
    if available is None or footprint.memory_bytes <= available:
        return None
    advice = (
        "use fewer ranks" if footprint.time_only else "run it --time-only (ranks share one replica) or with fewer ranks"
    )
    return (
        f"this simulation would need about {footprint.memory_bytes / 1e9:.1f} GB of memory and this machine has "
        f"{available / 1e9:.1f} GB available: {advice}"
    )
