"""The paper's codesign ladder: original EASGD → Sync EASGD1 → Sync EASGD2 → Sync EASGD3, side by side.

    python bench/bench_ladder.py [--workers 2] [--rounds 5] [--target 0.9] [--heavy-rounds 3]
                                 [--heavy-warmup 3] [--heavy-steps 10] [--heavy-levels ...] [--fair]
                                 [--netbench FILE] [--raw bench/raw/ladder.json] [--render] [--no-doc]

The levels (scaledl's registry presets): easgd, the original round-robin
EASGD with a master rank of its own (P + 1 ranks); sync_easgd1, tree
collectives with the center in host memory; sync_easgd2, the center beside
the workers' weights on the device; sync_easgd3, sync_easgd2 with the
exchange on a helper thread, overlapped with data and forward/backward.

Table 1, time to a test accuracy of --target (LeNet on the embedded digits
set, P = --workers, batch 64, lr 0.05, seed 0). The step at which the
center first reaches the target is a property of the arithmetic, not of the
clock: every level is deterministic, and Sync EASGD 1/2/3 are bitwise equal.
So one untimed run per arithmetic (easgd; sync_easgd2 for the three sync
levels) evaluates the center after EVERY step and finds that step N; the
timed runs then train exactly N steps with no evaluation inside the loop
(--eval-every N + 1: the center is evaluated once, after the clock stops).
A sample is the training clock through step N (run.json stop.train_s): one
step of resolution, and no evaluation thread competing for the cores. Each
timed run's final accuracy is checked against the untimed run's at step N.
Beside it, from the same runs' timelines (steady state, docs/time.md): s/step,
the transfer share (h2d + param_copy + comm over step time: the paper's
communication share) and the exposed share (transfer + wait).

Table 2, where the exchange time goes with a communication-heavy model
(cifar_alexnet, 36 M parameters, synthetic 3×32×32, batch 16, lr 0.01; the
sync levels by default, easgd with --heavy-levels, for the time budget):
--heavy-warmup untimed steps then --heavy-steps timed ones, no evaluation
inside the run (the center is evaluated after the loop), steady-state
s/step per worker split into compute, transfer, wait, and for sync_easgd3
the exchange seconds hidden behind compute (the helper thread's exchange
time minus the part the main thread waited for, per exchange, over the same
steady-state steps).

Every measured row carries the α-β(-γ) prediction of scaledl.net.alphabeta
(step_cost with the level's family: round_robin for easgd, bcast_reduce for
the sync levels, overlapped for sync_easgd3; the "paper" model, binomial
trees, with the row's own measured compute per step as T_c and control
messages included) with α, β, γ from --netbench FILE, else from a netbench
this script runs first in the table's launch environment (10–20 s).

Statistics: every round measures every variant once in the order
bench.stats.round_order gives, including an A/A twin (sync_easgd2 measured twice
per round); cells are median [min–max] n over rounds, ratios are paired per
round, and a ratio's verdict
reads the order-statistic interval of its median against the A/A floor (bench.stats.verdict:
slower, faster, no difference within ±x %, not resolved at ±x %). One
launch environment for the whole run (bench.common.Launch.for_table with
the largest rank count); a cell with more ranks than cores is marked †.
--fair adds easgd with one worker (worker + master: 2 ranks) against
sync_easgd2 with one worker, both within the cores. Every raw sample goes to
--raw; the tables are rendered from that record alone (--render).
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
        "level": level,
        "workers": workers,
        "step": step,
        "accuracy": run["final"]["test_accuracy"],
        "loss": run["final"]["test_loss"],
        "eval_every": 1,
    }


def per_step(run_dir: Path, warmup: int) -> dict:
    """The workers' steady-state means per step (bench.common.steady_state), with compute = data + compute +
    update + center_update and wait = blocked on peers, as docs/time.md defines them."""
    state = common.steady_state(run_dir, warmup)
    compute = sum(state[f"{p}_s"] for p in ("data", "compute", "update", "center_update"))
    return {
        "seconds_per_step": state["seconds_per_step"],
        "compute_s": compute,
        "transfer_s": state["transfer_s"],
        "wait_s": state["wait_s"],
        "exposed_s": state["exposed_s"],
        "transfer_share": state["comm_share"],
        "exposed_share": state["exposed_s"] / state["seconds_per_step"],
        "steady_steps": state["steps"],
        "warmup": warmup,
        "backend": state["run"]["codesign"]["backend"],
        "exchange": common.run_exchange(state["run"]),
        "phase_gap": phase_gap(state["run"]),
        "model_bytes": state["run"]["model"]["bytes"],
    }


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
        "train_s": run["stop"]["train_s"],
        "steps": run["stop"]["steps"],
        "final_accuracy": run["final"]["test_accuracy"],
        "final_loss": run["final"]["test_loss"],
        **per_step(out, min(TTT["warmup"], steps // 4)),
    }
    shutil.rmtree(out)
    return detail


def heavy_run(data: Path, out: Path, v: Variant, warmup: int, steps: int) -> dict:
    total = warmup + steps
    common.run_mpi(v.ranks, train_args(data, out, v.level, HEAVY, max_steps=total, eval_every=total + 1), timeout=900)
    detail = per_step(out, warmup)
    detail["hidden_s"] = hidden_per_step(common.read_run(out), warmup)
    shutil.rmtree(out)  # its model.pt alone is 144 MB; everything the tables need is in `detail`
    return detail


def rounds_of(variants: list[Variant], rounds: int, table: str, measure) -> tuple[dict, dict, list]:
    """Every variant once per round in the order stats.round_order gives: (samples, details, orders)."""
    samples = {v.cell(table): [] for v in variants}
    details = {v.cell(table): [] for v in variants}
    orders, log = [], {}
    for r in range(rounds):
        order = stats.round_order(variants, r, rounds)
        orders.append([v.cell(table) for v in order])
        for i, v in enumerate(order):
            t0 = time.monotonic()
            with common.conditions(log, v.cell(table)):
                sample, detail = measure(v, f"r{r}-{i}")
            detail.update(log[v.cell(table)][-1])
            detail["run_wall_s"] = time.monotonic() - t0
            samples[v.cell(table)].append(sample)
            details[v.cell(table)].append(detail)
            print(
                f"bench_ladder: {table} round {r + 1}/{rounds} {v.label + (' [A/A]' if v.twin else ''):<22} "
                f"{sample:8.3f} s  (run {time.monotonic() - t0:.1f} s)",
                flush=True,
            )
    return samples, details, orders


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
        for key in sorted({(arithmetic(v.level), v.workers) for v in ttt}):
            level = "easgd" if key[0] == "easgd" else TWIN
            targets[f"{key[0]}, P={key[1]}"] = find_target_step(
                digits, work / f"target-{key[0]}-{key[1]}", level, key[1], args.target
            )
            print(
                f"bench_ladder: {key[0]} at P={key[1]} first reaches {args.target} at step "
                f"{targets[f'{key[0]}, P={key[1]}']['step']}",
                flush=True,
            )
        blocks["target_steps_s"] = time.monotonic() - t0

        def steps_of(v: Variant) -> int:
            return targets[f"{arithmetic(v.level)}, P={v.workers}"]["step"]

        def ttt_measure(v: Variant, tag: str):
            detail = time_to_target(digits, work / f"ttt-{tag}", v, steps_of(v))
            return detail["train_s"], detail

        t0 = time.monotonic()
        ttt_samples, ttt_details, ttt_order = rounds_of(ttt, args.rounds, TTT_TABLE, ttt_measure)
        blocks["time_to_target_s"] = time.monotonic() - t0

        heavy_samples, heavy_details, heavy_order = {}, {}, []
        if heavy:
            t0 = time.monotonic()
            count = max(512, args.workers * HEAVY["batch"] * (args.heavy_warmup + args.heavy_steps))
            synthetic = common.prepare_synthetic32(work, count)

            def heavy_measure(v: Variant, tag: str):
                detail = heavy_run(synthetic, work / f"heavy-{tag}", v, args.heavy_warmup, args.heavy_steps)
                return detail["seconds_per_step"], detail

            heavy_samples, heavy_details, heavy_order = rounds_of(heavy, args.heavy_rounds, HEAVY_TABLE, heavy_measure)
            blocks["heavy_s"] = time.monotonic() - t0
    wall = time.monotonic() - t_start
    print(
        "bench_ladder: " + ", ".join(f"{k[:-2]} {s:.0f} s" for k, s in blocks.items()) + f"; wall {wall:.0f} s",
        flush=True,
    )
    return common.write_raw(
        args.raw,
        NAME,
        {**ttt_samples, **heavy_samples},
        {
            "machine": m,
            "unit": "s",
            "workers": args.workers,
            "target": args.target,
            "cost_model": COST_MODEL,
            "network": network,
            "targets": targets,
            "variants": {"ttt": [vars_of(v) for v in ttt], "heavy": [vars_of(v) for v in heavy]},
            "conditions": {
                c: [{"load": d["load"], "steal": d["steal"]} for d in ds]
                for c, ds in {**ttt_details, **heavy_details}.items()
            },
            "ttt": {
                **TTT,
                "rounds": args.rounds,
                "order": ttt_order,
                "detail": ttt_details,
                "quantity": "training seconds through the target step (run.json stop.train_s)",
            },
            "heavy": {
                **HEAVY,
                "rounds": args.heavy_rounds,
                "warmup": args.heavy_warmup,
                "steps": args.heavy_steps,
                "order": heavy_order,
                "detail": heavy_details,
                "quantity": "steady-state seconds per step (workers' mean)",
            },
            "blocks_s": blocks,
            "wall_s": wall,
        },
    )


def vars_of(v: Variant) -> dict:
    return {"level": v.level, "workers": v.workers, "twin": v.twin, "ranks": v.ranks}


# ---------------------------------------------------------------- rendering


def variants_of(record: dict, table: str) -> list[Variant]:
    return [Variant(d["level"], d["workers"], d["twin"]) for d in record["meta"]["variants"][table]]


def network_of(record: dict):
    from scaledl.net.alphabeta import Network

    net = record["meta"].get("network") or {}
    if "alpha_s" not in net:
        return None
    return Network(net["alpha_s"], net["beta_s_per_byte"], net.get("gamma_s_per_byte") or 0.0, name="netbench")


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
    threads = (record.get("launch") or {}).get("threads", 1)
    return "†" if v.ranks * threads > record["machine"].get("cores", v.ranks) else ""


def med(values) -> float:
    return stats.summary(values)["median"]


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
        row = {
            "level": name,
            "P": v.workers,
            "ranks": f"{v.ranks}{dagger(record, v)}",
            "steps to target": steps,
            "time to target, median [min–max] n": stats.format_cell(stats.summary(s[cell])),
            "α-β prediction (steps × s/step)": f"{steps * cost.step_s:.3g} s" if cost else "–",
        }
        prev = previous_of(v, variants)
        if prev is not None:
            row["speed-up vs previous (previous ÷ this)"], row["this level is"] = ratio_cells(
                s, cell, prev.cell(TTT_TABLE), noise
            )
            row["previous"] = prev.level
        else:
            row["speed-up vs previous (previous ÷ this)"], row["this level is"], row["previous"] = "–", "–", "–"
        ref = easgd[v.workers]
        if v.level == "easgd" or ref.cell(TTT_TABLE) not in s:
            row["speed-up vs easgd (easgd ÷ this)"], row["vs easgd, this is"] = "–", "–"
        else:
            row["speed-up vs easgd (easgd ÷ this)"], row["vs easgd, this is"] = ratio_cells(
                s, cell, ref.cell(TTT_TABLE), noise
            )
        row["paper: previous ÷ this"] = (
            f"{PAPER_SPEEDUP[v.level]}×"
            if v.level in PAPER_SPEEDUP and not v.twin and v.workers == meta["workers"]
            else "–"
        )
        rows.append(row)
        step_rows.append(
            {
                "level": name,
                "P": v.workers,
                "ranks": f"{v.ranks}{dagger(record, v)}",
                "s/step, median [min–max] n": stats.format_cell(stats.summary([x["seconds_per_step"] for x in d])),
                "α-β s/step": f"{num(cost.step_s * 1e3)} ms" if cost else "–",
                "α-β formula": cost.formula if cost else "–",
                "compute ms/step": spread([x["compute_s"] for x in d], 1e3),
                "transfer share (h2d+param_copy+comm)": percent([x["transfer_share"] for x in d]),
                "exposed share (transfer+wait)": percent([x["exposed_share"] for x in d]),
                "backend": d[0]["backend"],
            }
        )
    order = [
        "level",
        "P",
        "ranks",
        "steps to target",
        "time to target, median [min–max] n",
        "α-β prediction (steps × s/step)",
        "previous",
        "speed-up vs previous (previous ÷ this)",
        "this level is",
        "speed-up vs easgd (easgd ÷ this)",
        "vs easgd, this is",
        "paper: previous ÷ this",
    ]
    warm = sorted({x["warmup"] for runs in detail.values() for x in runs})
    paper = (
        "The paper's speed-ups were measured with GPUs, where levels 1 → 2 remove CPU–GPU copies that do not "
        "exist on a CPU-only machine. "
        if record["machine"].get("gpus") == "no GPU"
        else ""
    )
    return (
        f"Time to {meta['target']:.0%} test accuracy: {meta['ttt']['model']} on {meta['ttt']['dataset']}, batch "
        f"{meta['ttt']['batch']} per worker, lr {meta['ttt']['lr']}, seed 0; {rounds_text(n)}. Resolution: one "
        "step (the target step is found by evaluating after every step in an untimed run; the timed runs stop at "
        "that step and are evaluated after the clock stops).\n\n"
        + common.table(rows, order)
        + f"\nA/A: {TWIN} twice per round, ratio {stats.format_ratio(aa)}, noise floor {noise:.1%}. "
        f"Speed-ups are paired per round (> 1: this level is faster); {stats.RULE}. "
        "The α-β column is the target step count times the model's step time (below), so it leaves out the "
        f"first steps' warm-up that the measured time contains. {paper}\n\n"
        + f"The same runs per step (steady state: the workers' mean over the steps after the first "
        f"{'/'.join(map(str, warm))}, docs/time.md; compute ms/step and shares median [min–max] over "
        f"{rounds_text(n)}; α-β with the row's median compute as T_c):\n\n"
        + common.table(step_rows, list(step_rows[0]))
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
            "level": f"{v.level}{' [A/A]' if v.twin else ''}",
            "ranks": f"{v.ranks}{dagger(record, v)}",
            "s/step, median [min–max] n": stats.format_cell(stats.summary(s[cell])),
        }
        prev = previous_of(v, variants)
        if prev is not None:
            row["previous"] = prev.level
            row["speed-up vs previous"], row["this level is"] = ratio_cells(s, cell, prev.cell(HEAVY_TABLE), noise)
        else:
            row["previous"], row["speed-up vs previous"], row["this level is"] = "–", "–", "–"
        row.update(
            {
                "α-β s/step": num(cost.step_s * 1e3) if cost else "–",
                "compute": spread([x["compute_s"] for x in d], 1e3),
                "transfer (h2d+param_copy+comm)": spread([x["transfer_s"] for x in d], 1e3),
                "wait": spread([x["wait_s"] for x in d], 1e3),
                "exposed (transfer+wait)": spread([x["exposed_s"] for x in d], 1e3),
                "α-β exchange": num(cost.exchange_s * 1e3) if cost else "–",
                "hidden (helper − waited)": spread(hidden, 1e3) if hidden else "–",
                "transfer share": percent([x["transfer_share"] for x in d]),
                "exposed share": percent([x["exposed_share"] for x in d]),
            }
        )
        rows.append(row)
    nbytes = h["detail"][variants[0].cell(HEAVY_TABLE)][0]["model_bytes"]
    return (
        f"Where one step's time goes: {h['model']} ({nbytes / 4e6:.1f} M parameters, {nbytes / 1e6:.0f} MB) on "
        f"{h['dataset']} (3×32×32), batch {h['batch']} per worker, lr {h['lr']}; {h['warmup']} untimed steps then "
        f"{h['steps']} timed steps per run, no evaluation inside the run; {rounds_text(h['rounds'])}. Times in ms "
        f"per step (the workers' mean over the {h['steps']} timed steps), median [min–max] over "
        f"{rounds_text(h['rounds'])} except where n is printed. Hidden (sync_easgd3): per exchange, the helper "
        "thread's exchange seconds minus the seconds the main thread waited for it, over the same timed steps. "
        "α-β columns are scaledl.net.alphabeta.step_cost: exchange = the worker's own messages, s/step with the "
        "row's median compute as T_c.\n\n"
        + common.table(rows, list(rows[0]))
        + f"\nA/A: {TWIN} twice per round, ratio {stats.format_ratio(aa)}, noise floor {noise:.1%}; speed-ups "
        "(previous ÷ this) paired per round, verdicts against that floor."
        + (
            ""
            if any(v.level == "easgd" for v in variants)
            else " easgd is left out of this table by default, for the time budget (its cells take P + 1 ranks and P "
            "serialised computations per step); --heavy-levels easgd,sync_easgd1,sync_easgd2,sync_easgd3 adds it."
        )
        + "\n"
    )


def fair_sentence(record: dict) -> str:
    """easgd vs sync_easgd2 at one worker (both within the cores), when --fair measured them."""
    s = record["samples"]
    easgd, sync = Variant("easgd", 1), Variant(TWIN, 1)
    if easgd.cell(TTT_TABLE) not in s or sync.cell(TTT_TABLE) not in s:
        return ""
    noise, _ = aa_noise(record, TTT_TABLE, record["meta"]["workers"])
    speedup, verdict = ratio_cells(s, sync.cell(TTT_TABLE), easgd.cell(TTT_TABLE), noise)
    return (
        f" Fair pair, one worker each, every rank on a core of its own: easgd (worker + master, 2 ranks) ÷ "
        f"{TWIN} (1 rank) = {speedup} ({TWIN} is {verdict}, against the P={record['meta']['workers']} floor)."
    )


def fair_absent(record: dict) -> str:
    """Why the fair pair is not in the table (it was not asked for), with what it would have cost."""
    walls = [d["run_wall_s"] for runs in record["meta"]["ttt"]["detail"].values() for d in runs if "run_wall_s" in d]
    cost = f"; the time-to-target runs here took {min(walls):.0f}–{max(walls):.0f} s of wall time each" if walls else ""
    return (
        " A fairer pair, easgd with one worker + master (2 ranks) against sync_easgd2 with one worker, both "
        "within the cores, is measured with --fair. It is off by default: it adds two runs to every round, "
        f"beyond this bench's share of the time budget{cost}; and with one worker the sync levels send no "
        "message to another rank, so the pair measures the round-robin protocol's own cost, not the ladder."
    )


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
    if not off:
        return (
            "Every timed run stopped at its target step with the same test accuracy, to the last digit, as the "
            "untimed run that found that step."
        )
    return (
        "Timed runs that did not reproduce the target-step run (their sample is not a time to the target): "
        + "; ".join(off)
        + "."
    )


def baseline_note(record: dict) -> str:
    """How easgd was launched against the sync levels, and where to read how far it runs above its model."""
    p, cores = record["meta"]["workers"], record["machine"].get("cores")
    easgd, sync = Variant("easgd", p), Variant(TWIN, p)
    if dagger(record, easgd):
        where = (
            f"easgd at P = {p} runs {easgd.ranks} ranks on {cores} cores (†: time-sliced and unbound"
            + (
                f", where the sync levels' {sync.ranks} ranks are bound one per core"
                if not dagger(record, sync)
                else ""
            )
            + "), so its turns and waits depend on the scheduler and on MPICH's yield mode; "
        )
    else:
        where = f"easgd at P = {p} runs {easgd.ranks} ranks, within the cores; "
    return (
        where + "the α-β column, P·(T_c + S) with its own measured compute T_c, shows how far it runs above its model."
    )


def hardware_note(record: dict) -> str:
    """What a CPU-only machine cannot show of the paper's ladder."""
    if record["machine"].get("gpus") != "no GPU":
        return ""
    return (
        " On a CPU-only machine host and device are the same memory: Sync EASGD1 differs from 2 by one memory "
        "copy of W^i per step (param_copy; on a GPU those host buffers are page-locked, as the device levels' "
        "staging is), so the paper's CPU–GPU traffic (its 1.3×) cannot appear, and the α-β model predicts 1 "
        "and 2 alike (host↔device copies are not network messages). Sync EASGD3's helper thread shares its "
        "rank's core with compute here, so 'hidden' exchange time still slows compute; with a core to spare, "
        "or a GPU computing, it would not."
    )


