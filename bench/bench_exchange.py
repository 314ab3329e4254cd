"""The exchanges against their floors at |W| = 143 MB (cifar_alexnet's 36 M floats), side by side in one job.

    python bench/bench_exchange.py [--mb 143] [--reps 3] [--rounds 7]
                                   [--raw bench/raw/exchange.json] [--render] [--no-doc]

Two ranks under one mpiexec (--worker), every cell of CELLS once a round in a Williams order; a sample is
--reps back-to-back exchanges over --reps, the slower rank's. Ours are the classes the engines call; the
floors (one Allreduce, one Send + Recv of |W|) are bare mpi4py calls, each measured twice (A/A), and each
goal is judged against both copies of its floor. Torch allocates every buffer, as in a run: a receive
buffer from np.empty had no huge pages and doubled a turn. The page's words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "exchange"
TITLE = "The exchanges against their floors: Sync EASGD vs one Allreduce, round robin vs Send + Recv"
BUDGET_S = 3 * 60
GOAL = 1.15
ALLREDUCE, SYNC, ROOTED = "Allreduce (mpi4py)", "Sync EASGD: allreduce", "Sync EASGD: rooted"
SENDRECV, TURN = "Send + Recv (mpi4py)", "round-robin turn"
CELLS = (ALLREDUCE, SYNC, ROOTED, SENDRECV, TURN, stats.aa_cell(ALLREDUCE), stats.aa_cell(SENDRECV))
COMPARISONS = (  # (this, reference, goal or None, what it shows)
    (SYNC, ALLREDUCE, GOAL, "Sync EASGD's exchange over one Allreduce of |W|"),
    (TURN, SENDRECV, GOAL, "easgd's exchange (a round-robin turn) over a standalone Send + Recv of |W|"),
    (ROOTED, SYNC, None, "Bcast + Reduce over the allreduce exchange: why allreduce is the default"),
)
FAMILY = {SYNC: ALLREDUCE, ROOTED: ALLREDUCE, TURN: SENDRECV}  # whose A/A floor a comparison is judged by


# ------------------------------------------------------------ under mpiexec


def exchange_worker(out: Path, numel: int, reps: int, rounds: int) -> None:
    """Both ranks: every cell once a round in its recorded order; rank 0 writes {"samples": {cell: [s]}, "order"}."""
    import numpy as np
    import torch
    from mpi4py import MPI

    from scaledl.comm.collectives import Collectives
    from scaledl.comm.round_robin import RoundRobinMaster, RoundRobinWorker
    from scaledl.comm.timing import PhaseTimer

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    w_i, total, center = (torch.full((numel,), float(rank + 1)) for _ in range(3))
    src, dst = w_i.numpy(), total.numpy()
    timer = PhaseTimer()
    coll = Collectives(world, w_i, timer)
    master = RoundRobinMaster(world, (1,), numel, timeout=120) if rank == 0 else None
    worker = RoundRobinWorker(world, 0) if rank == 1 else None
    center_np = center.numpy()

    def send_recv() -> None:
        peer = 1 - rank
        if rank == 0:
            world.Send(src, dest=peer, tag=7)
            world.Recv(dst, source=peer, tag=7)
        else:
            world.Recv(dst, source=peer, tag=7)
            world.Send(src, dest=peer, tag=7)

    def turn() -> None:
        if rank == 0:
            master.serve(1, center_np, timer)
        else:
            worker.await_turn(center_np, timer)
            worker.hand_back(src)

    def rooted() -> None:
        coll.bcast_(center, root=0)
        coll.reduce_sum(w_i, total if rank == 0 else None, root=0)

    ops = {
        ALLREDUCE: lambda: world.Allreduce(src, dst, op=MPI.SUM), SYNC: lambda: coll.allreduce_sum(w_i, total),
        ROOTED: rooted, SENDRECV: send_recv, TURN: turn,
    }  # fmt: skip
    samples = {c: [] for c in CELLS}
    order, log = [], {}
    for r in range(rounds):
        order.append(stats.round_order(CELLS, r, rounds))
        for c in order[-1]:
            op = ops[c.removesuffix(stats.AA_SUFFIX)]
            op()  # untimed: first touch of the buffers and of this pattern's MPI path
            world.Barrier()
            with common.conditions(log, c):
                t0 = time.perf_counter()
                for _ in range(reps):
                    op()
                samples[c].append(world.allreduce((time.perf_counter() - t0) / reps, op=MPI.MAX))
    assert np.isfinite(dst).all()  # the sums were written (and read nowhere else)
    if rank == 0:
        from scaledl.atomic import write_text

        write_text(out, json.dumps({"samples": samples, "order": order, "conditions": log}))


# --------------------------------------------------------------- rendering


def both_twins(s: dict, this: str, ref: str, goal: float, noise: float) -> str:
    """The goal against both copies of the floor: their common verdict, or "not certified" where they differ."""
    found = [stats.goal(stats.ratio(s[this], s[c]), goal, noise) for c in (ref, stats.aa_cell(ref))]
    if found[0] == found[1]:
        return found[0]
    return f"not certified ({found[0]} against the first copy, {found[1]} against the twin)"


def noise_floors(s: dict) -> dict:
    return {ref: stats.noise_floor(zip(s[ref], s[stats.aa_cell(ref)])) for ref in (ALLREDUCE, SENDRECV)}


def headline(record: dict) -> list[dict]:
    """The page's headline rows: each goal against each copy of its floor."""
    s, floors, rows = record["samples"], noise_floors(record["samples"]), []
    for this, ref, goal, what in (c for c in COMPARISONS if c[2]):
        noise = floors[FAMILY[this]]
        for against, label in ((ref, what), (stats.aa_cell(ref), f"{what}, its A/A twin")):
            r = stats.ratio(s[this], s[against])
            rows.append(stats.headline_row(label, r, f"±{noise:.1%}", f"≤ {goal:.2f}×", stats.goal(r, goal, noise)))
    return rows


