"""The paper's claims and their verdict rules, on hand-made result tables with known answers."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from scaledl.cli import main
from scaledl.net.cost import Network, efficiency
from scaledl.report.claims import (
    DOES_NOT_HOLD,
    HOLDS,
    NOT_COMPARABLE,
    RULES,
    Context,
    evaluate,
    load_claims,
)
from scaledl.report.stats import fmt_share
from scaledl.report.summary import SUMMARY_COLUMNS as COLUMNS

CLAIMS = {claim.id: claim for claim in load_claims()}
GPU = Context(devices={"gpu": "gpu"})
KNL = Context(devices={"knl": "knl"})


def runs(
    algorithm, times, *, workers=8, platform="gpu", dataset="cifar10", model="cifar_alexnet", target=0.625, **columns
):
    """One summary row per seed; a time of None is a run that never reached the target."""
    rows = []
    for seed, time in enumerate(times):
        row = dict.fromkeys(COLUMNS, math.nan)
        row.update(
            dataset=dataset,
            model=model,
            algorithm=algorithm,
            platform=platform,
            workers=workers,
            ranks=workers,
            seed=seed,
            target_accuracy=target,
            run="",
            time_to_target_s=math.nan if time is None else time,
            seconds_per_step=0.1,
            comm_share=0.3,
            exposed_share=0.4,
        )
        for column, values in columns.items():
            row[column] = values[seed]
        rows.append(row)
    return rows


def table(*groups) -> pd.DataFrame:
    return pd.DataFrame([row for group in groups for row in group], columns=COLUMNS)


def check(claim_id: str, results: pd.DataFrame, ctx: Context = GPU) -> dict:
    """The claim's only row on `results`."""
    out = evaluate(results, [CLAIMS[claim_id]], ctx)
    assert len(out) == 1, out
    return out.iloc[0].to_dict()


# ------------------------------------------------------------------ the claims file


def test_claims_file_loads_and_names_only_known_rules():
    assert {claim.rule for claim in CLAIMS.values()} <= set(RULES)
    figures = {claim.figure for claim in CLAIMS.values()}
    assert {"Fig. 6.1", "Fig. 6.2", "Fig. 6.3", "Fig. 6.4", "Fig. 8", "Table 3", "Fig. 11", "Fig. 12"} <= figures
    ladder = {
        (c.compares["faster"], c.compares["than"], c.paper_value) for c in CLAIMS.values() if c.figure == "Table 3"
    }
    assert ladder == {
        ("sync_easgd1", "easgd", 3.7),
        ("sync_easgd2", "sync_easgd1", 1.3),
        ("sync_easgd3", "sync_easgd2", 1.1),
        ("sync_easgd3", "easgd", 5.3),
    }
    assert CLAIMS["weak_scaling"].paper_value == 0.915
    assert CLAIMS["comm_share_drop"].needs["device"] == "gpu"
    for claim in CLAIMS.values():
        assert claim.params["min_seeds"] == 3 and claim.params["margin"] > 0


# ------------------------------------------------------------------ faster


def test_faster_holds_when_every_seed_agrees_beyond_the_margin():
    result = check(
        "async_easgd_vs_async_sgd", table(runs("async_easgd", [10, 11, 12]), runs("async_sgd", [20, 21, 25]))
    )
    assert result["verdict"] == HOLDS
    # paired by seed: 20/10, 21/11, 25/12
    assert result["ours_median"] == pytest.approx(2.0) and result["ours_n"] == 3
    assert result["ours_min"] == pytest.approx(21 / 11) and result["ours_max"] == pytest.approx(25 / 12)
    assert "paired by seed" in result["ours"] and "n=3" in result["ours"]


def test_faster_does_not_hold_when_the_other_is_faster():
    result = check(
        "async_easgd_vs_async_sgd", table(runs("async_easgd", [20, 21, 22]), runs("async_sgd", [10, 11, 12]))
    )
    assert result["verdict"] == DOES_NOT_HOLD
    assert result["reason"] == "async_sgd is faster in every seed"


