"""`scaledl simulate`: a training run on a simulated cluster, with real numerics and simulated time.

    scaledl simulate --platform-file k80x8 --ranks 9 --data ... --model lenet --algorithm easgd \\
        --out-dir ... [train options]

The same run as `mpiexec -n RANKS python -m mpi4py -m scaledl train ...`, every
rank a SimGrid actor on a host of the platform (scaledl.sim), all in this
one process: the algorithms, the patterns and the training loop are the same
code, over the simulated transport. Every time in its outputs is simulated
seconds on the platform; run.json's `transport` says so and names the platform.
SimGrid is an optional dependency (scaledl.sim.loader says how to get it).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import fields

from scaledl.algorithms import ALGORITHMS
from scaledl.config import TrainConfig
from scaledl.errors import UserError
from scaledl.models import build_model
from scaledl.sim.allocator import keep_freed_memory
from scaledl.sim.cluster import CLOCKS
from scaledl.sim.footprint import available_bytes, estimate, refusal
from scaledl.sim.provenance import refuse_stale_calibration
from scaledl.train.command import add_arguments as add_train_arguments
from scaledl.train.tuned import with_tuned

HELP = "simulate a training run on a SimGrid platform: every rank an actor, real numerics, simulated time"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("simulation")
    group.add_argument(
        "--platform-file",
        required=True,
        metavar="PLATFORM",
        help="a shipped platform (laptop, k80x8, cori_knl) or a SimGrid platform file (its name, the file's "
        "without .xml, is the platform run.json records unless --platform names another)",
    )
    group.add_argument("--ranks", type=int, required=True, help="ranks of the job (what mpiexec -n would start)")
    group.add_argument(
        "--fail",
        action="append",
        default=[],
        metavar="HOST:TIME",
        help="turn HOST off at simulated TIME seconds (repeatable): its ranks die, as a node failure",
    )
    group.add_argument(
        "--host-speed",
        action="append",
        default=[],
        metavar="HOST:FACTOR",
        help="scale HOST's speed by FACTOR (0.5: twice as slow; repeatable): a straggling node",
    )
    group.add_argument(
        "--clock",
        default="simgrid",
        choices=CLOCKS,
        help="how a message's time is found: SimGrid's network model, links shared by the transfers crossing "
        "them (default), or alphabeta, the closed form α + n/B of its route, sharing nothing (the clock swap)",
    )
    add_train_arguments(parser)
    # run.json's `platform`: the simulated platform unless --platform is given (the workflow gives the config's
    # platform name), never TrainConfig's default, the real machine's "local"
    for action in parser._actions:
        if action.dest == "platform":
            action.default = None
            action.help = "name of the platform, recorded in run.json (default: the --platform-file's name)"


def pairs(items: list[str], flag: str, what: str) -> dict[str, float]:
    """{HOST: number} from HOST:NUMBER items; UserError in one line."""
    parsed = {}
    for item in items:
        host, _, value = item.rpartition(":")
        try:
            number = float(value)
        except ValueError:
            number = None
        if not host or number is None or number < 0 or (what == "factor" and number == 0):
            raise UserError(f"{flag} {item}: expected HOST:{what.upper()} with {what} a positive number")
        parsed[host] = number
    return parsed


def estimated(cfg: TrainConfig, ranks: int):
    """The simulation's footprint (scaledl.sim.footprint) from its model's weights, counted on the meta device
    (nothing allocated); None where the data or the model cannot be read yet (the run itself then says why)."""
    # lazy: the model's size needs torch, which `--help` does not
    import torch

    from scaledl.data.hdf5 import read_info  # lazy, as torch: h5py is what `--help` does not need either

    try:
        info = read_info(cfg.data)
        with torch.device("meta"):
            params = [p for p in build_model(cfg.model, info.image_shape, info.classes, cfg.model_from).parameters()]
    except (UserError, OSError, ValueError, RuntimeError):
        return None
    weight_bytes = sum(p.numel() * p.element_size() for p in params)
    return estimate(ranks, cfg.max_steps, weight_bytes, len(params), cfg.time_only)


def run(args: argparse.Namespace) -> int:
    keep_freed_memory()  # before torch allocates anything; wall time only: the simulated clock is the cost model's
    # Imported here: the simulator and the training loop import torch, which `--help` does not need.
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    # lazy, as above: the loop and its setup import torch
    from scaledl.train.loop import train
    from scaledl.train.setup import straggler_factor

    if args.ranks < 1:
        raise UserError(f"--ranks {args.ranks}: a job needs at least one rank")
    if getattr(args, "center_window", None) == "shared":
        # a shared-memory window's loads and stores are plain memory accesses the simulator cannot see or price
        raise UserError(
            "--center-window shared cannot be simulated: the shared-memory center window's loads and stores are "
            "invisible to the simulator, so its traffic would cost nothing; use rma (the default)"
        )
    if args.time_only and args.target_accuracy is not None:
        raise UserError(
            "--time-only skips the numerics after pricing them, so no accuracy can be reached: drop "
            "--target-accuracy (time-only runs give seconds per step)"
        )
    platform = load(args.platform_file)
    refuse_stale_calibration(platform.path)  # a twin calibrated by other code prices a loop that no longer runs
    if args.platform is None:
        args.platform = platform.name
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    simulation = Simulation(
        platform,
        args.ranks,
        ALGORITHMS[cfg.algorithm].needs_master,
        failures=pairs(args.fail, "--fail", "time"),
        host_speed=pairs(args.host_speed, "--host-speed", "factor"),
        # --straggler stretches a rank's compute: charged by its meter (a sleep measures nothing in simulated time)
        slowdown={rank: straggler_factor(cfg.straggler, rank, args.ranks) for rank in range(args.ranks)},
        seed=cfg.seed,
        time_only=cfg.time_only,
        clock=args.clock,
    )
    footprint = estimated(cfg, args.ranks)
    if footprint is not None:
        if (refused := refusal(footprint, available_bytes())) is not None:
            raise UserError(refused)
        print(footprint.line(), flush=True)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the simulator holds the main thread: Ctrl-C ends it at once
    outcome = simulation.run(lambda: train(with_tuned(cfg, args.ranks)))
    cost = {k: round(getattr(outcome, k), 6) for k in ("simulated_s", "wall_s", "cpu_s", "real_compute_s")}
    print(f"simulation: {json.dumps(cost)}")  # what the simulation cost this machine (bench_simulation reads it)
    if outcome.crashed:
        print(outcome.crashed, file=sys.stderr, end="")
    elif outcome.error:
        print(f"scaledl simulate: error: {outcome.error}", file=sys.stderr)
    return outcome.status
