"""The tune stage's choice: per cell, the grid point whose slowest seed reached the validation target soonest.

Every trial of a cell (dataset, model, algorithm, platform, workers) ran the
same budget on the same validation split at one point of the shared grid
(scaledl.grid.tune), once per trial seed. A point is scored by its slowest
seed: training time to the validation target, or steps to it for an algorithm
whose arithmetic does not depend on timing (the registry's `deterministic`:
its seconds per step do not depend on η, so steps decide); a seed that missed
makes the point infinitely slow. A cell where no point reached the target
takes its best mean validation accuracy (flagged: the budget or the grid was too
small). Ties go to the better validation accuracy, then to the smaller η.

Beside the choice each cell states what decided it: the chosen η and its
effective step per round (what one round moves the center by, momentum's 1/(1 − μ)
included, comparable across methods), whether it was interior or at an edge of the grid, the runner-up η
(the best point at another η: the claims' robustness check), and whether the
budget was at least twice the chosen point's steps to target. `chosen.csv`
holds one row per cell, which the tuned runs read (scaledl.train.tuned; the
numerically identical algorithms share their cell's row); `chosen.md` states the
protocol and lists every point.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from scaledl.algorithms import ALGORITHMS
from scaledl.errors import UserError
from scaledl.grid import tune as grid_tune
from scaledl.report.runs import read_runs
from scaledl.report.stats import fmt_seconds
from scaledl.report.tables import markdown_table
from scaledl.run_record import OUTPACED

CELL = ["dataset", "model", "algorithm", "platform", "workers"]
TUNABLE = ("lr", "beta", "momentum", "tau", "outer_lr", "outer_momentum")
EDGES = ("low", "high")


def effective_step(algorithm: str, lr: float, workers: int, momentum: float | None = None) -> float:
    """How far one round moves the center, in units of one worker's gradient step: P·η where every worker's
    step lands on the center (the SGD baselines' master, summed gradients), P/(P+1)·η for the elastic
    family's center, η where the workers' steps are averaged; each divided by 1 − μ where the run used
    momentum μ (run.json's `hyper.momentum`: a step of η with momentum moves about η/(1 − μ) in a steady
    direction), so Async MSGD's η = 0.008 at P = 2, μ = 0.9 moves 0.16, not 0.016."""
    info = ALGORITHMS[algorithm]
    if info.rule in ("sgd", "momentum") or info.preset.get("gradients") == "sum":
        step = workers * lr
    elif (
        info.rule in ("elastic", "momentum_elastic")
        or info.engine == "easgd"
        or (info.engine == "averaging" and info.defaults.get("outer") == "elastic")
    ):
        step = workers / (workers + 1) * lr
    else:
        step = lr
    used = momentum is not None and not (isinstance(momentum, float) and math.isnan(momentum))
    return step / (1.0 - momentum) if used else step


def scores_steps(algorithm: str) -> bool:
    """Whether a trial of `algorithm` is scored by steps (its numerics do not depend on timing)."""
    return ALGORITHMS[algorithm].deterministic


def trial_rows(paths) -> pd.DataFrame:
    """One row per trial run (a point and a seed): its cell, its values, its time and steps to the target."""
    rows = []
    for run in read_runs(paths):
        arguments = run.get("arguments")
        if not arguments.get("validation_fraction"):
            raise UserError(
                f"{run.path}: not a tune trial (it was evaluated on the test split, not a validation "
                "split); give the trials' run.json only"
            )
        tuned = [name for name in (arguments.get("sweep") or "").split(",") if name]
        rows.append(
            {
                **run.fields(CELL),
                "trial": arguments.get("setting"),
                "seed": arguments.get("seed"),
                "tuned": ",".join(tuned),
                **{name: arguments.get(name) if name in tuned else None for name in TUNABLE},
                "time_to_target_s": run.get("time_to_target_s"),
                # the interpolated crossing; a run.json from before it: the evaluated step
                "target_step": first_known(run.field("steps_to_target"), run.get("evaluation.target_step")),
                "max_steps": arguments.get("max_steps"),
                "seconds_per_step": run.get("seconds_per_step"),
                "best_accuracy": best_accuracy_or_none(run),
                "stop_reason": run.get("stop.reason"),
                "mu": (run.record.get("hyper") or {}).get("momentum"),  # the trial's momentum (None: none)
            }
        )
    if not rows:
        raise UserError("no trials given: the tune stage needs the trials' run.json files")
    return pd.DataFrame(rows)


def first_known(*values):
    return next((v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))), None)


