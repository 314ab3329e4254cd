"""netbench: the α-β fit, the size parsing, and short real runs under mpiexec (no timing asserts)."""

import argparse
import json
import statistics
from pathlib import Path

import pytest

from mpi_run import run_mpi
from scaledl.errors import UserError
from scaledl.net import measure as nb
from scaledl.net import pingpong as pp

TINY = ["--sizes", "8,4K,256K", "--iters", "4", "--warmup", "1", "--repeats", "2", "--quiet"]


def test_fit_recovers_exact_line():
    sizes = [8, 1024, 65536, 1 << 20]
    alpha, beta = nb.fit_alpha_beta(sizes, [2e-6 + 5e-10 * n for n in sizes])
    assert alpha == pytest.approx(2e-6, rel=1e-9)
    assert beta == pytest.approx(5e-10, rel=1e-9)
    with pytest.raises(ValueError):
        nb.fit_alpha_beta([8], [1e-6])


def test_fit_never_gives_a_negative_cost():
    """Small messages whose times fall a little with n (noise) give β = 0 and α their weighted mean, not β < 0."""
    sizes, times = [8, 64, 512, 4096], [3.0e-6, 2.9e-6, 2.95e-6, 2.8e-6]
    alpha, beta = nb.fit_alpha_beta(sizes, times)
    assert beta == 0.0 and min(times) <= alpha <= max(times)
    alpha, beta = nb.fit_alpha_beta([1000, 2000, 4000], [0.5e-6, 1.5e-6, 3.6e-6])  # the free fit's α < 0
    assert alpha == 0.0 and beta > 0


def test_sizes():
    assert nb.parse_size("8") == 8 and nb.parse_size("4K") == 4096 and nb.parse_size("64MiB") == 64 << 20
    ladder = nb.default_sizes()
    assert ladder[0] == 8 and ladder[-1] == 64 << 20 and ladder == sorted(ladder)
    with pytest.raises(UserError):
        nb.parse_size("lots")


def _args(tmp_path, **overrides):
    parser = argparse.ArgumentParser()
    nb.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path / "nb.json")])
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"sizes": "6"}, "multiples of 4"),
        ({"sizes": "8,huge"}, "cannot read"),
        ({"iters": 0}, "--iters"),
        ({"warmup": -1}, "--warmup"),
    ],
)
def test_bad_arguments_are_user_errors(tmp_path, overrides, message):
    with pytest.raises(UserError, match=message):
        nb.check_arguments(_args(tmp_path, **overrides))


@pytest.mark.mpi
def test_two_ranks(tmp_path):
    out = tmp_path / "nb.json"
    proc = run_mpi(2, ["-m", "scaledl.net.measure", "--out", str(out), "--pairs", *TINY], timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["kind"] == "scaledl-netbench"
    assert result["machine"]["ranks"] == 2 and result["machine"]["mpi_library"]
    assert result["alpha_s"] > 0 and result["beta_s_per_byte"] > 0 and result["gamma_s_per_byte"] > 0
    link = result["p2p"]["links"][0]
    assert link["ranks"] == [0, 1] and [r["bytes"] for r in link["table"]] == [8, 4096, 262144]
    for row in link["table"]:  # every repeat is kept, and the time is their median
        assert len(row["samples_s"]) == result["settings"]["repeats"]
        assert row["time_s"] == pytest.approx(statistics.median(row["samples_s"]))
    assert len(result["pairs"]["matrix_s"]) == 2
    for op, factor in (("allreduce", 1.0), ("reduce", 1.0), ("bcast", 1.0)):  # 2(P−1)/P = 1 at P = 2
        info = result["collectives"][op]
        assert info["busbw_factor"] == factor
        for row in info["table"]:
            assert row["algbw_Bps"] == pytest.approx(row["bytes"] / row["time_s"])
            assert row["busbw_Bps"] == pytest.approx(row["algbw_Bps"] * factor)
            assert len(row["samples_s"]) == result["settings"]["repeats"]
    window = result["window"]  # rank 1's epochs on rank 0's window, one row per size
    assert window["ranks"] == [1, 0] and [r["bytes"] for r in window["table"]] == [8, 4096, 262144]
    for row in window["table"]:
        assert len(row["samples_s"]) == result["settings"]["repeats"] and row["time_s"] > 0


def test_a_cold_shuffled_run_keeps_its_tables_in_size_order_and_adds_the_cold_ping_pong(tmp_path):
    out = tmp_path / "nb.json"
    sizes = ["--sizes", "4K,8,256K", "--iters", "4", "--warmup", "1", "--repeats", "2", "--quiet"]
    proc = run_mpi(2, ["-m", "scaledl.net.measure", "--out", str(out), "--cold", "--shuffle", "3", "--no-collectives",
                       *sizes], timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["settings"]["shuffle"] == 3
    assert [r["bytes"] for r in result["p2p"]["links"][0]["table"]] == [8, 4096, 262144]
    cold = result["p2p_cold"]
    assert cold["ranks"] == [0, 1] and cold["ring_bytes"] == pp.COLD_RING_BYTES
    assert [r["bytes"] for r in cold["table"]] == [8, 4096, 262144] and all(r["time_s"] > 0 for r in cold["table"])


def test_cold_places_are_page_aligned_apart_and_spread_over_the_ring():
    import numpy as np

    ring = np.zeros(64 << 20, dtype=np.uint8)
    for size in (8, 4096, 1 << 20, 48 << 20):
        views = pp._cold_views(ring, size)
        starts = [v.ctypes.data - ring.ctypes.data for v in views]
        assert all(v.size == size for v in views) and all(s % 4096 == 0 for s in starts)
        assert all(b - a >= size + 4096 or len(views) == 1 for a, b in zip(starts, starts[1:]))  # none overlap
        assert starts[-1] + size <= ring.size and len(views) <= pp.COLD_PLACES
    assert pp._cold_views(ring, 8)[-1].ctypes.data - ring.ctypes.data > (48 << 20)  # a small message roams it all


@pytest.mark.mpi
def test_one_rank_records_no_pair(tmp_path):
    out = tmp_path / "nb.json"
    proc = run_mpi(1, ["-m", "scaledl.net.measure", "--out", str(out), *TINY], timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result["alpha_s"] is None and result["beta_s_per_byte"] is None
    assert "at least 2 ranks" in result["p2p"]["note"]
    assert result["collectives"]["allreduce"]["table"] and "window" not in result  # no origin for an epoch


@pytest.mark.mpi
@pytest.mark.parametrize("entry", [["-m", "scaledl.net.measure"], ["-m", "scaledl", "netbench"]])
def test_bad_option_is_one_line_and_no_output(tmp_path, entry):
    from scaledl import cli

    if entry[-1] == "netbench" and "netbench" not in cli.build_parser().format_help():
        pytest.skip("the CLI has no netbench subcommand yet")
    out = tmp_path / "nb.json"
    proc = run_mpi(2, [*entry, "--out", str(out), "--sizes", "6"], timeout=120)
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "multiples of 4" in errors[0], proc.stderr
    assert "Abort" not in proc.stderr, proc.stderr
    assert not Path(out).exists()
