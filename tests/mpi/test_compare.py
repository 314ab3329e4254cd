"""`scaledl compare`: two result sets, matched by configuration, each metric judged against the seeds' spread."""

import pandas as pd
import pytest

from mpi_run import run_python, run_train
from scaledl.errors import UserError
from scaledl.report import compare


def frame(values: dict[int, float], algorithm="sync_sgd", metric="final_test_accuracy") -> pd.DataFrame:
    base = {"dataset": "digits", "model": "lenet", "algorithm": algorithm, "platform": "local", "workers": 2}
    return pd.DataFrame([{**base, "setting": "", "seed": s, metric: v} for s, v in values.items()])


def test_overlapping_ranges_are_not_a_change_and_disjoint_ones_are():
    a = frame({0: 0.91, 1: 0.93, 2: 0.92})
    same, _, _ = compare.compare(a, frame({3: 0.925, 4: 0.90, 5: 0.94}))
    assert same["verdict"].tolist() == ["not beyond the seeds' spread"]
    worse, _, _ = compare.compare(a, frame({3: 0.80, 4: 0.82, 5: 0.81}))
    assert worse["verdict"].tolist() == ["changed"]
    assert worse["b_minus_a"].iloc[0] == pytest.approx(0.81 - 0.92)
    single, _, _ = compare.compare(a, frame({3: 0.5}))
    assert single["verdict"].tolist() == ["one seed"]


def test_configurations_in_one_side_only_are_listed_not_compared():
    a = pd.concat([frame({0: 0.9, 1: 0.91}), frame({0: 0.8, 1: 0.81}, algorithm="easgd")])
    table, only_a, only_b = compare.compare(a, frame({0: 0.9, 1: 0.92}))
    assert set(table["algorithm"]) == {"sync_sgd"} and [k[2] for k in only_a] == ["easgd"] and not only_b


def test_a_condition_that_differs_between_the_sides_is_a_row_of_its_own():
    a = frame({0: 0.91, 1: 0.93}).assign(threads=1, ranks=2)
    b = frame({0: 0.91, 1: 0.93}).assign(threads=2, ranks=2)
    table, _, _ = compare.compare(a, b)
    changed = table[table["verdict"] == "setting changed"].set_index("metric")
    assert sorted(changed.index) == ["threads"]  # ranks are equal: no row
    assert (changed.loc["threads", "a_values"], changed.loc["threads", "b_values"]) == ("1", "2")
    assert changed.loc["threads", "b_over_a"] == 2
    page = compare.markdown(table, "a", "b", [], [])
    assert "**The sides ran under other settings** (threads 1 → 2)" in page
    assert page.index("| threads |") < page.index("| final_test_accuracy |")
    assert "final_test_accuracy" in set(table["metric"])  # a condition is flagged, the metrics still compared
    same, _, _ = compare.compare(a, a)
    assert "setting changed" not in set(same["verdict"])


def test_runs_at_another_step_size_are_not_paired_and_the_page_says_what_differs():
    """The review's case: async_msgd's unswept η changed from 0.005 to 0.004 between two result sets, everything
    else equal. No metric is paired across the two η; a row names the setting with each side's value."""
    a = frame({0: 0.91}, algorithm="async_msgd").assign(lr=0.005, momentum=0.9)
    b = frame({0: 0.93}, algorithm="async_msgd").assign(lr=0.004, momentum=0.9)
    b = pd.concat([b, frame({0: 0.90}).assign(lr=0.05)])  # sync_sgd: in B only
    a = pd.concat([a, frame({0: 0.92}).assign(lr=0.05)])  # ... and in A at the same η: compared
    table, only_a, only_b = compare.compare(a, b)
    msgd = table[table["algorithm"] == "async_msgd"]
    assert msgd["verdict"].tolist() == ["settings differ"] and msgd["metric"].tolist() == ["lr"]
    assert (msgd["a_values"].iloc[0], msgd["b_values"].iloc[0]) == ("0.005", "0.004")
    assert table.loc[table["algorithm"] == "sync_sgd", "verdict"].tolist() == ["one seed"]
    assert table.loc[table["algorithm"] == "sync_sgd", "settings"].tolist() == ["lr=0.05"]
    assert not only_a and not only_b  # said in its row, not as a configuration of one side
    page = compare.markdown(table, "a", "b", only_a, only_b)
    assert "**Not compared: the sides ran other settings** (async_msgd/local/p2 lr 0.005 → 0.004)" in page
    twin, _, _ = compare.compare(a, a.assign(seed=5))  # the same settings: paired as before
    assert set(twin["verdict"]) == {"one seed"} and set(twin["algorithm"]) == {"async_msgd", "sync_sgd"}


