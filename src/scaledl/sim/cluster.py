"""The simulated cluster's shared state, and which rank the running actor is.

Every rank of a simulated job is a SimGrid actor in this one process; SimGrid
runs one actor at a time, each on a thread of its own, so `this_rank()` (a
thread-local) tells the code of a pattern which rank it is running for. A rank's
helper actors (an overlapped exchange, a nonblocking send or collective) are
started with `spawn`, which hands them the rank's identity.

Messages are eager: a send moves its bytes over the platform's route between
the two ranks' memory hosts (a GPU rank's is its node's CPU: MPI reads and
writes host buffers, and the copies to and from the GPU are priced where the
code makes them, scaledl.sim.roofline; a CUDA-aware message goes from one GPU
to the other, peer to peer) at once (SimGrid's flow model shares every link with the
transfers crossing it at the same time) and lands in the receiver's inbox,
where a receive matching source and tag picks it up. A message between two
ranks of one memory host is no link's: it is copied through shared memory by
the cores (`Cluster.transfer`), the sender's into the shared buffer and the
receiver's out of it at once, each for the host's loopback line (α + n/B, or
its size's segment), so it takes time from the computing ranks there (MPICH
progresses a nonblocking collective's copies inside the computing rank's own
calls); a rank that polls meanwhile does its part with the core it already
holds. A wait with a deadline
blocks on a semaphore with a timeout, never by polling. On a host whose ranks
poll while they wait (the platform's `waiting: polls`), a rank's own actor
keeps a core busy for as long as it is blocked (`blocked`): MPICH's progress
loop spins, so with more ranks than cores the computing ranks get less than a
core each. A rank's helper actors (an exchange in flight) never poll.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from scaledl.sim.loader import load

ANY_SOURCE, ANY_TAG = -2, -1
_local = threading.local()
# How a message's time is found: SimGrid's flow model (every link shared by the transfers crossing it at the
# time), or the closed form of analytical models, α + n/B of the route (its latency, its narrowest link),
# sharing nothing (no link, and within a host no core): the clock swap that shows which verdicts rest on contention.
CLOCKS = ("simgrid", "alphabeta")
SIMGRID_LOOPBACK = (0.0, 10e9)  # SimGrid's own within-host line where a platform sets none: 0 s, 10 GB/s


class RankLost(Exception):
    """A message to or from a rank whose host has failed."""


class SimulatedAbort(Exception):
    """A rank aborted the simulated job (MPI_Abort's twin): the runner ends every actor."""

    def __init__(self, status: int):
        super().__init__(f"the simulated job aborted with status {status}")
        self.status = status


@dataclass
class Message:
    source: int  # the sender's rank in the communicator
    tag: int
    payload: object  # a copy of the sent buffer (numpy) or object
    nbytes: int


class Inbox:
    """Messages that arrived for one rank of one communicator channel, matched by source and tag."""

    def __init__(self, sg):
        self.messages: deque[Message] = deque()
        self.arrived = sg.Semaphore(0)

    def deliver(self, message: Message) -> None:
        self.messages.append(message)
        self.arrived.release()

    def find(self, source: int, tag: int, remove: bool) -> Message | None:
        for i, m in enumerate(self.messages):
            if (source == ANY_SOURCE or m.source == source) and (tag == ANY_TAG or m.tag == tag):
                if remove:
                    del self.messages[i]
                return m
        return None

    def take(self, source: int, tag: int, remove: bool = True, timeout: float | None = None) -> Message | None:
        """The first matching message, waiting for it (None once `timeout` simulated seconds pass)."""
        while True:
            found = self.find(source, tag, remove)
            if found is not None:
                return found
            if timeout is None:
                blocked(self.arrived.acquire)
            elif timeout <= 0 or blocked(self.arrived.acquire_timeout, timeout):  # True when it timed out
                return None


@dataclass
class RankState:
    """One rank of the simulated job: where it runs and what its phases cost."""

    cluster: Cluster
    rank: int
    host: object  # simgrid.Host of the rank's device (its actor runs there)
    node: str  # the node's name (ranks of one node share memory: Split_type)
    memory_host: object = None  # simgrid.Host where its messages start and end: the node's CPU for a GPU (host
    # buffers: comm.buffers stages a GPU's tensors, and param_copy crosses PCIe), else `host`
    meter: object = None  # scaledl.sim.roofline.Meter
    world: object = None  # its COMM_WORLD (scaledl.sim.mpi.Comm)
    alive: bool = True  # False once its host failed (Simulation's --fail)
    actors: list = field(default_factory=list)  # its main actor, killed with its unfinished helpers when it fails
    helpers: list = field(default_factory=list)  # (actor, Done) of its helpers, the finished ones dropped
    polls: bool = False  # blocked, its actor keeps a core of its host busy (the platform's `waiting: polls`)
    polling: bool = False  # its actor is blocked and polling now
    core: object = None  # bound to one core (binding: core): a simgrid.Mutex every execution of the rank holds


@dataclass
class Cluster:
    """One simulation: its engine, the ranks, the communicators' inboxes and windows."""

    sg: object
    ranks: list[RankState] = field(default_factory=list)
    inboxes: dict = field(default_factory=dict)  # (channel, rank in it) -> Inbox
    shared: dict = field(default_factory=dict)  # per collective object (windows, splits): what its ranks exchange
    poll_s: float = 2e-5  # the simulated time one fruitless probe costs (a spin loop must let time pass)
    aborted: int | None = None
    # per host name: a message within it by size, (up to bytes, extra latency s, bytes scale) per segment
    # (Simulation: the platform's message_segments over its loopback's line)
    segments: dict = field(default_factory=dict)
    # time-only: the job's pool of shared buffers (scaledl.sim.replicas); a payload from it carries no values
    replicas: object = None
    clock: str = "simgrid"  # CLOCKS
    loopback: tuple[float, float] = SIMGRID_LOOPBACK  # a host to itself on the alphabeta clock: (latency s, B/s)
    routes: dict = field(default_factory=dict)  # (host, host) -> (latency s, narrowest bandwidth B/s), as found
    copiers: dict = field(default_factory=dict)  # (world rank, holds its core) -> its copy lane

    def carries(self, buf) -> bool:
        """Whether a message from (or into) `buf` must carry its values: not when `buf` is a time-only replica."""
        return buf is None or self.replicas is None or not self.replicas.holds(buf)

    def inbox(self, channel: str, rank: int) -> Inbox:
        box = self.inboxes.get((channel, rank))
        if box is None:
            box = self.inboxes[(channel, rank)] = Inbox(self.sg)
        return box

    def transfer(
        self, src: int, dst: int, nbytes: int, device: bool = False, copiers: tuple[int, ...] | None = None
    ) -> None:
        """Block the calling actor while `nbytes` cross the route from world rank src's memory host to dst's
        (`device`: from device memory to device memory, a CUDA-aware message: GPU to GPU over the platform's
        route between the two devices, its PCIe switch or root complex); RankLost when either host has failed.
        Within one memory host, on SimGrid's clock, the bytes are copied by the cores of `copiers` (world
        ranks; both ends by default: a two-sided message's copy in and copy out; an RMA operation's origin
        alone) instead of crossing a link."""
        for rank in (src, dst):
            if not self.ranks[rank].alive:
                raise RankLost(f"rank {rank}'s host {self.ranks[rank].host.name} has failed")
        ends = (self.ranks[src], self.ranks[dst])
        a, b = (state.host if device else state.memory_host for state in ends)
        nbytes = max(int(nbytes), 0)
        extra = 0.0
        if a == b and a.name in self.segments:  # within a host: the segment's α and β, over the loopback
            extra, scale = next((e, s) for limit, e, s in self.segments[a.name] if nbytes <= limit)
            nbytes = int(nbytes * scale)
        if a == b and not device and self.clock == "simgrid":
            latency, bandwidth = self.route(a, b)
            self.copy(a, extra + latency + nbytes / bandwidth, (src, dst) if copiers is None else copiers)
            return
        if extra > 0:
            self.sg.this_actor.sleep_for(extra)
        self.send(a, b, nbytes)

    def copy(self, host, seconds: float, copiers: tuple[int, ...]) -> None:
        """Block the calling actor while each of `copiers` copies for `seconds` (at a free core's speed) on
        `host`, their shared memory host, all at once: each an execution there beside the host's other work,
        through the rank's copy lane (a rank copies one message at a time), but none for a rank whose own
        actor is polling now (its spinning core does the copy: MPI's progress loop is what copies)."""
        # the actors woken at this instant run first: a receiver that re-enters its MPI call now (back-to-back
        # messages) is polling, so its own spin does its copy, not a lane's execution beside that spin (three
        # executions on two cores priced back-to-back sends at 1.3x a ping-pong's one way)
        self.sg.this_actor.yield_()
        started = self.sg.Engine.clock
        interleaved = in_request()  # an MPI request's copies: interleaved with their ranks' compute
        lanes = [
            self._copier(rank, host, interleaved) for rank in dict.fromkeys(copiers) if not self.ranks[rank].polling
        ]
        for done in [lane.submit(seconds * host.speed) for lane in lanes]:
            done.acquire()
        left = seconds - (self.sg.Engine.clock - started)
        if left > 0:  # a copier polling: its part takes the line's time on the core it holds
            self.sg.this_actor.sleep_for(left)

    def _copier(self, rank: int, host, interleaved: bool) -> CpuLane:
        """Rank `rank`'s copy lane (a rank copies one message at a time): holding its core where it is bound to
        one (its own or a thread's copies), or interleaved with its compute (an MPI request's)."""
        core = None if interleaved else self.ranks[rank].core
        lane = self.copiers.get((rank, core is not None))
        if lane is None:
            lane = self.copiers[(rank, core is not None)] = CpuLane(self.sg, host, f"copy-lane-{rank}", core=core)
        return lane

    def send(self, a, b, nbytes: int) -> None:
        """Block the calling actor while `nbytes` go from host `a` to host `b`, on the simulation's clock."""
        if self.clock == "simgrid":
            self.sg.Comm.sendto(a, b, nbytes)
            return
        latency, bandwidth = self.route(a, b)
        self.sg.this_actor.sleep_for(latency + nbytes / bandwidth)

    def route(self, a, b) -> tuple[float, float]:
        """The route from `a` to `b` in closed form: its latency and its narrowest link's bandwidth (a host to
        itself: the platform's loopback line)."""
        key = (a.name, b.name)
        if key not in self.routes:
            links, latency = a.route_to(b)
            self.routes[key] = (latency, min(link.bandwidth for link in links)) if links else self.loopback
        return self.routes[key]

    def fail(self, rank: int) -> None:
        """Rank `rank`'s host fails: its actors die; messages to it fail from now on."""
        state = self.ranks[rank]
        state.alive = False
        for actor in [*state.actors, *(actor for actor, done in state.helpers if not done.ready)]:
            actor.kill()

    def now(self) -> float:
        return self.sg.Engine.clock


def bind(state: RankState, helper: bool = False, progress: bool = False) -> None:
    """The calling actor runs for `state`'s rank: as the rank itself, or as one of its helpers (`progress`: an
    MPI request's, whose work MPI's progress engine does inside the rank's own calls)."""
    _local.state = state
    _local.helper = helper
    _local.progress = progress


def in_request() -> bool:
    """Whether the calling actor is an MPI request's helper (a nonblocking send or collective in flight)."""
    return getattr(_local, "progress", False)


def held(core):
    """The core the calling actor's executions hold (`core`, its rank's, or None: they hold none). A thread's
    work (a helper's exchange, under the interpreter's lock) takes turns with the rank's compute; an MPI
    request's is done by the rank's own thread inside its MPI calls (MPICH progresses a nonblocking
    collective at the backward pass's hooks), so it is interleaved with the compute: both share the cores."""
    return None if in_request() else core


SPIN_FLOPS = 1e30  # a poll that outlasts any wait: it is cancelled when the wait ends


def blocked(wait, *args):
    """`wait(*args)` (a blocking acquire or sleep) for the calling actor. A rank's own actor on a host whose
    ranks poll keeps one of its cores busy meanwhile (an execution cancelled when the wait returns), so the
    ranks computing there share the cores with it; a helper, or a rank that blocks, just waits."""
    state = getattr(_local, "state", None)
    if state is None or not state.polls or getattr(_local, "helper", False) or not state.alive:
        return wait(*args)
    state.polling = True  # first: starting the spin is a simcall, and other actors may run meanwhile
    spin = state.cluster.sg.this_actor.exec_async(SPIN_FLOPS)
    try:
        return wait(*args)
    finally:
        state.polling = False
        if state.alive:  # a failed host's actors die mid-wait: their executions went with the host
            spin.cancel()


def _join(wait, *args):
    return wait(*args)


def this_rank() -> RankState:
    state = getattr(_local, "state", None)
    if state is None:
        raise RuntimeError("not inside a simulated rank (scaledl.sim.cluster.bind was not called)")
    return state


def spawn(name: str, target, *args, polls: bool = True):
    """Start `target(*args)` as a helper actor of the calling rank, on its host; returns a Done to wait on.
    `polls` False: waiting for it is joining a thread, not an MPI call, and keeps no core busy."""
    state = this_rank()
    sg = state.cluster.sg
    done = Done(sg, polls)

    work = [target, args]  # emptied once run: a finished helper must not keep its message (a 143 MB W) alive

    def body():
        bind(state, helper=True, progress=polls)
        run, run_args = work
        work.clear()
        try:
            done.value = run(*run_args)
        except BaseException as error:  # an exception must not escape an actor: SimGrid would abort
            done.error = error
        finally:
            del run, run_args
            done.finish()

    state.helpers = [(actor, d) for actor, d in state.helpers if not d.ready]
    state.helpers.append((sg.Actor.create(name, state.host, body), done))
    return done


class Done:
    """Completion of a helper actor: `wait()` (with an optional timeout), `ready`, its value or error."""

    def __init__(self, sg, polls: bool = True):
        self._signal = sg.Semaphore(0)
        self.polls = polls  # waiting for it is an MPI wait (polls on a polling host), not a thread's join
        self.ready = False
        self.value = None
        self.error: BaseException | None = None

    def finish(self) -> None:
        self.ready = True
        self._signal.release()

    def wait(self, timeout: float | None = None) -> bool:
        """True once done; False if `timeout` simulated seconds passed first."""
        if self.ready:
            return True
        wait = blocked if self.polls else _join
        if timeout is None:
            wait(self._signal.acquire)
        elif timeout <= 0 or wait(self._signal.acquire_timeout, timeout):
            return False
        self._signal.release()  # others may wait on it too
        return True

    def result(self):
        self.wait()
        if self.error is not None:
            raise self.error
        return self.value


def simgrid():
    return load()


class CpuLane:
    """An executor on a host (a daemon actor there, serving its owner's requests in order): work charged
    through it shares that host's speed with the host's other executions (SimGrid divides a host among the
    executions running on it). An actor is how an execution runs on another host than its caller's: SimGrid
    3.32's Python `exec_init` with a host deadlocks once several actors use it."""

    def __init__(self, sg, host, name: str, core=None):
        self.sg = sg
        self.jobs: deque = deque()
        self.ready = sg.Semaphore(0)
        self.core = core  # the owning rank's core (RankState.core), held while executing
        sg.Actor.create(name, host, self._serve).daemonize()

    def _serve(self) -> None:
        try:
            while True:
                self.ready.acquire()
                flops, done = self.jobs.popleft()
                on_core(self.core, self.sg.this_actor.execute, flops)
                done.release()
        except self.sg.ActorKilled:  # the simulation ended (daemons are killed then)
            return

    def submit(self, flops: float):
        """Queue an execution of `flops`; the semaphore returned is released when it is done."""
        done = self.sg.Semaphore(0)
        self.jobs.append((flops, done))
        self.ready.release()
        return done

    def execute(self, flops: float) -> None:
        self.submit(flops).acquire()


def on_core(core, run, *args):
    """`run(*args)` (an execution) holding `core`, the rank's one core where it is bound to one (else None):
    its main actor's, its helpers' and its copy lane's executions take turns, first come first served."""
    if core is None:
        return run(*args)
    core.lock()
    try:
        return run(*args)
    finally:
        core.unlock()
