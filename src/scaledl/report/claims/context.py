"""What the summary does not say about itself: the hardware a claim needs, each tuned run's choice, the
sensitivity sweeps, oversubscription."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from scaledl.errors import UserError
from scaledl.grid.tune import at_runner_up, choice_for, reads_choice
from scaledl.net.alphabeta import Network
from scaledl.report.claims.sides import TUNED_COLUMNS, Side
from scaledl.report.claims.words import TIME_METRIC, Claim, split_setting
from scaledl.report.sensitivity import claim_text
from scaledl.report.sides import side_spec
from scaledl.report.tuning import effective_step

DEVICE_KINDS = ("cpu", "gpu", "knl")  # the hardware a claim may need (--device-of)


@dataclass
class Context:
    """What the results do not say about themselves: each platform's device, and the measured network."""

    devices: dict[str, str] = field(default_factory=dict)
    network: Network | None = None  # every platform's, unless `networks` names the platform
    networks: dict[str, Network] = field(default_factory=dict)  # a platform's own (a simulated one's, say)
    sensitivity: list[dict] = field(default_factory=list)  # sensitivity.csv rows of scaledl sensitivity's sweeps

    def network_of(self, rows: pd.DataFrame) -> Network | None:
        """The network of the rows' platform: its own when `networks` has it, else the common one."""
        platforms = set(rows["platform"].astype(str)) if "platform" in rows else set()
        if len(platforms) == 1 and (platform := platforms.pop()) in self.networks:
            return self.networks[platform]
        return self.network

    def device_of(self, platform: str, rows: pd.DataFrame) -> str | None:
        """cpu, gpu or knl: the caller's mapping first (only it can tell a KNL), else a `device` column."""
        if platform in self.devices:
            return self.devices[platform]
        if "device" not in rows:
            return None
        found = {normalise_device(str(d)) for d in rows["device"].dropna()}
        found.discard(None)
        return found.pop() if len(found) == 1 else None


def normalise_device(text: str) -> str | None:
    """cpu, gpu or knl from a device name (a torch device such as cuda:0 counts as gpu)."""
    text = text.strip().lower()
    if text.startswith("cuda") or text == "gpu":
        return "gpu"
    return text if text in DEVICE_KINDS else None


def untuned(sides: list[Side]) -> list[str]:
    """The sides whose tuned choice never reached the validation target: no verdict can rest on them."""
    return [
        s.label
        for s in sides
        if "tuned_reached" in s.rows and (pd.to_numeric(s.rows["tuned_reached"], errors="coerce") == 0).any()
    ]


def with_choices(results: pd.DataFrame, choices: list | None) -> pd.DataFrame:
    """The results with each tuned run's choice beside it (TUNED_COLUMNS), found as a tuned run finds its
    settings (scaledl.grid.tune.choice_for: its cell's, or that of an algorithm doing the same arithmetic).
    `choices`: chosen.csv's rows, as its one reader, scaledl.grid.tune.read_choices, gives them."""
    if not choices:
        return results
    found = []
    for row in results.itertuples(index=False):
        match = choice_for(choices, row) if reads_choice(str(getattr(row, "setting", ""))) else None
        if match is None:
            found.append(dict.fromkeys(TUNED_COLUMNS, math.nan) | {"tuned_edge": "", "tuned_swept": ""})
            continue
        runner_up = getattr(match, "runner_up_lr", None)
        lr = runner_up if at_runner_up(str(row.setting)) else match.lr  # these runs took the runner-up η
        reached = getattr(match, "points_reached", None)
        found.append(
            {
                "tuned_lr": lr,
                "tuned_effective_step": effective_step(
                    row.algorithm, lr, int(row.workers), getattr(row, "momentum", None)
                ),
                "tuned_edge": getattr(match, "edge", None) or "",
                "tuned_runner_up_lr": math.nan if runner_up is None else runner_up,
                "tuned_reached": math.nan if reached is None else reached,
                "tuned_points": getattr(match, "trials", None) or math.nan,  # the grid points it tried
                "tuned_swept": getattr(match, "tuned", None) or "",
            }
        )
    return pd.concat([results.reset_index(drop=True), pd.DataFrame(found)], axis=1)


