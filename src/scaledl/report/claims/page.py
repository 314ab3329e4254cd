"""claims.md: the overview of every claim, measured and simulated side by side, the controls and the checks."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from scaledl.report.claims.clock_swap import clock_swap_lines
from scaledl.report.claims.judged import judged_markdown, smoke_note
from scaledl.report.claims.rules import AA_RULES, INCLUSION_RULES
from scaledl.report.claims.words import (
    CONTROL,
    INCONCLUSIVE,
    LATER,
    NOT_COMPARABLE,
    PROTOCOLS,
    REVERSED,
    RUNNER_UP,
    SHARED,
    TUNED,
    VERDICTS,
)
from scaledl.report.stats import (
    ALPHA,
)
from scaledl.report.tables import markdown_table


def blob_hash(text: str) -> str:
    """The git blob hash of a file with this text (what `git hash-object` prints): the claims' fixed version."""
    data = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def claims_markdown(table: pd.DataFrame, summary: Path, claims_text: str, claims_where: str) -> str:
    """The claims page: the protocol, the paper's claims under each protocol side by side, the controls and
    the inclusion checks, each row with its decomposition."""
    counts = ", ".join(f"{v}: {int((table['verdict'] == v).sum())}" for v in VERDICTS)
    lines = [
        f"# The paper's claims against {summary}",
        "",
        f"Claims: {claims_where}, git blob {blob_hash(claims_text)[:12]}, fixed before the runs. Rows by "
        f"verdict: {counts}. Each comparison is paired by seed and decided by the exact sign test at "
        f"α = {ALPHA:g} (holds, reversed, or inconclusive), Holm-corrected where one method is compared with "
        "several; a tie refuted by a clear winner is not tied, never reversed. Ours is the median over seeds "
        "with the exact interval of that median (labelled with its true coverage: 93.8 % is [min, max] of 5), n "
        "and how many distinct values the seeds gave; time to target (the crossing, interpolated between "
        "evaluations) = steps to target × seconds per step for each side. The rules are in scaledl.report.claims.",
        "",
    ]
    checks = table["id"].isin(inclusion_ids(table) + aa_ids(table))  # checks of the harness, not the paper's
    paper = table[~table["protocol"].isin([CONTROL]) & ~checks]
    simulated = paper["simulated_on"].fillna("").astype(str) if "simulated_on" in paper else pd.Series("", paper.index)
    unrun = paper["setting"] == "—"  # a claim with no runs at all: said once, beside the runs there are
    if simulated.any() and not ((simulated == "") & ~unrun).any():
        simulated = simulated.where(~unrun, sorted(set(simulated) - {""})[0])  # only simulated runs here
    if simulated.any():
        lines += [
            "## Measured and simulated, claim by claim",
            "",
            "Each column's verdicts, setting by setting; a simulated platform's runs are judged on their own "
            "(simulated seconds on the platform named), never with measured ones; `agree` says whether the "
            "simulated verdicts are the measured ones (— where either side was not judged; † where a measured "
            "side ran more ranks than cores, whose step prices are the scheduler's, counted apart).",
            "",
            markdown_table(overview(paper, simulated)),
            "",
            *agreement_counts(paper, simulated),
        ]
    for platform in ["", *sorted(set(simulated) - {""})]:
        part = paper[simulated == platform]
        if part.empty:
            continue
        where = f", simulated on {platform}" if platform else (", measured" if simulated.any() else "")
        lines += [
            f"## The paper's claims{where}, tuned and at one shared η",
            "",
            markdown_table(side_by_side(part)),
            "",
        ]
    lines += clock_swap_lines(paper)
    for title, part in (
        ("Controls (the harness must call these holds)", table[table["protocol"] == CONTROL]),
        (
            "Inclusion checks (a general method tuned never loses to its special case tuned)",
            table[table["id"].isin(inclusion_ids(table))],
        ),
        (
            "A/A check (numerically identical configurations must come out tied; where they do not, the reason "
            "says whether the tuning decided it)",
            table[table["id"].isin(aa_ids(table))],
        ),
    ):
        if not part.empty:
            columns = ["claim", "protocol", "setting", "ours", "verdict", "reason"]
            columns = [c for c in columns if c != "protocol" or part["protocol"].nunique() > 1]
            lines += [f"## {title}", "", markdown_table(part[columns]), ""]
            # a control that could not be judged (not run, too few seeds) says so in its row; it is no failure
            failed = part[part["verdict"].isin([REVERSED, INCONCLUSIVE])]
            if title.startswith("Controls") and not failed.empty:
                lines += [
                    f"**The harness failed a control** ({'; '.join(failed['id'] + ' on ' + failed['setting'])}): "
                    "its other verdicts are not to be trusted.",
                    "",
                ]
    return "\n".join(lines)


