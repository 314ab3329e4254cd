"""What the benchmark scripts share: the machine description, MPI launches, training runs, docs/benchmarks.md.

Each bench script measures its variants side by side in one run and
replaces its own section of docs/benchmarks.md, the text between
`<!-- bench:NAME -->` and `<!-- /bench:NAME -->` (appended if absent), so
benches written by others (the Sync EASGD ladder's `ladder`) keep theirs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

# Every bench process and every rank it launches allocates as `python -m scaledl` does: torch puts large
# buffers on transparent huge pages only when this is set before torch is imported (the benches import
# this module first). In-process loops (bench_overhead's plain loop) and peers (DDP) get the same.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
TEXT = REPO / "docs" / "benchmarks-text.md"  # the page's static prose, kept as text rather than in code


def text(name: str, **fields) -> str:
    """The block `name` of docs/benchmarks-text.md (between `<!-- text:NAME -->` and `<!-- /text:NAME -->`),
    its $fields filled in (string.Template), its lines joined into paragraphs as the page prints them."""
    import string

    found = re.search(
        rf"<!-- text:{re.escape(name)} -->\n(.*?)\n<!-- /text:{re.escape(name)} -->", TEXT.read_text(), re.S
    )
    if not found:
        raise KeyError(f"{TEXT.name} has no block {name!r}")
    body = string.Template(found.group(1)).substitute(fields)
    return "\n\n".join(" ".join(part.split("\n")) for part in body.strip().split("\n\n"))


if str(REPO / "src") not in sys.path:  # a checkout without `pip install -e .`
    sys.path.insert(1, str(REPO / "src"))


# ------------------------------------------------------------------ machine


def cpu_model() -> str:
    from scaledl.net.measure import cpu_model as detected  # one reading of /proc/cpuinfo for netbench and the benches

    return detected() or "unknown CPU"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return None


def mpi_library() -> str:
    """The MPI library's version line, without initialising MPI in this process."""
    import mpi4py

    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI

    return " ".join(MPI.Get_library_version().strip().splitlines()[0].split())


def machine() -> dict:
    import numpy
    import torch

    mem = memory_gib()
    return {
        "cpu": cpu_model(), "cores": usable_cores(), "memory": f"{mem:.0f} GiB" if mem else "?",
        "gpus": ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())) or "no GPU",
        "mpi": mpi_library(), "torch": torch.__version__, "numpy": numpy.__version__,
        "python": platform.python_version(), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load_before": os.getloadavg()[0], "git": git_state(), "launch": LAUNCH.as_dict(),
    }  # fmt: skip


def machine_line(m: dict, launch: Launch | None = None) -> str:
    """The machine, software, date, load and launch environment a section was measured with (one paragraph)."""
    end = m.get("load_after", os.getloadavg()[0])
    load = f"; 1-min load average {m['load_before']:.2f} at start, {end:.2f} at end"
    busy = " (other jobs were running: expect noise)" if max(m["load_before"], end) > 0.5 else ""
    commit = m.get("git") or {}
    dirty = " (with uncommitted changes)" if commit.get("dirty") else ""
    rev = f"; commit {commit['commit'][:10]}{dirty}" if commit.get("commit") else ""
    launch = launch or Launch.from_dict(m.get("launch")) or LAUNCH
    return (
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['gpus']}; {m['mpi']}; torch {m['torch']}, "
        f"numpy {m['numpy']}, Python {m['python']}; {m['date']}{load}{busy}{rev}. "
        f"Launch, the same for every variant: {launch.describe()}."
    )


# ---------------------------------------------------- launch environment


@dataclass(frozen=True)
class Launch:
    """The one launch environment of every variant in a bench table, ours and peers alike: threads per rank
    (OMP_NUM_THREADS; SLURM_CPUS_PER_TASK removed so `scaledl train` reads the same), THP_MEM_ALLOC_ENABLE,
    MPICH yielding (once per table, on when some cell has more ranks than cores: busy-polling ranks on shared
    cores starve each other), and one rank per core wherever the cell fits (else unbound, marked †)."""

    threads: int = 1
    thp: bool = True
    yield_poll: bool = False
    bind: bool = True

    @classmethod
    def for_table(cls, max_ranks: int, threads: int = 1) -> Launch:
        """The environment for a table whose largest cell runs `max_ranks` ranks."""
        return cls(threads=threads, yield_poll=max_ranks * threads > usable_cores())

    @classmethod
    def from_dict(cls, d: dict | None) -> Launch | None:
        return cls(**{k: d[k] for k in ("threads", "thp", "yield_poll", "bind") if k in d}) if d else None

    def bound(self, ranks: int) -> bool:
        return self.bind and ranks * self.threads <= usable_cores()

    def env(self, ranks: int) -> dict[str, str]:
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), PYTHONUNBUFFERED="1")
        env.pop("SLURM_CPUS_PER_TASK", None)
        env["THP_MEM_ALLOC_ENABLE"] = "1" if self.thp else "0"
        if self.yield_poll:
            env["MPIR_CVAR_ENABLE_HEAVY_YIELD"] = "1"
        else:
            env.pop("MPIR_CVAR_ENABLE_HEAVY_YIELD", None)
        return env

    def mpiexec_args(self, ranks: int) -> list[str]:
        if not self.bound(ranks):
            return []
        return ["-bind-to", "core" if self.threads == 1 else f"core:{self.threads}"]  # each rank its own cores

    def mark(self, ranks: int) -> str:
        """ "†" for a cell with more ranks than cores (time-slicing, unbound), else ""."""
        return "†" if oversubscribed(ranks * self.threads) else ""

    def describe(self) -> str:
        progress = (
            "MPICH yields while waiting (MPIR_CVAR_ENABLE_HEAVY_YIELD=1, because some cell has more ranks than cores)"
            if self.yield_poll
            else "MPICH busy-polls while waiting (its default)"
        )
        bind = (
            "ranks bound one per core (-bind-to core); † marks a cell with more ranks than cores, run unbound"
            if self.bind
            else "ranks not bound to cores"
        )
        return (
            f"{self.threads} thread(s) per rank (OMP_NUM_THREADS; SLURM_CPUS_PER_TASK unset), transparent huge "
            f"pages {'on' if self.thp else 'off'} (THP_MEM_ALLOC_ENABLE), {progress}, {bind}"
        )

    def as_dict(self) -> dict:
        return asdict(self)


