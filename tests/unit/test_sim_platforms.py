"""The shipped platforms' topology as their headers state it (scaledl.sim.platform, the files themselves)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from scaledl.sim.platform import load


def k80x8_routes() -> dict[tuple[str, str], list[str]]:
    """(src, dst) → the links of its route, in order."""
    root = ET.parse(load("k80x8").path).getroot()
    return {(r.get("src"), r.get("dst")): [c.get("id") for c in r.findall("link_ctn")] for r in root.iter("route")}


def test_k80x8_hangs_half_the_gpus_off_each_socket_and_the_master_on_the_first():
    k80 = load("k80x8")
    sockets = {g.name: g.cpu_host for g in k80.devices()}
    assert sockets == {f"gpu{g}": "cpu" if g < 4 else "cpu1" for g in range(8)}
    assert [h.name for h in k80.place(9, dedicated_master=True)] == ["cpu", *sockets]
    assert {h.node for h in k80.hosts.values()} == {"node0"}  # one node: Split_type keeps every rank together


def test_k80x8_traffic_between_the_sockets_crosses_qpi_and_only_that_traffic():
    routes = k80x8_routes()
    assert routes[("cpu", "cpu1")] == ["qpi"]  # a message between the two halves' host buffers
    for (src, dst), links in routes.items():
        sides = {load("k80x8").hosts[h].cpu_host or h for h in (src, dst)}
        assert ("qpi" in links) == (len(sides) == 2), (src, dst, links)
    # GPU to GPU across sockets: up its board's switch to root complex 0, QPI, down from root complex 1
    assert routes[("gpu1", "gpu6")] == ["gpu1_pcie", "board0_uplink", "qpi", "board3_uplink", "gpu6_pcie"]
