"""Errors a user can fix. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations

import sys


class UserError(Exception):
    """Bad input: the message says what is wrong and what to do about it."""


class DataError(UserError):
    """A raw or prepared dataset file is missing, corrupt or malformed."""


class Interrupted(Exception):
    """SIGINT or SIGTERM stopped the work; it has said so (once per job) and left its partial results.

    The exit status is the shell's for a Ctrl-C, 128 + SIGINT, also after a SIGTERM: a
    workflow manager then counts the job as failed and runs it again.
    """

    status = 130


def run_command(name: str, run, args) -> int:
    """Exit status of a subcommand's `run(args)`: a UserError becomes one line on stderr and status 2;
    an interruption that already reported itself, status 130."""
    try:
        return run(args)
    except UserError as exc:
        print(f"scaledl {name}: error: {exc}", file=sys.stderr)
        return 2
    except Interrupted:
        return Interrupted.status