LAUNCH = Launch()


def recorded_mark(record: dict, ranks: int) -> str:
    """`Launch.mark` for the machine a record was measured on (not the one rendering it): "†" for a cell with
    more ranks × threads than that machine's cores."""
    threads = (record.get("launch") or {}).get("threads", 1)
    return "†" if ranks * threads > record["machine"].get("cores", ranks) else ""


def use_launch(launch: Launch) -> Launch:
    """Make `launch` the environment of every `run_mpi` in this process (a bench calls it once, at its start)."""
    global LAUNCH
    LAUNCH = launch
    return launch


# --------------------------------------------------------------------- MPI


def mpiexec() -> str:
    beside = Path(sys.executable).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise SystemExit("bench: no mpiexec beside this Python or on PATH (pip install -e '.[mpich]')")
    return found


def oversubscribed(ranks: int) -> bool:
    return ranks > usable_cores()


def mpi_env(ranks: int, launch: Launch | None = None) -> dict[str, str]:
    env = (launch or LAUNCH).env(ranks)
    env["PATH"] = f"{Path(mpiexec()).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), str(REPO), env.get("PYTHONPATH")]))
    return env


def run_mpi(
    ranks: int, args: list[str], timeout: float = 300, check: bool = True, launch: Launch | None = None
) -> subprocess.CompletedProcess:
    """`mpiexec -n ranks python -m mpi4py ARGS` through the project's launch module (scaledl.grid.launch: a
    hung job is killed whole, its process group), in the bench's launch environment (`use_launch`); with
    `check`, exits with the tail of stderr if it fails."""
    from scaledl.grid import launch as jobs

    launch = launch or LAUNCH
    flags = launch.mpiexec_args(ranks)
    proc = jobs.run(ranks, args, timeout=timeout, cwd=REPO, env=mpi_env(ranks, launch), flags=flags)
    if check and proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise SystemExit(f"bench: {' '.join(proc.args[:3])} ... failed (exit {proc.returncode}):\n{tail}")
    return proc


# -------------------------------------------------------------------- data


def prepare_digits(folder: Path) -> Path:
    """The embedded digits dataset as an HDF5 file in `folder` (prepared once)."""
    from scaledl.data.converters import CONVERTERS
    from scaledl.data.converters.options import PrepareOptions

    out = Path(folder) / "digits.h5"
    if not out.exists():
        CONVERTERS["digits"].convert(None, out, PrepareOptions(image_size=28))
    return out


def prepare_synthetic32(folder: Path, train_count: int = 512) -> Path:
    """CIFAR-sized synthetic images (3×32×32, 10 classes, learnable structure) in `folder` (prepared once);
    `train_count` training images (sized by the caller from workers × batch × steps), 64 test images."""
    from scaledl.data.converters import CONVERTERS
    from scaledl.data.converters.options import PrepareOptions

    out = Path(folder) / ("synthetic32.h5" if train_count == 512 else f"synthetic32-{train_count}.h5")
    if not out.exists():
        CONVERTERS["synthetic"].convert(
            None, out, PrepareOptions(train_count=train_count, test_count=64, shape=(3, 32, 32), classes=10)
        )
    return out


DATASETS = {"digits": prepare_digits, "synthetic32": prepare_synthetic32}