def test_a_difference_inside_the_margin_or_the_seed_spread_is_no_difference():
    within = check(
        "hogwild_easgd_vs_hogwild_sgd",
        table(runs("hogwild_easgd", [10, 10, 10]), runs("hogwild_sgd", [10.2, 10.3, 10.1])),
    )
    assert within["verdict"] == DOES_NOT_HOLD and within["reason"].startswith("no difference")
    disagree = check(
        "hogwild_easgd_vs_hogwild_sgd", table(runs("hogwild_easgd", [10, 10, 10]), runs("hogwild_sgd", [20, 30, 8]))
    )
    assert disagree["verdict"] == DOES_NOT_HOLD and "seeds disagree" in disagree["reason"]


def test_unpaired_seeds_use_the_extreme_ratios_of_the_ranges():
    a = runs("async_easgd", [10, 11, 12])
    b = runs("async_sgd", [20, 21, 25, 30])
    result = check("async_easgd_vs_async_sgd", table(a, b))
    assert result["verdict"] == HOLDS and "paired" not in result["ours"]
    assert result["ours_median"] == pytest.approx(23 / 11)
    assert (result["ours_min"], result["ours_max"]) == (pytest.approx(20 / 12), pytest.approx(30 / 10))
    assert result["ours_n"] == 3


def test_a_run_that_never_reaches_the_target_counts_as_infinite_time():
    # Dropping async_sgd's two misses would leave its 5 s, faster than every async_easgd run.
    results = table(runs("async_easgd", [10, 11, 12]), runs("async_sgd", [5, None, None]))
    result = check("async_easgd_vs_async_sgd", results)
    assert math.isinf(result["ours_median"]) and result["ours_min"] == pytest.approx(0.5)
    assert "async_sgd never reached the target in 2 of 3 seeds" in result["reason"]
    assert "async_sgd not reached [5–not reached] n=3" in result["ours"]
    all_reach_late = table(runs("async_easgd", [10, 11, 12]), runs("async_sgd", [50, None, None]))
    assert check("async_easgd_vs_async_sgd", all_reach_late)["verdict"] == HOLDS


def test_neither_reaching_the_target():
    some = check(
        "async_easgd_vs_async_sgd", table(runs("async_easgd", [10, None, 12]), runs("async_sgd", [20, None, 25]))
    )
    assert some["verdict"] == DOES_NOT_HOLD and "neither reached the target in 1 of 3 seeds" in some["reason"]
    none = check("async_easgd_vs_async_sgd", table(runs("async_easgd", [None] * 3), runs("async_sgd", [None] * 3)))
    assert none["verdict"] == NOT_COMPARABLE and "in any seed" in none["reason"]


def test_too_few_seeds_is_not_comparable_but_prints_the_numbers():
    result = check("async_easgd_vs_async_sgd", table(runs("async_easgd", [10, 11]), runs("async_sgd", [20, 21, 25])))
    assert result["verdict"] == NOT_COMPARABLE
    assert result["reason"] == "fewer than 3 seeds (async_easgd has 2)"
    assert result["ours_n"] == 2 and result["ours_median"] > 1


def test_a_setting_lacking_a_side_adds_no_row_when_another_is_judged():
    judged = table(
        runs("async_easgd", [10, 11, 12]), runs("async_sgd", [20, 21, 25]), runs("async_easgd", [5, 6, 7], workers=4)
    )  # no async_sgd at P=4
    result = check("async_easgd_vs_async_sgd", judged)
    assert result["verdict"] == HOLDS and result["setting"].endswith("P=8")


def test_the_algorithm_claims_hold_on_any_dataset():
    digits = table(
        runs("hogwild_easgd", [10, 11, 12], dataset="digits", model="lenet"),
        runs("hogwild_sgd", [20, 21, 25], dataset="digits", model="lenet"),
    )
    assert check("hogwild_easgd_vs_hogwild_sgd", digits)["verdict"] == HOLDS


