"""Our flat-buffer allreduce against raw mpi4py, torch.cat, a persistent bucket and the memory-copy bound; packed vs per-layer.

    python bench/bench_allreduce.py [--ranks 2] [--rounds 5] [--netbench FILE] [--raw FILE] [--render] [--no-doc]

Runs itself under `mpiexec -n RANKS` (--worker) and times the float32 sum of gradients shaped like real
models' in the ways OVERHEAD_VARIANTS names (ours twice: A/A), plus packed against per-layer at LeNet and
resnet50. A sample is the slowest rank's mean seconds per call over ITERS back-to-back calls; buffers hold
zeros while timed (every variant is first checked to return the true sum). The page's words, and the copy
bound and α-β limits beside the times: docs/benchmarks-text.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, stats  # noqa: E402

NAME = "allreduce"
TITLE = "Allreduce: flat buffer vs raw mpi4py vs torch.cat vs a persistent bucket; packed vs per-layer"
MODELS = {  # name: (input shape, classes)
    "lenet": ((1, 28, 28), 10),
    "cifar_alexnet": ((3, 32, 32), 10),
    "resnet50": ((3, 224, 224), 1000),
}
OVERHEAD_MODELS = ("lenet", "cifar_alexnet")
LAYER_MODELS = ("lenet", "resnet50")

OURS, RAW, RAW_TORCH, CAT, BUCKET = "ours", "raw", "raw on torch memory", "torch.cat", "persistent bucket"
OURS_AA = stats.aa_cell(OURS)
OVERHEAD_VARIANTS = (OURS, RAW, RAW_TORCH, CAT, BUCKET, OURS_AA)
PACKED, PER_LAYER = "packed", "per-layer"
PACKED_AA = stats.aa_cell(PACKED)
LAYER_VARIANTS = (PACKED, PER_LAYER, PACKED_AA)

SMALL_MESSAGE = 2048  # bytes: MPICH's recursive doubling up to here, Rabenseifner above (scaledl.net.alphabeta)


def cell(model: str, variant: str) -> str:
    """The raw record's cell name; the A/A twin of cell(m, v) is cell(m, aa_cell(v)) = aa_cell(cell(m, v))."""
    return f"{model}: {variant}"


# ------------------------------------------------------------------ worker


def build(name: str):
    import torch

    from scaledl.models import build_model

    torch.manual_seed(0)
    shape, classes = MODELS[name]
    return build_model(name, shape, classes)


class Variant:
    """One way to allreduce a model's gradients: `call` does it once; `buffers` are the tensors or
    arrays it sums in place (filled with a value to check the sum, then with zeros to time it)."""

    def __init__(self, call, buffers):
        self.call = call
        self.buffers = buffers

    def fill(self, value: float) -> None:
        import numpy as np

        for b in self.buffers:
            if isinstance(b, np.ndarray):
                b.fill(value)
            else:
                b.fill_(value)

    def holds(self, value: float) -> bool:
        import numpy as np

        return all(np.all(np.asarray(b) == value) for b in self.buffers)


def overhead_variants(comm, name: str) -> tuple[dict, dict]:
    """The variants of the first table for model `name`, and the model's sizes."""
    import numpy as np
    import torch
    from mpi4py import MPI

    from scaledl.comm.collectives import Collectives
    from scaledl.comm.flat import FlatParams
    from scaledl.comm.timing import PhaseTimer

    flat = FlatParams(build(name))
    ours = Collectives(comm, flat.grad, PhaseTimer())
    raw = np.zeros(flat.numel, dtype=np.float32)
    on_torch = flat.grad.numpy()
    grads = [torch.zeros(shape) for shape in flat.shapes]  # per-parameter gradients, as a model without FlatParams has
    bucket = torch.zeros(flat.numel)  # allocated once, like DDP's
    bucket_np, slots = bucket.numpy(), flat.layer_views(bucket)
    numels = flat.numels

    def cat_allreduce():
        buf = torch.cat([g.reshape(-1) for g in grads])
        comm.Allreduce(MPI.IN_PLACE, buf.numpy(), op=MPI.SUM)
        for g, piece in zip(grads, torch.split(buf, numels)):
            g.copy_(piece.view_as(g))

    def bucket_allreduce():
        for slot, g in zip(slots, grads):
            slot.copy_(g.reshape(-1))
        comm.Allreduce(MPI.IN_PLACE, bucket_np, op=MPI.SUM)
        for slot, g in zip(slots, grads):
            g.copy_(slot.view_as(g))

    ours_variant = Variant(lambda: ours.allreduce_sum_(flat.grad), [flat.grad])
    variants = {
        OURS: ours_variant, RAW: Variant(lambda: comm.Allreduce(MPI.IN_PLACE, raw, op=MPI.SUM), [raw]),
        RAW_TORCH: Variant(lambda: comm.Allreduce(MPI.IN_PLACE, on_torch, op=MPI.SUM), [flat.grad]),
        CAT: Variant(cat_allreduce, grads), BUCKET: Variant(bucket_allreduce, grads), OURS_AA: ours_variant,
    }  # fmt: skip
    return variants, sizes_of(flat)


