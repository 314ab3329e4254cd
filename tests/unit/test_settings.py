"""One settings resolver: each algorithm gets, and run.json records, only the settings it uses."""

from pathlib import Path

import pytest

from scaledl.algorithms import ALGORITHMS
from scaledl.algorithms.settings import resolve
from scaledl.config import TrainConfig
from scaledl.errors import UserError


def config(algorithm: str, **settings) -> TrainConfig:
    return TrainConfig(
        data=Path("d.h5"), model="lenet", algorithm=algorithm, out_dir=Path("out"), max_steps=1, **settings
    )


def record(algorithm: str, workers: int = 2, **settings) -> dict:
    return resolve(config(algorithm, **settings), ALGORITHMS[algorithm], workers=workers).record()


def test_sync_sgd_records_no_elastic_or_momentum_setting():
    hyper, codesign = record("sync_sgd")["hyper"], record("sync_sgd")["codesign"]
    assert set(hyper) == {"lr", "batch_size", "weight_decay"}
    assert "overlap" not in codesign and "center_on" not in codesign
    assert codesign["message"] == "bucketed" and codesign["bucket_mb"] == 25.0 and codesign["backend"] == "mpi"


def test_the_elastic_family_derives_rho_from_beta_over_p():
    hyper = record("async_easgd", workers=4, lr=0.05, beta=0.9)["hyper"]
    assert hyper["alpha"] == pytest.approx(0.9 / 4) and hyper["rho"] == pytest.approx(0.9 / 4 / 0.05)
    assert hyper["beta"] == 0.9
    given = record("async_easgd", workers=4, rho=2.0)["hyper"]
    assert given["rho"] == 2.0 and "beta" not in given  # β played no part


def test_averaging_settings_come_from_the_registry_and_are_recorded_once():
    diloco = record("diloco")
    assert diloco["averaging"] == {
        "inner": "sgd",
        "worker_rule": "reset",
        "outer": "nesterov",
        "outer_lr": 0.7,
        "outer_momentum": 0.9,
        "outer_delay": 0,
        "graph": "complete",
        "tau": 8,
        "compress": "fp32",
    }
    assert "rho" not in diloco["hyper"] and "momentum" not in diloco["hyper"]  # no elastic term, no inner V
    assert record("diloco", outer_lr=0.5)["averaging"]["outer_lr"] == 0.5  # the command line wins
    local = record("local_sgd", inner="momentum")
    assert local["hyper"]["momentum"] == 0.9 and "outer_lr" not in local["averaging"]
    assert record("sync_easgd")["hyper"]["tau"] == 1 and "rho" in record("sync_easgd")["hyper"]


def test_presets_fix_their_switches_and_refuse_a_contradiction():
    assert record("sync_easgd1")["codesign"]["center_on"] == "host"
    assert record("sync_easgd3")["codesign"]["overlap"] is True
    assert record("chip_partition")["codesign"]["data"] == "replicated"
    assert resolve(config("chip_partition"), ALGORITHMS["chip_partition"], workers=2).gradients == "sum"
    with pytest.raises(UserError, match=r"^--center-on device contradicts sync_easgd1, which fixes center_on = host"):
        record("sync_easgd1", center_on="device")


def test_the_beyond_presets_are_their_bases_at_one_setting_each():
    # each differs from its base in exactly the one setting it fixes (its base at that value runs the same code)
    for key, section, setting, value in [
        ("async_easgd_aged", "hyper", "age_weight", "inverse"),
        ("diloco_eager", "averaging", "outer_delay", 1),
        ("diloco_ring", "averaging", "graph", "ring"),
    ]:
        preset, base = record(key, workers=4), record(ALGORITHMS[key].preset_of, workers=4, **{setting: value})
        assert preset[section][setting] == value and preset == base, key
    with pytest.raises(UserError, match=r"^--graph complete contradicts diloco_ring, which fixes graph = ring"):
        record("diloco_ring", graph="complete")


def test_a_quorum_round_waits_for_at_most_every_worker_and_takes_a_reset_outer_step():
    assert record("quorum_diloco", workers=4, quorum=3)["averaging"]["quorum"] == 3
    assert "quorum" not in record("quorum_diloco", workers=4)["averaging"]  # null: every worker
    with pytest.raises(UserError, match=r"^--quorum 5: a round cannot wait for more than the 4 workers"):
        record("quorum_diloco", workers=4, quorum=5)
    with pytest.raises(UserError, match=r"^--outer slowmo: quorum_diloco takes the average or the nesterov outer"):
        record("quorum_diloco", outer="slowmo", outer_lr=1.0, outer_momentum=0.5)
    with pytest.raises(UserError, match="quorum"):
        record("diloco", quorum=2)  # another algorithm's setting


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"outer": "nesterov"}, r"^--outer nesterov needs --outer-lr and --outer-momentum"),
        ({"overlap": True, "compress": "int8"}, r"^--overlap needs --worker-rule elastic and --compress fp32"),
        ({"exchange": "allreduce", "compress": "int8"}, r"^--exchange allreduce sums W\^i on the way"),
        ({"message": "bucketed"}, r"^--message bucketed allreduces gradients while backward runs; sync_easgd"),
    ],
)
def test_combinations_the_engine_cannot_run_are_refused_in_one_line(settings, message):
    with pytest.raises(UserError, match=message):
        record("sync_easgd", **settings)


