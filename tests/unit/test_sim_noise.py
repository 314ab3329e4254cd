"""Timing noise of simulated executions (scaledl.sim.noise): a speed factor per host and run, a spread per
execution, detours in absolute time; one repeatable schedule per seed, none when quiet."""

from __future__ import annotations

import math
import statistics

import pytest

from scaledl.errors import UserError
from scaledl.sim.calibrate import detours
from scaledl.sim.noise import Noise
from scaledl.sim.platform import load


def charged(noise: Noise, seed: int, rank: int, seconds: float = 1e-3, n: int = 20_000, host: str = "h") -> list:
    clock = noise.timer(seed, rank, host)
    return [clock(seconds) for _ in range(n)]


def test_quiet_noise_charges_every_price_as_it_is():
    assert set(charged(Noise(), 0, 0, n=100)) == {1e-3}
    assert set(charged(Noise(detour_rate=5, detour_s=0), 3, 1, n=100)) == {1e-3}  # detours of nothing


def test_one_seed_and_rank_is_one_stream_and_another_is_another():
    noise = Noise(cv=0.1)
    assert charged(noise, 7, 2, n=50) == charged(noise, 7, 2, n=50)
    assert charged(noise, 7, 2, n=50) != charged(noise, 8, 2, n=50)  # another seed: another schedule
    assert charged(noise, 7, 2, n=50) != charged(noise, 7, 3, n=50)  # ranks drift apart


def test_the_per_execution_stretch_has_mean_one_and_the_stated_spread():
    plain = [s / 1e-3 for s in charged(Noise(cv=0.1), 0, 0)]
    assert statistics.fmean(plain) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(plain) == pytest.approx(0.1, rel=0.05)


def test_a_host_s_speed_factor_is_drawn_once_a_run_and_shared_by_its_ranks():
    noise = Noise(node_cv=0.05)
    a, b = charged(noise, 4, 0, n=10, host="knl3"), charged(noise, 4, 1, n=10, host="knl3")
    assert len(set(a)) == 1 and a == b  # static: every execution of both ranks of the host alike
    factors = [noise.node_factor(4, f"knl{i}") for i in range(4000)]  # across hosts: the stated spread
    assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(factors) == pytest.approx(0.05, rel=0.08)
    assert noise.node_factor(4, "knl3") != noise.node_factor(5, "knl3")  # another run, another draw


def test_detours_come_at_their_rate_in_absolute_time_and_not_in_proportion():
    noise = Noise(detour_rate=2.0, detour_s=1e-3)
    short, long = charged(noise, 0, 0, seconds=1e-3), charged(noise, 0, 0, seconds=0.1, n=5000)
    # a 1 ms execution is hit with probability about 0.2 %, a 100 ms one about 18 %: each hit adds 1 ms
    assert sum(s > 1e-3 for s in short) / len(short) == pytest.approx(1 - math.exp(-2e-3), rel=0.35)
    assert sum(s > 0.1 for s in long) / len(long) == pytest.approx(1 - math.exp(-0.2), rel=0.1)
    assert {round(s - 1e-3, 9) for s in short} <= {0.0, 1e-3, 2e-3}  # whole detours, never a stretch


def test_noise_scales_its_spreads_and_its_detours_rate_and_refuses_the_impossible():
    assert Noise(0.1, 0.02, 3, 1e-3).scaled(2) == Noise(0.2, 0.04, 6, 1e-3)
    with pytest.raises(UserError, match="each must be ≥ 0"):
        Noise(detour_rate=-1)


def test_the_shipped_platforms_state_their_noise_and_a_bad_or_retired_value_is_one_line(tmp_path):
    k80 = load("k80x8")
    assert k80.hosts["gpu0"].noise == Noise(0.03, 0.02, 1.0, 1e-3) and k80.hosts["cpu"].noise.cv == 0.05
    assert load("cori_knl").hosts["knl5"].noise == Noise(0.02, 0.03, 2.0, 1e-3)
    assert not load("laptop").hosts["laptop"].noise.quiet
    text = load("laptop").path.read_text()
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace('<prop id="noise_cv" value="0.08"/>', '<prop id="noise_cv" value="lots"/>'))
    with pytest.raises(UserError, match=r"bad.xml: host laptop: a noise_\* property is not a number"):
        load(bad)
    bad.write_text(text.replace('<prop id="noise_cv" value="0.08"/>', '<prop id="noise_spike_rate" value="0.1"/>'))
    with pytest.raises(UserError, match="noise_spike and noise_spike_rate .* are gone; state detours"):
        load(bad)


def test_the_calibration_counts_the_detours_of_its_timings():
    steady = [0.010, 0.0101, 0.0099, 0.0100] * 10
    assert detours(steady) == (0.0, 0.0)
    hit = steady[:-2] + [0.013, 0.015]  # two timings interrupted, by 3 and 5 ms
    rate, length = detours(hit)
    assert rate == pytest.approx(2 / sum(hit)) and length == pytest.approx(0.004, rel=0.02)
