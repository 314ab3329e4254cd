"""What a simulated platform predicts for a row: the same quantity, priced by the simulator's own code.

    step       the roofline price (scaledl.sim.roofline) of the training loop's forward and backward
               (scaledl.sim.calibrate.loop_step: the loop's normaliser, layout and forward_backward) on a
               host's device, time-only: SkipMode gives every output its shape, so a VGG16 step at batch 32
               costs this machine a second, not minutes
    flop_rate  that step's counted FLOPs over its priced seconds
    p2p        `scaledl netbench`'s ping-pong (scaledl.net.pingpong) between ranks 0 and 1 on the
               platform (each rank an actor on its own host, or both on a one-host platform), one way: the
               platform's links, routes and latencies as a simulated run sees them
    collectives `scaledl netbench` itself on the platform: its Allreduce, Reduce and Bcast tables

SimGrid runs one simulation per process: a process prices the messages of one platform.
"""

from __future__ import annotations

import dataclasses

from scaledl.comm.transport import MPI
from scaledl.errors import UserError
from scaledl.net.ladder import DEFAULT_ITERS, DEFAULT_WARMUP
from scaledl.net.measure import netbench
from scaledl.net.pingpong import pingpong
from scaledl.sim.calibrate import loop_step
from scaledl.validate.anchors import Anchor


def price_step(
    platform: str, host: str, model: str, batch: int, image, classes: int, efficiency: float | None = None
) -> tuple[float, float]:
    """(seconds, counted FLOPs) of one forward and backward of `model` at `batch` on a platform's host (at
    `efficiency` instead of the host's own where given: scaledl.validate.fit_half)."""
    # lazy: torch and the simulator's cost model, which --help needs none of
    from scaledl.sim.platform import load
    from scaledl.sim.roofline import OpCounter, SkipMode

    loaded = load(platform)
    if host not in loaded.hosts:
        raise UserError(f"platform {loaded.name} has no host {host!r}")
    step = loop_step(model, batch, tuple(image), classes)
    device = loaded.hosts[host].device()
    if efficiency is not None:
        device = dataclasses.replace(device, efficiency=efficiency)
    counter = OpCounter(device)
    with SkipMode(), counter:
        step()
    return counter.seconds, counter.flops


def step_price(anchor: Anchor, efficiency: float | None = None) -> tuple[float, float]:
    """(seconds, counted FLOPs) of one forward and backward of the anchor's model and batch on its host."""
    return price_step(
        anchor.platform, anchor.host, anchor.model, anchor.batch, anchor.image, anchor.classes, efficiency
    )


def host_efficiency(platform: str, host: str) -> float:
    """The efficiency a platform file gives a host's device."""
    # lazy: the platform's reader (torch), which --help needs none of
    from scaledl.sim.platform import load

    return load(platform).hosts[host].device().efficiency


def _simulate(platform: str, body) -> object:
    """`body()`'s result on rank 0 of a 2-rank simulated job on `platform` (no dedicated master)."""
    # lazy: the simulator (SimGrid, torch), which --help needs none of
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    loaded = load(platform)
    results = []

    def main() -> None:
        result = body()
        if result is not None:
            results.append(result)

    outcome = Simulation(loaded, 2, dedicated_master=False).run(main)
    if outcome.status != 0 or not results:
        raise UserError(f"the simulated measurement on {loaded.name} failed: {outcome.error or outcome.crashed}")
    return results[0]


def p2p_times(platform: str, sizes: list[int]) -> dict[int, float]:
    """One-way seconds per message size between ranks 0 and 1 (netbench's ping-pong, median of 3 repeats)."""
    rows = _simulate(platform, lambda: pingpong(MPI.COMM_WORLD, 0, 1, sizes, DEFAULT_ITERS, DEFAULT_WARMUP, 3))
    return {row["bytes"]: row["time_s"] for row in rows}


def simulated_netbench(platform: str, sizes: list[int], repeats: int = 3) -> dict:
    """`scaledl netbench`'s result (p2p and collectives) for a 2-rank job on `platform`."""
    return _simulate(platform, lambda: netbench(MPI.COMM_WORLD, sizes, repeats=repeats))


def predict(anchors: list[Anchor], efficiencies: dict | None = None) -> dict[str, float]:
    """Each anchor's simulated value (by id), in its published unit; one ping-pong job for the p2p rows.
    `efficiencies`: (platform, host) → the efficiency to price that host's compute at (a fitted one)."""
    values = {}
    for anchor in anchors:
        if anchor.kind in ("step", "flop_rate"):
            seconds, flops = step_price(anchor, (efficiencies or {}).get((anchor.platform, anchor.host)))
            values[anchor.id] = seconds if anchor.kind == "step" else flops / seconds
    messages = [a for a in anchors if a.kind == "p2p"]
    platforms = sorted({a.platform for a in messages})
    if len(platforms) > 1:
        raise UserError(f"the ping-pong rows of one run price one platform; pick one with --platform ({platforms})")
    if messages:
        times = p2p_times(platforms[0], sorted({a.nbytes for a in messages}))
        values.update({a.id: times[a.nbytes] for a in messages})
    return values
