"""The adaptive no-progress limit (comm/liveness.py), on a fake clock: slow is not hung, hung is named."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from scaledl.comm.liveness import PATIENCE, START_UP, Liveness
from scaledl.config import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def steady(floor: float, interval: float, exchanges: int, ranks=(1, 2)) -> tuple[Liveness, FakeClock]:
    """Every worker exchanges every `interval` s, `exchanges` times, starting one interval in."""
    clock = FakeClock()
    live = Liveness(ranks, floor, clock=clock)
    for _ in range(exchanges):
        clock.now += interval
        for w in range(len(ranks)):
            live.progressed(w)
    return live, clock


def test_a_worker_every_2_s_is_not_hung_at_25_s_with_floor_30():
    live, clock = steady(floor=30, interval=2, exchanges=20)
    clock.now += 25
    assert not live.overdue().any()
    assert live.limit(0) == 30


def test_with_a_lower_floor_it_is_hung_after_10_times_its_interval():
    live, clock = steady(floor=5, interval=2, exchanges=20)
    assert live.limit(0) == PATIENCE * 2 == 20
    clock.now += 19.9
    assert not live.overdue().any()
    clock.now += 1.1  # 21 s after its last exchange
    assert live.overdue().all()


def test_a_slow_but_steady_worker_outlives_the_floor():
    live, clock = steady(floor=30, interval=40, exchanges=5)
    clock.now += 39  # longer than the floor, as usual for it
    assert not live.overdue().any()
    assert live.limit(0) == PATIENCE * 40
    clock.now += PATIENCE * 40
    assert live.overdue().all()


def test_one_slow_worker_does_not_stretch_another_ones_limit():
    clock = FakeClock()
    live = Liveness((1, 2), 1.0, clock=clock)
    for step in range(1, 11):
        clock.now += 0.5
        live.progressed(0)
        if step % 4 == 0:
            live.progressed(1)  # every 2 s
    assert live.limit(0) == pytest.approx(PATIENCE * 0.5) and live.limit(1) == pytest.approx(PATIENCE * 2)
    clock.now += 6
    assert list(live.overdue()) == [True, False]


def test_before_its_pace_is_known_a_worker_gets_the_start_up_allowance():
    clock = FakeClock()
    live = Liveness((1,), 10, clock=clock)
    startup_limit = 10 * (1 + START_UP)
    clock.now += startup_limit - 1  # a long warm-up before the first exchange
    assert not live.overdue().any()
    live.progressed(0)  # the first exchange: its warm-up is not an interval
    assert live.limit(0) == startup_limit
    clock.now += 0.1
    live.progressed(0)
    assert live.limit(0) == 10  # 10 × 0.1 s is below the floor


def test_the_first_exchange_never_comes():
    clock = FakeClock()
    live = Liveness((1, 2), 10, clock=clock)
    clock.now += 10 * (1 + START_UP) + 1
    assert live.overdue().all()
    line = live.verdict(0)
    assert line.startswith("worker rank 1 (worker 0, after 0 exchanges) made no progress for 31.0 s, before its pace")
    assert "raise --worker-timeout (config train.worker_timeout, now 10 s) above 10.3 s" in line


def test_the_message_names_rank_interval_and_setting():
    live, clock = steady(floor=5, interval=2, exchanges=20, ranks=(1, 2))
    clock.now += 22
    line = live.verdict(1)
    assert "\n" not in line
    assert line.startswith(
        "worker rank 2 (worker 1, after 20 exchanges) made no progress for 22.0 s, "
        "11× its usual exchange interval of 2 s (longest 2 s; limit 20 s"
    )
    assert "slow or hung; if it is only slow (a straggler, a shared node)" in line
    assert "raise --worker-timeout (config train.worker_timeout, now 5 s) above 22.0 s" in line


def test_the_excused_time_does_not_count():
    live, clock = steady(floor=5, interval=2, exchanges=3)
    clock.now += 30
    live.excuse(30)  # the master was busy evaluating
    clock.now += 2
    assert not live.overdue().any()
    live.progressed(0)
    assert live.longest[0] == 2  # the excused half-minute is not an interval


def test_round_robin_counts_only_the_turn():
    clock = FakeClock()
    live = Liveness((1, 2), 5, event="turn", interval="turn", clock=clock)
    for _ in range(3):  # each turn takes 1 s, worker 0 then worker 1
        for w in range(2):
            live.expect(w)
            clock.now += 1
            live.progressed(w)
    assert live.longest.tolist() == [1, 1]  # not the 2 s between a worker's turns
    live.expect(0)
    assert live.deadline(0) == clock.now + PATIENCE * 1
    clock.now += 6
    assert "(worker 0, after 3 turns; it did not send back its weights)" in live.verdict(
        0, doing="it did not send back its weights"
    )
    assert "its usual turn of 1 s" in live.verdict(0)


def test_the_culprit_is_the_lock_holder_not_the_workers_queued_behind_it():
    live, clock = steady(floor=1, interval=0.2, exchanges=10, ranks=(1, 2, 3))
    clock.now += 0.1
    live.progressed(1)
    live.progressed(2)
    clock.now += 3  # all silent past their 2 s limits, worker 0 the longest
    assert live.overdue().tolist() == [True, True, True]
    assert live.culprit(queued=np.array([1.0, 0.0, 1.0])) == 1  # worker 1 holds the lock
    assert live.culprit(queued=np.array([1.0, 1.0, 1.0])) == 0  # none holds it: the most overdue


def test_the_culprit_when_only_queued_workers_are_late():
    clock = FakeClock()
    live = Liveness((1, 2), 2, clock=clock)
    for i in range(10):
        clock.now += 0.1
        live.progressed(0)
        if i % 5 == 0:
            live.progressed(1)
    clock.now += 2.5  # worker 0 is late; worker 1 (slower pace) is not yet
    assert live.overdue().tolist() == [True, False]
    assert live.culprit(queued=np.array([1.0, 0.0])) == 1  # it holds the lock the late one waits for
    assert live.culprit() == 0


def beats(live: Liveness, clock: FakeClock, count: int, *workers: int) -> None:
    """`count` heartbeats 0.1 s apart of each of `workers`."""
    for _ in range(count):
        clock.now += 0.1
        for w in workers:
            live.progressed(w)


def test_the_lock_holder_is_blamed_though_it_beat_its_heart_just_after_the_worker_queued_behind_it():
    clock = FakeClock()
    live = Liveness((1, 2), 2, clock=clock)
    beats(live, clock, 10, 0, 1)  # both at a pace of 0.1 s: their limits are the 2 s floor
    clock.now += 0.3
    live.progressed(1)  # its last beat, then it takes the lock and stops
    clock.now += 1.8  # worker 0 waits 2.1 s (past its 2 s limit); worker 1 silent 1.8 s, under it
    assert live.overdue().tolist() == [True, False]
    assert live.culprit(queued=np.array([1.0, 0.0])) == 1
    assert live.culprit(queued=np.array([1.0, 1.0])) == 0  # no holder on the board: the overdue one


def test_the_lock_holder_is_blamed_though_a_slow_interval_of_its_own_gave_it_a_longer_limit():
    clock = FakeClock()
    live = Liveness((1, 2), 2, clock=clock)
    beats(live, clock, 10, 0, 1)
    beats(live, clock, 12, 0)
    live.progressed(1)  # one slow interval: worker 1's limit is now 12 s
    beats(live, clock, 1, 0, 1)  # its last beat, then it takes the lock and stops
    clock.now += 2.1  # worker 0 waits past its 2 s limit; worker 1, silent as long, is far under its own
    assert live.overdue().tolist() == [True, False] and live.limit(1) > 10
    assert live.culprit(queued=np.array([1.0, 0.0])) == 1
    live.progressed(1)  # a worker merely computing has beaten its heart just now: not the holder
    clock.now += 0.05
    assert live.culprit(queued=np.array([1.0, 0.0])) == 0


def test_a_holder_stopped_before_it_marked_the_lock_is_blamed_as_the_one_that_stirred_first():
    """A worker stopped while it waited inside Lock is granted the lock by the master's MPI, and never marks it: it
    reads as queued, like the worker waiting behind it. It asked for the lock first, so its last sign of life (a beat
    or a new mark) came first, though its last beat may not have (the hang test's flake: the waiting worker was
    named), and though a slow interval of its own keeps it under its limit."""
    clock = FakeClock()
    live = Liveness((1, 2), 2, clock=clock)
    beats(live, clock, 10, 0, 1)
    beats(live, clock, 12, 0)
    live.progressed(1)  # one slow interval: worker 1's limit is now 12 s
    live.progressed(0)  # worker 0's last beat; it asks for the read's lock, reads ...
    clock.now += 0.0005
    live.progressed(1)  # worker 1's last beat; it asks for the read's lock, and stops as it waits
    clock.now += 0.001
    live.stirred_at(0)  # ... worker 0 marks its read done and asks for the add's lock, which worker 1's read holds
    clock.now += 2.1
    assert live.overdue().tolist() == [True, False] and live.limit(1) > 10
    assert live.culprit(queued=np.array([2.0, 1.0])) == 1
    assert live.culprit() == 0  # without the board, the one past its limit


def test_a_holder_of_the_add_stopped_before_it_marked_it_is_blamed_though_it_beat_its_heart_last():
    clock = FakeClock()
    live = Liveness((1, 2), 2, clock=clock)
    beats(live, clock, 10, 0, 1)
    clock.now += 0.05
    live.progressed(0)  # worker 0 beats, reads ...
    clock.now += 0.003
    live.stirred_at(0)  # ... marks its read done, asks for the add's lock, is granted it and stops
    clock.now += 0.001
    live.progressed(1)  # worker 1 beats and waits for the read's lock behind worker 0's add
    clock.now += 2.1
    assert live.overdue().tolist() == [True, True]
    assert live.culprit(queued=np.array([2.0, 1.0])) == 0


def test_the_setting_documents_the_rule():
    help_text = next(f.metadata["help"] for f in fields(TrainConfig) if f.name == "worker_timeout")
    readme_row = next(
        line for line in (ROOT / "config/README.md").read_text().splitlines() if line.startswith("| `worker_timeout` |")
    )
    assert f"{PATIENCE:g}x its longest" in help_text and f"{1 + START_UP:g}x this" in help_text
    assert f"{PATIENCE:g}× its longest" in readme_row and f"{1 + START_UP:g}× this" in readme_row
