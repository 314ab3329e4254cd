"""The simulated cluster against this machine and against the α-β model, and what a simulation costs.

    python bench/bench_simulation.py [--rounds 3] [--warmup 10] [--steps 30] [--mnist FILE]
                                     [--raw bench/raw/simulation.json] [--render] [--no-doc]

Three tables from one record: (1) validation, each message pattern at P = 2 measured under mpiexec and
simulated on the `laptop` platform, paired per round, goal within ±20 % (per phase: bench_phases.py);
(2) the simulated collectives on cori_knl at P = 8…64 beside scaledl.net.alphabeta's prediction
(deterministic, one run each); (3) the simulator's wall time against the compute it contains, goal ≤ 1.3×,
and with --mnist a P = 8 run to its target. The page's words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "simulation"
TITLE = "The simulated cluster: validation, collectives, cost"
BUDGET_S = 40 * 60
GOAL = 0.20  # simulated within ±20 % of measured
COST_GOAL = 1.3  # a simulation's wall ≤ 1.3 × the real compute it contains
PATTERNS = {  # cell → (algorithm, ranks at P = 2)
    "round robin (easgd)": ("easgd", 3),
    "FCFS window (async_easgd)": ("async_easgd", 3),
    "lock-free window (hogwild_easgd)": ("hogwild_easgd", 3),
    "collectives (sync_easgd)": ("sync_easgd", 2),
    "collectives (sync_sgd)": ("sync_sgd", 2),
}
SIDES = ("measured", "simulated")
COLLECTIVE_SIZES = (1024, 1 << 20, 64 << 20)
COLLECTIVE_RANKS = (8, 16, 32, 64)


def simulate_command(platform: str, ranks: int, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "scaledl", "simulate", "--platform-file", platform, "--ranks", str(ranks), *args]


def run_simulated(platform: str, ranks: int, train_args: list[str]) -> dict:
    """Run `scaledl simulate`; the cost line it prints (simulated_s, wall_s, real_compute_s) and the process wall."""
    t0 = time.monotonic()
    proc = subprocess.run(simulate_command(platform, ranks, train_args), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"scaledl simulate failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("simulation: "))
    return {**json.loads(line.removeprefix("simulation: ")), "process_wall_s": time.monotonic() - t0}


def train_args(data: Path, out: Path, algorithm: str, warmup: int, steps: int) -> list[str]:
    """The arguments bench.common.train gives `scaledl train`, for the simulated twin of its run."""
    total = warmup + steps
    argv = common.train_argv(data, out, algorithm, max_steps=total, eval_every=total + 1, batch_size=64, threads=1)
    return argv[3:]  # the options, without `-m scaledl train`


# ------------------------------------------------------------------ 1. validation
def validation_cells() -> list[str]:
    return [f"{pattern}: {side}" for pattern in PATTERNS for side in SIDES]


def measure_validation(args, data: Path, tmp: Path) -> dict:
    def measure_one(cell: str, r: int, i: int):
        pattern, side = cell.rsplit(": ", 1)
        algorithm, ranks = PATTERNS[pattern]
        out = tmp / f"v-r{r}-{i}"
        if side == "measured":
            state = common.train(ranks, data, out, algorithm=algorithm, warmup=args.warmup, steps=args.steps)
        else:
            run_simulated("laptop", ranks, train_args(data, out, algorithm, args.warmup, args.steps))
            state = common.steady_state(out, args.warmup)
        return state["seconds_per_step"], {"comm_share": state.get("comm_share")}

    return common.rotating_rounds(NAME, validation_cells(), args.rounds, measure_one)


# ------------------------------------------------------------------ 2. collectives
COLLECTIVES_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from scaledl.comm import transport
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    P, sizes = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")]
    times = {}

    def main():
        MPI = transport.MPI
        comm, clock = MPI.COMM_WORLD, transport.clock
        r = comm.Get_rank()
        latencies = []  # α: an empty message from rank 0 to each other rank, the mean over them
        for peer in range(1, P):
            comm.Barrier()
            t0 = clock()
            if r == 0:
                comm.Send(np.zeros(0, dtype=np.uint8), dest=peer)
            elif r == peer:
                comm.Recv(np.zeros(0, dtype=np.uint8), source=0)
                latencies.append(clock() - t0)
        found = comm.gather(latencies, root=0)
        if r == 0:
            times["alpha"] = float(np.mean([x for part in found for x in part]))
        for n in sizes:
            x = np.ones(n // 4, dtype=np.float32)
            for op in ("allreduce", "bcast", "reduce"):
                comm.Barrier()
                t0 = clock()
                if op == "allreduce":
                    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
                elif op == "bcast":
                    comm.Bcast(x, root=0)
                else:
                    comm.Reduce(x, x.copy() if r == 0 else None, op=MPI.SUM, root=0)
                spent = comm.allreduce(clock() - t0, op=MPI.MAX)
                times[f"{op} {n}"] = spent

    outcome = Simulation(load("cori_knl"), P, False).run(main)
    assert outcome.status == 0, outcome
    print(json.dumps(times))
    """
)