def best_accuracy_or_none(run) -> float | None:
    """Highest evaluated accuracy in metrics.csv; None when the trial evaluated nothing (it then ranks last)."""
    accuracy = run.metrics["test_accuracy"] if "test_accuracy" in run.metrics else pd.Series(dtype=float)
    return float(accuracy.max()) if len(accuracy) else None


def points(trials: pd.DataFrame, over: str = "slowest") -> pd.DataFrame:
    """One row per grid point of a cell: its seeds, how many reached the target, its score and its time and steps
    to the target over its seeds: the slowest seed's (the grid's score; ∞ when a seed missed) or, `over`
    "median", the median seed's with a miss counted as never (the confirmation's score)."""
    aggregate = np.max if over == "slowest" else np.median
    rows = []
    for _, group in trials.groupby([*CELL, "trial"], sort=True):
        first = group.iloc[0]
        reached = group["time_to_target_s"].notna()
        by_steps = scores_steps(first["algorithm"])
        steps = float(aggregate(group["target_step"].where(reached, math.inf).to_numpy(dtype=float)))
        time = float(aggregate(group["time_to_target_s"].where(reached, math.inf).to_numpy(dtype=float)))
        rows.append(
            {
                **first[[*CELL, "trial", "tuned", *TUNABLE, "mu"]].to_dict(),
                "seeds": len(group),
                "reached": int(reached.sum()),
                "outpaced": int((group["stop_reason"] == OUTPACED).sum()),
                "score": steps if by_steps else time,
                "scored_by": "steps" if by_steps else "time",
                "steps_to_target": steps,
                "time_to_target_s": time,
                "max_steps": first["max_steps"],
                "seconds_per_step": float(group["seconds_per_step"].median()),
                "best_accuracy": float(group["best_accuracy"].fillna(-1.0).mean()),
            }
        )
    return pd.DataFrame(rows)


def ranked(points_of_a_cell: pd.DataFrame) -> pd.DataFrame:
    """A cell's points best first: by score, then the better validation accuracy, then the smaller η."""
    order = points_of_a_cell.assign(_accuracy=-points_of_a_cell["best_accuracy"])
    return order.sort_values(["score", "_accuracy", "lr"], kind="stable").drop(columns="_accuracy")


def confirm_seeds(protocol: dict | None) -> list[int]:
    return list(((protocol or {}).get("confirm") or {}).get("seeds") or [])


def grid_trials(trials: pd.DataFrame, protocol: dict | None) -> pd.DataFrame:
    """The trials of the grid's seeds: what the rounds, the early stop and the points to confirm read."""
    return trials[~trials["seed"].isin(confirm_seeds(protocol))]


def confirmations(trials: pd.DataFrame, protocol: dict | None) -> pd.DataFrame:
    """Every point that ran the confirmation, on all its seeds (the grid's and the confirmation's), scored by the
    median seed with a miss counted as never; `eligible` where it missed in at most the protocol's `misses`."""
    seeds = confirm_seeds(protocol)
    named = trials.loc[trials["seed"].isin(seeds), [*CELL, "trial"]].drop_duplicates()
    if named.empty:
        return pd.DataFrame()
    both = trials.merge(named, on=[*CELL, "trial"])
    confirmed = points(both, over="median")
    misses = confirmed["seeds"] - confirmed["reached"]
    return confirmed.assign(misses=misses, eligible=misses <= protocol["confirm"].get("misses", 0))


def choose(trials: pd.DataFrame, protocol: dict | None = None) -> pd.DataFrame:
    """The chosen point of every cell, with what decided it (see the module docstring): on the grid's seeds, the
    point whose slowest seed reached the target soonest; where the cell ran the confirmation, the confirmed
    point that missed in at most `misses` of its seeds with the smaller median (the one with fewer misses where
    neither qualifies, flagged), its runner-up the other."""
    on_grid = points(grid_trials(trials, protocol))
    confirmed = confirmations(trials, protocol)
    chosen = []
    for cell, group in on_grid.groupby(CELL, sort=True):
        order = ranked(group)
        again = confirmed[(confirmed[CELL] == pd.Series(cell, index=CELL)).all(axis=1)] if len(confirmed) else group[:0]
        if len(again):
            order = pd.concat(
                [
                    ranked(again[again["eligible"]]),
                    ranked(again[~again["eligible"]]).sort_values("misses", kind="stable"),
                    order[~order["trial"].isin(again["trial"])],
                ]
            )
        best = order.iloc[0].to_dict()
        others = order[order["lr"] != best["lr"]]
        lrs = sorted(group["lr"])
        best.update(
            trials=len(group),
            points_reached=int((group["score"] < math.inf).sum()),
            edge="low" if best["lr"] == lrs[0] else "high" if best["lr"] == lrs[-1] else "",
            runner_up_lr=others.iloc[0]["lr"] if len(others) else None,
            runner_up_trial=others.iloc[0]["trial"] if len(others) else None,
            runner_up_score=others.iloc[0]["score"] if len(others) else math.inf,
            effective_step=effective_step(best["algorithm"], best["lr"], int(best["workers"]), best["mu"]),
            budget_ok=bool(best["steps_to_target"] * 2 <= (best["max_steps"] or math.inf)),
            confirmed=bool(len(again)),
            reliable=bool(best.get("eligible", True)) if len(again) else None,
        )
        chosen.append(best)
    return pd.DataFrame(chosen)


