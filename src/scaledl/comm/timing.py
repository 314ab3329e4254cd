"""Where every second goes: the paper's time breakdown (§3), per phase, per step, per rank.

Phases of one rank's main thread (they add up to its wall time):
    data          reading and shuffling the batch on the host (paper part 1, data I/O)
    h2d           batch copy host → device (part 4, CPU–GPU data communication)
    param_copy    weights host ↔ device around a message (part 5, CPU–GPU parameter communication)
    comm          inter-rank parameter messages (part 3); with the collectives' wait
                  probe on (the default) the peers' skew is measured apart, as `wait`
    compute       forward and backward (part 6)
    update        the worker's rule (part 7)
    center_update the master's rule (part 8)
    wait          blocked on peers: a turn (round-robin), a slower peer before a
                  collective (skew), the master, or an overlapped exchange to finish
    eval          an evaluation's pause: the master evaluates the center while every other rank
                  waits (scaledl.train.evaluation), excluded from training time
    checkpoint    writing this rank's part of a checkpoint (scaledl.train.checkpoint), excluded
                  from training time like eval: its cost is reported on its own
Beside them, `overlapped_comm` counts exchange seconds spent on a helper
thread while the main thread computed (Sync EASGD3); it is not part of the sum.

One clock for every phase (the host's, or a simulation's: scaledl.comm.transport);
on a GPU the stream is synchronised at each phase boundary (PhaseTimer's
`sync`, `--device-sync`).
"""

from __future__ import annotations

import numpy as np
import torch

from scaledl.comm import transport

PHASES = ("data", "h2d", "param_copy", "comm", "compute", "update", "center_update", "wait", "eval", "checkpoint")
OFF_CLOCK = ("eval", "checkpoint")  # phases the training clock leaves out

# The time vocabulary (docs/time.md defines each quantity; every table uses these, through `steady_state`).
TRANSFER = ("h2d", "param_copy", "comm")  # moving parameters and data: the paper's communication (parts 3-5)
WAIT = ("wait",)  # blocked on peers
COMPUTE = ("data", "compute", "update", "center_update")  # a rank's own work
WARMUP_STEPS = 5  # steps left out of the steady state (at most a quarter of a run)
STEADY_KEYS = (
    "seconds_per_step",
    "transfer_per_step_s",
    "wait_per_step_s",
    "compute_per_step_s",
    "comm_share",
    "exposed_share",
)


