"""Per-phase validation: each rank's seconds per step in each phase, measured over MPI against simulated.

    python bench/bench_phases.py [--workers 1,2] [--algorithms A,B] [--rounds 3] [--warmup 5] [--steps 60]
                                 [--platform-file laptop | --calibrate busy|idle] [--oversubscribed]
                                 [--markdown FILE] [--raw bench/raw/phases.json] [--render] [--no-doc]

For every algorithm at every P whose ranks fit the cores (more with --oversubscribed, †, MPICH yielding in
that cell), the same run under mpiexec (--rounds times, a recorded order) and simulated on the platform
(once per platform: deterministic), each rank's mean seconds per steady step in each PHASE_GROUPS group from
its timeline; the workers averaged, the master apart. --calibrate measures the network once (netbench) and
the platform's compute before each round (`scaledl calibrate`, with every other core busy for busy), each
round divided by its own simulation. bench/comm_probe.py times a step's messages alone on both sides, to
attribute the comm gap.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402
from bench.bench_simulation import run_simulated, train_args  # noqa: E402

NAME = "phases"
TITLE = "Validation per phase: measured against simulated, each rank's seconds per step"
BUDGET_S = 8 * 60
ALGORITHMS = ("sync_sgd", "sync_easgd", "easgd", "async_easgd", "hogwild_easgd", "async_sgd", "hogwild_sgd")
PHASE_GROUPS = {  # shown phase → scaledl.comm.timing.PHASES summed into it
    "compute": ("compute", "update", "center_update"), "comm": ("comm", "param_copy", "h2d"), "wait": ("wait",),
    "data": ("data",),
}  # fmt: skip
SHOWN = (*PHASE_GROUPS, "other", "total")
SIDES = ("measured", "simulated")


# ------------------------------------------------------------------ pure logic (tests/unit/test_phase_validation.py)
def ranks_of(algorithm: str, workers: int) -> int:
    from scaledl.algorithms import ALGORITHMS as INFO

    return workers + (1 if INFO[algorithm].needs_master else 0)


def cells(algorithms, workers, cores: int, oversubscribed: bool, min_ranks: int = 2) -> list[dict]:
    """Every (algorithm, P) to run: {"algorithm", "workers", "ranks", "oversubscribed", "cell"}; cells with
    fewer than `min_ranks` ranks (nothing to exchange) are left out, and those with more ranks than `cores`
    unless `oversubscribed`."""
    out = []
    for p in workers:
        for algorithm in algorithms:
            ranks = ranks_of(algorithm, p)
            over = ranks > cores
            if ranks < min_ranks or (over and not oversubscribed):
                continue
            out.append({"algorithm": algorithm, "workers": p, "ranks": ranks, "oversubscribed": over,
                        "cell": f"{algorithm} P={p}"})  # fmt: skip
    return out


def rank_phases(step_end_s, phase_s, warmup: int) -> dict:
    """One rank's mean seconds per steady step (the first `warmup` steps left out) in each shown phase.

    total is scaledl.comm.timing.steady_state's seconds_per_step (wall between step ends, less eval and
    checkpoint); other is the total less the phase groups (what no phase covers); steps the steady steps."""
    import numpy as np

    from scaledl.comm.timing import PHASES, steady_state

    rows = np.asarray(phase_s, dtype=np.float64).reshape(len(step_end_s), len(PHASES))[warmup:]
    total = steady_state(step_end_s, phase_s, warmup=warmup)["seconds_per_step"]
    if total is None or not len(rows):
        return {"steps": 0}
    out = {g: float(rows[:, [PHASES.index(p) for p in members]].sum(axis=1).mean())
           for g, members in PHASE_GROUPS.items()}  # fmt: skip
    out["total"] = float(total)
    other = out["total"] - sum(out[g] for g in PHASE_GROUPS)
    out["other"] = other if abs(other) > 1e-7 else 0.0  # the timeline's float32 rounding is not a phase
    out["steps"] = len(rows)
    return out


def by_role(ranks: list[dict]) -> dict[str, dict[str, float]]:
    """The ranks' phases ({"rank", "role", **rank_phases}) per role: "worker" (the mean over every rank that
    trains, a master+worker included) and "master" (a dedicated master); ranks without steady steps skipped."""
    groups: dict[str, list[dict]] = {}
    for r in ranks:
        if r.get("steps"):
            groups.setdefault("worker" if "worker" in r["role"] else "master", []).append(r)
    return {role: {k: statistics.fmean(r[k] for r in members) for k in SHOWN}
            for role, members in sorted(groups.items(), key=lambda kv: kv[0] != "worker")}  # fmt: skip


def ratios(simulated: list[float], measured: list[float]) -> list[float]:
    """simulated ÷ measured per round: round by round where each round has its own simulation (a platform
    calibrated before it), else the one (deterministic) simulation over each round; none where measured is ~0."""
    pairs = (
        zip(simulated, measured) if len(simulated) == len(measured) else ((s, m) for s in simulated for m in measured)
    )
    return [s / m for s, m in pairs if m > 1e-7]


def ratio_cell(simulated: list[float], measured: list[float]) -> str:
    """simulated ÷ measured (`ratios`) as "median [min–max] n"; "–" where the measured phase is ~0."""
    ratios_ = ratios(simulated, measured)
    if not ratios_:
        return "–"
    return stats.format_ratio({"median": statistics.median(ratios_), "min": min(ratios_), "max": max(ratios_),
                               "n": len(ratios_)})  # fmt: skip


def phase_rows(details: dict, plan: list[dict]) -> list[dict]:
    """The table: one row per cell, role and shown phase. `details[cell][side]` is a list (one per run) of
    by_role dicts."""
    rows = []
    for c in plan:
        runs = details[c["cell"]]
        roles = list(dict.fromkeys(role for side in SIDES for run in runs[side] for role in run))
        for role in roles:
            for phase in SHOWN:
                found = {side: [run[role][phase] for run in runs[side] if role in run] for side in SIDES}
                if not all(found.values()) or max(map(abs, found["measured"] + found["simulated"])) < 1e-7:
                    continue  # a phase this rank never enters
                rows.append({
                    "pattern": c["algorithm"] + ("†" if c["oversubscribed"] else ""), "P": c["workers"], "rank": role,
                    "phase": phase, "measured s/step": stats.format_cell(stats.summary(found["measured"])),
                    "simulated s/step": stats.format_cell(stats.summary(found["simulated"])).split(" [")[0],
                    "simulated ÷ measured": ratio_cell(found["simulated"], found["measured"]),
                })  # fmt: skip
    return rows


SUMMARY = ("compute", "comm", "data", "total")  # the ratios docs/simulation.md shows per cell
DOC_BLOCK = "phases"  # docs/simulation.md's block rendered from the record: <!-- record:phases -->


def summary_rows(meta: dict) -> list[dict]:
    """Per cell, the workers' simulated ÷ measured for each SUMMARY phase: the median over the measured rounds
    of the (deterministic) simulated seconds over each round's, two decimals; "–" where measured is ~0."""
    rows = []
    for c in meta["plan"]:
        runs = meta["details"][c["cell"]]
        row = {"pattern": c["algorithm"] + ("†" if c["oversubscribed"] else ""), "P": c["workers"]}
        for phase in SUMMARY:
            simulated = [run["worker"][phase] for run in runs["simulated"] if "worker" in run]
            measured = [run["worker"][phase] for run in runs["measured"] if "worker" in run]
            found = ratios(simulated, measured)
            row[phase] = f"{statistics.median(found):.2f}" if found else "–"
        rows.append(row)
    return rows