def points_to_confirm(trials: pd.DataFrame, protocol: dict | None) -> dict[str, list[str]]:
    """Each cell's points that run the confirmation (cell label → trial settings): the grid's choice and its
    runner-up, where each reached the target on every grid seed (a point that missed is not a candidate)."""
    if not confirm_seeds(protocol):
        return {}
    named = {}
    for row in choose(grid_trials(trials, protocol)).itertuples():
        if math.isfinite(row.score):
            named[grid_tune.cell_label(row)] = [row.trial] + [row.runner_up_trial] * math.isfinite(row.runner_up_score)
    return named


def pace_to_beat(trials: pd.DataFrame, seeds: int) -> tuple[str, float] | None:
    """What a running trial of one cell must beat to matter: ("steps" or "time", the runner-up η's score) over
    the points whose `seeds` trials have all finished; None while fewer than two η reached the target.

    A trial that has not reached the target when its step (or training clock, where time decides) passes
    that score crosses later still, and its point's score is its slowest seed's: the point can be neither the
    choice nor the runner-up, and stopping it then changes neither (finishing points only lower the bar).
    """
    scored = points(trials)
    scored = scored[scored["seeds"] >= seeds]
    best_per_lr = scored.groupby("lr")["score"].min().sort_values()
    if len(best_per_lr) < 2 or not math.isfinite(best_per_lr.iloc[1]):
        return None
    return str(scored["scored_by"].iloc[0]), float(best_per_lr.iloc[1])


def refine_points(chosen: pd.DataFrame, protocol: dict) -> dict[str, list[float]]:
    """With the protocol's `refine`: each cell's points around its choice (η × factor^±½), by cell label."""
    if not protocol.get("refine"):
        return {}
    factor = protocol["lr_grid"]["factor"]
    return {grid_tune.cell_label(row): grid_tune.refined(row.lr, factor) for row in chosen.itertuples()}


def refine_changes(chosen: pd.DataFrame, trials: pd.DataFrame, protocol: dict) -> list[str]:
    """With `refine`: one line per cell whose choice on the grid's seeds the refine points moved (its choice
    among the grid's η → among those and the refine points), before any confirmation."""
    if not protocol.get("refine"):
        return []
    on_grid = set(grid_tune.lr_grid(protocol, protocol["extend"], protocol["extend"]))
    seeded = grid_trials(trials, protocol)
    before = choose(seeded[seeded["lr"].isin(on_grid)]).set_index(CELL)["lr"]
    after = choose(seeded).set_index(CELL)["lr"]
    return [
        f"{cell[2]} on {cell[3]}, p{cell[4]}: η {before.get(cell):g} on the grid → {lr:g} refined"
        for cell, lr in after.items()
        if before.get(cell) != lr
    ]


def confirmation_changes(chosen: pd.DataFrame, trials: pd.DataFrame, protocol: dict) -> list[str]:
    """One line per cell whose choice the confirmation moved: the grid seeds' choice → the confirmed one."""
    before = choose(grid_trials(trials, protocol)).set_index(CELL)["lr"]
    return [
        f"{row.algorithm} on {row.platform}, p{row.workers}: η {before.get(cell):g} on the grid's seeds → {row.lr:g}"
        for row in chosen.itertuples()
        if before.get(cell := tuple(getattr(row, c) for c in CELL)) != row.lr
    ]


def edges(chosen: pd.DataFrame) -> list[str]:
    """The sides of the grid some cell's choice sits at: where the next round widens the grid."""
    return sorted(set(chosen["edge"]) - {""})


