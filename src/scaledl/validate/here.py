"""The here suite: a platform calibrated to this machine (`scaledl calibrate`) against this machine, on what its
calibration did not see.

    step         each model's training step (the loop's forward_backward, one thread, as every rank runs),
                 measured here (the median of two runs of N timings; their disagreement is the row's A/A) and
                 priced on the platform's host; the calibration's own model and batch is a `fit` row (the
                 platform's speed was solved so that it matches), the others are held out
    p2p, p2p_cold
                 netbench's ping-pong, measured (a netbench record; cold: from buffers far out of cache, `scaledl
                 netbench --cold`, where the record has it) and simulated at the same sizes: the one the
                 platform's α-β line was fitted on (its header says which: cold where it was measured) is `fit`,
                 the other held out
    allreduce, reduce, bcast, window
                 netbench's collectives at 2 ranks and its window epoch (an Async SGD exchange: lock, Accumulate,
                 flush, Get, unlock), measured and simulated: held out (the calibration reads the ping-pong
                 only); a row's A/A is how far its measured repeats' two halves disagree
    phase_compute, phase_total
                 with --phases, a per-phase record of bench/bench_phases.py: each pattern's workers' seconds per
                 step in compute and in all, measured under mpiexec (the median of its rounds; their spread is
                 the row's A/A) against simulated on the platform that record calibrated; held out, and a cell
                 with more ranks than cores `apart` (shown, outside the score)
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from scaledl.errors import UserError
from scaledl.sim.calibrate import loop_step, steady_seconds, timings
from scaledl.validate.anchors import Anchor
from scaledl.validate.predict import price_step, simulated_netbench
from scaledl.validate.table import Row

TOLERANCE = 0.15  # a held-out row of this machine passes within ±15 %
# Models the calibration (LeNet on 28×28 digits) does not see: other layer shapes, sizes and counts.
DEFAULT_MODELS = "cifar_alexnet:16:3x32x32,resnet18:8:3x32x32,googlenet:2:3x224x224"
CALIBRATED = re.compile(r"(\w+)'s forward and backward at\s+batch (\d+)")  # the header scaledl calibrate writes
FITTED = re.compile(r"fitted on the (hot|cold) ping-pong")  # ... and the ping-pong its network came from
COLLECTIVES = ("allreduce", "reduce", "bcast")
CONSTANT_EXTRA = {  # what else a kind's price rests on
    "allreduce": " and its reduction's memory traffic",
    "reduce": " and its reduction's memory traffic",
    "window": ", the lock's round trip priced as messages, the Accumulate's and the Get's bytes as the origin's "
    "loads and stores at calibrated's memory_bw",
}


def parse_models(spec: str) -> list[tuple[str, int, tuple[int, int, int]]]:
    """`MODEL:BATCH:CxHxW,...` as (model, batch, image); a malformed item is one line."""
    models = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        try:
            name, batch, image = item.split(":")
            shape = tuple(int(n) for n in image.lower().split("x"))
            if len(shape) != 3 or int(batch) <= 0 or min(shape) <= 0:
                raise ValueError
        except ValueError:
            raise UserError(f"--models {item}: expected MODEL:BATCH:CxHxW such as resnet18:8:3x32x32") from None
        models.append((name, int(batch), shape))
    return models


def _halves(samples: list[float]) -> float | None:
    """How far the medians of a measurement's two halves disagree (relative); None below 2 samples."""
    if len(samples) < 2:
        return None
    half = len(samples) // 2
    a, b = statistics.median(samples[:half]), statistics.median(samples[half:])
    return max(a, b) / min(a, b) - 1.0


def _device_host(platform) -> str:
    devices = platform.devices()
    if len(devices) != 1:
        raise UserError(
            f"platform {platform.name} has {len(devices)} device hosts: the here suite checks a platform of this "
            "machine (`scaledl calibrate` writes one host)"
        )
    return devices[0].name


def calibrated_on(platform_path: Path) -> tuple[str, int] | None:
    """The model and batch a calibrated platform's speed was solved on (its header), None for a hand-made one."""
    found = CALIBRATED.search(Path(platform_path).read_text(errors="replace"))
    return (found.group(1), int(found.group(2))) if found else None


