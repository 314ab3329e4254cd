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


def points(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per grid point of a cell: its seeds, how many reached the target, its score (the slowest seed's
    steps or time; ∞ when a seed missed) and its slowest seed's time and steps."""
    rows = []
    for _, group in trials.groupby([*CELL, "trial"], sort=True):
        first = group.iloc[0]
        reached = group["time_to_target_s"].notna()
        by_steps = scores_steps(first["algorithm"])
        missed = not reached.all()
        steps = math.inf if missed else float(group["target_step"].max())
        time = math.inf if missed else float(group["time_to_target_s"].max())
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


def choose(trials: pd.DataFrame) -> pd.DataFrame:
    """The chosen point of every cell, with what decided it (see the module docstring)."""
    chosen = []
    for _, group in points(trials).groupby(CELL, sort=True):
        order = group.assign(_accuracy=-group["best_accuracy"]).sort_values(["score", "_accuracy", "lr"], kind="stable")
        best = order.iloc[0].drop("_accuracy").to_dict()
        others = order[order["lr"] != best["lr"]]
        lrs = sorted(group["lr"])
        best.update(
            trials=len(group),
            points_reached=int((group["score"] < math.inf).sum()),
            edge="low" if best["lr"] == lrs[0] else "high" if best["lr"] == lrs[-1] else "",
            runner_up_lr=others.iloc[0]["lr"] if len(others) else None,
            effective_step=effective_step(best["algorithm"], best["lr"], int(best["workers"]), best["mu"]),
            budget_ok=bool(best["steps_to_target"] * 2 <= (best["max_steps"] or math.inf)),
        )
        chosen.append(best)
    return pd.DataFrame(chosen)


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
    """With `refine`: one line per cell whose choice the refine points moved (its grid choice → its choice)."""
    if not protocol.get("refine"):
        return []
    on_grid = set(grid_tune.lr_grid(protocol, protocol["extend"], protocol["extend"]))
    on_the_grid = choose(trials[trials["lr"].isin(on_grid)]).set_index(CELL)["lr"]
    moved = []
    for row in chosen.itertuples():
        before = on_the_grid.get(tuple(getattr(row, c) for c in CELL))
        if before != row.lr:
            moved.append(
                f"{row.algorithm} on {row.platform}, p{row.workers}: η {before:g} on the grid → {row.lr:g} refined"
            )
    return moved


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
    "trials",
    "points_reached",
    "edge",
    "runner_up_lr",
    "effective_step",
    "budget_ok",
]


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
    shared = {a: ALGORITHMS[a].numerics_of for a in tuned if ALGORITHMS[a].numerics_of}
    if shared:
        lines += [
            "Tuned once for the algorithms doing the same arithmetic: "
            + ", ".join(f"{a} (as {n})" for a, n in sorted(shared.items()))
            + "; they share its choice.",
            "",
        ]
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
    lines += [*(f"- {note}" for note in notes), *([""] if notes else [])]
    if protocol.get("refine"):
        moved = refine_changes(chosen, trials, protocol)
        lines += [
            f"Refined: each cell also ran η × {grid.get('factor')}^±½ around its choice on the grid; the choice "
            f"moved in {len(moved)} of {len(chosen)} cells" + (":" if moved else "."),
            *(f"- {line}" for line in moved),
            "",
        ]
    table = chosen.assign(
        to_target=[
            to_target(s, t, "not reached") for s, t in zip(chosen["steps_to_target"], chosen["time_to_target_s"])
        ],
        effective=[f"{x:.3g}" for x in chosen["effective_step"]],
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
        "trials",
        "points_reached",
        "note",
    ]
    lines += ["## Chosen", "", markdown_table(table[columns]), "", "## Every point", ""]
    every = points(trials)
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
