"""Calibrate a platform file to this machine: one host, its network from netbench, its compute from a measured step.

    scaledl calibrate --netbench bench/raw/netbench.json --out laptop.xml [--model lenet --batch 64]

What it measures, on one core (OMP_NUM_THREADS=1, as every rank runs), alone or, with `--busy N`, while N
other processes run the same step on the other cores (as a job's ranks do: every core busy):

    memory_bw    a float32 add over arrays far larger than the caches: 3 × 4 bytes per element
    op_overhead  one PyTorch operation on a one-element tensor (the dispatch every operation pays)
    shapes       how a convolution's or matrix product's rate depends on its shape, and a convolution's cost
                 per call: micro-benchmarks over a grid of shapes none of the models has (scaledl.sim.gemm_shapes)
    speed        the FLOP rate at which the cost model's roofline (scaledl.sim.roofline) prices the
                 training loop's compute phase (its forward_backward, on a batch in the loop's layout,
                 with the loop's batch change and update between two steps: LoopStep) exactly as long as its
                 steady mean here, with the shapes' curve in place (with --per-core: on an average core)
    core_factors with --per-core: each core's step over their mean, this process bound to it and the busy
                 ones to the others (`per_core_steps`): a virtual machine's vCPUs need not run at one speed,
                 and a rank bound to the slow one makes its peers wait. Off by default: on this project's
                 2-core VM the slower core changed from one minute to the next (docs/simulation.md)
    noise_cv     the spread of the step's repeated timings (robust_cv)
    detours      the timings far above the rest (`detours`): how often per second, and their mean excess
    network      α and 1/β of netbench's α-β fit (a `scaledl netbench` result, or the record
                 bench/run_all.py keeps of one), as the host's loopback link

The file it writes is the shipped laptop platform's format; its header says
what was measured, when, from which netbench, and how many other cores were busy
(a line `busy: N other process(es) ran the same step`, read back by `calibration_load`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform as host_platform
import re
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from scaledl.atomic import write_text
from scaledl.errors import UserError
from scaledl.models import build_model
from scaledl.net.measure import MIN_SEGMENT_POINTS, fit_alpha_beta, fit_segments
from scaledl.sim import gemm_shapes


def netbench_result(path: Path) -> dict:
    """A `scaledl netbench` result, or the one inside its bench/raw record; unreadable is one line."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"--netbench {path}: cannot read it ({error})") from None
    return data.get("meta", {}).get("netbench", data)


def cold_table(result: dict) -> list[dict]:
    """The cold ping-pong's rows (bytes, time_s) of a netbench result; [] where it was not measured."""
    return (result.get("p2p_cold") or {}).get("table") or []


def netbench_alpha_beta(path: Path) -> tuple[float, float, str]:
    """α (s), β (s/B) and which ping-pong they were fitted on, from a netbench result or its bench/raw record:
    the cold one where it was measured (`scaledl netbench --cold`: a training step's messages leave from buffers
    its update wrote through, not from the same few kilobytes every time), else the record's own fit."""
    result = netbench_result(path)
    cold = cold_table(result)
    if len({row["bytes"] for row in cold}) >= 2:
        alpha, beta = fit_alpha_beta([r["bytes"] for r in cold], [r["time_s"] for r in cold])
        if beta > 0:  # else the cold sizes never showed the bandwidth (noise flattened them): the hot fit's
            return alpha, beta, COLD
    try:
        alpha, beta = float(result["alpha_s"]), float(result["beta_s_per_byte"])
    except (KeyError, TypeError):
        raise UserError(
            f"--netbench {path}: no alpha_s and beta_s_per_byte (run `scaledl netbench --out FILE`)"
        ) from None
    if beta <= 0:
        largest = max((row["bytes"] for row in cold), default=0)
        raise UserError(
            f"--netbench {path}: its times do not grow with the message size (β = 0; largest cold message "
            f"{largest} B), so no bandwidth can be fitted: measure larger messages (netbench --max-size 4M)"
        )
    return alpha, beta, HOT


