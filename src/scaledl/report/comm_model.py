"""`scaledl comm-model`: the α-β cost model's communication time beside the measured one, per run.

    scaledl comm-model --netbench netbench.json RUN_JSON... --out results/NAME/tables/comm_model.csv

Inputs: α, β, γ from a `scaledl netbench` file; per run, from run.json:
n = model.bytes (a compressed averaging round: its encoded message's bytes, its gather
modelled as a reduce of that size, which is exact at P = 2), P = world.workers, the
algorithm key, and the per-rank steady-state seconds per step (docs/time.md,
scaledl.timing.steady_state).

Measured seconds per step are the **mean over the worker ranks** (roles
"worker" and "master+worker"; a dedicated master does not iterate) of the
steady-state transfer and wait per step. The model's comm_s covers a
worker's messages and its queueing (the lock queue of the first-come-
first-served patterns, the other workers' turns in round-robin), so it is
compared with `measured_comm_s` = transfer + wait; both parts are shown.

Predicted seconds per step are `scaledl.net.cost.step_cost(...).comm_s`
under both named models ("paper": binomial trees; "bandwidth_optimal": what
MPI libraries use for large messages), with our small control messages
included (`control=True`) and T_c = the run's measured compute per step
(timing.COMPUTE: data, compute, update, center_update; mean over the worker ranks),
which the contention models of the master-based algorithms need. Messages
are packed unless run.json's codesign.message is "per_layer" (then L = the
model's parameter tensors); codesign.overlap and hyper.tau are honoured.

The second table extrapolates weak scaling to 1 … 4096 workers (and the
paper's 4253-core point) for every algorithm, per (dataset, model): n from
the runs, T_c the median of their measured compute per step, with the
measured network and, by default, the paper's FDR InfiniBand from Table 2
(`--networks`). Efficiency = step(1)/step(P) at a fixed per-worker batch.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import statistics
from pathlib import Path

from scaledl.algorithms import ALGORITHMS
from scaledl.atomic import write_text
from scaledl.net.cost import (
    COST_MODELS,
    DEFAULT_WORKERS,
    NETWORKS,
    PAPER_WEAK_SCALING,
    Network,
    is_collective,
    step_cost,
)
from scaledl.errors import UserError
from scaledl.models import MODELS, build_model
from scaledl.net.measure import KIND
from scaledl.report.aggregate import format_cell, lookup, read_json_object, read_run, run_json_path

HELP = "α-β predictions of each run's communication beside the measured times"

COMM_COLUMNS = [
    "dataset", "model", "algorithm", "platform", "workers", "ranks", "steps", "bytes",
    "compute_s", "measured_transfer_s", "measured_wait_s", "measured_comm_s",
    "predicted_paper_s", "predicted_bandwidth_optimal_s", "ratio_paper", "ratio_bandwidth_optimal",
    "measured_step_s", "predicted_step_s", "run",
]  # fmt: skip

SCALING_COLUMNS = [
    "dataset", "model", "bytes", "compute_s", "network", "alpha_s", "beta_s_per_byte", "gamma_s_per_byte",
    "algorithm", "cost_model", "workers", "comm_s", "step_s", "efficiency",
]  # fmt: skip

MARKDOWN_WORKERS = (1, 2, 8, 64, 512, 4096, 4253)
WORKER_ROLES = ("worker", "master+worker")


# ------------------------------------------------------------------ inputs


def read_netbench(path: str | Path):
    """(Network, the netbench record) from a `scaledl netbench` JSON file."""
    path = Path(path)
    record = read_json_object(path, "netbench JSON")
    if record.get("kind") != KIND:
        raise UserError(f"{path}: not a scaledl netbench file (kind is {record.get('kind')!r}); write one with scaledl netbench")
    alpha, beta, gamma = record.get("alpha_s"), record.get("beta_s_per_byte"), record.get("gamma_s_per_byte") or 0.0
    if alpha is None or beta is None:
        raise UserError(f"{path}: has no alpha/beta ({record.get('p2p', {}).get('note', 'no point-to-point data')}); "
                        "rerun scaledl netbench with at least 2 ranks")
    try:
        net = Network(float(alpha), float(beta), float(gamma), name="measured")
    except (TypeError, ValueError) as error:
        raise UserError(f"{path}: unusable alpha/beta/gamma ({error})") from None
    return net, record


def measured_per_step(run: dict, path: Path) -> dict:
    """The workers' steady-state seconds per step (means over the worker ranks; docs/time.md):
    transfer, wait, their sum (what the cost model's comm_s covers: messages and queueing), compute."""
    per_rank = lookup(run, "phases.per_rank", path)
    workers = [r for r in per_rank if isinstance(r, dict) and r.get("role") in WORKER_ROLES]
    if not workers:
        raise UserError(f"{path}: run.json lists no worker rank in phases.per_rank")

    def mean(key: str) -> float | None:
        values = []
        for r in workers:
            if key not in r:
                raise UserError(f"{path}: phases.per_rank lacks {key} (a run.json older than the time "
                                "vocabulary of docs/time.md; rerun that training)")
            values.append(r[key])
        if any(v is None for v in values):
            return None     # too few steps for a steady state
        try:
            return statistics.fmean(float(v) for v in values)
        except (TypeError, ValueError):
            raise UserError(f"{path}: phases.per_rank holds a non-numeric {key}") from None

    transfer, wait = mean("transfer_per_step_s"), mean("wait_per_step_s")
    return {
        "steps": lookup(run, "stop.steps", path),
        "transfer_s": transfer,
        "wait_s": wait,
        "comm_s": transfer + wait if transfer is not None and wait is not None else None,
        "compute_s": mean("compute_per_step_s"),
    }


def message_count(run: dict, path: Path) -> int:
    """Parameter tensors of the run's model: messages per exchange in per-layer mode (builds the model once)."""
    name = lookup(run, "model.name", path)
    if name not in MODELS:
        raise UserError(f"{path}: unknown model {name!r}; cannot count its layers")
    model = build_model(name, tuple(lookup(run, "data.image_shape", path)), lookup(run, "data.classes", path))
    return sum(1 for p in model.parameters() if p.requires_grad)


def _ratio(measured, predicted):
    if measured is None or predicted is None or predicted <= 0:
        return None
    return measured / predicted


def comm_model_row(path: str | Path, net) -> dict:
    """One table row: the run's measured and predicted communication seconds per step."""
    path = run_json_path(path)
    run = read_run(path)
    key = lookup(run, "algorithm.key", path)
    workers = lookup(run, "world.workers", path)
    n = lookup(run, "model.bytes", path)
    encoded = next((r for r in run.get("algorithm_report") or [] if r.get("averaging", {}).get("compress", "fp32")
                    != "fp32"), None)
    if encoded is not None:
        n = encoded["bytes_per_exchange"] // 2   # a compressed round's message (report.communication)
    measured = measured_per_step(run, path)
    hyper = run.get("hyper") or {}
    codesign = run.get("codesign") or {}
    options = {
        "compute_s": measured["compute_s"] or 0.0,
        "control": True,
        "master_momentum": hyper.get("momentum_at", "master") == "master",
        "overlap": codesign.get("overlap"),
        "tau": int(hyper.get("tau") or 1),
        "layers": message_count(run, path) if codesign.get("message") == "per_layer" else 1,
    }
    try:
        paper = step_cost(key, net, n, workers, model="paper", **options)
        bwopt = step_cost(key, net, n, workers, model="bandwidth_optimal", **options)
    except ValueError as error:
        raise UserError(f"{path}: cannot model this run ({error})") from None
    return {
        "dataset": lookup(run, "data.dataset", path),
        "model": lookup(run, "model.name", path),
        "algorithm": key,
        "platform": run.get("platform"),
        "workers": workers,
        "ranks": lookup(run, "world.size", path),
        "steps": measured["steps"],
        "bytes": n,
        "compute_s": measured["compute_s"],
        "measured_transfer_s": measured["transfer_s"],
        "measured_wait_s": measured["wait_s"],
        "measured_comm_s": measured["comm_s"],
        "predicted_paper_s": paper.comm_s,
        "predicted_bandwidth_optimal_s": bwopt.comm_s,
        "ratio_paper": _ratio(measured["comm_s"], paper.comm_s),
        "ratio_bandwidth_optimal": _ratio(measured["comm_s"], bwopt.comm_s),
        "measured_step_s": run.get("seconds_per_step"),
        "predicted_step_s": bwopt.step_s,
        "run": path.parent.as_posix(),
    }


def scaling_rows(rows: list[dict], networks: dict, workers=None) -> list[dict]:
    """Weak-scaling extrapolation per (dataset, model) × network × algorithm × cost model × P."""
    workers = tuple(workers or DEFAULT_WORKERS)
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
                for cost_model in COST_MODELS:   # identical for the point-to-point algorithms
                    base = step_cost(key, net, n, 1, model=cost_model, compute_s=compute).step_s
                    for p in workers:
                        cost = step_cost(key, net, n, p, model=cost_model, compute_s=compute)
                        out.append({
                            "dataset": dataset, "model": model, "bytes": n, "compute_s": compute,
                            "network": net_name, "alpha_s": net.alpha, "beta_s_per_byte": net.beta,
                            "gamma_s_per_byte": net.gamma, "algorithm": key, "cost_model": cost_model,
                            "workers": p, "comm_s": cost.comm_s, "step_s": cost.step_s,
                            "efficiency": base / cost.step_s if cost.step_s > 0 else 1.0,
                        })
    return out


# ---------------------------------------------------------------- formatting


def to_markdown(rows: list[dict], columns: list[str], headers: list[str] | None = None) -> str:
    """A GitHub-flavoured markdown table; numeric columns right-aligned (no tabulate dependency)."""
    headers = headers or columns

    def numeric(column: str) -> bool:
        values = [r.get(column) for r in rows if r.get(column) is not None]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)

    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---:" if numeric(c) else "---" for c in columns) + "|"]
    lines += ["| " + " | ".join(format_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows: list[dict], columns: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: ("" if row.get(c) is None else row.get(c)) for c in columns})
    return buffer.getvalue()


