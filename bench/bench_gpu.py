"""The GPU-node table: the Sync EASGD ladder and sync_sgd against DDP, cifar_alexnet on CIFAR-sized data, 2–8 ranks.

On one GPU node (H200-class), from the repository root:

    PYTHONPATH=src OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \\
        python bench/bench_gpu.py --quick --out gpu-results.json

`--quick` (P = 2, 4, 8; 5 warm-up + 5 timed steps; batch 32; a 360 s budget
checked before every run) is sized to finish inside one 8-minute call on a
node with one H200 and 16 cores. Without it: P = 2, 4, 8, 20 + 20 steps,
batch 128. `--plan` prints the dry calculation (data size, batches per shard,
computed PCIe bytes) and runs nothing.

Three tables, each row written to --out (JSON) as soon as it finishes, so a
run that is interrupted or timed out keeps what it measured:

1. backends: sync_sgd forced onto each collective backend (mpi with host
   staging, cuda_aware_mpi, nccl), every one at the same rank count
   (--backend-ranks, default the smallest P); a backend that cannot run at that
   count here (nccl with more ranks than GPUs, CUDA backends on the CPU) is
   listed as skipped with the reason, one the run itself refuses with its
   one-line refusal.
2. the ladder per P: original easgd (P + 1 ranks: its master) → sync_easgd1 →
   2 → 3, steady-state seconds per step from the per-step timeline (the first
   --steps steps are warm-up), split into compute, exposed communication
   (comm + param_copy + wait on the main thread) and the exchange hidden on
   sync_easgd3's helper thread.
3. ours sync_sgd (backend auto) against PyTorch DDP per P, the same model,
   batch, shards and steps (bench_ddp.py). DDP takes NCCL only when every rank
   has a GPU of its own; where ranks share a GPU it is DDP over gloo, and the
   row says so.

Ranks beyond the GPU count share GPUs (rank mod GPUs), as `scaledl train`
places them; every row names its placement. The synthetic training set is
sized from the largest P, the batch and the steps (max P × batch × 2·steps
images) so that no worker's shard repeats a batch within a run.

The "PCIe MB/step" column is computed, not measured: per worker rank and
step, the batch copied host → device (uint8 images + int64 labels) plus the
parameter traffic the level's code path moves between host and device
(easgd: W in, W^i out; sync_easgd1: W_t down, W^i up for the host-side sum;
sync_easgd2/3 and sync_sgd on the host-staged mpi backend: one staging copy
each way; DDP on gloo: the gradients out and back; NCCL / CUDA-aware MPI: none).
All ranks on one GPU share its link: the node's traffic is P times the column.

The doc's `gpu` section is rewritten only by a CUDA run (or `--render FILE`
from a saved --out of one); a `--device cpu` trial never puts its numbers
there. `--placeholder` writes the "not measured" section with the command.
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

from bench import bench_ddp, bench_ladder, common  # noqa: E402

BACKENDS = ("mpi", "cuda_aware_mpi", "nccl")
IMAGE = (3, 32, 32)
SAMPLE_BYTES = 3 * 32 * 32 + 8  # uint8 image + int64 label, copied host → device per sample
MAX_DATA_BYTES = 4 << 30  # refuse to generate more synthetic data than this
DEFAULTS = {"ranks": "2,4,8", "steps": 20, "batch": 128, "rounds": 1, "budget_s": None}
QUICK = {"ranks": "2,4,8", "steps": 5, "batch": 32, "rounds": 1, "budget_s": 360.0}
COMMAND = (
    "PYTHONPATH=src OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \\\n"
    "        python bench/bench_gpu.py --quick --out gpu-results.json"
)


def gpus(device: str) -> int:
    import torch

    return torch.cuda.device_count() if device == "cuda" else 0


# ------------------------------------------------------------------ sizing


def train_count(max_workers: int, batch: int, steps: int) -> int:
    """Training images so that each of `max_workers` shards holds the run's 2·steps batches without repeating."""
    return max_workers * batch * 2 * steps


