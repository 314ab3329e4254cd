"""The α-β cost model's communication time beside the measured one, per run (`scaledl comm-model`).

Inputs: α, β, γ from a `scaledl netbench` file; per run, from run.json:
n = model.bytes (a compressed averaging round: its encoded message's bytes, its gather
modelled as a reduce of that size, which is exact at P = 2), P = world.workers, the
algorithm key, and the per-rank steady-state seconds per step (docs/time.md,
scaledl.comm.timing.steady_state).

Measured seconds per step are the **mean over the worker ranks** (roles
"worker" and "master+worker"; a dedicated master does not iterate) of the
steady-state transfer and wait per step. The model's exposed time covers a
worker's messages and its queueing (the lock queue of the first-come-
first-served patterns, the other workers' turns in round-robin), so it is
compared with `measured_exposed_s` = transfer + wait; both parts are shown.

Predicted seconds per step are `scaledl.net.alphabeta.step_cost(...).exposed_s`
under both named models ("paper": binomial trees; "bandwidth_optimal": what
MPI libraries use for large messages), with our small control messages
included (`control=True`) and T_c = the run's measured compute per step
(timing.COMPUTE: data, compute, update, center_update; mean over the worker ranks),
which the contention models of the master-based algorithms need. Messages
are packed unless run.json's codesign.message is "per_layer" (then L = the
model's parameter tensors, run.json's model.tensors); codesign.overlap and
hyper.tau are honoured where the run.json records them.

The second table extrapolates weak scaling to 1 … 4096 workers (and the
paper's 4253-core point) for every algorithm, per (dataset, model): n from
the runs, T_c the median of their measured compute per step, with the
measured network and, by default, the paper's FDR InfiniBand from Table 2
(`--networks`). Efficiency = step(1)/step(P) at a fixed per-worker batch
(scaledl.net.alphabeta.weak_scaling).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from scaledl.algorithms import ALGORITHMS
from scaledl.errors import UserError
from scaledl.net.alphabeta import (
    COST_MODELS,
    PAPER_WEAK_SCALING,
    Network,
    family,
    is_collective,
    step_cost,
    weak_scaling,
)
from scaledl.net.measure import KIND
from scaledl.report.runs import Run, read_runs
from scaledl.report.tables import markdown_table

COMM_MODEL_COLUMNS = [
    "dataset", "model", "algorithm", "platform", "workers", "ranks", "steps", "bytes",
    "compute_s", "measured_transfer_s", "measured_wait_s", "measured_exposed_s",
    "predicted_paper_s", "predicted_bandwidth_optimal_s", "ratio_paper", "ratio_bandwidth_optimal",
    "measured_step_s", "predicted_step_s", "run",
]  # fmt: skip

EXTRAPOLATION_COLUMNS = [
    "dataset", "model", "bytes", "compute_s", "network", "alpha_s", "beta_s_per_byte", "gamma_s_per_byte",
    "algorithm", "cost_model", "workers", "exposed_s", "step_s", "efficiency",
]  # fmt: skip

MARKDOWN_WORKERS = (1, 2, 8, 64, 512, 4096, 4253)
WORKER_ROLES = ("worker", "master+worker")


# ------------------------------------------------------------------ inputs


def read_netbench(path: str | Path) -> tuple[Network, dict]:
    """(Network, the netbench record) from a `scaledl netbench` JSON file."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such netbench JSON") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserError(f"{path}: not a readable netbench JSON ({error})") from None
    if not isinstance(record, dict):
        raise UserError(f"{path}: not a scaledl netbench JSON (top level is not an object)")
    if record.get("kind") != KIND:
        raise UserError(
            f"{path}: not a scaledl netbench file (kind is {record.get('kind')!r}); write one with scaledl netbench"
        )
    alpha, beta, gamma = record.get("alpha_s"), record.get("beta_s_per_byte"), record.get("gamma_s_per_byte") or 0.0
    if alpha is None or beta is None:
        raise UserError(
            f"{path}: has no alpha/beta ({record.get('p2p', {}).get('note', 'no point-to-point data')}); "
            "rerun scaledl netbench with at least 2 ranks"
        )
    try:
        net = Network(float(alpha), float(beta), float(gamma), name="measured")
    except (TypeError, ValueError) as error:
        raise UserError(f"{path}: unusable alpha/beta/gamma ({error})") from None
    return net, record


