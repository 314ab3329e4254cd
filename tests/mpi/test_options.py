"""A setting an algorithm does not use is refused in one line, never silently ignored."""

from dataclasses import fields
from pathlib import Path

import mpi4py
import pytest

mpi4py.rc.initialize = False  # the algorithm classes import mpi4py.MPI; these tests need no MPI world

from mpi_run import run_train  # noqa: E402
from scaledl.algorithms import (  # noqa: E402
    ALGORITHMS,
    BASE_ALGORITHMS,
    accepting,
    algorithm_options,
    flag,
    refuse_unused_options,
)
from scaledl.algorithms.settings import resolve  # noqa: E402
from scaledl.config import TrainConfig  # noqa: E402
from scaledl.errors import UserError  # noqa: E402

# A value other than TrainConfig's default for every algorithm-specific setting.
SET = {
    "momentum": 0.5,
    "rho": 0.1,
    "beta": 0.5,
    "message": "per_layer",
    "backend": "gloo",
    "center_on": "host",
    "overlap": True,
    "tau": 2,
    "nesterov": True,
    "momentum_at": "worker",
    "fast_memory_gb": 16.0,
    "center_window": "shared",
    "elastic_epoch": "atomic",
    "wait_probe": "none",
    "inner": "momentum",
    "worker_rule": "reset",
    "outer": "average",
    "outer_lr": 0.5,
    "outer_momentum": 0.5,
    "compress": "int8",
    "bucket_mb": 4.0,
    "exchange": "rooted",
    "age_weight": "inverse",
    "outer_delay": 1,
    "graph": "ring",
    "quorum": 2,
}


def config(algorithm: str, **settings) -> TrainConfig:
    return TrainConfig(
        data=Path("d.h5"), model="lenet", algorithm=algorithm, out_dir=Path("out"), max_steps=1, **settings
    )


def refused() -> list[tuple[str, str]]:
    return [(key, option) for key, info in ALGORITHMS.items() for option in sorted(algorithm_options() - info.options)]


def test_every_option_has_a_sample_value_other_than_its_default():
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    assert set(SET) == algorithm_options()
    assert all(SET[option] != defaults[option] for option in SET)


@pytest.mark.parametrize("key, option", refused())
def test_an_option_the_algorithm_does_not_use_is_refused_in_one_line(key, option):
    with pytest.raises(UserError) as error:
        refuse_unused_options(ALGORITHMS[key], config(key, **{option: SET[option]}))
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(flag(option)) and f"does not apply to {key}:" in message
    users = accepting(option)
    assert users and all(user in message for user in users), (users, message)


@pytest.mark.parametrize("key", ALGORITHMS)
def test_defaults_and_accepted_options_pass(key):
    refuse_unused_options(ALGORITHMS[key], config(key))
    for option in ALGORITHMS[key].options:
        refuse_unused_options(ALGORITHMS[key], config(key, **{option: SET[option]}))


def test_accepting_names_base_algorithms_and_a_preset_only_for_its_own_options():
    assert accepting("nesterov") == ["async_measgd"]
    assert accepting("momentum_at") == ["async_msgd"]
    # not sync_easgd's presets sync_easgd1/2/3 again; the averaging engine's other settings do
    assert accepting("center_on") == ["sync_easgd", "local_sgd", "diloco", "slowmo"]
    assert accepting("message") == ["sync_easgd", "local_sgd", "diloco", "slowmo", "sync_sgd"]
    assert accepting("fast_memory_gb") == ["chip_partition"]  # a preset's own option
    for option in algorithm_options():
        assert all(option in ALGORITHMS[key].options for key in accepting(option))
        assert set(accepting(option)) >= {key for key in BASE_ALGORITHMS if option in ALGORITHMS[key].options}


def test_the_message_reads_well():
    with pytest.raises(UserError, match=r"^--nesterov does not apply to async_easgd: only async_measgd uses it$"):
        refuse_unused_options(ALGORITHMS["async_easgd"], config("async_easgd", nesterov=True))
    with pytest.raises(
        UserError,
        match=r"^--message per_layer does not apply to async_sgd: "
        r"only sync_easgd, local_sgd, diloco, slowmo and sync_sgd use it$",
    ):
        refuse_unused_options(ALGORITHMS["async_sgd"], config("async_sgd", message="per_layer"))


@pytest.mark.parametrize("key", ALGORITHMS)
def test_every_algorithm_checks_its_options_before_anything_else(key):
    """The settings resolver refuses first: it needs no ranks, devices or tensors (the setup calls it before
    building any), and a backend it would pick is never asked for."""
    option = min(algorithm_options() - ALGORITHMS[key].options)

    def no_backend(requested, host_buffers):
        raise AssertionError("the refusal must come before the backend is chosen")

    with pytest.raises(UserError, match=f"^{flag(option)} .*does not apply to {key}:"):
        resolve(config(key, **{option: SET[option]}), ALGORITHMS[key], workers=2, choose_backend=no_backend)


@pytest.mark.mpi
@pytest.mark.parametrize(
    "algorithm, option, error",
    [
        ("async_sgd", "--nesterov", "--nesterov does not apply to async_sgd: only async_measgd uses it"),
        ("sync_sgd", "--time-only", "--time-only prices work it does not compute: only scaledl simulate can run it"),
    ],
)
def test_a_run_with_an_unused_option_stops_every_rank_with_one_line(digits_h5, tmp_path, algorithm, option, error):
    """Master and worker raise alike; train._agree_on_setup turns that into one line from rank 0."""
    args = ["--data", str(digits_h5), "--model", "lenet", "--algorithm", algorithm, option]
    result = run_train(2, [*args, "--out-dir", str(tmp_path / "run"), "--max-steps", "5"], timeout=120)
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert errors == [f"scaledl train: error: {error}"]
    assert not (tmp_path / "run").exists()
