"""bench/bench_allreduce.py's report on hand-made records: no MPI, no timing."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import bench_allreduce as ar  # noqa: E402
from bench import common  # noqa: E402

MACHINE = {
    "cpu": "test CPU",
    "cores": 2,
    "memory": "4 GiB",
    "gpus": "no GPU",
    "mpi": "test MPI",
    "torch": "0",
    "numpy": "0",
    "python": "3",
    "date": "today",
    "load_before": 0.1,
}
ROUNDS = 5


def flat(value: float) -> list[float]:
    """Five samples within ±1 % of `value` (so A/A pairs give a noise floor of about 2 %)."""
    return [value * (1 + d) for d in (-0.01, 0.0, 0.01, 0.005, -0.005)]


def hand_made_record(per_layer_factor: float = 0.5, network: dict | None = None) -> dict:
    """A record as the bench writes it: lenet and cifar_alexnet six ways, lenet and resnet50 packed vs
    per-layer, per-layer `per_layer_factor` times packed; every A/A twin equal to its reference."""
    samples = {}
    for model, base in (("lenet", 1e-3), ("cifar_alexnet", 0.1)):
        for v, factor in zip(ar.OVERHEAD_VARIANTS, (1.0, 1.0, 1.0, 2.0, 1.5, 1.0)):
            samples[ar.cell(model, v)] = flat(base * factor)
    for model, base in (("lenet", 1e-3), ("resnet50", 0.08)):
        samples[ar.cell(model, ar.PACKED)] = flat(base)
        samples[ar.cell(model, ar.PACKED_AA)] = flat(base)
        samples[ar.cell(model, ar.PER_LAYER)] = flat(base * per_layer_factor)
    sizes = {
        "lenet": {"floats": 1000, "bytes": 4000, "tensors": 3, "piece_bytes": [1000, 1000, 2000]},
        "cifar_alexnet": {"floats": 10**6, "bytes": 4 * 10**6, "tensors": 2, "piece_bytes": [2 * 10**6] * 2},
        "resnet50": {"floats": 10**6, "bytes": 4 * 10**6, "tensors": 4, "piece_bytes": [10**6] * 4},
    }
    meta = {
        "ranks": 2,
        "rounds": ROUNDS,
        "overhead_models": ["lenet", "cifar_alexnet"],
        "layer_models": ["lenet", "resnet50"],
        "sizes": sizes,
        "iters": {"overhead/lenet": 50, "overhead/cifar_alexnet": 2, "layers/lenet": 50, "layers/resnet50": 2},
        "memcpy_Bps": {"lenet": 1e10, "cifar_alexnet": 1e10, "resnet50": 1e10},
        "network": network or {"missing": "no netbench file in this test"},
        "wall_s": 42.0,
    }
    return {"machine": MACHINE, "launch": common.Launch().as_dict(), "meta": meta, "samples": samples}


NETWORK = {"alpha_s": 1e-6, "beta_s_per_byte": 1e-9, "gamma_s_per_byte": 0.0, "source": "test"}


# ------------------------------------------------------------- per-message


def test_extra_per_message_hides_a_negative_difference():
    packed, per_layer = flat(1e-3), flat(0.5e-3)
    text = ar.extra_per_message(packed, per_layer, messages=8, noise=0.02)
    assert text.startswith("—") and "faster" in text
    assert "-" not in text.replace("per-layer", "").replace("per-message", "")  # no negative number printed


def test_extra_per_message_inside_the_noise_is_no_difference():
    packed, per_layer = flat(1e-3), flat(1.01e-3)
    assert ar.extra_per_message(packed, per_layer, messages=8, noise=0.05).startswith("no difference")


def test_extra_per_message_beyond_the_noise_is_printed_with_spread_and_n():
    packed = [1e-3] * ROUNDS
    per_layer = [1e-3 + 7 * 2e-6] * ROUNDS  # 2 µs per extra message, 7 extra messages
    assert ar.extra_per_message(packed, per_layer, messages=8, noise=0.001) == "2.00 µs [2.00–2.00] n=5"


def test_extra_per_message_with_one_tensor_has_nothing_to_split():
    assert ar.extra_per_message([1.0], [1.0], messages=1, noise=0.0).startswith("—")


# ------------------------------------------------------------------ limits


def test_copy_bound_is_two_p_minus_one_over_p_times_n_over_the_copy_rate():
    assert ar.copy_bound(10**6, 2, 1e9) == pytest.approx(1e-3)
    assert ar.copy_bound(10**6, 4, 1e9) == pytest.approx(1.5e-3)


def test_prediction_picks_the_algorithm_by_message_size():
    from scaledl.net.alphabeta import Network

    net = Network(1e-6, 1e-9, 0.0)
    assert ar.predicted_allreduce(net, [1000], 2) == pytest.approx(1e-6 + 1000e-9)  # recursive doubling
    assert ar.predicted_allreduce(net, [10**6], 2) == pytest.approx(2e-6 + 1e-3)  # Rabenseifner
    assert ar.predicted_allreduce(net, [1000, 10**6], 2) == pytest.approx(1e-6 + 1e-6 + 2e-6 + 1e-3)


# ------------------------------------------------------------------ render


def test_render_prints_every_cell_with_n_and_an_aa_row():
    title, intro, tables, notes = ar.render(hand_made_record())
    assert title == ar.TITLE
    for variant in (*ar.OVERHEAD_VARIANTS, *ar.LAYER_VARIANTS):
        assert f"| {variant} |" in tables
    assert tables.count("n=5") >= 2 * len(ar.OVERHEAD_VARIANTS) + 2 * len(ar.LAYER_VARIANTS)
    assert "A/A" in tables and "noise floor" in tables
    assert "| lenet | torch.cat | 2.00 ms [1.98–2.02] n=5 | 2.000× [2.000–2.000] n=5 | slower |" in tables
    assert "| lenet | ours [A/A] | 1.00 ms [0.990–1.01] n=5 | 1.000× [1.000–1.000] n=5 | no difference |" in tables
    assert "42 s" in notes


def test_render_without_a_network_says_no_prediction():
    _, _, tables, _ = ar.render(hand_made_record())
    assert "no α-β prediction: no netbench file in this test" in tables
    assert "α-β predicts" not in tables


def test_render_with_a_network_holds_times_against_bound_and_prediction():
    _, _, tables, _ = ar.render(hand_made_record(network=NETWORK))
    # cifar_alexnet ours: 0.1 s against a copy bound of 4e6 B / 1e10 B/s = 0.4 ms and α-β 2 µs + 4 ms
    row = next(line for line in tables.splitlines() if line.startswith("| cifar_alexnet | ours |"))
    assert "250.000× [247.500–252.500] n=5" in row
    assert f"{0.1 / (2e-6 + 4e-3):.3f}×" in row
    assert "α-β predicts" in tables


def test_render_hides_a_negative_per_message_cost():
    _, _, tables, _ = ar.render(hand_made_record(per_layer_factor=0.5))
    rows = [line for line in tables.splitlines() if "| extra per message |" in line]
    assert len(rows) == 2 and all("per-layer was faster" in r for r in rows)


def test_render_reports_a_positive_per_message_cost():
    _, _, tables, _ = ar.render(hand_made_record(per_layer_factor=1.5))
    lenet = next(line for line in tables.splitlines() if line.startswith("| lenet | extra per message |"))
    assert "250 µs [" in lenet and "n=5" in lenet  # (1.5 − 1) ms over 2 extra messages


# -------------------------------------------------------------- --render


def test_render_flag_rebuilds_the_section_from_the_file(tmp_path, capsys):
    record = hand_made_record()
    path = common.write_raw(
        tmp_path / "allreduce.json", ar.NAME, record["samples"], {"machine": MACHINE, **record["meta"]}
    )
    assert ar.main(["--render", "--no-doc", "--raw", str(path)]) == 0
    out = capsys.readouterr().out
    _, intro, tables, _ = ar.render(common.read_raw(path))
    assert intro in out and tables.strip() in out


def test_render_flag_on_another_bench_record_is_one_line(tmp_path):
    path = common.write_raw(tmp_path / "other.json", "other", {"x": [1.0]}, {"machine": MACHINE})
    with pytest.raises(SystemExit) as exc:
        ar.main(["--render", "--no-doc", "--raw", str(path)])
    message = str(exc.value)
    assert message.startswith("bench_allreduce: ") and "\n" not in message