def measured_per_step(run: Run) -> dict:
    """The workers' steady-state seconds per step (means over the worker ranks; docs/time.md):
    transfer, wait, their sum (the exposed time the cost model predicts: messages and queueing), compute."""
    per_rank = run.get("phases.per_rank")
    workers = [r for r in per_rank if isinstance(r, dict) and r.get("role") in WORKER_ROLES]
    if not workers:
        raise UserError(f"{run.path}: run.json lists no worker rank in phases.per_rank")

    def mean(key: str) -> float | None:
        values = []
        for r in workers:
            if key not in r:
                raise UserError(
                    f"{run.path}: phases.per_rank lacks {key} (a run.json older than the time "
                    "vocabulary of docs/time.md; rerun that training)"
                )
            values.append(r[key])
        if any(v is None for v in values):
            return None  # too few steps for a steady state
        try:
            return statistics.fmean(float(v) for v in values)
        except (TypeError, ValueError):
            raise UserError(f"{run.path}: phases.per_rank holds a non-numeric {key}") from None

    transfer, wait = mean("transfer_per_step_s"), mean("wait_per_step_s")
    return {
        "steps": run.get("stop.steps"),
        "transfer_s": transfer,
        "wait_s": wait,
        "exposed_s": transfer + wait if transfer is not None and wait is not None else None,
        "compute_s": mean("compute_per_step_s"),
    }


def message_count(run: Run) -> int:
    """L, the messages of one exchange: 1 packed; per layer, one per parameter tensor (run.json's
    model.tensors; in a run.json older than it, what the run's collectives counted per exchange); bucketed,
    the buckets the run counted (their overlap with backward is not modelled: an upper bound)."""
    message = (run.record.get("codesign") or {}).get("message", "packed")
    if message == "packed" or run.get("world.workers") == 1:  # one worker sends nothing: the model's cost is 0
        return 1
    tensors = (run.record.get("model") or {}).get("tensors")
    if message == "per_layer" and tensors is not None:
        return int(tensors)
    counted = [
        r["messages_per_exchange"] for r in run.record.get("algorithm_report") or [] if r.get("messages_per_exchange")
    ]
    if not counted:
        raise UserError(f"{run.path}: run.json lacks the message count of its {message} exchanges; rerun that training")
    # a rooted exchange of the Sync EASGD family is a Bcast and a Reduce of every tensor; an allreduce one
    # (and sync_sgd's, per layer or per bucket) one Allreduce
    collectives = 2 if family(run.get("algorithm.key")) == "bcast_reduce" and exchange(run) == "rooted" else 1
    return round(counted[0] / collectives)


def cost_options(run: Run) -> dict:
    """step_cost's options as the run was configured (the defaults where run.json leaves a setting out)."""
    hyper, codesign = run.record.get("hyper") or {}, run.record.get("codesign") or {}
    return {
        "control": True,
        "master_momentum": hyper.get("momentum_at", "master") == "master",
        "overlap": codesign.get("overlap"),
        "tau": int(hyper.get("tau") or 1),
        "layers": message_count(run),
        "exchange": exchange(run),
    }


def exchange(run: Run) -> str:
    """The averaging engine's round as run.json records it; rooted (Bcast + Reduce) before it did."""
    return (run.record.get("codesign") or {}).get("exchange", "rooted")


def message_bytes(run: Run) -> float:
    """n: the model's bytes, or a compressed averaging round's encoded message (report.communication)."""
    n = run.get("model.bytes")
    encoded = next(
        (
            r
            for r in run.record.get("algorithm_report") or []
            if r.get("averaging", {}).get("compress", "fp32") != "fp32"
        ),
        None,
    )
    return encoded["bytes_per_exchange"] // 2 if encoded is not None else n


# ------------------------------------------------------------------ rows


def _ratio(measured, predicted):
    if measured is None or predicted is None or predicted <= 0:
        return None
    return measured / predicted


def comm_model_row(run: Run, net: Network) -> dict:
    """One table row: the run's measured and predicted exposed seconds per step."""
    key = run.get("algorithm.key")
    workers = run.get("world.workers")
    n = message_bytes(run)
    measured = measured_per_step(run)
    try:
        options = {"compute_s": measured["compute_s"] or 0.0, **cost_options(run)}
        paper = step_cost(key, net, n, workers, model="paper", **options)
        bwopt = step_cost(key, net, n, workers, model="bandwidth_optimal", **options)
    except ValueError as error:
        raise UserError(f"{run.path}: cannot model this run ({error})") from None
    return {
        "dataset": run.get("data.dataset"),
        "model": run.get("model.name"),
        "algorithm": key,
        "platform": run.record.get("platform"),
        "workers": workers,
        "ranks": run.get("world.size"),
        "steps": measured["steps"],
        "bytes": n,
        "compute_s": measured["compute_s"],
        "measured_transfer_s": measured["transfer_s"],
        "measured_wait_s": measured["wait_s"],
        "measured_exposed_s": measured["exposed_s"],
        "predicted_paper_s": paper.exposed_s,
        "predicted_bandwidth_optimal_s": bwopt.exposed_s,
        "ratio_paper": _ratio(measured["exposed_s"], paper.exposed_s),
        "ratio_bandwidth_optimal": _ratio(measured["exposed_s"], bwopt.exposed_s),
        "measured_step_s": run.record.get("seconds_per_step"),
        "predicted_step_s": bwopt.step_s,
        "run": run.folder,
    }


