"""The claims judge one configuration per side: a sweep's points apart, never pooled as seeds (hand-made summaries)."""

from __future__ import annotations

import pandas as pd
from test_claims import COLUMNS, FAST, SLOW, runs

from scaledl.report.claims import HOLDS, NOT_COMPARABLE, SHARED, TUNED, evaluate, load_claims
from scaledl.report.claims.judged import judged_markdown


def table(*groups) -> pd.DataFrame:
    """A summary of these rows, with its settings columns (here lr) after `setting`, as summarize writes it."""
    at = COLUMNS.index("setting") + 1
    return pd.DataFrame([row for group in groups for row in group], columns=[*COLUMNS[:at], "lr", *COLUMNS[at:]])


FIG_6_1 = [claim for claim in load_claims() if claim.id == "async_easgd_vs_async_sgd"]


def sweep(lr: float, faster, slower) -> list[dict]:
    point = {"setting": f"lr{lr:g}", "lr": [lr] * len(faster)}
    return [*runs("async_easgd", faster, **point), *runs("async_sgd", slower, **point)]


def test_each_point_of_a_sweep_is_judged_on_its_own():
    """`lr: [0.01, 0.05]` over Fig. 6.1's pair, five seeds each: one row per η, each judged on its five seeds,
    the η named in the row's setting; nothing says the runs are missing."""
    results = table(sweep(0.01, SLOW, FAST), sweep(0.05, FAST, SLOW))
    out = evaluate(results, FIG_6_1).set_index("setting")
    assert list(out.index) == ["cifar10/cifar_alexnet, gpu, P=8, lr0.01", "cifar10/cifar_alexnet, gpu, P=8, lr0.05"]
    assert out["protocol"].tolist() == [SHARED, SHARED] and out["ours_n"].tolist() == [5, 5]
    assert out.loc["cifar10/cifar_alexnet, gpu, P=8, lr0.05", "verdict"] == HOLDS
    assert out.loc["cifar10/cifar_alexnet, gpu, P=8, lr0.01", "verdict"] != HOLDS  # the other η: its own verdict
    assert not out["reason"].str.contains("no runs of").any()


def test_a_side_of_several_configurations_is_not_judged_and_says_which_settings_differ():
    """Two result sets put together: async_sgd's five seeds ran at η 0.05 and 0.04 (unswept, so no point
    names them). Pooling them would make the η range a seed spread: the claim is not judged, and says why."""
    results = table(
        runs("async_easgd", FAST, lr=[0.05] * 5), runs("async_sgd", SLOW, lr=[0.05, 0.05, 0.04, 0.04, 0.04])
    )
    (row,) = evaluate(results, FIG_6_1).to_dict("records")
    assert row["verdict"] == NOT_COMPARABLE
    assert "a side is one configuration, never several pooled as seeds; here async_sgd: lr 0.04, 0.05" in row["reason"]


def test_tuned_runs_keep_their_setting_label_and_the_page_names_what_was_judged():
    tuned = {"setting": "tuned", "lr": [0.1] * 5}
    results = table(
        runs("async_easgd", FAST, **tuned),
        runs("async_sgd", SLOW, **tuned),
        sweep(0.01, SLOW, FAST),
        runs("async_sgd", FAST, setting="lr0.2", lr=[0.2] * 5),  # a point where async_easgd did not run
    )
    out = evaluate(results, FIG_6_1)
    assert out.loc[out["protocol"] == TUNED, "setting"].tolist() == ["cifar10/cifar_alexnet, gpu, P=8"]
    page = judged_markdown(results, out)
    assert "| shared η | lr0.01 | async_easgd | lr=0.01 | 5 |" in page
    assert "| tuned | tuned | async_sgd | lr=0.1 | 5 |" in page
    assert "Not judged: the runs at lr0.2 (async_sgd): no claim has runs of all its sides there" in page


def test_a_summary_without_settings_columns_is_judged_as_before():
    results = table(runs("async_easgd", FAST), runs("async_sgd", SLOW)).drop(columns=["lr"], errors="ignore")
    assert isinstance(results, pd.DataFrame)
    (row,) = evaluate(results, FIG_6_1).to_dict("records")
    assert row["verdict"] == HOLDS and row["setting"] == "cifar10/cifar_alexnet, gpu, P=8"


def test_a_one_seed_summary_says_it_is_a_smoke_test_and_names_the_config_that_gives_verdicts():
    from scaledl.report.claims.judged import SMOKE_TEST, smoke_note

    one_seed = table(runs("async_easgd", [10], lr=[0.05]), runs("async_sgd", [20], lr=[0.05]))
    assert smoke_note(one_seed) == SMOKE_TEST and "config/paper_small.yaml" in SMOKE_TEST
    assert smoke_note(table(sweep(0.01, [10], [20]), sweep(0.05, [10], [20]))) == SMOKE_TEST  # 2 η are not 2 seeds
    assert smoke_note(table(runs("async_easgd", FAST, lr=[0.05] * 5))) == ""


def test_the_workflows_last_line_points_at_the_claims_and_figures():
    from scaledl.grid.keys import RunKey
    from scaledl.grid.rules import finished_line

    one = {RunKey("digits", "lenet", a, "local", 2, 0): {} for a in ("async_easgd", "async_sgd")}
    line = finished_line("default", one)
    assert line.startswith("results/default/report/claims.md judges the paper's claims; figures in ")
    assert "results/default/report/figures/" in line and "smoke test" in line and "config/paper_small.yaml" in line
    five = {RunKey("digits", "lenet", "sync_sgd", "local", 2, seed): {} for seed in range(5)}
    assert "smoke test" not in finished_line("paper_small", five)
