"""Parser errors: one line naming the subcommand (with a did-you-mean where one is close), a pointer to
--help, exit status 2; and help that answers without importing what computes."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from scaledl.cli import SUBCOMMANDS, CommandParser, main, subcommand_module

REQUIRED = ["--data", "data/hdf5/synthetic.h5", "--model", "lenet", "--algorithm", "sync_sgd", "--out-dir", "out"]


def parser_error(capsys, argv: list[str]) -> list[str]:
    """stderr's lines of `scaledl ARGV`, which must fail as a parser error (status 2, nothing on stdout)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == "", (exit_.value.code, out)
    return err.splitlines()


@pytest.mark.parametrize(
    "argv, line",
    [
        (["train", *REQUIRED, "--lr", "-1"], "scaledl train: error: argument --lr: must be positive, got -1"),
        (
            ["train", *REQUIRED, "--batch-size", "0"],
            "scaledl train: error: argument --batch-size: must be a positive integer, got 0",
        ),
        (
            ["train", "--data", "d.h5", "--model", "lenet", "--algorithm", "sync_sgdd", "--out-dir", "out"],
            "scaledl train: error: argument --algorithm: invalid choice: 'sync_sgdd' (did you mean sync_sgd?)",
        ),
        (
            ["train", *REQUIRED, "--lrr", "0.1"],
            "scaledl train: error: unrecognized argument --lrr (did you mean --lr?)",
        ),
        (["trian", "--lr", "0.1"], "scaledl: error: argument COMMAND: invalid choice: 'trian' (did you mean train?)"),
    ],
)
def test_an_error_is_one_line_and_a_pointer_to_help(capsys, argv, line):
    command = "scaledl train" if argv[0] == "train" else "scaledl"
    assert parser_error(capsys, argv) == [line, f"see {command} --help"]


def test_an_unknown_flag_comes_before_a_missing_required_one(capsys):
    # a misspelt required flag is reported as itself, not as the flag it meant being missing
    assert parser_error(capsys, ["train", "--lrr", "0.1"])[0] == (
        "scaledl train: error: unrecognized argument --lrr (did you mean --lr?)"
    )
    assert parser_error(capsys, ["train", "--dta", "d.h5"])[0] == (
        "scaledl train: error: unrecognized argument --dta (did you mean --data?)"
    )


def test_a_missing_required_argument_is_named(capsys):
    assert parser_error(capsys, ["train", "--model", "lenet"]) == [
        "scaledl train: error: the following arguments are required: --data, --algorithm, --out-dir",
        "see scaledl train --help",
    ]
    assert parser_error(capsys, []) == [
        "scaledl: error: the following arguments are required: COMMAND",
        "see scaledl --help",
    ]


def test_each_unknown_flag_gets_its_own_suggestion_and_stray_values_are_named(capsys):
    assert parser_error(capsys, ["train", *REQUIRED, "--lrr=3", "--batchsize", "4", "--zzz"])[0] == (
        "scaledl train: error: unrecognized arguments --lrr=3 (did you mean --lr?), "
        "--batchsize (did you mean --batch-size?), --zzz"
    )
    assert parser_error(capsys, ["train", *REQUIRED, "extra"])[0] == (
        "scaledl train: error: unrecognized argument 'extra'"
    )


def test_a_choice_with_nothing_close_lists_the_choices(capsys):
    line = parser_error(capsys, ["download", "nothing-like-it"])[0]
    assert line.startswith("scaledl download: error: argument dataset: invalid choice: 'nothing-like-it' (choose from ")
    assert "'mnist'" in line and "did you mean" not in line


def test_help_still_marks_required_options_as_required(capsys):
    parser = CommandParser(prog="scaledl demo")
    parser.add_argument("--data", required=True)
    with pytest.raises(SystemExit):
        parser.parse_args(["--dta", "x"])  # looks for unknown flags with nothing required, then restores
    assert "[--data" not in parser.format_usage() and "--data DATA" in parser.format_usage()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "--data DATA" in out and "[--data" not in out


def test_a_parse_that_succeeds_leaves_nothing_unknown():
    parser = CommandParser(prog="scaledl demo")
    parser.add_argument("--lr", type=float)
    assert parser.parse_known_args(["--lr", "-1"]) == (argparse.Namespace(lr=-1.0), [])


def test_plot_help_names_its_real_default_axis(capsys):
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "against wall time" in out and "training time" not in out
    assert "(default: wall_s, wall-clock seconds" in out


# `python -m scaledl ARGV` for each ARGV, in one process: after each, the heavy modules imported so far.
HELP_IMPORTS = """
import contextlib, io, runpy, sys
for argv in ARGVS:
    sys.argv = ["scaledl", *argv]
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        runpy.run_module("scaledl", run_name="__main__", alter_sys=True)
    assert "usage: scaledl" in out.getvalue(), (argv, out.getvalue())
    heavy = sorted(name for name in ("torch", "pandas", "matplotlib") if name in sys.modules)
    print(" ".join(argv) + ":" + ",".join(heavy))
"""
# aggregate and claims list their tables' and device kinds' names from the modules that compute them (pandas);
# cost is the grid's (Snakemake and scipy, no torch): these three are left out
LIGHT_HELP = [["--help"]] + [[name, "--help"] for name in SUBCOMMANDS if name not in ("aggregate", "claims", "cost")]


def test_help_imports_no_torch_pandas_or_matplotlib():
    script = HELP_IMPORTS.replace("ARGVS", repr(LIGHT_HELP))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    imported = dict(line.split(":") for line in result.stdout.splitlines())
    assert list(imported) == [" ".join(argv) for argv in LIGHT_HELP]
    assert all(modules == "" for modules in imported.values()), imported


def test_the_help_lists_every_subcommand_with_its_modules_help_and_the_whole_description(capsys):
    for name, (target, summary) in SUBCOMMANDS.items():
        assert subcommand_module(target).HELP == summary, f"{name}: SUBCOMMANDS' copy of its HELP differs"
    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "regime-map, sensitivity, cost, validate." in out  # the description is not cut at its first line
    assert all(" ".join(summary.split()) in out for _, summary in SUBCOMMANDS.values())


def test_a_simulation_refuses_the_shared_memory_center_window_in_one_line(capsys):
    argv = ["simulate", "--platform-file", "k80x8", "--ranks", "2", *REQUIRED, "--center-window", "shared"]
    assert main(argv) == 2  # refused before any platform or SimGrid is loaded
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("scaledl simulate: error: --center-window shared cannot be simulated")
    assert "shared-memory" in err and "use rma (the default)" in err
