"""`scaledl` command line: download, prepare, train, simulate, aggregate, plot, netbench, comm-model, claims,
figures, tune, compare, timeline, regime-map, cost.

Each subcommand is one module exporting HELP, `add_arguments(parser)` and
`run(args)`; this file only lists them. A UserError, like a parser error,
becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys

from scaledl import __version__
from scaledl.errors import run_command

# Subcommand name → the module that defines it (module:object: an object in it with the
# same three names). Importing them must not
# initialise MPI (a Slurm job step's PMI would break `prepare` and `aggregate`):
# each imports mpi4py.MPI inside its `run`, where it needs it.
SUBCOMMANDS = {
    "download": "scaledl.data.download",
    "prepare": "scaledl.data.prepare",
    "train": "scaledl.train.command",
    "simulate": "scaledl.train.simulate",
    "aggregate": "scaledl.report.commands:aggregate",
    "plot": "scaledl.report.commands:plot",
    "netbench": "scaledl.net.measure",
    "comm-model": "scaledl.report.commands:comm_model",
    "claims": "scaledl.report.commands:claims",
    "figures": "scaledl.report.commands:figures",
    "tune": "scaledl.report.commands:tune",
    "compare": "scaledl.report.commands:compare",
    "timeline": "scaledl.report.commands:timeline",
    "regime-map": "scaledl.report.regime",
    "cost": "scaledl.grid.nodehours",
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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the subcommand about to run, only its module is imported (the others are
    names only): the report commands import pandas and scipy, over a second a rank at every launch of
    `scaledl train`."""
    parser = CommandParser(prog="scaledl", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"scaledl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    for name, target in SUBCOMMANDS.items():
        if command in SUBCOMMANDS and name != command:
            sub.add_parser(name)
            continue
        module_name, _, attribute = target.partition(":")  # "module" or "module:object" with the same names
        module = importlib.import_module(module_name)
        module = getattr(module, attribute) if attribute else module
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    args = build_parser(command).parse_args(argv)
    return run_command(args.command, args.run, args)
