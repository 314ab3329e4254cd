"""The paper's codesign ladder: original EASGD → Sync EASGD1 → Sync EASGD2 → Sync EASGD3, side by side.

    python bench/bench_ladder.py [--workers 2] [--rounds 5] [--target 0.9] [--heavy-rounds 3]
                                 [--heavy-warmup 3] [--heavy-steps 10] [--heavy-levels ...] [--fair]
                                 [--netbench FILE] [--raw bench/raw/ladder.json] [--render] [--no-doc]

Table 1: time to --target test accuracy (LeNet, digits). The target step is a property of the arithmetic
(the sync levels are bitwise equal), so one untimed run per arithmetic evaluating after every step finds it,
and the timed runs stop there with no evaluation inside the clock. Table 2: steady-state s/step of
cifar_alexnet, split into compute, transfer and wait. Every row carries the α-β prediction
(scaledl.net.alphabeta.step_cost with the runs' own exchange). The page's words: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "ladder"
TITLE = "Sync EASGD ladder: original EASGD → Sync EASGD1 → 2 → 3"
LEVELS = ("easgd", "sync_easgd1", "sync_easgd2", "sync_easgd3")
TWIN = "sync_easgd2"  # measured twice per round: the A/A pair
HEAVY_LEVELS = LEVELS[1:]  # the cifar_alexnet table's default (easgd with --heavy-levels: budget)
COST_MODEL = "paper"
PAPER_SPEEDUP = {"sync_easgd1": 3.7, "sync_easgd2": 1.3, "sync_easgd3": 1.1}  # the paper's, each over the previous
TTT = {"model": "lenet", "dataset": "digits", "batch": 64, "lr": 0.05, "warmup": 5}
HEAVY = {"model": "cifar_alexnet", "dataset": "synthetic32", "batch": 16, "lr": 0.01}
TTT_QUANTITY = "training seconds through the target step (run.json stop.train_s)"
TARGET_MAX_STEPS = 600  # the untimed target-step run gives up here


# ----------------------------------------------------------------- variants


@dataclass(frozen=True)
class Variant:
    """One measured configuration: a ladder level at `workers` workers; `twin` is its A/A repeat."""

    level: str
    workers: int
    twin: bool = False

    @property
    def label(self) -> str:
        return f"{self.level}, P={self.workers}"

    def cell(self, table: str) -> str:
        name = f"{table}: {self.label}"
        return stats.aa_cell(name) if self.twin else name

    @property
    def ranks(self) -> int:
        return ranks_of(self.level, self.workers)


def ranks_of(level: str, workers: int) -> int:
    from scaledl.algorithms import tasks_for

    return tasks_for(level, workers)


def arithmetic(level: str) -> str:
    """The levels whose updates are bitwise equal share one arithmetic (and one target step)."""
    return "easgd" if level == "easgd" else "sync_easgd"


def ttt_variants(workers: int, fair: bool) -> list[Variant]:
    variants = [Variant(level, workers) for level in LEVELS] + [Variant(TWIN, workers, twin=True)]
    if fair:
        variants += [Variant("easgd", 1), Variant(TWIN, 1)]
    return variants


def heavy_variants(workers: int, levels: list[str]) -> list[Variant]:
    return [Variant(level, workers) for level in levels] + [Variant(TWIN, workers, twin=True)]


TTT_TABLE, HEAVY_TABLE = "time to target", "cifar_alexnet s/step"


# ------------------------------------------------------------------ running


def train_args(data: Path, out: Path, level: str, spec: dict, *, max_steps: int, eval_every: int, **options):
    """`scaledl train`'s arguments for one run of a table (`spec`: its model, batch and lr)."""
    return common.train_argv(
        data, out, level, max_steps=max_steps, eval_every=eval_every, model=spec["model"],
        batch_size=spec["batch"], lr=spec["lr"], **options,
    )  # fmt: skip