def simulation_block(record: dict) -> str:
    """docs/simulation.md's per-phase table, rendered from the record it cites (tests/workflow/test_docs.py
    checks that the page holds exactly this)."""
    meta, git = record["meta"], record.get("git") or {}
    commit = (git.get("commit") or "uncommitted")[:7] + (" (dirty)" if git.get("dirty") else "")
    rows = summary_rows(meta)
    return (
        f"Simulated ÷ measured, the workers' median over {meta['rounds']} rounds (`bench/raw/phases.json`: "
        f"commit {commit}, {record['timestamp'][:10]}; {calibration_words(meta['platform'])} "
        f"† more ranks than cores):\n\n" + common.table(rows, list(rows[0]))
    )


def write_simulation_block(record: dict, page: Path) -> None:
    common.write_record_block(page, DOC_BLOCK, simulation_block(record))


def probe_rows(probe: dict) -> list[dict]:
    """bench/comm_probe.py's operations, measured and simulated, and their ratio."""
    from bench.comm_probe import OPERATIONS

    rows = []
    for op in OPERATIONS:
        m, s = [run[op] for run in probe["measured"]], [run[op] for run in probe["simulated"]]
        rows.append({
            "operation": op, "measured": stats.format_cell(stats.summary(m)),
            "simulated": stats.format_cell(stats.summary(s)).split(" [")[0], "simulated ÷ measured": ratio_cell(s, m),
        })  # fmt: skip
    return rows