def plan_lines(workers: list[int], batch: int, steps: int, backend_ranks: int) -> list[str]:
    """The dry calculation: every shard at every P (and at the backend table's count) holds the batches it needs."""
    n = train_count(max(workers), batch, steps)
    lines = [
        f"synthetic32: {n} training images ({n * IMAGE[0] * IMAGE[1] * IMAGE[2] / 2**20:.1f} MiB uint8) "
        f"= max P {max(workers)} × batch {batch} × {2 * steps} steps (warm-up + timed)"
    ]
    for p in sorted(set(workers) | {backend_ranks}):
        shard = n // p
        lines.append(
            f"  P={p}: shard {shard} images = {shard // batch} batches of {batch}; a run needs {2 * steps} "
            f"-> {'ok' if shard // batch >= 2 * steps else 'TOO SMALL'}"
        )
    return lines


def check_sizes(workers: list[int], batch: int, steps: int, backend_ranks: int) -> int:
    """The training-set size; SystemExit (one line) if it is too big to generate or a shard is short."""
    n = train_count(max(workers), batch, steps)
    if n * (IMAGE[0] * IMAGE[1] * IMAGE[2]) > MAX_DATA_BYTES:
        raise SystemExit(
            f"bench_gpu: max P × batch × 2·steps = {n} images would exceed "
            f"{MAX_DATA_BYTES >> 30} GiB of synthetic data; lower --batch, --steps or --ranks"
        )
    short = [p for p in set(workers) | {backend_ranks} if (n // p) // batch < 2 * steps]
    if short:
        raise SystemExit(f"bench_gpu: at P = {short} a shard holds fewer than {2 * steps} batches of {batch}")
    return n


# -------------------------------------------------------------- PCIe model


def param_bytes(model: str = "cifar_alexnet") -> int:
    from scaledl.models import build_model

    return 4 * sum(p.numel() for p in build_model(model, IMAGE, 10).parameters())


def pcie_bytes(level: str, backend: str, device: str, weights: int, batch: int) -> int:
    """Computed bytes over PCIe per worker rank per step (see the module docstring); 0 off CUDA."""
    if device != "cuda":
        return 0
    data = batch * SAMPLE_BYTES
    if level in ("easgd", "sync_easgd1"):  # W (or W_t) host → device, W^i device → host
        return data + 2 * weights
    if level in ("sync_easgd2", "sync_easgd3", "sync_sgd"):
        return data + (2 * weights if backend == "mpi" else 0)  # host staging: one copy each way
    if level == "ddp":
        return data + (2 * weights if backend == "gloo" else 0)  # gloo stages CUDA gradients through the host
    raise ValueError(level)


def placement(ranks: int, device: str) -> str:
    if device != "cuda":
        return f"{ranks} ranks on CPU"
    g = gpus(device)
    return f"{ranks} ranks share {g} GPU{'s' if g > 1 else ''}" if ranks > g else f"{ranks} ranks, 1 GPU each"


# ------------------------------------------------------------------- runs


def failure(exc: BaseException) -> str:
    """One line out of a failed run: its error line if it printed one."""
    text = str(exc) if not isinstance(exc, subprocess.TimeoutExpired) else f"timed out after {exc.timeout:.0f} s"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return ((errors or lines or [type(exc).__name__])[-1])[:160]


def backend_skip(backend: str, ranks: int, device: str) -> str | None:
    if backend in ("cuda_aware_mpi", "nccl") and device != "cuda":
        return f"skipped: {backend} needs CUDA devices (this run is on {device})"
    if backend == "nccl" and ranks > gpus(device):
        return f"skipped: NCCL needs one GPU per rank, and {ranks} ranks > {gpus(device)} GPU(s)"
    return None


def ladder_steps(
    data: Path, out: Path, level: str, workers: int, steps: int, *, batch: int, extra: tuple[str, ...] = ()
) -> dict:
    """One ladder level with cifar_alexnet: `steps` warm-up then `steps` timed steps, no evaluation inside;
    the workers' steady-state seconds per step and their split (bench_ladder.per_step's quantities)."""
    spec = {**bench_ladder.HEAVY, "batch": batch}
    common.run_mpi(
        bench_ladder.ranks_of(level, workers),
        bench_ladder.train_args(data, out, level, spec, max_steps=2 * steps, eval_every=2 * steps + 1, extra=extra),
        timeout=900,
    )
    detail = bench_ladder.per_step(out, steps)
    return {
        "seconds_per_step": detail["seconds_per_step"],
        "compute_s": detail["compute_s"],
        "exposed_comm_s": detail["exposed_s"],
        "hidden_comm_s": bench_ladder.hidden_per_step(bench_ladder.read_run(out), steps),
        "comm_share": detail["transfer_share"],
        "backend": detail["backend"],
        "phase_gap": detail["phase_gap"],
    }


def backend_row(data: Path, out: Path, backend: str, ranks: int, args, weights: int) -> dict:
    """sync_sgd on one forced backend at `ranks`: seconds per step, or the reason it did not run."""
    row = {
        "backend": backend,
        "ranks": ranks,
        "placement": placement(ranks, args.device),
        "seconds_per_step": None,
        "comm_s": None,
        "pcie_mb": pcie_bytes("sync_sgd", backend, args.device, weights, args.batch) / 1e6,
    }
    skip = backend_skip(backend, ranks, args.device)
    if skip:
        return {**row, "pcie_mb": None, "result": skip}
    proc = common.run_mpi(
        ranks,
        [
            "-m",
            "scaledl",
            "train",
            "--data",
            str(data),
            "--model",
            "cifar_alexnet",
            "--algorithm",
            "sync_sgd",
            "--out-dir",
            str(out),
            "--max-steps",
            str(2 * args.steps),
            "--eval-every",
            str(2 * args.steps + 1),
            "--batch-size",
            str(args.batch),
            "--lr",
            "0.01",
            "--seed",
            "0",
            "--device",
            args.device,
            "--backend",
            backend,
        ],
        check=False,
    )
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.splitlines() if "error" in line.lower()] or proc.stderr.splitlines()[-1:]
        return {
            **row,
            "pcie_mb": None,
            "result": "refused: " + (lines[0] if lines else f"exit {proc.returncode}")[:160],
        }
    state = common.steady_state(out, args.steps)
    return {**row, "seconds_per_step": state["seconds_per_step"], "comm_s": state["exposed_s"], "result": "ran"}


class Results:
    """The run's rows, rewritten to `path` (atomically) after every row."""

    def __init__(self, path: Path, config: dict):
        self.path = path
        self.data = {"config": config, "backends": [], "ladder": [], "ddp": [], "skipped": [], "complete": False}
        self.save()

    def add(self, table: str, row: dict) -> None:
        self.data[table].append(row)
        self.save()

    def save(self) -> None:
        from scaledl.atomic import write_text

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.path, json.dumps(self.data, indent=1, default=str) + "\n")