def layer_variants(comm, name: str) -> tuple[dict, dict]:
    """Packed (one Allreduce of the flat buffer) and per-layer (one per parameter tensor) for `name`."""
    from mpi4py import MPI

    from scaledl.comm.flat import FlatParams

    flat = FlatParams(build(name))
    whole = flat.grad.numpy()
    views = [v.numpy() for v in flat.layer_views(flat.grad)]

    def per_layer():
        for v in views:
            comm.Allreduce(MPI.IN_PLACE, v, op=MPI.SUM)

    packed = Variant(lambda: comm.Allreduce(MPI.IN_PLACE, whole, op=MPI.SUM), [flat.grad])
    return {PACKED: packed, PER_LAYER: Variant(per_layer, [flat.grad]), PACKED_AA: packed}, sizes_of(flat)


def sizes_of(flat) -> dict:
    size = flat.grad.element_size()
    return {
        "floats": flat.numel, "bytes": flat.nbytes, "tensors": len(flat.numels),
        "piece_bytes": [n * size for n in flat.numels],
    }  # fmt: skip


def check_sums(comm, variants: dict) -> None:
    """Every variant, once, must turn each rank's value rank+1 into the sum over ranks; then zeros."""
    from mpi4py import MPI

    p, rank = comm.Get_size(), comm.Get_rank()
    expected = p * (p + 1) / 2
    for key, v in variants.items():
        v.fill(rank + 1.0)
        v.call()
        if not comm.allreduce(v.holds(expected), op=MPI.LAND):
            raise SystemExit(f"bench_allreduce: variant {key!r} did not return the sum over ranks")
        v.fill(0.0)


def slowest(comm, seconds: float) -> float:
    from mpi4py import MPI

    return comm.allreduce(seconds, op=MPI.MAX)


def measure_block(comm, variants: dict, rounds: int, sample_s: float, calibrate: str) -> dict:
    """Every variant once per round, in the order stats.round_order(variants, round).

    {"samples": {variant: [seconds per call, per round]}, "order": [[variant, ...] per round], "iters": n}
    """
    from mpi4py import MPI

    check_sums(comm, variants)  # one call each, then one more: warm-up
    for v in variants.values():
        v.call()
    comm.Barrier()
    once = slowest(comm, common.timed(variants[calibrate].call, 2))
    iters = max(2, min(200, math.ceil(sample_s / max(once, 1e-9))))
    samples = {k: [] for k in variants}
    order, log = [], {}
    for r in range(rounds):
        order.append(stats.round_order(list(variants), r, rounds))
        for key in order[-1]:
            comm.Barrier()
            with common.conditions(log, key):
                samples[key].append(slowest(comm, common.timed(variants[key].call, iters)))
    for key, v in variants.items():
        if not comm.allreduce(v.holds(0.0), op=MPI.LAND):
            raise SystemExit(f"bench_allreduce: variant {key!r} no longer holds zeros after timing")
    return {"samples": samples, "order": order, "iters": iters, "conditions": log}


def memcpy_rate(comm, nbytes: int) -> float:
    """The slowest rank's best copy rate at `nbytes`, all ranks copying at once (bytes copied per second)."""
    from mpi4py import MPI

    comm.Barrier()
    return comm.allreduce(common.memcpy_bandwidth(nbytes=max(nbytes, 4096), repeats=10), op=MPI.MIN)


