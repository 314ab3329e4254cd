"""The clock swap: each claim judged on a simulated platform and on its twin timed by the α-β clock.

A platform with `clock: alphabeta` prices every message in closed form, α + n/B of its route, sharing no link,
as analytical models do; its runs are otherwise the SimGrid clock's runs of the same platform file. Setting by
setting, the table puts the two verdicts side by side and says which change with the clock: a verdict that
changes rests on how the network's links are shared, which a closed-form clock cannot see.
"""

from __future__ import annotations

import pandas as pd

from scaledl.report.claims.context import ALPHABETA_MARK
from scaledl.report.tables import markdown_table


def clock_swap(paper: pd.DataFrame) -> pd.DataFrame:
    """One row per claim, protocol and setting judged on both clocks of one platform file: both verdicts, and
    whether they differ; empty where no platform ran on the α-β clock."""
    on = paper["simulated_on"].fillna("").astype(str)
    rows = []
    for swapped in paper[on.str.endswith(ALPHABETA_MARK)].itertuples():
        same = (paper["id"] == swapped.id) & (paper["protocol"] == swapped.protocol)
        same &= paper["setting_any_platform"] == swapped.setting_any_platform
        for twin in paper[same & (on == swapped.simulated_on.removesuffix(ALPHABETA_MARK))].itertuples():
            rows.append(
                {
                    "claim": swapped.claim,
                    "protocol": swapped.protocol,
                    "settings": f"{twin.setting}; {swapped.setting}",
                    "SimGrid clock": f"{twin.verdict}: {twin.ours}",
                    "α-β clock": f"{swapped.verdict}: {swapped.ours}",
                    "changes with the clock": "**yes**" if twin.verdict != swapped.verdict else "no",
                }
            )
    return pd.DataFrame(rows)


def clock_swap_lines(paper: pd.DataFrame) -> list[str]:
    """The claims page's section on the clock swap; none where no platform ran on the α-β clock."""
    table = clock_swap(paper)
    if table.empty:
        return []
    changed = int((table["changes with the clock"] != "no").sum())
    return [
        "## The clock swap: which verdicts rest on how the network is shared",
        "",
        "Each claim judged on a simulated platform (the SimGrid clock: every link shared by the messages crossing "
        "it at the time) and on the same platform file timed in closed form (the α-β clock: α + n/B of each "
        f"message's route, nothing shared). {changed} of {len(table)} verdicts change with the clock.",
        "",
        markdown_table(table),
        "",
    ]