def parse_cases(text: str, spec: str, make) -> list:
    """ "lenet:digits:64:10:30,..." → [make(*fields)] by `spec` ("MODEL:DATASET:BATCH:WARMUP:STEPS"; MODEL and
    DATASET names, the rest integers ≥ 1, STEPS a multiple of WARMUP, EVERY at most STEPS, no two cases with
    one label); ValueError with a one-line reason."""
    names, cases = spec.split(":"), []
    for item in filter(None, (part.strip() for part in text.split(","))):
        parts = item.split(":")
        if len(parts) != len(names):
            raise ValueError(f"case {item!r} is not {spec}")
        given = dict(zip(names, parts))
        if given.get("DATASET", "digits") not in DATASETS:
            raise ValueError(f"case {item!r}: unknown dataset; the dataset must be one of {', '.join(DATASETS)}")
        try:
            values = {k: v if k in ("MODEL", "DATASET") else int(v) for k, v in given.items()}
        except ValueError:
            raise ValueError(f"case {item!r}: {spec} takes integers after MODEL and DATASET") from None
        if min(v for v in values.values() if isinstance(v, int)) < 1 or values["STEPS"] % values["WARMUP"]:
            raise ValueError(f"case {item!r}: numbers >= 1 and STEPS a multiple of WARMUP")
        if values.get("EVERY", 0) > values["STEPS"]:
            raise ValueError(f"case {item!r}: EVERY at most STEPS")
        cases.append(make(*values.values()))
    if not cases:
        raise ValueError("no case given")
    labels = [c.label for c in cases]
    if len(set(labels)) != len(labels):
        raise ValueError(f"two cases with the same {next(x for x in labels if labels.count(x) > 1)}")
    return cases


# ---------------------------------------------------------------- training


def train_argv(data: Path, out: Path, algorithm: str, *, max_steps: int, eval_every: int, **options) -> list[str]:
    """The arguments of `python -m scaledl train`, the benches' one builder of them: model lenet, lr 0.05,
    seed 0 and the launch's threads unless `options` say otherwise; every other option by its name
    (batch_size=64 is --batch-size 64, target_accuracy=None leaves the option out)."""
    chosen = {"model": "lenet", "lr": 0.05, "seed": 0, "threads": LAUNCH.threads, **options}
    chosen.update(data=data, algorithm=algorithm, out_dir=out, max_steps=max_steps, eval_every=eval_every)
    flags = [(f"--{key.replace('_', '-')}", str(value)) for key, value in chosen.items() if value is not None]
    return ["-m", "scaledl", "train", *(part for flag in flags for part in flag)]


def read_run(out: Path) -> dict:
    """A run's run.json as the package reads it (scaledl.report.runs.read_run): the benches' one reader."""
    from scaledl.report.runs import read_run as read

    return read(out).record


# Records from before the benches kept each run's exchange were measured after the averaging engine's default
# became one Allreduce for fp32 (scaledl.algorithms.settings): their runs used it, not Bcast + Reduce.
UNRECORDED_EXCHANGE = "allreduce"


def run_exchange(run: dict) -> str | None:
    """The exchange a run used, as its run.json records it (the Sync EASGD family's round), else None."""
    return (run.get("codesign") or {}).get("exchange")


def priced_exchange(details) -> str:
    """The exchange to price a cell's model column with: the one its runs recorded (UNRECORDED_EXCHANGE where
    the record predates keeping it), so the α-β column describes the messages the runs sent."""
    return next((d["exchange"] for d in details if d.get("exchange")), UNRECORDED_EXCHANGE)


def train(ranks: int, data: Path, out_dir: Path, *, algorithm: str, warmup: int, steps: int, **options) -> dict:
    """Run `scaledl train` and return `steady_state` after `warmup` steps (`steps` a multiple of it); `options`
    go to `train_argv` (batch 64 by default). The center is evaluated only at step 0 and after the loop: an
    evaluation's helper thread shares the rank's core, and the peers compared with evaluate nothing."""
    if steps % warmup:
        raise ValueError("steps must be a multiple of warmup")
    options.setdefault("batch_size", 64)
    total = warmup + steps
    run_mpi(ranks, train_argv(data, out_dir, algorithm, max_steps=total, eval_every=total + 1, **options))
    return steady_state(out_dir, warmup)


def measured(args, launch: Launch, measure) -> tuple[dict, dict, float]:
    """The start of a measuring run: its clock, `launch` as the bench's environment (use_launch), the machine,
    then measure(folder) in a temporary folder under args.workdir: (its result, the machine, the start)."""
    import tempfile

    started = time.monotonic()
    use_launch(launch)
    m = machine()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        return measure(Path(tmp)), m, started


def record_tail(meta: dict, budget_s: float) -> str:
    """The end of a section's notes: where the raw samples are, how long the measuring took, and a warning
    when there were too few rounds for a headline ratio."""
    tail = (
        f" Raw samples: {meta['raw']}; wall time of the measuring run {meta['wall_s']:.0f} s (budget {budget_s:.0f} s)."
    )
    if meta["rounds"] < 5:
        tail += f" Only {meta['rounds']} round(s): not enough for a headline ratio (use ≥ 5)."
    return tail