def step_rows(platform_path: Path, models: list, repeats: int) -> list[Row]:
    """A row per model: measured here against priced on the platform's host; the calibration's model first."""
    # lazy: torch's thread count (every rank runs one thread) and the platform's reader, which --help needs none of
    import torch

    from scaledl.sim.platform import load

    platform = load(platform_path)
    host = _device_host(platform)
    fitted = calibrated_on(platform_path)
    if fitted is not None:
        models = [(fitted[0], fitted[1], (1, 28, 28)), *[m for m in models if m[:2] != fitted]]
    torch.set_num_threads(1)
    solved = f"solved on {fitted[0] if fitted else '?'}"
    curve = platform.hosts[host].gemm_halves is not None
    constant = (
        f"{platform.name}'s speed ({solved}) and its shapes' curve (gemm_half_*, conv_overhead)"
        if curve
        else f"{platform.name}'s speed (one effective FLOP rate, {solved})"
    )
    rows = []
    for model, batch, image in models:
        step = loop_step(model, batch, image, 10)
        first, second = timings(step, repeats), timings(step, repeats, warmup=0)
        # what the calibration prices: the steady mean (steady_seconds), the loop's work between the steps
        measured, halves = steady_seconds(first + second), (steady_seconds(first), steady_seconds(second))
        aa = max(halves) / min(halves) - 1.0
        seconds, _ = price_step(str(platform_path), host, model, batch, image, 10)
        role = "fit" if fitted and (model, batch) == fitted else "held_out"
        anchor = Anchor(
            id=f"step {model} b{batch} {'x'.join(map(str, image))}", kind="step", platform=platform.name,
            published=measured, source=f"measured here: steady mean of 2 × {repeats} timings, one thread",
            constant=constant,
            role=role, host=host, model=model, batch=batch, image=image, classes=10,
        )  # fmt: skip
        rows.append(Row(anchor, seconds, aa))
    return rows


def netbench_rows(platform_path: Path, measured_path: Path) -> list[Row]:
    """The netbench record's ping-pong and collectives beside the same measurement simulated on the platform."""
    # lazy: the platform's reader (torch), which --help needs none of
    from scaledl.sim.platform import load

    try:
        measured = json.loads(Path(measured_path).read_text())
        sizes = measured["settings"]["sizes"]
        links = measured["p2p"]["links"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"--netbench {measured_path}: not a scaledl netbench result ({error})") from None
    name = load(platform_path).name
    found = FITTED.search(Path(platform_path).read_text(errors="replace"))
    fitted = "p2p_cold" if found and found.group(1) == "cold" else "p2p"  # a header without the line: the hot one
    simulated = simulated_netbench(str(platform_path), sizes)
    rows = []
    priced_p2p = simulated["p2p"]["links"][0]["table"]
    tables = [("p2p", links[0]["table"] if links else [], priced_p2p)]
    if measured.get("p2p_cold"):
        tables.append(("p2p_cold", measured["p2p_cold"]["table"], priced_p2p))
    tables += [(op, measured["collectives"][op]["table"], simulated["collectives"][op]["table"])
               for op in COLLECTIVES if op in measured.get("collectives", {})]  # fmt: skip
    if measured.get("window") and simulated.get("window"):
        tables.append(("window", measured["window"]["table"], simulated["window"]["table"]))
    for kind, real, sim in tables:
        priced = {row["bytes"]: row["time_s"] for row in sim}
        for row in real:
            anchor = Anchor(
                id=f"{kind} {row['bytes']} B", kind=kind, platform=name, published=row["time_s"],
                source=f"measured here: {Path(measured_path).name}",
                constant=f"{name}'s loopback α and β (netbench's α-β line)" + CONSTANT_EXTRA.get(kind, ""),
                role="fit" if kind == fitted else "held_out", nbytes=row["bytes"],
            )  # fmt: skip
            rows.append(Row(anchor, priced[row["bytes"]], _halves(row.get("samples_s") or [])))
    return rows


PHASES = {"phase_compute": "compute", "phase_total": "total"}
PHASE_CONSTANTS = {
    "phase_compute": "the calibrated platform's speed and shapes' curve",
    "phase_total": "the calibrated platform's speed, network and noise",
}


def phase_rows(record_path: Path) -> list[Row]:
    """A row per pattern and phase of a bench_phases record: the workers' measured median over its rounds
    against its simulated run."""
    try:
        record = json.loads(Path(record_path).read_text())
        meta = record["meta"]
        plan, details = meta["plan"], meta["details"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"--phases {record_path}: not a bench_phases record ({error})") from None
    commit = ((record.get("git") or {}).get("commit") or "?")[:7]
    rows = []
    for cell in plan:
        runs = details[cell["cell"]]
        for kind, phase in PHASES.items():
            measured = [run["worker"][phase] for run in runs["measured"] if "worker" in run]
            simulated = [run["worker"][phase] for run in runs["simulated"] if "worker" in run]
            if not measured or not simulated:
                continue
            anchor = Anchor(
                id=f"{phase} {cell['cell']}" + (" (oversubscribed)" if cell["oversubscribed"] else ""), kind=kind,
                platform="calibrated", published=statistics.median(measured),
                source=f"measured here under mpiexec: bench/raw/phases.json at {commit}, {len(measured)} rounds",
                constant=PHASE_CONSTANTS[kind],
                role="apart" if cell["oversubscribed"] else "held_out",
            )  # fmt: skip
            rows.append(Row(anchor, statistics.median(simulated), max(measured) / min(measured) - 1.0))
    return rows
