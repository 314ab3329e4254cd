"""Plug-ins: a model or a dataset from a module of the user's own, by `module:function` or by an installed
package's entry point (scaledl.plugins); the docs' examples are the modules used here."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch

from mpi_run import run_train
from scaledl import plugins
from scaledl.cli import main
from scaledl.data.converters import converter_for
from scaledl.data.hdf5 import read_info
from scaledl.errors import UserError
from scaledl.models import build_model, model_source

REPO = Path(__file__).resolve().parents[2]


def code_block(doc: Path, first_line: str) -> str:
    """The fenced code block of `doc` whose first line starts with `first_line` (a file's name comment)."""
    for block in re.findall(r"```\w*\n(.*?)```", doc.read_text(), flags=re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"{doc.name} has no code block starting with {first_line!r}")


README_MODEL = code_block(REPO / "README.md", "# my_models.py")
DOCS_DATASET = code_block(REPO / "docs/extending.md", "# my_data.py")


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working folder that is the current one, with sys.path and sys.modules restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    for name in [
        m for m, module in sys.modules.items() if str(getattr(module, "__file__", "")).startswith(str(tmp_path))
    ]:
        del sys.modules[name]


def write_module(folder: Path, name: str, text: str) -> str:
    (folder / f"{name}.py").write_text(text)
    return name


def test_the_readmes_model_is_built_from_the_folder_the_command_runs_in(here):
    write_module(here, "my_models", README_MODEL)
    model = build_model("tiny_mlp", (1, 28, 28), 10, "my_models:tiny_mlp")
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert model_source("tiny_mlp", "my_models:tiny_mlp") == "my_models:tiny_mlp"
    assert model_source("lenet") == "scaledl"
    assert plugins.findable("my_models:tiny_mlp") and not plugins.findable("no_such_module_here:f")


@pytest.mark.parametrize(
    "name, model_from, module, expected",
    [
        ("lenett", None, None, "--model lenett: no such model (did you mean lenet?)"),
        ("lenet", "m1:f", None, "--model lenet is a built-in model"),
        ("mine", "not a target", None, "'not a target' is not MODULE:FUNCTION"),
        ("mine", "absent_module:f", None, "no module 'absent_module' in "),
        ("mine", "m2:build", "def other(shape, classes):\n    pass\n", "module m2 ("),
        ("mine", "m3:VALUE", "VALUE = 3\n", "m3:VALUE is a int, not a function"),
        ("mine", "m4:f", "import not_installed_anywhere\n", "importing m4 failed: No module named"),
        ("mine", "m5:f", "raise RuntimeError('boom')\n", "importing m5 failed: RuntimeError: boom"),
        ("mine", "m6:f", "def f(shape, classes):\n    return 42\n", "returned a int, not a torch.nn.Module"),
    ],
)
def test_a_plugin_that_cannot_build_a_model_is_one_line(here, name, model_from, module, expected):
    if module is not None:
        write_module(here, model_from.partition(":")[0], module)
    with pytest.raises(UserError) as error:
        build_model(name, (1, 28, 28), 10, model_from)
    assert expected in str(error.value) and "\n" not in str(error.value)


def test_an_installed_packages_entry_points_name_a_model_and_a_dataset(here, monkeypatch):
    """A package's metadata on sys.path (what `pip install` leaves) registers its names: no config needed."""
    package = here / "site"
    package.mkdir()
    write_module(package, "their_models", README_MODEL)
    write_module(package, "their_data", DOCS_DATASET)
    info = package / "their_package-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: their-package\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[scaledl.models]\ntheir_mlp = their_models:tiny_mlp\n\n[scaledl.datasets]\nsquares = their_data:squares\n"
    )
    monkeypatch.syspath_prepend(str(package))

    assert plugins.installed("models") == {"their_mlp": "their_models:tiny_mlp"}
    assert model_source("their_mlp") == "their_models:tiny_mlp"
    assert build_model("their_mlp", (1, 16, 16), 4)(torch.zeros(1, 1, 16, 16)).shape == (1, 4)
    assert converter_for("squares").plugin
    with pytest.raises(UserError, match=r"no such model \(did you mean their_mlp\?\)"):
        model_source("their_mpl")


def test_prepare_runs_the_docs_converter_and_checks_its_file(here, capsys):
    write_module(here, "my_data", DOCS_DATASET)
    out = here / "data/hdf5/squares.h5"
    assert main(["prepare", "squares", "--converter", "my_data:squares", "--out", str(out), "--seed", "3"]) == 0
    info = read_info(out)
    assert (info.dataset, info.classes, info.image_shape, info.n_train, info.n_test) == (
        "squares",
        4,
        (1, 16, 16),
        512,
        128,
    )
    assert "prepared squares: 512 train + 128 test images of 1x16x16" in capsys.readouterr().out

    # the same converter under another name writes a file that names another dataset: refused, removed
    other = here / "data/hdf5/boxes.h5"
    assert main(["prepare", "boxes", "--converter", "my_data:squares", "--out", str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "wrote dataset 'squares'; write the file with dataset='boxes'" in err[0]
    assert not other.exists() and not list(other.parent.glob(".*tmp"))


def test_prepare_names_an_unknown_dataset_with_the_nearest(here, capsys):
    assert main(["prepare", "digts", "--out", str(here / "x.h5")]) == 2
    assert "no dataset 'digts' (did you mean digits?)" in capsys.readouterr().err
    assert main(["prepare", "digits", "--converter", "m:f", "--out", str(here / "x.h5")]) == 2
    assert "digits is a built-in dataset" in capsys.readouterr().err


@pytest.mark.mpi
def test_train_names_an_unknown_model_on_every_rank_in_one_line(digits_h5, tmp_path):
    result = run_train(
        2,
        ["--data", str(digits_h5), "--model", "lenett", "--algorithm", "sync_sgd", "--out-dir", str(tmp_path / "r")]
        + ["--max-steps", "2"],
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "scaledl train: error: --model lenett: no such model (did you mean lenet?); a model of your own: "
        "--model-from MODULE:FUNCTION (in a workflow config, plugins.models)"
    ]
    assert not (tmp_path / "r").exists()