def rotating_rounds(bench: str, cells: list[str], rounds: int, measure_one) -> dict:
    """Every cell once per round, in the order bench.stats.round_order gives; measure_one(cell, round,
    position) → (sample, details). {"samples", "details": {cell: [per round]}, "order": [[cell, ...] per
    round], "conditions": {cell: [the machine's state per round]}}; a line printed per run."""
    from bench import stats

    samples = {c: [] for c in cells}
    details = {c: [] for c in cells}
    order, log = [], {}
    for r in range(rounds):
        order.append(stats.round_order(cells, r, rounds))
        for i, c in enumerate(order[-1]):
            t0 = time.monotonic()
            with conditions(log, c):
                sample, detail = measure_one(c, r, i)
            samples[c].append(sample)
            details[c].append(detail)
            print(
                f"bench_{bench}: round {r + 1}/{rounds} {c:<60} {sample:10.5f} ({time.monotonic() - t0:.1f} s)",
                flush=True,
            )
    return {"samples": samples, "details": details, "order": order, "conditions": log}


# ------------------------------------------------- the machine's state per cell

# A section whose cells met a 1-min load average above this share of the cores says it was measured under
# load: the load average counts this bench's own ranks too, so a 2-rank cell on 2 cores alone can bring
# the next cell's reading near 1 per core; above half, some of the demand was time-sliced.
LOADED_PER_CORE = 0.5
STOLEN = 0.01  # a hypervisor taking ≥ 1 % of the CPU time during a cell is said too


def cpu_counters() -> tuple[int, int] | None:
    """(steal, total) CPU ticks of all CPUs since boot, from /proc/stat; None where there is none."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal (guest is in user)
    return ticks[7], sum(ticks)


@contextlib.contextmanager
def conditions(log: dict, cell: str):
    """Append to log[cell] the machine's state around one measurement of `cell`: the 1-min load average as
    it started ("load") and the share of CPU time the hypervisor stole while it ran ("steal", None where
    /proc/stat is missing or no tick passed)."""
    load, before = os.getloadavg()[0], cpu_counters()
    yield
    after = cpu_counters()
    steal = (after[0] - before[0]) / (after[1] - before[1]) if before and after and after[1] > before[1] else None
    log.setdefault(cell, []).append({"load": round(load, 3), "steal": steal})


def conditions_line(record: dict) -> str:
    """What the record says of the machine's state while its cells were measured, and whether that was
    under load (LOADED_PER_CORE, STOLEN); records from before per-cell recording say they have none."""
    readings = [x for log in found(record.get("meta", {}), "conditions") for per_cell in log.values() for x in per_cell]
    cores = record.get("machine", {}).get("cores") or usable_cores()
    if not readings:
        return "The machine's load and CPU steal were not recorded per cell (only at the section's start and end)."
    loads = sorted(x["load"] for x in readings)
    steals = [x["steal"] for x in readings if x.get("steal") is not None]
    text = (
        f"Per cell ({len(readings)} measurements): 1-min load average {loads[0]:.2f}–{loads[-1]:.2f} "
        f"(median {statistics.median(loads):.2f}) on {cores} cores, counting this bench's own ranks"
        + (f"; CPU steal at most {max(steals):.1%}" if steals else "; CPU steal not readable")
    )
    loaded = loads[-1] > LOADED_PER_CORE * cores or (steals and max(steals) >= STOLEN)
    if loaded:
        text += (
            f". Measured under load (load above {LOADED_PER_CORE:g} per core or steal ≥ {STOLEN:.0%}): absolute "
            "times are inflated and differ from other sections; ratios are paired by round"
        )
    return text + "."


def order_line(meta: dict) -> str:
    """Whether the orders of the rounds recorded anywhere in a record's meta (each an "order": a list of
    rounds, or a dict of such lists) balanced carry-over (bench.stats.carryover_text)."""
    from bench import stats

    orders = []
    for item in found(meta, "order"):
        lists = item.values() if isinstance(item, dict) else [item]
        orders.extend(o for rounds in lists for o in rounds if isinstance(o, list))
    return stats.carryover_text(orders)


def found(meta, key: str) -> list:
    """Every value stored under `key` anywhere in a record's meta (a table's block may keep its own)."""
    if not isinstance(meta, dict):
        return []
    return [item for k, item in meta.items() if k == key] + [
        x for k, v in meta.items() if k != key for x in found(v, key)
    ]


def steady_state(run_dir: Path, warmup: int) -> dict:
    """The workers' mean steady-state seconds per step, the first `warmup` steps left out, from the run's
    per-step timeline: `seconds_per_step`, `transfer_s`, `exposed_s` (transfer + wait) and `comm_share`
    as scaledl.comm.timing.steady_state defines them (docs/time.md), and each phase's `<phase>_s`."""
    import h5py
    import numpy as np

    from scaledl.comm.timing import PHASES
    from scaledl.comm.timing import steady_state as rank_steady_state

    run = read_run(Path(run_dir))
    quantities, phases = [], []
    with h5py.File(Path(run_dir) / "timeline.h5") as f:
        for rank in run["phases"]["per_rank"]:
            if "worker" in rank["role"]:
                group = f[f"rank{rank['rank']}"]
                quantities.append(rank_steady_state(group["step_end_s"][()], group["phase_s"][()], warmup=warmup))
                phases.append(group["phase_s"][warmup:].mean(axis=0))

    def mean(key: str) -> float:
        return sum(q[key] for q in quantities) / len(quantities)

    per_phase = np.mean(phases, axis=0)
    return {
        "steps": quantities[0]["steady_steps"], "seconds_per_step": mean("seconds_per_step"),
        "transfer_s": mean("transfer_per_step_s"), "exposed_s": mean("transfer_per_step_s") + mean("wait_per_step_s"),
        "comm_share": mean("comm_share"), **{f"{p}_s": float(v) for p, v in zip(PHASES, per_phase)}, "run": run,
    }  # fmt: skip


