"""The simulated cluster (scaledl.sim): the same code as over MPI, repeatable, and honest about failures.

SimGrid is optional: without it these tests skip, saying why (CI installs Debian's python3-simgrid).
"""

from __future__ import annotations

import csv
import json
import re
import subprocess
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from mpi_run import run_python, run_train
from scaledl.run_record import read_run_json
from scaledl.sim.loader import available
from scaledl.sim.platform import resolve

pytestmark = pytest.mark.skipif(not available(), reason="SimGrid's Python bindings are not installed (python3-simgrid)")

QUIET = {"capture_output": True, "text": True, "timeout": 240}
TRAIN = ["--model", "lenet", "--batch-size", "16", "--eval-every", "10", "--lr", "0.05"]


def simulate(args: list[str], timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_python(["-m", "scaledl", "simulate", *args], timeout=timeout, env=env)


def simulate_side_by_side(*runs: list[str]) -> list[subprocess.CompletedProcess]:
    """Independent simulations, two at a time: each runs on one core, and its simulated clock knows no load."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(simulate, runs))


def run_args(data, out, algorithm: str, steps: int = 20) -> list[str]:
    return ["--data", str(data), "--out-dir", str(out), "--algorithm", algorithm, "--max-steps", str(steps), *TRAIN]


def weights(out) -> dict[str, torch.Tensor]:
    return torch.load(out / "model.pt")


# `scaledl simulate` in a process whose pid is argv[1]: a pid's digits vary between runs (pids wrap around)
AS_PID = textwrap.dedent("""
    import os, sys
    os.getpid = lambda: int(sys.argv[1])
    from scaledl.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_the_simulated_clock_does_not_depend_on_the_process_id(digits_h5, tmp_path):
    """What the ranks exchange is priced by its bytes: a pid in it (a rank's announcement) moved the clock of
    one run in three by a fraction of a nanosecond, and two simulations differed in their last digits."""
    seconds = []
    for pid in (7, 1234567):
        out = tmp_path / f"pid{pid}"
        argv = ["simulate", "--platform-file", "laptop", "--ranks", "2", "--time-only"]
        proc = run_python(["-c", AS_PID, str(pid), *argv, *run_args(digits_h5, out, "sync_sgd", 3)])
        assert proc.returncode == 0, proc.stderr[-2000:]
        seconds.append(read_run_json(out / "run.json")["seconds_per_step"])
    assert seconds[0] == seconds[1]


def test_a_simulated_synchronous_run_is_bitwise_the_mpi_run(digits_h5, tmp_path):
    # P = 2: every allreduce is one addition, so the simulated collectives sum exactly as MPI's do
    real = run_train(2, run_args(digits_h5, tmp_path / "mpi", "sync_sgd"))
    assert real.returncode == 0, real.stderr[-2000:]
    sim = simulate(["--platform-file", "laptop", "--ranks", "2", *run_args(digits_h5, tmp_path / "sim", "sync_sgd")])
    assert sim.returncode == 0, sim.stderr[-2000:]
    a, b = weights(tmp_path / "mpi"), weights(tmp_path / "sim")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    record = read_run_json(tmp_path / "sim" / "run.json")
    assert record["transport"]["kind"] == "simulated" and record["transport"]["platform"] == "laptop"
    assert record["platform"] == "laptop"  # without --platform, the simulated platform's name (not "local")
    assert read_run_json(tmp_path / "mpi" / "run.json")["transport"] == {"kind": "mpi"}


def test_two_simulations_of_an_asynchronous_algorithm_are_identical(digits_h5, tmp_path):
    runs = [
        ["--platform-file", "k80x8", "--ranks", "4", "--threads", "1",
         *run_args(digits_h5, tmp_path / n, "hogwild_easgd", 30)]
        for n in "ab"
    ]  # fmt: skip
    for proc in simulate_side_by_side(*runs):
        assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    metrics = [(tmp_path / n / "metrics.csv").read_text() for n in ("a", "b")]
    assert metrics[0] == metrics[1]  # simulated clocks included, to the last digit
    # evaluated on the job's one thread, not on every core of the machine (which the job beside it uses)
    assert read_run_json(tmp_path / "a" / "run.json")["evaluation"]["threads"] == 1


def quiet_copy(tmp_path, name: str = "k80x8"):
    """The shipped platform `name` without its timing noise (every noise_* property removed)."""
    from scaledl.sim.platform import load

    text = load(name).path.read_text()
    quiet = tmp_path / f"{name}-quiet.xml"
    quiet.write_text("\n".join(line for line in text.splitlines() if 'id="noise_' not in line) + "\n")
    return quiet


def test_timing_noise_makes_each_seed_its_own_schedule_and_without_it_prices_are_the_same(digits_h5, tmp_path):
    """Prices depend only on shapes: without noise two seeds of a synchronous run take the same simulated
    seconds per step (the behaviour before noise); with the platform's noise each seed is its own schedule."""
    cases = [(quiet, seed) for quiet in (False, True) for seed in ("0", "1")]
    platforms = {False: "k80x8", True: str(quiet_copy(tmp_path))}
    runs = [
        ["--platform-file", platforms[quiet], "--ranks", "2", "--seed", seed]
        + run_args(digits_h5, tmp_path / f"{quiet}-{seed}", "sync_easgd", steps=12)
        for quiet, seed in cases
    ]
    per_step = {}
    for (quiet, seed), proc in zip(cases, simulate_side_by_side(*runs)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        per_step[quiet, seed] = read_run_json(tmp_path / f"{quiet}-{seed}" / "run.json")["seconds_per_step"]
    assert per_step[True, "0"] == per_step[True, "1"]
    assert per_step[False, "0"] != per_step[False, "1"]


def test_noise_breaks_the_lock_free_windows_lockstep(digits_h5, tmp_path):
    """At one (η, β, seed), Hogwild EASGD's workers read the center at instants of their own, so its numerics
    are not Sync EASGD's round (on identical noiseless devices they can fall into lockstep and compute it).
    At P = 8, where the paper's window verdicts live; at P = 4 the workers' transfers share the links so evenly
    that their first ten rounds still read the same center (the two first differ at step 20, by 1e-5)."""
    sides = (("hogwild_easgd", 9), ("sync_easgd", 8))
    runs = [["--platform-file", "k80x8", "--ranks", str(n), *run_args(digits_h5, tmp_path / a, a)] for a, n in sides]
    losses = {}
    for (algorithm, _), proc in zip(sides, simulate_side_by_side(*runs)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        rows = list(csv.DictReader((tmp_path / algorithm / "metrics.csv").open()))
        losses[algorithm] = [float(r["test_loss"]) for r in rows if r["test_loss"]]
    assert len(losses["hogwild_easgd"]) == len(losses["sync_easgd"]) >= 2
    assert max(abs(a / b - 1) for a, b in zip(*losses.values())) > 1e-4, losses


def test_simulated_hogwild_sgd_is_stale_and_each_seed_its_own_schedule(digits_h5, tmp_path):
    histograms = []
    runs = [["--platform-file", "k80x8", "--ranks", "5", "--seed", seed] for seed in "01"]
    runs = [[*r, *run_args(digits_h5, tmp_path / r[-1], "hogwild_sgd", steps=20)] for r in runs]
    for seed, proc in zip("01", simulate_side_by_side(*runs)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        staleness = read_run_json(tmp_path / seed / "run.json")["staleness"]
        assert staleness["max"] > 0, staleness  # a lock-free window's reads are not all of the newest center
        histograms.append(staleness["histogram"])
    assert histograms[0] != histograms[1]


@pytest.mark.parametrize("algorithm, ranks", [("sync_easgd", 2), ("hogwild_easgd", 3)])
def test_time_only_gives_a_full_simulations_seconds_per_step(digits_h5, tmp_path, algorithm, ranks):
    """Prices need only shapes: skipping the numerics leaves every charge as it was. Not to the bit: an
    operation whose output shape depends on values (run for real on skipped, unwritten inputs) may price a few
    bytes apart, and a lock-free window's schedule carries that on."""
    sides = ("full", "time_only")
    runs = [
        ["--platform-file", "k80x8", "--ranks", str(ranks), *run_args(digits_h5, tmp_path / side, algorithm, 12)]
        + (["--time-only"] if side == "time_only" else [])
        for side in sides
    ]
    records = {}
    for side, proc in zip(sides, simulate_side_by_side(*runs)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        records[side] = read_run_json(tmp_path / side / "run.json")
    full, time_only = records["full"], records["time_only"]
    assert time_only["seconds_per_step"] == pytest.approx(full["seconds_per_step"], rel=1e-3)
    assert time_only["transport"]["time_only"] and time_only["final"]["test_accuracy"] is None
    assert full["final"]["test_accuracy"] > 0.1


def test_the_ranks_of_a_node_share_its_cpu_cores_for_their_host_work(digits_h5, tmp_path):
    """The batch is prepared on the node's CPU host, a socket of 12 cores: one GPU worker has a core to itself,
    and so do four on a socket; on sockets of one core, eight share it."""
    one_core = tmp_path / "k80x8_one_core.xml"
    one_core.write_text(resolve("k80x8").read_text().replace('core="12"', 'core="1"'))
    cases = {"1": ("k80x8", "1"), "8": ("k80x8", "8"), "8 on one core": (str(one_core), "8")}
    runs = [
        [
            "--platform-file",
            platform,
            "--ranks",
            n,
            *run_args(digits_h5, tmp_path / case.replace(" ", "_"), "sync_sgd", 6),
        ]
        for case, (platform, n) in cases.items()
    ]
    data = {}
    for case, proc in zip(cases, simulate_side_by_side(*runs)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        data[case] = read_run_json(tmp_path / case.replace(" ", "_") / "run.json")["phases"]["workers_mean"]["data_s"]
    assert data["8"] < 1.25 * data["1"], data  # a core each (the noise draws differ, the prices do not)
    assert data["8 on one core"] > 2 * data["1"], data


@pytest.mark.parametrize(
    "algorithm, ranks",
    [("easgd", 3), ("async_easgd", 3), ("sync_easgd3", 2), ("local_sgd", 2)],  # one per message pattern
)
def test_every_pattern_runs_on_the_simulated_gpu_node(digits_h5, tmp_path, algorithm, ranks):
    out = tmp_path / algorithm
    proc = simulate(["--platform-file", "k80x8", "--ranks", str(ranks), *run_args(digits_h5, out, algorithm)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = read_run_json(out / "run.json")
    assert record["platform"] == record["transport"]["platform"] == "k80x8"  # no --platform: the simulated one
    hosts = record["transport"]["rank_hosts"]
    assert hosts[0] == ("cpu" if algorithm in ("easgd", "async_easgd") else "gpu0")  # the paper's CPU master
    assert record["stop"]["reason"] == "max_steps" and record["stop"]["steps"] == 20
    phases = record["phases"]["workers_mean"]
    assert phases["compute_s"] > 0 and phases["comm_s"] > 0  # charged by the cost model and the network
    assert record["phases"]["per_rank"][0]["host"] == hosts[0]


def test_weights_on_the_gpus_move_peer_to_peer_and_a_host_center_through_the_host(digits_h5, tmp_path):
    # k80x8, P = 2 (gpu0 and gpu1: one board's PCIe switch). Sync EASGD2 keeps the weights on the GPUs: the simulated
    # MPI is CUDA-aware, so its messages go GPU to GPU with no staging copy; forced to host staging (--backend mpi),
    # the same arithmetic pays the copies across PCIe; Sync EASGD1 keeps the center in host memory: staged.
    cases = {"p2p": ("sync_easgd2", []), "staged": ("sync_easgd2", ["--backend", "mpi"]), "host": ("sync_easgd1", [])}
    runs = [
        [
            "--platform-file",
            "k80x8",
            "--ranks",
            "2",
            *run_args(digits_h5, tmp_path / case, alg, 6),
            "--time-only",
            *more,
        ]
        for case, (alg, more) in cases.items()
    ]
    runs.append(runs.pop(0))  # three runs, two at a time
    records = {}
    for case, proc in zip(("staged", "host", "p2p"), simulate_side_by_side(*runs)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        records[case] = read_run_json(tmp_path / case / "run.json")
    backend = {case: record["codesign"]["backend"] for case, record in records.items()}
    assert backend == {"p2p": "cuda_aware_mpi", "staged": "mpi", "host": "mpi"}
    phases = {case: record["phases"]["workers_mean"] for case, record in records.items()}
    assert phases["p2p"]["param_copy_s"] == 0 < phases["staged"]["param_copy_s"]
    assert phases["p2p"]["comm_s"] > 0
    moved = {case: p["comm_s"] + p["param_copy_s"] for case, p in phases.items()}
    assert moved["p2p"] < moved["staged"], moved
    assert records["p2p"]["seconds_per_step"] < records["staged"]["seconds_per_step"]


def test_a_regime_map_simulates_each_side_with_its_own_runs_settings(digits_h5, tmp_path):
    sides = (("sync_easgd3", 2, "16"), ("easgd", 3, "32"))  # different batch sizes
    simulations = []
    for algorithm, ranks, batch in sides:
        flags = ["--data", str(digits_h5), "--out-dir", str(tmp_path / algorithm), "--algorithm", algorithm]
        flags += ["--model", "lenet", "--batch-size", batch, "--max-steps", "6", "--eval-every", "6"]
        simulations.append(["--platform-file", "k80x8", "--ranks", str(ranks), *flags, "--target-accuracy", "0.99"])
    runs = {}
    for (algorithm, _, _), proc in zip(sides, simulate_side_by_side(*simulations)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[algorithm] = read_run_json(tmp_path / algorithm / "run.json")
    cmd = ["-m", "scaledl", "regime-map", "--platform-file", "k80x8", "--claim", "sync_easgd3:easgd"]
    cmd += ["--workers", "2", "--data", str(digits_h5), "--runs", str(tmp_path / "sync_easgd3" / "run.json")]
    cmd += [str(tmp_path / "easgd" / "run.json"), "--bandwidth-factors", "0.01,1", "--speed-factors", "1"]
    cmd += ["--steps", "6", "--jobs", "2", "--out-dir", str(tmp_path / "map")]
    proc = run_python(cmd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {row["bandwidth_factor"]: row for row in csv.DictReader((tmp_path / "map" / "map.csv").open())}
    for algorithm, record in runs.items():
        # the base point repeats each side's run with its own settings (batch size included): the same s/step,
        # through a platform file written anew (one CI run differed in the last bit: 1 ulp, not a setting)
        assert float(rows["1.0"][f"{algorithm}_s_per_step"]) == pytest.approx(record["seconds_per_step"], rel=1e-12)
        assert float(rows["0.01"][f"{algorithm}_s_per_step"]) > record["seconds_per_step"]  # a slower network
    # neither side reached 0.99 in 6 steps: no seed can decide, at any point
    assert {row["verdict"] for row in rows.values()} == {"inconclusive"}
    assert (tmp_path / "map" / "map.png").stat().st_size > 0


def test_a_sensitivity_sweep_varies_each_constant_alone_on_the_sides_runs(digits_h5, tmp_path):
    simulations = []
    for algorithm in ("sync_sgd", "sync_easgd"):
        flags = ["--data", str(digits_h5), "--out-dir", str(tmp_path / algorithm), "--algorithm", algorithm]
        flags += ["--model", "lenet", "--batch-size", "16", "--max-steps", "3", "--eval-every", "3"]
        simulations.append(["--platform-file", "k80x8", "--ranks", "2", *flags, "--target-accuracy", "0.99"])
    runs = {}
    for algorithm, proc in zip(("sync_sgd", "sync_easgd"), simulate_side_by_side(*simulations)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[algorithm] = read_run_json(tmp_path / algorithm / "run.json")
    cmd = ["-m", "scaledl", "sensitivity", "--platform-file", "k80x8", "--claim", "sync_sgd:sync_easgd"]
    cmd += ["--workers", "2", "--data", str(digits_h5), "--runs", *(str(tmp_path / a / "run.json") for a in runs)]
    cmd += ["--constants", "efficiency,pcie_bw", "--factors", "0.5", "--steps", "3", "--jobs", "2"]
    cmd += ["--out-dir", str(tmp_path / "sweep")]
    proc = run_python(cmd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = csv.DictReader((tmp_path / "sweep" / "points.csv").open())
    points = {(row["constant"], float(row["factor"])): row for row in rows}
    assert set(points) == {("base", 1.0), ("efficiency", 0.5), ("pcie_bw", 0.5)}
    for algorithm, record in runs.items():
        # the base point repeats each side's run; half the efficiency or the PCIe bandwidth slows a step
        base = float(points["base", 1.0][f"{algorithm}_s_per_step"])
        assert base == pytest.approx(record["seconds_per_step"], rel=1e-12)  # as the regime map's base point
        for constant in ("efficiency", "pcie_bw"):
            assert float(points[constant, 0.5][f"{algorithm}_s_per_step"]) > record["seconds_per_step"]
    constants = list(csv.DictReader((tmp_path / "sweep" / "sensitivity.csv").open()))
    assert [(row["constant"], row["base_value"]) for row in constants] == [
        ("efficiency", "0.3-0.35"),  # the CPU's and the GPUs'
        ("pcie_bw", "1.2e+10 B/s"),
    ]
    # neither side reached 0.99 in 3 steps: no seed can decide, anywhere, so nothing flips
    assert {row["conclusion"] for row in constants} == {"inconclusive across ×0.5"}
    assert "inconclusive across ×0.5 of every constant" in (tmp_path / "sweep" / "sensitivity.md").read_text()


def test_a_sensitivity_sweep_of_an_asynchronous_pair_needs_whole_runs(digits_h5, tmp_path):
    cmd = ["-m", "scaledl", "sensitivity", "--platform-file", "k80x8", "--claim", "async_easgd:sync_sgd"]
    cmd += ["--workers", "2", "--data", str(digits_h5), "--runs", str(tmp_path), "--out-dir", str(tmp_path / "s")]
    proc = run_python(cmd)
    assert proc.returncode == 2 and "give --whole-runs" in proc.stderr and "Traceback" not in proc.stderr


def test_a_failed_host_ends_a_round_robin_job_naming_the_worker(digits_h5, tmp_path):
    proc = simulate(
        [
            "--platform-file",
            "k80x8",
            "--ranks",
            "3",
            "--fail",
            "gpu1:0.05",
            *run_args(digits_h5, tmp_path / "r", "easgd", steps=200),
        ]
    )
    # as over MPI: the master either fails to reach it (lost during its turn) or waits out its liveness limit
    # (it died computing, so its weights never come); either way one line names it
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    error = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(error) == 1 and re.search(r"\brank 2[ /]", error[0]), proc.stderr


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--platform-file", "nowhere"], "unknown platform 'nowhere'"),
        (["--platform-file", "k80x8", "--ranks", "12"], "has 8 rank slot(s)"),
        (["--platform-file", "k80x8", "--fail", "gpu9:1"], "no host 'gpu9'"),
        (["--platform-file", "k80x8", "--host-speed", "gpu1:0"], "--host-speed gpu1:0"),
        (["--platform-file", "k80x8", "--center-window", "shared"], "--center-window shared cannot be simulated"),
        (["--platform-file", "k80x8", "--time-only", "--target-accuracy", "0.9"], "no accuracy can be reached"),
    ],
)
def test_bad_simulation_input_is_one_line(digits_h5, tmp_path, extra, words):
    args = ["--ranks", "2", *run_args(digits_h5, tmp_path / "r", "sync_sgd")]
    proc = simulate([*args, *extra])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr


def test_a_bad_platform_file_is_one_line(digits_h5, tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<platform version='4.1'><zone id='z' routing='Full'><host id='h' speed='fast'/></zone>")
    proc = simulate(["--platform-file", str(bad), "--ranks", "1", *run_args(digits_h5, tmp_path / "r", "sync_sgd")])
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "bad.xml" in proc.stderr


def test_without_simgrid_the_simulation_says_how_to_install_it(digits_h5, tmp_path):
    env = {"SCALEDL_SIMGRID": str(tmp_path / "missing.so")}
    proc = simulate(
        ["--platform-file", "laptop", "--ranks", "1", *run_args(digits_h5, tmp_path / "r", "sync_sgd")], env=env
    )
    assert proc.returncode == 2
    assert "python3-simgrid" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


COLLECTIVES = textwrap.dedent(
    """
    import numpy as np, sys
    from scaledl.comm import transport
    from scaledl.sim.mpi import RMA_SEGMENT_BYTES
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    P = int(sys.argv[1])
    failures = []

    def main():
        MPI = transport.MPI
        comm = MPI.COMM_WORLD
        r = comm.Get_rank()
        for n in (3, 1000, 100_000):  # the short and the long algorithms
            x = (np.arange(n, dtype=np.float64) + 1) * (r + 1)
            comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)
            failures.append(not np.array_equal(x, (np.arange(n) + 1) * P * (P + 1) / 2))
            y = np.full(n, float(r)) if r == 1 else np.zeros(n)
            comm.Bcast(y, root=1)
            failures.append(not np.all(y == 1.0))
            out = np.zeros(n) if r == 2 else None
            comm.Reduce(np.full(n, r + 1.0), out, op=MPI.SUM, root=2)
            failures.append(r == 2 and not np.all(out == P * (P + 1) / 2))
        failures.append(comm.allgather(r) != list(range(P)))
        failures.append(comm.bcast({"a": r}, root=P - 1) != {"a": P - 1})
        sub = comm.Split(r % 2, key=-r)
        failures.append(sub.Get_size() != len(range(r % 2, P, 2)) or sub.allgather(r)[0] != max(range(r % 2, P, 2)))
        n = 3 * RMA_SEGMENT_BYTES // 8 + 5  # several segments and a short one: concurrent accumulates lose none
        win = MPI.Win.Allocate(8 * n if r == 0 else 0, disp_unit=8, comm=comm)
        win.Lock(0, MPI.LOCK_SHARED)
        win.Accumulate(np.ones(n), 0, op=MPI.SUM)
        win.Unlock(0)
        comm.Barrier()
        if r == P - 1:
            seen = np.zeros(n)
            win.Lock(0, MPI.LOCK_SHARED)
            win.Get_accumulate(np.zeros(0), seen, 0, op=MPI.NO_OP)
            win.Unlock(0)
            failures.append(not np.all(seen == P))
        win.Free()

    outcome = Simulation(load("cori_knl"), P, False).run(main)
    print("status", outcome.status, "failures", sum(map(bool, failures)), outcome.error or "")
    """
)


OVERSUBSCRIBED = textwrap.dedent(
    """
    import sys
    import numpy as np
    from scaledl.comm import transport
    from scaledl.sim.cluster import this_rank
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    finished = {}

    def main():
        comm = transport.MPI.COMM_WORLD
        rank, sg = comm.Get_rank(), this_rank().cluster.sg
        if rank == 0:  # a master, blocked in a receive from each worker
            for source in (1, 2):
                comm.Recv(np.zeros(1), source=source, tag=7)
        else:  # a worker: one second of compute at the host's speed, then its message
            sg.this_actor.execute(this_rank().host.speed)
            comm.Send(np.ones(1), dest=0, tag=7)
        finished[rank] = sg.Engine.clock

    outcome = Simulation(load(sys.argv[1]), 3, False).run(main)
    print("status", outcome.status, "finished", *(f"{finished[r]:.3f}" for r in sorted(finished)))
    """
)

BOX = """<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="z" routing="Full">
    <host id="box" speed="1e9f" core="2">
      <prop id="slots" value="3"/><prop id="memory_bw" value="1e10Bps"/>{waiting}
    </host>
  </zone>
</platform>
"""


def test_a_polling_master_takes_a_core_from_the_workers_it_waits_for(tmp_path):
    """Three ranks on two cores: while the master blocks, the two workers' second of compute takes a second
    (the default: a waiting rank takes no core) or 1.5 s when waiting ranks poll (three busy on two cores)."""
    script = tmp_path / "oversubscribed.py"
    script.write_text(OVERSUBSCRIBED)
    finished = {}
    for waiting in ("", "blocks", "polls"):
        platform = tmp_path / f"box-{waiting or 'default'}.xml"
        platform.write_text(BOX.format(waiting=f'<prop id="waiting" value="{waiting}"/>' if waiting else ""))
        proc = run_python([str(script), str(platform)], timeout=120)
        assert proc.returncode == 0 and "status 0" in proc.stdout, proc.stdout + proc.stderr[-2000:]
        finished[waiting] = proc.stdout.split("finished")[1].split()
    assert finished[""] == finished["blocks"] == ["1.000", "1.000", "1.000"]
    assert finished["polls"] == ["1.500", "1.500", "1.500"]


def test_a_bad_waiting_property_is_one_line(tmp_path):
    from scaledl.errors import UserError
    from scaledl.sim.platform import load

    platform = tmp_path / "box.xml"
    platform.write_text(BOX.format(waiting='<prop id="waiting" value="spins"/>'))
    with pytest.raises(UserError, match="has waiting 'spins'; one of blocks, polls"):
        load(str(platform))


@pytest.mark.parametrize("ranks", [3, 4, 5, 8])
def test_the_simulated_collectives_compute_what_mpi_does(tmp_path, ranks):
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES)
    proc = run_python([str(script), str(ranks)], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "status 0 failures 0" in proc.stdout, proc.stdout + proc.stderr[-2000:]


REPLICAS = textwrap.dedent(
    """
    import sys
    import numpy as np, torch
    from scaledl.comm import transport
    from scaledl.sim.platform import load
    from scaledl.sim.run import Simulation

    P, N = 4, 1 << 20
    seen = {}

    def main():
        MPI = transport.MPI
        comm = MPI.COMM_WORLD
        r = comm.Get_rank()
        weights = torch.full((N,), float(r + 1))  # a replica: the same memory on every rank
        flag = np.array([r + 1], dtype=np.int64)  # a control value: each rank's own
        t0 = MPI.Wtime()
        comm.Allreduce(MPI.IN_PLACE, weights.numpy(), op=MPI.SUM)
        comm.Allreduce(MPI.IN_PLACE, flag, op=MPI.SUM)
        seen[r] = (weights.data_ptr(), float(weights[0]), int(flag[0]), MPI.Wtime() - t0)

    outcome = Simulation(load("k80x8"), P, False, time_only=sys.argv[1] == "time-only").run(main)
    pointers = {p for p, _, _, _ in seen.values()}
    print(f"status={outcome.status} memories={len(pointers)}",
          f"summed={sorted({w == P * (P + 1) / 2 for _, w, _, _ in seen.values()})}",
          f"flag={sorted({f for _, _, f, _ in seen.values()})}",
          f"seconds={max(s for _, _, _, s in seen.values()):.9f}")
    """
)


def test_time_only_ranks_share_their_large_buffers_whose_messages_are_priced_but_not_carried(tmp_path):
    """A full simulation sums every rank's weights; a time-only one gives the ranks one replica (a large
    allocation's values mean nothing there: not even its fill is made), carries no values in its messages and
    prices them alike; a small control array is each rank's own and is summed in both."""
    script = tmp_path / "replicas.py"
    script.write_text(REPLICAS)
    lines = []
    for side in ("full", "time-only"):  # one simulation per process: SimGrid's engine is one per process
        proc = run_python([str(script), side], timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines.append(proc.stdout.splitlines()[-1])
    full, fast = lines
    assert "status=0 memories=4 summed=[True] flag=[10]" in full
    assert "status=0 memories=1 summed=[False] flag=[10]" in fast
    assert full.split("seconds=")[1] == fast.split("seconds=")[1]


def test_netbench_measures_a_simulated_platform(tmp_path):
    out = tmp_path / "nb.json"
    cmd = ["-m", "scaledl", "netbench", "--platform-file", "k80x8", "--ranks", "2", "--out", str(out)]
    proc = run_python([*cmd, "--max-size", "1M", "--repeats", "1", "--iters", "2", "--quiet"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    # MPI moves host buffers: between two GPUs of one node, through the CPU's memory (the platform's loopback,
    # 0.5 µs and 60 GB/s), as netbench measures it on a real GPU node; the PCIe copies are the phases' own
    assert result["alpha_s"] == pytest.approx(5e-7, rel=0.05)
    assert 1 / result["beta_s_per_byte"] == pytest.approx(6e10, rel=0.05)
    assert result["machine"]["simulated_on"] == "k80x8" and result["machine"]["hosts"] == ["gpu0", "gpu1"]
