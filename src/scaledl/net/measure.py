"""`scaledl netbench`: measure α, β (and γ) of the allocation it runs in, and collective bandwidths.

Run under MPI on the ranks a training job would get::

    mpiexec -n N python -m mpi4py -m scaledl.net.measure --out netbench.json

Point to point (ping-pong, buffer `Send`/`Recv` on preallocated numpy arrays):
rank 0 and rank 1, and, when the ranks span several nodes, rank 0 and the
first rank on another node. For each size: `--warmup` untimed round trips,
then `--repeats` timings of `iters` round trips; the one-way time is half
the median round trip (every repeat is kept beside it, `samples_s`). α and β come from a least-squares fit of
t(n) = α + β·n weighted by 1/t(n) (it minimises the *relative* residuals,
so α is set by the small messages and β by the large ones; a plain fit lets
the large sizes decide everything and α comes out negative). The top-level
α, β are the inter-node pair's when there is one, else the intra-node pair's.
`--pairs` adds the small-message latency of every rank pair (min/median/max).

With the collectives, the window epoch (scaledl.net.window: rank 1's exclusive lock, Accumulate, flush, Get
and unlock on rank 0's RMA window: one Async SGD exchange) per size.

Collectives (`Allreduce` sum, `Reduce` sum to rank 0, `Bcast` from rank 0;
float32): per size, the time of one call is the slowest rank's mean over
`iters` back-to-back calls, median over `--repeats`. Reported as nccl-tests
do: algbw = bytes/time, busbw = algbw × 2(P−1)/P for Allreduce and × 1 for
Reduce and Bcast (compare busbw with the bottleneck link).

γ (reduction arithmetic, s/byte) is measured locally: `np.add` of two
16 MiB float32 arrays into one of them, seconds per byte of the result.

Iterations shrink for large messages so that each size moves at most
~256 MiB per repeat (at least 2 iterations). With one rank there is no
pair: the p2p section records why and α, β are null.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import signal
import statistics
import sys
import time
from pathlib import Path

import mpi4py
import numpy as np

import scaledl
from scaledl.atomic import write_text
from scaledl.comm import transport
from scaledl.comm.transport import MPI
from scaledl.errors import UserError, run_command
from scaledl.net.alphabeta import busbw_factor
from scaledl.net.ladder import (
    DEFAULT_ITERS,
    DEFAULT_MAX_SIZE,
    DEFAULT_MIN_SIZE,
    DEFAULT_REPEATS,
    DEFAULT_WARMUP,
    ITER_BYTES,
    default_sizes,
    iters_for,
    parse_size,
)
from scaledl.net.pingpong import COLD_RING_BYTES, pingpong
from scaledl.net.window import window_epochs

OPS = ("allreduce", "reduce", "bcast")
KIND = "scaledl-netbench"
HELP = (
    "measure latency α, inverse bandwidth β and collective times under MPI: "
    "mpiexec -n N python -m mpi4py -m scaledl netbench ..."
)


# ------------------------------------------------------------- arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `netbench` options (no MPI import: building the parser stays cheap)."""
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="JSON",
        help="where to write the measurements (e.g. results/NAME/netbench/local.json)",
    )
    parser.add_argument(
        "--sizes",
        metavar="LIST",
        help="comma-separated message sizes in bytes, multiples of 4, K/M/G suffixes allowed "
        "(default: 8 B ×4 … up to --max-size)",
    )
    parser.add_argument(
        "--max-size",
        default=f"{DEFAULT_MAX_SIZE >> 20}M",
        metavar="SIZE",
        help="largest size of the default ladder (default %(default)s)",
    )
    parser.add_argument(
        "--iters",
        type=int,
        default=DEFAULT_ITERS,
        help="timed operations per repeat, small messages (default %(default)s)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=DEFAULT_WARMUP,
        help="untimed operations per size before timing (default %(default)s)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help="timings per size; the median is kept (default %(default)s)",
    )
    parser.add_argument(
        "--pairs", action="store_true", help="also measure the small-message latency of every rank pair"
    )
    parser.add_argument("--no-collectives", action="store_true", help="point to point only")
    parser.add_argument(
        "--cold", action="store_true",
        help="also the ping-pong from buffers far out of cache (a ring of 256 MB), as p2p_cold",
    )  # fmt: skip
    parser.add_argument(
        "--shuffle", type=int, metavar="SEED", help="measure the sizes in an order drawn from SEED (default: ascending)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the tables")
    sim = parser.add_argument_group("simulated (SimGrid: see docs/simulation.md)")
    sim.add_argument(
        "--platform-file",
        metavar="PLATFORM",
        help="measure a simulated platform instead (a shipped name such as cori_knl, or a file), no mpiexec",
    )
    sim.add_argument("--ranks", type=int, default=2, help="ranks of the simulated measurement (default %(default)s)")


