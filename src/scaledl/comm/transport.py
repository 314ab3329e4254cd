"""The transport under the message patterns: MPI (mpi4py), or the simulated cluster.

Everything that sends a message, reads a run's clock, sleeps between polls
or starts a helper thread goes through this module, so the same algorithm
and pattern code runs over either:

    MPI        the mpi4py API (`MPI`), or its simulated twin while a simulation runs
    clock()    seconds on the run's clock: the host's, or the simulated one
    sleep(s)   wait on that clock
    helper()   a one-thread executor for an overlapped exchange (a SimGrid actor in simulation)
    complete(request, deadline, why, spin_s) / arrival(comm, source, tag, deadline, why)
               wait for a request or a message with a deadline (polling MPI, blocking in simulation)
    meter(phase)  what a timed phase costs: nothing over MPI (the clock measures it); in
               simulation the phase's work (FLOPs, bytes) is charged to the simulated clock

Over MPI (the default) nothing changes: `MPI` is mpi4py's module, imported on
first use, so importing a pattern never initialises MPI. A simulation
(scaledl.sim) installs its transport for the run's duration with `use()`;
the simulated cluster runs every rank as an actor in one process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor


class MPITransport:
    """Real MPI: the host clock, threads, and polling with a deadline."""

    name = "mpi"
    simulated = False
    guards_processes = True  # sentinels, signal handlers and the watchdog thread watch real processes

    _mpi = None

    @property
    def MPI(self):
        if self._mpi is None:
            from mpi4py import MPI  # lazy: importing MPI initialises it, which parsing and the registry must not do

            MPITransport._mpi = MPI
        return self._mpi

    def clock(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def helper(self, name: str = "scaledl-exchange"):
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def meter(self, phase: str):
        return contextlib.nullcontext()

    def device_behind_pcie(self) -> bool:
        """Whether this rank's device tensors need host staging although torch places them on the CPU: never
        here (a real device says so itself); in a simulation, a simulated GPU's."""
        return False

    def meter_mark(self) -> None:
        pass  # the host clock runs by itself

    def complete(self, request, deadline: float, on_timeout: Callable[[], None], poll: float, spin_s: float) -> None:
        """Complete `request`, polling; call `on_timeout()` once time.monotonic() passes `deadline`.

        `spin_s`: test without sleeping for that long first. MPI moves a large message (shared memory
        especially) only inside MPI calls, so a sleep between tests stalls a transfer under way: a 143 MB
        message sent this way with a 200 µs sleep took several times a blocking Send.
        """
        if request.Test():
            return
        spin_until = time.monotonic() + spin_s
        while not request.Test():
            now = time.monotonic()
            if now > deadline:
                on_timeout()
            if now > spin_until:
                time.sleep(poll)

    def arrival(self, comm, source: int, tag: int, deadline: float, on_timeout: Callable[[], None], poll: float):
        """Return once a message from `source` with `tag` has arrived (not received); `on_timeout()` past `deadline`."""
        while not comm.Iprobe(source=source, tag=tag):
            if time.monotonic() > deadline:
                on_timeout()
            time.sleep(poll)

    def abort(self, status: int) -> None:
        """End every rank of the job with `status` (its message is already printed)."""
        time.sleep(0.5)  # the launcher forwards our output asynchronously; an abort right away can lose the line
        self.MPI.COMM_WORLD.Abort(status)
        os._exit(status)  # MPI_Abort may return when the launcher cannot reach a stopped peer

    def monotonic(self) -> float:
        """The clock deadlines are read on (liveness limits)."""
        return time.monotonic()

    def evaluation_threads(self) -> int:
        """The threads an evaluation may use while training is paused: every core this rank may use."""
        return len(os.sched_getaffinity(0))

    def host_name(self) -> str:
        """The host this rank runs on (a simulated rank's: its platform host)."""
        return socket.gethostname()

    def describe(self) -> dict:
        """What run.json records about the transport (MPI's library and versions are recorded apart)."""
        return {"kind": "mpi"}

    def models(self) -> dict | None:
        """Initial models the ranks of this process share, by what built them (None: one rank per process)."""
        return None


class _MPIProxy:
    """`MPI.X` is the current transport's X: mpi4py's, or the simulation's."""

    def __getattr__(self, name: str):
        return getattr(_current.MPI, name)


_REAL = MPITransport()
_current = _REAL
MPI = _MPIProxy()


def current():
    """The transport in use."""
    return _current


def clock() -> float:
    return _current.clock()


def sleep(seconds: float) -> None:
    _current.sleep(seconds)


def monotonic() -> float:
    return _current.monotonic()


def helper(name: str = "scaledl-exchange"):
    return _current.helper(name)


def meter(phase: str):
    return _current.meter(phase)


def meter_mark() -> None:
    """In a simulation, charge the phase's work up to here before what follows starts (sim.roofline.Meter.mark)."""
    _current.meter_mark()


@contextlib.contextmanager
def use(transport) -> Iterator[None]:
    """Run everything inside on `transport` (a simulation), then MPI again."""
    global _current
    before, _current = _current, transport
    try:
        yield
    finally:
        _current = before
