"""Run every benchmark and rewrite their sections of docs/benchmarks.md (under 10 minutes on 2 cores).

    python bench/run_all.py [--quick] [--no-doc]

Order: netbench (α, β, γ and collective bandwidths of this machine, section
`netbench`), then bench_allreduce, bench_ddp, bench_overhead, bench_scaling
(which gets the netbench file for its predicted column), bench_ladder
(the Sync EASGD ladder, section `ladder`) and bench_hogwild (Hogwild's
concurrency on an RMA and a shared-memory window, section `hogwild`). Each runs as its own process; the
first failure stops the run. --quick shortens
every bench (for trying the scripts, not for numbers).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402

HERE = Path(__file__).resolve().parent
QUICK = {
    "bench_allreduce.py": ["--repeats", "2"],
    "bench_ddp.py": ["--rounds", "1", "--warmup", "10", "--steps", "30"],
    "bench_overhead.py": ["--rounds", "1", "--warmup", "10", "--steps", "30"],
    "bench_scaling.py": ["--workers", "1,2", "--warmup", "10", "--steps", "30", "--rounds", "1"],
    "bench_ladder.py": [],
    "bench_hogwild.py": ["--workers", "2", "--updates", "40", "--rounds", "1", "--steps", "30"],
}
BENCHES = ("allreduce", "ddp", "overhead", "scaling", "ladder", "hogwild")


def netbench_section(path: Path, m: dict, write: bool) -> None:
    result = json.loads(path.read_text())
    link = result["p2p"]["links"][0]
    p = result["machine"]["ranks"]
    rows = [{"bytes": r["bytes"], "one-way µs": r["time_s"] * 1e6, "GB/s": r["bandwidth_Bps"] / 1e9,
             "α + βn µs": r["fit_time_s"] * 1e6} for r in link["table"]]
    coll = []
    for i, size in enumerate(result["settings"]["sizes"]):
        row = {"bytes": size}
        for op, info in result["collectives"].items():
            r = info["table"][i]
            row[f"{op} µs"] = r["time_s"] * 1e6
            row[f"{op} busbw GB/s"] = r["busbw_Bps"] / 1e9
        coll.append(row)
    tables = (f"α = {result['alpha_s'] * 1e6:.3g} µs, β = {result['beta_s_per_byte']:.3g} s/B "
              f"(1/β = {1 / result['beta_s_per_byte'] / 1e9:.3g} GB/s), γ = {result['gamma_s_per_byte']:.3g} s/B "
              f"(float32 add, {1 / result['gamma_s_per_byte'] / 1e9:.3g} GB/s); {result['p2p']['note']}.\n\n"
              "Ping-pong (one-way time = half the median round trip) and the α-β fit:\n\n"
              + common.table(rows, list(rows[0]))
              + f"\nCollectives at P = {p} (slowest rank, median of repeats; busbw as nccl-tests: allreduce × 2(P−1)/P, "
                "bcast and reduce × 1):\n\n" + common.table(coll, list(coll[0])))
    intro = (f"`mpiexec -n {p} python -m mpi4py -m scaledl.netbench` (the `scaledl netbench` command): {p} ranks on "
             f"{result['machine']['nodes']} node(s), sizes {result['settings']['sizes'][0]} B … "
             f"{result['settings']['sizes'][-1] >> 20} MiB, {result['settings']['repeats']} repeats. These α, β feed the "
             "cost model (`scaledl comm-model`, bench_scaling's predicted column).")
    notes = ("Within one node MPI moves messages through shared memory: α is a few microseconds and 1/β is a memory "
             "copy rate, far from any network in the paper's Table 2 (FDR IB: α 0.7 µs, β 0.2 ns/B, as we recall it). "
             "The α-β line is piecewise in practice (eager below a threshold, rendezvous above), so the fit is a "
             "summary, not a law.")
    common.report("netbench", "netbench: α, β and collective bandwidth of this machine", m, intro, tables, notes,
                  write=write)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short versions of every bench (to try the scripts)")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--only", help="comma-separated subset: netbench," + ",".join(BENCHES))
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    wanted = lambda name: only is None or name in only  # noqa: E731
    started = time.perf_counter()
    flags = ["--no-doc"] if args.no_doc else []
    with tempfile.TemporaryDirectory() as tmp:
        nb = Path(tmp) / "netbench.json"
        if wanted("netbench") or wanted("scaling"):
            t0 = time.perf_counter()
            size = "1M" if args.quick else "16M"
            common.run_mpi(2, ["-m", "scaledl.netbench", "--out", str(nb), "--max-size", size, "--quiet",
                               "--repeats", "3" if args.quick else "5"])
            if wanted("netbench"):
                netbench_section(nb, common.machine(), write=not args.no_doc)
            print(f"[netbench: {time.perf_counter() - t0:.0f} s]", flush=True)
        for name in BENCHES:
            script = f"bench_{name}.py"
            if not wanted(name) or not (HERE / script).exists():
                continue
            cmd = [sys.executable, str(HERE / script), *flags, *(QUICK[script] if args.quick else [])]
            if name == "scaling":
                cmd += ["--netbench", str(nb)]
            t0 = time.perf_counter()
            proc = subprocess.run(cmd, cwd=common.REPO)
            print(f"[{script}: {time.perf_counter() - t0:.0f} s]", flush=True)
            if proc.returncode != 0:
                print(f"run_all: {script} failed (exit {proc.returncode})", file=sys.stderr)
                return proc.returncode
    print(f"[all benchmarks: {time.perf_counter() - started:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