# ------------------------------------------------------------------ measuring
def read_phases(run_dir: Path, warmup: int) -> list[dict]:
    """Every rank's rank_phases from a run's run.json and timeline.h5."""
    import h5py

    run = common.read_run(Path(run_dir))
    out = []
    with h5py.File(Path(run_dir) / "timeline.h5") as f:
        for rank in run["phases"]["per_rank"]:
            group = f.get(f"rank{rank['rank']}")
            if group is not None:
                found = rank_phases(group["step_end_s"][()], group["phase_s"][()], warmup)
                out.append({"rank": rank["rank"], "role": rank["role"], **found})
    return out


def read_staleness(run_dir: Path) -> dict | None:
    """run.json's staleness of the center's reads (median, p90, max); None for a pattern without a center."""
    found = common.read_run(Path(run_dir)).get("staleness")
    return {k: found[k] for k in ("median", "p90", "max")} if found and found.get("exchanges") else None


def staleness_rows(staleness: dict, plan: list[dict]) -> list[dict]:
    """Real and simulated staleness side by side, for the cells whose runs read a center."""
    rows = []
    for c in plan:
        sides = staleness.get(c["cell"], {})
        if not any(found for side in SIDES for found in sides.get(side, [])):
            continue
        words = {
            side: ", ".join(f"{s['median']}/{s['p90']}/{s['max']}" for s in sides.get(side, []) if s) or "–"
            for side in SIDES
        }
        rows.append({"pattern": c["algorithm"] + ("†" if c["oversubscribed"] else ""), "P": c["workers"], **words})
    return rows


def launch_for(ranks: int) -> common.Launch:
    """One rank per core, MPICH yielding only where the ranks exceed the cores."""
    return common.Launch(threads=1, yield_poll=common.oversubscribed(ranks))


def measure_netbench(folder: Path) -> Path:
    """`scaledl netbench --cold` on 2 ranks: the network every round's calibration shares."""
    netbench = folder / "netbench.json"
    common.run_mpi(
        2, ["-m", "scaledl", "netbench", "--out", str(netbench), "--cold"], launch=launch_for(2), timeout=900
    )
    return netbench


def calibrate_platform(mode: str, folder: Path, netbench: Path, round_index: int) -> tuple[Path, dict]:
    """`scaledl calibrate` (--busy cores − 1 for "busy") on `netbench`: a platform file for one round, and the
    values calibrate printed (its step_ms: what the machine's step took just before the round's runs)."""
    platform = folder / f"calibrated-{mode}-{round_index}.xml"
    busy = common.usable_cores() - 1 if mode == "busy" else 0
    cores = common.usable_cores()
    cmd = [sys.executable, "-m", "scaledl", "calibrate", "--netbench", str(netbench), "--out", str(platform),
           "--cores", str(cores), "--name", "calibrated", "--busy", str(busy)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=common.mpi_env(1, launch_for(2)), timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"bench_{NAME}: scaledl calibrate failed: {proc.stderr.strip()[-2000:]}")
    print(f"bench_{NAME}: calibrated {platform} ({mode}): {proc.stdout.strip()}", flush=True)
    return platform, json.loads(proc.stdout.strip().splitlines()[-1])


def run_probe(platform: str, rounds: int) -> dict:
    script = str(Path(__file__).resolve().parent / "comm_probe.py")

    def parse(text: str) -> dict:
        line = next(x for x in text.splitlines() if x.startswith("probe: "))
        return json.loads(line.removeprefix("probe: "))

    found = {"measured": [], "simulated": []}
    launch = launch_for(2)
    for _ in range(rounds):
        found["measured"].append(parse(common.run_mpi(2, [script], launch=launch).stdout))
    proc = subprocess.run([sys.executable, script, "--simulate", platform], capture_output=True, text=True,
                          env=common.mpi_env(1, launch), timeout=600)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"bench_{NAME}: comm_probe --simulate failed: {proc.stderr.strip()[-2000:]}")
    found["simulated"].append(parse(proc.stdout))
    return found


