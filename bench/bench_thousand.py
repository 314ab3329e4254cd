"""Time-only simulations at a thousand ranks: what each costs this machine, and the paper's weak scaling past 64 nodes.

    python bench/bench_thousand.py [--parts cost,weak] [--cost-nodes 64,256,1024] [--nodes 1,4,16,64,256,1024]
        [--seeds 0,1,2] [--all-up-to 256] [--steps 5] [--check-full 0] [--check-steps 1]
        [--algorithms sync_easgd,sync_easgd3] [--add]

Every run is `scaledl simulate --time-only` of GoogLeNet (batch 64 per node) on cori_knl_1152 (cori_knl's
nodes on Cori's dragonfly geometry, 1,152 nodes) over imagenet_sized (ImageNet's 1,281,167 training rows, pixels
never read).
cost: Sync EASGD, seed 0, at each of --cost-nodes: the run's wall time and peak memory (the child's maximum
resident set, from wait4); and at --check-full nodes, the same configuration for --check-steps steps both
time-only and as a full simulation (every number computed): their seconds per step must agree within 1e-3
(off by default: a full GoogLeNet simulation of 64 ranks, 2 steps, took 18 min and 17.6 GB here; a bench
that fails writes no record).
weak: Sync EASGD and Sync EASGD3 at each of --nodes over --seeds (past --all-up-to nodes, Sync EASGD's seed
0 alone: a 1,024-node run is minutes): seconds per step, and the efficiency E(n) = s(1) / s(n) of each seed,
printed as the seeds' mean with a 95 % t-interval (one seed: its value).
--add measures the cells asked for (--algorithms: whose weak scaling) and adds them to the record at --raw, its
other cells kept and the commit that measured each added cell named: more seeds at 1,024 nodes without
measuring the rest again.
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
from bench.bench_paper_scale import efficiency_text, weak_seeds  # noqa: E402

NAME = "thousand"
TITLE = "Time-only at a thousand ranks: the cost, and weak scaling to 1,024 nodes"
PLATFORM = "cori_knl_1152"
WEAK = ("sync_easgd", "sync_easgd3")
PARTS = ("cost", "weak")
AGREE = 1e-3  # time-only against full: relative difference of the seconds per step


def prepare(tmp: Path) -> Path:
    out = tmp / "imagenet_sized.h5"
    converter = "scaledl.data.converters.synthetic:imagenet_sized"
    subprocess.run(
        [sys.executable, "-m", "scaledl", "prepare", "imagenet_sized", "--converter", converter, "--out", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return out


def simulate(data: Path, out: Path, algorithm: str, nodes: int, steps: int, seed: int, time_only: bool = True) -> dict:
    """One simulation in a child process: its seconds per step, wall time and peak resident memory."""
    options = common.train_argv(
        data, out, algorithm, max_steps=steps, eval_every=steps + 1, model="googlenet", lr=0.01, batch_size=64,
        seed=seed, threads=None,
    )[3:]  # fmt: skip
    command = [sys.executable, "-m", "scaledl", "simulate", "--platform-file", PLATFORM, "--ranks", str(nodes)]
    command += [*options, *(["--time-only"] if time_only else [])]
    started = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {out.with_suffix('.log').read_text()[-1500:]}")
    run = common.read_run(out)
    return {
        "s_per_step": run["seconds_per_step"],
        "wall_s": round(wall, 1),
        "max_rss_mb": round(usage.ru_maxrss / 1024),
    }


def measure(args, tmp: Path) -> dict:
    data = prepare(tmp)
    cells: dict[str, dict] = {}
    if "cost" in args.parts:
        for n in args.cost_nodes:
            cells[f"cost P={n}"] = simulate(data, tmp / f"cost{n}", WEAK[0], n, args.steps, 0)
            print(f"cost P={n}: {cells[f'cost P={n}']}", flush=True)
        if args.check_full:
            for side, time_only in (("time-only", True), ("full", False)):
                key = f"check {side} P={args.check_full}"
                cells[key] = simulate(data, tmp / key.replace(" ", "_"), WEAK[0], args.check_full,
                                      args.check_steps, 0, time_only)  # fmt: skip
                print(f"{key}: {cells[key]}", flush=True)
    if "weak" in args.parts:
        for algorithm in args.algorithms:
            for seed in args.seeds:
                for n in args.nodes:
                    if n > args.all_up_to and (algorithm, seed) != (WEAK[0], 0):
                        continue  # past --all-up-to: Sync EASGD's seed 0 alone (the cost cell)
                    key = f"weak {algorithm} P={n}" + (f" s{seed}" if seed else "")
                    same = cells.get(f"cost P={n}") if (algorithm, seed) == (WEAK[0], 0) else None  # one run
                    cells[key] = same or simulate(data, tmp / key.replace(" ", "_"), algorithm, n, args.steps, seed)
                    print(f"{key}: {cells[key]}", flush=True)
    return cells


# ------------------------------------------------------------------ the tables (pure: rebuilt from the record)


def cost_rows(cells: dict) -> list[dict]:
    found = sorted((int(key.split("=")[1]), cell) for key, cell in cells.items() if key.startswith("cost "))
    return [{"nodes": n, "s_per_step": c["s_per_step"], "wall_s": c["wall_s"], "max_rss_mb": c["max_rss_mb"]}
            for n, c in found]  # fmt: skip


def check_line(cells: dict) -> str:
    sides = {key.split()[1]: cell for key, cell in cells.items() if key.startswith("check ")}
    if set(sides) != {"time-only", "full"}:
        return ""
    fast, full = sides["time-only"], sides["full"]
    gap = abs(fast["s_per_step"] / full["s_per_step"] - 1)
    verdict = "within" if gap <= AGREE else "outside"
    n = next(key for key in cells if key.startswith("check full")).split("=")[1]
    return (
        f"Time-only against a full simulation of the same configuration at {n} nodes: {fast['s_per_step']:.6f} "
        f"against {full['s_per_step']:.6f} s per step, a relative difference of {gap:.1e} ({verdict} {AGREE:g}); "
        f"the full one took {full['wall_s']:.0f} s and {full['max_rss_mb']:,} MB, the time-only one "
        f"{fast['wall_s']:.0f} s and {fast['max_rss_mb']:,} MB."
    )


def weak_rows(cells: dict, nodes: list[int]) -> list[dict]:
    rows = []
    for n in nodes:
        row = {"nodes": n}
        for algorithm in WEAK:
            if f"weak {algorithm} P={n}" in cells:
                row[f"{algorithm} s/step"] = cells[f"weak {algorithm} P={n}"]["s_per_step"]
                row[f"{algorithm} E"] = efficiency_text(weak_seeds(cells, algorithm, n, nodes[0]))
        rows.append(row)
    return rows


DOC_BLOCK = "thousand"  # docs/simulation.md's block, rendered from the record (tests/workflow/test_docs.py)


def tables(cells: dict, meta: dict) -> str:
    found = ""
    if rows := cost_rows(cells):
        found += "Sync EASGD, seed 0:\n\n" + common.table(
            rows, ["nodes", "s_per_step", "wall_s", "max_rss_mb"], ["nodes", "s/step", "wall (s)", "peak RSS (MB)"]
        )
    if line := check_line(cells):
        found += f"\n\n{line}"
    if any(key.startswith("weak ") for key in cells):
        weak = weak_rows(cells, meta["nodes"])
        seeds = ", ".join(map(str, meta["seeds"]))
        found += (
            f"\n\nWeak scaling (E = s(1)/s(n) of each seed, the mean of seeds {seeds} with its 95 % t-interval "
            "where more than one ran; seconds per step: seed 0's):\n\n" + common.table(weak, list(weak[0]))
        )
    return found.strip()


def thousand_block(record: dict) -> str:
    """docs/simulation.md's block: the record's tables, under the line that cites it."""
    meta = record["meta"]
    base = meta.get("base") or {"commit": record["git"].get("commit"), "timestamp": record["timestamp"]}
    added = sorted({commit[:7] for commit in (meta.get("added") or {}).values() if commit})
    head = (
        f"`bench/raw/{NAME}.json`, measured at commit {(base['commit'] or 'uncommitted')[:7]} "
        f"{base['timestamp'][:10]}"
        + (f" (cells added at {', '.join(added)})" if added else "")
        + f" on {PLATFORM}, GoogLeNet at batch 64 per node, {meta['steps']} steps a run, time-only:\n\n"
    )
    return head + tables(meta["cells"], meta) + "\n"


def render(record: dict, write: bool) -> str:
    meta, cells = record["meta"], record["meta"]["cells"]
    wall = sum(cell["wall_s"] for cell in cells.values())
    intro = (
        f"Each run is `scaledl simulate --time-only` of GoogLeNet (batch 64 per node) on {PLATFORM}, "
        f"{meta['steps']} steps: the ranks share one replica of every large buffer and their messages are priced "
        "without being copied (docs/simulation.md). Wall time and peak memory are this machine's for one run "
        "(the child's maximum resident set)."
    )
    notes = (
        f"Wall time of this machine for all {len(cells)} simulations: {wall:.0f} s. Raw record: bench/raw/{NAME}.json."
    )
    return common.publish(NAME, TITLE, record, intro, tables(cells, meta), notes, write=write)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    numbers = lambda kind: lambda text: [kind(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--parts", type=numbers(str), default=list(PARTS), metavar="P1,P2", help="of cost,weak")
    parser.add_argument("--cost-nodes", type=numbers(int), default=[64, 256, 1024], metavar="N1,N2")
    parser.add_argument("--nodes", type=numbers(int), default=[1, 4, 16, 64, 256, 1024], metavar="N1,N2")
    parser.add_argument("--seeds", type=numbers(int), default=[0, 1, 2], metavar="S1,S2")
    parser.add_argument("--steps", type=int, default=5, help="steps per run (default %(default)s)")
    parser.add_argument("--all-up-to", type=int, default=256, help="beyond these nodes, Sync EASGD seed 0 alone")
    parser.add_argument("--check-full", type=int, default=0, help="nodes of the full-simulation check (0: none)")
    parser.add_argument("--check-steps", type=int, default=1, help="steps of the check's two runs")
    parser.add_argument("--algorithms", type=numbers(str), default=list(WEAK), metavar="A1,A2", help="weak's")
    parser.add_argument(
        "--add", action="store_true", help="add the cells measured now to the record at --raw (its others kept)"
    )
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if set(args.parts) - set(PARTS):
        parser.error(f"--parts: of {', '.join(PARTS)}")
    if args.render:
        publish(common.read_raw(args.raw), write=not args.no_doc)
        return 0
    if set(args.algorithms) - set(WEAK):
        parser.error(f"--algorithms: of {', '.join(WEAK)}")
    before = added_to(common.read_raw(args.raw), args.steps) if args.add else None
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        tmp = args.workdir or Path(folder)
        tmp.mkdir(parents=True, exist_ok=True)
        cells = measure(args, tmp)
    meta = {"cells": cells, "nodes": args.nodes, "steps": args.steps, "seeds": args.seeds, "load_before": load_before}
    if before is not None:
        meta = merged(before, meta, common.git_state()["commit"])
    samples = {key: [cell["s_per_step"]] for key, cell in meta["cells"].items()}
    common.write_raw(args.raw, NAME, samples, meta)
    publish(common.read_raw(args.raw), write=not args.no_doc)
    return 0


def added_to(record: dict, steps: int) -> dict:
    """The record `--add` adds to: its meta, with the commit and date that measured its first cells."""
    meta = dict(record["meta"])
    if meta["steps"] != steps:
        raise SystemExit(f"bench_thousand --add: the record's runs are {meta['steps']} steps, not {steps}")
    meta.setdefault("base", {"commit": record["git"].get("commit"), "timestamp": record["timestamp"]})
    return meta


def merged(before: dict, now: dict, commit: str | None) -> dict:
    """`before`'s cells and `now`'s (which replace any of the same name), each added cell's commit named."""
    added = dict(before.get("added") or {})
    added.update(dict.fromkeys(now["cells"], commit))
    return {
        **before, "cells": {**before["cells"], **now["cells"]}, "added": added,
        "nodes": sorted({*before["nodes"], *now["nodes"]}), "seeds": sorted({*before["seeds"], *now["seeds"]}),
    }  # fmt: skip


def publish(record: dict, write: bool) -> None:
    """The benchmarks page's section and, if `write`, docs/simulation.md's block, both from the record."""
    render(record, write=write)
    if write:
        common.write_record_block(common.REPO / "docs/simulation.md", DOC_BLOCK, thousand_block(record))


if __name__ == "__main__":
    sys.exit(main())
