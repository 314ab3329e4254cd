"""A calibrated platform says which code, host and time measured it, and a simulation by other code refuses it."""

from __future__ import annotations

import json

import pytest

from scaledl.codehash import code_version
from scaledl.errors import UserError
from scaledl.sim.calibrate import TEMPLATE, _code_fields, core_fields
from scaledl.sim.platform import resolve
from scaledl.sim.provenance import calibration_provenance, refuse_stale_calibration

PLATFORM_VALUES = dict(
    name="calibrated", cores=2, date="2026-12-05", stamp="2026-12-05T01:00:00Z", cpu="x86_64", torch="2.14.1",
    host="box", commit="5b2e6bb12345", alpha=2e-6, bw=3e10, netbench="local.json", speed=5e10, model="lenet",
    batch=64, step_ms=11.0, mem=3e10, overhead=1e-6, cv=0.05, detour_rate=2.0, detour_s=3e-3, fitted="cold", busy=1,
    half_rows=70.0, half_columns=3.5, half_depth=56.0, conv_overhead=4e-5, shape_count=78, shape_error=0.3,
    segments_text="", segments_prop="", **core_fields([0.009, 0.011]),
)  # fmt: skip


def platform_text(code: str) -> str:
    values = dict(PLATFORM_VALUES, code=code)
    return TEMPLATE.format(**values)


def test_the_header_names_the_code_host_and_time_that_calibrated_it():
    assert calibration_provenance(platform_text("0.1.0+abc")) == {
        "code": "0.1.0+abc", "commit": "5b2e6bb12345", "host": "box", "at": "2026-12-05T01:00:00Z"
    }  # fmt: skip
    assert calibration_provenance(resolve("laptop").read_text()) is None  # the shipped example: written before
    assert _code_fields({"version": "v", "commit": "0123456789abcdef", "dirty": True}) == {
        "code": "v", "commit": "0123456789ab+dirty"
    }  # fmt: skip


def test_a_platform_calibrated_by_other_code_is_refused_and_this_codes_is_used(tmp_path):
    stale, fresh = tmp_path / "stale.xml", tmp_path / "fresh.xml"
    stale.write_text(platform_text("0.1.0+0000000000000000"))
    fresh.write_text(platform_text(code_version()))
    with pytest.raises(UserError, match=r"calibrated by code 0\.1\.0\+0000000000000000 .*recalibrate it"):
        refuse_stale_calibration(stale)
    assert refuse_stale_calibration(fresh)["code"] == code_version()
    assert refuse_stale_calibration(resolve("k80x8")) is None  # a hand-written platform: its header says what


def test_a_calibrated_platform_prices_products_by_their_shape(tmp_path):
    from scaledl.sim.platform import load

    path = tmp_path / "calibrated.xml"
    path.write_text(platform_text(code_version()))
    device = load(path).devices()[0].device()
    assert device.gemm_halves == (70.0, 3.5, 56.0) and device.conv_overhead_s == pytest.approx(4e-5)
    assert load(resolve("k80x8")).hosts["gpu0"].device().gemm_halves is None  # a hand-made platform: one efficiency


def test_a_cold_ping_pong_with_enough_sizes_prices_each_regime_on_its_own_line(tmp_path):
    from scaledl.sim.calibrate import netbench_segments, segment_fields
    from scaledl.sim.platform import load

    def seconds(n: int) -> float:
        return 1e-6 + n / 5e9 if n <= 4096 else 3e-6 + n / 1.5e10 if n <= 1 << 20 else 5e-5 + n / 6e9

    sizes = [8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
    netbench = tmp_path / "nb.json"
    cold = [{"bytes": n, "time_s": seconds(n)} for n in sizes]
    netbench.write_text(json.dumps({"alpha_s": 1e-6, "beta_s_per_byte": 1e-10, "p2p_cold": {"table": cold}}))
    segments = netbench_segments(netbench)
    assert [limit for limit, _, _ in segments] == [4096, 1 << 20, float("inf")]
    path = tmp_path / "calibrated.xml"
    values = dict(PLATFORM_VALUES, code=code_version(), alpha=1e-6, **segment_fields(segments))
    path.write_text(TEMPLATE.format(**values))
    platform = load(path)
    assert platform.devices()[0].core_factors == (0.9, 1.1)  # each core's speed (--per-core), read back
    assert core_fields(None) == {"core_factors": None, "cores_text": "", "cores_prop": ""}  # not measured: none
    written = platform.devices()[0].message_segments
    assert [limit for limit, _, _ in written] == [4096, 1 << 20, float("inf")]
    assert [x for s in written for x in s[1:]] == pytest.approx([x for s in segments for x in s[1:]], rel=1e-5)
    assert platform.loopback == (1e-6, pytest.approx(3e10))
    netbench.write_text(json.dumps({"alpha_s": 1e-6, "beta_s_per_byte": 1e-10, "p2p_cold": {"table": cold[:4]}}))
    assert netbench_segments(netbench) is None  # too few sizes: the loopback's one line
