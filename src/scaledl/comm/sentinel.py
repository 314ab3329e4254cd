"""Name a rank that dies without a word (SIGKILL, OOM killer, segfault).

A dead process cannot report itself, and MPICH's launcher reports the
crash by the PID of whichever process it reaps first, often a healthy rank
that it killed during clean-up. So every rank starts a tiny sentinel
process (a fresh interpreter, never a fork of an MPI process) that holds
the read end of a pipe from its rank. On a normal exit the rank writes
"ok"; if the pipe closes without it, the rank died, and the sentinel
prints one line naming it. Ranks the launcher kills afterwards would
trigger their sentinels too, so only the first death on a node reports:
each sentinel must first create the job's claim file (O_EXCL). A rank that
aborts the job on purpose claims it first, so its own message stands.

Run as `python -m scaledl.comm.sentinel CLAIM_FILE MESSAGE`.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class Sentinel:
    def __init__(self, job_token: str, message: str):
        self.claim_file = claim_path(job_token)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "scaledl.comm.sentinel", str(self.claim_file), message],
            stdin=subprocess.PIPE,
            start_new_session=True,  # outlives a launcher's process-group kill
        )
        atexit.register(self.release)

    def release(self) -> None:
        """This rank is ending by itself: the sentinel leaves quietly."""
        if self._proc.stdin and not self._proc.stdin.closed:
            try:
                self._proc.stdin.write(b"ok\n")
                self._proc.stdin.close()
            except OSError:
                pass


def claim_path(job_token: str) -> Path:
    return Path(tempfile.gettempdir()) / f"scaledl-{job_token}.failed"


def claim(job_token: str) -> bool:
    """True for the first caller on this node: it alone reports the job's failure."""
    try:
        os.close(os.open(claim_path(job_token), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        return False


def _watch(claim_file: Path, message: str) -> None:
    said = sys.stdin.buffer.read()
    if said.startswith(b"ok"):
        return
    try:
        os.close(os.open(claim_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return
    print(
        f"scaledl train: error: {message} died without finishing (killed or crashed); the job ends",
        file=sys.stderr,
        flush=True,
    )
    for fd in (0, 1, 2):
        os.close(fd)  # the launcher waits for every writer of the job's output before it exits
    time.sleep(30)  # keep the claim while the launcher kills the other ranks, then tidy up
    claim_file.unlink(missing_ok=True)


if __name__ == "__main__":
    _watch(Path(sys.argv[1]), sys.argv[2])