def scaling_markdown(scaling: list[dict]) -> str:
    """Wide tables: one per (dataset, model, network); rows algorithm (cost model), columns P."""
    shown = [p for p in MARKDOWN_WORKERS if any(r["workers"] == p for r in scaling)]
    blocks = []
    groups: dict[tuple, list[dict]] = {}
    for r in scaling:
        groups.setdefault((r["dataset"], r["model"], r["network"]), []).append(r)
    for (dataset, model, network), members in groups.items():
        first = members[0]
        table: dict[tuple, dict] = {}
        for r in members:
            if r["cost_model"] != "paper" and not is_collective(r["algorithm"]):
                continue   # point-to-point algorithms: both models agree
            label = r["algorithm"] + (f" ({r['cost_model']})" if is_collective(r["algorithm"]) else "")
            table.setdefault((label,), {"algorithm": label})[f"P={r['workers']}"] = r["efficiency"]
        columns = ["algorithm", *(f"P={p}" for p in shown)]
        blocks.append(
            f"**{dataset} / {model}** on {network} (α = {first['alpha_s']:.3g} s, β = {first['beta_s_per_byte']:.3g} s/B, "
            f"n = {first['bytes']} B, T_c = {first['compute_s']:.4g} s): predicted weak-scaling efficiency\n\n"
            + to_markdown(list(table.values()), columns)
        )
    return "\n".join(blocks)


