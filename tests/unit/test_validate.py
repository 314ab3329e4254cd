"""`scaledl validate`'s parts: the published anchors as shipped, their reader's refusals, the table's arithmetic,
and the price of a step as the simulator charges it."""

from __future__ import annotations

import json
import math

import pytest
from torch.utils.flop_counter import FlopCounterMode

from scaledl.errors import UserError
from scaledl.models import MODELS
from scaledl.sim.calibrate import loop_step, netbench_alpha_beta
from scaledl.sim.platform import load as load_platform
from scaledl.sim.platform import resolve, shipped
from scaledl.sim.roofline import OpCounter
from scaledl.validate import anchors as anchor_file
from scaledl.validate.anchors import Anchor
from scaledl.validate.command import chosen
from scaledl.validate.here import DEFAULT_MODELS, calibrated_on, parse_models, step_rows
from scaledl.validate.predict import step_price
from scaledl.validate.table import Row, record_block, report, rows_of, score, summary, to_record, twin_gaps, verdict


def anchor(id="a", published=1.0, role="held_out", **fields) -> Anchor:
    return Anchor(id=id, kind=fields.pop("kind", "step"), platform=fields.pop("platform", "k80x8"),
                  published=published, source="s", constant=fields.pop("constant", "the GPU's efficiency"),
                  role=role, **fields)  # fmt: skip


def test_every_shipped_anchor_is_complete_and_names_what_it_stands_for():
    anchors, tolerance = anchor_file.load()
    assert 0 < tolerance < 1 and len(anchors) >= 10
    for a in anchors:
        assert a.platform in shipped() and a.source and a.constant and a.published > 0
        if a.kind in ("step", "flop_rate"):
            assert a.model in MODELS and a.host in load_platform(a.platform).hosts and len(a.image) == 3
        else:
            assert a.nbytes > 0 and a.nbytes % 4 == 0  # a netbench size
    step = {a.id: a for a in anchors}["k80_alexnet_b512_gce"]
    assert step.published == pytest.approx(512 / 656)  # images per second made seconds per step
    for a in anchors:  # a second measurement is of the same configuration
        if a.same_as:
            b = {x.id: x for x in anchors}[a.same_as]
            assert (a.kind, a.model, a.batch, a.image, a.nbytes) == (b.kind, b.model, b.batch, b.image, b.nbytes)


GOOD = """
sources: {s: "somebody, somewhere"}
anchors:
  - {id: x, kind: p2p, platform: cori_knl, bytes: 4, seconds: 1.0e-6, source: s, constant: c}
"""


@pytest.mark.parametrize(
    "change, message",
    [
        ("kind: p2p", "kind 'ping' is not one of"),
        ("bytes: 4, ", "no bytes"),
        ("source: s", "source 'elsewhere' is not among"),
        ("seconds: 1.0e-6", "must be a positive number"),
        ("constant: c}", "same_as 'nobody' is no anchor's id"),
    ],
)
def test_a_malformed_anchor_is_one_line_naming_it(change, message):
    replacement = {
        "kind: p2p": "kind: ping",
        "bytes: 4, ": "",
        "source: s": "source: elsewhere",
        "seconds: 1.0e-6": "seconds: -1",
        "constant: c}": "constant: c, same_as: nobody}",
    }[change]
    with pytest.raises(UserError, match=message) as error:
        anchor_file.load(GOOD.replace(change, replacement))
    assert "anchor x" in str(error.value) and "\n" not in str(error.value)
    assert anchor_file.load(GOOD)[0][0].published == 1e-6


def test_an_id_used_twice_is_refused():
    twice = GOOD + "  - {id: x, kind: p2p, platform: cori_knl, bytes: 8, seconds: 2.0e-6, source: s, constant: c}\n"
    with pytest.raises(UserError, match="used twice"):
        anchor_file.load(twice)


def test_the_score_counts_held_out_rows_only_and_a_miss_names_its_constant():
    rows = [Row(anchor("a", 1.0), 1.2, 0.02), Row(anchor("b", 2.0), 1.0, 0.04), Row(anchor("c", 1.0, role="fit"), 5.0)]
    s = score(rows)
    assert s["n"] == 2 and s["mape"] == pytest.approx((0.2 + 0.5) / 2) and s["floor"] == pytest.approx(0.03)
    assert s["geomean"] == pytest.approx(math.sqrt(1.2 * 0.5))
    assert rows[0].passes(0.25) and not rows[1].passes(0.25)
    assert verdict(rows[0], 0.25) == "within"
    assert verdict(rows[1], 0.25) == "misses: 0.50× (fast); points to the GPU's efficiency"
    by_kind = summary(rows, 0.25)
    assert by_kind["step"]["passed"] == 1 and by_kind["all"]["n"] == 2


def test_the_floor_is_what_two_measurements_of_one_configuration_disagree_by():
    a, b = anchor("gce", 1.0), anchor("aws", 1.1, same_as="gce")
    assert twin_gaps([a, b]) == {"gce": pytest.approx(0.1), "aws": pytest.approx(0.1)}
    assert twin_gaps([a]) == {} and twin_gaps([b]) == {}  # its twin not among those picked
    assert score([Row(a, 1.0)])["floor"] is None


