"""Hogwild concurrency: how concurrent shared-lock updates of the center are, on an RMA and a shared-memory window.

    python bench/bench_hogwild.py [--workers 2] [--updates 40] [--rounds 5] [--train-workers 2]
                                  [--train-warmup 4] [--train-steps 16] [--train-pairs sgd]
                                  [--train-windows shared] [--raw bench/raw/hogwild.json] [--render] [--no-doc]

Contention (one mpiexec per N, --worker): N workers each make K whole-vector `push_then_pull` updates of a
master's window, per window kind (rma, shared) × lock (exclusive, shared), with an A/A twin; a sample is the
wall time of the N×K updates, with the epochs' overlap and the adds lost beside it. Training: async against
hogwild `scaledl train` runs (steady-state s/step). The page's words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "hogwild"
TITLE = "Hogwild concurrency"
BUDGET_S = 90
SIZES = {"LeNet (431,080)": 431_080, "4 M": 4_000_000}
WINDOWS = ("rma", "shared")
LOCKS = ("exclusive", "shared")
PAIRS = {"sgd": ("async_sgd", "hogwild_sgd"), "easgd": ("async_easgd", "hogwild_easgd")}


def size_updates(numel: int, updates: int) -> int:
    """K at a vector size: `updates` at LeNet's size, a fifth (at least 10) at the large one."""
    return updates if numel < 1_000_000 else max(updates // 5, 10)


def contention_cell(workers: int, size: str, window: str, lock: str) -> str:
    return f"N={workers}, {size}, {window} window, {lock} lock"


def contention_cells(workers: int, size: str) -> list[tuple[str, str, str]]:
    """(cell, window, lock) of every contention variant at one N and size; the last is the first's A/A twin."""
    cells = [(contention_cell(workers, size, w, lock), w, lock) for w in WINDOWS for lock in LOCKS]
    return cells + [(stats.aa_cell(cells[0][0]), cells[0][1], cells[0][2])]


def training_cell(algorithm: str, window: str) -> str:
    return f"train {algorithm}, {window} window"


def training_cells(pairs: list[str], windows: list[str]) -> list[tuple[str, str, str]]:
    """(cell, algorithm, window) of every training variant; the last is the first's A/A twin."""
    cells = [(training_cell(a, w), a, w) for pair in pairs for w in windows for a in PAIRS[pair]]
    return cells + [(stats.aa_cell(cells[0][0]), cells[0][1], cells[0][2])]


# ------------------------------------------------------- contention (MPI side)


def overlapped(spans: list[tuple[float, float, int]]) -> int:
    """How many epochs (start, end, worker) overlap in time an epoch of another worker."""
    spans = sorted(spans)
    count = 0
    for i, (a, b, r) in enumerate(spans):
        if any(r2 != r and a2 < b and a < b2 for a2, b2, r2 in spans[max(0, i - 64) : i + 64]):
            count += 1
    return count


def lost_fraction(total: float, adds_per_element: int, numel: int) -> float:
    """The share of the element-adds missing from W's sum (every element should hold `adds_per_element`);
    counted in whole adds, so that a few lost adds do not print as rounding noise."""
    expected = adds_per_element * numel
    return round(expected - total) / expected


def contend_once(world, window: str, locked: bool, numel: int, k: int) -> dict | None:
    """One variant: every worker makes `k` push_then_pull updates of ones; the master's dict, None elsewhere."""
    import numpy as np
    import torch
    from mpi4py import MPI

    from scaledl.comm.center_window import open_center_window

    master = 0
    rank, n = world.Get_rank(), world.Get_size() - 1
    win = open_center_window(window, world, master, numel, locked=locked)
    if rank == master:
        win.write(torch.zeros(numel))
    trace: list = []
    ones, back = np.ones(numel, np.float32), np.empty(numel, np.float32)
    world.Barrier()
    start, end = float("inf"), float("-inf")
    if rank == master:
        request = world.Ibarrier()
        while not request.Test():  # the master's progress (lock grants), as in training
            pass
    else:
        start = MPI.Wtime()
        win.trace = trace
        for _ in range(k):
            win.push_then_pull(ones, back)
        end = MPI.Wtime()
        world.Ibarrier().Wait()
    gathered = world.gather((rank, start, end, trace), root=master)
    result = None
    if rank == master:
        final = torch.empty(numel)
        win.snapshot(final)
        spans = [(a, b, who) for who, _, _, t in gathered for a, b in t]
        result = {
            "wall_s": max(e for _, _, e, _ in gathered) - min(s for _, s, _, _ in gathered),
            "epoch_s": sum(b - a for a, b, _ in spans) / len(spans), "overlap": overlapped(spans) / len(spans),
            "lost": lost_fraction(final.double().sum().item(), n * k, numel),
        }  # fmt: skip
    win.free()
    return result


def contention_worker(out: Path, updates: int, rounds: int) -> None:
    """Under mpiexec: every size, every variant in a recorded order, `rounds` rounds; the master writes JSON."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    n = world.Get_size() - 1
    rows = []
    for r in range(rounds):
        for size, numel in SIZES.items():
            k = size_updates(numel, updates)
            for cell, window, lock in stats.round_order(contention_cells(n, size), r, rounds):
                res = contend_once(world, window, lock == "exclusive", numel, k)
                if res is not None:
                    rows.append({"round": r, "cell": cell, "size": size, "numel": numel, "updates": k, **res})
    if world.Get_rank() == 0:
        from scaledl.atomic import write_text

        write_text(out, json.dumps({"workers": n, "rows": rows}))


# --------------------------------------------------------------- measuring


def measure_contention(workers: int, updates: int, rounds: int, tmp: Path) -> tuple[dict, dict]:
    """samples {cell: [wall s per round]} and detail {cell: [{epoch_s, overlap, lost, updates} per round]}."""
    out = tmp / f"contend{workers}.json"
    t0 = time.monotonic()
    common.run_mpi(
        workers + 1,
        [str(Path(__file__).resolve()), "--worker", str(out), "--updates", str(updates), "--rounds", str(rounds)],
        timeout=300,
    )
    rows = json.loads(out.read_text())["rows"]
    samples: dict = {}
    detail: dict = {}
    for row in sorted(rows, key=lambda x: x["round"]):
        samples.setdefault(row["cell"], []).append(row["wall_s"])
        detail.setdefault(row["cell"], []).append({k: row[k] for k in ("epoch_s", "overlap", "lost", "updates")})
    print(f"bench_hogwild: contention N={workers}, {rounds} rounds ({time.monotonic() - t0:.1f} s)", flush=True)
    return samples, detail


def measure_training(args, tmp: Path, data: Path) -> tuple[dict, dict, list, dict]:
    """samples {cell: [s/step per round]}, detail {cell: [{wait_s, comm_s} per round]}, the order per round and
    the machine's state per cell (common.rotating_rounds)."""
    cells = {c: (algorithm, window) for c, algorithm, window in training_cells(args.train_pairs, args.train_windows)}

    def measure_one(cell: str, r: int, i: int):
        algorithm, window = cells[cell]
        state = common.train(
            args.train_workers + 1, data, tmp / f"train-r{r}-{i}", algorithm=algorithm, warmup=args.train_warmup,
            steps=args.train_steps, center_window=window,
        )  # fmt: skip
        return state["seconds_per_step"], {k: state.get(k) or 0.0 for k in ("wait_s", "comm_s")}

    result = common.rotating_rounds(NAME, list(cells), args.rounds, measure_one)
    return result["samples"], result["details"], result["order"], result["conditions"]


def measure_record(args, counts: list[int]) -> Path:
    t_start = time.monotonic()
    largest = max([n + 1 for n in counts] + ([args.train_workers + 1] if args.train_steps else []))
    common.use_launch(common.Launch.for_table(largest))
    m = common.machine()
    samples, contention, training, order, log = {}, {}, {}, [], {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        for n in counts:
            s, d = measure_contention(n, args.updates, args.rounds, tmp)
            samples.update(s)
            contention.update(d)
        if args.train_steps:
            s, training, order, log = measure_training(args, tmp, common.prepare_digits(tmp))
            samples.update(s)
    train = {
        "workers": args.train_workers, "warmup": args.train_warmup, "steps": args.train_steps,
        "pairs": args.train_pairs, "windows": args.train_windows, "model": "lenet", "dataset": "digits", "batch": 64,
        "order": order, "conditions": log, "detail": training,
    }  # fmt: skip
    return common.write_raw(args.raw, NAME, samples, {
        "machine": m, "unit": "s", "rounds": args.rounds, "workers": counts, "sizes": SIZES,
        "quantity": "contention: seconds for N×K updates; training: seconds per step (steady state)",
        "updates": {size: size_updates(numel, args.updates) for size, numel in SIZES.items()},
        "contention": contention, "train": train if args.train_steps else None,
        "raw": common.shown_path(args.raw), "wall_s": time.monotonic() - t_start,
    })  # fmt: skip


# ----------------------------------------------------------------- rendering


def detail_cell(rows: list[dict], key: str, scale: float, unit: str) -> str:
    return stats.format_cell(stats.summary(row[key] * scale for row in rows), unit=unit)


def contention_rows(record: dict) -> tuple[list[dict], list[str]]:
    """The contention table's rows and one A/A sentence per (N, size)."""
    s, meta = record["samples"], record["meta"]
    rows, aa_lines = [], []
    for n in meta["workers"]:
        for size in meta["sizes"]:
            cells = contention_cells(n, size)
            (first, _, _), (aa, _, _) = cells[0], cells[-1]
            noise = stats.noise_floor(zip(s[first], s[aa]))
            aa_lines.append(
                f"N={n}, {size}: {stats.format_ratio(stats.ratio(s[aa], s[first]))}, noise floor {noise:.1%}"
            )
            for cell, window, lock in cells:
                detail = meta["contention"][cell]
                k = detail[0]["updates"]
                median = stats.summary(s[cell])["median"]
                row = {
                    "N (ranks)": f"{n} ({n + 1}{common.recorded_mark(record, n + 1)})", "vector": size,
                    "window": window, "lock": lock + (" [A/A]" if cell == aa else ""), "N×K": n * k,
                    "wall for N×K": stats.format_cell(stats.summary(s[cell])),
                    "per update (median)": stats.fmt_seconds(median / (n * k)), "epoch": detail_cell(detail, "epoch_s", 1.0, "s"),
                    "overlapping epochs": detail_cell(detail, "overlap", 100.0, "%"),
                    "lost adds": detail_cell(detail, "lost", 1e6, "ppm"),
                }  # fmt: skip
                reference = first if cell == aa else contention_cell(n, size, window, "exclusive")
                row["÷ exclusive lock"], row["verdict (lock)"] = stats.ratio_cells(s, cell, reference, noise)
                if cell == aa:  # its ratio to its twin is in the lock column already
                    row["÷ rma window"], row["verdict (window)"] = "–", "–"
                else:
                    row["÷ rma window"], row["verdict (window)"] = stats.ratio_cells(
                        s, cell, contention_cell(n, size, "rma", lock), noise
                    )
                rows.append(row)
    return rows, aa_lines


def training_rows(record: dict) -> tuple[list[dict], str]:
    s, train = record["samples"], record["meta"]["train"]
    ranks = train["workers"] + 1
    mark = common.recorded_mark(record, ranks)
    cells = training_cells(train["pairs"], train["windows"])
    (first, _, _), (aa, _, _) = cells[0], cells[-1]
    noise = stats.noise_floor(zip(s[first], s[aa]))
    async_of = {hogwild: a for a, hogwild in PAIRS.values()}
    rows = []
    for cell, algorithm, window in cells:
        detail = train["detail"][cell]
        row = {
            "algorithm": algorithm + (" [A/A]" if cell == aa else ""), "window": window,
            "ranks": f"{ranks}{mark}", "s/step": stats.format_cell(stats.summary(s[cell])),
            "steps/s (median)": f"{1 / stats.summary(s[cell])['median']:.1f}",
            "lock wait / step": detail_cell(detail, "wait_s", 1.0, "s"),
            "comm / step": detail_cell(detail, "comm_s", 1.0, "s"),
        }  # fmt: skip
        reference = first if cell == aa else training_cell(async_of.get(algorithm, algorithm), window)
        row["÷ Async"], row["verdict"] = stats.ratio_cells(s, cell, reference, noise)
        rows.append(row)
    aa_line = f"{stats.format_ratio(stats.ratio(s[aa], s[first]))}, noise floor {noise:.1%}"
    return rows, aa_line


def share(fraction: float) -> str:
    """A small fraction as "1.45 %" from 0.1 % up, else in parts per million."""
    return f"{fraction * 100:.3g} %" if fraction >= 1e-3 else f"{fraction * 1e6:.3g} ppm"


def reading(record: dict) -> str:
    """What the contention rows show, stated from the record's numbers (nothing here is typed in by hand)."""
    meta = record["meta"]
    detail = meta["contention"]

    def cells_of(window: str, lock: str) -> list[list[dict]]:
        return [detail[contention_cell(n, size, window, lock)] for n in meta["workers"] for size in meta["sizes"]]

    def worst(window: str, lock: str, key: str) -> float:
        return max(row[key] for rounds in cells_of(window, lock) for row in rounds)

    excl = max(worst(w, "exclusive", "overlap") for w in WINDOWS)
    rma_overlap, rma_lost = worst("rma", "shared", "overlap"), worst("rma", "shared", "lost")
    sh_overlap, sh_lost = worst("shared", "shared", "overlap"), worst("shared", "shared", "lost")
    exclusive = "hogwild.exclusive_held" if excl == 0 else "hogwild.exclusive_overlap"
    rma = common.text("hogwild.rma_none_lost") if rma_lost == 0 else f"up to {share(rma_lost)} of the adds were lost."
    shared = common.text("hogwild.shared_lost" if sh_lost > 0 else "hogwild.shared_none_lost", lost=share(sh_lost))
    lines = [
        common.text(exclusive, share=f"{excl:.1%}"),
        common.text("hogwild.rma", overlap=f"{rma_overlap:.0%}") + " " + rma,
        common.text("hogwild.shared", overlap=f"{sh_overlap:.0%}") + " " + shared,
    ]
    return "\n".join(f"- {line}" for line in lines)


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the doc section, from a raw record alone."""
    meta = record["meta"]
    rounds = meta["rounds"]
    rows, aa_lines = contention_rows(record)
    ks = ", ".join(f"K = {k} at {size}" for size, k in meta["updates"].items())
    aa = common.text("hogwild.contention_aa", aa="; ".join(aa_lines), rule=stats.RULE)
    tables = f"{common.text('hogwild.contention', ks=ks, rounds=rounds)}\n\n{common.table(rows, list(rows[0]))}\n{aa}\n"
    train = meta.get("train")
    if train:
        t_rows, aa_line = training_rows(record)
        caption = common.text(
            "hogwild.training", workers=train["workers"], ranks=train["workers"] + 1, cores=record["machine"]["cores"],
            model=train["model"], dataset=train["dataset"], batch=train["batch"], warmup=train["warmup"],
            steps=train["steps"], rounds=rounds,
        )  # fmt: skip
        aa = f"A/A ({t_rows[0]['algorithm']} on the {t_rows[0]['window']} window twice per round) — {aa_line}."
        tables += f"\n{caption}\n\n{common.table(t_rows, list(t_rows[0]))}\n{aa}\n"
    notes = reading(record) + "\n\n" + common.record_tail(meta, BUDGET_S).strip()
    return TITLE, common.text("hogwild.intro"), tables, notes


# ---------------------------------------------------------------------- main


def parse_list(text: str, name: str, allowed=None) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError(f"{name}: empty list")
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad:
        raise ValueError(f"{name}: {', '.join(bad)} not among {', '.join(allowed)}")
    return list(dict.fromkeys(items))


def parse_counts(text: str) -> list[int]:
    try:
        return [int(x) for x in parse_list(text, "--workers")]
    except ValueError:
        raise ValueError(f"--workers: {text!r} is not a comma-separated list of integers like 2,3") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--workers", default="2", help="worker counts N of the contention test, comma-separated (default %(default)s)")
    add("--updates", type=int, default=40, help="K, updates per worker at LeNet's size (default %(default)s)")
    add("--rounds", type=int, default=5, help="rounds of every table; ≥ 5 for headline ratios (default %(default)s)")
    add(
        "--train-workers", type=int, default=2, help="workers in the training runs, plus a master (default %(default)s)"
    )
    add("--train-warmup", type=int, default=4, help="untimed training steps (default %(default)s)")
    add("--train-steps", type=int, default=16, help="timed training steps; 0 skips training (default %(default)s)")
    add("--train-pairs", default="sgd", help="Async/Hogwild pairs to train: sgd and/or easgd (default %(default)s)")
    add("--train-windows", default="shared", help="center windows of the training runs (default %(default)s)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: under mpiexec, JSON here
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.worker:
        contention_worker(args.worker, args.updates, args.rounds)
        return 0
    try:
        counts = parse_counts(args.workers)
        args.train_pairs = parse_list(args.train_pairs, "--train-pairs", PAIRS)
        args.train_windows = parse_list(args.train_windows, "--train-windows", WINDOWS)
    except ValueError as exc:
        parser.error(str(exc))
    if min(counts) < 2:
        parser.error("--workers: every N must be >= 2 (contention needs two workers)")
    if args.updates < 1 or args.rounds < 1 or args.train_workers < 1:
        parser.error("--updates, --rounds and --train-workers must be >= 1 (≥ 5 rounds for headline ratios)")
    if args.train_steps and (args.train_warmup < 1 or args.train_steps % args.train_warmup):
        parser.error("--train-steps must be a multiple of --train-warmup (>= 1), or 0 to skip training")
    raw = args.raw if args.render else measure_record(args, counts)
    return common.publish_record(raw, NAME, render, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