def test_a_missing_algorithm_is_not_comparable_and_named():
    result = check("async_easgd_vs_async_sgd", table(runs("async_easgd", [10, 11, 12])))
    assert result["verdict"] == NOT_COMPARABLE
    assert result["reason"] == "missing runs of async_sgd in 1 setting: cifar10/cifar_alexnet, gpu, P=8"
    nothing = check("async_easgd_vs_async_sgd", table(runs("sync_sgd", [10, 11, 12])))
    assert nothing["reason"] == "no runs of async_easgd, async_sgd in the summary"


def test_different_or_missing_targets_are_not_comparable():
    results = table(runs("async_easgd", [10, 11, 12], target=0.6), runs("async_sgd", [20, 21, 25]))
    assert "target accuracies differ" in check("async_easgd_vs_async_sgd", results)["reason"]
    results = table(
        runs("async_easgd", [10, 11, 12], target=math.nan), runs("async_sgd", [20, 21, 25], target=math.nan)
    )
    assert "no target accuracy" in check("async_easgd_vs_async_sgd", results)["reason"]


def test_an_alternative_side_stands_in():
    result = check("sync_easgd_vs_easgd", table(runs("sync_easgd", [5, 6, 7]), runs("easgd", [20, 21, 25])))
    assert result["verdict"] == HOLDS and "sync_easgd 6 s" in result["ours"]


# ------------------------------------------------------------------ needs


def ladder_step():
    return table(runs("sync_easgd1", [10, 11, 12], platform="local"), runs("easgd", [37, 40, 44], platform="local"))


def test_a_gpu_claim_on_cpu_runs_is_not_comparable_but_says_what_the_numbers_show():
    result = check("ladder_sync_easgd1", ladder_step(), Context(devices={"local": "cpu"}))
    assert result["verdict"] == NOT_COMPARABLE
    assert result["reason"].startswith("no GPU: platform local ran on cpu, where CPU–GPU copies do not exist")
    assert "here it holds: sync_easgd1 faster in every seed" in result["reason"]
    assert result["ours_median"] == pytest.approx(44 / 12)  # median of 37/10, 40/11, 44/12


def test_the_device_comes_from_the_mapping_or_a_device_column():
    unknown = check("ladder_sync_easgd1", ladder_step(), Context())
    assert unknown["verdict"] == NOT_COMPARABLE and "device of platform local is unknown" in unknown["reason"]
    assert check("ladder_sync_easgd1", ladder_step(), Context(devices={"local": "gpu"}))["verdict"] == HOLDS
    with_column = ladder_step().assign(device="cuda:0")
    assert check("ladder_sync_easgd1", with_column, Context())["verdict"] == HOLDS


def test_the_paper_dataset_is_needed():
    results = table(
        runs("sync_easgd1", [10, 11, 12], dataset="digits", model="lenet"),
        runs("easgd", [37, 40, 44], dataset="digits", model="lenet"),
    )
    reason = check("ladder_sync_easgd1", results)["reason"]
    assert "the paper used dataset cifar10, these runs digits" in reason
    assert "the paper used model cifar_alexnet, these runs lenet" in reason


# ------------------------------------------------------------------ faster and stable


def test_faster_and_stable():
    stable = table(runs("async_measgd", [10, 11, 12]), runs("async_msgd", [30, None, None]))
    result = check("async_measgd_vs_async_msgd", stable)
    assert result["verdict"] == HOLDS and "reached in 3 of 3 seeds vs 1 of 3" in result["ours"]
    # Faster in every seed, but its times spread more: (20 - 10) / 12 against (40 - 38) / 39.
    spread = table(runs("async_measgd", [10, 12, 20]), runs("async_msgd", [38, 39, 40]))
    result = check("async_measgd_vs_async_msgd", spread)
    assert result["verdict"] == DOES_NOT_HOLD and result["reason"].startswith("not more stable")
    few = table(runs("async_measgd", [10]), runs("async_msgd", [30, 31, 32]))
    assert check("async_measgd_vs_async_msgd", few)["verdict"] == NOT_COMPARABLE


