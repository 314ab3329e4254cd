"""A simulated job: every rank an actor on its platform host, the simulated transport installed, one outcome.

`Simulation(platform, ranks, dedicated_master).run(main)` runs `main()` once
per rank (what `mpiexec -n ranks` would start), each as a SimGrid actor bound
to its rank, with scaledl.comm.transport pointing at the simulation. It
returns the job's outcome: the exit status (0; 2 for a user error, which every
rank raised alike or one rank raised mid-run; 130 for an interrupt; the
status of an abort), the one-line error, and the simulated seconds. An
exception escaping an actor would make SimGrid abort the process, so each
actor's body keeps every exception and the first one ends the job: the other
actors are killed, as MPI_Abort kills the other processes.

Timing noise: each host's (its platform file's noise_* properties), drawn per rank from a stream
seeded by `seed` and the rank (scaledl.sim.noise): one seed, one schedule.

Faults and stragglers: `failures` turns hosts off at simulated times (their
actors die; a peer's operation towards them fails as MPI's would, and each
pattern's liveness rules apply); `host_speed` scales hosts' speeds (a slower
host computes longer); `slowdown` stretches one rank's compute (--straggler).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
import traceback
from dataclasses import dataclass, field

from scaledl.comm import timing, transport
from scaledl.errors import Interrupted, UserError
from scaledl.sim.cluster import (
    CLOCKS,
    SIMGRID_LOOPBACK,
    Cluster,
    CpuLane,
    Done,
    RankState,
    SimulatedAbort,
    bind,
    held,
    on_core,
    spawn,
    this_rank,
)
from scaledl.sim.loader import load
from scaledl.sim.mpi import SIMULATED_MPI, Comm
from scaledl.sim.mpi import Exception as MPIError
from scaledl.sim.platform import Platform
from scaledl.sim.provenance import calibration_provenance
from scaledl.sim.replicas import Replicas
from scaledl.sim.roofline import Meter

# SimGrid speaks only of what is critical, and not of a deadlock: the outcome says that in scaledl's words.
ENGINE_ARGS = ("--log=root.thres:critical", "--log=ker_engine.app:file:/dev/null")


def core_factor(info, index: int) -> float:
    """The compute time of the host's `index`-th rank, bound to its core, over the host's price (1: no factors)."""
    factors = info.core_factors if info.bound else ()
    return factors[index % len(factors)] if factors else 1.0


class Helper:
    """A one-worker executor whose worker is a helper actor of the calling rank (an overlapped exchange)."""

    def __init__(self, name: str):
        self.name = name
        self.pending: list[Done] = []

    def submit(self, fn, *args) -> Done:
        done = spawn(self.name, fn, *args, polls=False)  # its result is a thread's future
        self.pending = [d for d in self.pending if not d.ready] + [done]
        return done

    def shutdown(self, wait: bool = True) -> None:
        if wait:
            for done in self.pending:
                done.wait()


class SimulatedTransport:
    """scaledl.comm.transport's interface over a running simulation."""

    name = "simulated"
    simulated = True
    guards_processes = False
    MPI = SIMULATED_MPI

    def __init__(self, simulation: Simulation):
        self.simulation = simulation
        self.sg = simulation.sg

    def clock(self) -> float:
        return self.sg.Engine.clock

    monotonic = clock

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.sg.this_actor.sleep_for(seconds)

    def helper(self, name: str = "scaledl-exchange") -> Helper:
        return Helper(name)

    def meter(self, phase: str):
        meter = this_rank().meter
        return meter.phase(phase) if meter is not None else contextlib.nullcontext()

    def device_behind_pcie(self) -> bool:
        meter = this_rank().meter
        return meter is not None and meter.device.pcie

    def meter_mark(self) -> None:
        meter = this_rank().meter
        if meter is not None:
            meter.mark()

    def complete(self, request, deadline: float, on_timeout, poll: float, spin_s: float) -> None:
        if not request.wait_until(deadline):
            on_timeout()

    def arrival(self, comm, source: int, tag: int, deadline: float, on_timeout, poll: float) -> None:
        if not comm.probe_until(source, tag, deadline):
            on_timeout()

    def abort(self, status: int) -> None:
        raise SimulatedAbort(status)

    def evaluation_threads(self) -> int:
        """The simulation's own threads: every rank lives in this process, which was given that many cores
        (more would contend with the jobs beside it: two LeNet simulations on two cores evaluated at 2 threads
        each took twice as long as at one)."""
        # lazy: the simulation's module imports no torch of its own; the ranks' code has it loaded by now
        import torch

        return torch.get_num_threads()

    def host_name(self) -> str:
        return this_rank().host.name

    def describe(self) -> dict:
        return self.simulation.describe()

    def models(self) -> dict:
        return self.simulation.models


