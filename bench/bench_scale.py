"""Every algorithm at P = 8 workers (and the master-based ones at P = 16) on digits, to a target accuracy.

    python bench/bench_scale.py [--workers 8] [--large 16] [--algorithms all] [--target 0.9]
                                [--max-steps 300] [--eval-every 10] [--timeout 900]
                                [--raw bench/raw/scale.json] [--render] [--no-doc]

Not a timing comparison but a check that the message patterns hold up at more ranks than
the machine has cores: each cell is one `scaledl train` run of LeNet on the embedded digits
set (batch 64 per worker, seed 0, η by `learning_rate`, every other setting the algorithm's default) with
P = WORKERS workers (P + 1 ranks for an algorithm with a dedicated master), stopped at test
accuracy TARGET (the center evaluated every EVAL_EVERY steps, off the clock) or after
MAX_STEPS steps, whichever comes first; then every master-based algorithm once more at
P = LARGE (0: none). One round, in registry order; the ranks time-slice the cores (MPICH
yields while waiting), so seconds are this machine's, not the algorithms' at scale.

Per run: whether it reached the target, its steps, its final test accuracy, its training time to
the target (run.json's `time_to_target_s`: evaluations and setup excluded), its steady-state
seconds per step, and the job's wall time (mpiexec launch to exit). A run that fails or times
out is kept in the record with its exit status and the tail of its output. The sample of each
cell is its wall time. Not part of run_all (about 15 minutes on 2 cores); a record measured
from a tree with uncommitted changes never rewrites docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402

NAME = "scale"
TITLE = "Scale: every algorithm at P = 8 (master-based ones at P = 16) to a target accuracy"
BUDGET_S = 3600


def master_based() -> list[str]:
    from scaledl.algorithms import ALGORITHMS

    return [key for key, info in ALGORITHMS.items() if info.needs_master]


def grid(algorithms: list[str], workers: int, large: int) -> list[tuple[str, int]]:
    """(algorithm, P) of every cell: each of `algorithms` at `workers`, then its master-based ones at `large`."""
    cells = [(a, workers) for a in algorithms]
    if large:
        cells += [(a, large) for a in algorithms if a in master_based()]
    return cells


def cell_name(algorithm: str, workers: int) -> str:
    return f"{algorithm} P={workers}"


def learning_rate(algorithm: str, workers: int) -> float:
    """η: 0.05, as config/config.yaml sets it for digits at P = 2, except
    - Async MEASGD 0.01 (its momentum steps by about η/(1−μ)), as config/config.yaml;
    - Async MSGD 0.01/P (its one momentum buffer compounds every worker's stale gradient), as config/config.yaml;
    - Async and Hogwild SGD 0.1/P (0.05 at P = 2): a step is P stale gradients each applied at η, about one
      synchronous step at P·η; at η = 0.05 both diverged within 10 steps at P = 8 and 16, as a synchronous
      step at 0.4 does on one rank;
    - chip_partition 0.05/P: its update is the sum of the P gradients (the same step as sync_sgd's at 0.05).
    """
    scaled = {"async_msgd": 0.01, "async_sgd": 0.1, "hogwild_sgd": 0.1, "chip_partition": 0.05}
    return scaled[algorithm] / workers if algorithm in scaled else {"async_measgd": 0.01}.get(algorithm, 0.05)


def launch(ranks: int, args: list[str], timeout: float) -> tuple[int | str, str]:
    """`mpiexec -n ranks python -m mpi4py ARGS` in the table's launch environment (common.run_mpi: a hung job
    is ended whole, mpiexec, its proxies and every rank): (exit status or "timeout", stdout and stderr)."""
    try:
        proc = common.run_mpi(ranks, args, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        return "timeout", f"{error.stdout or ''}{error.stderr or ''}"
    return proc.returncode, proc.stdout + proc.stderr


def one_run(data: Path, out: Path, algorithm: str, workers: int, args) -> dict:
    from scaledl.algorithms import tasks_for

    ranks = tasks_for(algorithm, workers)
    train = common.train_argv(
        data, out, algorithm, max_steps=args.max_steps, eval_every=args.eval_every, target_accuracy=args.target,
        batch_size=64, lr=f"{learning_rate(algorithm, workers):g}", threads=1, checkpoint_interval=0,
        expect_ranks=ranks,
    )  # fmt: skip
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    status, output = launch(ranks, train, args.timeout)
    tail = output.strip().splitlines()[-8:]
    wall = time.monotonic() - t0
    result = {"algorithm": algorithm, "workers": workers, "ranks": ranks, "lr": learning_rate(algorithm, workers)}
    result.update({"exit": status, "wall_s": wall})
    result["load_before"], result["load_after"] = load, os.getloadavg()[0]
    if status != 0 or not (out / "run.json").exists():
        return {**result, "tail": tail}
    run = common.read_run(out)
    return {
        **result,
        "reached": run["time_to_target_s"] is not None,
        "stop": run["stop"]["reason"],
        "steps": run["stop"]["steps"],
        "final_accuracy": run["final"]["test_accuracy"],
        "time_to_target_s": run["time_to_target_s"],
        "train_s": run["stop"]["train_s"],
        "seconds_per_step": run["seconds_per_step"],
    }


def measure(args, tmp: Path) -> dict:
    data = common.prepare_digits(tmp)
    samples, details = {}, {}
    for algorithm, workers in grid(args.algorithms, args.workers, args.large):
        name = cell_name(algorithm, workers)
        res = one_run(data, tmp / name.replace(" ", "-"), algorithm, workers, args)
        samples[name], details[name] = [res["wall_s"]], [res]
        state = (
            f"exit {res['exit']}"
            if res["exit"] != 0 or "steps" not in res
            else f"{'reached' if res['reached'] else 'missed'} after {res['steps']} steps, acc {res['final_accuracy']:.4f}"
        )
        print(f"bench_{NAME}: {name:<22} {res['ranks']:>2} ranks  {state}  wall {res['wall_s']:.1f} s", flush=True)
    return {"samples": samples, "details": details}


def seconds(value) -> str:
    return "—" if value is None else f"{value:.1f} s"


def rows(record: dict, workers: int) -> list[dict]:
    out = []
    for (d,) in record["meta"]["details"].values():
        if d["workers"] != workers:
            continue
        ok = d["exit"] == 0 and "steps" in d
        out.append(
            {
                "algorithm": d["algorithm"],
                "ranks": d["ranks"],
                "reached?": ("yes" if d["reached"] else "no") if ok else f"failed (exit {d['exit']})",
                "steps": d["steps"] if ok else "—",
                "final accuracy": f"{d['final_accuracy']:.4f}" if ok else "—",
                "time to target": seconds(d.get("time_to_target_s")),
                "s/step": f"{d['seconds_per_step']:.3f}" if ok and d["seconds_per_step"] else "—",
                "wall": seconds(d["wall_s"]),
            }
        )
    return out


def render(record: dict) -> tuple[str, str, str, str]:
    meta = record["meta"]
    sizes = sorted({d["workers"] for (d,) in meta["details"].values()})
    intro = (
        f"`scaledl train` of LeNet on digits (batch 64 per worker, seed 0, each algorithm's defaults; η 0.05, "
        "Async MEASGD 0.01, Async MSGD 0.01/P, Async and Hogwild SGD 0.1/P (P stale gradients a step), "
        "chip_partition 0.05/P (the sum of P gradients)) "
        f"to test accuracy {meta['target']} (evaluated every {meta['eval_every']} steps, off the clock) within "
        f"{meta['max_steps']} steps; P workers, P + 1 ranks with a dedicated master, all on this machine's "
        f"{record['machine'].get('cores', '?')} cores (MPICH yielding while it waits). One run per cell. "
        "Time to target is the training clock (run.json `time_to_target_s`); wall is the whole job, launch included."
    )
    tables = "\n\n".join(f"P = {p}\n\n" + common.table(r, list(r[0])) for p in sizes if (r := rows(record, p)))
    notes = (
        "A failed run's exit status and last lines are in the raw record. "
        f"Raw record: {meta['raw']}; wall time of the measuring run {meta['wall_s']:.0f} s (budget {BUDGET_S} s)."
    )
    return TITLE, intro, tables, notes


def measure_record(args) -> Path:
    from scaledl.algorithms import tasks_for

    t_start = time.monotonic()
    cells = grid(args.algorithms, args.workers, args.large)
    common.use_launch(common.Launch.for_table(max(tasks_for(a, p) for a, p in cells)))
    m = common.machine()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        result = measure(args, Path(tmp))
    return common.write_raw(
        args.raw,
        NAME,
        result["samples"],
        {
            "machine": m,
            "unit": "s",
            "quantity": "wall time of the job (launch to exit)",
            "target": args.target,
            "max_steps": args.max_steps,
            "eval_every": args.eval_every,
            "workers": args.workers,
            "large": args.large,
            "rounds": 1,
            "details": result["details"],
            "raw": common.shown_path(args.raw),
            "wall_s": time.monotonic() - t_start,
        },
    )


def algorithm_list(text: str) -> list[str]:
    from scaledl.algorithms import ALGORITHMS

    names = list(ALGORITHMS) if text == "all" else master_based() if text == "master" else text.split(",")
    unknown = [n for n in names if n not in ALGORITHMS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown algorithm {unknown[0]!r}; choose from {', '.join(ALGORITHMS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8, help="P of every algorithm (default %(default)s)")
    parser.add_argument(
        "--large",
        type=int,
        default=16,
        help="P of the master-based algorithms' second run; 0: none (default %(default)s)",
    )
    parser.add_argument(
        "--algorithms",
        type=algorithm_list,
        default="all",
        help="comma list, 'all' (the registry) or 'master' (the master-based ones) (default %(default)s)",
    )
    parser.add_argument("--target", type=float, default=0.9, help="test accuracy to reach (default %(default)s)")
    parser.add_argument("--max-steps", type=int, default=300, help="step budget of every run (default %(default)s)")
    parser.add_argument("--eval-every", type=int, default=10, help="steps between evaluations (default %(default)s)")
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds before a job counts as hung (default %(default)s)"
    )
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if min(args.workers, args.max_steps, args.eval_every) < 1 or args.large < 0 or not 0 < args.target <= 1:
        parser.error("--workers, --max-steps and --eval-every must be >= 1, --large >= 0, --target in (0, 1]")
    raw = args.raw if args.render else measure_record(args)
    found = common.read_record(raw, NAME, render)
    if found is None:
        return 2
    record, (title, intro, tables, notes) = found
    clean = (record.get("git") or {}).get("dirty") is False
    common.publish(NAME, title, record, intro, tables, notes, write=not args.no_doc and clean)
    if not args.no_doc and not clean:
        print(f"bench_{NAME}: measured from a tree with uncommitted changes: docs/benchmarks.md left alone")
    return 0


if __name__ == "__main__":
    sys.exit(main())
