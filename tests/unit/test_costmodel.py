"""The α-β(-γ) cost model against hand-computed values, and the comm-model report on fixture runs."""

import csv
import json

import pytest

from scaledl.algorithms import ALGORITHMS
from scaledl.net import alphabeta as cm
from scaledl.run_record import read_run_json

NET = cm.Network(alpha=1e-6, beta=1e-9)  # 1 µs, 1 GB/s
NET_G = cm.Network(alpha=1e-6, beta=1e-9, gamma=1e-10)
N = 1_000_000  # bytes
T = 1e-6 + 1e-3  # one message of N bytes: α + nβ


def close(a, b):
    return a == pytest.approx(b, rel=1e-12, abs=1e-15)


def test_ceil_log2():
    assert [cm.ceil_log2(p) for p in (1, 2, 3, 4, 5, 8, 9, 4096, 4253)] == [0, 1, 2, 2, 3, 3, 4, 12, 13]
    with pytest.raises(ValueError):
        cm.ceil_log2(0)


def test_message_and_per_layer():
    assert close(cm.message(NET, N), T)
    assert close(cm.message(NET, N, layers=1), T)
    assert close(cm.message(NET, N, layers=8), 8e-6 + 1e-3)  # per layer: L·α + nβ


def test_bcast_reduce_allreduce_by_hand():
    assert close(cm.bcast(NET, N, 8, "binomial"), 3 * T)
    assert close(cm.bcast(NET, N, 8, "scatter_allgather"), 2 * 3 * 1e-6 + 2 * 7 / 8 * 1e-3)
    assert close(cm.reduce(NET_G, N, 4, "binomial"), 2 * (1e-6 + 1e-3 + 1e-4))
    assert close(cm.reduce(NET_G, N, 4, "rabenseifner"), 4e-6 + 1.5e-3 + 0.75e-4)
    assert close(cm.allreduce(NET, N, 4, "ring"), 6e-6 + 1.5e-3)
    assert close(cm.allreduce(NET, N, 4, "rabenseifner"), 4e-6 + 1.5e-3)
    assert close(cm.allreduce(NET, N, 4, "recursive_doubling"), 2 * T)
    assert close(cm.allreduce(NET, N, 4, "tree"), 4 * T)
    # per-layer multiplies only the latency terms
    assert close(cm.allreduce(NET, N, 4, "ring", layers=10), 60e-6 + 1.5e-3)


@pytest.mark.parametrize("op", [cm.bcast, cm.reduce, cm.allreduce])
def test_one_rank_costs_nothing(op):
    assert op(NET_G, N, 1) == 0.0


def test_busbw_factor():
    assert cm.busbw_factor("allreduce", 4) == 1.5
    assert cm.busbw_factor("bcast", 4) == cm.busbw_factor("reduce", 4) == 1.0
    assert cm.busbw_factor("allreduce", 1) == 0.0


def test_every_registered_algorithm_has_a_model():
    for key in ALGORITHMS:
        cost = cm.step_cost(key, NET, N, 4, compute_s=0.01)
        assert cost.step_s >= 0.01 and cost.exposed_s >= 0 and cost.formula


