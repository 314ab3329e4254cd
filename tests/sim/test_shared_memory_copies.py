"""A message between two ranks of one host is copied by their cores, not moved over a link: on a host whose
cores are busy it takes longer and slows the ranks computing there (scaledl.sim.cluster.Cluster.transfer)."""

from __future__ import annotations

import json
import textwrap

import pytest

from mpi_run import run_python
from one_host import one_host_platform
from scaledl.sim.loader import available

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

SPEED, BANDWIDTH, NBYTES, COMPUTE_S = 1e9, 1e9, 1_000_000, 0.01  # the message's line: 1 ms; the compute 10 ms
# rank 1 computes for COMPUTE_S (or only waits) while rank 0 sends it NBYTES, starting at DELAY_S (rank 1 is in
# its state by then); each part says when it ended
DELAY_S = 1e-9
PROGRAM = textwrap.dedent(f"""
    import json, sys
    import numpy as np
    from scaledl.comm.transport import MPI
    from scaledl.sim.cluster import simgrid
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    ended = {{}}

    def main():
        sg, comm = simgrid(), MPI.COMM_WORLD
        buf = np.zeros({NBYTES} // 8)
        if comm.Get_rank() == 0:
            sg.this_actor.sleep_for({DELAY_S})
            comm.Send(buf, dest=1)
            ended["send"] = sg.Engine.clock - {DELAY_S}
        else:
            if sys.argv[2] == "compute":
                sg.this_actor.execute({COMPUTE_S * SPEED})
                ended["compute"] = sg.Engine.clock
            comm.Recv(buf, source=0)

    outcome = Simulation(load(sys.argv[1]), 2, dedicated_master=False).run(main)
    assert outcome.status == 0, outcome.error or outcome.crashed
    print(json.dumps(ended))
""")
LINE = NBYTES / BANDWIDTH


def _ended(tmp_path, cores: int, rank1: str = "compute", waiting: str = "blocks") -> dict:
    platform = tmp_path / "box.xml"
    loopback = {"network/loopback-lat": "0", "network/loopback-bw": f"{BANDWIDTH:g}"}
    platform.write_text(
        one_host_platform(SPEED, cores, {"slots": "2", "memory_bw": "1e10Bps", "waiting": waiting}, loopback)
    )
    proc = run_python(["-c", PROGRAM, str(platform), rank1], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_with_free_cores_a_message_takes_its_line_and_slows_nobody(tmp_path):
    ended = _ended(tmp_path, cores=3)  # the compute and both copies each have a core
    assert ended["send"] == pytest.approx(LINE, rel=1e-6)
    assert ended["compute"] == pytest.approx(COMPUTE_S, rel=1e-6)


def test_on_a_busy_core_the_copies_share_it_with_the_compute(tmp_path):
    ended = _ended(tmp_path, cores=1)
    # one core, three executions (the compute, the sender's copy in, the receiver's copy out) at a third each
    # until the copies are done (3 lines); the compute has then done one line's work and ends 2 lines late
    assert ended["send"] == pytest.approx(3 * LINE, rel=1e-6)
    assert ended["compute"] == pytest.approx(COMPUTE_S + 2 * LINE, rel=1e-6)
    # two cores: three executions at two thirds each, 1.5 lines for the copies
    assert _ended(tmp_path, cores=2)["send"] == pytest.approx(1.5 * LINE, rel=1e-6)


def test_a_polling_receiver_copies_with_the_core_it_holds(tmp_path):
    # one core; rank 1 blocked in its receive. Polling, it spins on the core and its spin does its copy: the
    # sender's copy and the spin share the core (2 lines). Blocked without polling, it holds no core and both
    # copies run on it (2 lines as well, but from two executions of the line each)
    assert _ended(tmp_path, cores=1, rank1="wait", waiting="polls")["send"] == pytest.approx(2 * LINE, rel=1e-6)
    assert _ended(tmp_path, cores=2, rank1="wait", waiting="polls")["send"] == pytest.approx(LINE, rel=1e-6)
    assert _ended(tmp_path, cores=1, rank1="wait", waiting="blocks")["send"] == pytest.approx(2 * LINE, rel=1e-6)


BURST = 4
BURST_PROGRAM = textwrap.dedent(f"""
    import json, sys
    import numpy as np
    from scaledl.comm.transport import MPI
    from scaledl.sim.cluster import simgrid
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    ended = {{}}

    def main():
        sg, comm = simgrid(), MPI.COMM_WORLD
        buf = np.zeros({NBYTES} // 8)
        for _ in range({BURST}):
            if comm.Get_rank() == 0:
                comm.Send(buf, dest=1)
            else:
                comm.Recv(buf, source=0)
        ended[comm.Get_rank()] = sg.Engine.clock

    outcome = Simulation(load(sys.argv[1]), 2, dedicated_master=False).run(main)
    assert outcome.status == 0, outcome.error or outcome.crashed
    print(json.dumps(ended))
""")


def test_back_to_back_messages_each_take_one_line_when_the_receiver_polls(tmp_path):
    # two cores, rank 1 receiving message after message: it re-enters its receive at the instant the next send
    # starts, so it is polling and its spin does its copy; no message is priced as three executions on two
    # cores (1.5 lines), which a send that looked before the receiver got back to its call used to be
    platform = tmp_path / "box.xml"
    loopback = {"network/loopback-lat": "0", "network/loopback-bw": f"{BANDWIDTH:g}"}
    platform.write_text(
        one_host_platform(SPEED, 2, {"slots": "2", "memory_bw": "1e10Bps", "waiting": "polls"}, loopback)
    )
    proc = run_python(["-c", BURST_PROGRAM, str(platform)], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ended = json.loads(proc.stdout.strip().splitlines()[-1])
    assert ended["0"] == pytest.approx(BURST * LINE, rel=1e-6)
    assert ended["1"] == pytest.approx(BURST * LINE, rel=1e-6)
