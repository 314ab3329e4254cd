"""Warm ranks: MPI ranks (and plain `python -m ...` processes) forked from one interpreter that imported torch once.

A test's `mpiexec -n P python -m mpi4py ...` costs each rank ≈ 2.5 s of CPU to import torch before it does
anything; on two cores that start-up is most of the suite. Here `mpiexec` starts a small stand-in per rank
(`python -I -S warm_ranks.py ARGS`, a few milliseconds) that hands its argv, environment, working folder,
stdin/stdout/stderr and the MPI process manager's socket (PMI_FD) to a long-lived server over a Unix socket
(SCM_RIGHTS). The server, which imported torch and the other heavy libraries but never MPI, forks a child that
takes those over and runs `python ARGS` in-process: MPI initialises in the child, so each rank is still its
own process in its own MPI world, started by the real `mpiexec`. The stand-in forwards the signals it gets
to its child and exits with the child's status; if the stand-in dies (mpiexec ended the job), the server
kills the child.

Tests that check what a run computes or writes use it: mpi_run.run_mpi, run_train and run_python (warm=True,
the default), and the workflow tests' rules through a `python` shim first on PATH (workflow_env). Tests of
processes themselves (signals to a process group, killed or hung ranks, refusals at start-up, what an import
loads) and jobs submitted to Slurm keep real, fresh interpreters; SCALEDL_COLD_RANKS=1 makes every launch one.
A server imports the package's training path once, at its start: code edited during a session reaches the
warm processes at the next session.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading

SOCKET_VARIABLE = "SCALEDL_WARM_RANKS"  # the server's socket path; unset, every launch is a fresh interpreter
# Imported once by a server: the heavy libraries ("libraries"), and for "package" the package's training path too
# (none of it initialises MPI; the server checks, since a child of an initialised MPI could not start its own).
LIBRARIES = ("torch", "torchvision", "numpy", "h5py", "pandas", "scipy.stats", "yaml", "matplotlib")
PRELOAD = {
    "libraries": LIBRARIES,
    "package": (*LIBRARIES, "scaledl.cli", "scaledl.train.command", "scaledl.train.loop"),
}
_LENGTH = struct.Struct("!I")


def _send(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = json.dumps(message).encode()
    payload = _LENGTH.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [payload], list(fds))
    else:
        sock.sendall(payload)


def _recv(sock: socket.socket, max_fds: int = 0) -> tuple[dict | None, list[int]]:
    """One length-prefixed JSON message (and the descriptors that came with its first bytes); None at EOF."""
    fds: list[int] = []
    if max_fds:
        head, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, max_fds)
    else:
        head = sock.recv(_LENGTH.size)
    while head and len(head) < _LENGTH.size:
        more = sock.recv(_LENGTH.size - len(head))
        if not more:
            break
        head += more
    if len(head) < _LENGTH.size:
        return None, fds
    (size,) = _LENGTH.unpack(head)
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    return json.loads(data), fds


# ---- the session's server ---------------------------------------------------------

_servers: dict[str, tuple[subprocess.Popen, str]] = {}  # preload → (the server, its socket)


def python_shim() -> str:
    """A folder whose `python` is a warm stand-in: first on a workflow's PATH, its rules' `python -m ...`
    commands start from the server (whatever the rule: the same command line)."""
    folder = os.path.join(tempfile.gettempdir(), f"scaledl-warm-bin-{os.getpid()}")
    shim = os.path.join(folder, "python")
    if not os.path.exists(shim):
        os.makedirs(folder, exist_ok=True)
        with open(shim + ".tmp", "w") as out:
            out.write(f'#!/bin/sh\nexec "{sys.executable}" -I -S "{os.path.abspath(__file__)}" "$@"\n')
        os.chmod(shim + ".tmp", 0o755)
        os.replace(shim + ".tmp", shim)
    return folder


def launch_python(preload: str = "package") -> tuple[list[str], dict[str, str]]:
    """The interpreter command and environment that start a process from the warm server that imported PRELOAD's
    modules (started on first use, ended with the test session: its stdin is this process's pipe)."""
    if os.environ.get("SCALEDL_COLD_RANKS"):  # every rank a fresh interpreter, e.g. to compare the two
        return [], {}
    if preload not in _servers:
        path = os.path.join(tempfile.mkdtemp(prefix="scaledl-warm-"), "server.sock")
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve", path, preload], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        if server.stdout.readline().strip() != b"ready":
            raise RuntimeError("the warm-ranks server did not start")
        _servers[preload] = (server, path)
    return [sys.executable, "-I", "-S", __file__], {SOCKET_VARIABLE: _servers[preload][1]}


# ---- the stand-in that mpiexec starts ----------------------------------------


def client(argv: list[str]) -> int:
    """Hand this process's job to the server and mirror the child's life: its signals in, its status out.
    Without a server, or for an interpreter option the server does not take, it becomes this interpreter."""
    if SOCKET_VARIABLE not in os.environ or not argv or (argv[0] not in ("-m", "-c") and not os.path.isfile(argv[0])):
        os.execv(sys.executable, [sys.executable, *argv])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ[SOCKET_VARIABLE])
    pmi = os.environ.get("PMI_FD")
    fds = [0, 1, 2] + ([int(pmi)] if pmi else [])
    _send(sock, {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}, fds)
    if pmi:
        os.close(int(pmi))  # the child holds the process manager's socket now
    reply, _ = _recv(sock)
    child = reply["pid"]

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):
        signal.signal(signum, forward)
    reply, _ = _recv(sock)
    if reply is None:
        return 1
    status = reply["status"]
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return 128 + signum
    return os.WEXITSTATUS(status)


