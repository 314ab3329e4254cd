"""Atomic file writes: a reader never sees a half-written output.

The temporary file comes from `tempfile.mkstemp`, which creates it mode 0600
whatever the umask; before the rename it gets the mode an ordinary `open`
would have given it (0666 less the umask), so collaborators sharing a project
folder can read the outputs when the umask lets them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

FILE_MODE = 0o666  # what open(..., "w") asks for; the umask then takes bits away


def current_umask() -> int:
    """The process umask, read from /proc on Linux (no window in which another thread sees umask 0)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o077)  # elsewhere: set-and-restore; the briefly stricter mask only ever removes access
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path beside `path`; rename it onto `path` on success, delete it on failure.

    The renamed file has mode 0666 & ~umask, like a file written in place.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, FILE_MODE & ~current_umask())  # after the writer: it may have recreated the file
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
