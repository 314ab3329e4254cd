"""gpu_first_light's CPU trial (`--device cpu --quick`): the path the one GPU call takes, so that call is never its
first run. Every stage writes well-formed JSON lines and no stage fails; no timing is asserted."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import gpu_first_light  # noqa: E402

# what each stage measures, by line name; stages 4 and 5 may instead say why they were skipped (no MPI here)
MEASURED = {
    "probe": {"probe", "mpi"},
    "copies": {"copy"},
    "steps": {"step", "fit", "residual"},
    "easgd1": {"easgd1"},
    "allreduce": {"allreduce"},
    "overhead": {"overhead"},
}


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-first-light") / "trial.jsonl"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_first_light.py"), "--device", "cpu", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, [json.loads(line) for line in out.read_text().splitlines()]


def numbers(value):
    """Every number in a line's value, however nested."""
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers(v)]
    return [value] if isinstance(value, int | float) and not isinstance(value, bool) else []


@pytest.mark.mpi
def test_every_stage_writes_its_json_lines(trial):
    _, lines = trial
    assert all({"run", "stage", "name"} <= set(line) for line in lines)
    assert len({line["run"] for line in lines}) == 1  # one run, appended line by line
    assert list(dict.fromkeys(line["stage"] for line in lines)) == list(gpu_first_light.STAGES)
    assert not [line for line in lines if line["name"] in ("error", "timeout")]
    assert all(math.isfinite(n) for line in lines for n in numbers(line))
    for stage in gpu_first_light.STAGES:
        names = {line["name"] for line in lines if line["stage"] == stage}
        skipped = [line["reason"] for line in lines if line["stage"] == stage and line["name"] == "skipped"]
        if stage == "validation" or (stage in ("allreduce", "overhead") and skipped and not names & MEASURED[stage]):
            assert skipped and all(skipped), stage  # a stage that did not run says why
            continue
        assert MEASURED[stage] <= names and "stage_end" in names, (stage, names)


@pytest.mark.mpi
def test_each_measurement_names_what_it_measured(trial):
    _, lines = trial
    of = lambda name: [line for line in lines if line["name"] == name]  # noqa: E731
    assert {line["kind"] for line in of("copy")} == {"h2d pinned", "h2d pageable", "d2h pinned", "d2h pageable", "d2d"}
    models = [name for name, _, _ in gpu_first_light.QUICK["models"]]
    assert sorted((line["model"], line["tf32"]) for line in of("step")) == sorted(
        (m, t) for m in models for t in (0, 1)
    )
    assert [line["tf32"] for line in of("fit")] == [False, True]
    assert all(line["efficiency"] > 0 and line["op_overhead_s"] >= 0 for line in of("fit"))
    assert sorted((line["model"], line["tf32"]) for line in of("residual")) == sorted(
        (m, t) for m in models for t in (0, 1)
    )
    if of("overhead"):  # the plain loop and ours, each from its own child
        assert {line["cell"] for line in of("overhead")} == {"plain PyTorch", "ours, --device-sync phase"}
    if of("allreduce"):
        assert {"host-staged Allreduce", "ours, backend mpi"} <= {line["cell"] for line in of("allreduce")}


@pytest.mark.mpi
def test_the_record_renders_into_the_gpu_section(trial, capsys):
    out, lines = trial
    assert gpu_first_light.main(["--render", str(out), "--commit", "abc1234", "--no-doc"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("## GPU first light") and "; commit abc1234." in text  # the page's provenance reads it
    for name in ("probe", "copy", "step", "fit", "residual", "easgd1", "skipped"):
        assert f"**{name}**" in text
