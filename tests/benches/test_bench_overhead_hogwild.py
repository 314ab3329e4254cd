"""bench_overhead and bench_hogwild render their sections from a raw record alone; no MPI, no timing here.

The records are hand-made, with samples chosen so that one comparison lies inside the A/A noise floor
and another beyond it: the tests check what each table says about them, not any machine's speed.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import bench_hogwild, bench_overhead, stats  # noqa: E402

MACHINE = {
    "cpu": "test CPU",
    "cores": 2,
    "memory": "8 GiB",
    "gpus": "no GPU",
    "mpi": "MPICH test",
    "torch": "t",
    "numpy": "n",
    "python": "3",
    "date": "2000-01-01 00:00 UTC",
    "load_before": 0.1,
    "load_after": 0.1,
    "launch": {"threads": 1, "thp": True, "yield_poll": True, "bind": True},
}


def record_file(tmp_path, bench: str, samples: dict, meta: dict) -> Path:
    path = tmp_path / f"{bench}.json"
    path.write_text(
        json.dumps(
            {
                "format": "scaledl-bench-raw/1",
                "bench": bench,
                "machine": MACHINE,
                "launch": MACHINE["launch"],
                "unit": "s",
                "noise_floor": None,
                "meta": meta,
                "samples": samples,
            }
        )
    )
    return path


# ------------------------------------------------------------------ overhead


def split(step, comm_wait=None, loop=0.0):
    row = {"seconds_per_step": step, "data_s": step * 0.05, "compute_s": step * 0.8 - loop, "update_s": step * 0.05}
    if comm_wait is not None:
        row["comm_wait_s"] = comm_wait
    return row


def overhead_record(tmp_path) -> Path:
    """Batch 64: ours 1 % above plain, A/A within 3 % (no difference). Batch 4: ours 1.5× plain (slower).
    Each side has its twin; ours' loop costs 100 µs a step more than plain's at batch 64 (budget 606 µs)."""
    plain64 = [0.020, 0.021, 0.0205, 0.0198, 0.0202, 0.0201]
    ours64 = [p * 1.01 for p in plain64]
    aa64 = [o / f for o, f in zip(ours64, (1.03, 0.98, 1.0, 1.02, 0.99, 1.0))]  # ours ÷ A/A: up to 3 % apart
    plain4 = [0.0010, 0.0011, 0.00105, 0.00098, 0.00102, 0.00101]
    ours4 = [p * 1.5 for p in plain4]
    aa4 = [o * 1.01 for o in ours4]
    samples, splits = {}, {}
    for label, (o, p, a) in {"batch 64": (ours64, plain64, aa64), "batch 4": (ours4, plain4, aa4)}.items():
        ours, plain, ours_aa, plain_aa = bench_overhead.case_cells(label)
        samples.update({ours: o, plain: p, ours_aa: a, plain_aa: p})
        plain_rows = [
            {**split(x), "gemm_peak": {"flops_per_s": f * 1e9}} for x, f in zip(p, (100, 110, 105, 108, 102, 101))
        ]
        splits.update(
            {
                ours: [split(x, 1e-5, loop=1e-4) for x in o],
                plain: plain_rows,
                ours_aa: [split(x, 1e-5, loop=1e-4) for x in a],
                plain_aa: plain_rows,
            }
        )
    meta = {
        "model": "lenet",
        "dataset": "digits",
        "lr": 0.05,
        "threads": 1,
        "rounds": 6,
        "cases": [
            {"label": "batch 64", "batch": 64, "warmup": 10, "steps": 60},
            {"label": "batch 4", "batch": 4, "warmup": 40, "steps": 200},
        ],
        "order": [],
        "splits": splits,
        "plain_launch": "mpiexec -n 1",
        "raw": "bench/raw/overhead.json",
        "wall_s": 70.0,
        "step_flops": {"batch 64": 8.4e8, "batch 4": 5.3e7},
    }
    return record_file(tmp_path, "overhead", samples, meta)


def test_overhead_render_states_verdicts_against_the_aa_floor(tmp_path):
    record = json.loads(overhead_record(tmp_path).read_text())
    title, intro, tables, notes = bench_overhead.render(record)
    head64, head4 = [line for line in tables.splitlines() if line.startswith("| lenet, batch")][:2]
    assert "no difference within ±3.0%" in head64  # 1 % slower, A/A floor 3 %: not a difference
    assert "ours slower (beyond ±1.0%)" in head4  # 1.5× with a 1 % floor: slower
    assert "1.500× [1.500–1.500] n=6" in head4
    assert "n=6" in head64 and "[A/A]" in tables
    assert "own `mpiexec -n 1` child" in intro and "same update code" in intro
    assert "ours' comm + wait" in tables and "10 µs" in tables  # the comm + wait part of ours' split
    # 1.01× every round, but the A/A floor (3 %) is as wide as the goal's margin: the table cannot certify it
    assert "goal ≤ 1.03×: not certifiable at ±3.0%" in head64 and "goal ≤ 1.03×: missed" in head4  # 1.5×
    # limits: 8.4e8 FLOPs at 20.15 ms (median plain) is 41.7 GFLOP/s, 37.9 % of the best GEMM (110, from the children)
    assert "110.0 GFLOP/s" in tables and "41.7 [" in tables and "37.9 % [" in tables
    assert f"70 s (budget {bench_overhead.BUDGET_S:.0f} s)" in notes and "Only" not in notes


def test_overhead_states_the_loop_goal_in_microseconds(tmp_path):
    record = json.loads(overhead_record(tmp_path).read_text())
    g = bench_overhead.loop_goal(record, "batch 64")
    # ours' loop is about 100 µs above plain's; the budget is 3 % of plain's median 20.15 ms
    assert g["budget"] * 1e6 == pytest.approx(604.5) and g["goal"] == "met"
    assert 100 < g["low"] * 1e6 <= g["high"] * 1e6 < 115  # + 0.1 × ours' 1 % longer step, less the 10 µs comm
    head64 = next(
        line for line in bench_overhead.render(record)[2].splitlines() if line.startswith("| lenet, batch 64")
    )
    assert "goal ≤ +604 µs: met" in head64 or "goal ≤ +605 µs: met" in head64


def test_the_headline_rows_give_the_loops_own_microseconds_and_the_ratio(tmp_path):
    record = json.loads(overhead_record(tmp_path).read_text())
    rows = {row["what"]: row for row in bench_overhead.headline(record)}
    loop = rows["the loop's own cost per step, ours − plain, batch 64"]
    assert loop["verdict"] == "met" and loop["goal"] in ("≤ +604 µs", "≤ +605 µs") and loop["n"] == 6
    assert 100 < float(loop["median"].split()[0]) < 115 and loop["interval (coverage)"].endswith("(96.9 %)")
    assert rows["one rank, ours ÷ a plain loop, batch 64"]["verdict"] == "not certifiable"  # floor 3 % ≥ margin
    assert rows["one rank, ours ÷ a plain loop, batch 4"]["verdict"] == "missed"  # 1.5×, floor 1 %


def test_the_plain_loop_is_its_own_one_rank_child_under_the_same_launch(tmp_path, monkeypatch):
    case = bench_overhead.Case(4, 40, 200)
    argv = bench_overhead.plain_argv(tmp_path / "d.h5", case, tmp_path / "o.json", 0.05, "lenet", 1)
    assert argv[0] == str(REPO / "bench" / "bench_overhead.py") and argv[1:3] == [
        "--plain-worker",
        str(tmp_path / "o.json"),
    ]
    assert argv[argv.index("--batch") + 1] == "4" and argv[argv.index("--steps") + 1] == "200"
    launched = []
    monkeypatch.setattr(bench_overhead.common, "run_mpi", lambda ranks, args, **kw: launched.append((ranks, args)))
    monkeypatch.setattr(
        bench_overhead.common,
        "rotating_rounds",
        lambda name, cells, rounds, measure_one: [measure_one(c, 0, i) for i, c in enumerate(cells)],
    )
    (tmp_path / "plain-r0-1.json").write_text(json.dumps(split(0.001)))
    (tmp_path / "plain-r0-3.json").write_text(json.dumps(split(0.001)))
    monkeypatch.setattr(bench_overhead, "ours_run", lambda *a: split(0.001))
    args = bench_overhead.argparse.Namespace(lr=0.05, model="lenet", rounds=1)
    bench_overhead.measure(args, [case], tmp_path / "d.h5", tmp_path)
    # the plain loop and its twin, each through the bench's one MPI launcher at one rank
    assert [ranks for ranks, _ in launched] == [1, 1] and all(a[1] == "--plain-worker" for _, a in launched)
    # the worker mode never checks bench/raw (it writes only its own timings)
    parsed = bench_overhead.common.parse_bench_args
    monkeypatch.setattr(bench_overhead, "plain_worker", lambda args: launched.append(args.worker))
    assert bench_overhead.main(argv[1:]) == 0 and launched[-1] == tmp_path / "o.json" and parsed


def test_the_plain_worker_writes_its_parts_and_updates_with_our_rule(tmp_path, monkeypatch):
    """The child's loop itself, in this process (it uses no MPI): 1 + 2 steps, nothing timed is asserted."""
    from bench import common
    from scaledl.algorithms import rules

    data, out, calls = common.prepare_digits(tmp_path), tmp_path / "plain.json", []
    monkeypatch.setattr(rules, "mean_sgd_", lambda w, g, p, lr: calls.append((p, lr)) or w.add_(g, alpha=-lr / p))
    monkeypatch.setattr(common, "gemm_peak_flops", lambda threads: {"flops_per_s": 1.0, "threads": threads})
    argv = bench_overhead.plain_argv(data, bench_overhead.Case(4, 1, 2), out, 0.05, "lenet", 1)
    assert bench_overhead.main(argv[1:]) == 0
    found = json.loads(out.read_text())
    assert set(found) == {"seconds_per_step", "data_s", "compute_s", "update_s", "gemm_peak"}
    assert calls and set(calls) == {(1, 0.05)}  # sync_sgd's rule at one worker, every step