# ---- the server ------------------------------------------------------------------


def _become(request: dict, fds: list[int], listener: socket.socket, conn: socket.socket) -> None:
    """In the forked child: take over the stand-in's descriptors, environment and folder, then run `python ARGV`."""
    listener.close()
    conn.close()
    _LIBC.__cxa_atexit(
        _LEAVE, None, None
    )  # C's atexit (exported as this); before anything this child loads registers its own (MPICH, at MPI_Init)
    for target, fd in zip((0, 1, 2), fds[:3]):
        os.dup2(fd, target)
    env = request["env"]
    if len(fds) > 3:
        os.dup2(fds[3], int(env["PMI_FD"]))
        os.set_inheritable(int(env["PMI_FD"]), True)
    for fd in fds:
        if fd > 2 and fd != int(env.get("PMI_FD", -1)):
            os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request["cwd"])
    argv = request["argv"]
    # sys.path as `python ARGV` would start with: the script's folder (or, for -m, the working folder), then
    # PYTHONPATH, then the installation's (the server's, after its own script folder)
    first = os.getcwd() if argv[0] in ("-m", "-c") else os.path.dirname(os.path.abspath(argv[0]))
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [first, *extra, *sys.path[1:]]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    status = 0
    try:
        _run_python(request["argv"])
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    except KeyboardInterrupt:
        status = 128 + signal.SIGINT
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    # The interpreter's exit without its teardown: non-daemon threads joined, atexit run (the sentinel's
    # release), MPI finalized, then the C library's exit, whose handlers registered after this child started run
    # (MPICH ends its process-manager session there) down to _LEAVE, which flushes C's streams and ends the
    # process. What the server had loaded is never torn down: destroying torch's libraries and the thousands of
    # modules inherited from the server would take a second a process, and touch (so copy) its whole heap.
    threading._shutdown()
    atexit._run_exitfuncs()
    _finalize_mpi()  # mpi4py finalizes at the interpreter's teardown, which this exit skips
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    global _status
    _status = status
    _LIBC.exit(status)


_LIBC = ctypes.CDLL(None)
_status = 0


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _LEAVE(_) -> None:
    _LIBC.fflush(None)
    os._exit(_status)


def _finalize_mpi() -> None:
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        mpi.Finalize()


def _exit_status(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_python(argv: list[str]) -> None:
    """`python ARGV` in this process: `-c code args...`, `-m module args...` or `script args...`."""
    import runpy

    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
    elif argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


def serve(path: str, preload: str) -> None:
    """Import the heavy libraries once, then fork a child per request until stdin closes (the test session ends)."""
    import importlib

    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # as `python -m scaledl` sets it before torch is imported
    for module in PRELOAD[preload]:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    if "mpi4py.MPI" in sys.modules:
        raise RuntimeError("the warm-ranks server imported mpi4py.MPI: its children could not initialise MPI")
    gc.freeze()  # the children's collections then never touch (and copy) what they inherited
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    children: dict[int, socket.socket] = {}  # pid → its stand-in's connection
    stand_ins: dict[socket.socket, int] = {}
    while True:
        for key, _ in selector.select(timeout=0.05):
            if key.data == "stdin":
                if not sys.stdin.readline():
                    for pid in children:
                        _kill(pid)
                    return
            elif key.data == "accept":
                conn, _ = listener.accept()
                request, fds = _recv(conn, max_fds=4)
                if request is None:
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    _become(request, fds, listener, conn)
                for fd in fds:
                    os.close(fd)
                _send(conn, {"pid": pid})
                children[pid] = conn
                stand_ins[conn] = pid
                selector.register(conn, selectors.EVENT_READ, "stand-in")
            else:  # a stand-in's socket is readable: it has gone (EOF): its child goes too
                conn = key.fileobj
                if not conn.recv(1):
                    selector.unregister(conn)
                    pid = stand_ins.pop(conn)
                    if pid in children:
                        _kill(pid)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None and conn in stand_ins:
                try:
                    _send(conn, {"status": status})
                except OSError:
                    pass
                selector.unregister(conn)
                stand_ins.pop(conn, None)
                conn.close()


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], sys.argv[3])
    else:
        sys.exit(client(sys.argv[1:]))