def unmet_needs(group: pd.DataFrame, claim: Claim, ctx: Context) -> list[str]:
    """Why this setting's runs are not the paper's kind of measurement (empty when they are)."""
    reasons = []
    needs = claim.needs
    if "device" in needs:
        for platform, rows in group.groupby("platform"):
            device = ctx.device_of(str(platform), rows)
            if device is None:
                reasons.append(
                    f"the device of platform {platform} is unknown (pass --device-of "
                    f"{platform}={needs['device']} if it is one)"
                )
            elif device != needs["device"] and needs["device"] == "gpu":
                reasons.append(f"no GPU: platform {platform} ran on {device}, where CPU–GPU copies do not exist")
            elif device != needs["device"]:
                reasons.append(f"not a {needs['device'].upper()}: platform {platform} ran on {device}")
    for column in ("dataset", "model"):
        wanted = [str(v) for v in needs.get(column, [])]
        found = sorted(set(group[column].astype(str)) - set(wanted))
        if wanted and found:
            reasons.append(f"the paper used {column} {' or '.join(wanted)}, these runs {', '.join(found)}")
    if "target_accuracy" in needs:
        targets = set(pd.to_numeric(group["target_accuracy"], errors="coerce"))
        if any(math.isnan(t) or not math.isclose(t, float(needs["target_accuracy"])) for t in targets):
            shown = ", ".join("none" if math.isnan(t) else f"{t:g}" for t in sorted(targets))
            reasons.append(f"the paper's target is {needs['target_accuracy']:g}, these runs' {shown}")
    if "min_workers" in needs and group["workers"].max() < needs["min_workers"]:
        reasons.append(
            f"our largest P is {group['workers'].max()}; the paper's number needs P ≥ {needs['min_workers']}"
        )
    return reasons


def oversubscribed_sides(group: pd.DataFrame) -> str:
    """Which of a setting's sides ran more ranks than their machine's cores ("async_sgd ran 3 ranks on 2
    cores"): "" when none did (or the summary does not say)."""
    if "oversubscribed" not in group:
        return ""
    over = group[group["oversubscribed"].map(lambda v: v is True or v == 1)]
    named = over.drop_duplicates("algorithm")
    return "; ".join(f"{r.algorithm} ran {r.ranks:g} ranks on {r.cores:g} cores" for r in named.itertuples())


ALPHABETA_CLOCK = "alphabeta"  # a simulated run's closed-form clock (scaledl simulate --clock)
ALPHABETA_MARK = " (α-β clock)"  # how a platform's name says its runs were timed on it


def simulated_platform(group: pd.DataFrame) -> str:
    """The simulated platform a setting's runs ran on ("" for real hardware): the summary's `simulated_on`,
    marked when they ran on the α-β clock, so that they are judged apart from the SimGrid clock's."""
    if "simulated_on" not in group:
        return ""
    found = sorted({str(v) for v in group["simulated_on"].dropna() if str(v)})
    swapped = "clock" in group and group["clock"].eq(ALPHABETA_CLOCK).any()
    return ", ".join(found) + (ALPHABETA_MARK if found and swapped else "")


def sensitivity_of(claim: Claim, group: pd.DataFrame, platform: str, ctx: Context) -> str:
    """Beside a simulated verdict that one side reaches the target sooner: how its sweep over the platform's
    constants came out (a sweep of the claimed faster side against the other on this platform at the group's
    P), else "not swept"; "" beside a measured verdict or another kind of claim."""
    if not platform or claim.metric != TIME_METRIC or set(claim.compares) != {"faster", "than"}:
        return ""
    faster, slower = (side_spec(split_setting(claim.compares[key])[0])[0] for key in ("faster", "than"))
    workers = {str(int(w)) for w in group["workers"].dropna()} if "workers" in group else set()
    rows = [
        r
        for r in ctx.sensitivity
        if r["faster"] in faster and r["slower"] in slower and r["platform"] == platform
        and (not workers or str(r["workers"]) in workers)
    ]  # fmt: skip
    return claim_text(rows)


def read_sensitivity(paths: list[Path]) -> list[dict]:
    """The rows of scaledl sensitivity's sensitivity.csv files."""
    rows = []
    for path in paths:
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                found = list(csv.DictReader(handle))
        except OSError as error:
            raise UserError(f"--sensitivity {path}: cannot read it ({error.strerror})") from None
        if not found or not {"faster", "slower", "platform", "constant", "flips_at"} <= set(found[0]):
            raise UserError(f"--sensitivity {path}: not a sensitivity.csv of scaledl sensitivity")
        rows += found
    return rows
