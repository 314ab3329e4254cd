"""GPU first light: what one GPU gives, in one short call, one JSON line per measurement.

On the lent GPU machine (its own python3 and torch; nothing is installed there), from the repository root:

    timeout -k 10 360 env PYTHONUNBUFFERED=1 python3 bench/gpu_first_light.py --out "$OUT/gpu-first-light.jsonl"

No stage runs past BUDGET_S (330 s), each has its own timeout, and each line is appended and flushed as it
is measured. Back here, at the commit the call ran at, `python bench/gpu_first_light.py --render FILE.jsonl
--commit "$(git rev-parse --short HEAD)"` rewrites the `gpu` section of docs/benchmarks.md from the file's last
run (--no-doc: print it only). `--device cpu --quick`: the same stages and lines on a CPU, at small sizes.
A line is {"run", "stage", "name", ...}; a stage that cannot run writes a "skipped" line saying why, one that
fails an "error" or "timeout" line, and each ends with "stage_end". Times are medians over rounds of a mean over
repeated calls (CUDA events on a GPU). The stages are the functions named in STAGES; validation is skipped.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

REPO = Path(__file__).resolve().parents[1]
# scaledl need not be installed: the GPU machine runs a copy of the repository; the MPI children import it too
sys.path.insert(0, str(REPO / "src"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
from scaledl.algorithms.rules import elastic_center_, sgd_  # noqa: E402
from scaledl.comm.flat import FlatParams  # noqa: E402
from scaledl.comm.timing import warmup_steps  # noqa: E402
from scaledl.grid.launch import mpi_flavor, mpiexec, run  # noqa: E402
from scaledl.models import build_model  # noqa: E402
from scaledl.sim.roofline import Device, OpCounter  # noqa: E402

BUDGET_S = 330  # no stage runs past this: the call ends within 6 minutes
STAGES = ("probe", "copies", "steps", "easgd1", "allreduce", "overhead", "validation")
TIMEOUT_S = dict(probe=60, copies=60, steps=150, easgd1=40, allreduce=120, overhead=150, validation=0)
SKIP = {"validation": "bench/validate_16core.sh takes 6-8 minutes on 16 cores, beyond this call: run it alone"}
MODELS = [("lenet", 28, 64), ("cifar_alexnet", 32, 128), ("resnet18", 32, 128), ("alexnet", 224, 128)]
MODELS += [("resnet50", 224, 32)]  # (name, image side, batch); the side sets the input shape and classes:
SHAPES = {28: ((1, 28, 28), 10), 32: ((3, 32, 32), 10), 64: ((3, 64, 64), 1000), 224: ((3, 224, 224), 1000)}
QUICK_MODELS = [(name, {"lenet": 28, "alexnet": 64}.get(name, 32), 2) for name, _, _ in MODELS]  # small sizes
FULL = dict(sizes=[1_700_000, 143_000_000, 1 << 30], warmup=10, steps=30, rounds=3, models=MODELS)
FULL.update(overhead=(64, 60, 2))  # overhead: batch, steps, rounds
QUICK = dict(sizes=[1_700_000, 17_000_000], warmup=0, steps=1, rounds=1, models=QUICK_MODELS, overhead=(8, 8, 1))
SMI = "name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu"
# Open MPI refuses root without these (MPICH ignores them), and its single-copy transport needs ptrace
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
NO_SINGLE_COPY = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none", "OMPI_MCA_smsc": "^cma"}
emit = lambda **fields: print("GFL " + json.dumps(fields), flush=True)  # noqa: E731 - a child's line, for its parent


def log_line(path: Path, run_id: str, stage: str, name: str, **fields) -> None:
    line = json.dumps({"run": run_id, "stage": stage, "name": name, **fields}, default=str)
    with open(path, "a") as f:
        f.write(line + "\n")
    print(line, flush=True)


def command(*argv: str) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def mpi_job(ranks: int, child: str, spec: dict, timeout: float, argv: list[str] | None = None):
    """This file as `child` (or ARGV) under `mpiexec -n RANKS python -m mpi4py` (scaledl.grid.launch), again without
    Open MPI's single-copy transport (it needs ptrace) if that fails: the process, its environment, its lines."""
    argv, deadline = argv or [__file__, "--child", child, "--spec", json.dumps(spec)], time.monotonic() + timeout
    for env in (MPI_ENV, {**MPI_ENV, **NO_SINGLE_COPY}):
        proc = run(ranks, argv, timeout=max(deadline - time.monotonic(), 1), env=env)
        if proc.returncode == 0:
            break
    proc.tail = f"exit {proc.returncode}: " + " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-4:])
    return proc, env, [json.loads(x[4:]) for x in proc.stdout.splitlines() if x.startswith("GFL ")]