def test_an_old_record_with_the_loop_in_process_still_renders_and_says_so(tmp_path):
    record = json.loads(overhead_record(tmp_path).read_text())
    meta = record["meta"]
    for label in ("batch 64", "batch 4"):
        plain_aa = bench_overhead.case_cells(label)[3]
        del record["samples"][plain_aa], meta["splits"][plain_aa]
    del meta["plain_launch"]
    meta["gemm_peak"] = [{"flops_per_s": 1e11}]
    title, intro, tables, notes = bench_overhead.render(record)
    assert "inside the bench process" in intro and "plain PyTorch [A/A]" not in tables


def test_overhead_render_flag_rebuilds_the_section_from_the_file(tmp_path, capsys):
    path = overhead_record(tmp_path)
    assert bench_overhead.main(["--render", "--raw", str(path), "--no-doc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Training-loop overhead at one rank") and "Machine: test CPU" in out
    assert out.count("\n| lenet, batch") == 4  # two headline rows, two limits rows


@pytest.mark.parametrize("script", ["bench_overhead.py", "bench_hogwild.py"])
def test_render_without_a_record_says_so_in_one_line(tmp_path, script):
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--render", "--no-doc", "--raw", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such file" in lines[0] and "without --render" in lines[0]


def test_overhead_render_refuses_another_bench_record(tmp_path, capsys):
    path = record_file(tmp_path, "ddp", {"x": [1.0]}, {})
    assert bench_overhead.main(["--render", "--raw", str(path), "--no-doc"]) == 2
    assert "not 'overhead'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, problem",
    [("64:10", "BATCH:WARMUP:STEPS"), ("64:10:55", "multiple"), ("4:4:8,4:2:4", "same batch"), ("", "no case")],
)
def test_bad_cases_are_named(text, problem):
    with pytest.raises(ValueError, match=problem):
        bench_overhead.parse_cases(text)