def render(record: dict, raw_path: str | None = None) -> tuple[str, str, str, str]:
    """Title, intro, tables and notes, from the raw record alone."""
    meta = record["meta"]
    net = network_of(record)
    p = meta["workers"]
    cores = record["machine"].get("cores")
    easgd_ranks = ranks_of("easgd", p)
    if net is None:
        prediction = f"no α-β prediction: {(meta.get('network') or {}).get('missing', 'no netbench file')}"
    else:
        n = meta["network"]
        prediction = (
            f"α = {n['alpha_s'] * 1e6:.3g} µs, β = {n['beta_s_per_byte']:.3g} s/B, "
            f"γ = {n['gamma_s_per_byte']:.3g} s/B, {n['source']}: {common.netbench_origin(n)}"
        )
        if "wall_s" in n and (record.get("launch") or {}).get("yield_poll"):
            prediction += (
                "; with MPICH yielding, as in every cell, a message's latency includes the time a "
                "waiting rank takes to be scheduled again"
            )
    intro = (
        f"Each level against the one below it, same data, seed and learning rate, P = {p} workers. easgd needs a "
        f"master rank besides its workers ({easgd_ranks} ranks); the sync levels use worker 0 as master ({p} ranks). "
        f"The whole run uses one launch environment (machine line); † marks a cell with more ranks than the "
        f"{cores} cores, which runs time-sliced and unbound. Every round measures every variant once in rotating "
        f"order (bench.stats.round_order), with {TWIN} twice (A/A). Predictions: the α-β model ({COST_MODEL} "
        f"collectives, control messages included), {prediction}."
    )
    tables = ttt_tables(record, net)
    if meta["heavy"]["rounds"] and meta["variants"]["heavy"]:
        tables += "\n\n" + heavy_table(record, net)
    gaps = [d["phase_gap"] for part in ("ttt", "heavy") for runs in meta[part]["detail"].values() for d in runs]
    notes = (
        "Sync EASGD 1/2/3 do the same arithmetic (bitwise-equal models), so they reach the target at the same "
        "step: their time-to-target ratios are ratios of s/step (plus the first steps' warm-up). "
        + accuracy_check(record)
        + " "
        + baseline_note(record)
        + (fair_sentence(record) or fair_absent(record))
        + " Shares: the transfer share is (h2d + param_copy + comm) over step time, the paper's communication "
        "share (its 87 % → 14 %); the exposed share adds `wait`, time blocked on peers (with the collectives' "
        "barrier probe: skew between ranks; for easgd: waiting for the turn)."
        + hardware_note(record)
        + f" The largest unaccounted share of any rank's wall time was {max(gaps):.1%} (phases cover the rest)."
        + (f" Raw samples: {raw_path}." if raw_path else "")
        + (
            f" Wall time of the measuring run: {meta['wall_s']:.0f} s "
            f"({', '.join(f'{k[:-2]} {v:.0f} s' for k, v in meta.get('blocks_s', {}).items())})."
            if "wall_s" in meta
            else ""
        )
    )
    if meta["ttt"]["rounds"] < 5:
        notes += (
            f" Only {meta['ttt']['rounds']} round(s) for time to target: not enough for a headline ratio (use ≥ 5)."
        )
    return TITLE, intro, tables, notes


