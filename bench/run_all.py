"""Run every benchmark, keep every raw sample, and rewrite docs/benchmarks.md from them (about 80 minutes on 2 cores).

    python bench/run_all.py [--quick] [--no-doc] [--only NAME,...]
    python bench/run_all.py --render          # rebuild the doc from bench/raw/*.json, measuring nothing

netbench first (its file goes to USES_NETBENCH), then BENCHES in order, each its own process, the first
failure stopping the run (the SimGrid ones only where it is installed). A run that would write bench/raw from
a tree with uncommitted changes is refused before anything is measured. --quick shortens every bench to try
the scripts: its records go to a temporary folder and the doc is left alone.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402
from scaledl.sim.loader import available  # noqa: E402

HERE = Path(__file__).resolve().parent
QUICK = {
    "bench_allreduce.py": ["--rounds", "2"],
    "bench_ddp.py": ["--rounds", "1", "--cases", "lenet:digits:16:5:10,resnet18:synthetic32:4:1:2"],
    "bench_exchange.py": ["--rounds", "1", "--mb", "16"],
    "bench_overhead.py": ["--rounds", "1", "--cases", "64:5:10,4:10:30"],
    "bench_scaling.py": ["--workers", "1,2", "--warmup", "10", "--steps", "30", "--rounds", "1"],
    "bench_ladder.py": "--rounds 1 --heavy-rounds 1 --heavy-warmup 1 --heavy-steps 2 --target 0.6".split(),
    "bench_hogwild.py": ["--workers", "2", "--updates", "40", "--rounds", "1", "--train-steps", "8"],
    "bench_checkpoint.py": ["--rounds", "1", "--cases", "lenet:digits:10:30:10"],
    "bench_averaging.py": ["--rounds", "1", "--steps", "30", "--target", "0.8"],
    "bench_evaluation.py": ["--rounds", "1", "--steps", "30", "--factor", "10"],
    "bench_simulation.py": ["--rounds", "1", "--warmup", "5", "--steps", "10"],
    "bench_phases.py": ["--rounds", "1", "--warmup", "5", "--steps", "10"],
    "bench_paper_scale.py": ["--nodes", "1,2", "--steps", "4", "--constants", "noise", "--factors", "2"],
}
# The page's validation table: the platform calibrated with every core busy, and the windows' cells with more
# ranks than cores beside the others (without them the table compares one-rank cells only).
FULL = {"bench_phases.py": ["--calibrate", "busy", "--oversubscribed"]}
BENCHES = (
    "allreduce", "ddp", "exchange", "overhead", "scaling", "ladder", "hogwild", "checkpoint", "averaging",
    "evaluation", "simulation", "phases", "paper_scale",
)  # fmt: skip
# They print the α-β model's prediction beside measurements, from this run's netbench (measured in the same
# launch environment as theirs); the ladder measures its own, in its table's environment (MPICH yielding).
USES_NETBENCH = ("allreduce", "scaling")
BUDGET_S = 140 * 60  # measured 2026-12: 79 min in all, the simulated paper scale 32, DDP 11
OPTIONAL = {"simulation": available, "phases": available, "paper_scale": available}
MNIST = common.REPO / "data" / "hdf5" / "mnist.h5"  # prepared by the workflow (or scaledl prepare mnist), if here


def record_netbench(path: Path, m: dict, raw: Path) -> dict:
    """Keep a netbench result as a raw record (every repeat of its one-way ping-pong times as the samples,
    the whole result in meta), so its section can be rebuilt and compared like every other bench's."""
    result = json.loads(path.read_text())
    samples = {f"ping-pong {r['bytes']} B": r["samples_s"] for r in result["p2p"]["links"][0]["table"]}
    meta = {"machine": m, "unit": "s", "netbench": result, "quantity": "one-way time, every repeat"}
    common.write_raw(raw, "netbench", samples, meta)
    return common.read_raw(raw)