def measure_collectives(tmp: Path) -> dict:
    script = tmp / "collectives.py"
    script.write_text(COLLECTIVES_SCRIPT)
    found = {}
    for p in COLLECTIVE_RANKS:
        proc = subprocess.run(
            [sys.executable, str(script), str(p), ",".join(map(str, COLLECTIVE_SIZES))], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        found[str(p)] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"bench_{NAME}: collectives at P = {p} simulated", flush=True)
    return found


def predicted(op: str, n: int, p: int, alpha: float, beta: float, gamma: float) -> tuple[float, str]:
    """scaledl.net.alphabeta's time for the algorithm the simulated MPI runs at this size (scaledl.sim.collectives)."""
    from scaledl.net import alphabeta
    from scaledl.sim import collectives as algorithms

    net = alphabeta.Network(alpha, beta, gamma, name="cori_knl (simulated)")
    if op == "allreduce":
        name = "recursive_doubling" if n <= algorithms.ALLREDUCE_SHORT else "rabenseifner"
        return alphabeta.allreduce(net, n, p, name), name
    if op == "bcast":
        name = "binomial" if n < algorithms.BCAST_SHORT or p < algorithms.BCAST_MIN_PROCS else "scatter_allgather"
        return alphabeta.bcast(net, n, p, name), name
    name = "binomial" if n <= algorithms.REDUCE_SHORT else "rabenseifner"
    return alphabeta.reduce(net, n, p, name), name


def collective_rows(meta: dict) -> list[dict]:
    from scaledl.sim.platform import load

    node = next(iter(load("cori_knl").hosts.values()))
    beta = 1.0 / _link_bandwidth()
    gamma = 3.0 / node.memory_bw  # Meter.reduction: two operands read, one written
    rows = []
    for p, times in meta["collectives"].items():
        alpha = times["alpha"]
        for n in COLLECTIVE_SIZES:
            for op in ("allreduce", "bcast", "reduce"):
                model, algorithm = predicted(op, n, int(p), alpha, beta, gamma)
                simulated = times[f"{op} {n}"]
                rows.append({
                    "P": p, "bytes": n, "collective": op, "algorithm": algorithm,
                    "simulated": stats.format_cell(stats.summary([simulated])).split(" [")[0],
                    "α-β model": stats.format_cell(stats.summary([model])).split(" [")[0],
                    "simulated ÷ model": f"{simulated / model:.3f}",
                })  # fmt: skip
    return rows


def _link_bandwidth() -> float:
    import xml.etree.ElementTree as ET

    from scaledl.sim.platform import _number, resolve

    cluster = ET.parse(resolve("cori_knl")).getroot().find("cluster")
    return _number(cluster.get("bw"), "bw")


# ------------------------------------------------------------------ 3. cost
def measure_cost(args, data: Path, tmp: Path) -> dict:
    found = {"k80x8 P=8 (digits)": []}
    for r in range(args.rounds):
        out = tmp / f"cost-{r}"
        run = run_simulated("k80x8", 8, train_args(data, out, "sync_easgd3", args.warmup, args.steps))
        evaluation = common.read_run(out)["evaluation"]["seconds"]
        found["k80x8 P=8 (digits)"].append({**run, "eval_real_s": evaluation})
        print(f"bench_{NAME}: cost round {r + 1} wall {run['wall_s']:.1f} s", flush=True)
    if args.mnist:
        out = tmp / "mnist"
        run = run_simulated(
            "k80x8",
            8,
            ["--data", str(args.mnist), "--model", "lenet", "--algorithm", "sync_easgd3", "--out-dir", str(out)]
            + ["--max-steps", "3000", "--eval-every", "50", "--target-accuracy", "0.95", "--lr", "0.05"],
        )
        record = common.read_run(out)
        found["k80x8 P=8 sync_easgd3 to 0.95 (MNIST)"] = [
            {**run, "eval_real_s": record["evaluation"]["seconds"], "steps": record["stop"]["steps"],
             "time_to_target_s": record["time_to_target_s"]}
        ]  # fmt: skip
    return found