def test_cases_parse():
    assert bench_overhead.parse_cases("64:10:60, 4:40:200") == [
        bench_overhead.Case(64, 10, 60),
        bench_overhead.Case(4, 40, 200),
    ]


# ------------------------------------------------------------------- hogwild


def hogwild_record(tmp_path) -> Path:
    """N=2. Shared lock half the exclusive lock's time on both windows (faster, A/A floor 2 %); the shared
    window's exclusive lock within 1 % of rma's (no difference); lost adds only on the shared window."""
    samples, contention = {}, {}
    base = [0.10, 0.11, 0.105, 0.098, 0.102]
    for size in bench_hogwild.SIZES:
        for cell, window, lock in bench_hogwild.contention_cells(2, size):
            factor = 0.5 if lock == "shared" else (1.01 if window == "shared" else 1.0)
            if cell.endswith(stats.AA_SUFFIX):
                factor = 1.02
            samples[cell] = [b * factor for b in base]
            lost = 2e-6 if (window, lock) == ("shared", "shared") else 0.0
            overlap = 0.0 if lock == "exclusive" else 0.6
            contention[cell] = [{"epoch_s": 1e-4, "overlap": overlap, "lost": lost, "updates": 60}] * 5
    train_detail = {}
    for cell, algorithm, _ in bench_hogwild.training_cells(["sgd"], ["shared"]):
        samples[cell] = [0.05 * (0.8 if algorithm.startswith("hogwild") and "A/A" not in cell else 1.0)] * 5
        train_detail[cell] = [{"wait_s": 0.01, "comm_s": 0.002}] * 5
    samples[stats.aa_cell(bench_hogwild.training_cell("async_sgd", "shared"))] = [0.051, 0.05, 0.049, 0.05, 0.05]
    meta = {
        "rounds": 5,
        "workers": [2],
        "sizes": bench_hogwild.SIZES,
        "updates": {size: 60 for size in bench_hogwild.SIZES},
        "contention": contention,
        "train": {
            "workers": 2,
            "warmup": 5,
            "steps": 20,
            "pairs": ["sgd"],
            "windows": ["shared"],
            "model": "lenet",
            "dataset": "digits",
            "batch": 64,
            "order": [],
            "detail": train_detail,
        },
        "raw": "bench/raw/hogwild.json",
        "wall_s": 80.0,
    }
    return record_file(tmp_path, "hogwild", samples, meta)