def netbench_segments(path: Path) -> list[tuple[float, float, float]] | None:
    """The cold ping-pong's α-β line per size regime (scaledl.net.measure.fit_segments), where it has enough sizes
    to split (two regimes of MIN_SEGMENT_POINTS sizes at least); else None (one line, the loopback's)."""
    cold = cold_table(netbench_result(Path(path)))
    if len({row["bytes"] for row in cold}) < 2 * MIN_SEGMENT_POINTS:
        return None
    segments = fit_segments([r["bytes"] for r in cold], [r["time_s"] for r in cold])
    return segments if len(segments) > 1 else None


def segment_fields(segments) -> dict:
    """The template's lines for `segments`: a header sentence and the host's message_segments property."""
    if not segments:
        return {"segments_text": "", "segments_prop": ""}
    value = ";".join(f"{limit:.12g}:{alpha:.6g}:{beta:.6g}" for limit, alpha, beta in segments)
    reach = [f"up to {limit:g} B" if limit != float("inf") else "above" for limit, _, _ in segments]
    pieces = "; ".join(f"{r}: {alpha:.3g} s + n × {beta:.3g} s/B" for r, (_, alpha, beta) in zip(reach, segments))
    return {
        "segments_text": f";\n                a message priced by its size's regime (message_segments): {pieces}",
        "segments_prop": f'\n      <prop id="message_segments" value="{value}"/>',
    }


HOT, COLD = "hot", "cold"  # which ping-pong a calibrated network was fitted on (its header's `network` line)


def timings(fn, repeats: int, warmup: int = 3) -> list[float]:
    """Seconds of each of `repeats` calls of `fn`, after `warmup` untimed ones; where `fn` has a `between`
    (a LoopStep's), it runs untimed before each call, as the loop's other phases run between its computes."""
    between = getattr(fn, "between", None) or (lambda: None)
    for _ in range(warmup):
        between()
        fn()
    times = []
    for _ in range(repeats):
        between()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _median_seconds(fn, repeats: int, warmup: int = 3) -> float:
    return statistics.median(timings(fn, repeats, warmup))


def robust_cv(times: list[float]) -> float:
    """The spread of repeated timings as a coefficient of variation, from the interquartile range (a normal's
    IQR is 1.349 σ) over the median: a rare detour (what `detours` counts) does not inflate it."""
    q1, _, q3 = statistics.quantiles(times, n=4)
    return (q3 - q1) / 1.349 / statistics.median(times)


def memory_bandwidth(elements: int = 1 << 24) -> float:
    import torch  # here: `scaledl calibrate --help` needs none of it

    a, b, c = torch.rand(elements), torch.rand(elements), torch.empty(elements)
    return 3 * 4 * elements / _median_seconds(lambda: torch.add(a, b, out=c), 10)


def op_overhead(ops: int = 2000) -> float:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    import torch

    a, b, c = torch.zeros(1), torch.zeros(1), torch.empty(1)

    def many() -> None:
        for _ in range(ops):
            torch.add(a, b, out=c)

    return _median_seconds(many, 5) / ops


LOOP_BATCHES = 8  # distinct batches the calibration cycles through: each step reads one not read the step before


class LoopStep:
    """The training loop's compute phase as a callable: `forward_backward` (scaledl.train.loop) on the flat
    parameters the loop trains, on a batch as the loader and the normaliser hand it over (uint8 rows made
    float32 in the loop's layout: channels-last on a CPU, where oneDNN's convolutions run about twice as fast
    as on the NCHW batch this once timed). `between` is what the loop does between two computes, untimed: the
    next batch normalised from its rows and the SGD step on the flat parameters. Timed back to back on one
    batch, with nothing between, the step ran 5-6 % faster than with them (LeNet, batch 64, one thread): the
    batch, the gradients and the weights were still in the caches, as they are not in the loop."""

    def __init__(self, model_name: str, batch: int, shape=(1, 28, 28), classes: int = 10):
        # lazy: what this subcommand computes with; --help and the other subcommands need none of it
        import torch

        # lazy, as torch above: the loop's own step, flat parameters, normaliser and update rule
        from scaledl.algorithms import rules
        from scaledl.comm.flat import FlatParams
        from scaledl.data.loader import Normalizer  # lazy, as torch above
        from scaledl.train.loop import forward_backward  # lazy, as torch above

        torch.manual_seed(0)
        self.model = build_model(model_name, shape, classes)
        self.params = FlatParams(self.model)
        self.normalize = Normalizer([0.5] * shape[0], [0.25] * shape[0], "cpu")
        self.rows = [
            (torch.randint(0, 256, (batch, *shape), dtype=torch.uint8), torch.randint(0, classes, (batch,)))
            for _ in range(LOOP_BATCHES)
        ]
        self._forward_backward, self._sgd = forward_backward, rules.sgd_
        self.turn = 0
        self.x, self.y = self.normalize(*self.rows[0])

    def __call__(self) -> None:
        self._forward_backward(self.model, self.params, self.x, self.y, 0.0)

    def between(self) -> None:
        # a step so small the weights stay where they are, but the loop's reads and writes of them
        self._sgd(self.params.data, self.params.grad, 1e-9)
        self.turn = (self.turn + 1) % LOOP_BATCHES
        self.x, self.y = self.normalize(*self.rows[self.turn])