def measure(args, workers: list[int], results: Results, weights: int) -> None:
    t0 = time.monotonic()

    def out_of_time(what: str) -> bool:
        if args.budget_s is not None and time.monotonic() - t0 > args.budget_s:
            results.add("skipped", {"run": what, "reason": f"time budget of {args.budget_s:.0f} s spent"})
            print(f"bench_gpu: skipped {what} (time budget)", flush=True)
            return True
        return False

    def done(table: str, row: dict) -> None:
        results.add(table, row)
        print(
            f"bench_gpu: {time.monotonic() - t0:6.1f} s  {table}: "
            + json.dumps({k: v for k, v in row.items() if k not in ("ours_split",)}, default=str),
            flush=True,
        )

    n = results.data["config"]["train_count"]
    ddp_args = argparse.Namespace(
        model="cifar_alexnet",
        warmup=args.steps,
        steps=args.steps,
        batch=args.batch,
        lr=0.01,
        rounds=args.rounds,
        device=args.device,
    )
    extra = ("--device", args.device)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        tmp = Path(tmp)
        data = common.prepare_synthetic32(tmp, train_count=n)
        for b in BACKENDS:
            if not out_of_time(f"backend {b}"):
                try:
                    row = backend_row(data, tmp / f"backend-{b}", b, args.backend_ranks, args, weights)
                except (Exception, SystemExit) as exc:  # one failed run must not lose the others
                    row = {"backend": b, "ranks": args.backend_ranks, "result": "failed: " + failure(exc)}
                done("backends", row)
        for p in workers:
            levels = {}
            for level in bench_ladder.LEVELS:
                if out_of_time(f"{level} P={p}"):
                    continue
                ranks = bench_ladder.ranks_of(level, p)
                row = {"workers": p, "level": level, "ranks": ranks, "placement": placement(ranks, args.device)}
                try:
                    row.update(
                        ladder_steps(data, tmp / f"{level}-p{p}", level, p, args.steps, batch=args.batch, extra=extra)
                    )
                    row["pcie_mb"] = pcie_bytes(level, row["backend"], args.device, weights, args.batch) / 1e6
                except (Exception, SystemExit) as exc:
                    row["error"] = failure(exc)
                levels[level] = row
                base, two = levels.get("easgd", {}), levels.get("sync_easgd2", {})
                if row.get("seconds_per_step") and base.get("seconds_per_step"):
                    row["speedup_vs_easgd"] = base["seconds_per_step"] / row["seconds_per_step"]
                if "exposed_comm_s" in row and two.get("exposed_comm_s"):
                    row["exposed_vs_sync_easgd2"] = row["exposed_comm_s"] / two["exposed_comm_s"]
                done("ladder", row)
            if out_of_time(f"ours vs DDP P={p}"):
                continue
            row = {"workers": p, "placement": placement(p, args.device)}
            try:
                result = bench_ddp.measure(ddp_args, p, data, tmp)
                ddp_be = result["ddp_backend"]
                g = gpus(args.device)
                shared = (
                    ""
                    if args.device != "cuda" or p <= g
                    else ", ranks share one GPU"
                    if g == 1
                    else f", ranks share {g} GPUs"
                )
                row.update(
                    {
                        "ours_backend": result["ours_backend"],
                        "ours_s": result["ours_s"],
                        "ddp_backend": ddp_be,
                        "ddp_s": result["ddp_s"],
                        "ratio": result["ddp_s"] / result["ours_s"],
                        "ddp_label": f"DDP ({ddp_be}{shared})",
                        "ours_pcie_mb": pcie_bytes("sync_sgd", result["ours_backend"], args.device, weights, args.batch)
                        / 1e6,
                        "ddp_pcie_mb": pcie_bytes("ddp", ddp_be, args.device, weights, args.batch) / 1e6,
                        "ours_split": result["ours_split"],
                    }
                )
            except (Exception, SystemExit) as exc:
                row["error"] = failure(exc)
            done("ddp", row)
    results.data["complete"] = True
    results.data["wall_s"] = time.monotonic() - t0
    results.save()