def table_rows(tables: str, first: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("|")[1:-1]] for line in tables.splitlines() if line.startswith(first)]


def test_hogwild_render_marks_oversubscribed_cells_and_states_verdicts(tmp_path):
    record = json.loads(hogwild_record(tmp_path).read_text())
    title, intro, tables, notes = bench_hogwild.render(record)
    rows = table_rows(tables, "| 2 (3†)")  # 3 ranks on 2 cores: marked
    assert len(rows) == 10  # 2 sizes × (4 variants + A/A)
    by_key = {(r[1], r[2], r[3]): r for r in rows}
    lenet = "LeNet (431,080)"
    assert by_key[(lenet, "rma", "shared")][-4:-2] == ["0.500× [0.500–0.500] n=5", "faster"]
    assert by_key[(lenet, "shared", "exclusive")][-2:] == ["1.010× [1.010–1.010] n=5", "no difference"]
    assert by_key[(lenet, "rma", "exclusive [A/A]")][-4] == "1.020× [1.020–1.020] n=5"
    assert all("n=5" in r[5] for r in rows)
    assert "noise floor 2.0%" in tables
    train = table_rows(tables, "| async_sgd") + table_rows(tables, "| hogwild_sgd")
    assert len(train) == 3 and all(r[2] == "3†" for r in train)
    assert {tuple(r[-2:]) for r in train if r[0] == "hogwild_sgd"} == {("0.800× [0.800–0.800] n=5", "faster")}
    assert "No two exclusive-lock epochs overlapped" in notes
    assert "no add was lost in any round" in notes  # rma
    assert "up to 2 ppm of the adds were lost" in notes  # shared window, shared lock
    assert bench_hogwild.share(0.0145) == "1.45 %" and bench_hogwild.share(2.5e-7) == "0.25 ppm"
    assert "80 s (budget 90 s)" in notes


def test_hogwild_render_flag_rebuilds_the_section_from_the_file(tmp_path, capsys):
    path = hogwild_record(tmp_path)
    assert bench_hogwild.main(["--render", "--raw", str(path), "--no-doc"]) == 0
    assert capsys.readouterr().out.startswith("## Hogwild concurrency")


def test_hogwild_render_of_an_incomplete_record_says_so(tmp_path, capsys):
    record = json.loads(hogwild_record(tmp_path).read_text())
    del record["meta"]["contention"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(record))
    assert bench_hogwild.main(["--render", "--raw", str(path), "--no-doc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "incomplete hogwild record" in err[0]


def test_overlapped_counts_epochs_that_overlap_another_workers():
    spans = [
        (0.0, 1.0, 1),
        (0.5, 1.5, 2),  # overlap: both count
        (2.0, 3.0, 1),
        (3.0, 4.0, 2),  # touching ends do not overlap
        (5.0, 6.0, 1),
        (5.5, 5.8, 1),
    ]  # one worker's own epochs do not count
    assert bench_hogwild.overlapped(spans) == 2


def test_lost_fraction_counts_whole_adds():
    assert bench_hogwild.lost_fraction(10 * 5 - 1, 10, 5) == pytest.approx(1 / 50)
    assert bench_hogwild.lost_fraction(100.0000001, 20, 5) == 0.0


def test_hogwild_marks_follow_the_measured_machine_not_this_one(tmp_path):
    record = json.loads(hogwild_record(tmp_path).read_text())
    record["machine"]["cores"] = 8  # 3 ranks fit: no cell is marked
    _, _, tables, _ = bench_hogwild.render(record)
    assert "†" not in tables.split("| N (ranks)")[1] and len(table_rows(tables, "| 2 (3)")) == 10