def loop_step(model_name: str, batch: int, shape=(1, 28, 28), classes: int = 10) -> LoopStep:
    """The loop's compute phase, with what runs between two of its calls (LoopStep)."""
    return LoopStep(model_name, batch, shape, classes)


def _keep_busy(model_name: str, batch: int, started, stop) -> None:
    """A background process of `busy_cores`: the same step, one thread, until `stop` is set."""
    import torch  # here: a process of its own, and --help needs none of it

    torch.set_num_threads(1)
    step = loop_step(model_name, batch)
    step()
    started.release()
    while not stop.is_set():
        step.between()
        step()


@contextlib.contextmanager
def busy_cores(count: int, model_name: str, batch: int):
    """`count` other processes running the same step as fast as they can (one thread each) while the block
    runs: the load a job's other ranks put on the machine's other cores and shared caches. Yields their pids."""
    if count <= 0:
        yield []
        return
    ctx = multiprocessing.get_context("spawn")
    started, stop = ctx.Semaphore(0), ctx.Event()
    workers = [
        ctx.Process(target=_keep_busy, args=(model_name, batch, started, stop), daemon=True) for _ in range(count)
    ]
    for w in workers:
        w.start()
    try:
        for _ in workers:
            if not started.acquire(timeout=300):
                raise UserError("calibrate --busy: a background process did not start its step within 5 minutes")
        yield [w.pid for w in workers]
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
            if w.is_alive():
                w.terminate()


def can_bind(cores: int) -> bool:
    """Whether this process can be bound to each of `cores` cores in turn (sched_setaffinity, enough of them)."""
    return hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= cores


def per_core_steps(step, cores: int, busy_pids: list[int], repeats: int = 30) -> list[float] | None:
    """The median seconds of `repeats` steps with this process bound to each of the first `cores` cores in turn
    and the busy processes to the others, as a launcher binds rank i to core i; None where this system binds
    no process (no sched_setaffinity) or offers fewer cores."""
    if not can_bind(cores):
        return None
    mine = os.sched_getaffinity(0)
    usable = sorted(mine)[:cores]
    medians = []
    try:
        for core in usable:
            others = [c for c in usable if c != core] or usable
            os.sched_setaffinity(0, {core})
            for i, pid in enumerate(busy_pids):
                os.sched_setaffinity(pid, {others[i % len(others)]})
            medians.append(statistics.median(timings(step, repeats)))
    finally:
        os.sched_setaffinity(0, mine)
        for pid in busy_pids:
            with contextlib.suppress(OSError):  # it may have ended
                os.sched_setaffinity(pid, mine)
    return medians


BUSY_LINE = re.compile(r"busy: (\d+) other process\(es\) ran the same step")


def calibration_load(header: str) -> int | None:
    """How many other processes ran the step while a platform file's compute was calibrated: its `busy:` line's
    count; None for a file without one (calibrated before `--busy` existed, or written by hand)."""
    found = BUSY_LINE.search(header)
    return int(found.group(1)) if found else None


def step_seconds_and_counts(model_name: str, batch: int, shape=(1, 28, 28), classes: int = 10):
    """The steady mean seconds of one forward and backward (steady_seconds), the step itself (to price at a FLOP
    rate), and its timings (their spread: robust_cv; their detours: `detours`), from the first quiet try
    (quiet_timings)."""
    step = loop_step(model_name, batch, shape, classes)
    times = quiet_timings(step)
    return steady_seconds(times), step, times


DETOUR_SPREADS = 4  # a timing this many robust spreads (at least 10 %) above the median was interrupted


