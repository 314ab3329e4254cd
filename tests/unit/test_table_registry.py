"""The tables `scaledl aggregate` builds are the ones the workflow declares: one rule over the registry."""

from __future__ import annotations

import re
from pathlib import Path

from scaledl.report.catalogue import TABLE_NAMES
from scaledl.report.tables import TABLES

REPO = Path(__file__).resolve().parents[2]


def test_the_torch_free_table_names_are_the_registrys():
    assert TABLE_NAMES == tuple(TABLES)


def test_one_rule_makes_every_table_and_none_is_spelt_out():
    rules = (REPO / "workflow/rules/report.smk").read_text()
    assert len(re.findall(r"^rule \w+:", rules, re.M)) == 3  # aggregate, plot_accuracy_vs_time, claims
    aggregate = rules.split("rule aggregate:")[1].split("\nrule ")[0]
    assert "table=TABLES" in aggregate and "--table {wildcards.table}" in aggregate
    assert '"logs/{name}/aggregate/{table}.log"' in aggregate
    assert not re.findall(r"(summary|scaling|averaging)\.", aggregate), "a table spelt out by hand"
