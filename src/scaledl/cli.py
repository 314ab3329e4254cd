"""`scaledl` command line: prepare, train, aggregate, plot.

Parsing only; each subcommand hands its arguments to the module that does
the work. A UserError becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scaledl import __version__
from scaledl.algorithms import ALGORITHMS
from scaledl.errors import UserError


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    from scaledl.config import BACKENDS, MESSAGES, PLACES, TrainConfig
    from scaledl.models import MODELS

    d = TrainConfig.__dataclass_fields__
    p.add_argument("--data", type=Path, required=True, help="prepared HDF5 file (scaledl prepare)")
    p.add_argument("--model", required=True, choices=sorted(MODELS), help="network to train")
    p.add_argument("--algorithm", required=True, choices=list(ALGORITHMS), help="distributed algorithm (see README's table)")
    p.add_argument("--out-dir", type=Path, required=True, help="run directory for metrics.csv, run.json, model.pt")
    budget = p.add_argument_group("budgets (the first one reached ends the run; give at least one of the first three)")
    budget.add_argument("--max-steps", type=_positive_int, help="iterations per worker")
    budget.add_argument("--epochs", type=_positive_float, help="passes over each worker's shard")
    budget.add_argument("--time-budget", type=_positive_float, metavar="SECONDS", help="training seconds (evaluation excluded)")
    budget.add_argument("--target-accuracy", type=_fraction, help="stop once the center's test accuracy reaches this")
    hyper = p.add_argument_group("hyperparameters")
    hyper.add_argument("--batch-size", type=_positive_int, default=d["batch_size"].default, help="per worker (default %(default)s)")
    hyper.add_argument("--lr", type=_positive_float, default=d["lr"].default, help="learning rate η (default %(default)s)")
    hyper.add_argument("--momentum", type=_fraction, default=d["momentum"].default, help="μ for the momentum variants (default %(default)s)")
    hyper.add_argument("--rho", type=_nonnegative_float, default=None, help="elasticity ρ (default: α = ηρ = BETA/P)")
    hyper.add_argument("--beta", type=_positive_float, default=d["beta"].default, help="β in α = β/P when --rho is not given (default %(default)s)")
    hyper.add_argument("--weight-decay", type=_nonnegative_float, default=d["weight_decay"].default, help="L2 coefficient added to ΔW (default %(default)s)")
    hyper.add_argument("--momentum-at", choices=("master", "worker"), default=d["momentum_at"].default,
                       help="async_msgd: where the momentum buffer V lives (default %(default)s)")
    hyper.add_argument("--nesterov", action="store_true", help="async_measgd: take ΔW^i at the look-ahead W^i + μV^i")
    hyper.add_argument("--seed", type=int, default=d["seed"].default, help="base seed; data order uses seed and worker index (default %(default)s)")
    codesign = p.add_argument_group("codesign (the paper's §3; presets sync_easgd1/2/3 fix center-on and overlap)")
    codesign.add_argument("--message", choices=MESSAGES, default=d["message"].default,
                          help="collectives: one packed message per exchange, or one per parameter tensor (default %(default)s)")
    codesign.add_argument("--center-on", choices=PLACES, help="sync_easgd: where the center W lives (default: device)")
    codesign.add_argument("--overlap", action="store_const", const=True, default=None,
                          help="sync_easgd: exchange weights on a helper thread during data fetch and fwd/bwd")
    codesign.add_argument("--tau", type=_positive_int, default=d["tau"].default, help="sync_easgd: exchange every TAU iterations (default %(default)s)")
    codesign.add_argument("--backend", choices=BACKENDS, default=d["backend"].default,
                          help="collectives: auto picks nccl with a GPU per rank, else CUDA-aware MPI, else MPI on host buffers; "
                               "gloo (host tensors) is torch.distributed's CPU backend, by request only")
    codesign.add_argument("--fast-memory-gb", type=_positive_float, metavar="GB",
                          help="chip_partition: memory all replicas on a node must fit in, e.g. 16 for KNL's MCDRAM (default: MemAvailable)")
    run = p.add_argument_group("run")
    run.add_argument("--eval-every", type=_positive_int, default=d["eval_every"].default, help="evaluate the center every this many steps (default %(default)s)")
    run.add_argument("--eval-batch-size", type=_positive_int, default=d["eval_batch_size"].default, help="(default %(default)s)")
    run.add_argument("--platform", default=d["platform"].default, help="name of the machine/partition, recorded in run.json (default %(default)s)")
    run.add_argument("--expect-ranks", type=_positive_int, metavar="N",
                     help="fail unless MPI started exactly N ranks (catches a launcher that starts N singletons)")
    run.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="auto: this rank's GPU if any, else CPU")
    run.add_argument("--worker-timeout", type=_positive_float, default=d["worker_timeout"].default, metavar="SECONDS",
                     help="abort the job, naming the rank, when a worker makes no progress this long (default %(default)s)")
    run.add_argument("--threads", type=_positive_int, help="torch threads per rank (default: SLURM_CPUS_PER_TASK, OMP_NUM_THREADS or 1)")


def run_train(args: argparse.Namespace) -> int:
    from mpi4py import MPI

    from scaledl.config import TrainConfig
    from scaledl.train import train

    fields = TrainConfig.__dataclass_fields__
    cfg = TrainConfig(**{name: getattr(args, name) for name in fields})
    try:
        train(cfg)
    except UserError as exc:
        # Every rank agreed on the error (train._agree_on_setup): one line, from rank 0.
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"scaledl train: error: {exc}", file=sys.stderr, flush=True)
        MPI.Finalize()  # a clean, collective exit; otherwise `-m mpi4py` would MPI_Abort
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    from scaledl.data.prepare import add_prepare_arguments, run_prepare
    from scaledl.netbench import add_netbench_arguments, run_netbench
    from scaledl.report.cli_args import add_aggregate_arguments, add_plot_arguments, run_aggregate, run_plot
    from scaledl.report.comm_model import add_comm_model_arguments, run_comm_model

    parser = argparse.ArgumentParser(prog="scaledl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"scaledl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = {
        "prepare": ("convert a raw dataset into scaledl's HDF5 layout", add_prepare_arguments, run_prepare),
        "train": ("train under MPI: mpiexec -n N python -m mpi4py -m scaledl train ...", add_train_arguments, run_train),
        "aggregate": ("collect run.json files into a summary table", add_aggregate_arguments, run_aggregate),
        "plot": ("plot test accuracy against training time", add_plot_arguments, run_plot),
        "netbench": ("measure latency α, inverse bandwidth β and collective times under MPI: "
                     "mpiexec -n N python -m mpi4py -m scaledl netbench ...", add_netbench_arguments, run_netbench),
        "comm-model": ("α-β predictions of each run's communication beside the measured times",
                       add_comm_model_arguments, run_comm_model),
    }
    for name, (help_text, add_arguments, runner) in commands.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(p)
        p.set_defaults(run=runner)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except UserError as exc:
        print(f"scaledl {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _nonnegative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value