def detour_cut(times: list[float]) -> float:
    """The timing above which an execution was interrupted: DETOUR_SPREADS robust spreads (at least 10 %) above
    the median."""
    return statistics.median(times) * (1 + max(DETOUR_SPREADS * robust_cv(times), 0.1))


def steady_seconds(times: list[float]) -> float:
    """The mean of the timings at or under the detour cut: the price a simulation scales by its noise of mean one
    (the detours it adds apart), as the loop's mean over its steady steps is. The median, which this once was,
    sits under that mean by the spread's skew (1-3 % here)."""
    cut = detour_cut(times)
    return statistics.fmean(t for t in times if t <= cut)


def detours(times: list[float]) -> tuple[float, float]:
    """The operating system's detours in repeated timings of one execution: those above the median by more than
    DETOUR_SPREADS robust spreads (at least 10 %), as (detours per second of timing, their mean excess in
    seconds); (0, 0) where none is."""
    median, cut = statistics.median(times), detour_cut(times)
    excess = [t - median for t in times if t > cut]
    return (len(excess) / sum(times), statistics.fmean(excess)) if excess else (0.0, 0.0)


MAX_STEP_CV = 0.3  # a quiet machine gave 0.05-0.18 here, with or without --busy; one running a test suite beside, 0.40


QUIET_WAIT_S = 60.0  # how long a calibration keeps trying for a quiet stretch before it gives up
QUIET_PAUSE_S = 2.0  # between tries: a short load (another job's start, a compile) passes


def quiet_timings(fn, repeats: int = 40, wait_s: float = QUIET_WAIT_S, pause_s: float = QUIET_PAUSE_S) -> list[float]:
    """`repeats` timings of `fn` from the first try whose spread is at most MAX_STEP_CV, trying again for up to
    `wait_s` seconds: another process's burst (a job starting beside it) spoils one try, not the calibration.
    Where no try was quiet, the quietest one, which `refuse_a_noisy_step` then refuses."""
    deadline = time.monotonic() + wait_s
    quietest = timings(fn, repeats)
    while robust_cv(quietest) > MAX_STEP_CV and time.monotonic() < deadline:
        time.sleep(pause_s)
        again = timings(fn, repeats, warmup=1)
        quietest = min(quietest, again, key=robust_cv)
    return quietest


def refuse_a_noisy_step(measured: float, cv: float) -> None:
    """A step whose timings spread more than MAX_STEP_CV was measured while something else ran on the machine:
    its median is that load's, and every price solved from it would be (a twin calibrated beside a test run
    priced LeNet's step at 22.9 ms against 11.9 ms quiet). Refused in one line, to be measured again."""
    if cv > MAX_STEP_CV:
        raise UserError(
            f"the measured step ({measured * 1e3:.3g} ms) spread too much to calibrate on (robust cv {cv:.2f} > "
            f"{MAX_STEP_CV}): something else ran through every try for {QUIET_WAIT_S:.0f} s; calibrate again on "
            "a quiet machine"
        )


def solve_speed(step, measured: float, memory_bw: float, overhead: float, shapes: dict | None = None) -> float:
    """The FLOP rate at which the roofline price of `step` equals `measured` (bisection on a log scale), with the
    shapes' curve and a convolution's cost per call of `shapes` (gemm_shapes.fit) where given."""
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    from scaledl.sim.roofline import Device, OpCounter

    halves, per_call = (shapes["halves"], shapes["conv_overhead"]) if shapes else (None, None)

    def price(flops_per_s: float) -> float:
        counter = OpCounter(Device("calibration", flops_per_s, 1.0, memory_bw, overhead, False, halves, per_call))
        with counter:
            step()
        return counter.seconds

    lo, hi = 1e8, 1e14
    if price(hi) > measured:
        raise UserError(
            f"the measured step ({measured * 1e3:.3g} ms) is shorter than its memory traffic and per-operation "
            "overhead allow: measure again on an idle machine"
        )
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if price(mid) > measured else (lo, mid)
    return (lo * hi) ** 0.5


