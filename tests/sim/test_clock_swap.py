"""The clock swap: the same messages timed by SimGrid's flow model (links shared by the transfers crossing them)
and by the closed form α + n/B of their route, sharing nothing (`scaledl simulate --clock alphabeta`)."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

from mpi_run import run_python
from scaledl.run_record import read_run_json
from scaledl.sim.loader import available

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

LATENCY, BANDWIDTH, NBYTES = 1e-5, 1e9, 10_000_000
# Two senders, one receiver, and one link into the receiver that both messages cross.
PLATFORM = f"""<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <config><prop id="network/model" value="CM02"/><prop id="network/crosstraffic" value="0"/></config>
  <zone id="z" routing="Full">
    <host id="a" speed="1e9f"/><host id="b" speed="1e9f"/><host id="c" speed="1e9f"/>
    <link id="ac" bandwidth="{10 * BANDWIDTH:g}Bps" latency="0s"/>
    <link id="bc" bandwidth="{10 * BANDWIDTH:g}Bps" latency="0s"/>
    <link id="into_c" bandwidth="{BANDWIDTH:g}Bps" latency="{LATENCY:g}s"/>
    <route src="a" dst="c"><link_ctn id="ac"/><link_ctn id="into_c"/></route>
    <route src="b" dst="c"><link_ctn id="bc"/><link_ctn id="into_c"/></route>
  </zone>
</platform>
"""


def arrivals(tmp_path, clock: str) -> list[float]:
    """When each of two messages sent at once from a and from b into c arrives, on `clock`."""
    platform = tmp_path / "shared_link.xml"
    platform.write_text(PLATFORM)
    code = textwrap.dedent(f"""
        import json
        from scaledl.sim.cluster import Cluster
        from scaledl.sim.loader import load
        sg = load()
        engine = sg.Engine(["clock"])
        engine.load_platform({str(platform)!r})
        cluster = Cluster(sg, clock={clock!r})
        times = []
        def send(src):
            cluster.send(sg.Host.by_name(src), sg.Host.by_name("c"), {NBYTES})
            times.append(sg.Engine.clock)
        for src in ("a", "b"):
            sg.Actor.create("send-" + src, sg.Host.by_name(src), send, src)
        engine.run()
        print(json.dumps(times))
    """)
    proc = run_python(["-c", code], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_alphabeta_clock_prices_each_message_alone_in_closed_form(tmp_path):
    alone = LATENCY + NBYTES / BANDWIDTH
    assert arrivals(tmp_path, "alphabeta") == [pytest.approx(alone, rel=1e-9)] * 2
    # SimGrid's model shares the narrow link: the two messages take about twice as long
    assert arrivals(tmp_path, "simgrid") == [pytest.approx(LATENCY + 2 * NBYTES / BANDWIDTH, rel=0.02)] * 2


def test_a_synchronous_run_on_either_clock_computes_the_same_weights_at_other_seconds(digits_h5, tmp_path):
    train = ["--data", str(digits_h5), "--model", "lenet", "--batch-size", "16", "--algorithm", "sync_sgd"]
    train += ["--max-steps", "6", "--eval-every", "10", "--lr", "0.05", "--message", "packed"]
    records, weights = {}, {}
    for clock in ("simgrid", "alphabeta"):
        out = tmp_path / clock
        proc = run_python(["-m", "scaledl", "simulate", "--platform-file", "k80x8", "--ranks", "4", "--clock", clock,
                           *train, "--out-dir", str(out)], timeout=240)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        records[clock], weights[clock] = read_run_json(out / "run.json"), torch.load(out / "model.pt")
    assert [records[c]["transport"]["clock"] for c in records] == ["simgrid", "alphabeta"]
    assert all(torch.equal(weights["simgrid"][k], weights["alphabeta"][k]) for k in weights["simgrid"])
    assert records["simgrid"]["seconds_per_step"] != records["alphabeta"]["seconds_per_step"]
