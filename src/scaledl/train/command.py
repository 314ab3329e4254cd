"""`scaledl train`: its options, generated from TrainConfig, and its entry point.

Run under MPI: `mpiexec -n N python -m mpi4py -m scaledl train ...`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from scaledl.algorithms import ALGORITHMS
from scaledl.config import GROUPS, TrainConfig, flag_of
from scaledl.errors import UserError
from scaledl.models import MODELS
from scaledl.train import refusal
from scaledl.train.tuned import with_tuned

HELP = "train under MPI: mpiexec -n N python -m mpi4py -m scaledl train ..."

# Choices that live in other registries. A model may also be a plug-in's (scaledl.models.model_source checks
# the name on every rank), so its names are listed, not enforced.
_CHOICES = {"algorithm": list(ALGORITHMS)}
_LISTED = {"model": f" (built in: {', '.join(MODELS)})"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups = {name: parser.add_argument_group(title) if title else parser for name, title in GROUPS.items()}
    for f in fields(TrainConfig):
        meta = f.metadata
        flag = flag_of(f.name)
        help_text = meta["help"] + _LISTED.get(f.name, "")
        help_text += "" if meta["required"] or f.default is None else " (default %(default)s)"
        if meta["switch"]:
            # A switch whose default is None (the algorithm's or preset's choice) can be turned
            # either way: --overlap and --no-overlap (the ablation of a default-on overlap).
            action = argparse.BooleanOptionalAction if f.default is None else "store_const"
            extra = {} if f.default is None else {"const": True}
            groups[meta["group"]].add_argument(flag, action=action, default=f.default, help=help_text, **extra)
            continue
        groups[meta["group"]].add_argument(
            flag,
            type=meta["type"],
            choices=_CHOICES.get(f.name, meta["choices"]),
            metavar=meta["metavar"],
            required=meta["required"],
            default=None if meta["required"] else f.default,
            help=help_text,
        )


def run(args: argparse.Namespace) -> int:
    # Imported here, deliberately: importing mpi4py.MPI initialises MPI, which the
    # other subcommands' parsing (cli builds every parser) must never do.
    from mpi4py import MPI

    from scaledl.train.loop import train

    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    rank = MPI.COMM_WORLD.Get_rank()
    try:
        # A retry of a refused run stops here, before any data is read (scaledl.train.refusal).
        refusal.check(cfg.out_dir, refusal.attempt_of(), clear=rank == 0)
        if cfg.time_only:
            raise UserError("--time-only prices work it does not compute: only scaledl simulate can run it")
        train(with_tuned(cfg, MPI.COMM_WORLD.Get_size()))
    except UserError as exc:
        # Every rank agreed on the error (scaledl.train.setup.agree_on_setup): one line, from rank 0.
        if rank == 0:
            print(f"scaledl train: error: {exc}", file=sys.stderr, flush=True)
            if not isinstance(exc, refusal.Refused):
                refusal.record(cfg.out_dir, str(exc))
        MPI.Finalize()  # a clean, collective exit; otherwise `-m mpi4py` would MPI_Abort
        return 2
    return 0
