"""How a matrix product's speed depends on its shape on this machine: micro-benchmarks of convolutions and matrix
products over a grid of shapes, priced as the roofline prices them (a cost per call, then the longer of FLOPs at
rate × Π d / (d + half) over the product's three dimensions — rows, columns, depth: scaledl.sim.roofline.gemm_dims
and Device.gemm_efficiency — and bytes at the memory bandwidth), the rate, the halves and a convolution's cost
per call fitted.

One effective FLOP rate, solved on one model's step, prices a small convolution as fast as a large one: measured
here, ResNet-18's 3×3 convolutions at batch 8 ran at 100-120 GFLOP/s on 8 × 8 pixels and at 23-27 GFLOP/s on
1 × 1, and a linear layer's weight gradient (depth = the batch) at half the rate of its forward product. The
grid spans those regimes; none of its shapes is a layer of the models the here suite holds out
(scaledl.validate.here), so the fit is checked on what it did not see. `scaledl calibrate` writes the halves into
the platform and then solves the absolute rate on the training loop's own step, as before.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

BATCH = 8
PIXELS = (1, 2, 6, 16)  # output pixels per side: rows = batch × pixels²
IN_CHANNELS = (3, 32, 256)  # × the 3 × 3 kernel: depth
OUT_CHANNELS = (16, 128, 512)  # columns
MATMULS = ((16, 4096, 4096), (4096, 16, 4096), (4096, 4096, 16), (64, 512, 800), (512, 64, 800), (256, 256, 256))
REPEATS = 3
START = (2e11, 32.0, 32.0, 32.0, 3e-5)  # rate, halves, convolution's cost per call: where the fit starts


def _median_seconds(fn, *args) -> float:
    fn(*args)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _row(op: str, dims: tuple, flops: int, nbytes: int, fn, *args) -> dict:
    return {"op": op, "dims": dims, "flops": flops, "bytes": nbytes, "seconds": _median_seconds(fn, *args)}


def measure() -> list[dict]:
    """Each shape's (rows, columns, depth), FLOPs, bytes and median seconds, one thread: a convolution's forward
    and its backward (both gradients) as two rows, a matrix product as one."""
    # lazy: what this measurement computes with; --help and the other subcommands need none of it
    import torch

    conv, backward = torch.ops.aten.convolution.default, torch.ops.aten.convolution_backward.default
    settings = ([1, 1], [1, 1], [1, 1], False, [0, 0], 1)  # stride, padding, dilation, transposed, ..., groups
    mask = [True, True, False]  # both gradients, no bias
    rows = []
    for pixels in PIXELS:
        for cin in IN_CHANNELS:
            for cout in OUT_CHANNELS:
                x = torch.randn(BATCH, cin, pixels, pixels).to(memory_format=torch.channels_last)
                w = torch.randn(cout, cin, 3, 3).to(memory_format=torch.channels_last)
                grad = torch.randn(BATCH, cout, pixels, pixels).to(memory_format=torch.channels_last)
                dims = (BATCH * pixels * pixels, cout, cin * 9)
                flops, read = 2 * math.prod(dims), x.nbytes + w.nbytes
                rows.append(_row("convolution", dims, flops, read + grad.nbytes, conv, x, w, None, *settings))
                # the backward reads the gradient, the input and the weights and writes two gradients
                rows.append(_row("convolution_backward", dims, 2 * flops, grad.nbytes + 2 * read,
                                 backward, grad, x, w, None, *settings, mask))  # fmt: skip
    for m, n, k in MATMULS:
        a, b = torch.randn(m, k), torch.randn(k, n)
        rows.append(_row("mm", (m, n, k), 2 * m * n * k, 4 * (m * k + k * n + m * n), torch.mm, a, b))
    return rows


def fit(rows: list[dict], overhead: float, memory_bw: float) -> dict:
    """The rate (FLOP/s at large shapes), the three halves, a convolution's cost per call and the fit's
    geometric-mean error over `rows`: least squares on log seconds of cost per call (a matrix product's is
    `overhead`) + max(FLOPs / (rate × Π d / (d + half)), bytes / memory_bw)."""
    # lazy: scipy's optimiser, which the other subcommands need none of
    from scipy.optimize import least_squares

    def predicted(params) -> np.ndarray:
        rate, *halves, per_call = np.exp(params)
        out = []
        for row in rows:
            efficiency = math.prod(d / (d + h) for d, h in zip(row["dims"], halves))
            call = per_call if row["op"] != "mm" else overhead
            out.append(call + max(row["flops"] / (rate * efficiency), row["bytes"] / memory_bw))
        return np.array(out)

    measured = np.array([row["seconds"] for row in rows])
    solution = least_squares(lambda p: np.log(predicted(p) / measured), np.log(START))
    rate, *halves, per_call = (float(v) for v in np.exp(solution.x))
    error = float(np.exp(np.mean(np.abs(np.log(predicted(solution.x) / measured)))) - 1)
    return {"rate": rate, "halves": tuple(halves), "conv_overhead": per_call, "error": error}