# -------------------------------------------------------------- statistics


def median(values) -> float:
    return statistics.median(values)


def timed(fn, iters: int) -> float:
    """Mean seconds per call of `fn` over `iters` calls."""
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) / iters


# --------------------------------------------------------------- the doc


def table(rows: list[dict], columns: list[str], headers: list[str] | None = None) -> str:
    """A markdown table of `rows` (scaledl.report.tables); floats with 4 significant digits."""
    # the report's writer pulls in pandas: only the benches that print a table pay for it
    from scaledl.report.comm_model import as_frame
    from scaledl.report.tables import markdown_table

    return markdown_table(as_frame(rows, columns), headers)


def update_section(name: str, body: str, doc: Path = DOC) -> Path:
    """Replace (or append) the `<!-- bench:NAME -->` section of the benchmarks doc with `body`."""
    from scaledl.atomic import write_text

    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    header = text("header").rstrip()
    page = doc.read_text() if doc.exists() else header
    first = page.find("<!-- bench:")
    if first >= 0:  # the page's introduction is generated too: keep it in step with the header block
        page = header + "\n\n" + page[first:]
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(page):
        page = pattern.sub(lambda _: block, page, count=1)
    elif name == "headline" and (first := page.find("<!-- bench:")) >= 0:  # the page's summary comes first
        page = page[:first] + block + "\n\n" + page[first:]
    else:
        page = page.rstrip() + "\n\n" + block + "\n"
    first = page.find("<!-- bench:")
    page = header + "\n\n" + provenance(page[first:]) + "\n\n" + page[first:]
    write_text(doc, page if page.endswith("\n") else page + "\n")
    return doc


SECTION = re.compile(r"<!-- bench:(\S+) -->(.*?)<!-- /bench:\1 -->", re.S)
COMMIT = re.compile(r"; commit ([0-9a-f]{7,40})( \(with uncommitted changes\))?")


def provenance(sections: str) -> str:
    """The page's one commit (the one most sections were measured at), and every section that was not."""
    commits = {}
    for name, body in SECTION.findall(sections):
        found = COMMIT.search(body)
        commits[name] = (found.group(1) + (" with uncommitted changes" if found.group(2) else "")) if found else None
    measured = [c for c in commits.values() if c and "uncommitted" not in c]
    if not measured:
        return "Provenance: no section was measured at a clean commit."
    page = max(dict.fromkeys(measured), key=measured.count)  # the most frequent, the first on a tie
    others = [f"{name} ({commit or 'no commit recorded'})" for name, commit in commits.items() if commit != page]
    line = f"Provenance: measured at commit {page}"
    line += f"; from another state: {', '.join(others)}." if others else ", every section."
    return line + load_change(sections)


LOADS = re.compile(r"load average ([\d.]+)(?: at start, |–)([\d.]+)")
CORES = re.compile(r", (\d+) cores,")


def load_change(sections: str) -> str:
    """A sentence naming each section's load when it changed between sections by more than LOADED_PER_CORE per
    core (the same 143 MB Allreduce took 1.7× as long in a section at load 2 as in one at 0.4), else ""."""
    spans, cores = {}, 1
    for name, body in SECTION.findall(sections):
        values = [float(x) for pair in LOADS.findall(body) for x in pair]
        if values:
            spans[name] = (min(values), max(values))
        if found := CORES.search(body):
            cores = max(cores, int(found.group(1)))
    change = max(hi for _, hi in spans.values()) - min(lo for lo, _ in spans.values()) if spans else 0
    if change <= LOADED_PER_CORE * cores:
        return ""
    listed = ", ".join(f"{name} {lo:.2f}–{hi:.2f}" for name, (lo, hi) in spans.items())
    return (
        f" The machine's load changed between sections (1-min load average per section on {cores} cores: {listed}): "
        "absolute times compare only within a section, where every cell met the same drift."
    )


def report(
    name: str, title: str, m: dict, intro: str, tables: str, notes: str = "", write: bool = True, state: str = ""
) -> str:
    """Print a section and, if `write`, put it in docs/benchmarks.md; `state` (the machine's load and the
    order's balance) follows the machine line."""
    body = f"## {title}\n\n{machine_line(m)}{' ' + state if state else ''}\n\n{intro.strip()}\n\n{tables.strip()}\n"
    if notes.strip():
        body += f"\n{notes.strip()}\n"
    print(body)
    if write:
        print(f"updated {update_section(name, body)} (section {name})")
    return body