def overview(paper: pd.DataFrame, simulated: pd.Series) -> pd.DataFrame:
    """One row per claim; a column per protocol and kind of runs (measured, or simulated on a platform), each
    cell its settings' verdicts."""
    claims = paper.drop_duplicates("id").set_index("id")[["figure", "claim"]]
    verdicts: dict[tuple[str, str], pd.Series] = {}
    for platform in ["", *sorted(set(simulated) - {""})]:
        kind = f"simulated on {platform}" if platform else "measured"
        for protocol in PROTOCOLS:
            part = paper[(simulated == platform) & (paper["protocol"] == protocol)]
            if part.empty:
                continue
            named = verdict_named(part)
            cells = (named + " (" + part["setting"].astype(str) + ")").groupby(part["id"]).agg("; ".join)
            claims[f"{kind} ({protocol})"] = cells
            verdicts[platform, protocol] = named.groupby(part["id"]).agg(lambda v: tuple(sorted(v)))
    for (platform, protocol), agree, over in agreements(paper, simulated, verdicts):
        claims[f"agree ({protocol}, {platform})"] = agree + over.map({True: " †", False: ""})  # the rest print —
    return claims.reset_index(drop=True).fillna("—")


def agreements(paper: pd.DataFrame, simulated: pd.Series, verdicts: dict | None = None):
    """Per (simulated platform, protocol) with measured verdicts beside it: the claims judged on both sides,
    whether their verdicts agree ("yes" / "**no**"), and whether a measured side ran oversubscribed."""
    if verdicts is None:
        verdicts = {}
        for platform in ["", *sorted(set(simulated) - {""})]:
            for protocol in PROTOCOLS:
                part = paper[(simulated == platform) & (paper["protocol"] == protocol)]
                if not part.empty:
                    verdicts[platform, protocol] = (
                        verdict_named(part).groupby(part["id"]).agg(lambda v: tuple(sorted(v)))
                    )
    found = []
    for (platform, protocol), simulated_verdicts in verdicts.items():
        measured = verdicts.get(("", protocol))
        if platform and measured is not None:  # does the simulator give the verdicts this machine gives?
            both = measured.index.intersection(simulated_verdicts.index)
            unjudged = measured[both].map(not_judged) | simulated_verdicts[both].map(not_judged)
            judged = both[~unjudged.to_numpy()]
            agree = (measured[judged] == simulated_verdicts[judged]).map({True: "yes", False: "**no**"})
            rows = paper[(simulated == "") & (paper["protocol"] == protocol)]
            flags = rows["oversubscribed"].fillna("").astype(str) != "" if "oversubscribed" in rows else None
            over = (
                flags.groupby(rows["id"]).any().reindex(judged, fill_value=False)
                if flags is not None
                else pd.Series(False, index=judged)
            )
            found.append(((platform, protocol), agree, over.astype(bool)))
    return found


def cell_agreements(paper: pd.DataFrame, simulated: pd.Series) -> pd.DataFrame:
    """One row per simulated platform, protocol, claim and setting judged on both sides, the measured row paired
    with the simulated one by its setting but the platform: both verdicts (each naming its winner), whether they
    agree, and whether the measured side ran more ranks than cores."""
    columns = ["platform", "protocol", "id", "setting", "measured", "simulated", "agree", "oversubscribed"]
    rows = paper.assign(
        named=verdict_named(paper),
        cell=paper["setting_any_platform"].fillna("").astype(str) if "setting_any_platform" in paper else "",
        over=paper["oversubscribed"].fillna("").astype(str) if "oversubscribed" in paper else "",
        where=simulated,
    )
    rows = rows[rows["verdict"] != NOT_COMPARABLE]
    key = ["protocol", "id", "cell"]
    measured = rows[rows["where"] == ""][[*key, "setting", "named", "over"]]
    pairs = measured.merge(rows[rows["where"] != ""][[*key, "where", "named"]], on=key, suffixes=("", "_twin"))
    if pairs.empty:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(
        {
            "platform": pairs["where"],
            "protocol": pairs["protocol"],
            "id": pairs["id"],
            "setting": pairs["setting"],
            "measured": pairs["named"],
            "simulated": pairs["named_twin"],
            "agree": (pairs["named"] == pairs["named_twin"]).map({True: "yes", False: "**no**"}),
            "oversubscribed": pairs["over"],
        }
    ).sort_values(["platform", "protocol", "oversubscribed", "id", "setting"], kind="stable")


