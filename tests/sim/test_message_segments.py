"""A calibrated host's messages priced by their size's regime (message_segments): each segment's α + β·n over the
loopback's line, fitted per regime by `scaledl calibrate` (scaledl.net.measure.fit_segments)."""

from __future__ import annotations

import json
import textwrap

import pytest

from mpi_run import run_python
from one_host import one_host_platform
from scaledl.net.measure import fit_segments
from scaledl.sim.loader import available

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

SEGMENTS = ((4096, 2e-6, 1e-10), (float("inf"), 8e-6, 2.5e-10))  # (up to bytes, α s, β s/B)
LOOPBACK = {"network/crosstraffic": "0", "network/loopback-lat": "1e-06", "network/loopback-bw": "2e10"}


def test_a_message_within_a_host_costs_its_segments_line(tmp_path):
    platform = tmp_path / "box.xml"
    segments = ";".join(f"{limit:g}:{a:g}:{b:g}" for limit, a, b in SEGMENTS)
    props = {"slots": "2", "memory_bw": "1e10Bps", "message_segments": segments}
    platform.write_text(one_host_platform(1e11, 2, props, LOOPBACK))
    sizes = [64, 4096, 65536, 1 << 20]
    code = textwrap.dedent(f"""
        import json
        from scaledl.validate.predict import p2p_times
        print(json.dumps(p2p_times({str(platform)!r}, {sizes})))
    """)
    proc = run_python(["-c", code], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    times = {int(n): t for n, t in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    for n in sizes:
        alpha, beta = next((a, b) for limit, a, b in SEGMENTS if n <= limit)
        assert times[n] == pytest.approx(alpha + beta * n, rel=0.02), n


def test_the_regimes_are_found_where_the_line_breaks():
    sizes = [8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 32 << 20, 64 << 20]

    def seconds(n: int) -> float:  # eager, cache-resident, memory-bound
        return 1e-6 + n / 5e9 if n <= 4096 else 3e-6 + n / 1.5e10 if n <= 1 << 20 else 5e-5 + n / 6e9

    found = fit_segments(sizes, [seconds(n) for n in sizes])
    assert [limit for limit, _, _ in found] == [4096, 1 << 20, float("inf")]
    assert [(a, 1 / b) for _, a, b in found] == [
        (pytest.approx(1e-6), pytest.approx(5e9)), (pytest.approx(3e-6), pytest.approx(1.5e10)),
        (pytest.approx(5e-5), pytest.approx(6e9)),
    ]  # fmt: skip
    assert len(fit_segments(sizes[:4], [seconds(n) for n in sizes[:4]])) == 1  # too few sizes to split
