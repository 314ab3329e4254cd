"""The shapes' curve `scaledl calibrate` fits (scaledl.sim.gemm_shapes): recovered from timings made by it."""

import math

import pytest

from scaledl.sim import gemm_shapes


def test_the_fit_recovers_the_rate_the_halves_and_a_convolutions_cost_per_call():
    rate, halves, per_call, overhead, bandwidth = 1.5e11, (60.0, 4.0, 50.0), 4e-5, 1e-6, 1.6e10
    rows = []
    for dims in [(s, c, k) for s in (8, 64, 512, 4096) for c in (16, 128, 512) for k in (27, 288, 2304)]:
        for op in ("convolution", "mm"):
            flops, nbytes = 2 * math.prod(dims), 4 * (dims[0] * dims[2] + dims[1] * dims[2] + dims[0] * dims[1])
            efficiency = math.prod(d / (d + h) for d, h in zip(dims, halves))
            call = per_call if op == "convolution" else overhead
            seconds = call + max(flops / (rate * efficiency), nbytes / bandwidth)
            rows.append({"op": op, "dims": dims, "flops": flops, "bytes": nbytes, "seconds": seconds})
    found = gemm_shapes.fit(rows, overhead, bandwidth)
    assert found["rate"] == pytest.approx(rate, rel=1e-3)
    assert found["halves"] == pytest.approx(halves, rel=1e-2)
    assert found["conv_overhead"] == pytest.approx(per_call, rel=1e-2)
    assert found["error"] < 1e-3