# ------------------------------------------------------------------ the doc


def tab(rows: list[dict], columns: list[str], headers: list[str]) -> str:
    return common.table(rows, columns, headers) if rows else "(no row finished)"


def render(res: dict) -> tuple[str, str, str]:
    """intro, tables and notes of the gpu section from a results dict (this run's or a saved --out)."""
    c = res["config"]
    ladder = [{**r, "result": r.get("error", "ran")} for r in res["ladder"]]
    gaps = [r for r in res["ladder"] if r.get("phase_gap") is not None and r["phase_gap"] > 0.05]
    tables = (
        f"Backends (sync_sgd, forced), every one at P = {c['backend_ranks']}:\n\n"
        + tab(
            res["backends"],
            ["backend", "ranks", "placement", "seconds_per_step", "comm_s", "pcie_mb", "result"],
            [
                "backend",
                "ranks",
                "placement",
                "s/step",
                "transfer + wait (s/step)",
                "PCIe MB/step/rank (computed)",
                "result",
            ],
        )
        + "\n\nThe ladder, steady state per step:\n\n"
        + tab(
            ladder,
            [
                "workers",
                "level",
                "placement",
                "backend",
                "seconds_per_step",
                "compute_s",
                "exposed_comm_s",
                "hidden_comm_s",
                "comm_share",
                "speedup_vs_easgd",
                "exposed_vs_sync_easgd2",
                "pcie_mb",
                "phase_gap",
                "result",
            ],
            [
                "P",
                "level",
                "placement",
                "backend",
                "s/step",
                "compute (s)",
                "exposed comm (s)",
                "hidden comm (s)",
                "comm share",
                "× easgd",
                "exposed ÷ sync_easgd2",
                "PCIe MB/step/rank (computed)",
                "unaccounted ÷ wall (max rank)",
                "result",
            ],
        )
        + "\n\nBreakdown check (every rank's phases sum to its wall time within 5 %): "
        + ("holds" if not gaps else "DOES NOT HOLD for " + ", ".join(f"{r['level']} P={r['workers']}" for r in gaps))
        + "\n\nOurs sync_sgd against PyTorch DDP (throughput ratio > 1: ours is faster):\n\n"
        + tab(
            [{**r, "result": r.get("error", "ran")} for r in res["ddp"]],
            [
                "workers",
                "placement",
                "ours_backend",
                "ours_s",
                "ours_pcie_mb",
                "ddp_label",
                "ddp_s",
                "ddp_pcie_mb",
                "ratio",
                "result",
            ],
            [
                "P",
                "placement",
                "ours",
                "ours s/step",
                "ours PCIe MB/step (computed)",
                "DDP",
                "DDP s/step",
                "DDP PCIe MB/step (computed)",
                "ours ÷ DDP throughput",
                "result",
            ],
        )
    )
    if res["skipped"]:
        tables += "\n\nNot run (time budget): " + ", ".join(s["run"] for s in res["skipped"]) + "."
    if not res.get("complete"):
        tables += "\n\n**Incomplete run**: the rows above are those that finished before it stopped."
    intro = (
        f"cifar_alexnet (36 M parameters) on {c['train_count']} synthetic 3×32×32 images (max P × batch × "
        f"2·steps, so no shard repeats a batch), batch {c['batch']} per worker, {c['steps']} warm-up then "
        f"{c['steps']} timed steps, on {c['device']} with {c['gpus']} GPU(s); P = {', '.join(map(str, c['ranks']))}"
        f"{' (--quick)' if c.get('quick') else ''}."
    )
    notes = (
        "Ranks beyond the GPU count share a GPU (placement column): the compute of co-located ranks "
        "serialises on it, NCCL (one rank per GPU) cannot run there, and DDP falls back to gloo, which stages "
        "CUDA tensors through the host. Without CUDA-aware MPI, sync_easgd2/3 still stage W through host "
        "memory (the PCIe column shows it). The PCIe column is computed from each code path's copies, not "
        "measured; the node's traffic is P times it, on one link when the GPU is shared."
    )
    return intro, tables, notes