def measure_record(args) -> Path:
    from scaledl.sim.calibrate import calibration_load
    from scaledl.sim.platform import resolve

    t_start = time.monotonic()
    common.use_launch(launch_for(2))
    m = common.machine()
    plan = cells(args.algorithms, args.workers, common.usable_cores(), args.oversubscribed)
    if not plan:
        raise SystemExit(f"bench_{NAME}: no cell fits {common.usable_cores()} cores (try --oversubscribed)")
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        netbench = measure_netbench(tmp) if args.calibrate else None
        data = common.prepare_digits(tmp)
        samples = {f"{c['cell']}: {side}": [] for c in plan for side in SIDES}
        details, runs, staleness = ({c["cell"]: {side: [] for side in SIDES} for c in plan} for _ in range(3))
        order, log, calibrations, platform = [], {}, [], None
        for r in range(args.rounds):
            # --calibrate: the twin is calibrated again before each round, so that a round's runs and the
            # platform they are priced on share the machine's state of the moment (this machine's own step
            # drifted by up to a fifth within minutes); the measured runs follow the calibration at once and the
            # simulations (deterministic, their wall time irrelevant) come after them; a given platform file is
            # simulated once.
            if args.calibrate:
                platform, values = calibrate_platform(args.calibrate, tmp, netbench, r)
                calibrations.append({"round": r, **values})
            elif platform is None:
                platform = str(args.platform_file)
            order.append([c["cell"] for c in stats.round_order(plan, r, args.rounds)])
            for c in stats.round_order(plan, r, args.rounds):
                common.use_launch(launch_for(c["ranks"]))
                out = tmp / f"mpi-{c['algorithm']}-{c['workers']}-{r}"
                t0 = time.monotonic()
                with common.conditions(log, f"{c['cell']}: measured"):
                    common.train(c["ranks"], data, out, algorithm=c["algorithm"], warmup=args.warmup, steps=args.steps)
                record_run(samples, details, runs, c, "measured", read_phases(out, args.warmup))
                staleness[c["cell"]]["measured"].append(read_staleness(out))
                print(f"bench_{NAME}: round {r + 1}/{args.rounds} {c['cell']} ({time.monotonic() - t0:.1f} s)",
                      flush=True)  # fmt: skip
            common.use_launch(launch_for(2))
            if args.calibrate or r == 0:
                for c in plan:
                    out = tmp / f"sim-{c['algorithm']}-{c['workers']}-{r}"
                    run_simulated(
                        str(platform), c["ranks"], train_args(data, out, c["algorithm"], args.warmup, args.steps)
                    )
                    record_run(samples, details, runs, c, "simulated", read_phases(out, args.warmup))
                    staleness[c["cell"]]["simulated"].append(read_staleness(out))
                    print(f"bench_{NAME}: round {r + 1}/{args.rounds} simulated {c['cell']}", flush=True)
        platform_text = resolve(str(platform)).read_text()
        if args.platform_out:
            args.platform_out.parent.mkdir(parents=True, exist_ok=True)
            args.platform_out.write_text(platform_text)
        probe = run_probe(str(platform), args.rounds) if not args.no_probe else None
    shown = common.shown_path(resolve(platform)) if not args.calibrate else f"calibrated ({args.calibrate})"
    platform_meta = {"file": shown, "text": platform_text, "calibration_busy": calibration_load(platform_text),
                     "calibrations": calibrations}  # fmt: skip
    return common.write_raw(args.raw, NAME, samples, {
        "machine": m, "unit": "s", "warmup": args.warmup, "steps": args.steps, "rounds": args.rounds,
        "quantity": "seconds per step (steady state) of the workers, measured and simulated; per phase in details",
        "plan": plan, "order": order, "conditions": log, "details": details, "ranks": runs, "platform": platform_meta,
        "probe": probe, "staleness": staleness, "raw": common.shown_path(args.raw), "wall_s": time.monotonic() - t_start,
    })  # fmt: skip