def test_compare_of_two_result_sets_at_other_step_sizes_says_so(tmp_path, capsys):
    """`scaledl compare` on two summaries whose runs differ only in η: written, with one line saying the
    configuration was not compared and why."""
    from scaledl.cli import main

    frame({0: 0.91, 1: 0.9}, algorithm="async_msgd").assign(lr=0.005).to_csv(tmp_path / "a.csv", index=False)
    frame({0: 0.93, 1: 0.92}, algorithm="async_msgd").assign(lr=0.004).to_csv(tmp_path / "b.csv", index=False)
    assert main(["compare", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert "0 metrics of 0 configurations" in out and "1 configuration not compared, the sides ran other lr" in out
    assert "lr 0.005 → 0.004" in (tmp_path / "c.md").read_text()


def test_a_side_that_is_not_a_result_set_is_one_line(tmp_path):
    with pytest.raises(UserError, match="no such summary table, results folder or run"):
        compare.read_side(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no run.json in it or below it"):
        compare.read_side(tmp_path / "empty")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="not a summary table"):
        compare.read_side(bad)


def train_set(digits_h5, folder, seeds, lr, threads=1):
    for seed in seeds:
        out = folder / "runs" / f"s{seed}"
        result = run_train(
            1,
            ["--data", str(digits_h5), "--model", "lenet", "--algorithm", "sync_sgd", "--out-dir", str(out)]
            + ["--max-steps", "20", "--eval-every", "20", "--seed", str(seed), "--lr", str(lr)]
            + ["--threads", str(threads)],
        )
        assert result.returncode == 0, result.stderr[-2000:]


def scaledl_compare(a, b, out):
    proc = run_python(["-m", "scaledl", "compare", str(a), str(b), "--out", str(out)], timeout=120)
    assert proc.returncode == 0, proc.stderr
    return pd.read_csv(out).set_index("metric")


@pytest.mark.mpi
def test_other_seeds_are_within_the_spread_and_a_changed_lr_is_flagged(digits_h5, tmp_path):
    """Three seeds per set of one-worker sync_sgd runs (bitwise repeatable: the accuracies are fixed by the
    seeds): new seeds of the same configuration stay within the spread; a tenth of η is another configuration,
    said and not compared."""
    train_set(digits_h5, tmp_path / "a", (1, 2, 3), lr=0.05)
    train_set(digits_h5, tmp_path / "b", (4, 5, 6), lr=0.05)
    train_set(digits_h5, tmp_path / "slow", (4, 5, 6), lr=0.005)
    same = scaledl_compare(tmp_path / "a", tmp_path / "b", tmp_path / "same.csv")
    assert same.loc["final_test_accuracy", "verdict"] == "not beyond the seeds' spread"
    changed = scaledl_compare(tmp_path / "a", tmp_path / "slow", tmp_path / "changed.csv")
    assert changed.loc["lr", "verdict"] == "settings differ" and "final_test_accuracy" not in changed.index
    assert (tmp_path / "changed.md").read_text().startswith(f"# {tmp_path / 'slow'} against {tmp_path / 'a'}")
    train_set(digits_h5, tmp_path / "two_threads", (4,), lr=0.05, threads=2)
    threads = scaledl_compare(tmp_path / "b", tmp_path / "two_threads", tmp_path / "threads.csv")
    assert threads.loc["threads", "verdict"] == "setting changed", threads
    assert (threads.loc["threads", "a_median"], threads.loc["threads", "b_median"]) == (1, 2)