def test_sync_algorithms():
    sgd = cm.step_cost("sync_sgd", NET, N, 4, model="paper", compute_s=0.01)
    assert close(sgd.exposed_s, 4 * T)  # tree Reduce + Bcast
    assert close(sgd.step_s, 0.01 + 4 * T)
    sgd_bw = cm.step_cost("sync_sgd", NET, N, 4, model="bandwidth_optimal")
    assert close(sgd_bw.exposed_s, 4e-6 + 1.5e-3)  # Rabenseifner
    easgd_bw = cm.step_cost("sync_easgd", NET, N, 8, model="bandwidth_optimal")
    assert close(easgd_bw.exposed_s, 2 * (6e-6 + 1.75e-3))  # scatter-allgather Bcast + Rabenseifner Reduce
    easgd_paper = cm.step_cost("sync_easgd", NET, N, 8, model="paper")
    assert close(easgd_paper.exposed_s, 2 * 3 * T)  # the paper's 2·log P·(α + |W|β)
    # every worker holding the center: one Allreduce of W^i, sync_sgd's cost
    replicated = cm.step_cost("sync_easgd", NET, N, 8, model="bandwidth_optimal", exchange="allreduce")
    assert close(replicated.exposed_s, cm.step_cost("sync_sgd", NET, N, 8, model="bandwidth_optimal").exposed_s)
    with pytest.raises(ValueError, match="exchange"):
        cm.step_cost("sync_easgd", NET, N, 8, exchange="ring")
    with_control = cm.step_cost("sync_sgd", NET, N, 4, model="paper", control=True)
    assert close(with_control.exposed_s, 4 * T + 2e-6)  # + lg·α stop flag


def test_sync_easgd_period_and_overlap():
    every_other = cm.step_cost("sync_easgd", NET, N, 2, tau=2)
    assert close(every_other.exposed_s, T)  # (Bcast + Reduce) / τ = 2T / 2
    hidden = cm.step_cost("sync_easgd", NET, N, 2, compute_s=0.01, overlap=True)
    assert hidden.exposed_s == 0.0 and close(hidden.step_s, 0.01)
    exposed = cm.step_cost("sync_easgd", NET, N, 2, compute_s=0.001, overlap=True)
    assert close(exposed.step_s, 2 * T)
    if "sync_easgd3" in ALGORITHMS:  # the ladder preset overlaps by default
        assert cm.step_cost("sync_easgd3", NET, N, 2, compute_s=0.01).exposed_s == 0.0


def test_round_robin_serialises_everything():
    idle = cm.step_cost("easgd", NET, N, 4)
    assert close(idle.exposed_s, 4 * 2 * T)  # P·2(α + nβ) per round
    busy = cm.step_cost("easgd", NET, N, 4, compute_s=0.01)
    assert close(busy.step_s, 4 * (0.01 + 2 * T))
    assert close(busy.exposed_s, 4 * (0.01 + 2 * T) - 0.01)
    assert close(busy.exchange_s, 2 * T)


def test_locked_master_saturates():
    s = 2 * T
    below = cm.step_cost("async_easgd", NET, N, 4, compute_s=0.01)  # P·S = 0.008 < T_c + S
    assert close(below.step_s, 0.01 + s) and close(below.exposed_s, s)
    above = cm.step_cost("async_easgd", NET, N, 8, compute_s=0.01)  # P·S = 0.016 > T_c + S
    assert close(above.step_s, 8 * s) and close(above.exposed_s, 8 * s - 0.01)
    momentum = cm.step_cost("async_msgd", NET, N, 2, compute_s=0.01)  # V moves twice more
    assert close(momentum.exchange_s, 4 * T) and close(momentum.step_s, 0.01 + 4 * T)
    worker_momentum = cm.step_cost("async_msgd", NET, N, 2, compute_s=0.01, master_momentum=False)
    assert close(worker_momentum.exchange_s, 2 * T)


def test_lock_free_serialises_only_bytes():
    hog = cm.step_cost("hogwild_easgd", NET, N, 8, compute_s=0.01)
    assert close(hog.step_s, 8 * 2e-3)  # P·2nβ: latencies overlap
    locked = cm.step_cost("async_easgd", NET, N, 8, compute_s=0.01)
    assert hog.step_s < locked.step_s


def test_efficiency_and_weak_scaling():
    e = cm.efficiency("sync_sgd", NET, N, 4, 0.01)
    assert close(e, 0.01 / (0.01 + 4 * T))
    e_compute = cm.efficiency("easgd", NET, N, 2, 0.01, reference="compute")
    assert close(e_compute, 0.01 / (2 * (0.01 + 2 * T)))
    assert close(cm.efficiency("easgd", NET, N, 4, 0.01), 0.25)  # round-robin: 1/P
    rows = cm.weak_scaling("sync_easgd", NET, N, 0.01, workers=(1, 2, 4253))
    assert [r["workers"] for r in rows] == [1, 2, 4253]
    assert rows[0]["efficiency"] == 1.0
    assert close(rows[2]["efficiency"], 0.01 / (0.01 + 2 * 13 * T))
    assert 4253 in cm.DEFAULT_WORKERS and 4096 in cm.DEFAULT_WORKERS
    assert cm.PAPER_WEAK_SCALING["efficiency"] == 0.915