def find_target_step(data: Path, out: Path, level: str, workers: int, target: float) -> dict:
    """The first step whose center reaches `target`, from an untimed run evaluating after every step."""
    common.run_mpi(
        ranks_of(level, workers),
        train_args(data, out, level, TTT, max_steps=TARGET_MAX_STEPS, eval_every=1, target_accuracy=target),
        timeout=900,
    )
    run = common.read_run(out)
    step = run["evaluation"]["target_step"]
    if step is None:
        raise SystemExit(
            f"bench_ladder: {level} at P={workers} did not reach test accuracy {target} in "
            f"{TARGET_MAX_STEPS} steps; lower --target"
        )
    return {
        "level": level, "workers": workers, "step": step, "accuracy": run["final"]["test_accuracy"],
        "loss": run["final"]["test_loss"], "eval_every": 1,
    }  # fmt: skip


def per_step(run_dir: Path, warmup: int) -> dict:
    """The workers' steady-state means per step (bench.common.steady_state), with compute = data + compute +
    update + center_update and wait = blocked on peers, as docs/time.md defines them."""
    state = common.steady_state(run_dir, warmup)
    compute = sum(state[f"{p}_s"] for p in ("data", "compute", "update", "center_update"))
    return {
        "seconds_per_step": state["seconds_per_step"], "compute_s": compute, "transfer_s": state["transfer_s"],
        "wait_s": state["wait_s"], "exposed_s": state["exposed_s"], "transfer_share": state["comm_share"],
        "exposed_share": state["exposed_s"] / state["seconds_per_step"], "steady_steps": state["steps"],
        "warmup": warmup, "backend": state["run"]["codesign"]["backend"],
        "exchange": common.run_exchange(state["run"]), "phase_gap": phase_gap(state["run"]),
        "model_bytes": state["run"]["model"]["bytes"],
    }  # fmt: skip


def phase_gap(run: dict) -> float:
    """The largest share of a rank's wall time its phases leave unaccounted (docs/time.md: ≤ 5 %)."""
    return max(abs(r["unaccounted_s"]) / r["wall_s"] for r in run["phases"]["per_rank"])


def hidden_per_step(run: dict, warmup: int) -> float | None:
    """Sync EASGD3: mean over workers and over the steady-state exchanges (τ = 1: exchange k is step k) of
    the helper thread's exchange seconds minus the seconds the main thread waited for them."""
    logs = [r.get("overlap_per_exchange") for r in run.get("algorithm_report") or [] if isinstance(r, dict)]
    logs = [log for log in logs if log]
    if not logs:
        return None
    means = []
    for log in logs:
        pairs = list(zip(log["exchange_s"], log["waited_s"]))[warmup:]
        if pairs:
            means.append(sum(x - w for x, w in pairs) / len(pairs))
    return sum(means) / len(means) if means else None


