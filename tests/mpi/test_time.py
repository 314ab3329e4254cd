"""The time vocabulary: evaluation off every clock, wait apart from transfer, steady state from the timeline.

The two MPI tests inject a delay far larger than the run's own timings and
check where its seconds land, with a margin of a quarter of the injected
time: a structural check (which clock holds the delay), not a benchmark.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from mpi_run import run_train
from scaledl.comm import transport
from scaledl.comm.timing import PHASES, PhaseTimer, steady_state, warmup_steps
from scaledl.errors import UserError
from scaledl.run_record import read_run_json
from scaledl.train.evaluation import EVAL_DELAY_VARIABLE
from scaledl.train.setup import straggler_factor


def phase_row(**seconds) -> list[float]:
    return [seconds.get(p, 0.0) for p in PHASES]


def test_steady_state_leaves_out_the_warmup_and_the_eval_seconds():
    # 8 steps of 0.1 s (compute 0.06, comm 0.02, wait 0.02); the first two steps take 1 s (warm-up);
    # step 5 also holds 0.5 s of eval, which is not training time
    rows = [phase_row(compute=0.9, comm=0.1)] * 2 + [phase_row(compute=0.06, comm=0.02, wait=0.02)] * 6
    rows[4] = phase_row(compute=0.06, comm=0.02, wait=0.02, eval=0.5)
    durations = [1.0, 1.0, 0.1, 0.1, 0.6, 0.1, 0.1, 0.1]
    q = steady_state(np.cumsum(durations), rows, warmup=2)
    assert q["steady_steps"] == 6 and q["warmup_steps"] == 2
    assert q["seconds_per_step"] == pytest.approx(0.1)
    assert q["transfer_per_step_s"] == pytest.approx(0.02)
    assert q["wait_per_step_s"] == pytest.approx(0.02)
    assert q["compute_per_step_s"] == pytest.approx(0.06)
    assert q["comm_share"] == pytest.approx(0.2)
    assert q["exposed_share"] == pytest.approx(0.4)


def test_warmup_is_at_most_a_quarter_of_the_run():
    assert warmup_steps(100) == 5
    assert warmup_steps(8) == 2
    assert warmup_steps(3) == 0
    assert steady_state([], np.zeros((0, len(PHASES))))["seconds_per_step"] is None


def test_straggler_spec():
    assert straggler_factor(None, 1, 2) == 1.0
    assert straggler_factor("1:3,2:1.5", 1, 3) == 3.0
    assert straggler_factor("1:3,2:1.5", 2, 3) == 1.5
    assert straggler_factor("1:3", 0, 2) == 1.0
    for bad in ("1", "a:2", "5:2", "1:0.5"):
        with pytest.raises(UserError, match="--straggler"):
            straggler_factor(bad, 0, 2)


def train(digits_h5, out, extra, env=None):
    old = os.environ.copy()
    os.environ.update(env or {})
    try:
        result = run_train(
            2,
            [
                "--data",
                str(digits_h5),
                "--model",
                "lenet",
                "--algorithm",
                "sync_sgd",
                "--out-dir",
                str(out),
                "--seed",
                "3",
                *extra,
            ],
        )
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return read_run_json(out / "run.json")


def rank(run: dict, r: int) -> dict:
    return next(p for p in run["phases"]["per_rank"] if p["rank"] == r)


@pytest.mark.mpi
def test_a_slow_evaluation_is_on_no_rank_clock(digits_h5, tmp_path):
    delay, every = 1.0, 20
    args = ["--max-steps", "80", "--eval-every", str(every), "--target-accuracy", "0.85"]
    plain = train(digits_h5, tmp_path / "plain", args)
    slow = train(digits_h5, tmp_path / "slow", args, {EVAL_DELAY_VARIABLE: str(delay)})
    assert slow["evaluation"]["delay_s"] == delay and "paused" in slow["evaluation"]["where"]
    # Every rank waits out each evaluation in its own eval phase, off its clock ...
    evaluations = slow["evaluation"]["evaluations"]
    assert evaluations >= 2
    assert rank(slow, 1)["eval_s"] >= 0.75 * evaluations * delay
    # ... so none of it is worker 1's transfer or wait (evaluating inside the loop would add delay/every
    # seconds per step there), nor the time to target (delay per evaluation before the target).
    # The margin, 25 ms a step, is 5-10x what either quantity measures per step here (transfer 0.1-2.2 ms, wait
    # 0.2-5 ms, quiet and with one core kept busy), so only an evaluation counted in the loop can break it.
    per_step = delay / every
    for key in ("transfer_per_step_s", "wait_per_step_s"):
        assert rank(slow, 1)[key] < rank(plain, 1)[key] + per_step / 2, key
    # sync_sgd is deterministic: the same snapshot reaches the target, at about the same training clock
    target_step = plain["evaluation"]["target_step"]
    assert target_step is not None and slow["evaluation"]["target_step"] == target_step
    evaluations_before = target_step // every + 1  # step 0 included
    # (the margin, half a second per evaluation before the target and at least 1 s, is about the whole training
    # clock of the plain run, 0.5-1.1 s with and without a busy core: load alone does not double it)
    assert slow["time_to_target_s"] < plain["time_to_target_s"] + evaluations_before * delay / 2
    # the stop comes at the step of the evaluation that reached the target, delayed or not
    assert slow["stop"]["steps"] == plain["stop"]["steps"] == target_step


@pytest.mark.mpi
def test_a_straggler_makes_its_peer_wait_not_transfer(digits_h5, tmp_path):
    args = ["--max-steps", "40", "--eval-every", "20"]
    plain = train(digits_h5, tmp_path / "plain", args)
    slowed = train(digits_h5, tmp_path / "slowed", [*args, "--straggler", "1:4"])
    assert rank(slowed, 1)["slowdown"] == 4.0 and rank(slowed, 0)["slowdown"] == 1.0
    # rank 1 sleeps 3 × its compute per step; rank 0 spends that in `wait`, not in `transfer`
    extra = 3 * rank(plain, 1)["compute_per_step_s"]
    # (extra is 39-63 ms here; rank 0's transfer is 0.1-2.3 ms a step and its wait 1-5 ms without a straggler,
    # quiet and with one core kept busy, so the margins, extra/2 and extra/4, are 5x what load moves them)
    r0_plain, r0_slowed = rank(plain, 0), rank(slowed, 0)
    assert r0_slowed["wait_per_step_s"] > r0_plain["wait_per_step_s"] + extra / 2
    assert r0_slowed["transfer_per_step_s"] < r0_plain["transfer_per_step_s"] + extra / 4
    assert slowed["arguments"]["straggler"] == "1:4"


class FakeClock(transport.MPITransport):
    """The host transport with a clock the test moves by hand."""

    def __init__(self):
        self.now = 0.0

    def clock(self) -> float:
        return self.now


def test_the_timer_keeps_each_steps_phases_charges_idle_time_and_resumes_from_its_state():
    clock = FakeClock()
    with transport.use(clock):
        timer = PhaseTimer()
        with timer.phase("compute"):
            clock.now += 0.5
        timer.mark_step()
        with timer.phase("comm"):
            clock.now += 0.25
        clock.now += 0.125  # outside every phase: charged to `wait` by a master's idle
        timer.mark_step(idle="wait")
        resumed = PhaseTimer()
        resumed.load_state_dict(timer.state_dict())
        with resumed.phase("update"):
            clock.now += 1.0
        resumed.mark_step()
        with pytest.raises(RuntimeError, match="opened inside"), resumed.phase("data"), resumed.phase("h2d"):
            pass
    rows = resumed.timeline()["phase_s"]
    assert rows.shape == (3, len(PHASES))
    assert rows[0].tolist() == phase_row(compute=0.5)
    assert rows[1].tolist() == phase_row(comm=0.25, wait=0.125)
    assert rows[2].tolist() == phase_row(update=1.0)
    assert resumed.timeline()["step_end_s"].tolist() == [0.5, 0.875, 1.875]


def test_a_contiguous_timer_charges_the_seconds_between_phases_to_the_next_phase():
    """A rank's main thread (contiguous): the loop's lines between two phases, and a preemption there, start the
    next phase, so the phases add up to the wall time; a helper's timer (not contiguous) leaves them out."""

    def exercise(contiguous: bool) -> dict:
        clock = FakeClock()
        with transport.use(clock):
            timer = PhaseTimer(contiguous=contiguous)
            clock.now += 0.5  # before the first phase
            with timer.phase("compute"):
                clock.now += 0.25
            clock.now += 0.125  # between phases (the test's preemption)
            with timer.phase("comm"):
                clock.now += 0.0625
            clock.now += 0.25
            timer.add("wait", 0.25)  # a span the caller timed, ending now: not charged again
            with timer.phase("update"):
                pass
            clock.now += 0.25  # after the last phase: gathering results
            timer.stop()
            clock.now += 1.0
            return timer.breakdown()

    main, helper = exercise(contiguous=True), exercise(contiguous=False)
    # the main thread's clock stops at the end of its last phase; another's where it is stopped
    assert main["wall_s"] == 1.1875 and helper["wall_s"] == 1.4375
    assert (main["compute_s"], main["comm_s"], main["wait_s"], main["update_s"]) == (0.75, 0.1875, 0.25, 0.0)
    assert main["unaccounted_s"] == 0.0
    assert main["between_phases_s"] == 0.625 and main["between_phases_max_s"] == 0.5
    assert (helper["compute_s"], helper["comm_s"], helper["wait_s"]) == (0.25, 0.0625, 0.25)
    assert helper["unaccounted_s"] == 0.875 and helper["between_phases_s"] == 0.0
