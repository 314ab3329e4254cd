"""The bench scripts start (--help) and the doc-section writer keeps other sections; no benchmark runs here."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = [
    "bench_allreduce.py",
    "bench_ddp.py",
    "bench_exchange.py",
    "bench_overhead.py",
    "bench_scaling.py",
    "bench_ladder.py",
    "gpu_first_light.py",
    "bench_hogwild.py",
    "bench_evaluation.py",
    "bench_phases.py",
    "bench_paper_scale.py",
    "run_all.py",
    "compare.py",
]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script):
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--help"], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout


def test_gpu_first_light_without_a_gpu_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_first_light.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "gpu_first_light: no CUDA device visible; pass --device cpu to try it here"
    ]


def test_update_section_replaces_only_its_own(tmp_path):
    sys.path.insert(0, str(REPO))
    from bench.common import text as page_text
    from bench.common import update_section

    doc = tmp_path / "benchmarks.md"
    update_section("allreduce", "## A\nfirst", doc)
    assert doc.read_text().startswith(page_text("header").splitlines()[0])
    text = doc.read_text() + "\n<!-- bench:ladder -->\n## Ladder\nkept \\1 as is\n<!-- /bench:ladder -->\n"
    doc.write_text(text)
    update_section("allreduce", "## A\nsecond", doc)
    update_section("scaling", "## S\nnew", doc)
    text = doc.read_text()
    assert "second" in text and "first" not in text
    assert "kept \\1 as is" in text
    assert text.index("bench:allreduce") < text.index("bench:ladder") < text.index("bench:scaling")
    assert text.count("<!-- bench:allreduce -->") == 1


def test_the_page_names_its_commit_once_and_flags_a_section_from_another(tmp_path):
    sys.path.insert(0, str(REPO))
    from bench.common import update_section

    doc = tmp_path / "benchmarks.md"
    line = "Machine: CPU; 2024-01-01; commit {}. Launch: x."
    update_section("a", "## A\n\n" + line.format("aaaaaaaaaa"), doc)
    update_section("b", "## B\n\n" + line.format("aaaaaaaaaa"), doc)
    assert "Provenance: measured at commit aaaaaaaaaa, every section." in doc.read_text()
    update_section("c", "## C\n\n" + line.format("bbbbbbbbbb (with uncommitted changes)"), doc)
    text = doc.read_text()
    assert "measured at commit aaaaaaaaaa; from another state: c (bbbbbbbbbb with uncommitted changes)." in text
    assert text.count("Provenance:") == 1 and text.index("Provenance:") < text.index("<!-- bench:a -->")


def test_every_quick_flag_is_an_option_of_its_bench():
    """run_all passes shortened settings to each bench (--quick) and the page's settings to some (FULL): each
    must be an option that bench defines."""
    import re

    sys.path.insert(0, str(REPO))
    from bench import run_all

    for script, args in [*run_all.QUICK.items(), *run_all.FULL.items()]:
        source = (REPO / "bench" / script).read_text()
        defined = set(
            re.findall(r'(?:add_argument|\badd)\(\s*"(--[a-z-]+)"', source)
        )  # parser.add_argument or its alias
        unknown = [a for a in args if a.startswith("--") and a not in defined]
        assert not unknown, f"run_all --quick gives {script} {unknown}, which it does not define"