class PhaseTimer:
    """Seconds per phase of one thread, one host clock for every phase.

    On a GPU with `sync` (the default), the thread's current CUDA stream is
    synchronised at every phase boundary before the clock is read, so a phase
    holds its own device work and no host-timed phase starts while earlier
    work is still queued. `sync=False` (`--device-sync none`) leaves kernels
    queued, for head-to-head throughput: then a device phase holds only its
    launches, and only the step and run totals mean what they say.

    `contiguous` (a rank's main thread): each phase starts where the last timed span ended, so the
    loop's own lines between two phases, and a preemption that lands there, are charged to the
    phase that follows, and the phases add up to the wall time at any run length and load. On a
    loaded 2-core machine a preempted rank lost up to 30 ms of a 0.5 s run between phases, which
    no phase covered. `between_phases_s` says how much was charged so, `between_phases_max_s` the
    longest single gap (an operation left outside every phase shows there). A helper thread's timer
    is not contiguous: its idle time between exchanges is nobody's.
    """

    def __init__(self, device: torch.device | None = None, *, sync: bool = True, contiguous: bool = False):
        self.device = device
        self.sync = sync and device is not None and device.type == "cuda"
        self.contiguous = contiguous
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.overlapped_comm = 0.0
        self.start = transport.clock()
        self._mark = self.start  # where the last timed span ended (a contiguous timer's next phase starts here)
        self._stopped: float | None = None  # stop(): where the wall clock ends
        self.between_s = 0.0  # contiguous: the seconds between phases, charged to the phase after them
        self.between_max_s = 0.0  # ... and the longest such gap: an untimed operation would show here
        self._step_marks: list[float] = []
        # Per step only a tuple of the running totals (a step's row is the difference, made by `timeline`):
        # at batch 4 a step is ~2.5 ms, and building arrays there was most of the boundary's cost.
        self._cumulative: list[tuple[float, ...]] = []
        self._base = (0.0,) * len(PHASES)  # the totals before the first step kept here (a checkpoint's)
        self._restored_rows = np.zeros((0, len(PHASES)))  # the rows a checkpoint brought
        self._active: str | None = None

    def _clock(self) -> float:
        if self.sync:
            torch.cuda.current_stream(self.device).synchronize()
        return transport.clock()

    def phase(self, name: str, priced_as: str | None = None) -> _Phase:
        """`with timer.phase(name):` charges the block's seconds to `name` (a simulation's work advances its
        clock inside it, priced as `priced_as`'s work where given: "host_arithmetic" for arithmetic on host
        buffers, which a simulation prices on the node's CPU whatever the rank's device)."""
        return _Phase(self, name, priced_as)

    def restart(self) -> float:
        """Zero everything and start the clock now (training begins); returns the seconds before."""
        before = self._clock() - self.start
        self.__init__(self.device, sync=self.sync, contiguous=self.contiguous)
        return before

    def add(self, name: str, seconds: float) -> None:
        """Charge host-clock seconds measured by the caller up to now (a tight loop timed as a whole)."""
        self.totals[name] += seconds
        if self.contiguous:
            self._mark = self._clock()

    def add_overlapped(self, seconds: float) -> None:
        self.overlapped_comm += seconds

    def mark_step(self, idle: str | None = None) -> None:
        """End of one iteration: record this step's seconds per phase for the timeline.

        idle: charge the step's seconds outside every phase to this phase. A dedicated master's
        loop does so with `wait`: what it does between exchanges and updates is bookkeeping
        while it waits for the workers, too fine-grained to time piece by piece.
        """
        end = self._clock() - self.start
        if idle is not None:
            last = self._step_marks[-1] if self._step_marks else 0.0
            timed = sum(self.totals.values()) - sum(self._last_totals())
            self.totals[idle] += max(0.0, (end - last) - timed)
            self._mark = self.start + end  # the step is covered up to here
        self._step_marks.append(end)
        self._cumulative.append(tuple(self.totals.values()))  # in PHASES order: totals is built from PHASES

    def _last_totals(self) -> tuple[float, ...]:
        return self._cumulative[-1] if self._cumulative else self._base

    def _step_rows(self) -> np.ndarray:
        """Per step, its seconds per phase (float64)."""
        cumulative = np.array([self._base, *self._cumulative], dtype=np.float64)
        return np.concatenate([self._restored_rows, np.diff(cumulative, axis=0)])

    def wall(self) -> float:
        return (transport.clock() if self._stopped is None else self._stopped) - self.start

    def stop(self) -> None:
        """The rank's work is over: its wall time ends here, for a contiguous timer at the end of its last phase
        (gathering the results after it is nobody's training)."""
        self._stopped = self._mark if self.contiguous else self._clock()

    def training(self) -> float:
        """The training clock: wall time less the phases off it (evaluation and checkpoints), the one
        open now included (an evaluation reads this clock from inside its pause)."""
        now = transport.clock()
        open_off_clock = now - self._active_since if self._active in OFF_CLOCK else 0.0
        return now - self.start - sum(self.totals[p] for p in OFF_CLOCK) - open_off_clock

    def state_dict(self) -> dict:
        """The clock and every total so far, for a checkpoint: a resumed run's clock continues from here."""
        return {
            "wall": self.wall(),
            "totals": dict(self.totals),
            "overlapped_comm": self.overlapped_comm,
            "step_marks": list(self._step_marks),
            "step_rows": torch.from_numpy(self._step_rows()),
            "last_totals": torch.tensor(self._last_totals(), dtype=torch.float64),
        }

    def load_state_dict(self, state: dict) -> None:
        self._mark = transport.clock()
        self.start = self._mark - state["wall"]
        self.totals = {p: state["totals"].get(p, 0.0) for p in PHASES}
        self.overlapped_comm = state["overlapped_comm"]
        self._step_marks = list(state["step_marks"])
        self._restored_rows = state["step_rows"].numpy().reshape(-1, len(PHASES)).astype(np.float64)
        self._base = tuple(float(x) for x in state["last_totals"].numpy())
        self._cumulative = []

    def snapshot(self) -> dict[str, float]:
        return {f"{name}_s": seconds for name, seconds in self.totals.items()}

    def timeline(self) -> dict[str, np.ndarray]:
        """Per step: when it ended (seconds since start) and its seconds per phase."""
        rows = self._step_rows().astype(np.float32)
        return {"step_end_s": np.array(self._step_marks, dtype=np.float64), "phase_s": rows}

    def breakdown(self) -> dict[str, float]:
        """Totals, what no phase covers, and the steady-state quantities of this rank (`steady_state`)."""
        phases = self.snapshot()
        wall = self.wall()
        accounted = sum(phases.values())
        timeline = self.timeline()
        return {
            **phases,
            "overlapped_comm_s": self.overlapped_comm,
            "wall_s": wall,
            "unaccounted_s": wall - accounted,
            "between_phases_s": self.between_s,
            "between_phases_max_s": self.between_max_s,
            **steady_state(timeline["step_end_s"], timeline["phase_s"]),
        }