def cost_rows(meta: dict) -> list[dict]:
    rows = []
    for case, runs in meta["cost"].items():
        compute = [r["real_compute_s"] + r["eval_real_s"] for r in runs]
        ratios = [r["wall_s"] / c for r, c in zip(runs, compute)]
        cell = lambda key, runs=runs: stats.format_cell(stats.summary([r[key] for r in runs]))  # noqa: E731
        rows.append({
            "run": case, "simulated seconds": f"{stats.summary([r['simulated_s'] for r in runs])['median']:.4g}",
            "simulation wall": cell("wall_s"), "real compute inside": stats.format_cell(stats.summary(compute)),
            "wall ÷ compute": stats.format_cell(stats.summary(ratios), unit=None),
            f"≤ {COST_GOAL}×": "yes" if max(ratios) <= COST_GOAL else "no", "process wall": cell("process_wall_s"),
        })  # fmt: skip
    return rows


# ------------------------------------------------------------------ the record and its section
def validation_rows(record: dict) -> list[dict]:
    s = record["samples"]
    rows = []
    for pattern, (_, ranks) in PATTERNS.items():
        measured, simulated = (s[f"{pattern}: {side}"] for side in SIDES)
        r = stats.ratio(simulated, measured)
        rows.append({
            "pattern (P = 2)": pattern, "ranks": ranks, "measured s/step": stats.format_cell(stats.summary(measured)),
            "simulated s/step": stats.format_cell(stats.summary(simulated)), "simulated ÷ measured": stats.format_ratio(r),
            f"within ±{GOAL:.0%}": "yes" if abs(r["median"] - 1) <= GOAL else "no",
        })  # fmt: skip
    return rows


def render(record: dict) -> tuple[str, str, str, str]:
    meta = record["meta"]
    intro = common.text("simulation.intro", warmup=meta["warmup"], steps=meta["steps"], rounds=meta["rounds"])
    v, c, k = validation_rows(record), collective_rows(meta), cost_rows(meta)
    tables = (
        f"Simulated against measured, per message pattern:\n\n{common.table(v, list(v[0]))}\n"
        f"Simulated collectives against the α-β model (scaledl.net.alphabeta):\n\n{common.table(c, list(c[0]))}\n"
        f"What a simulation costs this machine:\n\n{common.table(k, list(k[0]))}"
    )
    return TITLE, intro, tables, common.text("simulation.notes") + common.record_tail(meta, BUDGET_S)


def measure_record(args) -> Path:
    def measure(tmp: Path) -> tuple[dict, dict, dict]:
        data = common.prepare_digits(tmp)
        return measure_validation(args, data, tmp), measure_collectives(tmp), measure_cost(args, data, tmp)

    launch = common.Launch.for_table(max(r for _, r in PATTERNS.values()))
    (result, collectives, cost), m, t_start = common.measured(args, launch, measure)
    return common.write_raw(args.raw, NAME, result["samples"], {
        "machine": m, "unit": "s", "quantity": "seconds per step (steady state), measured and simulated",
        "warmup": args.warmup, "steps": args.steps, "rounds": args.rounds, "order": result["order"],
        "conditions": result["conditions"], "details": result["details"], "collectives": collectives, "cost": cost,
        "raw": common.shown_path(args.raw), "wall_s": time.monotonic() - t_start,
    })  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps (default %(default)s)")
    parser.add_argument(
        "--steps", type=int, default=30, help="timed steps, a multiple of --warmup (default %(default)s)"
    )
    parser.add_argument("--mnist", type=Path, help="a prepared MNIST file: also time a P = 8 run to its target")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if min(args.rounds, args.warmup, args.steps) < 1 or args.steps % args.warmup:
        parser.error("--rounds, --warmup and --steps must be >= 1, and --steps a multiple of --warmup")
    raw = args.raw if args.render else measure_record(args)
    return common.publish_record(raw, NAME, render, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