def test_the_exchange_is_allreduce_unless_the_round_is_compressed():
    assert record("sync_easgd")["codesign"]["exchange"] == "allreduce"
    assert record("local_sgd", compress="int8")["codesign"]["exchange"] == "rooted"
    assert record("diloco", exchange="rooted")["codesign"]["exchange"] == "rooted"
    assert "exchange" not in record("sync_sgd")["codesign"]


def test_gradient_buckets_are_synchronous_sgds_and_sized_only_when_bucketed():
    assert record("chip_partition")["codesign"]["message"] == "bucketed"
    assert record("sync_sgd", bucket_mb=4.0)["codesign"]["bucket_mb"] == 4.0
    assert "bucket_mb" not in record("sync_sgd", message="packed")["codesign"]
    with pytest.raises(UserError, match=r"^--bucket-mb sizes the gradient buckets of --message bucketed, not"):
        record("sync_sgd", message="packed", bucket_mb=4.0)


def test_compressed_rounds_need_an_mpi_backend():
    with pytest.raises(UserError, match=r"^--compress int8 sends encoded bytes over MPI; backend gloo"):
        resolve(
            config("local_sgd", compress="int8", backend="gloo"),
            ALGORITHMS["local_sgd"],
            workers=2,
            choose_backend=lambda requested, host_buffers: requested,
        )


@pytest.mark.parametrize("key", ALGORITHMS)
def test_every_algorithm_resolves_with_its_defaults(key):
    settings = resolve(config(key), ALGORITHMS[key], workers=2)
    assert settings.lr == TrainConfig.lr and settings.backend == "mpi"
    assert (settings.rho is not None) == ("rho" in record(key)["hyper"])


def test_an_age_weight_is_the_window_rules_that_push_one_update_and_needs_the_split_epoch():
    assert record("async_sgd")["hyper"]["age_weight"] == "none"  # recorded: the paper's unweighted update
    assert record("async_measgd", age_weight="inverse")["hyper"]["age_weight"] == "inverse"
    assert "age_weight" not in record("sync_sgd")["hyper"]
    with pytest.raises(UserError, match=r"^--age-weight .*async_msgd"):  # its velocity is the update: not weighed
        record("async_msgd", age_weight="inverse")
    with pytest.raises(UserError, match=r"^--age-weight inverse weighs the add of the split elastic epoch"):
        record("async_easgd", age_weight="inverse", elastic_epoch="atomic")


def test_an_outer_delay_is_the_reset_rounds_whose_every_worker_takes_the_outer_step():
    assert record("diloco")["averaging"]["outer_delay"] == 0  # recorded: the method as published
    assert record("diloco", outer_delay=1)["averaging"]["outer_delay"] == 1
    assert not record("async_easgd").get("averaging")
    with pytest.raises(UserError, match=r"^--outer-delay 1 delays the outer step of a reset round.*sync_easgd"):
        record("sync_easgd", outer_delay=1)
    with pytest.raises(UserError, match=r"^--outer-delay 1 .*--exchange rooted"):
        record("diloco", outer_delay=1, exchange="rooted")


def test_a_ring_graph_needs_the_allreduce_exchange_and_mpi_and_neighbours_are_the_two_beside():
    from scaledl.algorithms.averaging import ring_neighbours

    assert record("local_sgd")["averaging"]["graph"] == "complete"
    assert record("local_sgd", graph="ring")["averaging"]["graph"] == "ring"
    with pytest.raises(UserError, match=r"^--graph ring sums each worker's neighbourhood.*--exchange rooted"):
        record("diloco", graph="ring", exchange="rooted")
    with pytest.raises(UserError, match=r"^--graph ring .*--outer-delay 1"):
        record("diloco", graph="ring", outer_delay=1)
    assert [ring_neighbours(i, 4) for i in range(4)] == [(1, 3), (0, 2), (1, 3), (0, 2)]
    assert ring_neighbours(0, 2) == (1,) and ring_neighbours(1, 2) == (0,) and ring_neighbours(0, 1) == ()