# ------------------------------------------------------------------ fastest and tied


def figure_8(hogwild_easgd=(10, 10.5, 11), async_easgd=(20, 21, 22), drop=None):
    groups = {
        "sync_easgd3": [10.2, 10.4, 10.8],
        "hogwild_easgd": list(hogwild_easgd),
        "easgd": [60, 61, 62],
        "async_sgd": [40, 41, 42],
        "async_msgd": [50, None, 52],
        "hogwild_sgd": [30, 31, 32],
        "async_easgd": list(async_easgd),
        "async_measgd": [25, 26, 27],
    }
    return table(*(runs(name, times) for name, times in groups.items() if name != drop))


def test_fastest_tied():
    result = check("fastest_sync_and_hogwild_easgd", figure_8())
    assert result["verdict"] == HOLDS
    assert "sync_easgd3 over hogwild_easgd" in result["ours"] and "smallest lead" in result["ours"]
    assert result["ours_median"] == pytest.approx(10.5 / 10.4)
    not_tied = check("fastest_sync_and_hogwild_easgd", figure_8(hogwild_easgd=(14, 15, 16)))
    assert not_tied["verdict"] == DOES_NOT_HOLD and not_tied["reason"].startswith("not tied")
    beaten = check("fastest_sync_and_hogwild_easgd", figure_8(async_easgd=(10.4, 10.6, 10.9)))
    assert beaten["verdict"] == DOES_NOT_HOLD and "not faster than async_easgd" in beaten["reason"]
    missing = check("fastest_sync_and_hogwild_easgd", figure_8(drop="async_msgd"))
    assert missing["verdict"] == NOT_COMPARABLE and "missing runs of async_msgd" in missing["reason"]


# ------------------------------------------------------------------ share_lower


def shares(easgd, sync):
    return table(runs("easgd", [1, 1, 1], comm_share=easgd), runs("sync_easgd3", [1, 1, 1], comm_share=sync))


def test_share_lower():
    result = check("comm_share_drop", shares([0.85, 0.87, 0.9], [0.1, 0.14, 0.2]))
    assert result["verdict"] == HOLDS and result["ours_median"] == pytest.approx(0.14)
    assert "easgd 87.0 % [85.0–90.0] n=3 → sync_easgd3 14.0 % [10.0–20.0] n=3" in result["ours"]
    overlap = check("comm_share_drop", shares([0.5, 0.6, 0.7], [0.3, 0.4, 0.55]))
    assert overlap["verdict"] == DOES_NOT_HOLD and overlap["reason"] == "the ranges overlap"
    same = check("comm_share_drop", shares([0.5, 0.5, 0.5], [0.48, 0.49, 0.5]))
    assert same["verdict"] == DOES_NOT_HOLD and same["reason"].startswith("no drop")
    unmeasured = check("comm_share_drop", shares([0.85, 0.87, 0.9], [0.1, math.nan, 0.2]))
    assert unmeasured["verdict"] == NOT_COMPARABLE and "sync_easgd3 has 2" in unmeasured["reason"]


# ------------------------------------------------------------------ chip partitioning


def test_chip_partition_compares_the_largest_part_count_with_one():
    results = table(
        runs("chip_partition", [1605, 1600, 1610], workers=1, platform="knl"),
        runs("chip_partition", [1025, 1000, 1030], workers=4, platform="knl"),
        runs("chip_partition", [490, 495, 500], workers=16, platform="knl"),
    )
    result = check("chip_partition", results, KNL)
    assert result["verdict"] == HOLDS and "chip_partition P=16" in result["ours"]
    assert result["ours_median"] == pytest.approx(1600 / 495)  # median of 1605/490, 1600/495, 1610/500
    only_one = check(
        "chip_partition", table(runs("chip_partition", [1605, 1600, 1610], workers=1, platform="knl")), KNL
    )
    assert only_one["verdict"] == NOT_COMPARABLE and "a second worker count" in only_one["reason"]