@pytest.mark.parametrize("kwargs", [{"model": "nope"}, {"compute_s": -1.0}, {"tau": 0}, {"layers": 0}])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        cm.step_cost("sync_sgd", NET, N, 2, **kwargs)
    with pytest.raises(ValueError):
        cm.step_cost("no_such_algorithm", NET, N, 2)
    with pytest.raises(ValueError):
        cm.Network(alpha=-1.0, beta=1e-9)


# ---------------------------------------------------------------- comm-model report


def fake_netbench(path, alpha=1e-6, beta=1e-9, gamma=0.0):
    path.write_text(
        json.dumps(
            {
                "kind": "scaledl-netbench",
                "alpha_s": alpha,
                "beta_s_per_byte": beta,
                "gamma_s_per_byte": gamma,
                "machine": {"ranks": 2, "nodes": 1, "mpi_library": "test MPI"},
                "p2p": {"note": "test", "links": []},
            }
        )
    )
    return path


def fake_run(run_dir, key="sync_sgd", workers=2, steps=100, comm=0.5, compute=1.0, nested=False, master=False):
    run_dir.mkdir(parents=True)
    ranks = []
    if master:
        ranks.append({"rank": 0, "role": "master", "comm_s": 9.0, "wait_s": 9.0, "compute_s": 0.0})
    for w in range(workers):
        phases = {
            "data_s": 0.0,
            "h2d_s": 0.0,
            "compute_s": compute,
            "update_s": 0.0,
            "comm_s": comm * (w + 1),
            "wait_s": 0.0,
        }
        steady = {
            "transfer_per_step_s": comm * (w + 1) / steps,
            "wait_per_step_s": 0.0,
            "compute_per_step_s": compute / steps,
        }
        role = "master+worker" if (w == 0 and not master) else "worker"
        ranks.append({"rank": len(ranks), "role": role, **steady, **({"phases": phases} if nested else phases)})
    run = {
        "algorithm": {"key": key},
        "platform": "local",
        "world": {"workers": workers, "size": len(ranks)},
        "model": {"name": "lenet", "bytes": N},
        "data": {"dataset": "digits", "image_shape": [1, 28, 28], "classes": 10},
        "stop": {"steps": steps},
        "phases": {"per_rank": ranks},
        "seconds_per_step": 0.02,
        "hyper": {"tau": 1, "momentum_at": "master"},
        "codesign": {"message": "packed", "overlap": False},
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def comm_model(argv):
    from scaledl.cli import main

    return main(["comm-model", *(str(a) for a in argv)])


@pytest.mark.parametrize("nested", [False, True])
def test_comm_model_predicted_beside_measured(tmp_path, nested, capsys):
    nb = fake_netbench(tmp_path / "nb.json")
    sync = fake_run(tmp_path / "sync", nested=nested)
    master = fake_run(tmp_path / "async", key="async_easgd", master=True)
    out = tmp_path / "tables" / "comm_model.csv"
    assert comm_model(["--netbench", nb, sync, master / "run.json", "--out", out, "--networks", "fdr_ib,10gbe"]) == 0
    rows = {r["algorithm"]: r for r in csv.DictReader(out.open())}
    s = rows["sync_sgd"]
    # measured: mean over worker ranks of transfer + wait per step = (0.5 + 1.0) / 2 / 100
    assert float(s["measured_exposed_s"]) == pytest.approx(0.0075)
    assert float(s["compute_s"]) == pytest.approx(0.01)
    # predicted at P = 2 (+ the stop-flag allreduce, lg·α): paper = tree 2T; bandwidth-optimal = 2α + nβ
    assert float(s["predicted_paper_s"]) == pytest.approx(2 * T + 1e-6)
    assert float(s["predicted_bandwidth_optimal_s"]) == pytest.approx(2e-6 + 1e-3 + 1e-6)
    assert float(s["ratio_paper"]) == pytest.approx(0.0075 / (2 * T + 1e-6))
    a = rows["async_easgd"]
    assert float(a["measured_exposed_s"]) == pytest.approx(0.0075)  # the dedicated master is not averaged in
    assert float(a["predicted_paper_s"]) == pytest.approx(2 * T + 4e-6)  # S + version count + board report
    scaling = list(csv.DictReader((tmp_path / "tables" / "comm_model_scaling.csv").open()))
    assert {r["network"] for r in scaling} == {"measured", "fdr_ib", "10gbe"}
    assert {int(r["workers"]) for r in scaling} >= {1, 4096, 4253}
    assert all(float(r["efficiency"]) == 1.0 for r in scaling if r["workers"] == "1")
    md = (tmp_path / "tables" / "comm_model.md").read_text()
    assert "| sync_sgd |" in md and "P=4253" in md and "91.5%" in md
    assert "wrote" in capsys.readouterr().out


def test_comm_model_bad_inputs_name_the_file(tmp_path, capsys):
    nb = fake_netbench(tmp_path / "nb.json")
    run = fake_run(tmp_path / "run")
    out = tmp_path / "t.csv"
    assert comm_model(["--netbench", tmp_path / "missing.json", run, "--out", out]) == 2
    assert "missing.json" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    assert comm_model(["--netbench", nb, tmp_path / "bad.json", "--out", out]) == 2
    assert "bad.json" in capsys.readouterr().err
    one_rank = tmp_path / "one.json"
    one_rank.write_text(
        json.dumps({"kind": "scaledl-netbench", "alpha_s": None, "beta_s_per_byte": None, "p2p": {"note": "one rank"}})
    )
    assert comm_model(["--netbench", one_rank, run, "--out", out]) == 2
    assert "at least 2 ranks" in capsys.readouterr().err
    assert comm_model(["--netbench", nb, run, "--out", out, "--networks", "carrier_pigeon"]) == 2
    assert "carrier_pigeon" in capsys.readouterr().err
    assert not out.exists()


def test_markdown_formatter():
    from scaledl.report.comm_model import as_frame
    from scaledl.report.tables import markdown_table

    text = markdown_table(as_frame([{"a": "x|y", "b": 1.23456789, "c": None}], ["a", "b", "c"]))
    assert text.splitlines() == ["| a | b | c |", "|---|---:|---|", r"| x\|y | 1.235 | — |"]


def test_the_message_count_follows_what_the_run_sent(tmp_path):
    """Bucketed and the rooted Sync EASGD round count what the collectives sent; one worker sends nothing."""
    from scaledl.report.comm_model import message_count
    from scaledl.report.runs import read_runs

    def run_of(name, key, workers, codesign, per_exchange):
        path = fake_run(tmp_path / name, key=key, workers=workers)
        record = read_run_json(path / "run.json")
        record["codesign"] = codesign
        record["algorithm_report"] = [{"messages_per_exchange": per_exchange}]
        (path / "run.json").write_text(json.dumps(record))
        return next(read_runs([path / "run.json"]))

    assert message_count(run_of("buckets", "sync_sgd", 2, {"message": "bucketed"}, 3.0)) == 3
    assert message_count(run_of("alone", "sync_sgd", 1, {"message": "bucketed"}, 0)) == 1
    rooted = {"message": "per_layer", "exchange": "rooted"}
    # model.tensors is absent here: 16 messages counted, a Bcast and a Reduce of each of 8 tensors
    assert message_count(run_of("rooted", "sync_easgd", 2, rooted, 16.0)) == 8