@dataclass
class Outcome:
    status: int = 0
    error: str | None = None  # one line, for a user error or an abort's message already printed
    simulated_s: float = 0.0
    crashed: str | None = None  # a traceback: a bug, not a user error
    wall_s: float = 0.0  # this machine's seconds the simulation took
    cpu_s: float = 0.0  # the process's CPU seconds meanwhile (every actor's thread; unlike wall, blind to load)
    real_compute_s: float = 0.0  # of which the ranks' numerics (their meters' real seconds)


@dataclass
class Simulation:
    platform: Platform
    ranks: int
    dedicated_master: bool
    failures: dict[str, float] = field(default_factory=dict)  # host -> simulated time it fails
    host_speed: dict[str, float] = field(default_factory=dict)  # host -> speed factor (< 1: slower)
    slowdown: dict[int, float] = field(default_factory=dict)  # rank -> compute stretch (--straggler)
    poll_s: float = 2e-5
    seed: int = 0  # the run's: it seeds the hosts' timing noise (scaledl.sim.noise), one schedule per seed
    time_only: bool = False  # priced work is charged, not computed (scaledl.sim.roofline's SkipMode)
    clock: str = "simgrid"  # how a message's time is found (scaledl.sim.cluster.CLOCKS)

    def __post_init__(self):
        self.placement = self.platform.place(self.ranks, self.dedicated_master)
        for host in [*self.failures, *self.host_speed]:
            if host not in self.platform.hosts:
                raise UserError(f"platform {self.platform.name} has no host {host!r}")
        if self.clock not in CLOCKS:
            raise UserError(f"--clock {self.clock}: unknown clock; choose from {', '.join(CLOCKS)}")
        self.sg = None
        self.prices: dict | None = {} if self.time_only else None  # time-only: the ranks share their prices
        self.replicas = Replicas() if self.time_only else None  # time-only: and their large buffers
        self.models: dict = {}  # the ranks' initial models, built once (scaledl.train.setup.initial_model)
        self.outcome = Outcome()
        self.hung: list[int] = []

    def describe(self) -> dict:
        return {
            "kind": "simulated",
            "platform": self.platform.name,
            "platform_file": str(self.platform.path),
            # scaledl calibrate's record of the code, host and time that measured it; None: the file's header says
            "calibration": calibration_provenance(self.platform.path.read_text(errors="replace")),
            "simgrid": self.sg.simgrid_version if self.sg else None,
            "rank_hosts": [h.name for h in self.placement],
            "failures": dict(self.failures),
            "host_speed": dict(self.host_speed),
            "cost_model": (
                "per-operation roofline on the host's device; messages between host buffers (a GPU rank's on its "
                "node's CPU); host-device copies over the PCIe route, in their direction"
            ),
            "noise": {h.name: h.noise.describe() for h in self.placement if not h.noise.quiet},
            "noise_seed": self.seed,
            "polling_hosts": sorted({h.name for h in self.placement if h.polls}),  # waiting ranks keep a core busy
            "time_only": self.time_only,
            "clock": self.clock,
        }

    def run(self, main) -> Outcome:
        one_malloc_arena()
        with _quiet_stderr():  # the bindings announce their thread contexts on the C stream
            self.sg = sg = load()
            engine = sg.Engine([sys.argv[0] or "scaledl", *ENGINE_ARGS])
        try:
            engine.load_platform(str(self.platform.path))
        except (ValueError, RuntimeError) as error:
            raise UserError(f"platform file {self.platform.path}: SimGrid cannot load it ({error})") from None
        cluster = Cluster(
            sg,
            poll_s=self.poll_s,
            segments=segments_of(self.platform),
            replicas=self.replicas,
            clock=self.clock,
            loopback=self.platform.loopback or SIMGRID_LOOPBACK,
        )
        for host, factor in self.host_speed.items():
            sg.Host.by_name(host).set_speed_profile(f"0 {factor}\n", -1)
        on_host: dict[str, int] = {}  # ranks placed on each host so far: a bound rank's core is its index there
        for rank, info in enumerate(self.placement):
            index = on_host[info.name] = on_host.get(info.name, -1) + 1
            host = sg.Host.by_name(info.name)
            memory = sg.Host.by_name(info.cpu_host) if info.cpu_host else host
            state = RankState(cluster, rank, host, info.node, memory_host=memory, polls=info.polls)
            state.core = sg.Mutex() if info.bound else None
            state.world = Comm("world", tuple(range(self.ranks)), rank)
            state.meter = self._meter(
                sg,
                cluster,
                info,
                host,
                self.slowdown.get(rank, 1.0) * core_factor(info, index),
                info.noise.timer(self.seed, rank, info.name),
                state.core,
            )
            cluster.ranks.append(state)
        for state in cluster.ranks:
            state.actors.append(sg.Actor.create(f"rank{state.rank}", state.host, self._body, state, main))
        for host, when in self.failures.items():
            victims = [state.rank for state in cluster.ranks if state.host.name == host]
            sg.Actor.create(f"fail-{host}", sg.Host.by_name(host), _fail_at, sg, cluster, victims, when).daemonize()
        started, cpu = time.perf_counter(), time.process_time()
        with transport.use(SimulatedTransport(self)):
            engine.run()
        self.outcome.wall_s = time.perf_counter() - started
        self.outcome.cpu_s = time.process_time() - cpu
        self.outcome.real_compute_s = sum(state.meter.real_s for state in cluster.ranks)
        if self.hung and self.outcome.status == 0 and self.outcome.error is None:
            ranks = ", ".join(map(str, sorted(self.hung)))
            self.outcome.status = 1
            self.outcome.error = (
                f"the simulated job hung at {sg.Engine.clock:.6g} s: rank(s) {ranks} waited for what no rank would "
                "ever do (on a cluster the job would wait until its time limit)"
            )
        self.outcome.simulated_s = sg.Engine.clock
        return self.outcome

    def _meter(self, sg, cluster: Cluster, info, host, slowdown: float, noise, core=None) -> Meter:
        cpu = self.platform.hosts[info.cpu_host] if info.cpu_host else info
        cpu_host = sg.Host.by_name(cpu.name)

        lane = CpuLane(sg, cpu_host, f"cpu-lane-{info.name}") if cpu_host != host else None

        def charge(seconds: float, on_cpu: bool = False) -> None:
            """An execution the rank pays, stretched by its noise: on its own host, or (`on_cpu`: host work,
            priced at the node's CPU) on the node's CPU host through the rank's lane, where it shares that
            host's speed with the node's other ranks' host work. A rank bound to one core runs it holding
            that core (its main actor's and its threads' executions in turn; an MPI request's interleaved)."""
            if on_cpu and lane is not None:
                lane.execute(noise(seconds) * cpu_host.speed)
            else:
                on_core(held(core), sg.this_actor.execute, noise(seconds) * sg.this_actor.get_host().speed)

        def pcie(nbytes: int, to_device: bool) -> None:
            src, dst = (cpu_host, host) if to_device else (host, cpu_host)
            cluster.send(src, dst, int(nbytes))

        applier: list[CpuLane] = []  # made at the first accumulate into this rank's memory (most ranks get none)

        def apply_here(seconds: float) -> None:
            """Another rank's accumulate into this rank's window: executed on this rank's memory host (by an
            actor there: the caller may be anywhere), beside that host's other work."""
            if not applier:
                applier.append(lane or CpuLane(sg, cpu_host, f"apply-lane-{info.name}"))
            applier[0].execute(noise(seconds) * cpu_host.speed)

        return Meter(
            info.device(), cpu.device(), charge, pcie, slowdown, _TIMER_FILES, self.prices, self.time_only, apply_here
        )

    def _body(self, state: RankState, main) -> None:
        bind(state)
        try:
            with self.replicas.mode() if self.replicas is not None else contextlib.nullcontext():
                main()
        except SimulatedAbort as abort:
            self._end(abort.status, None)
        except UserError as error:
            self._end(2, str(error))
        except Interrupted as interrupt:
            self._end(interrupt.status, None)
        except MPIError as error:  # MPI's default error handler ends the job with the library's line
            self._end(1, f"rank {state.rank}: {error}; the job ends, as MPI's default error handler ends it")
        except self.sg.ActorKilled:
            if state.alive and self.outcome.status == 0 and self.outcome.error is None:
                self.hung.append(state.rank)  # SimGrid kills whoever is left blocked when nothing can move
        except BaseException:  # a bug: kept with its traceback, and the job ends
            self._end(1, None, crashed=traceback.format_exc())

    def _end(self, status: int, error: str | None, crashed: str | None = None) -> None:
        """The first rank to fail decides the outcome; the others are killed (MPI_Abort's twin)."""
        if self.outcome.status == 0 and self.outcome.error is None and self.outcome.crashed is None:
            self.outcome.status, self.outcome.error, self.outcome.crashed = status, error, crashed
            if status != 0:
                self.sg.Actor.kill_all()


