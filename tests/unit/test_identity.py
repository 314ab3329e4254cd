"""A configuration's identity (scaledl.report.identity): the settings a run ran with, derived ones left out."""

from scaledl.algorithms import settings as resolver
from scaledl.report import identity


def test_the_names_are_run_jsons_blocks():
    assert (identity.HYPER, identity.AVERAGING) == (resolver.HYPER, resolver.AVERAGING)


def test_settings_leave_out_what_follows_from_the_others_and_add_other_swept_keys():
    record = {
        "hyper": {"lr": 0.05, "batch_size": 64, "rho": 9.0, "alpha": 0.45, "beta": 0.9},
        "arguments": {"sweep": "lr,max_steps", "lr": 0.05, "max_steps": 300},
    }
    assert identity.settings_of(record) == {"lr": 0.05, "batch_size": 64, "beta": 0.9, "max_steps": 300}
    given_rho = {"hyper": {"lr": 0.05, "rho": 9.0, "alpha": 0.45}}
    assert identity.settings_of(given_rho) == {"lr": 0.05, "rho": 9.0}  # ρ given, not derived from β
    # the neutral age weight is the method as recorded before the setting existed: one configuration with it
    assert identity.settings_of({"hyper": {"lr": 0.05, "age_weight": "none"}}) == {"lr": 0.05}
    assert identity.settings_of({"hyper": {"lr": 0.05, "age_weight": "inverse"}})["age_weight"] == "inverse"


def test_configurations_split_by_settings_and_name_only_what_differs():
    runs = [{"lr": 0.01, "beta": 0.9}, {"lr": 0.05, "beta": 0.9}, {"lr": 0.01, "beta": 0.9}]
    assert identity.configurations(runs, dict) == [("lr=0.01", [runs[0], runs[2]]), ("lr=0.05", [runs[1]])]
    assert identity.configurations(runs[:1], dict) == [("", runs[:1])]
    assert identity.differing([{"lr": 0.05}, {"lr": 0.05, "momentum": 0.9}]) == ["momentum"]
