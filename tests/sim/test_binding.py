"""A rank bound to one core (a host's `binding: core`): its helper thread's work takes turns with its compute
instead of running on a free core beside it, an MPI request's work is interleaved with the compute on that core,
and waiting for its helper keeps no core busy (scaledl.sim.cluster.on_core, held)."""

from __future__ import annotations

import json
import textwrap
from importlib import resources

import pytest

from mpi_run import run_python
from scaledl.run_record import read_run_json
from scaledl.sim.loader import available

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

PLATFORM = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="box" routing="Full">
    <host id="box" speed="1e9f" core="{cores}">
      <prop id="slots" value="1"/>
      <prop id="memory_bw" value="1e10Bps"/>
      <prop id="waiting" value="polls"/>
      <prop id="binding" value="{binding}"/>
    </host>
  </zone>
</platform>
"""
# one rank: a 1 ms exchange handed to its helper (a thread, or an MPI request: argv[2]), then 10 ms of compute;
# when each ended
PROGRAM = textwrap.dedent("""
    import json, sys
    from scaledl.comm import transport
    from scaledl.sim.cluster import simgrid, spawn, this_rank
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    ended = {}

    def exchange():
        this_rank().meter.charge(1e-3)
        ended["helper"] = simgrid().Engine.clock

    def main():
        pending = transport.helper().submit(exchange) if sys.argv[2] == "thread" else spawn("request", exchange)
        this_rank().meter.charge(1e-2)
        ended["compute"] = simgrid().Engine.clock
        pending.wait()
        ended["joined"] = simgrid().Engine.clock

    outcome = Simulation(load(sys.argv[1]), 1, dedicated_master=False).run(main)
    assert outcome.status == 0, outcome.error or outcome.crashed
    print(json.dumps(ended))
""")


def _ended(tmp_path, binding: str, helper: str = "thread", cores: int = 2) -> dict:
    platform = tmp_path / "box.xml"
    platform.write_text(PLATFORM.format(binding=binding, cores=cores))
    proc = run_python(["-c", PROGRAM, str(platform), helper], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_bound_ranks_helper_takes_turns_with_its_compute(tmp_path):
    free = _ended(tmp_path, "none")  # the helper on the host's other core, beside the compute
    assert free["helper"] == pytest.approx(1e-3) and free["compute"] == pytest.approx(1e-2)
    bound = _ended(tmp_path, "core")  # one core: the helper's millisecond before or after the compute's ten
    assert sorted([bound["helper"], bound["compute"]]) == [pytest.approx(1e-3), pytest.approx(1.1e-2)]
    assert bound["joined"] == pytest.approx(1.1e-2)


def test_an_mpi_requests_work_is_interleaved_with_the_compute_on_its_core(tmp_path):
    """MPICH progresses a nonblocking collective inside the rank's own calls (the backward pass's hooks): on a
    one-core host the request's millisecond and the compute share the core (2 ms for the request, 11 for the
    compute) instead of one waiting for the other; a thread's millisecond takes its turn."""
    request = _ended(tmp_path, "core", "request", cores=1)
    assert request["helper"] == pytest.approx(2e-3) and request["compute"] == pytest.approx(1.1e-2)
    thread = _ended(tmp_path, "core", "thread", cores=1)
    assert sorted([thread["helper"], thread["compute"]]) == [pytest.approx(1e-3), pytest.approx(1.1e-2)]


def test_an_unknown_binding_is_refused_in_one_line(tmp_path):
    platform = tmp_path / "box.xml"
    platform.write_text(PLATFORM.format(binding="socket", cores=2))
    proc = run_python(["-c", PROGRAM, str(platform), "thread"], timeout=240)
    assert proc.returncode != 0 and "has binding 'socket'; one of none, core" in proc.stderr


def _per_rank(tmp_path, digits_h5, factors: str | None) -> list[dict]:
    laptop = (resources.files("scaledl.sim") / "platforms" / "laptop.xml").read_text()
    prop = f'<prop id="core_factors" value="{factors}"/>' if factors else ""
    platform = tmp_path / f"cores-{factors}.xml"
    platform.write_text(laptop.replace('<prop id="binding" value="core"/>', f'<prop id="binding" value="core"/>{prop}'))
    out = tmp_path / f"run-{factors}"
    argv = ["-m", "scaledl", "simulate", "--platform-file", str(platform), "--ranks", "2", "--time-only"]
    train = ["--data", str(digits_h5), "--model", "lenet", "--algorithm", "sync_sgd", "--max-steps", "5"]
    proc = run_python([*argv, *train, "--eval-every", "100", "--threads", "1", "--out-dir", str(out)], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return read_run_json(out / "run.json")["phases"]["per_rank"]


def test_a_rank_bound_to_a_slower_core_computes_longer_and_its_peer_waits(tmp_path, digits_h5):
    """core_factors: the host's i-th rank computes at its core's speed (a virtual machine's vCPUs differ)."""
    # (within 2 %: a rank's compute also holds the allreduce's copies, interleaved with it, whose timing moves)
    even = _per_rank(tmp_path, digits_h5, None)
    assert even[1]["compute_s"] == pytest.approx(even[0]["compute_s"], rel=0.02)
    uneven = _per_rank(tmp_path, digits_h5, "1,2")
    assert uneven[0]["compute_s"] == pytest.approx(even[0]["compute_s"], rel=0.02)
    assert uneven[1]["compute_s"] == pytest.approx(2 * even[1]["compute_s"], rel=0.02)
    assert uneven[0]["wait_s"] > 0.9 * even[0]["compute_s"] > 100 * uneven[1]["wait_s"]  # synchronous: 0 waits for 1


@pytest.mark.parametrize(("props", "says"), [
    ('<prop id="binding" value="core"/><prop id="core_factors" value="1,0"/>', "positive numbers F0,F1,... needed"),
    ('<prop id="binding" value="none"/><prop id="core_factors" value="1,2"/>', "but binding 'none': set binding core"),
])  # fmt: skip
def test_core_factors_that_cannot_be_are_refused_in_one_line(tmp_path, props, says):
    platform = tmp_path / "box.xml"
    platform.write_text(PLATFORM.format(binding="core", cores=2).replace('<prop id="binding" value="core"/>', props))
    proc = run_python(["-c", PROGRAM, str(platform), "thread"], timeout=240)
    assert proc.returncode != 0 and says in proc.stderr
