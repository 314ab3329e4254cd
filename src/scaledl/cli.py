"""`scaledl` command line: download, prepare, train, aggregate, plot, netbench, comm-model, claims, figures.

Each subcommand is one module exporting HELP, `add_arguments(parser)` and
`run(args)`; this file only lists them. A UserError becomes one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib

from scaledl import __version__
from scaledl.errors import run_command

# Subcommand name → the module that defines it. Importing them must not
# initialise MPI (a Slurm job step's PMI would break `prepare` and `aggregate`):
# each imports mpi4py.MPI inside its `run`, where it needs it.
SUBCOMMANDS = {
    "download": "scaledl.data.download",
    "prepare": "scaledl.data.prepare",
    "train": "scaledl.train.command",
    "aggregate": "scaledl.report.aggregate_command",
    "plot": "scaledl.report.plot_command",
    "netbench": "scaledl.net.measure",
    "comm-model": "scaledl.report.comm_model",
    "claims": "scaledl.report.claims_command",
    "figures": "scaledl.report.figures_command",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scaledl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"scaledl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(args.command, args.run, args)