def time_to_target(data: Path, out: Path, v: Variant, steps: int) -> dict:
    """A timed run of exactly `steps` steps, evaluated once after the loop."""
    common.run_mpi(v.ranks, train_args(data, out, v.level, TTT, max_steps=steps, eval_every=steps + 1), timeout=900)
    run = common.read_run(out)
    detail = {
        "train_s": run["stop"]["train_s"], "steps": run["stop"]["steps"],
        "final_accuracy": run["final"]["test_accuracy"], "final_loss": run["final"]["test_loss"],
        **per_step(out, min(TTT["warmup"], steps // 4)),
    }  # fmt: skip
    shutil.rmtree(out)
    return detail


def heavy_run(data: Path, out: Path, v: Variant, warmup: int, steps: int) -> dict:
    total = warmup + steps
    common.run_mpi(v.ranks, train_args(data, out, v.level, HEAVY, max_steps=total, eval_every=total + 1), timeout=900)
    detail = per_step(out, warmup)
    detail["hidden_s"] = hidden_per_step(common.read_run(out), warmup)
    shutil.rmtree(out)  # its model.pt alone is 144 MB; everything the tables need is in `detail`
    return detail


def rounds_of(variants: list[Variant], rounds: int, table: str, measure) -> tuple[dict, dict, list, dict]:
    """Every variant once per round (common.rotating_rounds): (samples, details, orders, conditions)."""
    by_cell = {v.cell(table): v for v in variants}

    def measure_one(c: str, r: int, i: int):
        t0 = time.monotonic()
        sample, detail = measure(by_cell[c], f"r{r}-{i}")
        return sample, {**detail, "run_wall_s": time.monotonic() - t0}

    result = common.rotating_rounds(NAME, list(by_cell), rounds, measure_one)
    return result["samples"], result["details"], result["order"], result["conditions"]


def measure(args) -> Path:
    """Run both tables (and the target-step runs), write the raw record; returns its path."""
    t_start = time.monotonic()
    ttt = ttt_variants(args.workers, args.fair)
    heavy = heavy_variants(args.workers, args.heavy_levels) if args.heavy_rounds else []
    common.use_launch(common.Launch.for_table(max(v.ranks for v in ttt + heavy)))
    m = common.machine()
    blocks = {}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        t0 = time.monotonic()
        network = common.network(args.netbench, work, "bench_ladder")
        blocks["netbench_s"] = time.monotonic() - t0

        t0 = time.monotonic()
        digits = common.prepare_digits(work)
        targets = {}
        for kind, p in sorted({(arithmetic(v.level), v.workers) for v in ttt}):
            level = "easgd" if kind == "easgd" else TWIN
            found = find_target_step(digits, work / f"target-{kind}-{p}", level, p, args.target)
            targets[f"{kind}, P={p}"] = found
            print(f"bench_ladder: {kind} at P={p} first reaches {args.target} at step {found['step']}", flush=True)
        blocks["target_steps_s"] = time.monotonic() - t0

        def steps_of(v: Variant) -> int:
            return targets[f"{arithmetic(v.level)}, P={v.workers}"]["step"]

        def ttt_measure(v: Variant, tag: str):
            detail = time_to_target(digits, work / f"ttt-{tag}", v, steps_of(v))
            return detail["train_s"], detail

        t0 = time.monotonic()
        ttt_samples, ttt_details, ttt_order, conditions = rounds_of(ttt, args.rounds, TTT_TABLE, ttt_measure)
        blocks["time_to_target_s"] = time.monotonic() - t0

        heavy_samples, heavy_details, heavy_order = {}, {}, []
        if heavy:
            t0 = time.monotonic()
            count = max(512, args.workers * HEAVY["batch"] * (args.heavy_warmup + args.heavy_steps))
            synthetic = common.prepare_synthetic32(work, count)

            def heavy_measure(v: Variant, tag: str):
                detail = heavy_run(synthetic, work / f"heavy-{tag}", v, args.heavy_warmup, args.heavy_steps)
                return detail["seconds_per_step"], detail

            heavy_samples, heavy_details, heavy_order, more = rounds_of(
                heavy, args.heavy_rounds, HEAVY_TABLE, heavy_measure
            )
            conditions.update(more)
            blocks["heavy_s"] = time.monotonic() - t0
    wall = time.monotonic() - t_start
    print(f"bench_ladder: {', '.join(f'{k[:-2]} {s:.0f} s' for k, s in blocks.items())}; wall {wall:.0f} s", flush=True)
    ttt_meta = {**TTT, "rounds": args.rounds, "order": ttt_order, "detail": ttt_details, "quantity": TTT_QUANTITY}
    heavy_meta = {
        **HEAVY, "rounds": args.heavy_rounds, "warmup": args.heavy_warmup, "steps": args.heavy_steps,
        "order": heavy_order, "detail": heavy_details, "quantity": "steady-state seconds per step (workers' mean)",
    }  # fmt: skip
    variants = {"ttt": [vars_of(v) for v in ttt], "heavy": [vars_of(v) for v in heavy]}
    return common.write_raw(args.raw, NAME, {**ttt_samples, **heavy_samples}, {
        "machine": m, "unit": "s", "workers": args.workers, "target": args.target, "cost_model": COST_MODEL,
        "network": network, "targets": targets, "variants": variants, "conditions": conditions, "ttt": ttt_meta,
        "heavy": heavy_meta, "blocks_s": blocks, "wall_s": wall,
    })  # fmt: skip


def vars_of(v: Variant) -> dict:
    return {"level": v.level, "workers": v.workers, "twin": v.twin, "ranks": v.ranks}


# ---------------------------------------------------------------- rendering


def variants_of(record: dict, table: str) -> list[Variant]:
    return [Variant(d["level"], d["workers"], d["twin"]) for d in record["meta"]["variants"][table]]


def predicted(net, v: Variant, details: list[dict]):
    """scaledl.net.alphabeta.step_cost of the level (its family decides the formula) with the exchange its runs
    used, at their median compute, or None without α-β."""
    from scaledl.net.alphabeta import step_cost

    if net is None:
        return None
    compute_s, exchange = common.median([x["compute_s"] for x in details]), common.priced_exchange(details)
    nbytes = details[0]["model_bytes"]
    return step_cost(
        v.level, net, nbytes, v.workers, model=COST_MODEL, compute_s=compute_s, control=True, exchange=exchange
    )


def dagger(record: dict, v: Variant) -> str:
    """ "†" for a cell with more ranks than the measuring machine's cores (from the record, not this machine)."""
    return common.recorded_mark(record, v.ranks)


def num(x: float) -> str:
    """3 significant digits, never in exponent form for the magnitudes of these tables."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def spread(values, scale: float = 1.0) -> str:
    """ "12.3 [11.9–13.0]": median [min–max] of `values` × scale (n is stated in the table's caption)."""
    s = stats.summary([x * scale for x in values])
    return f"{num(s['median'])} [{num(s['min'])}{stats.DASH}{num(s['max'])}]"


def rounds_text(n: int) -> str:
    return f"{n} round{'' if n == 1 else 's'}"


def percent(values) -> str:
    s = stats.summary([100 * x for x in values])
    return f"{s['median']:.1f} % [{s['min']:.1f}{stats.DASH}{s['max']:.1f}]"


def ratio_cells(samples: dict, this: str, ref: str, noise: float) -> tuple[str, str]:
    """The speed-up ref ÷ this (paired per round) and what `this` is against `ref`: faster, slower, or no
    difference inside the A/A noise floor."""
    speedup = stats.ratio(samples[ref], samples[this])
    return stats.format_ratio(speedup), stats.verdict(stats.ratio(samples[this], samples[ref]), noise)


def previous_of(v: Variant, variants: list[Variant]) -> Variant | None:
    """The level just below `v` on the ladder at the same P (the twin compares with its original)."""
    if v.twin:
        return Variant(v.level, v.workers)
    index = LEVELS.index(v.level)
    for level in reversed(LEVELS[:index]):
        for other in variants:
            if other.level == level and other.workers == v.workers and not other.twin:
                return other
    return None


def aa_noise(record: dict, table: str, workers: int) -> tuple[float, dict]:
    """The A/A noise floor of a table (stats.noise_floor, the one rule of every section) and the twin's ratio
    to its original."""
    s = record["samples"]
    base, twin = s[Variant(TWIN, workers).cell(table)], s[Variant(TWIN, workers, twin=True).cell(table)]
    return stats.noise_floor(zip(base, twin)), stats.ratio(twin, base)


def ttt_tables(record: dict, net) -> str:
    meta, s = record["meta"], record["samples"]
    variants = variants_of(record, "ttt")
    detail = meta["ttt"]["detail"]
    noise, aa = aa_noise(record, TTT_TABLE, meta["workers"])
    easgd = {w: Variant("easgd", w) for w in {v.workers for v in variants}}
    n = meta["ttt"]["rounds"]
    rows, step_rows = [], []
    for v in variants:
        cell = v.cell(TTT_TABLE)
        d = detail[cell]
        steps = meta["targets"][f"{arithmetic(v.level)}, P={v.workers}"]["step"]
        cost = predicted(net, v, d)
        name = f"{v.level}{' [A/A]' if v.twin else ''}"
        prev, ref = previous_of(v, variants), easgd[v.workers]
        vs_prev = ratio_cells(s, cell, prev.cell(TTT_TABLE), noise) if prev else ("–", "–")
        vs_easgd = (
            ("–", "–")
            if v.level == "easgd" or ref.cell(TTT_TABLE) not in s
            else ratio_cells(s, cell, ref.cell(TTT_TABLE), noise)
        )
        paper = v.level in PAPER_SPEEDUP and not v.twin and v.workers == meta["workers"]
        row = {
            "level": name, "P": v.workers, "ranks": f"{v.ranks}{dagger(record, v)}", "steps to target": steps,
            "time to target, median [min–max] n": stats.format_cell(stats.summary(s[cell])),
            "α-β prediction (steps × s/step)": f"{steps * cost.step_s:.3g} s" if cost else "–",
            "previous": prev.level if prev else "–",
            "speed-up vs previous (previous ÷ this)": vs_prev[0], "this level is": vs_prev[1],
            "speed-up vs easgd (easgd ÷ this)": vs_easgd[0], "vs easgd, this is": vs_easgd[1],
            "paper: previous ÷ this": f"{PAPER_SPEEDUP[v.level]}×" if paper else "–",
        }  # fmt: skip
        rows.append(row)
        step_rows.append({
            "level": name, "P": v.workers, "ranks": f"{v.ranks}{dagger(record, v)}",
            "s/step, median [min–max] n": stats.format_cell(stats.summary([x["seconds_per_step"] for x in d])),
            "α-β s/step": f"{num(cost.step_s * 1e3)} ms" if cost else "–",
            "α-β formula": cost.formula if cost else "–", "compute ms/step": spread([x["compute_s"] for x in d], 1e3),
            "transfer share (h2d+param_copy+comm)": percent([x["transfer_share"] for x in d]),
            "exposed share (transfer+wait)": percent([x["exposed_share"] for x in d]), "backend": d[0]["backend"],
        })  # fmt: skip
    warm = sorted({x["warmup"] for runs in detail.values() for x in runs})
    t = meta["ttt"]
    caption = common.text(
        "ladder.ttt", target=f"{meta['target']:.0%}", model=t["model"], dataset=t["dataset"], batch=t["batch"],
        lr=t["lr"], rounds=rounds_text(n),
    )  # fmt: skip
    aa_text = common.text("ladder.ttt_aa", twin=TWIN, aa=stats.format_ratio(aa), floor=f"{noise:.1%}", rule=stats.RULE)
    if record["machine"].get("gpus") == "no GPU":
        aa_text += " " + common.text("ladder.paper_gpu")
    per_step = common.text("ladder.per_step", warm="/".join(map(str, warm)), rounds=rounds_text(n))
    return f"{caption}\n\n{common.table(rows, list(rows[0]))}\n{aa_text}\n\n{per_step}\n\n" + common.table(
        step_rows, list(step_rows[0])
    )


def heavy_table(record: dict, net) -> str:
    meta, s = record["meta"], record["samples"]
    h = meta["heavy"]
    variants = variants_of(record, "heavy")
    noise, aa = aa_noise(record, HEAVY_TABLE, meta["workers"])
    rows = []
    for v in variants:
        cell = v.cell(HEAVY_TABLE)
        d = h["detail"][cell]
        cost = predicted(net, v, d)
        hidden = [x["hidden_s"] for x in d if x.get("hidden_s") is not None]
        row = {
            "level": f"{v.level}{' [A/A]' if v.twin else ''}", "ranks": f"{v.ranks}{dagger(record, v)}",
            "s/step, median [min–max] n": stats.format_cell(stats.summary(s[cell])),
        }  # fmt: skip
        prev = previous_of(v, variants)
        if prev is not None:
            row["previous"] = prev.level
            row["speed-up vs previous"], row["this level is"] = ratio_cells(s, cell, prev.cell(HEAVY_TABLE), noise)
        else:
            row["previous"], row["speed-up vs previous"], row["this level is"] = "–", "–", "–"
        row.update({
            "α-β s/step": num(cost.step_s * 1e3) if cost else "–",
            "compute": spread([x["compute_s"] for x in d], 1e3),
            "transfer (h2d+param_copy+comm)": spread([x["transfer_s"] for x in d], 1e3),
            "wait": spread([x["wait_s"] for x in d], 1e3),
            "exposed (transfer+wait)": spread([x["exposed_s"] for x in d], 1e3),
            "α-β exchange": num(cost.exchange_s * 1e3) if cost else "–",
            "hidden (helper − waited)": spread(hidden, 1e3) if hidden else "–",
            "transfer share": percent([x["transfer_share"] for x in d]),
            "exposed share": percent([x["exposed_share"] for x in d]),
        })  # fmt: skip
        rows.append(row)
    nbytes = h["detail"][variants[0].cell(HEAVY_TABLE)][0]["model_bytes"]
    caption = common.text(
        "ladder.heavy", model=h["model"], params=f"{nbytes / 4e6:.1f}", mb=f"{nbytes / 1e6:.0f}", dataset=h["dataset"],
        batch=h["batch"], lr=h["lr"], warmup=h["warmup"], steps=h["steps"], rounds=rounds_text(h["rounds"]),
    )  # fmt: skip
    aa_text = common.text("ladder.heavy_aa", twin=TWIN, aa=stats.format_ratio(aa), floor=f"{noise:.1%}")
    no_easgd = "" if any(v.level == "easgd" for v in variants) else " " + common.text("ladder.heavy_no_easgd")
    return f"{caption}\n\n{common.table(rows, list(rows[0]))}\n{aa_text}{no_easgd}\n"


def fair_sentence(record: dict) -> str:
    """easgd vs sync_easgd2 at one worker (both within the cores), when --fair measured them."""
    s = record["samples"]
    easgd, sync = Variant("easgd", 1), Variant(TWIN, 1)
    if easgd.cell(TTT_TABLE) not in s or sync.cell(TTT_TABLE) not in s:
        return ""
    noise, _ = aa_noise(record, TTT_TABLE, record["meta"]["workers"])
    speedup, verdict = ratio_cells(s, sync.cell(TTT_TABLE), easgd.cell(TTT_TABLE), noise)
    return " " + common.text("ladder.fair", twin=TWIN, speedup=speedup, verdict=verdict, p=record["meta"]["workers"])


def fair_absent(record: dict) -> str:
    """Why the fair pair is not in the table (it was not asked for), with what it would have cost."""
    walls = [d["run_wall_s"] for runs in record["meta"]["ttt"]["detail"].values() for d in runs if "run_wall_s" in d]
    cost = f"; the time-to-target runs here took {min(walls):.0f}–{max(walls):.0f} s of wall time each" if walls else ""
    return " " + common.text("ladder.fair_absent", cost=cost)


def accuracy_check(record: dict) -> str:
    """Did every timed run end at exactly the accuracy the target-step run found at that step?"""
    meta = record["meta"]
    off = []
    for v in variants_of(record, "ttt"):
        target = meta["targets"][f"{arithmetic(v.level)}, P={v.workers}"]
        for r, d in enumerate(meta["ttt"]["detail"][v.cell(TTT_TABLE)]):
            if d["final_accuracy"] != target["accuracy"] or d["steps"] != target["step"]:
                off.append(
                    f"{v.label}{' [A/A]' if v.twin else ''} round {r + 1}: step {d['steps']}, accuracy "
                    f"{d['final_accuracy']:.4f}"
                )
    return common.text("ladder.reproduced") if not off else common.text("ladder.not_reproduced", runs="; ".join(off))


def baseline_note(record: dict) -> str:
    """How easgd was launched against the sync levels, and where to read how far it runs above its model."""
    p, cores = record["meta"]["workers"], record["machine"].get("cores")
    easgd, sync = Variant("easgd", p), Variant(TWIN, p)
    if not dagger(record, easgd):
        return common.text("ladder.baseline_fits", p=p, ranks=easgd.ranks)
    bound = "" if dagger(record, sync) else f", where the sync levels' {sync.ranks} ranks are bound one per core"
    return common.text("ladder.baseline_sliced", p=p, ranks=easgd.ranks, cores=cores, bound=bound)


def hardware_note(record: dict) -> str:
    """What a CPU-only machine cannot show of the paper's ladder."""
    return " " + common.text("ladder.cpu_only") if record["machine"].get("gpus") == "no GPU" else ""


def render(record: dict, raw_path: str | None = None) -> tuple[str, str, str, str]:
    """Title, intro, tables and notes, from the raw record alone."""
    meta = record["meta"]
    net = common.recorded_network(meta)
    p = meta["workers"]
    cores = record["machine"].get("cores")
    easgd_ranks = ranks_of("easgd", p)
    prediction = common.network_words(meta)
    if net is not None and "wall_s" in meta["network"] and (record.get("launch") or {}).get("yield_poll"):
        prediction += "; " + common.text("ladder.yielding")
    intro = common.text(
        "ladder.intro", p=p, easgd_ranks=easgd_ranks, cores=cores, twin=TWIN, model=COST_MODEL, prediction=prediction
    )
    tables = ttt_tables(record, net)
    if meta["heavy"]["rounds"] and meta["variants"]["heavy"]:
        tables += "\n\n" + heavy_table(record, net)
    gaps = [d["phase_gap"] for part in ("ttt", "heavy") for runs in meta[part]["detail"].values() for d in runs]
    notes = f"{common.text('ladder.same_arithmetic')} {accuracy_check(record)} {baseline_note(record)}"
    notes += (fair_sentence(record) or fair_absent(record)) + " " + common.text("ladder.shares") + hardware_note(record)
    notes += f" The largest unaccounted share of any rank's wall time was {max(gaps):.1%} (phases cover the rest)."
    notes += f" Raw samples: {raw_path}." if raw_path else ""
    if "wall_s" in meta:
        blocks = ", ".join(f"{k[:-2]} {v:.0f} s" for k, v in meta.get("blocks_s", {}).items())
        notes += f" Wall time of the measuring run: {meta['wall_s']:.0f} s ({blocks})."
    if (rounds := meta["ttt"]["rounds"]) < 5:
        notes += f" Only {rounds} round(s) for time to target: not enough for a headline ratio (use ≥ 5)."
    return TITLE, intro, tables, notes


# --------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--workers", type=int, default=2, help="P, workers per level (default %(default)s)")
    add("--rounds", type=int, default=5, help="time-to-target rounds, ≥ 5 for headline ratios (default %(default)s)")
    add("--target", type=float, default=0.9, help="test accuracy to reach (default %(default)s)")
    add("--heavy-rounds", type=int, default=3, help="rounds of the cifar_alexnet table, 0: none (default %(default)s)")
    add("--heavy-warmup", type=int, default=3, help="untimed steps per cifar_alexnet run (default %(default)s)")
    add("--heavy-steps", type=int, default=10, help="timed steps per cifar_alexnet run (default %(default)s)")
    add(
        "--heavy-levels", type=lambda text: [x for x in text.split(",") if x], default=list(HEAVY_LEVELS),
        metavar="L1,L2", help=f"levels of the cifar_alexnet table (default {','.join(HEAVY_LEVELS)})",
    )  # fmt: skip
    add("--fair", action="store_true", help="also easgd with one worker (+ master) against sync_easgd2 with one")
    add("--netbench", type=Path, metavar="FILE", help="α, β, γ from this `scaledl netbench` JSON (default: measure)")
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    if args.rounds < 1 or args.heavy_rounds < 0:
        parser.error("--rounds must be >= 1 and --heavy-rounds >= 0")
    if not 0 < args.target <= 1:
        parser.error("--target must be a test accuracy in (0, 1]")
    if args.heavy_warmup < 1 or args.heavy_steps < 1:
        parser.error("--heavy-warmup and --heavy-steps must be >= 1")
    unknown = [x for x in args.heavy_levels if x not in LEVELS]
    if unknown or TWIN not in args.heavy_levels:
        parser.error(f"--heavy-levels: choose among {','.join(LEVELS)}, including {TWIN} (the A/A pair)")
    args.heavy_levels = [x for x in LEVELS if x in args.heavy_levels]
    if args.netbench is not None and not args.netbench.is_file():
        parser.error(f"--netbench {args.netbench}: no such file (write one with `scaledl netbench`)")
    if not args.render:
        print(f"raw samples: {measure(args)}")
    render_here = lambda record: render(record, common.shown_path(args.raw))  # noqa: E731
    return common.publish_record(args.raw, NAME, render_here, write=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
