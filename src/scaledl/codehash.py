"""The version of the code that runs: the package's version and a hash of its Python sources.

Light on purpose (no torch, no MPI): the workflow reads it while it parses, to rerun what depends on the
code (a platform calibrated on the training loop) when the code changes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import scaledl

PACKAGE_DIR = Path(__file__).resolve().parent


def source_sha256() -> str:
    """sha256 of the package's Python sources (each file's path and bytes, in path order): what changes
    when the code that runs changes, committed or not, in a checkout or an installed copy alike."""
    digest = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        digest.update(f"{path.relative_to(PACKAGE_DIR).as_posix()}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def code_version() -> str:
    """The version of the code that runs, as a checkpoint compares it: the package's version and the first
    16 hex digits of its sources' sha256 (`0.1.0+3f2a...`). An edit to any module changes it; a commit
    that changes only documentation does not."""
    return f"{scaledl.__version__}+{source_sha256()[:16]}"
