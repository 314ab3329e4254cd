"""`scaledl` command line: download, prepare, train, simulate, calibrate, aggregate, plot, netbench, comm-model,
claims, figures, tune, compare, timeline, regime-map, sensitivity, cost, validate.

Each subcommand is one module exporting HELP, `add_arguments(parser)` and
`run(args)`; this file only lists them. A UserError, like a parser error,
becomes one line on stderr and exit status 2. `scaledl --help` imports no
subcommand's module, and the modules import what computes (torch, pandas,
matplotlib) where they run, so that `scaledl COMMAND --help` answers at once
too (tests/unit/test_cli.py checks that `scaledl --help` imports none of them).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

from scaledl import __version__
from scaledl.errors import run_command

# Subcommand name → the module that defines it (module:object: an object in it with the same three names)
# and its HELP, copied here so that `scaledl --help` lists the subcommands without importing them (together
# they import torch, pandas, scipy and Snakemake: seconds); tests/unit/test_cli.py checks that the copies agree.
# Importing a module must not initialise MPI (a Slurm job step's PMI would break `prepare` and `aggregate`):
# each imports mpi4py.MPI inside its `run`, where it needs it.
SUBCOMMANDS = {
    "download": ("scaledl.data.download", "download a dataset's raw files into data/raw/DATASET, verified by sha256"),
    "prepare": ("scaledl.data.prepare", "convert a raw dataset into scaledl's HDF5 layout"),
    "train": ("scaledl.train.command", "train under MPI: mpiexec -n N python -m mpi4py -m scaledl train ..."),
    "simulate": (
        "scaledl.train.simulate",
        "simulate a training run on a SimGrid platform: every rank an actor, real numerics, simulated time",
    ),
    "calibrate": (
        "scaledl.sim.calibrate",
        "calibrate a simulated platform to this machine: its network from netbench, its compute from a measured step",
    ),
    "aggregate": ("scaledl.report.commands:aggregate", "collect run.json files into a summary table"),
    "plot": (
        "scaledl.report.commands:plot",
        "plot test accuracy (or another --y) against wall time (or another --x)",
    ),
    "netbench": (
        "scaledl.net.measure",
        "measure latency α, inverse bandwidth β and collective times under MPI: "
        "mpiexec -n N python -m mpi4py -m scaledl netbench ...",
    ),
    "comm-model": (
        "scaledl.report.commands:comm_model",
        "α-β predictions of each run's communication beside the measured times",
    ),
    "claims": (
        "scaledl.report.commands:claims",
        "check the paper's claims against the summary table: our numbers and a verdict per claim",
    ),
    "figures": (
        "scaledl.report.commands:figures",
        "draw the report's figures (accuracy vs time, time breakdown, scaling, chip partitioning)",
    ),
    "tune": (
        "scaledl.report.commands:tune",
        "choose each algorithm's best tune trial (time to the validation target)",
    ),
    "compare": (
        "scaledl.report.commands:compare",
        "compare two result sets: every metric per configuration, changed or not beyond the seeds' spread",
    ),
    "timeline": (
        "scaledl.report.commands:timeline",
        "a run's timeline.h5: seconds per rank and phase; --chrome writes a Chrome / Perfetto trace",
    ),
    "regime-map": (
        "scaledl.report.regime",
        "map where a claim holds over network bandwidth × device speed, by simulation (needs SimGrid)",
    ),
    "sensitivity": (
        "scaledl.report.sensitivity",
        "vary each assumed platform constant alone and say whether a simulated claim's verdict survives "
        "(needs SimGrid)",
    ),
    "cost": (
        "scaledl.grid.nodehours",
        "the node-hours and GPU-hours a config asks of Slurm, per platform and rule, before submitting",
    ),
    "validate": (
        "scaledl.validate.command",
        "check a simulated platform's prices against published measurements, with each row's error and the score",
    ),
}

# How argparse's message for missing required arguments begins.
_REQUIRED = "the following arguments are required"


class _MissingRequired(Exception):
    """A required argument is missing; raised so that an unknown flag can be reported in its place."""


class CommandParser(argparse.ArgumentParser):
    """A parser whose errors are `PROG: error: WHAT` and `see PROG --help`, with a did-you-mean, exit status 2.

    Its parse_known_args reports unknown arguments itself, so that a subcommand names the ones given to it
    (plain argparse hands them up to the top-level parser), and before a missing required argument: a
    misspelt `--dta` is reported as itself, not as a missing `--data`.
    """

    def error(self, message: str):
        if message.startswith(_REQUIRED):
            raise _MissingRequired(message)
        self.fail(message)

    def fail(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\nsee {self.prog} --help\n")

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        try:
            namespace, unknown = super().parse_known_args(args, namespace)
        except _MissingRequired as missing:
            unknown = self._unknown_arguments(args)
            if not unknown:
                self.fail(str(missing))
        if unknown:
            self.fail(self._unrecognized(unknown))
        return namespace, []

    def _unknown_arguments(self, args: list[str]) -> list[str]:
        """What no option of this parser takes, with no argument required (help then cannot run: the
        strict parse that got as far as the required check saw no --help)."""
        required = [action for action in self._actions if action.required]
        for action in required:
            action.required = False
        try:
            return super().parse_known_args(args)[1]
        finally:
            for action in required:
                action.required = True

    def _unrecognized(self, unknown: list[str]) -> str:
        """The unknown flags, each with the closest of this parser's flags; the unknown values when no flag
        is unknown (the values after an unknown flag are most likely its own)."""
        flags = [arg for arg in unknown if _looks_like_flag(arg, self.prefix_chars)]
        if not flags:
            return f"unrecognized argument{'s' if len(unknown) > 1 else ''} {' '.join(map(repr, unknown))}"
        names = {flag.lstrip(self.prefix_chars): flag for action in self._actions for flag in action.option_strings}
        described = []
        for flag in flags:
            close = difflib.get_close_matches(flag.split("=", 1)[0].lstrip(self.prefix_chars), names, n=1)
            described.append(f"{flag} (did you mean {names[close[0]]}?)" if close else flag)
        return f"unrecognized argument{'s' if len(flags) > 1 else ''} {', '.join(described)}"

    def _check_value(self, action, value):
        # argparse's check of a choice (an option's or a subcommand), with the closest choice in place of
        # the list of all of them where one is close
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            close = difflib.get_close_matches(str(value), [str(choice) for choice in action.choices], n=1)
            if not close:
                raise
            raise argparse.ArgumentError(action, f"invalid choice: {value!r} (did you mean {close[0]}?)") from None


def _looks_like_flag(arg: str, prefix_chars: str) -> bool:
    if len(arg) < 2 or arg[0] not in prefix_chars:
        return False
    try:
        float(arg)  # a negative number: a value
    except ValueError:
        return True
    return False


def subcommand_module(target: str):
    """The module, or the object in it, that a SUBCOMMANDS entry names ("module" or "module:object")."""
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser. Given the subcommand about to run, only its module is imported (the others are a name and
    a summary each): the report commands import pandas and scipy, over a second a rank at every launch of
    `scaledl train`. Given none (`scaledl --help`), no module is."""
    parser = CommandParser(prog="scaledl", description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--version", action="version", version=f"scaledl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    for name, (target, summary) in SUBCOMMANDS.items():
        if name != command:
            sub.add_parser(name, help=summary)
            continue
        module = subcommand_module(target)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    return run_command(args.command, args.run, args)
