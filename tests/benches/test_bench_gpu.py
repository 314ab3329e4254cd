"""bench_gpu: the launch line, the blocks, the budget stop and the record (in-process, with a fake clock and fake
runs), and one CPU trial of the whole measuring path as a subprocess (no GPU, no timing asserted)."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench import bench_gpu, common, stats  # noqa: E402

OPEN_MPI_4 = "mpiexec (OpenRTE) 4.1.5\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
OPEN_MPI_5 = "mpiexec (Open MPI) 5.0.3\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
MPICH = "HYDRA build details:\n    Version:                                 4.2.0\n    Release Date: ...\n"
MACHINE = {
    "cpu": "CPU",
    "cores": 16,
    "memory": "128 GiB",
    "gpus": "NVIDIA H200",
    "mpi": "Open MPI v4.1.5",
    "torch": "t",
    "numpy": "n",
    "python": "p",
    "date": "d",
    "load_before": 0.1,
}


# ------------------------------------------------------------------ launch


@pytest.mark.parametrize(
    "text, flavor",
    [
        (OPEN_MPI_4, "openmpi"),
        (OPEN_MPI_5, "openmpi"),
        ("prterun (PRRTE) 3.0.6\n", "openmpi"),
        (MPICH, "mpich"),
        ("mystery launcher 1.0", "unknown"),
    ],
)
def test_the_mpi_is_told_from_mpiexec_version(text, flavor):
    assert bench_gpu.mpi_flavor(text) == flavor


def test_open_mpi_runs_as_root_unbound_and_never_drops_the_easgd_master():
    flags = bench_gpu.launch_flags("openmpi", 9, 16)
    assert flags == ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]
    assert "-bind-to" not in flags  # MPICH's spelling, which stacks a rank's threads on one core
    # --bind cores: each rank gets ⌊cores/ranks⌋ cores of its own, unbound where that is less than one
    assert bench_gpu.launch_flags("openmpi", 2, 16, "cores")[2:] == ["--map-by", "slot:PE=8", "--bind-to", "core"]
    assert bench_gpu.launch_flags("openmpi", 9, 16, "cores")[2:] == ["--map-by", "slot:PE=1", "--bind-to", "core"]
    assert bench_gpu.launch_flags("openmpi", 20, 16, "cores")[2:] == ["--bind-to", "none"]


def test_mpich_gets_its_own_spelling_and_an_unknown_mpi_no_flags():
    assert bench_gpu.launch_flags("mpich", 3, 2) == ["-bind-to", "none"]
    assert bench_gpu.launch_flags("mpich", 4, 16, "cores") == ["-bind-to", "core:4"]
    assert bench_gpu.launch_flags("unknown", 4, 16) == []


def test_the_node_launch_sets_open_mpi_root_variables_and_survives_the_record():
    launch = bench_gpu.NodeLaunch.for_node("openmpi", 9, "none", cores=16)
    env = launch.env(9)
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    assert env["OMP_NUM_THREADS"] == "1" and "OMPI_MCA_btl_vader_single_copy_mechanism" not in env
    assert launch.mpiexec_args(9) == bench_gpu.launch_flags("openmpi", 9, 16) and launch.mark(9) == ""
    fallback = bench_gpu.NodeLaunch(**{**launch.as_dict(), "single_copy": False})
    assert fallback.env(2)["OMPI_MCA_btl_vader_single_copy_mechanism"] == "none"
    assert bench_gpu.NodeLaunch.from_dict(json.loads(json.dumps(fallback.as_dict()))) == fallback
    assert "--allow-run-as-root" in launch.describe() and "single-copy" in fallback.describe()
    assert bench_gpu.NodeLaunch.for_node("mpich", 3, "none", cores=2).yield_poll  # MPICH oversubscribed: yield


# ------------------------------------------------------------------ blocks


def options(**kw) -> argparse.Namespace:
    base = {"batch": 32, "device": "cuda", "levels": list(bench_gpu.bench_ladder.LEVELS), "backend_ranks": 2}
    return argparse.Namespace(**{**base, **kw})


def test_blocks_give_every_table_an_aa_twin_and_the_shared_gpu_a_whole_gpu_baseline():
    blocks = bench_gpu.plan_blocks(list(bench_gpu.TABLES), [2, 8], options(), gpu_count=1)
    keys = [b.key for b in blocks]
    assert keys == ["copies", "ddp P=2", "ladder P=2", "ddp P=8", "ladder P=8", "backends P=2"]
    for b in blocks:
        assert sum(c.name.endswith(stats.AA_SUFFIX) for c in b.cells) == 1, b.key
    ddp8 = {c.kind: c for c in blocks[3].cells if not c.name.endswith(stats.AA_SUFFIX)}
    assert ddp8["whole"].ranks == 1 and ddp8["whole"].batch == 8 * 32  # the same global batch on one rank
    assert ddp8["ours"].sync == "none"  # the exchange waits for the device: no per-phase syncs needed
    assert max(c.ranks for c in blocks[4].cells) == 9  # easgd's master at P = 8
    assert any(n.startswith("nccl: skipped") for n in blocks[5].notes)
    # a GPU per rank: no shared GPU, so no whole-GPU row, and ours keeps its phase syncs (NCCL runs ahead)
    own = bench_gpu.plan_blocks(["ddp"], [2], options(), gpu_count=8)[0]
    assert "whole" not in {c.kind for c in own.cells} and own.cells[0].sync == "phase"


def test_the_guess_fits_a_line_through_the_timed_runs():
    budget = bench_gpu.Budget(100.0, "cuda", clock=lambda: 0.0)
    start, per_rank = bench_gpu.GUESS_S["cuda"]
    assert budget.run_s(4) == start + 4 * per_rank  # nothing timed yet: the conservative guess
    cell = bench_gpu.Cell("c", "ladder", 1, 2, "level")
    budget.note(cell, 12.0)
    assert budget.run_s(8) == pytest.approx(bench_gpu.MARGIN * 12.0 * 4)  # one rank count: proportional
    for ranks, wall in ((1, 10.0), (3, 14.0)):
        budget.note(bench_gpu.Cell("c", "ladder", 1, ranks, "level"), wall)
    assert budget.run_s(9) == pytest.approx(bench_gpu.MARGIN * (12.0 + 2.0 * 7))
    assert budget.run_timeout() == 160.0  # the budget left plus a minute


# ------------------------------------------------------------ the row loop


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def fake_runs(clock: FakeClock, seconds: float, fail: str | None = None):
    """A run that takes `seconds` of the fake clock; the cell whose name contains `fail` fails in one line."""
    calls = []

    def run(cell, ctx):
        calls.append(cell.name)
        clock.now += seconds
        if fail and fail in cell.name:
            raise SystemExit("bench: mpiexec ... failed (exit 2):\nscaledl train: error: --backend x: refused here")
        detail = {"backend": "mpi", "compute_s": 0.01, "exposed_s": 0.02, "phase_gap": 0.01}
        return 0.1 + 0.001 * (len(calls) % 3), detail

    return run, calls


def measured(tmp_path, blocks, limit, seconds, *, device="cuda", fail=None, rounds=3):
    clock = FakeClock()
    budget = bench_gpu.Budget(limit, device, clock=clock)
    args = argparse.Namespace(rounds=rounds)
    config = {
        "ranks": [2, 8],
        "steps": 5,
        "batch": 32,
        "rounds": rounds,
        "device": device,
        "gpus": 1 if device == "cuda" else 0,
        "model": "cifar_alexnet",
        "param_bytes": 143_000_000,
        "train_count": 2560,
        "bucket_mb": 25.0,
        "budget_s": limit,
        "mpi_version": "mpiexec (OpenRTE) 4.1.5",
    }
    record = bench_gpu.Record(tmp_path, config, MACHINE)
    run, calls = fake_runs(clock, seconds, fail)
    bench_gpu.measure(blocks, bench_gpu.Context(args, tmp_path, budget), record, run=run)
    record.complete = record.stopped is None
    record.save()
    return record, calls


def test_a_block_that_would_overrun_the_budget_is_skipped_and_the_record_says_so(tmp_path):
    blocks = bench_gpu.plan_blocks(["ddp", "ladder"], [2, 8], options(), gpu_count=1)
    record, calls = measured(tmp_path, blocks, 400.0, 10.0)
    states = [b["state"] for b in record.blocks]
    # ddp P=2: guessed 234 s, ran 150; the runs' line (10 s each) guesses ladder P=2 at 188 s: fits in 250;
    # then ddp P=8 (188 s) and ladder P=8 do not fit in the 100 s left
    assert states == ["measured", "measured", "skipped for budget", "skipped for budget"]
    assert "time budget" in record.blocks[2]["reason"] and record.blocks[2]["estimate_s"] > 100
    saved = common.read_raw(tmp_path / "gpu-raw.json")
    assert saved["bench"] == "gpu" and saved["meta"]["blocks"][2]["state"] == "skipped for budget"
    assert len(saved["samples"]) == 10 and all(len(v) == 3 for v in saved["samples"].values())
    order = saved["meta"]["order"]["ddp P=2"]
    assert order[1] == order[0][1:] + order[0][:1]  # positions rotate from round to round
    results = json.loads((tmp_path / "gpu-results.json").read_text())
    assert [b["state"] for b in results["blocks"]] == states
    text = bench_gpu.section(saved)
    assert "Not run: ddp P=8 (time budget" in text
    assert '"all GPUs compute in parallel" does not happen' in text
    assert "A/A noise floor of this block" in text and "1 rank on the whole GPU, batch 64" in text


def test_a_block_slower_than_its_guess_is_cut_at_the_budget_and_kept(tmp_path):
    blocks = bench_gpu.plan_blocks(["ddp", "ladder"], [2], options(), gpu_count=1)
    record, calls = measured(tmp_path, blocks, 300.0, 40.0)  # guessed 234 s, runs take 40 s each
    assert record.blocks[0]["state"] == "cut by the time budget after 1 of 3 rounds"
    assert record.blocks[1]["state"] == "skipped for budget" and len(calls) == 8
    assert record.stopped == "time budget of 300 s spent" and not record.complete
    saved = common.read_raw(tmp_path / "gpu-raw.json")
    assert sum(len(v) for v in saved["samples"].values()) == 8
    assert "**Incomplete run** (time budget of 300 s spent)" in bench_gpu.section(saved)


def test_a_failed_cell_is_not_run_again_and_its_error_is_its_row(tmp_path):
    blocks = bench_gpu.plan_blocks(["backends"], [2], options(device="cpu"), gpu_count=0)
    record, calls = measured(tmp_path, blocks, None, 1.0, device="cpu", fail="[A/A]")
    assert calls.count("P=2 backend: mpi [A/A]") == 1 and calls.count("P=2 backend: mpi") == 3
    saved = common.read_raw(tmp_path / "gpu-raw.json")
    text = bench_gpu.section(saved)
    assert "failed: scaledl train: error: --backend x: refused here" in text
    assert "skipped: nccl needs CUDA devices" in text and "No A/A floor (the twin and its cell share no round)" in text
    assert text.startswith("## CPU trial of the GPU script (not GPU numbers)")


def test_render_publishes_a_gpu_record_and_refuses_a_cpu_trial(tmp_path, capsys):
    gpu_dir, cpu_dir = tmp_path / "gpu", tmp_path / "cpu"
    measured(gpu_dir, bench_gpu.plan_blocks(["ddp"], [2], options(), gpu_count=1), None, 1.0)
    capsys.readouterr()
    assert bench_gpu.main(["--render", str(gpu_dir / "gpu-raw.json"), "--no-doc"]) == 0
    assert capsys.readouterr().out.startswith("## " + bench_gpu.TITLE)
    measured(cpu_dir, bench_gpu.plan_blocks(["ddp"], [2], options(device="cpu"), gpu_count=0), None, 1.0, device="cpu")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        bench_gpu.main(["--render", str(cpu_dir / "gpu-raw.json"), "--no-doc"])
    assert str(exc.value) == "bench_gpu: this record is a CPU trial; the gpu section takes GPU numbers only"
    assert bench_gpu.main(["--render", str(tmp_path / "none.json"), "--no-doc"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# ------------------------------------------------------------------ the CLI


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--device", "cpu", "--ranks", "2,x"], "--ranks takes comma-separated worker counts, not '2,x'"),
        (["--plan", "--rounds", "2"], "--rounds must be ≥ 3 on a GPU (the A/A floor needs them)"),
        (["--plan", "--tables", "ddp,bogus"], "--tables: some of copies,ddp,ladder,backends"),
        (["--plan", "--model", "nope"], "--model: one of"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_gpu.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench_gpu: " + message)


def test_a_run_needs_an_out_dir_and_a_cpu_trial_never_writes_bench_raw(monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    base = ["--device", "cpu", "--ranks", "1", "--tables", "copies", "--rounds", "1"]
    with pytest.raises(SystemExit, match=r"^bench_gpu: pass --out-dir DIR \(or set \$OUT\)"):
        bench_gpu.main(base)
    with pytest.raises(SystemExit, match="^bench_gpu: a CPU trial never writes into bench/raw"):
        bench_gpu.main([*base, "--out-dir", str(common.RAW_DIR / "trial")])


def test_a_python_without_what_scaledl_train_imports_still_measures_the_copies(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_gpu, "REQUIRED", (*bench_gpu.REQUIRED, "no_such_module_here"))
    argv = ["--device", "cpu", "--ranks", "1", "--rounds", "1", "--steps", "1", "--batch", "2", "--model", "lenet"]
    argv += ["--tables", "copies,ddp", "--copy-mib", "1", "--out-dir", str(tmp_path)]
    launch = common.LAUNCH
    with pytest.raises(SystemExit, match="^bench_gpu: this Python lacks no_such_module_here, which `scaledl train`"):
        bench_gpu.main(argv)
    assert common.LAUNCH is launch  # the session's launch does not outlive it
    record = common.read_raw(tmp_path / "gpu-raw.json")
    assert [(b["key"], b["state"]) for b in record["meta"]["blocks"]] == [
        ("copies", "measured"),
        ("ddp P=1", "skipped"),
    ]
    assert "ddp P=1 (this Python lacks no_such_module_here" in (tmp_path / "gpu-section.md").read_text()


def test_the_plan_lists_blocks_and_the_open_mpi_line_and_the_docs_use_out(capsys):
    assert bench_gpu.main(["--quick", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "ladder P=8: 15 runs" in out and "9 ranks: mpiexec" in out and "budget 420 s" in out
    assert "--allow-run-as-root --oversubscribe --bind-to none" in out
    assert '--out-dir "$OUT"' in bench_gpu.COMMAND and bench_gpu.COMMAND in bench_gpu.__doc__
    assert bench_gpu.COMMAND in bench_gpu.placeholder()


# ---------------------------------------------------------------- CPU trial


def gpu_section() -> str:
    text = common.DOC.read_text() if common.DOC.exists() else ""
    start = text.find("<!-- bench:gpu -->")
    return text[start : text.find("<!-- /bench:gpu -->", start)] if start >= 0 else ""


@pytest.mark.mpi
def test_a_cpu_trial_runs_the_gpu_path_and_touches_neither_the_doc_nor_bench_raw(tmp_path):
    """copies and ours vs DDP at P = 2 (ours, DDP defaults, DDP tuned, one rank with the global batch, the A/A
    twin): five launches, 30-45 s on 2 cores; the ladder's and the backends' blocks go through the same loop,
    record and rendering in the tests above, with fake runs."""
    section, raw_before = gpu_section(), sorted(common.RAW_DIR.glob("gpu*"))
    out = tmp_path / "out"
    argv = ["--device", "cpu", "--ranks", "2", "--rounds", "1", "--steps", "1", "--batch", "2", "--model", "lenet"]
    argv += ["--copy-mib", "1", "--tables", "copies,ddp", "--budget-s", "600"]  # the ladder's blocks: above
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(OMP_NUM_THREADS="1", MPIR_CVAR_ENABLE_HEAVY_YIELD="1")
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "bench_gpu.py"),
            *argv,
            "--out-dir",
            str(out),
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = common.read_raw(out / "gpu-raw.json")
    meta = record["meta"]
    assert meta["complete"] and [b["state"] for b in meta["blocks"]] == ["measured"] * 2
    cells = [c for b in meta["blocks"] for c in b["cells"]]
    assert sorted(record["samples"]) == sorted(cells) and sum(stats.AA_SUFFIX in c for c in cells) == 2
    assert "P=2 vs DDP: 1 rank, global batch" in cells and record["launch"]["flavor"] in ("mpich", "openmpi")
    results = json.loads((out / "gpu-results.json").read_text())
    assert results["complete"] and all(b["state"] == "measured" for b in results["blocks"])
    text = (out / "gpu-section.md").read_text()
    assert text.startswith("## CPU trial of the GPU script (not GPU numbers)") and "DDP tuned (gloo)" in text
    assert "round 1/1 P=2 vs DDP: ours sync_sgd [A/A]" in (out / "gpu-log.txt").read_text()
    assert gpu_section() == section and sorted(common.RAW_DIR.glob("gpu*")) == raw_before