TEMPLATE = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<!--
  {name}: this machine as one host ({cores} cores; ranks share them), calibrated {date}
  ({cpu}, torch {torch}) by `scaledl calibrate`.
  provenance: code {code} commit {commit} host {host} at {stamp}
  (the code whose loop it timed and whose cost model it solved against; a simulation by other code refuses it)

  Sources (measured on one core; busy: {busy} other process(es) ran the same step meanwhile):
    network     loopback latency and bandwidth = netbench's alpha {alpha:.3g} s and 1/beta {bw:.3g} B/s
                ({netbench}), fitted on the {fitted} ping-pong{segments_text}
    speed       {speed:.4g} FLOP/s: the rate at which the cost model prices the training loop's compute phase
                ({model}'s forward and backward at batch {batch}, on a batch in the loop's layout, the loop's
                batch change and update between two steps) as long as the {step_ms:.3g} ms measured here (the
                mean of the timings under the detours' cut; efficiency 1: the speed is effective, at large
                shapes; smaller ones by the shapes' curve below)
    memory_bw   {mem:.4g} B/s: a float32 add over 64 MB arrays
    op_overhead {overhead:.3g} s: one PyTorch operation on a one-element tensor
    shapes      a convolution's or matrix product's efficiency × d / (d + half) per dimension of its product, halves
                {half_rows:.3g} rows, {half_columns:.3g} columns, {half_depth:.3g} depth, and {conv_overhead:.3g} s per
                convolution: fitted on {shape_count} micro-benchmarks of shapes no model has (geometric-mean error
                {shape_error:.0%}; scaledl.sim.gemm_shapes)
    noise_cv    {cv:.3g}: the spread of 40 timings of that step (interquartile range / 1.349 / median)
    detours     {detour_rate:.3g} per second of execution, {detour_s:.3g} s each: those timings more than 4 spreads
                (at least 10 %) above the median, counted per second of timing, and their mean excess
    waiting     polls: a rank blocked in MPI keeps a core busy (MPICH's and Open MPI's blocking calls spin by
                default), so more ranks than cores slow the computing ones
    binding     core: each rank is bound to one core (the launcher binds a rank to its core), so its helper
                thread's exchange and its shared-memory copies take turns with its forward and backward pass
{cores_text}-->
<platform version="4.1">
  <config>
    <prop id="network/model" value="CM02"/>
    <prop id="network/crosstraffic" value="0"/>
    <prop id="network/loopback-lat" value="{alpha:.6g}"/>
    <prop id="network/loopback-bw" value="{bw:.6g}"/>
  </config>
  <zone id="{name}" routing="Full">
    <host id="{name}" speed="{speed:.6g}f" core="{cores}">
      <prop id="role" value="device"/>
      <prop id="slots" value="64"/>
      <prop id="efficiency" value="1"/>
      <prop id="memory_bw" value="{mem:.6g}Bps"/>
      <prop id="op_overhead" value="{overhead:.6g}s"/>
      <prop id="gemm_half_rows" value="{half_rows:.6g}"/>
      <prop id="gemm_half_columns" value="{half_columns:.6g}"/>
      <prop id="gemm_half_depth" value="{half_depth:.6g}"/>
      <prop id="conv_overhead" value="{conv_overhead:.6g}s"/>{segments_prop}
      <prop id="noise_cv" value="{cv:.3g}"/>
      <prop id="noise_detour_rate" value="{detour_rate:.3g}"/>
      <prop id="noise_detour" value="{detour_s:.3g}s"/>
      <prop id="waiting" value="polls"/>
      <prop id="binding" value="core"/>{cores_prop}
    </host>
  </zone>
</platform>
"""


def calibrate(
    netbench: Path,
    model: str,
    batch: int,
    cores: int,
    name: str,
    busy: int = 0,
    by_segment: bool = False,
    per_core: bool = False,
) -> tuple[str, dict]:
    # lazy: what this subcommand computes with; --help and the other subcommands need none of it
    import torch

    from scaledl.train.provenance import code_state  # lazy: it imports torch and MPI's proxy

    torch.set_num_threads(1)
    if per_core and not can_bind(cores):  # before a minute of measuring
        raise UserError("calibrate --per-core: this system cannot bind a process to each of the cores; leave it off")
    alpha, beta, fitted = netbench_alpha_beta(netbench)
    segments = netbench_segments(netbench) if by_segment and fitted == COLD else None
    if segments:  # the loopback's line under every segment: each adds its own latency over it
        alpha = min(alpha, *(a for _, a, _ in segments))
    mem = memory_bandwidth()
    overhead = op_overhead()
    micro = gemm_shapes.measure()
    shapes = gemm_shapes.fit(micro, overhead, mem)
    with busy_cores(busy, model, batch) as busy_pids:  # the step alone, or with every other core running it too
        measured, step, times = step_seconds_and_counts(model, batch)
        on_cores = per_core_steps(step, cores, busy_pids) if per_core else None
    cv = robust_cv(times)
    refuse_a_noisy_step(measured, cv)
    detour_rate, detour_s = detours(times)
    if on_cores:  # a bound rank's speed: an average core's, and each core's factor beside it
        measured = statistics.fmean(on_cores)
    speed = solve_speed(step, measured, mem, overhead, shapes)
    values = {
        "name": name,
        "cores": cores,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "stamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host_platform.node() or "unknown",
        **_code_fields(code_state()),
        "cpu": host_platform.processor() or host_platform.machine(),
        "torch": torch.__version__,
        "alpha": alpha,
        "bw": 1.0 / beta,
        "netbench": netbench.name,
        "fitted": fitted,
        **segment_fields(segments),
        "speed": speed,
        "model": model,
        "batch": batch,
        "step_ms": measured * 1e3,
        "mem": mem,
        "overhead": overhead,
        "half_rows": shapes["halves"][0],
        "half_columns": shapes["halves"][1],
        "half_depth": shapes["halves"][2],
        "conv_overhead": shapes["conv_overhead"],
        "shape_count": len(micro),
        "shape_error": shapes["error"],
        "cv": cv,
        "detour_rate": detour_rate,
        "detour_s": detour_s,
        "busy": busy,
        **core_fields(on_cores),
    }
    return TEMPLATE.format(**values), values


def core_fields(on_cores: list[float] | None) -> dict:
    """The template's core_factors line and property from the step's median on each core (none: not measured)."""
    if not on_cores:
        return {"core_factors": None, "cores_text": "", "cores_prop": ""}
    mean = statistics.fmean(on_cores)
    factors = ",".join(f"{t / mean:.4g}" for t in on_cores)
    steps = ", ".join(f"{t * 1e3:.3g}" for t in on_cores)
    return {
        "core_factors": factors,
        "cores_text": f"    core_factors {factors}: each core's step over their mean ({steps} ms), this process "
        "bound to it in turn; the speed above is an average core's\n",
        "cores_prop": f'\n      <prop id="core_factors" value="{factors}"/>',
    }


def _code_fields(state: dict) -> dict:
    """The provenance line's code and commit (with `+dirty` where the checkout had uncommitted changes)."""
    commit = state.get("commit") or "none"
    return {"code": state["version"], "commit": commit[:12] + ("+dirty" if state.get("dirty") else "")}


HELP = "calibrate a simulated platform to this machine: its network from netbench, its compute from a measured step"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--netbench", type=Path, required=True, help="a scaledl netbench result or its bench record")
    parser.add_argument("--out", type=Path, required=True, help="the platform file to write")
    parser.add_argument("--model", default="lenet")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--cores", type=int, default=2, help="cores the ranks share (default %(default)s)")
    parser.add_argument("--name", default="laptop", help="the host's and the zone's name (default %(default)s)")
    parser.add_argument(
        "--segments",
        action="store_true",
        help="price a message within the host by its size's regime, fitted on the cold ping-pong "
        "(message_segments); default one α-β line (docs/simulation.md says which validates better here)",
    )
    parser.add_argument(
        "--per-core",
        action="store_true",
        help="also time the step bound to each core and write the cores' factors (core_factors); default one "
        "speed for every core",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="time the step while N other processes run it too (every core busy, as in a job: N = cores - 1); "
        "default %(default)s, the step alone",
    )


def run(args: argparse.Namespace) -> int:
    if args.busy < 0:
        raise UserError("--busy: a number of other processes, 0 or more")
    text, values = calibrate(
        args.netbench, args.model, args.batch, args.cores, args.name, args.busy, args.segments, args.per_core
    )
    write_text(args.out, text)
    print(
        json.dumps(
            {
                k: values[k]
                for k in (
                    *("alpha", "bw", "speed", "mem", "overhead", "step_ms", "cv", "detour_rate", "detour_s"),
                    *("busy", "core_factors"),
                )
            }
        )
    )
    return 0