def test_the_options_pick_anchors_and_an_unknown_one_is_named():
    anchors = [anchor("a"), anchor("b", platform="cori_knl")]
    assert [a.id for a in chosen(anchors, ["cori_knl"], None)] == ["b"]
    assert [a.id for a in chosen(anchors, None, "a")] == ["a"]
    with pytest.raises(UserError, match="--platform laptop: no anchor for it; anchored platforms: cori_knl, k80x8"):
        chosen(anchors, ["laptop"], None)
    with pytest.raises(UserError, match="--only z: no such anchor"):
        chosen(anchors, None, "a,z")


def test_a_time_only_step_costs_what_the_computed_step_costs():
    """The price validate compares is the one a full simulation charges: skipping the arithmetic changes nothing
    in it, and its FLOPs are torch's own count of the same step."""
    a = anchor(model="lenet", batch=16, image=(1, 28, 28), classes=10, host="gpu0")
    seconds, flops = step_price(a)
    step = loop_step("lenet", 16)
    counter = OpCounter(load_platform("k80x8").hosts["gpu0"].device())
    with counter:
        step()  # computed for real
    assert seconds == pytest.approx(counter.seconds, rel=1e-12)
    with FlopCounterMode(display=False) as reference:
        step()
    assert flops == reference.get_total_flops() == counter.flops > 0


def test_a_host_the_platform_lacks_is_named():
    with pytest.raises(UserError, match="platform k80x8 has no host 'gpu9'"):
        step_price(anchor(model="lenet", batch=1, image=(1, 28, 28), classes=10, host="gpu9"))


def test_the_step_is_priced_on_the_anchor_host_s_device():
    """A K80 prices LeNet's step below the CPU socket beside it (same code, another host's constants)."""
    gpu = step_price(anchor(model="lenet", batch=64, image=(1, 28, 28), classes=10, host="gpu0"))[0]
    cpu = step_price(anchor(model="lenet", batch=64, image=(1, 28, 28), classes=10, host="cpu"))[0]
    assert gpu < cpu


def test_a_record_renders_the_rows_it_was_written_from():
    rows = [Row(anchor("a", 1.0, host="gpu0", model="lenet", image=(1, 28, 28)), 1.2, 0.01), Row(anchor("b", 2.0), 1.0)]
    code = {"commit": "0123456789ab", "dirty": False}
    record = json.loads(json.dumps(to_record(rows, 0.25, "published", code, "2026-12-05T13:00:00Z")))
    assert rows_of(record) == rows
    block = record_block(record)
    assert block.startswith("`scaledl validate --suite published` (`bench/raw/validate_published.json`: commit 0123456")
    assert report(rows, 0.25) in block and record["score"]["all"]["n"] == 2
    assert "| measured | error |" in report(rows, 0.25, "here")  # this machine's suite names its reference so


def test_the_models_of_the_here_suite_are_parsed_or_refused_in_one_line():
    assert parse_models(DEFAULT_MODELS)[1] == ("resnet18", 8, (3, 32, 32))
    for bad in ("resnet18:8", "resnet18:0:3x32x32", "resnet18:8:3x32"):
        with pytest.raises(UserError, match=f"--models {bad}: expected MODEL:BATCH:CxHxW"):
            parse_models(bad)


def test_a_calibrated_platform_says_what_its_speed_was_solved_on():
    assert calibrated_on(resolve("laptop")) == ("lenet", 64)  # `scaledl calibrate`'s header
    assert calibrated_on(resolve("k80x8")) is None  # written by hand from datasheets


def test_the_here_suite_times_the_calibration_s_model_as_a_fit_row_and_the_others_as_held_out():
    rows = step_rows(resolve("laptop"), [("cifar_net", 2, (3, 32, 32))], repeats=2)
    assert [(r.anchor.model, r.anchor.batch, r.anchor.role) for r in rows] == [
        ("lenet", 64, "fit"),
        ("cifar_net", 2, "held_out"),
    ]
    for r in rows:  # measured here, priced by the platform's one host
        assert r.anchor.published > 0 and r.simulated > 0 and r.aa >= 0 and r.anchor.host == "laptop"
    with pytest.raises(UserError, match="platform k80x8 has 8 device hosts"):
        step_rows(resolve("k80x8"), [], repeats=2)


