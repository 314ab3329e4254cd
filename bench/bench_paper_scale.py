"""The simulated experiments at the paper's scale, time-only: the codesign ladder, and weak scaling with the
sensitivity of its efficiency to the platform's assumed constants.

    python bench/bench_paper_scale.py [--parts ladder,weak,band] [--nodes 1,2,4,8,16,32,64] [--steps 12]
                                      [--factors 0.5,2] [--constants efficiency,op_overhead,network_bw,noise]
                                      [--raw bench/raw/paper_scale.json] [--render] [--no-doc]

Every run is `scaledl simulate --time-only` (docs/simulation.md): the ladder at P = 8 on k80x8 with
cifar_alexnet; weak scaling of Sync EASGD and Sync EASGD3 with an ImageNet GoogLeNet on 1 to 64 cori_knl
nodes; and Sync EASGD's efficiency at the largest P with each assumed constant varied alone
(scaledl.sim.platform.varied). Deterministic for its seed: one sample per cell, with its wall time.
`--parts` measures some of the three again and keeps the others' cells from the record at --raw; the record
says which commit measured each part, and so does the page.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402

NAME = "paper_scale"
TITLE = "Simulated at the paper's scale: the ladder and weak scaling (time-only)"
LADDER = (("easgd", 9), ("sync_easgd1", 8), ("sync_easgd2", 8), ("sync_easgd3", 8))  # (level, ranks) at P = 8
PAPER_LADDER = {"sync_easgd1": 3.7, "sync_easgd2": 1.3, "sync_easgd3": 1.1}  # each over the level before
PAPER_SHARE = {"easgd": 0.87, "sync_easgd3": 0.14}  # communication share of the step
WEAK = ("sync_easgd", "sync_easgd3")
PAPER_E, MARGIN = 0.915, 0.02
QUIET = "noise off"
PARTS = ("ladder", "weak", "band")


def simulate(platform: str, ranks: int, data: Path, model: str, algorithm: str, out: Path, steps: int, extra=()):
    """One time-only simulation: its run.json's seconds per step and shares, and the wall time it took."""
    options = common.train_argv(
        data, out, algorithm, max_steps=steps, eval_every=steps + 1, model=model, lr=0.01, batch_size=64, threads=None
    )[3:]  # the options of `scaledl train`, which `scaledl simulate` takes too
    command = [sys.executable, "-m", "scaledl", "simulate", "--platform-file", str(platform), "--ranks", str(ranks)]
    command += [*options, "--time-only", *extra]
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"scaledl simulate {algorithm} on {platform} failed: {proc.stderr.strip()[-1500:]}")
    run = common.read_run(out)
    return {
        "s_per_step": run.get("seconds_per_step"), "transfer_share": run.get("comm_share"),
        "exposed_share": run.get("exposed_share"), "wall_s": round(time.monotonic() - started, 1),
    }  # fmt: skip


def prepare(tmp: Path) -> dict[str, Path]:
    """The two generated datasets: CIFAR-sized, and ImageNet-shaped (enough images for 64 nodes' batches)."""
    small = common.prepare_synthetic32(tmp, train_count=2048)
    big = tmp / "imagenet_shaped.h5"
    converter = "scaledl.data.converters.synthetic:imagenet_shaped"
    subprocess.run(
        [sys.executable, "-m", "scaledl", "prepare", "imagenet_shaped", "--converter", converter, "--out", str(big)],
        check=True, capture_output=True,
    )  # fmt: skip
    return {"cifar": small, "imagenet": big}


def variants(tmp: Path, constants: list[str], factors: list[float]) -> dict[str, Path | str]:
    """cori_knl with each constant varied alone by each factor, and with its noise off: label → platform file."""
    from scaledl.sim.platform import resolve, varied

    base = resolve("cori_knl")
    found: dict[str, Path | str] = {}
    for constant in constants:
        for factor in factors:
            path = tmp / f"cori_knl-{constant}-{factor:g}.xml"
            path.write_text(varied(base, constant, factor)[0])
            found[f"{constant} ×{factor:g}"] = path
    path = tmp / "cori_knl-quiet.xml"
    path.write_text(varied(base, "noise", 0.0)[0] if "noise" in constants else base.read_text())
    found[QUIET] = path
    return found