CHOSEN_COLUMNS = [
    *CELL,
    "trial",
    "tuned",
    *TUNABLE,
    "scored_by",
    "time_to_target_s",
    "steps_to_target",
    "seconds_per_step",
    "best_accuracy",
    "seeds",
    "reached",
    "trials",
    "points_reached",
    "edge",
    "runner_up_lr",
    "effective_step",
    "budget_ok",
    "confirmed",
    "reliable",
    "tuned_on",
]


def with_aliases(chosen: pd.DataFrame, protocol: dict | None) -> pd.DataFrame:
    """The choices, each platform tuned on another (the protocol's `tuned_on`) given that platform's rows under
    its own name, its `tuned_on` column naming the platform they were tuned on (empty on a platform's own)."""
    chosen = chosen.assign(tuned_on="")
    taken = [
        chosen[chosen["platform"] == target].assign(platform=alias, tuned_on=target)
        for alias, target in sorted(((protocol or {}).get("tuned_on") or {}).items())
    ]
    return pd.concat([chosen, *taken], ignore_index=True)


def shown(x, fmt=fmt_seconds, missing="missed") -> str:
    return missing if x is None or (isinstance(x, float) and not math.isfinite(x)) else fmt(x)


def to_target(steps: float, seconds: float, missing: str) -> str:
    return f"{steps:.4g} steps, {fmt_seconds(seconds)}" if math.isfinite(steps) else missing