def worker(out: Path, rounds: int, sample_s: float) -> None:
    import gc

    import torch
    from mpi4py import MPI

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    result = {
        "ranks": comm.Get_size(), "samples": {}, "order": {}, "conditions": {}, "iters": {}, "sizes": {},
        "memcpy_Bps": {}, "block_s": {},
    }  # fmt: skip

    def run(table: str, model: str, make, calibrate: str) -> None:
        t0 = time.monotonic()
        variants, sizes = make(comm, model)
        block = measure_block(comm, variants, rounds, sample_s, calibrate)
        del variants
        gc.collect()
        key = f"{table}/{model}"
        result["samples"].update({cell(model, v): s for v, s in block["samples"].items()})
        result["conditions"].update({cell(model, v): s for v, s in block["conditions"].items()})
        result["order"][key], result["iters"][key] = block["order"], block["iters"]
        result["sizes"][model] = sizes
        if model not in result["memcpy_Bps"]:
            result["memcpy_Bps"][model] = memcpy_rate(comm, sizes["bytes"])
        result["block_s"][key] = time.monotonic() - t0

    for model in OVERHEAD_MODELS:
        run("overhead", model, overhead_variants, OURS)
    for model in LAYER_MODELS:
        run("layers", model, layer_variants, PACKED)
    if comm.Get_rank() == 0:
        from scaledl.atomic import write_text

        write_text(out, json.dumps(result))


def transparent_hugepages() -> str | None:
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return None
    chosen = [w for w in text.split() if w.startswith("[")]
    return chosen[0].strip("[]") if chosen else text.strip()


# ------------------------------------------------------------------ α-β


def predicted_allreduce(net, piece_bytes: list[int], p: int) -> float:
    """α-β-γ seconds of one Allreduce per piece (MPICH's choice by size: recursive doubling up to
    2 KiB, Rabenseifner above), summed over the pieces."""
    from scaledl.net.alphabeta import allreduce

    return sum(
        allreduce(net, n, p, "recursive_doubling" if n <= SMALL_MESSAGE else "rabenseifner") for n in piece_bytes
    )


def copy_bound(nbytes: int, p: int, memcpy_bps: float) -> float:
    """Seconds to copy 2(P−1)/P · n bytes at the measured copy rate: what a ring or recursive allreduce
    moves into and out of each rank, with no reduction arithmetic and no synchronisation."""
    return 2 * (p - 1) / p * nbytes / memcpy_bps


# ------------------------------------------------------------------ report


def extra_per_message(packed: list[float], per_layer: list[float], messages: int, noise: float) -> str:
    """The cost of each extra message, (per-layer − packed) / (messages − 1) per round, printed only
    when per-layer is slower beyond the noise; otherwise why there is no estimate."""
    if messages < 2:
        return "— (one tensor: nothing to split)"
    v = stats.verdict(stats.ratio(per_layer, packed), noise)
    if v in ("no difference", "not resolved"):
        return f"{v} (per-layer ÷ packed at the ±{noise:.1%} A/A floor: no per-message cost to estimate)"
    if v == "faster":
        return "— (per-layer was faster: no per-message cost to estimate)"
    extra = [(b - a) / (messages - 1) for a, b in zip(packed, per_layer)]
    return stats.format_cell(stats.summary(extra))


def limit_ratio(samples: list[float], limit: float | None) -> str:
    """measured ÷ a limit, per round (so with its spread and n), or "no prediction"."""
    if limit is None:
        return "no prediction"
    return stats.format_ratio(stats.ratio(samples, [limit] * len(samples)))


def model_line(meta: dict, model: str) -> str:
    s = meta["sizes"][model]
    return f"{model} ({s['floats']:,} floats = {s['bytes'] / 1e6:.3g} MB in {s['tensors']} tensors)"


def limits_table(meta: dict, net, models: list[str]) -> str:
    p = meta["ranks"]
    rows = []
    for model in models:
        s = meta["sizes"][model]
        rate = meta["memcpy_Bps"][model]
        row = {
            "model": model, "MB": f"{s['bytes'] / 1e6:.3g}", "tensors": s["tensors"],
            "memcpy at this size": f"{rate / 1e9:.3g} GB/s",
            "copy bound": stats.fmt_seconds(copy_bound(s["bytes"], p, rate)),
        }  # fmt: skip
        if net is None:
            row["α-β packed"] = row["α-β per-layer"] = "no prediction"
        else:
            row["α-β packed"] = stats.fmt_seconds(predicted_allreduce(net, [s["bytes"]], p))
            row["α-β per-layer"] = stats.fmt_seconds(predicted_allreduce(net, s["piece_bytes"], p))
        rows.append(row)
    return common.table(rows, list(rows[0]))