def record_run(samples: dict, details: dict, runs: dict, cell: dict, side: str, ranks: list[dict]) -> None:
    roles = by_role(ranks)
    samples[f"{cell['cell']}: {side}"].append(roles["worker"]["total"])
    details[cell["cell"]][side].append(roles)
    runs[cell["cell"]][side].append(ranks)


# ------------------------------------------------------------------ the section
def calibration_words(platform: dict) -> str:
    busy = platform.get("calibration_busy")
    load = (
        "its compute calibrated with one rank alone (no `busy:` line in its header)"
        if not busy
        else f"its compute calibrated with every core busy ({busy} other process(es) ran the same step)"
    )
    steps = [c["step_ms"] for c in platform.get("calibrations") or []]
    again = (
        f"; calibrated before each of the {len(steps)} rounds, its LeNet step measured at "
        f"{min(steps):.3g}-{max(steps):.3g} ms (the machine's drift between rounds)"
        if len(steps) > 1
        else ""
    )
    factors = [c["core_factors"] for c in platform.get("calibrations") or [] if c.get("core_factors")]
    cores = f"; its cores' factors per round {', '.join(factors)} (each core's step over their mean)" if factors else ""
    return f"Platform: {platform['file']}, {load}{again}{cores}."


def render(record: dict) -> tuple[str, str, str, str]:
    meta = record["meta"]
    intro = common.text(
        "phases.intro", warmup=meta["warmup"], steps=meta["steps"], rounds=meta["rounds"],
        platform=calibration_words(meta["platform"]),
    )  # fmt: skip
    rows = phase_rows(meta["details"], meta["plan"])
    tables = "Seconds per step in each phase, per rank (the workers averaged):\n\n" + common.table(rows, list(rows[0]))
    if meta.get("probe"):
        p = probe_rows(meta["probe"])
        tables += (
            f"\nA LeNet step's messages timed alone at 2 ranks ({meta['probe']['measured'][0]['bytes']:,} bytes of "
            "weights; bench/comm_probe.py):\n\n" + common.table(p, list(p[0]))
        )
    stale = staleness_rows(meta.get("staleness", {}), meta["plan"])
    if stale:
        tables += (
            "\nStaleness of the center's reads (updates behind the newest; median/p90/max per run, run.json's "
            "`staleness`), real and simulated at the same P:\n\n" + common.table(stale, list(stale[0]))
        )
    return TITLE, intro, tables, common.text("phases.notes") + common.record_tail(meta, BUDGET_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2", help="P values, comma-separated (default %(default)s)")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated (default: every pattern)")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps (default %(default)s)")
    parser.add_argument("--steps", type=int, default=60, help="timed steps, a multiple of --warmup (default 60)")
    parser.add_argument("--platform-file", default="laptop", help="the simulated platform (default %(default)s)")
    parser.add_argument(
        "--calibrate", choices=("idle", "busy"), help="calibrate a platform to this machine before each round"
    )
    parser.add_argument("--oversubscribed", action="store_true", help="also run cells with more ranks than cores")
    parser.add_argument("--no-probe", action="store_true", help="skip bench/comm_probe.py")
    parser.add_argument("--markdown", type=Path, help="also write the section (markdown) to this file")
    parser.add_argument("--platform-out", type=Path, help="also write the simulated platform's file here")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    args.workers = [int(x) for x in str(args.workers).split(",") if x]
    args.algorithms = [x for x in args.algorithms.split(",") if x]
    if min(args.rounds, args.warmup, args.steps) < 1 or args.steps % args.warmup:
        parser.error("--rounds, --warmup and --steps must be >= 1, and --steps a multiple of --warmup")
    raw = args.raw if args.render else measure_record(args)
    status = common.publish_record(raw, NAME, render, write=not args.no_doc)
    if status == 0 and not args.no_doc:  # the table docs/simulation.md cites, from the same record
        write_simulation_block(common.read_raw(raw), common.REPO / "docs" / "simulation.md")
    if args.markdown and status == 0:
        record = common.read_raw(raw)
        title, intro, tables, notes = render(record)
        body = f"## {title}\n\n{common.machine_line(record['machine'])}\n\n{intro}\n\n{tables.strip()}\n\n{notes}\n"
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(body)
        print(f"bench_{NAME}: wrote {args.markdown}")
    return status


if __name__ == "__main__":
    sys.exit(main())