# ------------------------------------------------------------------ weak scaling


def sweep(step_at_largest, workers=(1, 64), platform="knl", run=("", "")):
    return table(
        runs(
            "sync_easgd", [1, 1, 1], workers=workers[0], platform=platform, seconds_per_step=[1.0] * 3, run=[run[0]] * 3
        ),
        runs(
            "sync_easgd",
            [1, 1, 1],
            workers=workers[1],
            platform=platform,
            seconds_per_step=list(step_at_largest),
            run=[run[1]] * 3,
        ),
    )


def test_weak_scaling_efficiency():
    result = check("weak_scaling", sweep([1.05, 1.06, 1.08]), KNL)
    assert result["verdict"] == HOLDS and result["ours_median"] == pytest.approx(1 / 1.06)
    assert "E(P=64 vs 1) = 94.3 % [92.6–95.2] n=3" in result["ours"]
    low = check("weak_scaling", sweep([1.2, 1.25, 1.3]), KNL)
    assert low["verdict"] == DOES_NOT_HOLD and low["reason"].startswith("median 80.0 % is below 91.5 %")
    on_cpu = check("weak_scaling", sweep([1.05, 1.06, 1.08], platform="cpu"), Context(devices={"cpu": "cpu"}))
    assert on_cpu["verdict"] == NOT_COMPARABLE and on_cpu["reason"].startswith("not a KNL: platform cpu ran on cpu")
    small = check("weak_scaling", sweep([1.05, 1.06, 1.08], workers=(1, 8)), KNL)
    assert small["verdict"] == NOT_COMPARABLE and "our largest P is 8" in small["reason"]
    no_sweep = check("weak_scaling", table(runs("sync_easgd", [1, 1, 1], platform="knl")), KNL)
    assert no_sweep["verdict"] == NOT_COMPARABLE and "a second worker count" in no_sweep["reason"]


def write_run_json(path, compute_s):
    path.mkdir(parents=True)
    per_rank = [
        {"role": "worker", "transfer_per_step_s": 0.01, "wait_per_step_s": 0.0, "compute_per_step_s": compute_s}
    ]
    (path / "run.json").write_text(
        json.dumps({"model": {"bytes": 4_000_000}, "stop": {"steps": 100}, "phases": {"per_rank": per_rank}})
    )
    return path.as_posix()


def test_weak_scaling_prints_the_alpha_beta_extrapolation_with_a_network(tmp_path):
    net = Network(1e-5, 1e-9)
    base = write_run_json(tmp_path / "p1", compute_s=0.05)
    top = write_run_json(tmp_path / "p64", compute_s=0.05)
    result = check("weak_scaling", sweep([1.05, 1.06, 1.08], run=(base, top)), Context({"knl": "knl"}, net))
    expected = efficiency("sync_easgd", net, 4_000_000, 4253, 0.05, model="paper")
    assert "α-β model (paper / bandwidth_optimal)" in result["ours"]
    assert f"{fmt_share(expected)} / " in result["ours"] and "at P=4253" in result["ours"]
    missing = check(
        "weak_scaling", sweep([1.05, 1.06, 1.08], run=(str(tmp_path / "nowhere"), top)), Context({"knl": "knl"}, net)
    )
    assert "α-β model: n/a" in missing["ours"] and missing["verdict"] == HOLDS


# ------------------------------------------------------------------ the command


def write_summary(path, results: pd.DataFrame):
    results.to_csv(path, index=False)
    return str(path)