class _Phase:
    """One timed block of a PhaseTimer: a plain context object, cheaper per step than a generator's."""

    __slots__ = ("timer", "name", "priced_as", "t0", "meter")

    def __init__(self, timer: PhaseTimer, name: str, priced_as: str | None = None):
        self.timer, self.name, self.priced_as = timer, name, priced_as or name

    def __enter__(self) -> bool:
        """Whether the block may be left out (a time-only simulation's step priced before: Meter.phase)."""
        timer = self.timer
        if timer._active is not None:
            raise RuntimeError(f"phase {self.name!r} opened inside {timer._active!r}: its seconds would count twice")
        timer._active = self.name
        self.t0 = now = timer._clock()
        if timer.contiguous:  # the loop's own lines since the last phase (and any preemption there) start this one
            gap = now - timer._mark
            timer.between_s += gap
            timer.between_max_s = max(timer.between_max_s, gap)
            self.t0 = timer._mark
        timer._active_since = self.t0
        self.meter = transport.meter(self.priced_as)  # in a simulation, the phase's work advances the simulated clock
        return bool(self.meter.__enter__())

    def __exit__(self, *exc) -> bool | None:
        timer = self.timer
        try:
            return self.meter.__exit__(*exc)
        finally:
            timer._mark = end = timer._clock()
            timer.totals[self.name] += end - self.t0
            timer._active = None


def warmup_steps(steps: int) -> int:
    """Steps left out at the start: WARMUP_STEPS, but at most a quarter of the run."""
    return min(WARMUP_STEPS, steps // 4)


def steady_state(step_end_s, phase_s, warmup: int | None = None) -> dict:
    """Per-step means over one rank's steps after the warm-up, from its timeline.

    seconds_per_step     step duration (wall between step ends) minus its `eval` and `checkpoint` seconds
    transfer_per_step_s  TRANSFER phases per step: the paper's communication
    wait_per_step_s      WAIT per step: blocked on peers
    compute_per_step_s   COMPUTE phases per step
    comm_share           transfer / seconds_per_step (the paper's communication share)
    exposed_share        (transfer + wait) / seconds_per_step: what is neither compute nor hidden
    """
    ends = np.asarray(step_end_s, dtype=np.float64)
    rows = np.asarray(phase_s, dtype=np.float64).reshape(len(ends), len(PHASES))
    warmup = warmup_steps(len(ends)) if warmup is None else warmup
    steps = len(ends) - warmup
    empty = {
        "steady_steps": max(steps, 0),
        "warmup_steps": warmup,
        "seconds_per_step": None,
        "transfer_per_step_s": None,
        "wait_per_step_s": None,
        "compute_per_step_s": None,
        "comm_share": None,
        "exposed_share": None,
    }
    if steps <= 0:
        return empty
    off_clock = rows[warmup:][:, [PHASES.index(p) for p in OFF_CLOCK]].sum(axis=1)
    durations = np.diff(np.concatenate([[0.0], ends]))[warmup:] - off_clock
    kept = rows[warmup:]

    def per_step(names) -> float:
        return float(kept[:, [PHASES.index(n) for n in names]].sum() / steps)

    step_s = float(durations.sum() / steps)
    transfer, wait = per_step(TRANSFER), per_step(WAIT)
    if step_s <= 0:
        return empty
    return {
        "steady_steps": steps,
        "warmup_steps": warmup,
        "seconds_per_step": step_s,
        "transfer_per_step_s": transfer,
        "wait_per_step_s": wait,
        "compute_per_step_s": per_step(COMPUTE),
        "comm_share": transfer / step_s,
        "exposed_share": (transfer + wait) / step_s,
    }