def measure(args, tmp: Path) -> dict:
    data = prepare(tmp)
    cells: dict[str, dict] = {}
    if "ladder" in args.parts:
        for level, ranks in LADDER:
            cells[f"ladder {level}"] = simulate("k80x8", ranks, data["cifar"], "cifar_alexnet", level, tmp / level, 12)
            print(f"ladder {level}: {cells[f'ladder {level}']}", flush=True)
    if "weak" in args.parts:
        for algorithm in args.weak_algorithms:
            for seed in args.seeds:
                for n in args.nodes:
                    key, extra = weak_key(algorithm, n, seed), ("--seed", str(seed))
                    out = tmp / key.replace(" ", "_")
                    cells[key] = simulate(
                        "cori_knl", n, data["imagenet"], "googlenet", algorithm, out, args.steps, extra
                    )
                    print(f"{key}: {cells[key]}", flush=True)
    if "band" in args.parts:
        top = max(args.nodes)
        for label, platform in variants(tmp, args.constants, args.factors).items():
            for n in sorted({min(args.nodes), top}):
                key = f"band {label} P={n}"
                cells[key] = simulate(platform, n, data["imagenet"], "googlenet", WEAK[0], tmp / key, args.steps)
                print(f"{key}: {cells[key]}", flush=True)
    return cells


def part_of(cell: str) -> str:
    return cell.split(" ", 1)[0]


def carried_over(raw: Path, parts: list[str]) -> tuple[dict, dict]:
    """The cells of the parts not measured now, and which commit measured each of them, from the record at `raw`;
    a part the record lacks is refused in one line (measure it too)."""
    if set(parts) == set(PARTS):
        return {}, {}
    old = common.read_raw(raw)
    cells = {key: cell for key, cell in old["meta"]["cells"].items() if part_of(key) not in parts}
    provenance = old["meta"].get("parts") or {part: {"commit": old["git"]["commit"], "timestamp": old["timestamp"]}
                                              for part in PARTS}  # fmt: skip
    missing = [part for part in PARTS if part not in parts and not any(part_of(key) == part for key in cells)]
    if missing:
        raise SystemExit(f"bench_paper_scale: {raw} has no {', '.join(missing)} cells to keep; add them to --parts")
    return cells, {part: provenance[part] for part in PARTS if part not in parts}


# ------------------------------------------------------------------ the tables (pure: rebuilt from the record)


def ladder_rows(cells: dict) -> list[dict]:
    rows, before = [], None
    for level, _ in LADDER:
        cell = cells[f"ladder {level}"]
        speedup = before / cell["s_per_step"] if before else None
        rows.append({
            "level": level, "s_per_step": cell["s_per_step"], "speedup": f"{speedup:.2f}×" if speedup else "",
            "paper": f"{PAPER_LADDER[level]}×" if level in PAPER_LADDER else "",
            "transfer": f"{cell['transfer_share']:.0%}", "exposed": f"{cell['exposed_share']:.0%}",
            "paper_share": f"{PAPER_SHARE[level]:.0%}" if level in PAPER_SHARE else "",
        })  # fmt: skip
        before = cell["s_per_step"]
    return rows


def efficiency(cells: dict, prefix: str, n: int, one: int = 1) -> float:
    return cells[f"{prefix} P={one}"]["s_per_step"] / cells[f"{prefix} P={n}"]["s_per_step"]


def weak_key(algorithm: str, n: int, seed: int) -> str:
    """A weak-scaling cell: seed 0's has no suffix (the band's base), another seed's ends in ` sSEED`."""
    return f"weak {algorithm} P={n}" + (f" s{seed}" if seed else "")


WEAK_CELL = re.compile(r"weak (\w+) P=(\d+)(?: s(\d+))?")


def weak_seeds(cells: dict, algorithm: str, n: int, one: int) -> list[float]:
    """Each seed's efficiency at n nodes: its seconds per step at `one` node over its own at n."""
    times = {}
    for key, cell in cells.items():
        found = WEAK_CELL.fullmatch(key)
        if found and found.group(1) == algorithm:
            times[int(found.group(2)), int(found.group(3) or 0)] = cell["s_per_step"]
    seeds = sorted(seed for p, seed in times if p == n and (one, seed) in times)
    return [times[one, seed] / times[n, seed] for seed in seeds]