def overhead_table(record: dict, net) -> str:
    meta, s = record["meta"], record["samples"]
    p = meta["ranks"]
    rows = []
    for model in meta["overhead_models"]:
        noise = stats.noise_floor(zip(s[cell(model, OURS)], s[cell(model, OURS_AA)]))
        size = meta["sizes"][model]
        bound = copy_bound(size["bytes"], p, meta["memcpy_Bps"][model])
        predicted = predicted_allreduce(net, [size["bytes"]], p) if net else None
        for v in OVERHEAD_VARIANTS:
            ratio, verdict = stats.ratio_cells(s, cell(model, v), cell(model, OURS), noise)
            rows.append({
                "model": model, "variant": v,
                "s/call median [min–max] n": stats.format_cell(stats.summary(s[cell(model, v)])), "÷ ours": ratio,
                "verdict": verdict, "÷ copy bound": limit_ratio(s[cell(model, v)], bound),
                "÷ α-β prediction": limit_ratio(s[cell(model, v)], predicted),
            })  # fmt: skip
    return common.table(rows, list(rows[0]))


def layers_table(record: dict, net) -> str:
    meta, s = record["meta"], record["samples"]
    p = meta["ranks"]
    rows = []
    for model in meta["layer_models"]:
        noise = stats.noise_floor(zip(s[cell(model, PACKED)], s[cell(model, PACKED_AA)]))
        size = meta["sizes"][model]
        bound = copy_bound(size["bytes"], p, meta["memcpy_Bps"][model])
        for v in LAYER_VARIANTS:
            pieces = size["piece_bytes"] if v == PER_LAYER else [size["bytes"]]
            ratio, verdict = stats.ratio_cells(s, cell(model, v), cell(model, PACKED), noise)
            rows.append({
                "model": model, "variant": v, "messages": len(pieces),
                "s/call median [min–max] n": stats.format_cell(stats.summary(s[cell(model, v)])), "÷ packed": ratio,
                "verdict": verdict, "÷ copy bound": limit_ratio(s[cell(model, v)], bound),
                "÷ α-β prediction": limit_ratio(s[cell(model, v)], predicted_allreduce(net, pieces, p) if net else None),
            })  # fmt: skip
        extra = extra_per_message(s[cell(model, PACKED)], s[cell(model, PER_LAYER)], size["tensors"], noise)
        if net:
            alpha_extra = (
                predicted_allreduce(net, size["piece_bytes"], p) - predicted_allreduce(net, [size["bytes"]], p)
            ) / max(size["tensors"] - 1, 1)
            extra += f"; α-β predicts {stats.fmt_seconds(alpha_extra)}"
        rows.append({
            "model": model, "variant": "extra per message", "messages": f"+{size['tensors'] - 1}",
            "s/call median [min–max] n": extra, "÷ packed": "", "verdict": "", "÷ copy bound": "",
            "÷ α-β prediction": "",
        })  # fmt: skip
    return common.table(rows, list(rows[0]))


def aa_sentence(record: dict) -> str:
    meta, s = record["meta"], record["samples"]
    parts = []
    for _table, models, base in (("overhead", meta["overhead_models"], OURS), ("layers", meta["layer_models"], PACKED)):
        for model in models:
            a, b = s[cell(model, base)], s[cell(model, stats.aa_cell(base))]
            parts.append(
                f"{model} {base}: {stats.format_ratio(stats.ratio(b, a))}, noise floor "
                f"{stats.noise_floor(zip(a, b)):.1%}"
            )
    head = "A/A (the reference variant measured twice in every round; ratio and noise floor): "
    return f"{head}{'; '.join(parts)}. Per model, {stats.RULE}."


TABLE_LABELS = {"overhead": "six ways", "layers": "packed vs per-layer"}