def netbench_section(record: dict, write: bool) -> None:
    result = record["meta"]["netbench"]
    link = result["p2p"]["links"][0]
    p = result["machine"]["ranks"]
    rows = [
        {"bytes": r["bytes"], "one-way µs": r["time_s"] * 1e6, "GB/s": r["bandwidth_Bps"] / 1e9,
         "α + βn µs": r["fit_time_s"] * 1e6}
        for r in link["table"]
    ]  # fmt: skip
    coll = []
    for i, size in enumerate(result["settings"]["sizes"]):
        row = {"bytes": size}
        for op, info in result["collectives"].items():
            r = info["table"][i]
            row[f"{op} µs"] = r["time_s"] * 1e6
            row[f"{op} busbw GB/s"] = r["busbw_Bps"] / 1e9
        coll.append(row)
    beta, gamma = result["beta_s_per_byte"], result["gamma_s_per_byte"]
    fit = common.text(
        "netbench.fit", alpha=f"{result['alpha_s'] * 1e6:.3g}", beta=f"{beta:.3g}", rate=f"{1 / beta / 1e9:.3g}",
        gamma=f"{gamma:.3g}", add=f"{1 / gamma / 1e9:.3g}", note=result["p2p"]["note"],
    )  # fmt: skip
    tables = f"{fit}\n\n{common.table(rows, list(rows[0]))}\n{common.text('netbench.collectives', p=p)}\n\n"
    tables += common.table(coll, list(coll[0]))
    sizes = result["settings"]["sizes"]
    intro = common.text(
        "netbench.intro", p=p, nodes=result["machine"]["nodes"], low=sizes[0], high=sizes[-1] >> 20,
        repeats=result["settings"]["repeats"],
    )  # fmt: skip
    title = "netbench: α, β and collective bandwidth of this machine"
    common.publish("netbench", title, record, intro, tables, common.text("netbench.notes"), write=write)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short versions of every bench (to try the scripts)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--only", help="comma-separated subset: netbench," + ",".join(BENCHES))
    parser.add_argument(
        "--render", action="store_true",
        help="measure nothing: rebuild every section of docs/benchmarks.md from bench/raw/*.json",
    )  # fmt: skip
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    wanted = lambda name: only is None or name in only  # noqa: E731
    if args.render:
        return render_all(wanted, write=not args.no_doc)
    if not args.quick:
        try:  # every record of the run belongs to one clean commit: refused before anything is measured
            common.check_raw_destination(common.RAW_DIR / "netbench.json")
        except common.RawError as error:
            print(f"run_all: {error}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    flags = ["--no-doc"] if args.no_doc else []
    if args.quick:  # quick runs are for trying the scripts: their records never replace the published ones
        quick_dir = Path(tempfile.mkdtemp(prefix="scaledl-bench-quick-"))
        flags = ["--no-doc"]
    with tempfile.TemporaryDirectory() as tmp:
        nb = Path(tmp) / "netbench.json"
        if any(wanted(name) for name in ("netbench", *USES_NETBENCH)):
            t0 = time.perf_counter()
            size = "1M" if args.quick else "16M"
            repeats = "3" if args.quick else "5"
            common.run_mpi(
                2, ["-m", "scaledl.net.measure", "--out", str(nb), "--max-size", size, "--quiet", "--repeats", repeats]
            )
            if wanted("netbench"):
                raw = quick_dir / "netbench.json" if args.quick else common.raw_path("netbench")
                netbench_section(record_netbench(nb, common.machine(), raw), write=not flags)
            print(f"[netbench: {time.perf_counter() - t0:.0f} s]", flush=True)
        for name in BENCHES:
            script = f"bench_{name}.py"
            if not wanted(name) or not (HERE / script).exists():
                continue
            if name in OPTIONAL and not OPTIONAL[name]():
                print(f"[{script}: skipped, {name} needs SimGrid (docs/simulation.md)]", flush=True)
                continue
            cmd = [sys.executable, str(HERE / script), *flags, *(QUICK[script] if args.quick else FULL.get(script, []))]
            if args.quick:
                cmd += ["--raw", str(quick_dir / f"{name}.json")]
            if name in USES_NETBENCH:
                cmd += ["--netbench", str(nb)]
            if name == "simulation" and MNIST.exists() and not args.quick:
                cmd += ["--mnist", str(MNIST)]  # also the wall time of a simulated P = 8 run to its target
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=common.REPO)
            print(f"[{script}: {time.perf_counter() - t0:.0f} s]", flush=True)
            if proc.returncode != 0:
                print(f"run_all: {script} failed (exit {proc.returncode})", file=sys.stderr)
                return proc.returncode
    wall = time.perf_counter() - started
    over = f" — over the {BUDGET_S // 60}-minute budget" if wall > BUDGET_S and not args.quick and only is None else ""
    print(f"[all benchmarks: {wall:.0f} s{over}]")
    if not args.quick:  # a quick run's records are not the page's: no headline from them
        headline_section(write=not flags)
    return 0


HEADLINE = ("ddp", "exchange", "overhead")  # the benches whose goals head the page


def headline_section(write: bool) -> None:
    """The page's headline table: every goal of HEADLINE's records (those present), one row each."""
    rows, commits = [], {}
    for name in HEADLINE:
        if (raw := common.raw_path(name)).exists():
            record = common.read_raw(raw)
            rows += importlib.import_module(f"bench.bench_{name}").headline(record)
            git = record["machine"].get("git") or {}
            commits[name] = git.get("commit", "none")[:10] + (" (with uncommitted changes)" if git.get("dirty") else "")
    if rows:
        one = set(commits.values())
        at = f"; commit {one.pop()}" if len(one) == 1 else ": " + ", ".join(f"{n} at {c}" for n, c in commits.items())
        body = common.text("headline", records=", ".join(commits) + at, rule=stats.RULE)
        body += "\n\n" + common.table(rows, list(rows[0])) + "\n" + common.text("headline.reading")
        print(body)
        if write:
            common.update_section("headline", "## Headline goals\n\n" + body)


def render_all(wanted, write: bool) -> int:
    """Every section from its record in bench/raw (a bench never run has no record and is skipped, said so)."""
    for name in ("netbench", *BENCHES):
        raw = common.raw_path(name)
        if not wanted(name):
            continue
        if not raw.exists():
            print(f"run_all: no {common.shown_path(raw)}; section {name} left as it is", file=sys.stderr)
            continue
        if name == "netbench":
            netbench_section(common.read_raw(raw), write=write)
            continue
        cmd = [sys.executable, str(HERE / f"bench_{name}.py"), "--render", "--raw", str(raw)]
        if subprocess.run(cmd + ([] if write else ["--no-doc"]), cwd=common.REPO).returncode != 0:
            print(f"run_all: bench_{name}.py --render failed", file=sys.stderr)
            return 1
    headline_section(write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