def agreement_counts(paper: pd.DataFrame, simulated: pd.Series) -> list[str]:
    """One line per simulated platform and protocol: how many claims agree, then how many of their cells
    (settings judged on both sides), the cells whose measured side ran one rank per core apart, and the cells
    as a table, those first."""
    lines = []
    cells = cell_agreements(paper, simulated)
    for (platform, protocol), agree, _ in agreements(paper, simulated):
        if agree.empty:
            continue
        part = cells[(cells["platform"] == platform) & (cells["protocol"] == protocol)]
        same, over = part["agree"] == "yes", part["oversubscribed"] != ""
        lines.append(
            f"- {protocol}, {platform}: agree on {int((agree == 'yes').sum())} of {len(agree)} claims judged on "
            f"both sides; cell by cell, {int(same[~over].sum())} of {int((~over).sum())} where the measured side "
            f"ran one rank per core, {int(same[over].sum())} of {int(over.sum())} where it ran more ranks than "
            "cores."
        )
    if cells.empty:
        return [*lines, ""] if lines else []
    shown = cells.assign(oversubscribed=cells["oversubscribed"].replace("", "no"))
    return [*lines, "", "Cell by cell (one rank per core first):", "", markdown_table(shown), ""]


def not_judged(verdicts: tuple[str, ...]) -> bool:
    """Every setting of a claim not comparable here: there is no verdict to agree with."""
    return all(verdict == NOT_COMPARABLE for verdict in verdicts)


def verdict_named(rows: pd.DataFrame) -> pd.Series:
    """Each row's verdict with its winner where it names one ("not tied, hogwild_easgd faster"): two sides
    not tied in opposite directions are two verdicts, not one."""
    faster = rows["faster"].fillna("").astype(str) if "faster" in rows else pd.Series("", rows.index)
    return rows["verdict"].astype(str) + faster.map(lambda side: f", {side} faster" if side else "")


def aa_ids(table: pd.DataFrame) -> list[str]:
    """The A/A checks' ids: what kind a claim is comes from its rule, not from its name."""
    return [str(i) for i in table.loc[table["rule"].isin(AA_RULES), "id"].unique()]


def inclusion_ids(table: pd.DataFrame) -> list[str]:
    """The inclusion checks' ids (their rule: INCLUSION_RULES)."""
    return [str(i) for i in table.loc[table["rule"].isin(INCLUSION_RULES), "id"].unique()]


def side_by_side(paper: pd.DataFrame) -> pd.DataFrame:
    """One row per claim and setting, each protocol's verdict and numbers beside the other's."""
    columns = ["figure", "claim", "setting", "paper"]
    if "sensitivity" in paper and paper["sensitivity"].fillna("").astype(str).ne("").any():
        columns.append("sensitivity")  # a simulated verdict's survival of the platform's constants varied
    out = paper[["id", *columns]].drop_duplicates(["id", "setting"]).set_index(["id", "setting"])
    for protocol in PROTOCOLS:
        part = paper[paper["protocol"] == protocol].set_index(["id", "setting"])
        if part.empty:
            continue
        out[f"{protocol}: verdict"] = part["verdict"]
        out[f"{protocol}: ours"] = part["ours"] + part["decomposition"].map(lambda d: f" ({d})" if d else "")
        out[f"{protocol}: reason"] = part["reason"]
    if {f"{TUNED}: verdict", f"{SHARED}: verdict"} <= set(out.columns):
        tuned, shared = out[f"{TUNED}: verdict"], out[f"{SHARED}: verdict"]
        # a setting judged under one protocol only has no verdict to change
        out["changed"] = (tuned.notna() & shared.notna() & (tuned != shared)).map({True: "yes", False: ""})
    if {f"{TUNED}: verdict", f"{LATER}: verdict"} <= set(out.columns):
        first, later = out[f"{TUNED}: verdict"], out[f"{LATER}: verdict"]
        out["same at the later target"] = [
            "—" if pd.isna(a) or pd.isna(b) else "yes" if a == b else f"**no**: {b} at the later target"
            for a, b in zip(first, later)
        ]
    if {f"{TUNED}: verdict", f"{RUNNER_UP}: verdict"} <= set(out.columns):
        best, second = out[f"{TUNED}: verdict"], out[f"{RUNNER_UP}: verdict"]
        out["robust"] = [
            "—" if pd.isna(a) or pd.isna(b) else "yes" if a == b else f"**no**: {b} at the runner-up η"
            for a, b in zip(best, second)
        ]
    out = out.reset_index().drop(columns=["id"]).fillna("—")
    return out[[*columns, *[c for c in out.columns if c not in columns]]]


def claims_page(table: pd.DataFrame, results: pd.DataFrame, summary: Path, claims_text: str, claims_where: str) -> str:
    """claims.md whole, written here alone: the title, the smoke-test note where every configuration ran one
    seed, the claims (claims_markdown), then the configurations judged (judged.judged_markdown)."""
    title, _, body = claims_markdown(table, summary, claims_text, claims_where).partition("\n\n")
    smoke = smoke_note(results)
    return "\n\n".join([title, *([smoke] if smoke else []), body]) + "\n" + judged_markdown(results, table)