def common_arguments(parser, name: str | None = None) -> None:
    """--no-doc and --workdir; with the bench's `name`, also --raw (default bench/raw/NAME.json) and --render."""
    parser.add_argument("--no-doc", action="store_true", help="print the tables only; leave docs/benchmarks.md alone")
    parser.add_argument("--workdir", type=Path, help="where to put data and runs (default: a temporary folder)")
    if name:
        parser.add_argument(
            "--raw", type=Path, default=raw_path(name),
            help=f"JSON file for every raw sample and its metadata (default {raw_path(name).relative_to(REPO)})",
        )  # fmt: skip
        parser.add_argument(
            "--render", action="store_true",
            help="measure nothing: rebuild the section of docs/benchmarks.md from --raw",
        )  # fmt: skip


def parse_bench_args(parser, argv=None):
    """`parser.parse_args(argv)`, refusing at once (before anything is measured) a run whose record could not
    be kept: one that would write bench/raw from a tree with uncommitted changes."""
    args = parser.parse_args(argv)
    measuring = not getattr(args, "render", False) and not getattr(args, "worker", None)
    if measuring and getattr(args, "raw", None) is not None:
        try:
            check_raw_destination(args.raw)
        except RawError as error:
            parser.error(str(error))
    return args


def check_raw_destination(path) -> None:
    """Raise RawError where `path` is in bench/raw and the tree is not a clean commit: the published
    records must belong to one commit of the code (anywhere else, any tree may write)."""
    path = Path(path).resolve()
    if not path.is_relative_to(RAW_DIR.resolve()):
        return
    git = git_state()
    if git["commit"] is None or git["dirty"] is not False:
        state = "has uncommitted changes" if git["dirty"] else "is not a git checkout"
        raise RawError(
            f"{shown_path(path)}: bench/raw keeps records of committed code only, and this tree {state}; "
            "commit first, or pass --raw with a path outside bench/raw"
        )


def write_record_block(page: Path, name: str, body: str) -> None:
    """Replace the block `<!-- record:NAME -->` ... `<!-- /record:NAME -->` of a docs page by `body` (a table
    rendered from the record it cites), atomically; a page without the block is an error, not an append."""
    from scaledl.atomic import write_text  # imported where used, as in update_section

    text = page.read_text()
    start, end = f"<!-- record:{name} -->\n", f"<!-- /record:{name} -->"
    if start not in text or end not in text:
        raise RawError(f"{shown_path(page)} has no block {start.strip()} ... {end}")
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    write_text(page, f"{head}{start}{body}{end}{tail}")


RAW_DIR = REPO / "bench" / "raw"  # the records the published docs/benchmarks.md was generated from


def raw_path(name: str) -> Path:
    return RAW_DIR / f"{name}.json"