def seconds(device, fn, reps: int) -> float:
    """Seconds per call over `reps` calls: CUDA events around them on a GPU (the queued work), else the clock."""
    cuda = device.type == "cuda"
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2)) if cuda else (None, None)
    t0 = (torch.cuda.synchronize(), start.record()) if cuda else time.perf_counter()
    for _ in range(reps):
        fn()
    if not cuda:
        return (time.perf_counter() - t0) / max(reps, 1)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / max(reps, 1)


def summary(samples: list[float]) -> dict:
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples), "n": len(samples)}


def timed(a, fn, reps: int) -> dict:
    """One untimed call, then a.rounds samples of the mean over `reps` calls (at most 50)."""
    fn()
    return {"reps": min(reps, 50), **summary([seconds(a.device, fn, min(reps, 50)) for _ in range(a.rounds)])}


def tf32(on: bool) -> None:
    # fp32_precision alone (torch ≥ 2.9): torch refuses to read its legacy allow_tf32 flags once this is set
    torch.backends.cuda.matmul.fp32_precision = torch.backends.cudnn.conv.fp32_precision = "tf32" if on else "ieee"


def probe(log, a, limit: float) -> None:
    """Versions, GPU, clocks, TF32, commit; mpiexec, MPI's library and MPIX_Query_cuda_support (a 1-rank child)."""
    cuda, git = a.device.type == "cuda", ("git", "-C", str(REPO))
    smi = command("nvidia-smi", "--format=csv,noheader", "--query-gpu=" + SMI) if cuda else None
    found = dict(python=sys.version.split()[0], executable=sys.executable, cores=os.cpu_count(), load=os.getloadavg())
    found.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version() if cuda else None)
    found.update(tf32=[torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision])
    found.update(gpu=torch.cuda.get_device_name() if cuda else None, cudnn_benchmark=torch.backends.cudnn.benchmark)
    found.update(nvidia_smi=dict(zip(SMI.split(","), smi.split(", "))) if smi else None, mpiexec_version=a.mpiexec)
    found.update(mpiexec=shutil.which(mpiexec()), mpi_flavor=mpi_flavor(a.mpiexec or ""))
    found.update(mpich_gpu_env=os.getenv("MPIR_CVAR_ENABLE_GPU"))  # MPICH's switch for device buffers
    found.update(commit=command(*git, "rev-parse", "--short", "HEAD"), dirty=command(*git, "status", "--short", "-uno"))
    wanted = ("torch", "torchvision", "numpy", "mpi4py", "h5py", "scipy", "pandas", "mpich", "openmpi")
    found["packages"] = {d.name: d.version for d in importlib.metadata.distributions() if d.name in wanted}
    log("probe", torch=torch.__version__, **found)
    if a.mpiexec is None:
        return log("mpi", ok=False, reason="no mpiexec beside this python or on PATH")
    proc, env, lines = mpi_job(1, "mpi-worker", {"probe": True}, timeout=limit - 5)
    log("mpi", ok=bool(lines), env=env, **(lines[0] if lines else {"reason": proc.tail}))
    a.mpiexec = a.mpiexec if lines else None  # stages 4 and 5 run only where MPI works