def _fail_at(sg, cluster: Cluster, ranks: list[int], when: float) -> None:
    """At simulated time `when`, the host of `ranks` fails: their actors die, their messages fail."""
    sg.this_actor.sleep_until(when)
    for rank in ranks:
        cluster.fail(rank)


# The frames between a `with timer.phase(...)` and the meter: the phase's call site is the first frame outside them.
_TIMER_FILES = (timing.__file__, transport.__file__, __file__)


@contextlib.contextmanager
def _quiet_stderr():
    """SimGrid prints its configuration changes on the C stream; a user sees only what matters."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


M_ARENA_MAX = -8  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20  # a block this large or larger is mapped alone and unmapped when freed


def one_malloc_arena() -> bool:
    """Cap glibc's malloc at one arena for this process, with a fixed mmap threshold; True where both took.
    Every rank is an actor thread of this process, and they compute one at a time. glibc gives threads arenas
    of their own (up to 8 a core), and each arena keeps what its rank's forward and backward freed: a full
    GoogLeNet simulation of 8 ranks held 17.3 GB so, 9.6 GB with one arena (measured here), and one of 64 ranks
    was killed at 22 GB. Within the one arena, glibc's threshold for mapping a block alone rises to the largest
    block freed, so the next rank's activations came from the heap between the ranks' long-lived buffers and
    were never returned: 8 ranks, one step, 8.9 GB peak, 5.5 GB with the threshold held at 1 MiB (the same
    simulated seconds). Elsewhere than glibc, nothing to do."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_ARENA_MAX, 1)) and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        return False


def segments_of(platform) -> dict:
    """Per host with message_segments: (up to bytes, latency beyond the loopback's, bytes scale) per segment, so
    that a message within the host takes its segment's α + β·n over the loopback's line (scaledl.sim.cluster)."""
    found = {}
    for host in platform.hosts.values():
        if host.message_segments:
            latency, bandwidth = platform.loopback
            found[host.name] = [
                (limit, alpha - latency, beta * bandwidth) for limit, alpha, beta in host.message_segments
            ]
    return found