def shown_path(path) -> str:
    """`path` relative to the repository when it is inside it (the docs name no machine's folders)."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def publish(name: str, title: str, record: dict, intro: str, tables: str, notes: str = "", write: bool = True) -> str:
    """Print a section rendered from a raw record (bench.common.read_raw) and, if `write`, put it in
    docs/benchmarks.md: the machine line comes from the record, so the doc can be rebuilt from the file."""
    meta = record.get("meta", {})  # sections without rounds (netbench, simulated only) say nothing of either
    state = f"{conditions_line(record)} {order_line(meta)}" if found(meta, "order") or found(meta, "conditions") else ""
    return report(name, title, record["machine"], intro, tables, notes, write=write, state=state)


# ------------------------------------------------------------ raw records

RAW_FORMAT = "scaledl-bench-raw/1"
RAW_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "THP_MEM_ALLOC_ENABLE", "SLURM_CPUS_PER_TASK", "CUDA_VISIBLE_DEVICES")


class RawError(ValueError):
    """A raw record that cannot be read; its message is one line."""


BENCH_OUTPUTS = ("bench/raw", "docs/benchmarks.md")  # what the benches write: not part of the measured code


def git_state(repo: Path = REPO) -> dict:
    """{"commit", "dirty"} (None where git or the repository is missing); dirty leaves out BENCH_OUTPUTS, which
    each bench of one `run_all` rewrites as it goes, so all of its records can say the code was clean."""

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    outside = [f":(exclude){path}" for path in BENCH_OUTPUTS]
    status = git("status", "--porcelain", "--", ".", *outside) if commit is not None else None
    return {"commit": commit.strip() if commit else None, "dirty": bool(status.strip()) if status is not None else None}


def bench_environment() -> dict[str, str]:
    """The environment variables that change what a bench measures (threads, THP, MPICH, Slurm, GPUs)."""
    return {k: v for k, v in sorted(os.environ.items()) if k in RAW_ENV or k.startswith("MPIR_CVAR_")}


def machine_fingerprint() -> dict:
    """`machine()`, or what can be known without torch and MPI where importing them fails."""
    try:
        return machine()
    except Exception as exc:  # noqa: BLE001 - a fingerprint must never stop a bench from saving its data
        mem = memory_gib()
        return {
            "cpu": cpu_model_or_unknown(), "cores": usable_cores(), "memory": f"{mem:.0f} GiB" if mem else "?",
            "python": platform.python_version(), "platform": platform.platform(), "load_before": os.getloadavg()[0],
            "partial": f"{type(exc).__name__}: {exc}",
        }  # fmt: skip


def cpu_model_or_unknown() -> str:
    try:
        return cpu_model()
    except Exception:  # noqa: BLE001
        return platform.processor() or "unknown CPU"


def _check_samples(samples, where: str) -> dict[str, list[float]]:
    if not isinstance(samples, dict) or not samples:
        raise RawError(f"{where}: 'samples' must be a non-empty object of cell -> list of numbers")
    out = {}
    for cell, values in samples.items():
        numbers = isinstance(values, list) and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
        )
        if not numbers or not values or not all(math.isfinite(v) for v in values):
            raise RawError(f"{where}: cell {cell!r} must hold a non-empty list of finite numbers")
        out[str(cell)] = [float(v) for v in values]
    return out


def write_raw(path, bench: str, samples: dict[str, list[float]], meta: dict | None = None) -> Path:
    """Write every sample of a bench run ({cell: [per round]}, "NAME [A/A]" for a twin) and `meta` to `path`,
    atomically. Keys of `meta` used here: "machine" (measured if absent), "load_before", "unit" (default "s"),
    "noise_floor"; recorded too: the git state, the command, the environment that matters, the load, a time."""
    path = Path(path)
    check_raw_destination(path)
    meta = dict(meta or {})
    samples = _check_samples(samples, str(path))
    m = dict(meta.pop("machine", None) or machine_fingerprint())
    load_start = meta.pop("load_before", m.get("load_before"))
    m.update(load_after=os.getloadavg()[0], launch=LAUNCH.as_dict())
    record = {
        "format": RAW_FORMAT, "bench": bench, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git": git_state(),
        "command": [sys.executable, *sys.argv], "env": bench_environment(), "machine": m,
        "load": {"start": load_start, "end": os.getloadavg()[0]}, "launch": LAUNCH.as_dict(),
        "unit": meta.pop("unit", "s"), "noise_floor": meta.pop("noise_floor", None), "meta": meta, "samples": samples,
    }  # fmt: skip
    from scaledl.atomic import write_text  # a reader never sees half a record; shared like any output

    write_text(path, json.dumps(record, indent=1, default=str) + "\n")
    return path


def write_record(args, bench: str, result: dict, m: dict, started: float, **meta) -> Path:
    """`write_raw` of a `rotating_rounds` result to args.raw, with what every such record holds: the machine,
    the rounds, their orders, the machine's state per cell, where the record lies and the run's wall time."""
    rounds = {"rounds": len(result["order"]), "order": result["order"], "conditions": result["conditions"]}
    where = {"raw": shown_path(args.raw), "wall_s": time.monotonic() - started}
    return write_raw(args.raw, bench, result["samples"], {"machine": m, "unit": "s", **rounds, **meta, **where})


def read_raw(path) -> dict:
    """A raw record written by `write_raw`; raises RawError (one line) if it is missing or malformed."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RawError(f"{path}: no such file") from None
    except OSError as exc:
        raise RawError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RawError(f"{path}: not JSON ({str(exc).splitlines()[0]})") from None
    if not isinstance(record, dict) or "samples" not in record:
        raise RawError(f"{path}: not a bench raw record (no 'samples'; expected {RAW_FORMAT})")
    record["samples"] = _check_samples(record["samples"], str(path))
    floor = record.get("noise_floor")
    if floor is not None and (not isinstance(floor, (int, float)) or isinstance(floor, bool) or not floor >= 0):
        raise RawError(f"{path}: 'noise_floor' must be a fraction >= 0 or null")
    return record


# ---------------------------------------------------------------- limits


def gemm_peak_flops(threads: int = 1, n: int = 1024, repeats: int = 5) -> dict:
    """The best float32 GEMM rate this process reaches at `threads` threads (n×n @ n×n, `repeats` timed
    calls after one warm-up): the compute ceiling that a step's achieved FLOP/s is held against.
    {"flops_per_s" (best), "median_flops_per_s", "n", "threads"}."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        rates = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.mm(a, b)
            rates.append(2 * n**3 / (time.perf_counter() - t0))
    finally:
        torch.set_num_threads(before)
    return {"flops_per_s": max(rates), "median_flops_per_s": statistics.median(rates), "n": n, "threads": threads}


def step_flops(model: str, image_shape: tuple[int, ...], classes: int, batch: int) -> float:
    """Floating-point operations of one training step (forward + backward) of `model` on `batch` images,
    counted by torch's FlopCounterMode (matrix products and convolutions; elementwise work is not counted)."""
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    from scaledl.models import build_model

    net = build_model(model, tuple(image_shape), classes)
    x = torch.randn(batch, *image_shape)
    y = torch.randint(0, classes, (batch,))
    with FlopCounterMode(display=False) as counter:
        F.cross_entropy(net(x), y).backward()
    return float(counter.get_total_flops())


