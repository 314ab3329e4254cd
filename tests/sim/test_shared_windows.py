"""A window in the origin's own memory host is shared memory: a Get, Put or Accumulate is the origin's loads and
stores at the host's memory speed, not a message over the loopback (scaledl.sim.mpi.Win._direct); on the α-β
clock, and between hosts, an operation stays a message (and an Accumulate's apply the target's)."""

from __future__ import annotations

import json
import textwrap

import pytest

from mpi_run import run_python
from one_host import one_host_platform
from scaledl.sim.loader import available

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

MEMORY_BW, LOOPBACK_BW, NBYTES = 1e9, 1e10, 1_000_000  # n at the memory speed: 1 ms; over the loopback: 0.1 ms
PLATFORM = one_host_platform(
    1e9,
    4,
    {"slots": "2", "memory_bw": f"{MEMORY_BW:g}Bps"},
    {"network/loopback-lat": "0", "network/loopback-bw": f"{LOOPBACK_BW:g}"},
)
# rank 1 runs one exclusive epoch of each operation on rank 0's window; how long each operation took
PROGRAM = textwrap.dedent(f"""
    import json, sys
    import numpy as np
    from scaledl.comm.transport import MPI
    from scaledl.sim.cluster import simgrid
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    took = {{}}

    def main():
        sg, comm = simgrid(), MPI.COMM_WORLD
        win = MPI.Win.Allocate({NBYTES} if comm.Get_rank() == 0 else 0, disp_unit=4, comm=comm)
        buf = np.ones({NBYTES} // 4, dtype=np.float32)
        if comm.Get_rank() == 1:
            for name in ("Get", "Put", "Accumulate"):
                win.Lock(0, MPI.LOCK_EXCLUSIVE)
                start = sg.Engine.clock
                getattr(win, name)(buf, 0)
                took[name] = sg.Engine.clock - start
                win.Unlock(0)
        comm.Barrier()
        win.Free()

    outcome = Simulation(load(sys.argv[1]), 2, dedicated_master=False, clock=sys.argv[2]).run(main)
    assert outcome.status == 0, outcome.error or outcome.crashed
    print(json.dumps(took))
""")
MEMORY_S, LOOPBACK_S = NBYTES / MEMORY_BW, NBYTES / LOOPBACK_BW


def _took(tmp_path, clock: str) -> dict:
    platform = tmp_path / "box.xml"
    platform.write_text(PLATFORM)
    proc = run_python(["-c", PROGRAM, str(platform), clock], timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_window_in_the_origins_memory_is_read_and_written_by_the_origin(tmp_path):
    took = _took(tmp_path, "simgrid")  # (to 1e-5: the call's latency is the loopback's, a few ns here)
    assert took["Get"] == pytest.approx(2 * MEMORY_S, rel=1e-5)  # read n, write n
    assert took["Put"] == pytest.approx(2 * MEMORY_S, rel=1e-5)
    assert took["Accumulate"] == pytest.approx(3 * MEMORY_S, rel=1e-5)  # read two operands, write one


def test_on_the_alphabeta_clock_an_operation_stays_a_message(tmp_path):
    took = _took(tmp_path, "alphabeta")
    assert took["Get"] == pytest.approx(LOOPBACK_S, rel=1e-6) and took["Put"] == pytest.approx(LOOPBACK_S, rel=1e-6)
    assert took["Accumulate"] == pytest.approx(LOOPBACK_S + 3 * MEMORY_S, rel=1e-6)  # the bytes moved, then applied
