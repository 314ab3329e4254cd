"""The sensitivity sweep's pure parts: each platform constant scaled alone (scaledl.sim.platform.CONSTANTS), the
verdicts over a constant's factors read as "holds across" or "flips at" (scaledl.report.sensitivity)."""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from scaledl.errors import UserError
from scaledl.report.sensitivity import (
    ASSUMED,
    NOT_SWEPT,
    VALIDATED,
    claim_text,
    conclusion,
    flips,
    sweep_factors,
    sweep_ranges,
    values_text,
)
from scaledl.sim.platform import CONSTANTS, _number, load, pcie_links, resolve, scaled, varied
from scaledl.validate.bands import band_factors, bands


def varied_platform(tmp_path, name: str, constant: str, factor: float):
    text, before = varied(resolve(name), constant, factor)
    path = tmp_path / f"{name}-{constant}-{factor:g}.xml"
    path.write_text(text)
    return load(path), ET.fromstring(text.split("\n", 2)[2]), before


def bandwidths(root) -> dict[str, float]:
    return {link.get("id"): _number(link.get("bandwidth"), "bandwidth") for link in root.iter("link")}


def test_each_host_constant_is_scaled_on_every_host_and_nothing_else(tmp_path):
    base = load("k80x8")
    for constant, field, before in (
        ("efficiency", "efficiency", [0.3, 0.35]),
        ("op_overhead", "op_overhead", [5e-6, 1e-5]),
        ("memory_bw", "memory_bw", [6e10, 2.4e11]),
    ):
        platform, root, values = varied_platform(tmp_path, "k80x8", constant, 0.5)
        assert sorted(set(values)) == pytest.approx(before)
        for name, host in platform.hosts.items():
            assert getattr(host, field) == pytest.approx(getattr(base.hosts[name], field) * 0.5)
            others = {"efficiency", "op_overhead", "memory_bw"} - {field}
            assert all(getattr(host, other) == getattr(base.hosts[name], other) for other in others)
            assert host.speed == base.hosts[name].speed and host.noise == base.hosts[name].noise
        assert bandwidths(root) == bandwidths(ET.parse(resolve("k80x8")).getroot())  # links untouched


def test_the_noise_level_scales_the_spreads_and_the_detours_rate_as_noise_does(tmp_path):
    base = load("k80x8")
    platform, _, values = varied_platform(tmp_path, "k80x8", "noise", 2)
    assert sorted(set(values)) == [0.03, 0.05]
    assert all(platform.hosts[name].noise == host.noise.scaled(2) for name, host in base.hosts.items())


def test_pcie_is_the_links_between_a_device_and_its_cpu_host_and_the_network_every_other(tmp_path):
    root = ET.parse(resolve("k80x8")).getroot()
    assert pcie_links(root) == {f"gpu{i}_pcie" for i in range(8)} | {f"board{i}_uplink" for i in range(4)}
    _, pcie, values = varied_platform(tmp_path, "k80x8", "pcie_bw", 0.5)
    assert bandwidths(pcie) == {**{link: 6e9 for link in pcie_links(root)}, "qpi": 28.8e9} and values == [12e9] * 12
    # k80x8's other bandwidths are the sockets' QPI link and the loopback: the network constant leaves PCIe alone
    _, network, values = varied_platform(tmp_path, "k80x8", "network_bw", 0.5)
    assert bandwidths(network) == {**{link: 12e9 for link in pcie_links(root)}, "qpi": 14.4e9}
    assert values == [28.8e9, 6e10]
    loopback = next(p for p in network.iter("prop") if p.get("id") == "network/loopback-bw")
    assert float(loopback.get("value")) == 3e10
    # a cluster without cpu_host: no PCIe at all, and its links, loopback included, are the network
    assert varied(resolve("cori_knl"), "pcie_bw", 0.5)[1] == []
    _, cluster, values = varied_platform(tmp_path, "cori_knl", "network_bw", 2)
    element = next(cluster.iter("cluster"))
    assert (element.get("bw"), element.get("loopback_bw")) == ("2e+10Bps", "2e+11Bps") and values == [1e10, 1e11]