def comm_model_rows(paths, net: Network) -> list[dict]:
    """The rows of the runs at `paths`, by dataset, model, algorithm, workers and folder."""
    rows = [comm_model_row(run, net) for run in read_runs(paths)]
    return sorted(rows, key=lambda r: (r["dataset"], r["model"], r["algorithm"], r["workers"], r["run"]))


def extrapolation_rows(rows: list[dict], networks: dict, workers) -> list[dict]:
    """Weak-scaling extrapolation per (dataset, model) × network × algorithm × cost model × P."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["dataset"], row["model"]), []).append(row)
    out = []
    for (dataset, model), members in sorted(groups.items()):
        n = members[0]["bytes"]
        computes = [r["compute_s"] for r in members if r["compute_s"] is not None]
        compute = statistics.median(computes) if computes else 0.0
        for net_name, net in networks.items():
            for key in ALGORITHMS:
                for cost_model in COST_MODELS:  # identical for the point-to-point algorithms
                    for point in weak_scaling(key, net, n, compute, workers, model=cost_model):
                        out.append(
                            {
                                "dataset": dataset,
                                "model": model,
                                "bytes": n,
                                "compute_s": compute,
                                "network": net_name,
                                "alpha_s": net.alpha,
                                "beta_s_per_byte": net.beta,
                                "gamma_s_per_byte": net.gamma,
                                "algorithm": key,
                                "cost_model": cost_model,
                                **point,
                            }
                        )
    return out


def as_frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """Rows as a frame that keeps each value as it is (an int stays an int beside a missing value)."""
    return pd.DataFrame(rows, columns=columns, dtype=object)


# ---------------------------------------------------------------- markdown


def extrapolation_markdown(extrapolation: list[dict]) -> str:
    """Wide tables: one per (dataset, model, network); rows algorithm (cost model), columns P."""
    shown = [p for p in MARKDOWN_WORKERS if any(r["workers"] == p for r in extrapolation)]
    blocks = []
    groups: dict[tuple, list[dict]] = {}
    for r in extrapolation:
        groups.setdefault((r["dataset"], r["model"], r["network"]), []).append(r)
    for (dataset, model, network), members in groups.items():
        first = members[0]
        table: dict[str, dict] = {}
        for r in members:
            if r["cost_model"] != "paper" and not is_collective(r["algorithm"]):
                continue  # point-to-point algorithms: both models agree
            label = r["algorithm"] + (f" ({r['cost_model']})" if is_collective(r["algorithm"]) else "")
            table.setdefault(label, {"algorithm": label})[f"P={r['workers']}"] = r["efficiency"]
        columns = ["algorithm", *(f"P={p}" for p in shown)]
        blocks.append(
            f"**{dataset} / {model}** on {network} (α = {first['alpha_s']:.3g} s, "
            f"β = {first['beta_s_per_byte']:.3g} s/B, n = {first['bytes']} B, T_c = {first['compute_s']:.4g} s): "
            "predicted weak-scaling efficiency\n\n" + markdown_table(as_frame(list(table.values()), columns))
        )
    return "\n".join(blocks)


def comm_model_markdown(
    rows: list[dict], extrapolation: list[dict], net: Network, netbench_path: Path, record: dict
) -> str:
    m = record.get("machine", {})
    shown = [c for c in COMM_MODEL_COLUMNS if c not in ("run", "platform", "ranks")]
    return (
        "# Communication: cost model vs measured\n\n"
        f"α = {net.alpha:.4g} s, β = {net.beta:.4g} s/B (1/β = {net.bandwidth / 1e9:.3g} GB/s), "
        f"γ = {net.gamma:.4g} s/B from `{netbench_path}` "
        f"({m.get('ranks', '?')} ranks on {m.get('nodes', '?')} node(s); {m.get('mpi_library', '?')}).\n"
        "Seconds per worker iteration; measured = mean over worker ranks of (comm + wait) / steps; "
        "ratio = measured / predicted.\n\n"
        + markdown_table(as_frame(rows, shown))
        + "\n## Weak-scaling extrapolation\n\n"
        f"Paper: {PAPER_WEAK_SCALING['source']}.\n\n" + extrapolation_markdown(extrapolation)
    )
