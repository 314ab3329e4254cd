"""What a simulated platform predicts for an anchor: the same quantity, priced by the simulator's own code.

step       the roofline price (scaledl.sim.roofline) of the training loop's forward and backward
           (scaledl.sim.calibrate.loop_step: the loop's normaliser, layout and forward_backward) on the
           anchor's host, time-only: SkipMode gives every output its shape, so a VGG16 step at batch 32
           costs this machine a second, not minutes
flop_rate  that step's counted FLOPs over its priced seconds
p2p        `scaledl netbench`'s ping-pong (scaledl.net.measure.pingpong) between ranks 0 and 1 on the
           platform (each rank an actor on its own host), one way: the platform's links, routes and
           latencies as a simulated run sees them
"""

from __future__ import annotations

from scaledl.comm.transport import MPI
from scaledl.errors import UserError
from scaledl.net.ladder import DEFAULT_ITERS, DEFAULT_WARMUP
from scaledl.net.measure import pingpong
from scaledl.sim.calibrate import loop_step
from scaledl.validate.anchors import Anchor


def step_price(anchor: Anchor) -> tuple[float, float]:
    """(seconds, counted FLOPs) of one forward and backward of the anchor's model and batch on its host."""
    # lazy: torch and the simulator's cost model, which --help needs none of
    from scaledl.sim.platform import load
    from scaledl.sim.roofline import OpCounter, SkipMode

    platform = load(anchor.platform)
    if anchor.host not in platform.hosts:
        raise UserError(f"anchor {anchor.id}: platform {platform.name} has no host {anchor.host!r}")
    step = loop_step(anchor.model, anchor.batch, anchor.image, anchor.classes)
    counter = OpCounter(platform.hosts[anchor.host].device())
    with SkipMode(), counter:
        step()
    return counter.seconds, counter.flops


def p2p_times(platform_name: str, sizes: list[int], seed: int = 0) -> dict[int, float]:
    """One-way seconds per message size between ranks 0 and 1 of a 2-rank simulated job (netbench's ping-pong,
    median of 3 repeats)."""
    # lazy: the simulator (SimGrid, torch), which --help needs none of
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    platform = load(platform_name)
    results = []

    def main() -> None:
        rows = pingpong(MPI.COMM_WORLD, 0, 1, sizes, DEFAULT_ITERS, DEFAULT_WARMUP, repeats=3)
        if rows is not None:
            results.append(rows)

    outcome = Simulation(platform, 2, dedicated_master=False, seed=seed).run(main)
    if outcome.status != 0 or not results:
        raise UserError(f"the simulated ping-pong on {platform.name} failed: {outcome.error or outcome.crashed}")
    return {row["bytes"]: row["time_s"] for row in results[0]}


def predict(anchors: list[Anchor]) -> dict[str, float]:
    """Each anchor's simulated value (by id), in its published unit; one netbench per platform for its p2p rows."""
    values = {}
    for anchor in anchors:
        if anchor.kind in ("step", "flop_rate"):
            seconds, flops = step_price(anchor)
            values[anchor.id] = seconds if anchor.kind == "step" else flops / seconds
    by_platform: dict[str, list[Anchor]] = {}
    for anchor in anchors:
        if anchor.kind == "p2p":
            by_platform.setdefault(anchor.platform, []).append(anchor)
    for platform_name, rows in by_platform.items():
        times = p2p_times(platform_name, sorted({a.nbytes for a in rows}))
        values.update({a.id: times[a.nbytes] for a in rows})
    return values