def placeholder() -> str:
    return (
        "## GPU node: ladder and DDP with cifar_alexnet\n\nNot measured: no GPU machine has run this script "
        "yet, so this section has no numbers. Run it on a GPU node from the repository root (Open MPI as root "
        "needs the two variables); `--quick` fits one 8-minute call on one H200 with 16 cores, and every "
        f"finished row is kept in gpu-results.json:\n\n    {COMMAND}\n\nthen `python bench/bench_gpu.py "
        "--render gpu-results.json` rewrites this section from the saved rows.\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"preset for one 8-minute call on 1 GPU / 16 cores: {QUICK} (explicit options win)",
    )
    parser.add_argument("--ranks", help=f"worker counts P, comma-separated (default {DEFAULTS['ranks']})")
    parser.add_argument(
        "--steps", type=int, help=f"warm-up steps, then as many timed ones (default {DEFAULTS['steps']})"
    )
    parser.add_argument("--batch", type=int, help=f"per-worker batch (default {DEFAULTS['batch']})")
    parser.add_argument("--rounds", type=int, help="DDP comparison: alternating rounds, fastest kept (default 1)")
    parser.add_argument(
        "--budget-s",
        type=float,
        help="skip runs that would start after this many seconds (default: none; --quick: 360)",
    )
    parser.add_argument("--backend-ranks", type=int, help="the rank count of the backend table (default: smallest P)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("gpu-results.json"),
        help="JSON of every finished row, rewritten after each (default %(default)s)",
    )
    parser.add_argument("--plan", action="store_true", help="print the dry calculation and exit")
    parser.add_argument("--render", type=Path, metavar="FILE", help="rewrite the section from a saved --out and exit")
    parser.add_argument("--placeholder", action="store_true", help="write the 'not measured' section and exit")
    common.common_arguments(parser)
    args = parser.parse_args(argv)
    if args.placeholder:
        body = placeholder()
        print(body)
        if not args.no_doc:
            print(f"updated {common.update_section('gpu', body)} (section gpu)")
        return 0
    if args.render:
        res = json.loads(args.render.read_text())
        if res["config"]["device"] != "cuda":
            raise SystemExit("bench_gpu: these rows are from a CPU trial; the gpu section takes GPU numbers only")
        common.report(
            "gpu",
            "GPU node: ladder and DDP with cifar_alexnet",
            res["config"]["machine"],
            *render(res),
            write=not args.no_doc,
        )
        return 0
    if args.device == "cuda" and not args.plan and not gpus("cuda"):
        raise SystemExit("bench_gpu: no CUDA device visible; run it on a GPU node, or pass --device cpu to try it")
    preset = QUICK if args.quick else DEFAULTS
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    workers = [int(p) for p in args.ranks.split(",")]
    if min(workers) < 2 or args.steps < 1 or args.batch < 1:
        raise SystemExit("bench_gpu: needs P ≥ 2, --steps ≥ 1 and --batch ≥ 1")
    args.backend_ranks = args.backend_ranks or min(workers)
    for line in plan_lines(workers, args.batch, args.steps, args.backend_ranks):
        print(line, flush=True)
    n = check_sizes(workers, args.batch, args.steps, args.backend_ranks)
    weights = param_bytes()
    for level in (*bench_ladder.LEVELS, "sync_sgd"):
        print(
            f"  PCIe per worker rank per step on cuda (computed), {level}: "
            + ", ".join(
                f"{be} {pcie_bytes(level, be, 'cuda', weights, args.batch) / 1e6:.1f} MB"
                for be in ("mpi", "cuda_aware_mpi")
            ),
            flush=True,
        )
    print(
        f"  PCIe, DDP: gloo {pcie_bytes('ddp', 'gloo', 'cuda', weights, args.batch) / 1e6:.1f} MB, "
        f"nccl {pcie_bytes('ddp', 'nccl', 'cuda', weights, args.batch) / 1e6:.1f} MB",
        flush=True,
    )
    if args.plan:
        return 0
    common.use_launch(common.Launch.for_table(max(bench_ladder.ranks_of("easgd", p) for p in workers)))
    m = common.machine()
    config = {
        "ranks": workers,
        "steps": args.steps,
        "batch": args.batch,
        "rounds": args.rounds,
        "backend_ranks": args.backend_ranks,
        "device": args.device,
        "gpus": gpus(args.device),
        "quick": args.quick,
        "budget_s": args.budget_s,
        "train_count": n,
        "param_bytes": weights,
        "machine": m,
    }
    results = Results(args.out, config)
    print(f"bench_gpu: rows go to {args.out.resolve()} as they finish", flush=True)
    measure(args, workers, results, weights)
    intro, tables, notes = render(results.data)
    if args.device == "cuda":
        common.report(
            "gpu", "GPU node: ladder and DDP with cifar_alexnet", m, intro, tables, notes, write=not args.no_doc
        )
    else:  # a CPU trial proves the code path; its numbers never go into the gpu section
        common.report("gpu", "CPU trial of the GPU script (not GPU numbers)", m, intro, tables, notes, write=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