def test_a_host_without_an_efficiency_gets_the_default_scaled(tmp_path):
    path = tmp_path / "p.xml"
    text = ET.tostring(ET.parse(resolve("laptop")).getroot(), encoding="unicode")
    path.write_text(text.replace('<prop id="efficiency" value="1" />', ""))
    assert load(path).devices()[0].efficiency == 1
    assert varied(path, "efficiency", 0.5)[1] == [1.0]
    out = tmp_path / "half.xml"
    out.write_text(varied(path, "efficiency", 0.5)[0])
    assert load(out).devices()[0].efficiency == 0.5


def test_a_regime_maps_scaling_is_still_every_bandwidth_and_the_device_speed(tmp_path):
    path = tmp_path / "s.xml"
    path.write_text(scaled(resolve("k80x8"), 10, 2))
    root = ET.parse(path).getroot()
    assert set(bandwidths(root).values()) == {1.2e11, 2.88e11}  # PCIe and QPI, ×10
    host, base = load(path).hosts["gpu0"], load("k80x8").hosts["gpu0"]
    assert (host.speed, host.memory_bw, host.efficiency) == (base.speed * 2, base.memory_bw * 2, base.efficiency)
    assert host.op_overhead == pytest.approx(base.op_overhead / 2)


def test_an_unknown_constant_is_refused_naming_the_known_ones():
    with pytest.raises(UserError, match="unknown platform constant 'speed'; one of efficiency, op_overhead"):
        varied(resolve("k80x8"), "speed", 2)
    assert set(CONSTANTS) == {"efficiency", "op_overhead", "memory_bw", "pcie_bw", "network_bw", "noise"}


def test_the_flip_is_the_first_factor_going_outward_from_one_on_each_side():
    verdicts = {0.25: "reversed", 0.5: "inconclusive", 0.71: "holds", 1.41: "holds", 2: "holds"}
    assert flips("holds", verdicts) == [0.5]
    assert flips("holds", {0.5: "holds", 2: "holds"}) == []
    assert flips("holds", {0.5: "reversed", 2: "inconclusive", 4: "holds"}) == [0.5, 2]
    assert flips("reversed", {2: "reversed", 4: "holds"}) == [4]


def test_a_constants_conclusion_names_the_flip_with_the_value_there():
    assert conclusion("efficiency", "holds", {0.5: "holds", 2: "holds"}, [0.35]) == "holds across ×0.5-×2"
    assert conclusion("efficiency", "holds", {0.5: "reversed", 2: "holds"}, [0.3, 0.35]) == (
        "holds; flips at efficiency ×0.5 (0.15-0.175: reversed)"
    )
    assert conclusion("pcie_bw", "holds", {0.5: "holds", 2: "inconclusive"}, [12e9], "B/s") == (
        "holds; flips at pcie_bw ×2 (2.4e+10 B/s: inconclusive)"
    )
    assert conclusion("pcie_bw", "holds", {}, []) == conclusion("noise", "holds", {}, [0.0]) == "not on this platform"
    assert values_text([]) == "" and values_text([0.35], factor=0.5) == "0.175"


def test_the_claims_report_reads_a_sweep_as_held_flipped_or_not_swept():
    def rows(**flipped):
        return [
            {
                "constant": c,
                "base_value": "0.35",
                "base_verdict": "holds",
                "span": "×0.5-×2",
                "flips_at": flipped.get(c, ""),
            }
            for c in ("efficiency", "pcie_bw")
        ] + [{"constant": "network_bw", "base_value": "", "base_verdict": "holds", "span": "×0.5-×2", "flips_at": ""}]

    assert claim_text(rows()) == "holds across ×0.5-×2 of every constant swept"
    assert claim_text(rows(efficiency="0.5")) == "holds; flips when efficiency ×0.5"
    assert claim_text(rows(efficiency="0.5;2", pcie_bw="2")) == (
        "holds; flips when efficiency ×0.5, efficiency ×2, pcie_bw ×2"
    )
    assert claim_text([]) == claim_text(rows()[2:]) == NOT_SWEPT


def test_the_factors_leave_out_the_base_and_need_another():
    assert sweep_factors("2,0.5,1") == [0.5, 2]
    for bad in ("1", "0,2", "x"):
        with pytest.raises(UserError, match="--factors"):
            sweep_factors(bad)


