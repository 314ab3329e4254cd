"""Every shipped config plans the jobs recorded in tests/workflow/dryruns.json: the same outputs, each made by
the same command, with the same inputs, log, benchmark, wildcards and resources.

The record was taken before the workflow's Python half moved into scaledl.grid (tests/dry_runs.py writes
it anew), so a move that changes a job shows here as the job and field that changed. A change made on
purpose updates the record in a commit of its own that says what changed and why.
"""

from __future__ import annotations

import json

import pytest
from dry_runs import RECORD, invocations, jobs_of, resources_of

RECORDED = json.loads(RECORD.read_text())


def test_the_record_covers_every_shipped_config():
    assert sorted(RECORDED) == sorted(invocations())


def short(value, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit // 2]} ... {text[-limit // 2 :]}"


def differences(recorded: dict, planned: dict) -> list[str]:
    """What differs between two jobs, field by field (resources as a mapping: their order is Snakemake's)."""
    found = []
    for field in sorted(set(recorded) | set(planned)):
        was, now = recorded.get(field), planned.get(field)
        if field == "resources":
            was, now = resources_of(was or ""), resources_of(now or "")
        if was != now:
            found.append(f"{field}: recorded {short(was)}, planned {short(now)}")
    return found


@pytest.mark.workflow
@pytest.mark.parametrize("key", sorted(RECORDED))
def test_a_shipped_config_plans_its_recorded_jobs(key, shipped_dry_runs):
    run, recorded = shipped_dry_runs[key], RECORDED[key]
    assert run.returncode == recorded["exit"], run.stdout[-3000:]
    planned = jobs_of(run.stdout)
    assert sorted(planned) == sorted(recorded["jobs"]), (
        f"outputs only recorded: {sorted(set(recorded['jobs']) - set(planned))}; "
        f"only planned: {sorted(set(planned) - set(recorded['jobs']))}"
    )
    changed = {output: differences(job, planned[output]) for output, job in recorded["jobs"].items()}
    changed = {output: fields for output, fields in changed.items() if fields}
    shown = list(changed.items())[:5]
    assert not changed, f"{len(changed)} job(s) changed, e.g.\n" + "\n".join(
        f"{short(output)}:\n  " + "\n  ".join(fields) for output, fields in shown
    )