def test_the_calibration_fits_the_cold_ping_pong_where_one_was_measured(tmp_path):
    hot = [{"bytes": n, "time_s": 1e-6 + n / 3e10} for n in (8, 1 << 20)]
    cold = [{"bytes": n, "time_s": 2e-6 + n / 1e10} for n in (8, 1 << 20)]
    path = tmp_path / "nb.json"
    path.write_text(json.dumps({"alpha_s": 1e-6, "beta_s_per_byte": 1 / 3e10, "p2p_cold": {"table": cold}}))
    alpha, beta, fitted = netbench_alpha_beta(path)
    assert fitted == "cold" and alpha == pytest.approx(2e-6, rel=1e-3) and 1 / beta == pytest.approx(1e10, rel=1e-3)
    path.write_text(json.dumps({"alpha_s": 1e-6, "beta_s_per_byte": 1 / 3e10, "p2p": {"links": [{"table": hot}]}}))
    assert netbench_alpha_beta(path) == (1e-6, 1 / 3e10, "hot")
    # small cold messages whose times noise flattened (β = 0 at the fit's boundary): the hot fit, not 1/0
    flat = [{"bytes": n, "time_s": 2e-6} for n in (8, 4096)]
    path.write_text(json.dumps({"alpha_s": 1e-6, "beta_s_per_byte": 1 / 3e10, "p2p_cold": {"table": flat}}))
    assert netbench_alpha_beta(path) == (1e-6, 1 / 3e10, "hot")
    path.write_text(json.dumps({"alpha_s": 1e-6, "beta_s_per_byte": 0.0, "p2p_cold": {"table": flat}}))
    with pytest.raises(UserError, match=r"do not grow with the message size .* measure larger messages"):
        netbench_alpha_beta(path)


def test_the_per_phase_runs_are_rows_and_an_oversubscribed_cell_is_shown_outside_the_score(tmp_path):
    from scaledl.validate.here import phase_rows
    from scaledl.validate.table import summary

    def runs(compute: list[float]) -> list[dict]:
        return [{"worker": {"compute": c, "total": c + 0.001}} for c in compute]

    record = {"git": {"commit": "abcdef1234"}, "meta": {
        "plan": [{"cell": "sync_sgd P=2", "oversubscribed": False}, {"cell": "easgd P=2", "oversubscribed": True}],
        "details": {
            "sync_sgd P=2": {"measured": runs([0.010, 0.011, 0.012]), "simulated": runs([0.0099])},
            "easgd P=2": {"measured": runs([0.010, 0.010, 0.010]), "simulated": runs([0.02])},
        },
    }}  # fmt: skip
    path = tmp_path / "phases.json"
    path.write_text(json.dumps(record))
    rows = {row.anchor.id: row for row in phase_rows(path)}
    assert set(rows) == {"compute sync_sgd P=2", "total sync_sgd P=2", "compute easgd P=2 (oversubscribed)",
                         "total easgd P=2 (oversubscribed)"}  # fmt: skip
    compute = rows["compute sync_sgd P=2"]
    assert compute.ratio == pytest.approx(0.0099 / 0.011) and compute.aa == pytest.approx(0.012 / 0.010 - 1)
    assert rows["compute easgd P=2 (oversubscribed)"].anchor.role == "apart"
    scored = summary(list(rows.values()), 0.10)
    assert scored["phase_compute"]["n"] == 1 and scored["phase_compute"]["passed"] == 1  # the apart row: shown only
    path.write_text("{}")
    with pytest.raises(UserError, match="not a bench_phases record"):
        phase_rows(path)


def test_half_the_configurations_fit_the_efficiency_and_the_other_half_judge_it():
    from scaledl.validate.fit_half import fit_half

    work = {"a": 0.7, "b": 0.2, "c": 0.3, "d": 0.9}  # seconds at efficiency 1 (compute-bound: time ∝ 1/efficiency)
    true = 0.5

    def price(a: Anchor, efficiency: float) -> float:
        return work[a.model] / efficiency

    anchors = [
        anchor("a1", work["a"] / true, host="gpu0", model="a"),
        anchor("a2", work["a"] / true * 1.04, host="gpu0", model="a", same_as="a1"),  # one configuration, twice
        anchor("b1", work["b"] / true * 1.3, host="gpu0", model="b"),  # held out: 30 % slower than the model says
        anchor("c1", work["c"] / true, host="gpu0", model="c"),
        anchor("d1", work["d"] / true, host="gpu0", model="d"),
        anchor("r", 2e12, kind="flop_rate", host="gpu0", model="a"),  # a rate: never fitted to
        anchor("k1", 1.0, platform="cori_knl", host="knl0", model="a"),  # its host's only configuration
    ]
    marked, efficiencies, fitted = fit_half(anchors, lambda platform, host: 0.35, price)
    roles = {a.id: a.role for a in marked}
    assert roles == {"a1": "fit", "a2": "fit", "b1": "held_out", "c1": "fit", "d1": "held_out", "r": "held_out",
                     "k1": "held_out"}  # fmt: skip
    # a's two anchors count once: the fit lands between their efficiencies, near the true one
    assert efficiencies == {("k80x8", "gpu0"): pytest.approx(true / 1.04**0.25, rel=0.01)}
    assert len(fitted) == 1 and fitted[0].fit_ids == ("a1", "a2", "c1") and fitted[0].held_ids == ("b1", "d1")
    assert "efficiency 0.35 → 0.495" in fitted[0].line()