def validation_record(tmp_path) -> Path:
    """A `scaledl validate` record on k80x8 and cori_knl, made by hand: which rows bound which constant."""

    def row(id, kind, platform, published, simulated, role="held_out", nbytes=None):
        return {"id": id, "kind": kind, "platform": platform, "published": published, "source": "s",
                "constant": "c", "role": role, "nbytes": nbytes, "simulated": simulated}  # fmt: skip

    rows = [
        row("slow", "step", "k80x8", 1.0, 1.83),  # efficiency would have to be ×1.83
        row("fast", "step", "k80x8", 2.0, 1.52),  # ... or ×0.76
        row("fitted", "step", "k80x8", 1.0, 3.0, role="fit"),  # not held out: bounds nothing
        row("rate", "flop_rate", "k80x8", 2e12, 1.6e12),  # a rate 0.8× the reference: efficiency ×1.25
        row("big", "p2p", "k80x8", 4e-4, 3.84e-4, nbytes=4 << 20),  # bandwidth-bound: network_bw ×0.96
        row("tiny", "p2p", "k80x8", 1e-6, 5e-7, nbytes=4),  # the latency's: no swept constant
        row("elsewhere", "step", "cori_knl", 1.0, 5.0),
    ]
    path = tmp_path / "validate.json"
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_a_validation_record_bounds_each_constant_its_held_out_rows_decide(tmp_path):
    record = json.loads(validation_record(tmp_path).read_text())
    found = bands(record, "k80x8")
    assert found == {"efficiency": (pytest.approx(0.76), pytest.approx(1.83)), "network_bw": (pytest.approx(0.96), 1.0)}
    assert band_factors(found["efficiency"]) == [0.76, 1.83] and band_factors(found["network_bw"]) == [0.96]


def test_with_bands_each_constant_sweeps_its_validated_band_and_the_rest_the_assumed_factors(tmp_path):
    args = argparse.Namespace(
        bands=validation_record(tmp_path), platform_file="k80x8", constants=["efficiency", "memory_bw"],
        factors=[0.5, 2.0],
    )  # fmt: skip
    factors, source = sweep_ranges(args)
    assert factors == {"efficiency": [0.76, 1.83], "memory_bw": [0.5, 2.0]}
    assert source == {"efficiency": VALIDATED, "memory_bw": ASSUMED}
    args.bands = None
    assert sweep_ranges(args) == ({"efficiency": [0.5, 2.0], "memory_bw": [0.5, 2.0]}, dict.fromkeys(source, ASSUMED))
    args.bands = tmp_path / "nothing.json"
    with pytest.raises(UserError, match="--bands .*nothing.json: not a `scaledl validate --out-json` record"):
        sweep_ranges(args)


def test_bands_only_sweeps_the_validated_constants_alone_and_refuses_when_none_is(tmp_path):
    from scaledl.report.sensitivity import keep_banded

    args = argparse.Namespace(
        bands=validation_record(tmp_path), platform_file="k80x8", constants=["efficiency", "memory_bw"],
        factors=[0.5, 2.0],
    )  # fmt: skip
    args.factors_of, args.band_of = sweep_ranges(args)
    keep_banded(args)
    assert args.constants == ["efficiency"]  # memory_bw has no band: not swept
    args.constants = ["memory_bw"]
    with pytest.raises(UserError, match="--bands-only: .* validates none of memory_bw"):
        keep_banded(args)
    args.bands = None
    with pytest.raises(UserError, match="--bands-only: give --bands"):
        keep_banded(args)


def test_the_claims_report_names_each_constants_range_where_a_band_was_validated():
    rows = [
        {"constant": "efficiency", "base_value": "0.35", "base_verdict": "holds", "span": "×0.76-×1.83",
         "band": VALIDATED, "flips_at": ""},
        {"constant": "memory_bw", "base_value": "240 GB/s", "base_verdict": "holds", "span": "×0.5-×2",
         "band": ASSUMED, "flips_at": ""},
    ]  # fmt: skip
    assert claim_text(rows) == (
        "holds across every constant's range: efficiency ×0.76-×1.83 (validated), memory_bw ×0.5-×2 (assumed)"
    )
    rows[0]["flips_at"] = "1.83"
    assert claim_text(rows) == "holds; flips when efficiency ×1.83"