def render(record: dict) -> tuple[str, str, str, str]:
    meta, s = record["meta"], record["samples"]
    floors = noise_floors(s)
    rows = []
    for c in CELLS:
        cell = stats.summary(s[c])
        rows.append({
            "cell": c, "ms per exchange": stats.format_cell(cell, unit="s"),
            "GB/s (|W| / time)": f"{meta['bytes'] / cell['median'] / 1e9:.2f}",
        })  # fmt: skip
    lines, judged = [], []
    for this, ref, goal, what in COMPARISONS:
        noise = floors[FAMILY[this]]
        # a goal is judged against both copies of its floor: which copy ran first is chance, not a reference
        for against, label in ((ref, what), (stats.aa_cell(ref), f"{what}, its A/A twin")) if goal else ((ref, what),):
            r = stats.ratio(s[this], s[against])
            words = f"{stats.goal_text(r, goal, noise)}; " if goal else ""
            lines.append(f"| {label} | {stats.format_ratio(r)} | {words}{stats.verdict_text(r, noise)} |")
        if goal:
            judged.append(f"{this}: {both_twins(s, this, ref, goal, noise)}")
    tables = (
        common.table(rows, list(rows[0]))
        + "\n| comparison | ratio (paired per round) | goal; verdict |\n|---|---|---|\n"
        + "\n".join(lines)
        + "\n\nA/A: "
        + "; ".join(
            f"{ref} {stats.format_ratio(stats.ratio(s[stats.aa_cell(ref)], s[ref]))}, noise floor {floors[ref]:.1%}"
            for ref in floors
        )
        + f"; {stats.RULE}.\n\nJudged against both copies of the floor (met only where met against each): "
        + "; ".join(judged)
        + ".\n"
    )
    launch = common.Launch.from_dict(record["machine"].get("launch")) or common.LAUNCH
    intro = common.text(
        "exchange.intro", ranks=f"2{launch.mark(2)}", numel=f"{meta['numel']:,}", mb=f"{meta['bytes'] / 1e6:.0f}",
        reps=meta["reps"], rounds=meta["rounds"],
    )  # fmt: skip
    notes = common.text("exchange.notes") + common.record_tail(meta, BUDGET_S)
    return TITLE, intro, tables, notes


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=143.0, help="|W| in MB of float32 (default %(default)s)")
    parser.add_argument("--reps", type=int, default=3, help="exchanges per sample (default %(default)s)")
    parser.add_argument(
        "--rounds", type=int, default=7,
        help="at least this many rounds, rounded up to whole Williams designs (at least 6 for the goals) (default %(default)s)",
    )  # fmt: skip
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: the job under mpiexec
    parser.add_argument("--numel", type=int, help=argparse.SUPPRESS)
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.worker:
        exchange_worker(args.worker, args.numel, args.reps, args.rounds)
        return 0
    if args.render:
        return common.publish_record(args.raw, NAME, render, write=not args.no_doc)
    if args.mb <= 0 or args.reps < 1 or args.rounds < 1:
        parser.error("--mb must be > 0, --reps and --rounds >= 1")
    record = measure_and_record(args)
    title, intro, tables, notes = render(record)
    common.publish(NAME, title, record, intro, tables, notes, write=not args.no_doc)
    return 0


def measure_and_record(args) -> dict:
    numel = int(args.mb * 1e6 / 4)
    rounds = stats.headline_rounds(len(CELLS), args.rounds)  # the goals' table: ≥ 6 rounds, whole designs

    def run(tmp: Path) -> dict:
        out = tmp / "exchange.json"
        cmd = [str(Path(__file__).resolve()), "--worker", str(out), "--numel", str(numel)]
        common.run_mpi(2, [*cmd, "--reps", str(args.reps), "--rounds", str(rounds)], timeout=BUDGET_S * 3)
        return json.loads(out.read_text())

    result, m, t_start = common.measured(args, common.Launch.for_table(2), run)
    wall = time.monotonic() - t_start
    meta = {
        "machine": m, "unit": "s", "quantity": "seconds per exchange", "numel": numel, "bytes": numel * 4,
        "reps": args.reps, "rounds": rounds, "order": result["order"], "conditions": result["conditions"],
        "wall_s": wall, "raw": common.shown_path(args.raw),
    }  # fmt: skip
    raw = common.write_raw(args.raw, NAME, result["samples"], meta)
    print(f"raw samples: {raw}; wall {wall:.0f} s")
    return common.read_raw(raw)


if __name__ == "__main__":
    sys.exit(main())
