"""Timing noise of simulated executions (scaledl.sim.noise): one repeatable schedule per seed, none when quiet."""

from __future__ import annotations

import statistics

import pytest

from scaledl.errors import UserError
from scaledl.sim.noise import Noise
from scaledl.sim.platform import load


def draws(noise: Noise, seed: int, rank: int, n: int = 20_000) -> list[float]:
    factor = noise.factors(seed, rank)
    return [factor() for _ in range(n)]


def test_quiet_noise_charges_every_price_as_it_is():
    assert set(draws(Noise(), 0, 0, 100)) == {1.0}
    assert set(draws(Noise(cv=0, spike_rate=0.5, spike=0), 3, 1, 100)) == {1.0}  # a spike of nothing


def test_one_seed_and_rank_is_one_stream_and_another_is_another():
    noise = Noise(cv=0.1)
    assert draws(noise, 7, 2, 50) == draws(noise, 7, 2, 50)
    assert draws(noise, 7, 2, 50) != draws(noise, 8, 2, 50)  # another seed: another schedule
    assert draws(noise, 7, 2, 50) != draws(noise, 7, 3, 50)  # ranks drift apart


def test_the_factor_has_mean_one_and_the_stated_spread_and_spikes_come_at_their_rate():
    plain = draws(Noise(cv=0.1), 0, 0)
    assert statistics.fmean(plain) == pytest.approx(1.0, abs=0.005)
    assert statistics.stdev(plain) == pytest.approx(0.1, rel=0.05)
    spiky = draws(Noise(spike_rate=0.01, spike=1.0), 0, 0)
    assert set(spiky) == {1.0, 2.0} and spiky.count(2.0) / len(spiky) == pytest.approx(0.01, rel=0.2)
    assert Noise(cv=0.1, spike_rate=0.6, spike=1).scaled(2) == Noise(cv=0.2, spike_rate=1.0, spike=1)


@pytest.mark.parametrize("values", [(-0.1, 0, 0), (0.1, 1.5, 1), (0.1, 0.1, -1)])
def test_impossible_noise_is_refused(values):
    with pytest.raises(UserError, match="must be ≥ 0 and the rate between 0 and 1"):
        Noise(*values)


def test_the_shipped_platforms_state_their_noise_and_a_bad_value_is_one_line(tmp_path):
    k80 = load("k80x8")
    assert k80.hosts["gpu0"].noise == Noise(0.03, 0.001, 1.0) and k80.hosts["cpu"].noise.cv == 0.05
    assert load("cori_knl").hosts["knl5"].noise == Noise(0.05, 0.002, 1.0)
    assert not load("laptop").hosts["laptop"].noise.quiet
    bad = tmp_path / "bad.xml"
    text = (load("laptop").path).read_text()
    bad.write_text(text.replace('<prop id="noise_cv" value="0.08"/>', '<prop id="noise_cv" value="lots"/>'))
    with pytest.raises(UserError, match=r"bad.xml: host laptop: a noise_\* property is not a number"):
        load(bad)