def copies(log, a, limit: float) -> None:
    """Pinned and pageable host→device and device→host, and device→device (whose rate the fit uses)."""
    cuda = a.device.type == "cuda"
    for size in a.sizes:
        dev, dev2 = (torch.empty(size, dtype=torch.uint8, device=a.device) for _ in range(2))
        pinned, pageable = (torch.zeros(size, dtype=torch.uint8, pin_memory=p) for p in (cuda, False))  # pages touched
        pairs = {"h2d pinned": (dev, pinned), "h2d pageable": (dev, pageable), "d2h pinned": (pinned, dev)}
        for kind, (to, source) in {**pairs, "d2h pageable": (pageable, dev), "d2d": (dev2, dev)}.items():
            s = timed(a, functools.partial(to.copy_, source, non_blocking=True), (1 << 30) // size)
            log("copy", kind=kind, bytes=size, gb_per_s=size / s["median_s"] / 1e9, **s)
            a.memory_bw = 2 * size / s["median_s"] if kind == "d2d" else a.memory_bw  # bytes read and written


class Ops(TorchDispatchMode):
    """Each operation's FLOPs and bytes (.ops), as scaledl.sim.roofline.OpCounter counts them."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out, p = func(*args, **(kwargs or {})), func._overloadpacket
        if not func.is_view:
            tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            flops = flop_registry[p](*args, **(kwargs or {}), out_val=out) if p in flop_registry else 0
            vars(self).setdefault("ops", []).append((flops, sum(t.nbytes for t in tensors)))
        return out


def training_step(name: str, side: int, batch: int, device):
    """One forward, backward and update (scaledl's flat weights, rules.sgd_) on a fixed random batch."""
    torch.manual_seed(0)
    shape, classes = SHAPES[side]
    flat = FlatParams(model := build_model(name, shape, classes).to(device))
    x, y = torch.randn(batch, *shape, device=device), torch.randint(0, classes, (batch,), device=device)

    def step() -> None:
        flat.zero_grad()
        F.cross_entropy(model(x), y).backward()
        sgd_(flat.data, flat.grad, 1e-3)

    return step, flat.numel


def steps(log, a, limit: float) -> None:
    """Each model's step, TF32 off and on; per setting the roofline (scaledl.sim.roofline) fitted to them, efficiency
    of a.peak_flops and op overhead at the device→device rate, each step as its OpCounter prices it at the fit."""
    measured, ops, runs = {False: {}, True: {}}, {}, {}
    for name, side, batch in a.models:
        step, weights = runs[name] = training_step(name, side, batch, a.device)
        for r in range(a.rounds):
            for on in (False, True) if r % 2 == 0 else (True, False):  # alternate which setting goes first
                tf32(on)
                seconds(a.device, step, a.warmup)
                measured[on].setdefault(name, []).append(seconds(a.device, step, a.steps))
        with Ops() as counted:
            step()
        ops[name] = np.array(counted.ops, dtype=float).T
        for on in (False, True):
            log("step", model=name, side=side, batch=batch, tf32=on, weights=weights, **summary(measured[on][name]))
    grid, bw, peak = np.geomspace(1e-3, 30, 600), a.memory_bw, a.peak_flops  # efficiency: TF32 may pass 1
    for on in (False, True):
        m = np.array([[statistics.median(times)] for times in measured[on].values()])
        count = np.array([[ops[n].shape[1]] for n in measured[on]])
        # per model and efficiency e: Σ max(FLOPs / (peak·e), bytes / bandwidth), plus operations × overhead
        roof = np.array([np.maximum(f[:, None] / (peak * grid), b[:, None] / bw).sum(0) for f, b in ops.values()])
        w = 1 / m**2  # least squares of the relative residuals; the best overhead for each e in closed form
        o = np.clip((count * (m - roof) * w).sum(0) / (count**2 * w).sum(0), 0, None)
        i = int((((count * o + roof - m) / m) ** 2).sum(0).argmin())
        log("fit", tf32=on, peak_flops=peak, memory_bw=bw, efficiency=grid[i], op_overhead_s=o[i])
        for n, mi in zip(measured[on], m[:, 0]):
            tf32(on)
            with OpCounter(Device("fit", peak, float(grid[i]), bw, float(o[i]), False)) as counter:
                runs[n][0]()
            log("residual", tf32=on, model=n, measured_s=mi, simulated_s=counter.seconds, ratio=counter.seconds / mi)


def easgd1(log, a, limit: float) -> None:
    """What Sync EASGD1 adds per round at |W|: W^i device→host, W host→device, the center's step on the host."""
    pin = a.device.type == "cuda"  # page-locked, as scaledl.algorithms.averaging.host_buffer makes EASGD1's buffers
    for name, side in (("lenet", 28),) if a.quick else (("cifar_alexnet", 32), ("alexnet", 224)):
        with torch.device("meta"):
            n = sum(p.numel() for p in build_model(name, *SHAPES[side]).parameters())
        w, center, total = (torch.rand(n, device=a.device) for _ in range(3))
        w_host, center_host, total_host = (torch.rand(n, pin_memory=pin) for _ in range(3))
        parts = {"d2h W^i": (w_host.copy_, w), "h2d W": (center.copy_, center_host)}  # blocking, as averaging's
        parts["center step on host"] = (elastic_center_, center_host, total_host, 1, 0.01, 0.1)
        parts["center step on device"] = (elastic_center_, center, total, 1, 0.01, 0.1)
        med = {part: timed(a, functools.partial(*call), 5) for part, call in parts.items()}
        for part, s in med.items():
            log("easgd1", model=name, part=part, weights=n, **s)
        extra = sum(s["median_s"] for s in list(med.values())[:3]) - med["center step on device"]["median_s"]
        log("easgd1", model=name, part="extra per round: both copies + host step − device step", median_s=extra)


def allreduce(log, a, limit: float) -> None:
    """2 ranks, one GPU: Allreduce host-staged, CUDA-aware (if MPI says so) and ours (Collectives.allreduce_sum)."""
    spec = {"device": a.device.type, "bytes": a.sizes[1], "rounds": max(a.rounds, 3)}
    proc, env, lines = mpi_job(2, "mpi-worker", spec, timeout=limit - 5)
    for line in lines:
        log(line.pop("name"), env=env, **line)
    if proc.returncode or not lines:
        log("error", error=proc.tail, env=env)


def mpi_worker(spec: dict) -> None:
    """A rank: each cell once a round (one random order for both), a sample the slower rank's mean of 3 calls."""
    from mpi4py import MPI

    from scaledl.comm.collectives import Collectives, mpi_is_cuda_aware
    from scaledl.comm.timing import PhaseTimer

    if spec.get("probe"):
        return emit(library=MPI.Get_library_version().strip(), mpix_query_cuda_support=mpi_is_cuda_aware())
    comm, device = MPI.COMM_WORLD, torch.device(spec["device"])
    cuda, n = device.type == "cuda", spec["bytes"] // 4
    src, dst = torch.ones(n, device=device), torch.empty(n, device=device)
    host_src, host_dst = (torch.empty(n, pin_memory=cuda) for _ in range(2))
    host = lambda: comm.Allreduce(host_src.copy_(src).numpy(), host_dst.numpy(), op=MPI.SUM)  # noqa: E731
    cells, aware = {"host-staged Allreduce": lambda: (host(), dst.copy_(host_dst))}, cuda and mpi_is_cuda_aware()
    if aware:
        cells["CUDA-aware Allreduce"] = lambda: comm.Allreduce(src, dst, op=MPI.SUM)
    for backend in ("mpi", "cuda_aware_mpi") if aware else ("mpi",):
        ours = Collectives(comm, src, PhaseTimer(device), backend=backend)
        cells[f"ours, backend {backend}"] = lambda ours=ours: ours.allreduce_sum(src, dst)
    samples, orders, rng = {c: [] for c in cells}, [], random.Random(0)
    for _ in range(spec["rounds"]):
        orders.append(rng.sample(list(cells), len(cells)))
        for cell in orders[-1]:
            cells[cell]()
            torch.cuda.synchronize() if cuda else None
            comm.Barrier()
            samples[cell].append(comm.allreduce(seconds(device, cells[cell], 3), op=MPI.MAX))
    for cell, s in samples.items() if comm.Get_rank() == 0 else ():
        emit(name="allreduce", cell=cell, bytes=spec["bytes"], orders=orders, **summary(s))
    if comm.Get_rank() == 0 and not aware:
        why = "the MPI library reports no CUDA support (MPIX_Query_cuda_support)" if cuda else "not on a GPU"
        emit(name="skipped", cell="CUDA-aware Allreduce and ours on it", reason=why)


def overhead(log, a, limit: float) -> None:
    """`scaledl train` (sync_sgd, --device-sync phase, none) against plain_loop, each an `mpiexec -n 1` child."""
    from scaledl.data.converters import CONVERTERS
    from scaledl.data.converters.options import PrepareOptions
    from scaledl.run_record import read_run_json

    (batch, total, rounds), deadline = a.overhead, time.monotonic() + limit - 5
    with tempfile.TemporaryDirectory() as tmp:
        opts = PrepareOptions(train_count=batch * 8, test_count=64, shape=(3, 32, 32), classes=10)
        CONVERTERS["synthetic"].convert(None, data := Path(tmp) / "synthetic32.h5", opts)
        spec = dict(data=str(data), model="lenet", batch=batch, device=a.device.type, steps=total)
        cmd = ["-m", "scaledl", "train", "--algorithm", "sync_sgd", "--model", "lenet", "--data", str(data)]
        cmd += ["--lr", "0.01", "--batch-size", str(batch), "--device", a.device.type, "--max-steps", str(total)]
        cmd += ["--eval-every", str(10**6), "--device-sync"]  # evaluations: at step 0 and the end only
        cells = {"plain PyTorch": None} | {f"ours, --device-sync {s}": [*cmd, s] for s in ("none", "phase")[a.quick :]}
        for r in range(rounds):
            for i, cell in enumerate(random.Random(r).sample(list(cells), len(cells))):
                argv = cells[cell] and [*cells[cell], "--out-dir", str(Path(tmp) / f"run{r}-{i}")]
                proc, env, lines = mpi_job(1, "plain-loop", spec, deadline - time.monotonic(), argv)
                if proc.returncode:
                    log("error", cell=cell, error=proc.tail, env=env)
                else:  # ours: its steady state from run.json (docs/time.md)
                    found = lines[0] if lines else read_run_json(argv[-1])["time"]
                    log("overhead", cell=cell, round=r, model="lenet", batch=batch, steps=total, **found)


def plain_loop(spec: dict) -> None:
    """`scaledl train`'s data, batches, model and seed, torch.optim.SGD; timed after the warm-up ours leaves out."""
    from scaledl.data.hdf5 import read_info
    from scaledl.data.loader import Normalizer, ShardLoader

    device, info, warmup = torch.device(spec["device"]), read_info(spec["data"]), warmup_steps(spec["steps"])
    torch.manual_seed(0)
    model = build_model(spec["model"], info.image_shape, info.classes).to(device)
    opt, cuda = torch.optim.SGD(model.parameters(), lr=0.01), device.type == "cuda"
    loader = ShardLoader(spec["data"], shard=0, num_shards=1, batch_size=spec["batch"], seed=0, pin_memory=cuda)
    normalize, sync = Normalizer(info.mean, info.std, device), torch.cuda.synchronize if cuda else lambda: None
    for i in range(spec["steps"]):
        if i == warmup:
            sync()
            t0 = time.perf_counter()
        x, y = normalize(*loader.next_batch())
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    sync()
    emit(warmup_steps=warmup, seconds_per_step=(time.perf_counter() - t0) / (spec["steps"] - warmup))


def render(path: Path, commit: str | None, write: bool) -> int:
    """The file's last run as markdown, a table per kind of line (a text: its first line), into docs/benchmarks.md."""
    fmt = lambda v: (f"{v:.4g}" if isinstance(v, float) else v if isinstance(v, str) else json.dumps(v)).split("\n")[0]  # noqa: E731
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    lines = [x for x in lines if x["run"] == lines[-1]["run"] and x["name"] != "stage_end"]
    hidden = ("run", "name", "env", "min_s", "max_s", "orders")  # in the JSON lines, not on the page
    commit = commit or next((x["commit"] for x in lines if x["name"] == "probe"), None)
    body = [f"## GPU first light\n\nbench/gpu_first_light.py, run {lines[0]['run']} UTC; commit {commit}."]
    for name in dict.fromkeys(x["name"] for x in lines):
        rows = [x for x in lines if x["name"] == name]
        keys = list(dict.fromkeys(k for x in rows for k in x if k not in hidden))
        rows = [f"| {' | '.join(fmt(x.get(k, '')) for k in keys)} |" for x in rows]
        body.append(f"**{name}**\n\n| {' | '.join(keys)} |\n|{'---|' * len(keys)}\n" + "\n".join(rows))
    print(text := "\n\n".join(body) + "\n")
    if write:
        sys.path.insert(0, str(REPO))
        from bench.common import update_section

        print(f"updated {update_section('gpu', text)} (section gpu)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="default: %(default)s")
    parser.add_argument("--quick", action="store_true", help="small sizes, one round: a trial on a CPU")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "gpu-first-light.jsonl")
    parser.add_argument("--render", type=Path, metavar="JSONL", help="write the gpu section of docs/benchmarks.md")
    parser.add_argument("--commit", help="with --render: the commit the run was made at")
    parser.add_argument("--no-doc", action="store_true", help="with --render: print the section only")
    parser.add_argument("--child", choices=("mpi-worker", "plain-loop"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", type=json.loads, default={}, help=argparse.SUPPRESS)
    a = parser.parse_args(argv)
    if a.render:
        return render(a.render, a.commit, not a.no_doc)
    if a.child:
        return (mpi_worker if a.child == "mpi-worker" else plain_loop)(a.spec) or 0
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_first_light: no CUDA device visible; pass --device cpu to try it here")
    a.device, cuda = torch.device(a.device), a.device == "cuda"
    if not cuda:
        torch.set_num_threads(1)  # a CPU trial leaves the other cores alone
    vars(a).update(QUICK if a.quick else FULL, peak_flops=67e12 if cuda else 1e11)  # an H200's fp32
    a.memory_bw, run_id = 4.8e12 if cuda else 2e10, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())  # until copies
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.mpiexec = command(mpiexec(), "--version")
    # a stage's limit interrupts it as Ctrl-C does (which therefore ends only the stage it interrupts)
    start, _ = time.monotonic(), signal.signal(signal.SIGALRM, signal.default_int_handler)
    for stage in STAGES:
        log, t0 = functools.partial(log_line, a.out, run_id, stage), time.monotonic()
        limit = min(TIMEOUT_S[stage], BUDGET_S - (t0 - start))
        if limit < 10 or stage in SKIP or (stage in ("allreduce", "overhead") and not a.mpiexec):
            log("skipped", reason=SKIP.get(stage) or (limit < 10 and "budget spent") or "MPI does not work here")
            continue
        signal.setitimer(signal.ITIMER_REAL, limit)  # stops an in-process stage; children end 5 s sooner, killed
        try:
            globals()[stage](log, a, limit)
        except KeyboardInterrupt:
            log("timeout", limit_s=limit, wall_s=time.monotonic() - t0)
        except Exception as error:  # one stage's failure must not cost the others theirs
            log("error", error=f"{type(error).__name__}: {error}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        log("stage_end", wall_s=time.monotonic() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