def report_markdown(rows: list[dict], scaling: list[dict], net, netbench_path: Path, record: dict) -> str:

    m = record.get("machine", {})
    shown = [c for c in COMM_COLUMNS if c not in ("run", "platform", "ranks")]
    return (
        "# Communication: cost model vs measured\n\n"
        f"α = {net.alpha:.4g} s, β = {net.beta:.4g} s/B (1/β = {net.bandwidth / 1e9:.3g} GB/s), "
        f"γ = {net.gamma:.4g} s/B from `{netbench_path}` "
        f"({m.get('ranks', '?')} ranks on {m.get('nodes', '?')} node(s); {m.get('mpi_library', '?')}).\n"
        "Seconds per worker iteration; measured = mean over worker ranks of (comm + wait) / steps; "
        "ratio = measured / predicted.\n\n"
        + to_markdown([{c: r.get(c) for c in shown} for r in rows], shown)
        + "\n## Weak-scaling extrapolation\n\n"
        f"Paper: {PAPER_WEAK_SCALING['source']}.\n\n"
        + scaling_markdown(scaling)
    )


# ---------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("runs", nargs="+", metavar="RUN", help="run.json files or run directories")
    parser.add_argument("--netbench", required=True, type=Path, metavar="JSON", help="α, β, γ from scaledl netbench")
    parser.add_argument("--out", required=True, type=Path, metavar="CSV",
                        help="per-run table to write (e.g. results/NAME/tables/comm_model.csv)")
    parser.add_argument("--markdown", type=Path, metavar="MD",
                        help="markdown report (default: CSV with the suffix .md; 'none' to skip)")
    parser.add_argument("--scaling-out", type=Path, metavar="CSV",
                        help="weak-scaling extrapolation table (default: <out>_scaling.csv beside --out)")
    parser.add_argument("--networks", default="fdr_ib", metavar="LIST",
                        help=f"networks besides the measured one for the extrapolation: comma list of "
                             f"{', '.join(NETWORKS)}, or 'none' (default %(default)s; values from the paper's Table 2)")
    parser.add_argument("--max-workers", type=int, default=4096, help="largest power of two to extrapolate to (default %(default)s)")