# --------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="P, workers per level (default %(default)s)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="time-to-target rounds, each measuring every variant once in a recorded order; ≥ 5 "
        "for headline ratios (default %(default)s)",
    )
    parser.add_argument(
        "--target",
        type=float,
        default=0.9,
        help="test accuracy to reach (default %(default)s; higher costs more steps per run)",
    )
    parser.add_argument(
        "--heavy-rounds",
        type=int,
        default=3,
        help="rounds of the cifar_alexnet table, 0 to skip it (default %(default)s)",
    )
    parser.add_argument(
        "--heavy-warmup", type=int, default=3, help="untimed steps per cifar_alexnet run (default %(default)s)"
    )
    parser.add_argument(
        "--heavy-steps", type=int, default=10, help="timed steps per cifar_alexnet run (default %(default)s)"
    )
    parser.add_argument(
        "--heavy-levels",
        type=lambda text: [x for x in text.split(",") if x],
        default=list(HEAVY_LEVELS),
        metavar="L1,L2",
        help=f"levels of the cifar_alexnet table (default {','.join(HEAVY_LEVELS)}; easgd "
        "adds one run of P + 1 ranks per round)",
    )
    parser.add_argument(
        "--fair",
        action="store_true",
        help="also measure easgd with one worker (+ master) against sync_easgd2 with one worker",
    )
    parser.add_argument(
        "--netbench",
        type=Path,
        metavar="FILE",
        help="α, β, γ from this `scaledl netbench` JSON (default: measure one first, 10–20 s)",
    )
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
    try:
        record = common.read_raw(args.raw)
        if record.get("bench") != NAME:
            raise common.RawError(f"{args.raw}: a record of bench {record.get('bench')!r}, not {NAME!r}")
        title, intro, tables, notes = render(record, common.shown_path(args.raw))
    except common.RawError as error:
        raise SystemExit(f"bench_ladder: {error}") from None
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise SystemExit(
            f"bench_ladder: {args.raw}: not a record of this bench ({type(error).__name__}: "
            f"{error}); rerun without --render to measure one"
        ) from None
    common.publish(NAME, title, record, intro, tables, notes, write=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