def efficiency_text(values: list[float]) -> str:
    """One seed's efficiency, or the seeds' mean with its 95 % t-interval and n."""
    if len(values) == 1:
        return f"{values[0]:.1%}"
    # lazy: the interval alone needs scipy
    from scipy import stats as scipy_stats

    mean = statistics.fmean(values)
    half = scipy_stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return f"{mean:.1%} [{mean - half:.1%}–{mean + half:.1%}] n={len(values)}"


def weak_rows(cells: dict, nodes: list[int]) -> list[dict]:
    rows = []
    measured = [a for a in WEAK if f"weak {a} P={nodes[0]}" in cells]
    for n in nodes:
        row = {"nodes": n}
        for algorithm in measured:
            row[f"{algorithm} s/step"] = cells[f"weak {algorithm} P={n}"]["s_per_step"]
            row[f"{algorithm} E"] = efficiency_text(weak_seeds(cells, algorithm, n, nodes[0]))
        rows.append(row)
    return rows


def band_rows(cells: dict, nodes: list[int]) -> list[dict]:
    top, threshold = max(nodes), PAPER_E - MARGIN
    labels = sorted({key.removeprefix("band ").rsplit(" P=", 1)[0] for key in cells if key.startswith("band ")})
    rows = []
    for label in ["base", *labels]:
        prefix = f"weak {WEAK[0]}" if label == "base" else f"band {label}"
        e = efficiency(cells, prefix, top, min(nodes))
        rows.append(
            {"platform": label, f"E(P={top})": f"{e:.1%}", f"≥ {threshold:.1%}": "yes" if e >= threshold else "no"}
        )
    return rows


DOC_BLOCK = "paper_scale_ladder"  # docs/simulation.md's ladder table, rendered from the record


def ladder_block(record: dict) -> str:
    """docs/simulation.md's ladder table, rendered from the record it cites (tests/workflow/test_docs.py checks
    that the page holds exactly this)."""
    meta = record["meta"]
    found = (meta.get("parts") or {}).get("ladder") or {"commit": record["git"].get("commit"), "timestamp": ""}
    rows = ladder_rows(meta["cells"])
    first, last = meta["cells"][f"ladder {LADDER[0][0]}"], meta["cells"][f"ladder {LADDER[-1][0]}"]
    overall = first["s_per_step"] / last["s_per_step"]
    head = (
        f"`bench/raw/{NAME}.json`, its ladder measured at commit {(found['commit'] or 'uncommitted')[:7]} "
        f"{found['timestamp'][:10]}; overall {overall:.1f}× where the paper has 5.3×:\n\n"
    )
    return (
        head
        + common.table(
            rows,
            ["level", "s_per_step", "speedup", "paper", "transfer", "exposed", "paper_share"],
            [
                "level",
                "s/step",
                "over the level before",
                "paper",
                "transfer share",
                "exposed share",
                "paper's comm share",
            ],
        )
        + "\n"
    )


WEAK_BLOCK = "paper_scale_weak"  # docs/simulation.md's weak-scaling table, rendered from the record


def weak_block(record: dict) -> str:
    """docs/simulation.md's weak-scaling table, rendered from the record it cites (tests/workflow/test_docs.py)."""
    meta = record["meta"]
    found = (meta.get("parts") or {}).get("weak") or {"commit": record["git"].get("commit"), "timestamp": ""}
    seeds = meta.get("seeds") or [0]
    rows = weak_rows(meta["cells"], meta["nodes"])
    head = (
        f"`bench/raw/{NAME}.json`, its weak scaling measured at commit {(found['commit'] or 'uncommitted')[:7]} "
        f"{found['timestamp'][:10]}: GoogLeNet at batch 64 per node on cori_knl, {meta['steps']} steps a run, "
        f"seeds {', '.join(map(str, seeds))}; E(n) = s(1)/s(n) of each seed against its own one-node run, the "
        "seeds' mean with its 95 % t-interval (seconds per step: seed 0's):\n\n"
    )
    return head + common.table(rows, list(rows[0])) + "\n"


def write_blocks(record: dict) -> None:
    """docs/simulation.md's two blocks from the record: the ladder and weak scaling."""
    page = common.REPO / "docs/simulation.md"
    common.write_record_block(page, DOC_BLOCK, ladder_block(record))
    common.write_record_block(page, WEAK_BLOCK, weak_block(record))