def test_claims_command_end_to_end(tmp_path, capsys):
    summary = write_summary(
        tmp_path / "summary.csv",
        table(
            runs("async_easgd", [10, 11, 12], platform="local"),
            runs("async_sgd", [20, None, 25], platform="local"),
            runs("sync_easgd1", [10, 11, 12], platform="local"),
            runs("easgd", [37, 40, 44], platform="local"),
        ),
    )
    md, csv = tmp_path / "out/claims.md", tmp_path / "out/claims.csv"
    code = main(
        ["claims", "--summary", summary, "--device-of", "local=cpu", "--out-md", str(md), "--out-csv", str(csv)]
    )
    assert code == 0 and "wrote" in capsys.readouterr().out
    out = pd.read_csv(csv).set_index("id")
    assert set(out.index) == set(CLAIMS)
    assert out.loc["async_easgd_vs_async_sgd", "verdict"] == HOLDS
    assert out.loc["ladder_sync_easgd1", "verdict"] == NOT_COMPARABLE
    assert out.loc["ladder_sync_easgd1", "reason"].startswith("no GPU")
    text = md.read_text()
    assert "| Fig. 6.1 |" in text and "| holds |" in text
    assert not list(tmp_path.glob("out/.*.tmp"))


def one_line_error(capsys, argv) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1, err
    return err


def test_claims_command_bad_input_is_one_line(tmp_path, capsys):
    outs = ["--out-md", str(tmp_path / "c.md"), "--out-csv", str(tmp_path / "c.csv")]
    assert "no such summary table" in one_line_error(capsys, ["claims", "--summary", str(tmp_path / "none.csv"), *outs])
    partial = write_summary(tmp_path / "partial.csv", pd.DataFrame({"dataset": ["digits"], "model": ["lenet"]}))
    assert "lacks the columns algorithm, platform" in one_line_error(capsys, ["claims", "--summary", partial, *outs])
    good = write_summary(tmp_path / "summary.csv", table(runs("async_easgd", [10, 11, 12])))
    bad_claims = tmp_path / "claims.yaml"
    bad_claims.write_text(
        "claims:\n  - {id: x, figure: F, claim: c, compares: {faster: easgd, than: easgd},\n"
        "     paper: p, metric: time_to_target_s, rule: {name: quicker}}\n"
    )
    err = one_line_error(capsys, ["claims", "--summary", good, "--claims", str(bad_claims), *outs])
    assert "unknown rule 'quicker'" in err
    assert "DEVICE one of" in one_line_error(capsys, ["claims", "--summary", good, "--device-of", "gpu", *outs])
    assert not (tmp_path / "c.md").exists() and not (tmp_path / "c.csv").exists()


# ---------------------------------------------------------------- beyond the paper: communication


def bytes_runs(algorithm, megabytes):
    """Summary rows whose bytes to target are `megabytes` per seed (None: the target was not reached)."""
    return runs(
        algorithm,
        [1.0 if mb is not None else None for mb in megabytes],
        platform="local",
        dataset="digits",
        model="lenet",
        workers=2,
        target=0.9,
        bytes_to_target=[math.inf if mb is None else mb * 1e6 for mb in megabytes],
    )


def test_less_communication_holds_only_when_every_seed_saves_the_factor():
    held = check(
        "diloco_vs_sync_sgd", table(bytes_runs("diloco", [17, 17, 24]), bytes_runs("sync_sgd", [138, 138, 207]))
    )
    assert held["verdict"] == HOLDS and "8.12× [8.12–8.62] n=3 less paired by seed" in held["ours"], held
    short = check(
        "diloco_vs_sync_sgd", table(bytes_runs("diloco", [17, 60, 24]), bytes_runs("sync_sgd", [138, 138, 207]))
    )
    assert short["verdict"] == DOES_NOT_HOLD and "below 4×" in short["reason"], short


def test_less_communication_fails_when_a_seed_never_reaches_the_target():
    missed = check(
        "local_sgd_vs_sync_sgd", table(bytes_runs("local_sgd", [17, None, 24]), bytes_runs("sync_sgd", [138, 138, 207]))
    )
    assert missed["verdict"] == DOES_NOT_HOLD and "never reached the target in 1 of 3" in missed["reason"], missed
    nothing = check(
        "local_sgd_vs_sync_sgd",
        table(bytes_runs("local_sgd", [17, 17, 24]), bytes_runs("sync_sgd", [None, None, None])),
    )
    assert nothing["verdict"] == NOT_COMPARABLE, nothing