def chosen_markdown(chosen: pd.DataFrame, trials: pd.DataFrame, protocol: dict) -> str:
    """The protocol (grid, seeds, budget, target), the choices with what decided each, then every point."""
    counts = sorted(set(chosen["trials"]))
    grid = protocol.get("lr_grid") or {}
    tuned = protocol.get("tuned") or {}
    lines = [
        "# Tune stage",
        "",
        f"Every algorithm had the same grid: η = {grid.get('low')} × {grid.get('factor')}^k "
        f"({grid.get('count')} values, widened by one factor on a side where some cell's best η sat at its edge, "
        f"for every cell alike, at most {protocol.get('extend')} a side), crossed with the axes "
        f"{json.dumps(protocol.get('axes') or {})}; every other setting at its block's value. "
        f"Points per cell: {', '.join(map(str, counts))}"
        + (" (**unequal**: some trials are missing)" if len(counts) > 1 else "")
        + f". Each point ran seeds {protocol.get('seeds')} on the training set less a held-out "
        f"{protocol.get('validation_fraction')} share and was scored on that share by its slowest seed: steps to "
        "the target where the arithmetic does not depend on timing, else training time (a seed that missed: "
        "infinite). A trial stopped at the first evaluation where it could no longer be its cell's best or "
        "runner-up point (its crossing would come after the runner-up's): neither choice depends on it. "
        "The test split was never read.",
        "",
        "Trials' own settings: "
        + (", ".join(f"{k} {v}" for k, v in sorted(protocol.get("train", {}).items())) or "their block's"),
        "",
    ]
    again = confirm_seeds(protocol)
    if again:
        misses = protocol["confirm"].get("misses", 0)
        lines += [
            f"Confirmed: each cell's best point and its runner-up (the best at another η) ran again on seeds "
            f"{again}, to their whole budget; the choice is the one of the two with the smaller median time (steps "
            f"where those decide) to the target over all its seeds, a miss counted as never, and a point that missed "
            f"in more than {misses} of them was not chosen while the other did not. Reach counts: the table's "
            "`reach` column and the confirmed points below.",
            "",
        ]
    taken = protocol.get("tuned_on") or {}
    if taken:
        lines += _listing(
            "Tuned on another platform (`tuned_on`), their runs taking its choices cell by cell",
            (f"{alias} (on {target})" for alias, target in sorted(taken.items())),
            "chosen.csv lists those cells under their names too",
        )
    shared = {
        a: ALGORITHMS[a].numerics_of for a in tuned if ALGORITHMS[a].numerics_of and not ALGORITHMS[a].tuned_apart
    }
    if shared:
        lines += _listing(
            "Tuned once for the algorithms doing the same arithmetic",
            (f"{a} (as {n})" for a, n in sorted(shared.items())),
            "they share its choice",
        )
    at_edge = chosen[chosen["edge"] != ""]
    short = chosen[~chosen["budget_ok"].astype(bool)]
    notes = [
        f"**at the {row.edge} edge of the grid, widened to its limit**: "
        f"{row.algorithm} on {row.platform}, p{row.workers}"
        for row in at_edge.itertuples()
    ] + [
        f"**budget short**: {row.algorithm} on {row.platform}, p{row.workers} reached the target at step "
        f"{shown(row.steps_to_target, '{:g}'.format)} of {row.max_steps} (less than twice)"
        for row in short.itertuples()
        if math.isfinite(row.steps_to_target)
    ]
    notes += [
        f"**no confirmed point reached the target on all but {protocol['confirm'].get('misses', 0)} of its seeds**: "
        f"{row.algorithm} on {row.platform}, p{row.workers} took the one that missed least ({row.reached:g} of "
        f"{row.seeds:g})"
        for row in chosen.itertuples()
        if row.reliable is False
    ]
    lines += [*(f"- {note}" for note in notes), *([""] if notes else [])]
    if protocol.get("refine"):
        moved = refine_changes(chosen, trials, protocol)
        lines += [
            f"Refined: each cell also ran η × {grid.get('factor')}^±½ around its choice on the grid; the choice "
            f"moved in {len(moved)} of {len(chosen)} cells" + (":" if moved else "."),
            *(f"- {line}" for line in moved),
            "",
        ]
    if again:
        moved = confirmation_changes(chosen, trials, protocol)
        lines += [
            f"The confirmation moved the choice in {len(moved)} of {len(chosen)} cells" + (":" if moved else "."),
            *(f"- {line}" for line in moved),
            "",
        ]
    table = chosen.assign(
        to_target=[
            to_target(s, t, "not reached") for s, t in zip(chosen["steps_to_target"], chosen["time_to_target_s"])
        ],
        effective=[f"{x:.3g}" for x in chosen["effective_step"]],
        reach=[f"{r:g} of {n:g}" for r, n in zip(chosen["reached"], chosen["seeds"])],
        note=["" if r else "no point reached the target: best accuracy chosen" for r in chosen["points_reached"]],
    )
    columns = [
        *CELL,
        *[n for n in TUNABLE if table[n].notna().any()],
        "effective",
        "edge",
        "runner_up_lr",
        "scored_by",
        "to_target",
        "reach",
        "trials",
        "points_reached",
        "note",
    ]
    lines += ["## Chosen", "", markdown_table(table[columns]), ""]
    apart = [a for a in tuned if ALGORITHMS[a].tuned_apart]
    lines += [
        f"The A/A of the tuning: {a} does {ALGORITHMS[a].numerics_of}'s arithmetic and was tuned apart, as a cell "
        "of its own on seeds of its own; the two choices (and their final runs) must come out tied."
        for a in apart
    ] + ([""] if apart else [])
    confirmed = confirmations(trials, protocol)
    if len(confirmed):
        confirmed = confirmed.assign(
            to_target=[
                to_target(s, t, "missed in half or more")
                for s, t in zip(confirmed["steps_to_target"], confirmed["time_to_target_s"])
            ],
            reach=[f"{r} of {n}" for r, n in zip(confirmed["reached"], confirmed["seeds"])],
            eligible=["yes" if e else "no: missed too often" for e in confirmed["eligible"]],
        )
        columns = [*CELL, *[n for n in TUNABLE if confirmed[n].notna().any()], "reach", "to_target", "eligible"]
        lines += [
            "## Confirmed points (every seed; the median seed's time to target)",
            "",
            markdown_table(confirmed.sort_values([*CELL, "lr"])[columns]),
            "",
        ]
    lines += ["## Every point (the grid's seeds; the slowest seed's time to target)", ""]
    every = points(grid_trials(trials, protocol))
    every = every.assign(
        to_target=[
            to_target(s, t, "stopped: behind the runner-up" if outpaced else "missed")
            for s, t, outpaced in zip(every["steps_to_target"], every["time_to_target_s"], every["outpaced"])
        ],
        accuracy=[f"{x:.4f}" for x in every["best_accuracy"]],
    )
    columns = [*CELL, *[n for n in TUNABLE if every[n].notna().any()], "seeds", "reached", "to_target", "accuracy"]
    lines.append(markdown_table(every.sort_values([*CELL, "lr"])[columns]))
    return "\n".join(lines) + "\n"


def _listing(head: str, items, tail: str) -> list[str]:
    """A paragraph of chosen.md: `head: item, item; tail.` and a blank line."""
    return [f"{head}: {', '.join(items)}; {tail}.", ""]


def read_protocol(text: str | None) -> dict:
    if not text:
        return {}
    try:
        protocol = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"--protocol: not JSON ({error})") from None
    if not isinstance(protocol, dict):
        raise UserError("--protocol: expected a JSON object")
    return protocol
