"""The GPU-node table: copy bandwidths, sync_sgd vs DDP beside one process on the whole GPU, the Sync EASGD ladder.

On the lent GPU machine (one H200, 16 cores, Open MPI + mpi4py + torch in the
system Python, root, results only under $OUT), from the repository root, one
command that stops measuring after 420 s and is killed at 525 s, inside a
540 s call (the rest of a 15-minute slot is the machine's start and room for
a rerun if the preflight fails in its first seconds):

    timeout -k 10 525 env PYTHONPATH=src python3 bench/bench_gpu.py --quick --budget-s 420 --no-doc --out-dir "$OUT"

A CPU trial of the same path (a minute on 2 cores; never into the doc):

    python bench/bench_gpu.py --device cpu --ranks 2 --rounds 1 --steps 1 --batch 2 --model lenet \
        --copy-mib 1 --out-dir /tmp/gpu-trial

Back here, `python bench/bench_gpu.py --render FOLDER/gpu-raw.json` rewrites
the `gpu` section of docs/benchmarks.md from the record alone. `--plan` lists
the blocks, their runs and the time they are guessed to take, the launch
line and the data sizes, and runs nothing (no GPU needed). `--quick`: P = 2,
8, 4 (the extremes first, for the budget), 5 warm-up + 5 timed steps, batch
32 per rank, 3 rounds; without it P = 2, 4, 8, 20 + 20 steps, batch 128, 5
rounds, no budget.

Blocks, measured in this order (a block is one table's cells at one P):

1. copies: pinned host → device, device → host and device → device copies of
   --copy-mib MiB (torch, `--copy-repeats` copies timed between two
   synchronisations per sample); the device-to-device rate is the copy
   ceiling of the GPU's memory (it reads and writes every byte).
2. per P, ours vs DDP: ours sync_sgd (backend auto, --wait-probe none and,
   where P ≥ 2 ranks share a GPU, --device-sync none: no per-phase stream
   synchronisation, as DDP has none; `ours_sync` says why not elsewhere),
   DDP defaults and DDP tuned (bench_ddp.py's worker: gradient_as_bucket_view,
   static_graph, bucket_cap_mb --bucket-mb), and, where the P ranks share a
   GPU, one rank alone on it with the same global batch P × batch (the same
   sync SGD arithmetic): what the GPU gives without any exchange.
3. per P, the ladder: original easgd (P + 1 ranks: its master) → sync_easgd1 →
   2 → 3 (--levels), steady-state s/step split into compute, exposed
   communication and, for sync_easgd3, the exchange hidden on its helper thread.
4. backends: sync_sgd forced onto mpi (host staging), cuda_aware_mpi and nccl at
   --backend-ranks; one that cannot run here is listed with the reason, one
   that the run refuses with its one-line refusal.

Every block runs --rounds rounds; each round runs every cell of the block once,
in the order bench.stats.rotate gives for that round, and one cell twice (its
A/A twin: ours, sync_easgd2, mpi, the host → device copy) for the block's noise
floor. Cells print median [min–max] n; ratios are paired per round, with the
verdict of bench.stats.verdict against that floor.

The budget (--budget-s, counted from the start): before each block its runs are
guessed from the runs measured so far (a straight line through their wall
times against their rank counts, times 1.25; before any, a conservative
guess), and a block that would not finish in what is left is skipped and
recorded as such; a run never outlives the budget by more than a minute
(its timeout). After every run the record is rewritten under --out-dir
(default $OUT), atomically: gpu-raw.json (every sample, bench.common.write_raw's
format, all the section is rendered from), gpu-results.json (each block's
state and each cell's summary), gpu-log.txt; at the end gpu-section.md. So a
run that is killed keeps every run it finished.

Launch: `mpiexec --version` tells Open MPI from MPICH (`launch_flags`). Open MPI
gets --allow-run-as-root --oversubscribe (slots never drop the P + 1 ranks of
easgd at P = 8) and --bind-to none (--bind cores: --map-by slot:PE=⌊cores/ranks⌋
--bind-to core), so a rank's helper, gloo and CUDA threads are not stacked on
one core; MPICH gets -bind-to none or core:K. A preflight tries the launch line
first: every rank of the largest cell opens a CUDA context and joins a 16 MiB
allreduce (on Open MPI, again without its single-copy shared memory if that
fails, as in containers without ptrace). Where it fails, or this Python lacks
a module `scaledl train` imports, the MPI blocks are skipped with that one
line, the copies are still measured and written, and the exit status is 1.
One torch thread per rank everywhere (DDP's worker sets one).

The "PCIe MB/step" column is computed, not measured: per worker rank and step,
the batch copied host → device (uint8 images + int64 labels) plus the
parameter traffic the code path moves between host and device (easgd: W in,
W^i out; sync_easgd1: W_t down, W^i up for the host-side sum; sync_easgd2/3
and sync_sgd on the host-staged mpi backend: one staging copy each way; DDP
on gloo: the gradients out and back; NCCL / CUDA-aware MPI: none).

`--device cpu` is a trial of the same code path (blocks, rounds, budget, record,
rendering) with tiny sizes; its section goes to --out-dir only, never to
docs/benchmarks.md, and its --out-dir may not be in bench/raw. `--placeholder`
writes the "not measured" section with the command above.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import bench_ddp, bench_ladder, common, stats  # noqa: E402
from scaledl.grid.launch import flavor_flags as launch_flags  # noqa: E402  (the one launch module's)
from scaledl.grid.launch import mpi_flavor  # noqa: E402

NAME = "gpu"
TITLE = "GPU node: copies, sync_sgd vs DDP and the ladder with cifar_alexnet"
TABLES = ("copies", "ddp", "ladder", "backends")
BACKENDS = ("mpi", "cuda_aware_mpi", "nccl")
IMAGE = (3, 32, 32)
SAMPLE_BYTES = 3 * 32 * 32 + 8  # uint8 image + int64 label, copied host → device per sample
MAX_DATA_BYTES = 4 << 30  # refuse to generate more synthetic data than this
LR = 0.01
DEFAULTS = {"ranks": "2,4,8", "steps": 20, "batch": 128, "rounds": 5, "budget_s": None}
QUICK = {"ranks": "2,8,4", "steps": 5, "batch": 32, "rounds": 3, "budget_s": 420.0}
MIN_GPU_ROUNDS = 3  # a GPU record's A/A floor and intervals need at least this many
REQUIRED = ("numpy", "torch", "mpi4py", "h5py")  # what a `scaledl train` run imports (pandas, scipy: the section)
OUTPUTS = {"raw": "gpu-raw.json", "results": "gpu-results.json", "section": "gpu-section.md", "log": "gpu-log.txt"}
GUESS_S = {"cuda": (12.0, 2.0), "cpu": (10.0, 4.0)}  # one run's start-up and seconds per rank, before any is timed
COPIES_GUESS_S = {"cuda": 30.0, "cpu": 5.0}
MARGIN = 1.25  # on every estimate from measured runs
RUN_TIMEOUT_S = 600
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
NO_SINGLE_COPY = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_btl_sm_single_copy_mechanism": "none"}
COMMAND = (
    'timeout -k 10 525 env PYTHONPATH=src python3 bench/bench_gpu.py --quick --budget-s 420 --no-doc --out-dir "$OUT"'
)


def gpus(device: str) -> int:
    import torch

    return torch.cuda.device_count() if device == "cuda" else 0


def say(line: str, log: Path | None = None) -> None:
    print(line, flush=True)
    if log is not None:
        with open(log, "a") as f:
            f.write(line + "\n")


# ------------------------------------------------------------------ launch


def detect_flavor() -> tuple[str, str]:
    """(flavor, the version line) of the mpiexec that bench.common launches with."""
    try:
        proc = subprocess.run(
            [common.mpiexec(), "--version"], capture_output=True, text=True, timeout=30, env={**os.environ, **ROOT_ENV}
        )
    except (OSError, subprocess.SubprocessError, SystemExit) as exc:
        return "unknown", f"mpiexec --version failed: {exc}"
    text = proc.stdout + proc.stderr
    line = next((ln.strip() for ln in text.splitlines() if any(ch.isdigit() for ch in ln)), text.strip()[:80])
    return mpi_flavor(text), " ".join(line.split())


@dataclass(frozen=True)
class NodeLaunch(common.Launch):
    """bench.common.Launch with the launch line of `launch_flags`: the same for every cell of the run."""

    flavor: str = "unknown"
    bind_mode: str = "none"
    cores: int = 1
    single_copy: bool = True  # Open MPI's single-copy shared memory (CMA); off where the preflight needed it off

    @classmethod
    def for_node(cls, flavor: str, max_ranks: int, bind_mode: str, cores: int | None = None) -> NodeLaunch:
        cores = cores or common.usable_cores()
        # MPICH busy-polls unless told to yield; with more ranks than cores that starves them (bench.common.Launch)
        return cls(
            yield_poll=flavor == "mpich" and max_ranks > cores,
            bind=bind_mode == "cores",
            flavor=flavor,
            bind_mode=bind_mode,
            cores=cores,
        )

    @classmethod
    def from_dict(cls, d: dict | None) -> NodeLaunch | None:
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d}) if d else None

    def mpiexec_args(self, ranks: int) -> list[str]:
        return launch_flags(self.flavor, ranks, self.cores, self.bind_mode)

    def bound(self, ranks: int) -> bool:
        return self.bind_mode == "cores" and ranks <= self.cores

    def env(self, ranks: int) -> dict[str, str]:
        env = super().env(ranks)
        if self.flavor == "openmpi":
            env.update(ROOT_ENV)
            if not self.single_copy:
                env.update(NO_SINGLE_COPY)
        return env

    def mark(self, ranks: int) -> str:
        return "†" if ranks * self.threads > self.cores else ""

    def describe(self) -> str:
        names = {"openmpi": "Open MPI", "mpich": "MPICH", "unknown": "an unrecognised MPI"}
        bind = (
            f"each rank bound to ⌊{self.cores}/ranks⌋ cores of its own"
            if self.bind_mode == "cores"
            else f"ranks unbound, free to use all {self.cores} cores"
        )
        text = (
            f"{names.get(self.flavor, self.flavor)}, `mpiexec {' '.join(self.mpiexec_args(2))} -n N` ({bind}); "
            f"{self.threads} torch thread per rank (OMP_NUM_THREADS; DDP's worker sets the same), transparent huge "
            f"pages {'on' if self.thp else 'off'}"
        )
        if self.flavor == "mpich":
            text += ", MPICH yields while waiting" if self.yield_poll else ", MPICH busy-polls while waiting"
        if not self.single_copy:
            text += ", Open MPI's single-copy shared memory off (the preflight allreduce failed with it)"
        return text + "; † marks a cell with more ranks than cores"


PREFLIGHT = (
    "from mpi4py import MPI; import numpy as np; c = MPI.COMM_WORLD; a = np.ones(1 << 22, np.float32); "
    "c.Allreduce(MPI.IN_PLACE, a); assert a[0] == c.size; c.rank or print('preflight ok', c.size)"
)
# every rank holds a CUDA context at once, as the runs' ranks will (an exclusive-process GPU refuses the second)
PREFLIGHT_CUDA = (
    "import torch; from mpi4py import MPI; torch.cuda.set_device(MPI.COMM_WORLD.rank % torch.cuda.device_count()); "
    "torch.ones(1, device='cuda').sum().item(); "
)


def preflight(launch: NodeLaunch, ranks: int, device: str) -> tuple[NodeLaunch, str | None]:
    """The launch that runs a 16 MiB allreduce on `ranks` ranks (the run's largest cell), each with a CUDA context
    on a GPU run, or the error line."""
    code = (PREFLIGHT_CUDA if device == "cuda" else "") + PREFLIGHT
    tries = [launch] + ([replace(launch, single_copy=False)] if launch.flavor == "openmpi" else [])
    error = None
    for attempt in tries:
        try:
            proc = common.run_mpi(ranks, ["-c", code], timeout=120, check=False, launch=attempt)
        except (subprocess.TimeoutExpired, OSError, SystemExit) as exc:
            error = failure(exc)
            continue
        if proc.returncode == 0 and "preflight ok" in proc.stdout:
            return attempt, None
        error = failure(RuntimeError(proc.stderr or proc.stdout or f"exit {proc.returncode}"))
    return launch, f"mpiexec preflight ({ranks} ranks) failed: {error}"


def compute_mode() -> str | None:
    """The GPUs' compute mode as nvidia-smi reports it ("Default", "Exclusive_Process"), None without it."""
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_mode", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    modes = sorted(set(proc.stdout.split())) if proc.returncode == 0 else []
    return ", ".join(modes) or None


def missing_modules() -> list[str]:
    """What a run would fail on: a module it imports, or torchvision's package metadata (run.json names its version)."""
    missing = [m for m in REQUIRED if importlib.util.find_spec(m) is None]
    try:
        importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        missing.append("torchvision")
    return missing


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
    if level == "whole":
        return data  # one rank exchanges nothing
    raise ValueError(level)


def placement(ranks: int, device: str, gpu_count: int) -> str:
    if ranks == 0:
        return "this process"
    if device != "cuda":
        return f"{ranks} rank{'s' if ranks > 1 else ''} on CPU"
    if ranks > gpu_count:
        return f"{ranks} ranks share {'one GPU' if gpu_count == 1 else f'{gpu_count} GPUs'}"
    return f"{ranks} rank{'s' if ranks > 1 else ''}, a GPU each"


def shares_gpu(ranks: int, device: str, gpu_count: int) -> bool:
    return device == "cuda" and ranks > max(gpu_count, 1)


def ours_sync(device: str, workers: int, gpu_count: int) -> str:
    """--device-sync of ours: none where every step's exchange waits for the device anyway (P ≥ 2 ranks sharing a
    GPU: host-staged or CUDA-aware MPI), so that the step marks still time the GPU; else phase (one rank, or
    NCCL, would let the host run ahead of its kernels and time the launches)."""
    return "none" if device != "cuda" or (workers >= 2 and shares_gpu(workers, device, gpu_count)) else "phase"


def backend_skip(backend: str, ranks: int, device: str, gpu_count: int) -> str | None:
    if backend in ("cuda_aware_mpi", "nccl") and device != "cuda":
        return f"skipped: {backend} needs CUDA devices (this run is on {device})"
    if backend == "nccl" and ranks > gpu_count:
        return f"skipped: NCCL needs one GPU per rank, and {ranks} ranks > {gpu_count} GPU(s)"
    return None


# ------------------------------------------------------------ the blocks


@dataclass(frozen=True)
class Cell:
    """One configuration of a block, measured once per round (its sample: seconds per step, or per copy)."""

    name: str
    table: str
    workers: int
    ranks: int  # 0: measured in this process (the copies)
    kind: str  # copy, ours, whole, ddp, ddp_tuned, level, backend
    batch: int = 0  # per rank
    level: str = ""
    backend: str = ""
    sync: str = ""  # ours' --device-sync
    direction: str = ""  # copies: h2d, d2h, d2d


@dataclass
class Block:
    """One table's cells at one P, measured together in interleaved rounds: the unit the budget admits or skips."""

    table: str
    workers: int
    cells: list[Cell]
    notes: list[str] = field(default_factory=list)  # cells that cannot run here, with the reason
    skip: str | None = None  # a reason known before it starts

    @property
    def key(self) -> str:
        return "copies" if self.table == "copies" else f"{self.table} P={self.workers}"


COPIES = {"h2d": "host → device (pinned)", "d2h": "device → host (pinned)", "d2d": "device → device"}


def twin(cell: Cell) -> Cell:
    return replace(cell, name=stats.aa_cell(cell.name))


def copy_block() -> Block:
    cells = [Cell(f"copy: {label}", "copies", 0, 0, "copy", direction=d) for d, label in COPIES.items()]
    return Block("copies", 0, [*cells, twin(cells[0])])


def ddp_block(p: int, batch: int, device: str, gpu_count: int) -> Block:
    pre = f"P={p} vs DDP: "
    ours = Cell(pre + "ours sync_sgd", "ddp", p, p, "ours", batch, sync=ours_sync(device, p, gpu_count))
    cells = [
        ours,
        Cell(pre + "DDP defaults", "ddp", p, p, "ddp", batch),
        Cell(pre + "DDP tuned", "ddp", p, p, "ddp_tuned", batch),
    ]
    if p > 1 and (device != "cuda" or shares_gpu(p, device, gpu_count)):
        cells.append(Cell(pre + "1 rank, global batch", "ddp", p, 1, "whole", p * batch, sync="phase"))
    return Block("ddp", p, [*cells, twin(ours)])


def ladder_block(p: int, batch: int, levels: list[str]) -> Block:
    cells = [
        Cell(f"P={p} ladder: {lv}", "ladder", p, bench_ladder.ranks_of(lv, p), "level", batch, level=lv)
        for lv in levels
    ]
    base = next((c for c in cells if c.level == bench_ladder.TWIN), cells[0])
    return Block("ladder", p, [*cells, twin(base)])


def backends_block(ranks: int, batch: int, device: str, gpu_count: int) -> Block:
    cells, notes = [], []
    for b in BACKENDS:
        reason = backend_skip(b, ranks, device, gpu_count)
        if reason:
            notes.append(f"{b}: {reason}")
        else:
            cells.append(Cell(f"P={ranks} backend: {b}", "backends", ranks, ranks, "backend", batch, backend=b))
    return Block("backends", ranks, [*cells, twin(cells[0])], notes=notes)  # mpi always runs


def plan_blocks(tables: list[str], workers: list[int], args, gpu_count: int) -> list[Block]:
    """The blocks in measuring order: copies, then per P (in --ranks order) ours vs DDP and the ladder, then backends."""
    blocks = [copy_block()] if "copies" in tables else []
    for p in workers:
        if "ddp" in tables:
            blocks.append(ddp_block(p, args.batch, args.device, gpu_count))
        if "ladder" in tables:
            blocks.append(ladder_block(p, args.batch, args.levels))
    if "backends" in tables:
        blocks.append(backends_block(args.backend_ranks, args.batch, args.device, gpu_count))
    return blocks


# ------------------------------------------------------------------ budget


class Budget:
    """The run's time limit (None: none) and the guess of what a block will take, from the runs timed so far."""

    def __init__(self, limit_s: float | None, device: str, clock=time.monotonic):
        self.limit, self.clock, self.device = limit_s, clock, device
        self.t0 = clock()
        self.runs: list[tuple[int, float]] = []  # (ranks, wall seconds) of every finished launch
        self.copies_s: float | None = None

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def left(self) -> float | None:
        return None if self.limit is None else self.limit - self.elapsed()

    def note(self, cell: Cell, wall: float) -> None:
        if cell.ranks:
            self.runs.append((cell.ranks, wall))

    def run_s(self, ranks: int) -> float:
        """A launch of `ranks` ranks: the least-squares line wall = a + b·ranks through the timed runs (b ≥ 0;
        proportional to the ranks while only one rank count is timed), times MARGIN; a guess before any."""
        if not self.runs:
            start, per_rank = GUESS_S[self.device]
            return start + per_rank * ranks
        xs, ys = zip(*self.runs)
        if len(set(xs)) == 1:
            return MARGIN * max(ys) * max(1.0, ranks / xs[0])
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = max(0.0, sum((x - mx) * (y - my) for x, y in self.runs) / sum((x - mx) ** 2 for x in xs))
        fewer = [y for x, y in self.runs if x <= ranks]  # a run never takes less than a smaller one took
        return MARGIN * max(my + slope * (ranks - mx), *fewer, min(ys))

    def block_s(self, block: Block, rounds: int) -> float:
        if block.table == "copies":
            return COPIES_GUESS_S[self.device] if self.copies_s is None else MARGIN * self.copies_s
        return rounds * sum(self.run_s(c.ranks) for c in block.cells)

    def admits(self, seconds: float) -> bool:
        return self.limit is None or self.elapsed() + seconds <= self.limit

    def spent(self) -> bool:
        return self.limit is not None and self.elapsed() >= self.limit

    def run_timeout(self) -> float:
        """A launch's timeout: a hung run must not outlive the budget by more than a minute."""
        left = self.left()
        return RUN_TIMEOUT_S if left is None else min(RUN_TIMEOUT_S, max(60.0, left + 60.0))


# ------------------------------------------------------------------ runs


def failure(exc: BaseException) -> str:
    """One line out of a failed run: its error line if it printed one."""
    text = str(exc) if not isinstance(exc, subprocess.TimeoutExpired) else f"timed out after {exc.timeout:.0f} s"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return ((errors or lines or [type(exc).__name__])[-1])[:200]


@dataclass
class Context:
    """What every run of a measuring session needs."""

    args: argparse.Namespace
    tmp: Path
    budget: Budget
    data: Path | None = None
    buffers: dict = field(default_factory=dict)  # the copies' tensors, kept across rounds
    count: int = 0


def copy_buffers(direction: str, ctx: Context):
    """(source, destination) of one copy: pinned host and device tensors; plain host ones in a CPU trial."""
    import torch

    if direction not in ctx.buffers:
        n = (ctx.args.copy_mib << 20) // 4
        if ctx.args.device != "cuda":
            ctx.buffers[direction] = torch.ones(n), torch.empty(n)
        else:
            pinned = lambda: torch.ones(n).pin_memory()  # noqa: E731
            gpu = lambda: torch.ones(n, device="cuda")  # noqa: E731
            src, dst = {"h2d": (pinned, gpu), "d2h": (gpu, pinned), "d2d": (gpu, gpu)}[direction]
            ctx.buffers[direction] = src(), dst()
    return ctx.buffers[direction]


def copy_run(cell: Cell, ctx: Context) -> tuple[float, dict]:
    """Seconds per copy: --copy-repeats asynchronous copies between two synchronisations, after one untimed."""
    import torch

    src, dst = copy_buffers(cell.direction, ctx)
    sync = torch.cuda.synchronize if ctx.args.device == "cuda" else (lambda: None)
    dst.copy_(src, non_blocking=True)
    sync()
    t0 = time.perf_counter()
    for _ in range(ctx.args.copy_repeats):
        dst.copy_(src, non_blocking=True)
    sync()
    seconds = (time.perf_counter() - t0) / ctx.args.copy_repeats
    return seconds, {"bytes": src.numel() * src.element_size(), "repeats": ctx.args.copy_repeats}


LADDER_KEYS = ("compute_s", "exposed_s", "transfer_s", "wait_s", "transfer_share", "backend", "phase_gap")
SPLIT = ("data_s", "h2d_s", "param_copy_s", "compute_s", "comm_s", "update_s", "wait_s")


def train_run(cell: Cell, ctx: Context, out: Path) -> tuple[float, dict]:
    """One `scaledl train` of the cell: --steps warm-up then --steps timed steps, no evaluation inside."""
    a = ctx.args
    extra = {
        "ours": ("--wait-probe", "none", "--device-sync", cell.sync),  # DDP has no timing barrier, no phase syncs
        "whole": ("--device-sync", cell.sync),
        "backend": ("--backend", cell.backend),
        "level": (),
    }[cell.kind]
    spec = {"model": a.model, "batch": cell.batch, "lr": LR}
    train = bench_ladder.train_args(
        ctx.data,
        out,
        cell.level or "sync_sgd",
        spec,
        max_steps=2 * a.steps,
        eval_every=2 * a.steps + 1,
        extra=("--device", a.device, *extra),
    )
    common.run_mpi(cell.ranks, train, timeout=ctx.budget.run_timeout())
    if cell.kind == "level":
        detail = bench_ladder.per_step(out, a.steps)
        hidden = bench_ladder.hidden_per_step(bench_ladder.read_run(out), a.steps)
        return detail["seconds_per_step"], {**{k: detail[k] for k in LADDER_KEYS}, "hidden_s": hidden}
    state = common.steady_state(out, a.steps)
    codesign = state["run"]["codesign"]
    return state["seconds_per_step"], {
        "backend": codesign["backend"],
        "message": codesign.get("message"),
        "exposed_s": state["exposed_s"],
        "split": {k: state.get(k) for k in SPLIT},
    }


def ddp_run(cell: Cell, ctx: Context, out: Path) -> tuple[float, dict]:
    """One DDP run through bench_ddp.py's worker (its timed loop lies between two synchronise-and-barriers)."""
    a = ctx.args
    worker = [
        str(Path(bench_ddp.__file__).resolve()),
        *("--worker", str(out), "--data", str(ctx.data), "--model", a.model, "--lr", str(LR)),
        *("--warmup", str(a.steps), "--steps", str(a.steps), "--batch", str(cell.batch), "--device", a.device),
        *("--bucket-mb", str(a.bucket_mb), *(("--ddp-tuned",) if cell.kind == "ddp_tuned" else ())),
    ]
    common.run_mpi(cell.ranks, worker, timeout=ctx.budget.run_timeout())
    result = json.loads(out.read_text())
    return result["seconds_per_step"], {
        "backend": bench_ddp.ddp_backend(a.device, cell.ranks),
        "settings": result.get("settings"),
        "buckets": result.get("buckets"),
        "split": result.get("split"),
    }


def run_cell(cell: Cell, ctx: Context) -> tuple[float, dict]:
    """(sample, detail) of one run of `cell`; what a run leaves on disk is removed (a model.pt is 144 MB)."""
    if cell.kind == "copy":
        return copy_run(cell, ctx)
    ctx.count += 1
    out = ctx.tmp / f"run{ctx.count:03d}"
    try:
        if cell.kind in ("ddp", "ddp_tuned"):
            return ddp_run(cell, ctx, out.with_suffix(".json"))
        return train_run(cell, ctx, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        out.with_suffix(".json").unlink(missing_ok=True)


# ---------------------------------------------------------------- the record


class Record:
    """Everything measured so far, rewritten under `out_dir` (atomically) after every run."""

    def __init__(self, out_dir: Path, config: dict, machine: dict):
        self.paths = {k: Path(out_dir) / v for k, v in OUTPUTS.items()}
        self.config, self.machine = config, machine
        self.samples: dict[str, list[float]] = {}
        self.details: dict[str, list[dict]] = {}
        self.cells: dict[str, dict] = {}
        self.blocks: list[dict] = []
        self.order: dict[str, list[list[str]]] = {}
        self.stopped: str | None = None
        self.complete = False
        self.t0 = time.monotonic()
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        self.paths["log"].write_text("")
        self.save()

    def say(self, line: str) -> None:
        say(line, self.paths["log"])

    def start(self, block: Block, state: str, **info) -> dict:
        entry = {"key": block.key, "table": block.table, "workers": block.workers, "state": state, **info}
        entry["cells"] = [c.name for c in block.cells]
        entry["notes"] = list(block.notes)
        self.blocks.append(entry)
        g = self.config["gpus"]
        for c in block.cells:
            where = placement(c.ranks, self.config["device"], g) + (common.LAUNCH.mark(c.ranks) if c.ranks else "")
            self.cells[c.name] = {**asdict(c), "placement": where}
        self.save()
        return entry

    def add(self, cell: Cell, sample: float | None, detail: dict) -> None:
        if sample is not None:
            self.samples.setdefault(cell.name, []).append(sample)
        self.details.setdefault(cell.name, []).append(detail)
        self.save()

    def meta(self) -> dict:
        return {
            "machine": self.machine,
            "unit": "s",
            "quantity": "seconds per step (steady state); copies: seconds per copy",
            "config": self.config,
            "rounds": self.config["rounds"],
            "cells": self.cells,
            "blocks": self.blocks,
            "details": self.details,
            "order": self.order,
            "stopped": self.stopped,
            "complete": self.complete,
            "wall_s": time.monotonic() - self.t0,
            "raw": OUTPUTS["raw"],
        }

    def save(self) -> None:
        from scaledl.atomic import write_text

        summary = {
            "config": self.config,
            "complete": self.complete,
            "stopped": self.stopped,
            "wall_s": time.monotonic() - self.t0,
            "blocks": [
                {
                    **b,
                    "cells": {
                        c: stats.summary(self.samples[c])
                        if c in self.samples
                        else {"error": next((d["error"] for d in self.details.get(c, []) if "error" in d), None)}
                        for c in b["cells"]
                    },
                }
                for b in self.blocks
            ],
        }
        write_text(self.paths["results"], json.dumps(summary, indent=1, default=str) + "\n")
        if self.samples:  # a raw record holds at least one sample
            common.write_raw(self.paths["raw"], NAME, self.samples, self.meta())


def measure(blocks: list[Block], ctx: Context, record: Record, run=run_cell) -> None:
    """Every block the budget admits, for --rounds rounds each; a failed cell is not run again (its error is its
    row). Stops early, keeping everything, when the budget is spent or on SIGTERM / Ctrl-C."""
    budget, rounds = ctx.budget, ctx.args.rounds
    for block in blocks:
        if block.skip:
            record.start(block, "skipped", reason=block.skip)
            record.say(f"bench_gpu: skipped {block.key}: {block.skip}")
            continue
        estimate = budget.block_s(block, rounds)
        if not budget.admits(estimate):
            reason = f"time budget: guessed {estimate:.0f} s, {budget.left():.0f} s left of {budget.limit:.0f} s"
            record.start(block, "skipped for budget", reason=reason, estimate_s=estimate)
            record.say(f"bench_gpu: skipped {block.key} ({reason})")
            continue
        entry = record.start(block, "running", estimate_s=estimate, rounds_done=0)
        record.say(
            f"bench_gpu: {budget.elapsed():6.1f} s  {block.key}: {len(block.cells)} cells × {rounds} rounds, guessed {estimate:.0f} s"
        )
        t0 = budget.elapsed()
        entry["state"] = measure_block(block, ctx, record, run, entry)
        entry["wall_s"] = budget.elapsed() - t0
        if block.table == "copies":
            budget.copies_s = entry["wall_s"]
            ctx.buffers.clear()  # 1 GiB of device and pinned memory the runs may want
        record.save()
        if budget.spent():
            record.stopped = record.stopped or f"time budget of {budget.limit:.0f} s spent"


def measure_block(block: Block, ctx: Context, record: Record, run, entry: dict) -> str:
    """The rounds of one block; its final state ("measured", or why it stopped early)."""
    budget, failed = ctx.budget, set()
    order = record.order.setdefault(block.key, [])
    for r in range(ctx.args.rounds):
        order.append([c.name for c in stats.rotate(block.cells, r)])
        for cell in stats.rotate(block.cells, r):
            if cell.name in failed:
                continue
            if budget.spent():
                return f"cut by the time budget after {r} of {ctx.args.rounds} rounds"
            t0 = budget.elapsed()
            try:
                sample, detail = run(cell, ctx)
            except (Exception, SystemExit) as exc:  # one failed run must not lose the others
                sample, detail = None, {"error": failure(exc)}
                failed.add(cell.name)
            wall = budget.elapsed() - t0
            budget.note(cell, wall)
            record.add(cell, sample, {**detail, "round": r, "wall_s": wall})
            shown = f"{sample:.6f} s" if sample is not None else "FAILED: " + detail["error"]
            record.say(
                f"bench_gpu: {budget.elapsed():6.1f} s  round {r + 1}/{ctx.args.rounds} {cell.name:<48} {shown} ({wall:.1f} s)"
            )
        entry["rounds_done"] = r + 1
    return "measured"


# ------------------------------------------------------------------ the doc


def median_of(details: list[dict], key: str) -> float | None:
    values = [d[key] for d in details if d.get(key) is not None]
    return common.median(values) if values else None


def rounds_of(samples: dict, a: str, b: str) -> tuple[list[float], list[float]]:
    """The rounds both cells have: sample i of a cell is round i's (a failed cell runs no more), so a block
    cut mid-round pairs its common first rounds."""
    n = min(len(samples.get(a, [])), len(samples.get(b, [])))
    return samples.get(a, [])[:n], samples.get(b, [])[:n]


def floor_of(samples: dict, block: dict) -> float | None:
    """The block's A/A noise floor: its twin against the cell it repeats, paired per round."""
    for name in block["cells"]:
        base = name.removesuffix(stats.AA_SUFFIX)
        if name != base:
            first, again = rounds_of(samples, base, name)
            return stats.noise_floor(zip(first, again)) if first else None
    return None


def compare(samples: dict, a: str, b: str, noise: float | None) -> tuple[str, str]:
    """(a ÷ b as "1.04× [0.98–1.09] n=3", its verdict) of two cells' s/step, paired per round; "–" where they
    share no round."""
    x, y = rounds_of(samples, a, b)
    if not x or a == b:
        return "–", "–"
    r = stats.ratio(x, y, paired=True)
    return stats.format_ratio(r), (stats.verdict_text(r, noise) if noise is not None else "no A/A floor")


def result_of(record: dict, name: str) -> str:
    errors = [d["error"] for d in record["meta"]["details"].get(name, []) if "error" in d]
    return ("failed: " + errors[-1]) if errors else "ran"


def cell_text(samples: dict, name: str, unit: str = "s") -> str:
    return stats.format_cell(stats.summary(samples[name]), unit=unit) if name in samples else "–"


def copies_table(record: dict, block: dict) -> str:
    s, meta = record["samples"], record["meta"]
    rows = []
    for name in block["cells"]:
        nbytes = next((d["bytes"] for d in meta["details"].get(name, []) if "bytes" in d), None)
        rate = {"rate": "–"}
        if name in s and nbytes:
            rate["rate"] = stats.format_cell(stats.summary([nbytes / x for x in s[name]]), unit="B/s")
        rows.append(
            {"copy": name.removeprefix("copy: "), "MiB": (nbytes or 0) / 2**20, "seconds per copy": cell_text(s, name)}
            | rate
            | {"result": result_of(record, name)}
        )
    return common.table(rows, list(rows[0]), ["copy", "MiB", "s per copy", "bytes/s", "result"])


def ddp_label(cell: dict, details: list[dict], device: str, gpu_count: int) -> str:
    backend = backend_of(details)
    if cell["kind"] == "ours":
        text = f"ours sync_sgd ({backend}, --device-sync {cell['sync']})"
    elif cell["kind"] == "whole":
        text = f"1 rank on {'the whole GPU' if device == 'cuda' else 'the CPU'}, batch {cell['batch']}"
    else:
        shared = ", ranks share one GPU" if shares_gpu(cell["ranks"], device, gpu_count) else ""
        text = f"DDP {'tuned' if cell['kind'] == 'ddp_tuned' else 'defaults'} ({backend}{shared})"
    return text + (" [A/A]" if cell["name"].endswith(stats.AA_SUFFIX) else "")


def backend_of(details: list[dict]) -> str:
    """The backend the cell's runs reported (the last one that did)."""
    found = [d["backend"] for d in details if d.get("backend")]
    return found[-1] if found else "?"


def ddp_table(record: dict, block: dict) -> str:
    s, meta, c = record["samples"], record["meta"], record["meta"]["config"]
    ours = block["cells"][0]
    noise = floor_of(s, block)
    rows = []
    for name in block["cells"]:
        cell, details = meta["cells"][name], meta["details"].get(name, [])
        global_batch = cell["batch"] * (cell["ranks"] if cell["kind"] != "whole" else 1)
        med = stats.summary(s[name])["median"] if name in s else None
        ratio, verdict = compare(s, ours, name, noise)
        level = "whole" if cell["kind"] == "whole" else "ddp" if cell["kind"].startswith("ddp") else "sync_sgd"
        backend = backend_of(details)
        pcie = pcie_bytes(level, backend, c["device"], c["param_bytes"], cell["batch"]) / 1e6
        rows.append(
            {
                "variant": ddp_label(cell, details, c["device"], c["gpus"]),
                "placement": cell["placement"],
                "batch": f"{cell['batch']}/rank",
                "s/step": cell_text(s, name),
                "samples/s": f"{global_batch / med:.0f}" if med else "–",
                "ours ÷ row": ratio,
                "ours vs row": verdict,
                "PCIe": pcie,
                "result": result_of(record, name),
            }
        )
    headers = [
        "variant",
        "placement",
        "batch",
        "s/step median [min–max] n",
        "samples/s (median)",
        "ours ÷ row (s/step, paired)",
        "ours vs row",
        "PCIe MB/step/rank (computed)",
        "result",
    ]
    return common.table(rows, list(rows[0]), headers) + floor_line(noise)


def floor_line(noise: float | None) -> str:
    return (
        f"\nA/A noise floor of this block: ±{noise:.1%}.\n"
        if noise is not None
        else "\nNo A/A floor (the twin and its cell share no round).\n"
    )


def ladder_table(record: dict, block: dict) -> str:
    s, meta, c = record["samples"], record["meta"], record["meta"]["config"]
    noise = floor_of(s, block)
    easgd = next((n for n in block["cells"] if meta["cells"][n]["level"] == "easgd"), None)
    two = next((n for n in block["cells"] if meta["cells"][n]["level"] == "sync_easgd2"), None)
    two_exposed = median_of(meta["details"].get(two, []), "exposed_s") if two else None
    rows = []
    for name in block["cells"]:
        cell, details = meta["cells"][name], meta["details"].get(name, [])
        exposed = median_of(details, "exposed_s")
        ratio, verdict = compare(s, name, easgd, noise) if easgd else ("–", "–")
        backend = backend_of(details)
        gaps = [d["phase_gap"] for d in details if d.get("phase_gap") is not None]
        rows.append(
            {
                "level": cell["level"] + (" [A/A]" if name.endswith(stats.AA_SUFFIX) else ""),
                "placement": cell["placement"],
                "backend": backend,
                "s/step": cell_text(s, name),
                "compute": median_of(details, "compute_s"),
                "exposed": exposed,
                "hidden": median_of(details, "hidden_s"),
                "÷ easgd": ratio,
                "vs easgd": verdict,
                "÷ sync_easgd2": exposed / two_exposed if exposed is not None and two_exposed else None,
                "PCIe": pcie_bytes(cell["level"], backend, c["device"], c["param_bytes"], cell["batch"]) / 1e6,
                "gap": max(gaps) if gaps else None,
                "result": result_of(record, name),
            }
        )
    headers = [
        "level",
        "placement",
        "backend",
        "s/step median [min–max] n",
        "compute (s/step)",
        "exposed comm (s/step)",
        "hidden comm (s/step)",
        "÷ easgd (s/step, paired)",
        "vs easgd",
        "exposed ÷ sync_easgd2",
        "PCIe MB/step/rank (computed)",
        "unaccounted ÷ wall (max)",
        "result",
    ]
    return common.table(rows, list(rows[0]), headers) + floor_line(noise)


def backends_table(record: dict, block: dict) -> str:
    s, meta, c = record["samples"], record["meta"], record["meta"]["config"]
    noise = floor_of(s, block)
    ref = block["cells"][0]
    rows = []
    for name in block["cells"]:
        cell = meta["cells"][name]
        ratio, verdict = compare(s, name, ref, noise)
        rows.append(
            {
                "backend": cell["backend"] + (" [A/A]" if name.endswith(stats.AA_SUFFIX) else ""),
                "placement": cell["placement"],
                "s/step": cell_text(s, name),
                "ratio": ratio,
                "verdict": verdict,
                "PCIe": pcie_bytes("sync_sgd", cell["backend"], c["device"], c["param_bytes"], cell["batch"]) / 1e6,
                "result": result_of(record, name),
            }
        )
    rows += [{"backend": note.split(":")[0], "result": note.split(": ", 1)[1]} for note in block["notes"]]
    headers = [
        "backend",
        "placement",
        "s/step median [min–max] n",
        "÷ mpi (paired)",
        "vs mpi",
        "PCIe MB/step/rank (computed)",
        "result",
    ]
    return common.table(
        rows, ["backend", "placement", "s/step", "ratio", "verdict", "PCIe", "result"], headers
    ) + floor_line(noise)


HEADINGS = {
    "copies": "Copy bandwidth (one process, torch)",
    "ddp": "Ours sync_sgd against PyTorch DDP, P = {p} (ours ÷ row > 1: ours is slower than the row)",
    "ladder": "The ladder, P = {p}, steady state per step (÷ easgd < 1: the level is faster than easgd)",
    "backends": "Backends (sync_sgd, forced), P = {p} (÷ mpi > 1: slower than host-staged mpi)",
}
TABLE_OF = {"copies": copies_table, "ddp": ddp_table, "ladder": ladder_table, "backends": backends_table}


def render(record: dict) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the section, from a raw record alone."""
    meta = record["meta"]
    c = meta["config"]
    parts, not_run = [], []
    for block in meta["blocks"]:
        heading = HEADINGS[block["table"]].format(p=block["workers"])
        if block["state"].startswith(("skipped", "not reached")):
            not_run.append(f"{block['key']} ({block.get('reason')})")
            continue
        cut = "" if block["state"] == "measured" else f" ({block['state']})"
        parts.append(f"{heading}{cut}:\n\n" + TABLE_OF[block["table"]](record, block).rstrip())
    tables = "\n\n".join(parts) if parts else "(no block ran)"
    if not_run:
        tables += "\n\nNot run: " + "; ".join(not_run) + "."
    if not meta.get("complete"):
        tables += f"\n\n**Incomplete run** ({meta.get('stopped') or 'it stopped early'}): the rows above are those that finished."
    title = TITLE if c["device"] == "cuda" else "CPU trial of the GPU script (not GPU numbers)"
    return title, intro_of(record), tables, notes_of(record)


def intro_of(record: dict) -> str:
    c = record["meta"]["config"]
    return (
        f"{c['model']} ({c['param_bytes'] / 1e6:.0f} MB of float32 parameters) on {c['train_count']} synthetic "
        f"3×32×32 images (max P × batch × 2·steps: no shard repeats a batch), batch {c['batch']} per worker "
        f"rank, lr {LR}, plain SGD; every run {c['steps']} warm-up then {c['steps']} timed step(s), no evaluation "
        f"inside; on {c['device']} with {c['gpus']} GPU(s); P = {', '.join(map(str, c['ranks']))}"
        f"{' (--quick)' if c.get('quick') else ''}; {c['rounds']} round(s) per block, each running every cell once "
        "in rotating order (bench.stats.rotate) and one cell twice (its A/A twin). Cells: median [min–max] n over "
        "the rounds; ratios paired per round, their verdict read from the bootstrap interval of the median against "
        f"the block's A/A floor (bench.stats.verdict). `mpiexec --version`: {c['mpi_version']}"
        + (f"; GPU compute mode {c['compute_mode']}." if c.get("compute_mode") else ".")
    )


def notes_of(record: dict) -> str:
    meta, c = record["meta"], record["meta"]["config"]
    shared = [
        b["key"] for b in meta["blocks"] if b["table"] != "copies" and shares_gpu(b["workers"], c["device"], c["gpus"])
    ]
    notes = []
    if c["device"] != "cuda":
        notes.append(
            "A CPU trial of the GPU script: the copies are plain host-memory copies and every run trains on the "
            "CPU, so these are not GPU numbers; they never go into docs/benchmarks.md."
        )
    if shared:
        notes.append(
            f'Where ranks share one GPU ({", ".join(shared)}), "all GPUs compute in parallel" does not happen: '
            "there is one GPU, and the ranks' kernels take turns on it, so P ranks do the work of one GPU, not of "
            "P, and any speed-up the paper shows from GPUs computing side by side cannot appear here. The row "
            "'1 rank on the whole GPU' (same global batch P × batch, the same sync SGD arithmetic, nothing "
            "exchanged) is what the GPU gives without sharing; NCCL (one rank per GPU) cannot run, and DDP "
            "falls back to gloo, which stages CUDA tensors through the host."
        )
    notes.append(
        "Ours runs with --wait-probe none and --device-sync none (`scaledl train`'s setting: no stream "
        "synchronisation at phase boundaries, as DDP has none) where P ≥ 2 ranks share a GPU: each step's "
        "host-staged or CUDA-aware MPI exchange waits for the gradients, so its step marks still time the GPU; "
        "its per-phase split then holds launches only and is not shown. One rank alone (and a rank with a GPU "
        "of its own, on NCCL) keeps --device-sync phase: nothing there makes the host wait for its kernels, and "
        "unsynchronised step marks would time the launches; the phase syncs make that row slightly pessimistic "
        "(the next batch's host work does not overlap this step's kernels). DDP: bench_ddp.py's worker, "
        f"defaults (bucket_cap_mb 25) and tuned (gradient_as_bucket_view, static_graph, bucket_cap_mb "
        f"{c['bucket_mb']:g}); its s/step is its timed loop between two synchronise-and-barriers, the slowest rank."
    )
    notes.append(
        "The ladder's runs keep --device-sync phase (the split needs it). The PCIe columns are computed from "
        "each code path's copies, not measured; all ranks on one GPU share its link, so the node moves P times "
        "the column. The copies' device → device rate counts each byte once, though the copy reads and writes it."
    )
    wall = meta.get("wall_s") or 0.0
    budget = f" (budget {c['budget_s']:.0f} s)" if c.get("budget_s") else ""
    notes.append(f"Raw samples: {meta['raw']}; wall time of the measuring run {wall:.0f} s{budget}.")
    if c["rounds"] < 5:
        notes.append(f"Only {c['rounds']} round(s): not enough for a headline ratio (use ≥ 5).")
    return "\n\n".join(notes)


def section(record: dict) -> str:
    """The section's text, with the machine line and the launch line the record was measured with."""
    title, intro, tables, notes = render(record)
    launch = NodeLaunch.from_dict(record.get("launch") or record["machine"].get("launch"))
    return (
        f"## {title}\n\n{common.machine_line(record['machine'], launch)}\n\n{intro.strip()}\n\n{tables.strip()}\n\n"
        f"{notes.strip()}\n"
    )


def placeholder() -> str:
    return (
        f"## {TITLE}\n\nNot measured: no GPU machine has run this script yet, so this section has no numbers. "
        "On the lent GPU machine (one H200, 16 cores, Open MPI as root, results under $OUT), from the repository "
        "root, in one call of 540 s (measuring stops after 420 s; every finished run is kept in $OUT):\n\n"
        f"    {COMMAND}\n\nthen `python bench/bench_gpu.py --render FOLDER/gpu-raw.json` rewrites this section "
        "from the record.\n"
    )


def publish(record: dict, write: bool) -> str:
    body = section(record)
    print(body)
    if write:
        print(f"updated {common.update_section(NAME, body)} (section {NAME})")
    return body


# ------------------------------------------------------------------- main


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"preset for one 9-minute call: {QUICK} (explicit options win)"
    )
    parser.add_argument(
        "--ranks", help=f"worker counts P, comma-separated, in measuring order (default {DEFAULTS['ranks']})"
    )
    parser.add_argument(
        "--steps", type=int, help=f"warm-up steps, then as many timed ones (default {DEFAULTS['steps']})"
    )
    parser.add_argument("--batch", type=int, help=f"per-worker batch (default {DEFAULTS['batch']})")
    parser.add_argument(
        "--rounds", type=int, help=f"rounds per block, ≥ {MIN_GPU_ROUNDS} on a GPU (default {DEFAULTS['rounds']})"
    )
    parser.add_argument(
        "--budget-s", type=float, help="stop starting blocks that would not end within this many seconds"
    )
    parser.add_argument("--tables", default=",".join(TABLES), help="blocks to run, of %(default)s")
    parser.add_argument("--levels", default=",".join(bench_ladder.LEVELS), help="ladder levels (default %(default)s)")
    parser.add_argument("--backend-ranks", type=int, help="the rank count of the backend block (default: smallest P)")
    parser.add_argument("--model", default="cifar_alexnet", help="model of every run (default %(default)s)")
    parser.add_argument(
        "--bucket-mb", type=float, default=25.0, help="bucket_cap_mb of DDP tuned (default %(default)s)"
    )
    parser.add_argument("--copy-mib", type=int, default=256, help="size of each copy (default %(default)s MiB)")
    parser.add_argument("--copy-repeats", type=int, default=10, help="copies per sample (default %(default)s)")
    parser.add_argument("--bind", choices=("none", "cores"), default="none", help="rank binding (default %(default)s)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None,
        help="folder of the record, the results, the log and the section (default $OUT)",
    )
    parser.add_argument(
        "--plan", action="store_true", help="list the blocks, runs, guessed times and sizes; run nothing"
    )
    parser.add_argument(
        "--render", type=Path, metavar="RAW", help="rewrite the section from a saved gpu-raw.json and exit"
    )
    parser.add_argument("--placeholder", action="store_true", help="write the 'not measured' section and exit")
    common.common_arguments(parser)
    return parser.parse_args(argv)


def settle(args) -> list[int]:
    """Apply the preset, check every option (one line and exit 2 on bad input); returns the worker counts."""
    preset = QUICK if args.quick else DEFAULTS
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    def bad(message: str):
        print(f"bench_gpu: {message}", file=sys.stderr)
        raise SystemExit(2)

    try:
        workers = [int(p) for p in str(args.ranks).split(",")]
    except ValueError:
        bad(f"--ranks takes comma-separated worker counts, not {args.ranks!r}")
    args.tables = [t for t in args.tables.split(",") if t]
    args.levels = [lv for lv in args.levels.split(",") if lv]
    from scaledl.models import MODELS

    checks = [
        (min(workers) >= 1 and len(set(workers)) == len(workers), "--ranks: distinct worker counts ≥ 1"),
        (args.steps >= 1 and args.batch >= 1, "--steps and --batch must be ≥ 1"),
        (args.rounds >= 1, "--rounds must be ≥ 1"),
        (
            args.device != "cuda" or args.rounds >= MIN_GPU_ROUNDS,
            f"--rounds must be ≥ {MIN_GPU_ROUNDS} on a GPU (the A/A floor needs them)",
        ),
        (args.budget_s is None or args.budget_s > 0, "--budget-s must be > 0"),
        (bool(args.tables) and set(args.tables) <= set(TABLES), f"--tables: some of {','.join(TABLES)}"),
        (
            bool(args.levels) and set(args.levels) <= set(bench_ladder.LEVELS),
            f"--levels: some of {','.join(bench_ladder.LEVELS)}",
        ),
        (args.model in MODELS, f"--model: one of {', '.join(MODELS)}"),
        (args.copy_mib >= 1 and args.copy_repeats >= 1, "--copy-mib and --copy-repeats must be ≥ 1"),
        (args.bucket_mb > 0, "--bucket-mb must be > 0"),
        (args.backend_ranks is None or args.backend_ranks >= 1, "--backend-ranks must be ≥ 1"),
    ]
    for ok, message in checks:
        if not ok:
            bad(message)
    args.backend_ranks = args.backend_ranks or min(workers)
    return workers


def out_dir_of(args) -> Path:
    """--out-dir, refused (one line) where it is missing or a CPU trial would write into bench/raw."""
    if args.out_dir is None:
        raise SystemExit("bench_gpu: pass --out-dir DIR (or set $OUT): the record and the results go there")
    out = args.out_dir.resolve()
    if args.device != "cuda" and out.is_relative_to(common.RAW_DIR.resolve()):
        raise SystemExit("bench_gpu: a CPU trial never writes into bench/raw; pass another --out-dir")
    try:
        common.check_raw_destination(out / OUTPUTS["raw"])
    except common.RawError as error:
        raise SystemExit(f"bench_gpu: {error}") from None
    return out


def print_plan(blocks: list[Block], args, launch: NodeLaunch, version: str) -> None:
    budget = Budget(args.budget_s, args.device)
    total = 0.0
    print(f"launch ({version or 'mpiexec not found'}):")
    for ranks in sorted({c.ranks for b in blocks for c in b.cells if c.ranks}):
        line = f"  {ranks} ranks: mpiexec {' '.join(launch.mpiexec_args(ranks))} -n {ranks} python -m mpi4py ..."
        if launch.flavor != "openmpi":  # what the lent machine's Open MPI will get
            line += f"   (Open MPI: {' '.join(launch_flags('openmpi', ranks, launch.cores, launch.bind_mode))})"
        print(line)
    print(f"blocks ({args.rounds} rounds each; times guessed before anything is measured):")
    for b in blocks:
        seconds = budget.block_s(b, args.rounds)
        total += seconds
        ranks = ", ".join(f"{c.name.split(': ', 1)[-1]} ({c.ranks or 'in-process'})" for c in b.cells)
        what = "samples" if b.table == "copies" else "runs"
        print(f"  {b.key}: {len(b.cells) * args.rounds} {what}, ~{seconds:.0f} s: {ranks}")
        for note in b.notes:
            print(f"    {note}")
    limit = f"; budget {args.budget_s:.0f} s: blocks that would overrun it are skipped" if args.budget_s else ""
    print(f"total guessed ~{total:.0f} s{limit}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.placeholder:
        body = placeholder()
        print(body)
        if not args.no_doc:
            print(f"updated {common.update_section(NAME, body)} (section {NAME})")
        return 0
    if args.render:
        found = common.read_record(args.render, NAME, section)
        if found is None:
            return 2
        record = found[0]
        if record["meta"]["config"]["device"] != "cuda":
            raise SystemExit("bench_gpu: this record is a CPU trial; the gpu section takes GPU numbers only")
        publish(record, write=not args.no_doc)
        return 0
    if args.device == "cuda" and not args.plan and not gpus("cuda"):
        raise SystemExit("bench_gpu: no CUDA device visible; run it on a GPU node, or pass --device cpu to try it")
    workers = settle(args)
    for line in plan_lines(workers, args.batch, args.steps, args.backend_ranks):
        print(line, flush=True)
    n = check_sizes(workers, args.batch, args.steps, args.backend_ranks)
    gpu_count = max(gpus(args.device), 1) if args.device == "cuda" and args.plan else gpus(args.device)
    blocks = plan_blocks(args.tables, workers, args, gpu_count)
    max_ranks = max((c.ranks for b in blocks for c in b.cells), default=1)
    flavor, version = detect_flavor()
    launch = NodeLaunch.for_node(flavor, max_ranks, args.bind)
    if args.plan:
        print_plan(blocks, args, launch, version)
        return 0
    return measure_and_record(args, workers, blocks, launch, version, n, gpu_count)


def measure_and_record(args, workers, blocks, launch, version, n, gpu_count) -> int:
    """Measure every block the budget admits and write the record, the results and the section; SIGTERM
    (`timeout`) ends it like Ctrl-C, keeping the record. The caller's handler and launch come back after."""
    out = out_dir_of(args)
    handler, previous = signal.signal(signal.SIGTERM, signal.default_int_handler), common.LAUNCH
    try:
        return session(args, workers, blocks, launch, version, n, gpu_count, out)
    finally:
        signal.signal(signal.SIGTERM, handler)
        common.use_launch(previous)


def session(args, workers, blocks, launch, version, n, gpu_count, out: Path) -> int:
    budget = Budget(args.budget_s, args.device)
    trouble = None
    mpi_blocks = [b for b in blocks if b.table != "copies"]
    missing = missing_modules()
    if missing and mpi_blocks:
        trouble = f"this Python lacks {', '.join(missing)}, which `scaledl train` imports"
    elif mpi_blocks:
        launch, trouble = preflight(launch, max(c.ranks for b in mpi_blocks for c in b.cells), args.device)
    common.use_launch(launch)
    config = {
        "ranks": workers,
        "steps": args.steps,
        "batch": args.batch,
        "rounds": args.rounds,
        "backend_ranks": args.backend_ranks,
        "device": args.device,
        "gpus": gpu_count,
        "model": args.model,
        "quick": args.quick,
        "budget_s": args.budget_s,
        "train_count": n,
        "param_bytes": param_bytes(args.model),
        "bucket_mb": args.bucket_mb,
        "copy_mib": args.copy_mib,
        "tables": args.tables,
        "levels": args.levels,
        "mpi_flavor": launch.flavor,
        "mpi_version": version,
        "compute_mode": compute_mode() if args.device == "cuda" else None,
        "launch_flags": {
            str(r): launch.mpiexec_args(r) for r in sorted({c.ranks for b in blocks for c in b.cells if c.ranks})
        },
        "trouble": trouble,
    }
    record = Record(out, config, common.machine_fingerprint())  # what can be known even where an import fails
    record.say(f"bench_gpu: record, results and log go to {out} after every run")
    if trouble:
        record.say(f"bench_gpu: {trouble}; the MPI blocks are skipped")
        for b in mpi_blocks:
            b.skip = trouble
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        ctx = Context(args, Path(tmp), budget)
        try:
            if not trouble and mpi_blocks:
                ctx.data = common.prepare_synthetic32(Path(tmp), train_count=n)
            measure(blocks, ctx, record)
            record.complete = record.stopped is None
        except KeyboardInterrupt:
            record.stopped = "interrupted by SIGTERM or Ctrl-C"
            for entry in record.blocks:
                if entry["state"] == "running":
                    entry["state"] = f"interrupted after {entry.get('rounds_done', 0)} of {args.rounds} rounds"
            started = {entry["key"] for entry in record.blocks}
            for b in blocks:
                if b.key not in started:
                    record.start(b, "not reached", reason="the run was interrupted first")
        ctx.buffers.clear()
    record.save()
    finish(record, args)
    if trouble:
        raise SystemExit(f"bench_gpu: {trouble}")
    if record.stopped and record.stopped.startswith("interrupted"):
        raise SystemExit(f"bench_gpu: interrupted; every finished run is in {record.paths['raw']}")
    return 0


def finish(record: Record, args) -> None:
    """The section from the record as written: into --out-dir always, into the doc only from a GPU run."""
    if not record.samples:
        record.say("bench_gpu: nothing was measured; no section")
        return
    try:
        saved = common.read_raw(record.paths["raw"])
        body = publish(saved, write=args.device == "cuda" and not args.no_doc)
    except Exception as exc:  # noqa: BLE001 - the record is safe on disk; --render can retry elsewhere
        record.say(
            f"bench_gpu: the section could not be rendered here ({type(exc).__name__}: {exc}); the record is kept"
        )
        return
    from scaledl.atomic import write_text

    write_text(record.paths["section"], body)


if __name__ == "__main__":
    raise SystemExit(main())