def render(record: dict, raw_path: str | None = None) -> tuple[str, str, str, str]:
    """title, intro, tables and notes of the section, from the raw record alone (`raw_path`: where the
    record lies, named in the notes)."""
    meta = record["meta"]
    net = common.recorded_network(meta)
    p = meta["ranks"]
    mark = common.recorded_mark(record, p)
    iters = ", ".join(
        f"{key.split('/')[1]} {n} ({TABLE_LABELS.get(key.split('/')[0], key)})" for key, n in meta["iters"].items()
    )
    intro = common.text(
        "allreduce.intro", ranks=f"{p}{mark}" + (" († more ranks than cores: time-sliced, unbound)" if mark else ""),
        iters=iters, rounds=meta["rounds"], models=", ".join(model_line(meta, m) for m in meta["sizes"]),
    )  # fmt: skip
    limits = common.text("allreduce.limits", p=p, share=f"{2 * (p - 1) / p:.3g}", prediction=common.network_words(meta))
    tables = (
        f"{limits}\n\n{limits_table(meta, net, list(meta['sizes']))}\nOne model's gradients, six ways:\n\n"
        f"{overhead_table(record, net)}\nPacked (one Allreduce of the flat buffer) vs per-layer (one Allreduce per "
        f"parameter tensor):\n\n{layers_table(record, net)}\n{aa_sentence(record)}\n"
    )
    notes = common.text("allreduce.notes", thp=meta.get("hugepages"))
    notes += f" Raw samples: {raw_path}." if raw_path else ""
    notes += f" Wall time of the measuring run: {meta['wall_s']:.0f} s." if "wall_s" in meta else ""
    if meta["rounds"] < 5:
        notes += f" Only {meta['rounds']} round(s): not enough for a headline ratio (use ≥ 5)."
    return TITLE, intro, tables, notes


# ------------------------------------------------------------------ main


def measure(args) -> Path:
    """Run the worker under MPI, resolve α-β-γ, write the raw record; returns its path."""

    def run(tmp: Path) -> tuple[dict, dict]:
        network, out = common.network(args.netbench, tmp, "bench_allreduce"), tmp / "allreduce.json"
        argv = ["--worker", str(out), "--rounds", str(args.rounds), "--sample-ms", str(args.sample_ms)]
        common.run_mpi(args.ranks, [str(Path(__file__).resolve()), *argv], timeout=600)
        return json.loads(out.read_text()), network

    (result, network), m, t_start = common.measured(args, common.Launch.for_table(max(args.ranks, 2)), run)
    wall = time.monotonic() - t_start
    blocks = ", ".join(f"{k} {s:.1f} s" for k, s in result["block_s"].items())
    print(f"bench_allreduce: {blocks}; netbench {network.get('wall_s', 0):.1f} s; wall {wall:.0f} s", flush=True)
    return common.write_raw(args.raw, NAME, result["samples"], {
        "machine": m, "unit": "s", "quantity": "seconds per allreduce call (slowest rank)", "ranks": result["ranks"],
        "rounds": args.rounds, "sample_ms": args.sample_ms, "overhead_models": list(OVERHEAD_MODELS),
        "layer_models": list(LAYER_MODELS), "sizes": result["sizes"], "iters": result["iters"],
        "order": result["order"], "conditions": result["conditions"], "memcpy_Bps": result["memcpy_Bps"],
        "block_s": result["block_s"], "hugepages": transparent_hugepages(), "network": network, "wall_s": wall,
    })  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--ranks", type=int, default=2, help="MPI ranks (default %(default)s)")
    add(
        "--rounds", "--repeats", type=int, default=5, dest="rounds",
        help="rounds; ≥ 5 for headline ratios (default %(default)s)",
    )  # fmt: skip
    add("--sample-ms", type=float, default=40.0, help="about how long one sample lasts (default %(default)s)")
    add(
        "--netbench", type=Path, metavar="FILE", help="α, β, γ from this `scaledl netbench` JSON (default: measure one)"
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: run under mpiexec, write JSON here
    common.common_arguments(parser, NAME)
    args = common.parse_bench_args(parser, argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.ranks < 2:
        parser.error("--ranks must be >= 2 (an allreduce over one rank moves nothing)")
    if args.sample_ms <= 0:
        parser.error("--sample-ms must be > 0")
    if args.worker:
        worker(args.worker, args.rounds, args.sample_ms / 1e3)
        return 0
    if args.netbench is not None and not args.netbench.is_file():
        parser.error(f"--netbench {args.netbench}: no such file (write one with `scaledl netbench`)")
    if not args.render:
        path = measure(args)
        print(f"raw samples: {path}")
    try:
        record = common.read_raw(args.raw)
        title, intro, tables, notes = render(record, common.shown_path(args.raw))
    except common.RawError as error:
        raise SystemExit(f"bench_allreduce: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise SystemExit(
            f"bench_allreduce: {args.raw}: not a record of this bench ({type(error).__name__}: "
            f"{error}); rerun without --render to measure one"
        ) from None
    common.publish(NAME, title, record, intro, tables, notes, write=not args.no_doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