def memcpy_bandwidth(nbytes: int = 256 << 20, repeats: int = 5) -> float:
    """Bytes per second of one large copy between two torch buffers in this process (best of `repeats`):
    the memory bound that in-node transfers are held against."""
    import torch

    src, dst = torch.ones(nbytes // 4), torch.empty(nbytes // 4)
    dst.copy_(src)
    best = min(timed(lambda: dst.copy_(src), 1) for _ in range(repeats))
    return nbytes / best


# ------------------------------------------------------------ the network

NETBENCH_ARGS = ["--max-size", "16M", "--quiet", "--repeats", "3"]


def network(path: Path | None, tmp: Path, bench: str) -> dict:
    """α, β, γ ({"alpha_s", "beta_s_per_byte", "gamma_s_per_byte", "source", "note"}) from a netbench file, or
    measured now (2 ranks, the bench's launch); {"missing": reason} when that fails; a bad `path` ends the bench."""
    from scaledl.errors import UserError
    from scaledl.report.comm_model import read_netbench

    extra = {}
    if path is None:
        t0 = time.monotonic()
        path = Path(tmp) / "netbench.json"
        proc = run_mpi(2, ["-m", "scaledl.net.measure", "--out", str(path), *NETBENCH_ARGS], check=False)
        if proc.returncode != 0:
            return {"missing": f"netbench failed here (exit {proc.returncode})"}
        source = (
            "measured by this run in the table's launch environment (scaledl netbench, 2 ranks, up to "
            "16 MiB, 3 repeats)"
        )
        extra = {"wall_s": time.monotonic() - t0}
    else:  # a temporary file (run_all's) is named without its folder: the doc names no machine's folders
        shown = shown_path(path)
        source = f"from {Path(path).name if Path(shown).is_absolute() else shown} (scaledl netbench)"
    try:
        net, record = read_netbench(path)
    except UserError as error:
        raise SystemExit(f"{bench}: --netbench {error}") from None
    return {
        "alpha_s": net.alpha, "beta_s_per_byte": net.beta, "gamma_s_per_byte": net.gamma, "source": source,
        "note": (record.get("p2p") or {}).get("note"), **extra,
    }  # fmt: skip


def recorded_network(meta: dict):
    """A record's α, β, γ (meta["network"], from `network`) as a scaledl.net.alphabeta.Network, or None."""
    from scaledl.net.alphabeta import Network

    net = meta.get("network") or {}
    if "alpha_s" not in net:
        return None
    return Network(net["alpha_s"], net["beta_s_per_byte"], net.get("gamma_s_per_byte") or 0.0, name="netbench")


def network_words(meta: dict) -> str:
    """Where a record's α, β, γ came from, in words, or why it has none."""
    n = meta.get("network") or {}
    if "alpha_s" not in n:
        return f"no α-β prediction: {n.get('missing', 'no netbench file')}"
    return (
        f"α = {n['alpha_s'] * 1e6:.3g} µs, β = {n['beta_s_per_byte']:.3g} s/B, "
        f"γ = {n['gamma_s_per_byte']:.3g} s/B, {n['source']}: {netbench_origin(n)}"
    )


def netbench_origin(net: dict, raw: Path | None = None) -> str:
    """Whether a section's α, β are the page's own netbench record (bench/raw/netbench.json, its
    netbench section), so a reader can trace every prediction to a table on the same page."""
    raw = raw or raw_path("netbench")
    try:
        page = read_raw(raw)["meta"]["netbench"]
    except (RawError, KeyError, TypeError):
        return "the page has no netbench record to compare them with"
    same = math.isclose(page["alpha_s"], net["alpha_s"], rel_tol=1e-9) and math.isclose(
        page["beta_s_per_byte"], net["beta_s_per_byte"], rel_tol=1e-9
    )
    if same:
        return "the page's netbench record (its netbench section)"
    return (
        f"not the page's netbench record (that one: α = {page['alpha_s'] * 1e6:.3g} µs, "
        f"β = {page['beta_s_per_byte']:.3g} s/B)"
    )


def read_record(raw: Path, bench: str, render) -> tuple[dict, tuple] | None:
    """The raw record of `bench` at `raw` and its rendered section, or None after printing one line on
    stderr (a missing, malformed, other bench's or incomplete record)."""
    try:
        record = read_raw(raw)
        if record.get("bench") != bench:
            raise RawError(f"{raw}: a record of bench {record.get('bench')!r}, not {bench!r}")
        return record, render(record)
    except RawError as exc:
        print(f"bench_{bench}: {exc} (run without --render to measure a new record)", file=sys.stderr)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, IndexError) as exc:
        print(
            f"bench_{bench}: {raw}: incomplete {bench} record ({type(exc).__name__}: {exc}); "
            "run without --render to measure a new one",
            file=sys.stderr,
        )
    return None


def publish_record(raw: Path, bench: str, render, write: bool) -> int:
    """Render `bench`'s record at `raw` into its section (docs/benchmarks.md if `write`); the exit status:
    0, or 2 after one line on stderr for a record that cannot be read (read_record)."""
    found = read_record(raw, bench, render)
    if found is None:
        return 2
    record, (title, intro, tables, notes) = found
    publish(bench, title, record, intro, tables, notes, write=write)
    return 0