def check_arguments(args: argparse.Namespace) -> list[int]:
    """The message sizes to run; UserError on a bad option (the same on every rank: no MPI involved)."""
    for name in ("iters", "repeats"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        raise UserError(f"--warmup must be >= 0, got {args.warmup}")
    if args.sizes:
        sizes = [parse_size(part) for part in args.sizes.split(",") if part.strip()]
        if not sizes:
            raise UserError("--sizes is empty; give sizes such as 8,1K,1M")
    else:
        max_size = parse_size(args.max_size)
        if max_size < DEFAULT_MIN_SIZE:
            raise UserError(f"--max-size must be at least {DEFAULT_MIN_SIZE} bytes, got {args.max_size}")
        sizes = default_sizes(max_size)
    bad = [s for s in sizes if s <= 0 or s % 4]
    if bad:
        raise UserError(f"message sizes must be positive multiples of 4 bytes (float32 collectives), got {bad[0]}")
    if args.out.exists() and args.out.is_dir():
        raise UserError(f"--out {args.out} is a directory; give a file name such as {args.out / 'netbench.json'}")
    return sorted(set(sizes))


# ------------------------------------------------------------------ fits


def fit_alpha_beta(sizes: list[float], times: list[float]) -> tuple[float, float]:
    """α, β of t(n) = α + β·n by least squares weighted by 1/t (relative residuals), both kept ≥ 0.

    A cost is never negative: where noise tilts the free fit below zero (a sweep of small messages only,
    whose times hardly grow with n), the best fit on that boundary is taken instead (β = 0: α the
    weighted mean time; α = 0: β through the origin).
    """
    if len(sizes) != len(times) or len(sizes) < 2:
        raise ValueError("need at least two (size, time) points to fit α and β")
    if any(t <= 0 for t in times):
        raise ValueError("times must be positive")
    w = [1.0 / t for t in times]
    # minimise Σ (w·(α + β·n − t))²: normal equations of a 2-parameter weighted fit
    sw = sum(wi * wi for wi in w)
    sn = sum(wi * wi * n for wi, n in zip(w, sizes))
    snn = sum(wi * wi * n * n for wi, n in zip(w, sizes))
    st = sum(wi * wi * t for wi, t in zip(w, times))
    snt = sum(wi * wi * n * t for wi, n, t in zip(w, sizes, times))
    det = sw * snn - sn * sn
    if det <= 0:
        raise ValueError("sizes must differ to fit α and β")
    beta = (sw * snt - sn * st) / det
    alpha = (st - beta * sn) / sw
    if beta < 0:
        return st / sw, 0.0
    if alpha < 0:
        return 0.0, snt / snn
    return alpha, beta


MIN_SEGMENT_POINTS = 3  # sizes a segment's α and β are fitted on, at least


def fit_segments(sizes: list[float], times: list[float], pieces: int = 3) -> list[tuple[float, float, float]]:
    """t(n) = α_k + β_k·n on each of up to `pieces` consecutive size ranges (a small-message, a cache-resident and a
    memory-bound regime, wherever this machine's breaks are): the split of the sorted sizes, each piece at least
    MIN_SEGMENT_POINTS sizes, whose pieces' lines (Theil-Sen) leave the least absolute log error. Returns
    (up to bytes, α, β) per piece, the last up to infinity; one piece where there are too few sizes to split."""
    # lazy: scipy's Theil-Sen line, which the rest of netbench needs none of
    from scipy.stats import theilslopes

    points = sorted(zip(sizes, times))
    n = len(points)

    def piece(lo: int, hi: int) -> tuple[float, float, float]:
        """A piece's line by Theil-Sen (medians of slopes: one message that met a detour cannot tilt it), both
        terms kept ≥ 0, and its error: the sum of absolute log ratios of the line to the times."""
        ns, ts = [p[0] for p in points[lo:hi]], [p[1] for p in points[lo:hi]]
        beta = max(float(theilslopes(ts, ns)[0]), 0.0)
        alpha = max(statistics.median(t - beta * s for s, t in zip(ns, ts)), 0.0)
        return alpha, beta, sum(abs(math.log(max(alpha + beta * s, 1e-12) / t)) for s, t in zip(ns, ts))

    best = None
    for cuts in _splits(n, min(pieces, n // MIN_SEGMENT_POINTS)):
        bounds = [0, *cuts, n]
        fitted = [piece(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        error = sum(f[2] for f in fitted)
        if best is None or error < best[0]:
            best = (error, bounds, fitted)
    _, bounds, fitted = best
    limits = [points[hi - 1][0] for hi in bounds[1:-1]] + [float("inf")]
    return [(limit, alpha, beta) for limit, (alpha, beta, _) in zip(limits, fitted)]


def _splits(n: int, pieces: int):
    """Every way to cut n sorted points into `pieces` runs of MIN_SEGMENT_POINTS or more (at least one piece)."""
    if pieces <= 1:
        yield ()
        return
    for first in range(MIN_SEGMENT_POINTS, n - MIN_SEGMENT_POINTS * (pieces - 1) + 1):
        for rest in _splits(n - first, pieces - 1):
            yield (first, *(first + cut for cut in rest))


# ------------------------------------------------------------- measuring


def _median(values: list[float]) -> float:
    return statistics.median(values)


def link_summary(rows: list[dict], a: int, b: int, same_node: bool) -> dict:
    alpha, beta = fit_alpha_beta([r["bytes"] for r in rows], [r["time_s"] for r in rows])
    for r in rows:
        r["fit_time_s"] = alpha + beta * r["bytes"]
    return {
        "ranks": [a, b],
        "same_node": same_node,
        "alpha_s": alpha,
        "beta_s_per_byte": beta,
        "bandwidth_Bps": 1.0 / beta if beta > 0 else None,
        "fit": "t(n) = alpha + beta*n, least squares weighted by 1/t (relative residuals)",
        "table": rows,
    }


def pair_latencies(comm, size: int, iters: int, warmup: int, repeats: int) -> dict | None:
    """Small-message one-way latency of every rank pair (on rank 0; None elsewhere)."""
    nranks = comm.Get_size()
    matrix = [[None] * nranks for _ in range(nranks)]
    for a in range(nranks):
        for b in range(a + 1, nranks):
            rows = pingpong(comm, a, b, [size], iters, warmup, repeats)
            t = comm.bcast(rows[0]["time_s"] if rows else None, root=a)
            matrix[a][b] = matrix[b][a] = t
    if comm.Get_rank() != 0:
        return None
    values = [matrix[a][b] for a in range(nranks) for b in range(a + 1, nranks)]
    return {"bytes": size, "min_s": min(values), "median_s": _median(values), "max_s": max(values), "matrix_s": matrix}


def collective_times(comm, op: str, sizes: list[int], iters: int, warmup: int, repeats: int) -> list[dict] | None:
    """Seconds per call of `op` per size (slowest rank's mean, median over repeats); rows on rank 0."""
    rank, nranks = comm.Get_rank(), comm.Get_size()
    top = max(sizes) // 4
    src = np.ones(top, dtype=np.float32)
    dst = np.zeros(top, dtype=np.float32)
    factor = busbw_factor(op, nranks)

    def call(count: int) -> None:
        s, d = src[:count], dst[:count]
        if op == "allreduce":
            comm.Allreduce(s, d, op=MPI.SUM)
        elif op == "reduce":
            comm.Reduce(s, d if rank == 0 else None, op=MPI.SUM, root=0)
        else:
            comm.Bcast(s, root=0)

    rows = []
    slowest = np.zeros(1)
    for size in sizes:
        count, n_iter = size // 4, iters_for(size, iters)
        for _ in range(warmup):
            call(count)
        samples = []
        for _ in range(repeats):
            comm.Barrier()
            t0 = transport.clock()
            for _ in range(n_iter):
                call(count)
            mine = np.array([(transport.clock() - t0) / n_iter])
            comm.Allreduce(mine, slowest, op=MPI.MAX)
            samples.append(float(slowest[0]))
        t = _median(samples)
        algbw = size / t
        rows.append(
            {
                "bytes": size,
                "iters": n_iter,
                "time_s": t,
                "algbw_Bps": algbw,
                "busbw_Bps": algbw * factor,
                "samples_s": samples,  # every repeat, the median's evidence
            }
        )
    return rows if rank == 0 else None


def measure_gamma(nbytes: int = 16 << 20, repeats: int = 5) -> float:
    """Seconds per byte of a float32 sum a += b (the reduction arithmetic of a collective)."""
    a = np.ones(nbytes // 4, dtype=np.float32)
    b = np.ones(nbytes // 4, dtype=np.float32)
    np.add(a, b, out=a)  # warm the pages
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.add(a, b, out=a)
        samples.append((time.perf_counter() - t0) / nbytes)
    return _median(samples)


# ------------------------------------------------------------------ machine


def cpu_model() -> str | None:
    """The CPU's model name (Linux: /proc/cpuinfo, x86's "model name" or ARM's and MIPS' names for it; elsewhere
    what the platform reports): netbench's machine, run.json's provenance and the benches read this one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def describe_world(comm) -> dict:
    hosts = comm.allgather(transport.current().host_name())
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    per_node = comm.allgather(local.Get_size())
    local.Free()
    return {
        "hosts": sorted(set(hosts)),
        "rank_hosts": hosts,
        "nodes": len(set(hosts)),
        "ranks": comm.Get_size(),
        "ranks_per_node": max(per_node),
        "mpi_library": MPI.Get_library_version().strip().splitlines()[0].strip(),
        "mpi_standard": "{}.{}".format(*MPI.Get_version()),
        "mpi4py": mpi4py.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "cpu_model": cpu_model(),
        "scaledl": scaledl.__version__,
    }


# --------------------------------------------------------------------- run


def netbench(
    comm,
    sizes: list[int],
    *,
    iters: int = DEFAULT_ITERS,
    warmup: int = DEFAULT_WARMUP,
    repeats: int = DEFAULT_REPEATS,
    pairs: bool = False,
    collectives: bool = True,
    cold: bool = False,
    shuffle: int | None = None,
) -> dict | None:
    """All measurements as one JSON-ready dict (on rank 0; None on the other ranks). `cold`: the ping-pong once
    more from buffers far out of cache (`p2p_cold`); `shuffle`: the sizes measured in an order drawn from this
    seed (the same on every rank), so no size finds the caches as the one before it left them."""
    order = sizes if shuffle is None else [sizes[i] for i in np.random.default_rng(shuffle).permutation(len(sizes))]
    rank, nranks = comm.Get_rank(), comm.Get_size()
    machine = describe_world(comm)
    hosts = machine["rank_hosts"]
    links = []
    if nranks >= 2:
        partners = [(1, hosts[1] == hosts[0])]
        remote = next((r for r in range(1, nranks) if hosts[r] != hosts[0]), None)
        if remote is not None and remote != 1:
            partners.append((remote, False))
        for partner, same in partners:
            rows = pingpong(comm, 0, partner, order, iters, warmup, repeats)
            if rank == 0:
                links.append(link_summary(sorted(rows, key=lambda r: r["bytes"]), 0, partner, same))
    cold_rows = pingpong(comm, 0, 1, order, iters, warmup, repeats, cold=True) if cold and nranks >= 2 else None
    pair_info = pair_latencies(comm, min(sizes), iters, warmup, repeats) if pairs and nranks >= 2 else None
    tables = {op: collective_times(comm, op, order, iters, warmup, repeats) for op in OPS} if collectives else {}
    epochs = window_epochs(comm, order, iters, warmup, repeats) if collectives and nranks >= 2 else None
    gamma = measure_gamma() if rank == 0 else None
    if rank != 0:
        return None

    chosen = next((link for link in links if not link["same_node"]), links[0] if links else None)
    if chosen is None:
        p2p_note = "one rank: no point-to-point pair to measure; run with at least 2 ranks for alpha and beta"
    else:
        p2p_note = (
            f"alpha, beta from ranks {chosen['ranks'][0]}-{chosen['ranks'][1]} "
            f"({'same node' if chosen['same_node'] else 'different nodes'})"
        )
    return {
        "kind": KIND,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {k: v for k, v in machine.items() if k != "rank_hosts"},
        "settings": {
            "sizes": sizes,
            "iters": iters,
            "warmup": warmup,
            "repeats": repeats,
            "iter_bytes_cap": ITER_BYTES,
            "shuffle": shuffle,
        },
        "alpha_s": chosen["alpha_s"] if chosen else None,
        "beta_s_per_byte": chosen["beta_s_per_byte"] if chosen else None,
        "gamma_s_per_byte": gamma,
        "p2p": {"note": p2p_note, "links": links},
        "pairs": pair_info,
        "collectives": {
            op: {"busbw_factor": busbw_factor(op, nranks), "table": sorted(rows, key=lambda r: r["bytes"])}
            for op, rows in tables.items()
        },
        **({"window": {"ranks": [1, 0], "table": epochs}} if epochs else {}),
        **({"p2p_cold": {"ranks": [0, 1], "ring_bytes": max(max(sizes), COLD_RING_BYTES),
                         "table": sorted(cold_rows, key=lambda r: r["bytes"])}} if cold_rows else {}),
    }  # fmt: skip


def format_report(result: dict) -> str:
    """The measurements as readable text tables."""
    m = result["machine"]
    lines = [
        f"netbench: {m['ranks']} rank(s) on {m['nodes']} node(s) ({', '.join(m['hosts'])}), "
        f"{m['ranks_per_node']} per node; {m['mpi_library']}"
    ]
    lines.append(f"p2p: {result['p2p']['note']}")
    for link in result["p2p"]["links"]:
        a, b = link["ranks"]
        lines.append(
            f"\nping-pong ranks {a}-{b} ({'same node' if link['same_node'] else 'different nodes'}): "
            f"alpha = {_us(link['alpha_s'])}, beta = {link['beta_s_per_byte']:.4g} s/B "
            f"(1/beta = {_gbs(link['bandwidth_Bps'])})"
        )
        lines.append(f"{'bytes':>12} {'one-way':>12} {'GB/s':>9} {'fit':>12}")
        for r in link["table"]:
            lines.append(
                f"{r['bytes']:>12} {_us(r['time_s']):>12} {r['bandwidth_Bps'] / 1e9:>9.3f} {_us(r['fit_time_s']):>12}"
            )
    if result.get("pairs"):
        p = result["pairs"]
        lines.append(
            f"\nall pairs, {p['bytes']} B: one-way min {_us(p['min_s'])}, median {_us(p['median_s'])}, "
            f"max {_us(p['max_s'])}"
        )
    if result.get("gamma_s_per_byte"):
        lines.append(
            f"gamma (float32 add, local): {result['gamma_s_per_byte']:.4g} s/B ({_gbs(1 / result['gamma_s_per_byte'])})"
        )
    for op, info in result["collectives"].items():
        lines.append(f"\n{op} (busbw = algbw x {info['busbw_factor']:.3g})")
        lines.append(f"{'bytes':>12} {'time':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}")
        for r in info["table"]:
            lines.append(
                f"{r['bytes']:>12} {_us(r['time_s']):>12} {r['algbw_Bps'] / 1e9:>11.3f} {r['busbw_Bps'] / 1e9:>11.3f}"
            )
    if result.get("window"):
        lines.append("\nwindow epoch (rank 1 on rank 0's window: lock, Accumulate, flush, Get, unlock)")
        lines.append(f"{'bytes':>12} {'time':>12}")
        lines.extend(f"{r['bytes']:>12} {_us(r['time_s']):>12}" for r in result["window"]["table"])
    return "\n".join(lines)


def _us(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    if abs(seconds) < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.3f} ms"


def _gbs(bps: float | None) -> str:
    return "—" if not bps else f"{bps / 1e9:.2f} GB/s"


def run(args: argparse.Namespace) -> int:
    """Entry point of `scaledl netbench` (every rank calls it).

    A bad option finalizes MPI on every rank, then raises UserError on rank 0
    only (the CLI prints one line) while the other ranks return 2 silently:
    the job exits non-zero with one line. Validation involves no MPI call, so
    every rank reaches the same verdict and none can hang.
    """
    if args.platform_file is not None:
        return simulated(args)
    # A netbench job gets the training jobs' allocation, Slurm's early warning (SIGUSR1) included;
    # a measurement has nothing to checkpoint, so it runs on until the limit itself.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    comm = MPI.COMM_WORLD
    try:
        sizes = check_arguments(args)
    except UserError:
        # Every rank got the same error: exit collectively and quietly (under `-m mpi4py`,
        # a non-zero exit without MPI_Finalize would MPI_Abort with a line per rank).
        rank = comm.Get_rank()
        MPI.Finalize()
        if rank == 0:
            raise
        return 2
    result = netbench(
        comm,
        sizes,
        iters=args.iters,
        warmup=args.warmup,
        repeats=args.repeats,
        pairs=args.pairs,
        collectives=not args.no_collectives,
        cold=args.cold,
        shuffle=args.shuffle,
    )
    if result is not None:
        write_text(args.out, json.dumps(result, indent=2) + "\n")
        if not args.quiet:
            print(format_report(result), flush=True)
        print(f"wrote {args.out}", flush=True)
    return 0


def simulated(args: argparse.Namespace) -> int:
    """The same measurement of a simulated platform: every rank an actor, every time simulated; γ is the
    platform's (what its cost model charges a reduction), not this machine's."""
    from scaledl.sim.platform import load  # lazy: the simulator's modules load torch (the cost model)
    from scaledl.sim.run import Simulation  # lazy: as above

    sizes = check_arguments(args)
    platform = load(args.platform_file)
    results = []

    def main() -> None:
        result = netbench(
            MPI.COMM_WORLD, sizes, iters=args.iters, warmup=args.warmup, repeats=args.repeats, pairs=args.pairs,
            collectives=not args.no_collectives,
        )  # fmt: skip
        if result is not None:
            results.append(result)

    outcome = Simulation(platform, args.ranks, dedicated_master=False).run(main)
    if outcome.status != 0 or not results:
        raise UserError(f"the simulated netbench on {platform.name} failed: {outcome.error or outcome.crashed}")
    result = results[0]
    device = platform.hosts[outcome_host(platform, args.ranks)]
    result["gamma_s_per_byte"] = 3.0 / device.memory_bw
    result["machine"]["simulated_on"] = platform.name
    write_text(args.out, json.dumps(result, indent=2) + "\n")
    if not args.quiet:
        print(format_report(result), flush=True)
    print(f"wrote {args.out}", flush=True)
    return 0


def outcome_host(platform, ranks: int) -> str:
    """The host of rank 0 of a simulated job of `ranks` ranks without a dedicated master."""
    return platform.place(ranks, dedicated_master=False)[0].name


if __name__ == "__main__":  # `python -m mpi4py -m scaledl.net.measure ...`: the same command as `scaledl netbench`
    from scaledl.cli import CommandParser

    _parser = CommandParser(prog="scaledl netbench", description=HELP)
    add_arguments(_parser)
    sys.exit(run_command("netbench", run, _parser.parse_args()))