def run(args: argparse.Namespace) -> int:

    if args.out.suffix != ".csv":
        raise UserError(f"--out {args.out}: the table must be a .csv file")
    if args.max_workers < 1:
        raise UserError(f"--max-workers must be >= 1, got {args.max_workers}")
    names = [] if args.networks.strip().lower() == "none" else [s.strip() for s in args.networks.split(",") if s.strip()]
    unknown = [s for s in names if s not in NETWORKS]
    if unknown:
        raise UserError(f"--networks: unknown network {unknown[0]!r}; choose from {', '.join(NETWORKS)} or 'none'")
    net, record = read_netbench(args.netbench)
    networks = {"measured": net, **{name: NETWORKS[name] for name in names}}
    rows = [comm_model_row(path, net) for path in dict.fromkeys(str(p) for p in args.runs)]
    rows.sort(key=lambda r: (r["dataset"], r["model"], r["algorithm"], r["workers"], r["run"]))
    workers = [2**k for k in range(int(math.log2(args.max_workers)) + 1)]
    if PAPER_WEAK_SCALING["cores"] not in workers:
        workers.append(PAPER_WEAK_SCALING["cores"])
    scaling = scaling_rows(rows, networks, workers)

    markdown = args.markdown if args.markdown is not None else args.out.with_suffix(".md")
    if str(markdown).lower() == "none":
        markdown = None
    scaling_out = args.scaling_out or args.out.with_name(args.out.stem + "_scaling.csv")
    write_text(args.out, to_csv(rows, COMM_COLUMNS))
    write_text(scaling_out, to_csv(scaling, SCALING_COLUMNS))
    if markdown is not None:
        write_text(markdown, report_markdown(rows, scaling, net, args.netbench, record))
    print(f"wrote {args.out}, {scaling_out}" + (f" and {markdown}" if markdown else "") + f" ({len(rows)} run(s))")
    return 0