def measured_at(parts: dict) -> str:
    """Which commit measured each part, where they differ (a part measured again alone)."""
    commits = {part: (found.get("commit") or "?")[:7] for part, found in parts.items()}
    if len(set(commits.values())) <= 1:
        return ""
    return " Measured at: " + ", ".join(f"{part} {commit}" for part, commit in commits.items()) + "."


def render(record: dict, write: bool) -> str:
    meta, cells = record["meta"], record["meta"]["cells"]
    nodes = meta["nodes"]
    wall = sum(cell["wall_s"] for cell in cells.values())
    top = f"weak {WEAK[0]} P={max(nodes)}"
    intro = (
        "Each run is `scaledl simulate --time-only`: its seconds per step come from the operations' shapes and "
        "the platform's constants; nothing is computed (docs/simulation.md). One schedule (seed 0) per cell"
        + (
            f"; weak scaling over seeds {', '.join(map(str, meta['seeds']))}, {meta['steps']} steps each, its "
            "efficiency the seeds' mean with a 95 % t-interval (seconds per step: seed 0's)"
            if len(meta.get("seeds") or []) > 1
            else ""
        )
        + "."
        + measured_at(meta.get("parts") or {})
    )
    ladder = common.table(
        ladder_rows(cells),
        ["level", "s_per_step", "speedup", "paper", "transfer", "exposed", "paper_share"],
        ["level (k80x8, P = 8, cifar_alexnet)", "s/step", "over the level before", "paper", "transfer share",
         "exposed share", "paper's comm share"],
    )  # fmt: skip
    weak_table = weak_rows(cells, nodes)
    weak = common.table(weak_table, list(weak_table[0]))
    band_table = band_rows(cells, nodes)
    band = common.table(band_table, list(band_table[0]))
    notes = (
        f"Wall time of this machine for all {len(cells)} simulations: {wall:.0f} s; the {max(nodes)}-node "
        f"GoogLeNet run alone: {cells[top]['wall_s']:.0f} s. Raw record: bench/raw/{NAME}.json."
    )
    tables = f"{ladder}\n\nWeak scaling on cori_knl (GoogLeNet, batch 64 per node):\n\n{weak}\n\n"
    tables += f"Sync EASGD's efficiency at {max(nodes)} nodes with each assumed constant varied alone:\n\n{band}"
    return common.publish(NAME, TITLE, record, intro, tables, notes, write=write)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    numbers = lambda kind: lambda text: [kind(x) for x in text.split(",") if x]  # noqa: E731
    parser.add_argument("--parts", type=numbers(str), default=list(PARTS), metavar="P1,P2", help="of ladder,weak,band")
    parser.add_argument("--nodes", type=numbers(int), default=[1, 2, 4, 8, 16, 32, 64], metavar="N1,N2")
    parser.add_argument("--steps", type=int, default=20, help="steps per run (default %(default)s)")
    parser.add_argument("--seeds", type=numbers(int), default=[0], metavar="S1,S2", help="weak scaling's seeds")
    parser.add_argument("--weak-algorithms", type=numbers(str), default=list(WEAK), metavar="A1,A2")
    parser.add_argument("--factors", type=numbers(float), default=[0.5, 2.0], metavar="F1,F2")
    parser.add_argument(
        "--constants", type=numbers(str), default=["efficiency", "op_overhead", "network_bw", "noise"], metavar="C1,C2"
    )
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if set(args.parts) - set(PARTS):
        parser.error(f"--parts: of {', '.join(PARTS)}")
    if args.render:
        render(common.read_raw(args.raw), write=not args.no_doc)
        if not args.no_doc:
            write_blocks(common.read_raw(args.raw))
        return 0
    load_before = __import__("os").getloadavg()[0]
    kept, parts = carried_over(args.raw, args.parts)
    with tempfile.TemporaryDirectory() as folder:
        tmp = args.workdir or Path(folder)
        tmp.mkdir(parents=True, exist_ok=True)
        cells = measure(args, tmp) | kept
    now = {"commit": common.git_state()["commit"], "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    parts |= {part: now for part in args.parts}
    samples = {key: [cell["s_per_step"]] for key, cell in cells.items()}
    meta = {"cells": cells, "nodes": args.nodes, "steps": args.steps, "load_before": load_before, "parts": parts,
            "seeds": args.seeds}  # fmt: skip
    common.write_raw(args.raw, NAME, samples, meta)
    render(common.read_raw(args.raw), write=not args.no_doc)
    if not args.no_doc:
        write_blocks(common.read_raw(args.raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
