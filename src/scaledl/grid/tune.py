"""The tune stage's trials: one grid of η shared by every method, extended at its edges in rounds.

For each cell of a `tuned` block (dataset, model, algorithm, platform,
workers) the trials are the points of one grid: η on the log grid
`tune.lr_grid` (low × factor^k, k < count), crossed with any axis the config
declares in `tune.axes` (β, μ, τ, ...) for the algorithms that have that
setting. Every other setting keeps its block's value (β and μ: 0.9, the
paper's). Every point runs `tune.seeds` seeds on a validation split held out
of the training set; the choice (scaledl.report.tuning) is the point whose
slowest seed reaches the validation target first.

Numerically identical variants (the registry's `numerics_of`: Sync EASGD1/2/3
do one arithmetic) are tuned once, as the first of them in the block, and share
that choice; an arithmetic that does not depend on timing (steps to target
decide it) is tuned on the block's first platform only and shared by the others.
A platform with `tuned_on` runs no trials: its tuned runs take the named
platform's choice cell by cell (chosen.csv repeats those rows under its name).

Confirmation: the grid's seeds are few (a point scored by the slower of 2 seeds
passes a point that misses one run in four more often than not), so after the
last round each cell's best point and its runner-up (the best at another η, the
two points the early stop keeps exact) run again on `tune.confirm.seeds` more
seeds, after the grid's and never a final seed. The choice is then made over
those two points alone on every seed they ran: by the median time (or steps) to
the target, a miss counted as never, and a point that missed in more than
`tune.confirm.misses` of its seeds is not chosen while the other did not.

Edges: when some cell's best η is the grid's smallest or largest, the tune
stage runs a round more with the grid one factor wider on that side, for every
cell alike, up to `tune.extend` factors a side; an edge that remains is
printed. The rounds are a Snakemake checkpoint (workflow/rules/tune.smk): each
round's result (`round_result`) names the next round's grid, so the trials of
every extension the limit allows are in the grid from the start and run only
when a round asks for them.

Plain functions of the validated config: no torch, no MPI.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace

from scaledl.algorithms import ALGORITHMS, tunable_settings
from scaledl.atomic import write_text
from scaledl.errors import UserError
from scaledl.grid.keys import TUNE_STAGE, RunKey, run_dir

TUNED = "tuned"  # the setting (folder) of a tuned block's runs
REPLICA = next(key for key, info in ALGORITHMS.items() if info.tuned_apart)  # the A/A of the tuning's replica
CHOSEN = "tune/chosen.csv"  # under results/NAME/
CHOSEN_MD = "tune/chosen.md"
CONFIRM = "tune/confirm.json"  # the points each cell confirms on more seeds
TRIAL_EVAL_EVERY = 10  # a trial evaluates this often unless tune.train says: steps to target resolved to 10


class TuneError(ValueError):
    """A tune grid that cannot be run; the one-line message says what to change."""


def value(x: float) -> float:
    """A grid value as every table and folder prints it: four significant digits, the same at every parse."""
    return float(f"{x:.4g}")


def lr_grid(settings: Mapping, low_steps: int = 0, high_steps: int = 0) -> list[float]:
    """The η grid: low × factor^k for k in [−low_steps, count + high_steps)."""
    grid = settings["lr_grid"]
    return [value(grid["low"] * grid["factor"] ** k) for k in range(-low_steps, grid["count"] + high_steps)]


def every_lr(settings: Mapping) -> list[float]:
    """The base grid and every extension the limit allows, and with `refine` every point halfway (×√factor)
    between two of them and beyond the ends: the values whose trials exist in the grid."""
    grid = lr_grid(settings, settings["extend"], settings["extend"])
    if not settings.get("refine"):
        return grid
    return sorted({*grid, *(value(lr * settings["lr_grid"]["factor"] ** half) for lr in grid for half in (-0.5, 0.5))})


def refined(lr: float, factor: float) -> list[float]:
    """The refine round's points around a cell's chosen η: halfway to each neighbour, η × factor^±½."""
    return [value(lr * factor**-0.5), value(lr * factor**0.5)]


def cell_label(cell) -> str:
    """A cell (RunKey or chosen.csv row) as a round's result names it: dataset/model/algorithm/platform/pP."""
    return f"{cell.dataset}/{cell.model}/{cell.algorithm}/{cell.platform}/p{int(cell.workers)}"


def axes_of(algorithm: str, config: Mapping) -> dict[str, list]:
    """The settings tuned for `algorithm` and the values each takes beyond η: the config's axes that apply."""
    uses = tunable_settings(numerics_of(algorithm))
    axes = config["tune"].get("axes") or {}
    for name in axes:
        if name not in ALL_AXES:
            raise TuneError(f"tune.axes.{name}: not a tunable setting; choose from {', '.join(ALL_AXES)}")
    return {name: list(values) for name, values in axes.items() if name in uses}


ALL_AXES = ("beta", "momentum", "tau", "outer_lr", "outer_momentum")


def points(algorithm: str, config: Mapping, lrs: Iterable[float]) -> list[dict]:
    """Every trial point of `algorithm`: η from `lrs` crossed with its axes, in grid order."""
    result = [{"lr": lr} for lr in lrs]
    for name, values in axes_of(algorithm, config).items():
        result = [{**point, name: v} for point in result for v in values]
    return result


def trial_setting(point: Mapping) -> str:
    """The folder of a trial: lr0.004, or lr0.004-beta0.5 with an axis."""
    return "-".join(f"{name}{v:g}" for name, v in point.items())


def priority(key: RunKey, runs: Mapping) -> int:
    """A run's place in Snakemake's queue: a trial with a larger η sooner (it reaches the target or diverges
    soon, so its cell's pace to beat is known early and the slow small-η trials stop at it:
    scaledl.train.pace); every other run 0. Which trials stop, not what is chosen, depends on the order."""
    if key.stage != TUNE_STAGE:
        return 0
    return max(1, 40 + round(math.log2(runs[key]["lr"])))


def numerics_of(algorithm: str) -> str:
    """The algorithm whose arithmetic `algorithm` does (itself unless the registry says otherwise)."""
    return ALGORITHMS[algorithm].numerics_of or algorithm


def same_cell(a, b) -> bool:
    """Whether runs `a` and `b` (RunKey or chosen.csv row: dataset, model, algorithm, platform, workers) take one
    choice: the same data, model and worker count, the same arithmetic, and the same platform unless that
    arithmetic does not depend on timing (steps to target then decide, and they are the platform's own)."""
    same = [a.dataset, a.model, int(a.workers)] == [b.dataset, b.model, int(b.workers)]
    numerics = numerics_of(a.algorithm)
    timed = not ALGORITHMS[numerics].deterministic
    apart = ALGORITHMS[a.algorithm].tuned_apart == ALGORITHMS[b.algorithm].tuned_apart  # the A/A's replica
    return same and apart and numerics == numerics_of(b.algorithm) and (a.platform == b.platform or not timed)


CHOICE_CELL = ("dataset", "model", "algorithm", "platform", "workers")  # what a chosen.csv row is the choice of
CHOICE_TEXT = (*CHOICE_CELL[:4], "trial", "tuned", "edge", "scored_by", "tuned_on")  # columns of words, not numbers


def read_choices(path: str | Path, flag: str) -> list[SimpleNamespace]:
    """The tune stage's chosen.csv, by its one reader (the tuned runs and the claims alike): a row per cell, its
    numbers as floats (None where empty), `workers` an int. A file that cannot be read, or that lacks a cell's
    columns or η, is one line naming `flag`."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, csv.Error) as error:
        why = getattr(error, "strerror", None) or error
        raise UserError(
            f"{flag} {path}: cannot read it ({why}); run the tune stage first (snakemake's `tune` rule)"
        ) from None
    lacking = [c for c in (*CHOICE_CELL, "lr") if rows and c not in rows[0]]
    if lacking:
        raise UserError(f"{flag} {path}: not the tune stage's chosen.csv (no column {', '.join(lacking)})")
    return [SimpleNamespace(**{k: _choice_value(k, v) for k, v in row.items()}) for row in rows]


def _choice_value(column: str, text: str):
    if column in CHOICE_TEXT:
        return text
    if not text:
        return None
    if column == "workers":
        return int(float(text))
    try:
        return float(text)
    except ValueError:
        return text  # budget_ok's True/False


def aliases(config: Mapping) -> dict[str, str]:
    """The platforms whose tuned runs take another platform's choice (`tuned_on`): each to that platform."""
    return {name: p["tuned_on"] for name, p in config["platforms"].items() if p.get("tuned_on")}


def check_aliases(config: Mapping, runs: Mapping[RunKey, Mapping]) -> None:
    """`tuned_on` names another platform of the config that is tuned itself, and every tuned run on a platform
    tuned on another has its cell among that platform's trials."""
    taken = aliases(config)
    for name, target in taken.items():
        if target not in config["platforms"] or target == name or target in taken:
            raise TuneError(
                f"platforms.{name}.tuned_on: {target!r} is not another platform of this config that is tuned "
                f"itself ({', '.join(p for p in config['platforms'] if p not in taken and p != name)})"
            )
    cells = [key for key in runs if key.stage == TUNE_STAGE]
    for key in runs:
        if key.stage != TUNE_STAGE and key.platform in taken and reads_choice(key.setting):
            on = key._replace(platform=taken[key.platform])
            if not any(same_cell(on, cell) for cell in cells):
                raise TuneError(
                    f"platform {key.platform} takes {on.platform}'s tuned choices (tuned_on), but no tuned block "
                    f"tunes {cell_label(on)}: add {on.platform} to the platforms of a tuned block that runs "
                    f"{key.algorithm} at P = {key.workers}"
                )


def choice_for(choices: Iterable[SimpleNamespace], run) -> SimpleNamespace | None:
    """The choice a run (anything with a cell's fields) takes: its cell's, or its numerical twin's (same_cell)."""
    return next((c for c in choices if c.algorithm in ALGORITHMS and same_cell(run, c)), None)


def tuned_names(algorithm: str, config: Mapping) -> list[str]:
    """The settings a tuned run of `algorithm` takes from the choice: η and its axes."""
    return ["lr", *axes_of(algorithm, config)]


def trial_seeds(settings: Mapping, algorithm: str | None = None) -> list[int]:
    """The grid's seeds: `seed`, `seed` + 1, ..., one run of every point on each; for a replica tuned apart
    (the A/A of the tuning) the same count after every seed of the others, so no trial of the two is shared."""
    first = settings["seed"] + _apart(settings, algorithm)
    return [first + i for i in range(settings["seeds"])]


def confirm_seeds(settings: Mapping, algorithm: str | None = None) -> list[int]:
    """The confirmation's seeds: after the grid's (so the two never overlap); none where it is off."""
    first = settings["seed"] + settings["seeds"] + _apart(settings, algorithm)
    return [first + i for i in range((settings.get("confirm") or {}).get("seeds", 0))]


def every_trial_seed(settings: Mapping, algorithm: str | None = None) -> list[int]:
    return [*trial_seeds(settings, algorithm), *confirm_seeds(settings, algorithm)]


def _apart(settings: Mapping, algorithm: str | None) -> int:
    if algorithm is None or not ALGORITHMS[algorithm].tuned_apart:
        return 0
    return settings["seeds"] + (settings.get("confirm") or {}).get("seeds", 0)


RUNNER_UP = "runnerup"  # the folder suffix of runs at the runner-up η


def protocol_of(setting: str) -> str:
    """The protocol a run's setting (its folder, as scaled_setting and trial_setting write it) puts it under,
    decoded here beside its encoders: "tuned" (the choice), "runner_up" (the runner-up η), "control" (the
    choice scaled: `tuned-lr0.1x`), or "shared" (no setting, or a sweep's point such as `lr0.05`)."""
    if setting == TUNED:
        return "tuned"
    if setting == f"{TUNED}-{RUNNER_UP}":
        return "runner_up"
    return "control" if reads_choice(setting) else "shared"


def reads_choice(setting: str) -> bool:
    """Whether a run with this setting takes its settings from the tune stage's choice (chosen.csv)."""
    return setting.startswith(TUNED)


def at_runner_up(setting: str) -> bool:
    """Whether a run that reads the choice takes its runner-up η."""
    return setting.endswith(RUNNER_UP)


def scaled_setting(scale: Mapping[str, float], pick: str = "best") -> str:
    """The folder of a tuned block's runs: `tuned`, with factors `tuned-lr0.1x` (a control), at the runner-up
    η `tuned-runnerup` (a robustness check)."""
    factors = "".join(f"-{name}{factor:g}x" for name, factor in sorted(scale.items()))
    return TUNED + factors + (f"-{RUNNER_UP}" if pick == "runner_up" else "")


def check(settings: Mapping) -> None:
    grid = settings["lr_grid"]
    if grid["low"] <= 0 or grid["factor"] <= 1:
        raise TuneError(
            f"tune.lr_grid: low {grid['low']} and factor {grid['factor']} must be > 0 and > 1 (η = low × factor^k)"
        )


# ---- the rounds: which trials each one runs -------------------------------------------------------


def round_grid(settings: Mapping, round_number: int, round_file: Callable[[int], str]) -> list[float]:
    """The η grid of round `round_number`: the base grid, else what the round before named as next."""
    if round_number == 0:
        return lr_grid(settings)
    return read_round(round_file(round_number - 1))["next"] or []


def trial_files(runs: Mapping[RunKey, Mapping], name: str, lrs: Iterable[float], seeds: Iterable[int]) -> list[str]:
    """The run.json of every trial at an η of `lrs` on one of `seeds` (the grid's), in grid order."""
    wanted, on = set(lrs), set(seeds)
    return [
        f"{run_dir(key, name)}/run.json"
        for key, settings in runs.items()
        if key.stage == TUNE_STAGE and value(settings["lr"]) in wanted and key.seed in on
    ]


def round_trial_files(runs, name: str, settings: Mapping, round_number, round_file: Callable[[int], str]):
    """The trials a tune job reads: round `round_number`'s (a `tune_round` job), or the last round's with the
    refine points it named for each cell (None: the choice)."""
    if round_number is not None:
        return trial_files(runs, name, round_grid(settings, round_number, round_file), grid_seeds(settings))
    last = final_round(settings, round_file)
    refine = last.get("refine") or {}
    seeds = grid_seeds(settings)
    around = [
        f"{run_dir(key, name)}/run.json"
        for key, run in runs.items()
        if key.stage == TUNE_STAGE and key.seed in seeds and value(run["lr"]) in refine.get(cell_label(key), ())
    ]
    return trial_files(runs, name, last["grid"], seeds) + around


def grid_seeds(settings: Mapping) -> set[int]:
    """Every cell's grid seeds: the replica's (tuned apart) beside everyone else's."""
    return {*trial_seeds(settings), *trial_seeds(settings, REPLICA)}


def confirm_trial_files(runs: Mapping[RunKey, Mapping], name: str, settings: Mapping, confirm_file: str) -> list[str]:
    """The confirmation's trials: the points confirm.json names for each cell, on the confirmation's seeds."""
    named = read_round(confirm_file)
    seeds = {*confirm_seeds(settings), *confirm_seeds(settings, REPLICA)}
    return [
        f"{run_dir(key, name)}/run.json"
        for key in runs
        if key.stage == TUNE_STAGE and key.seed in seeds and key.setting in named.get(cell_label(key), ())
    ]


def write_confirm(path: str, named: Mapping[str, list[str]]) -> None:
    """Which points each cell confirms (cell label → trial settings): the grid's best and runner-up."""
    write_text(path, json.dumps(dict(sorted(named.items())), indent=1) + "\n")


def final_round(settings: Mapping, round_file: Callable[[int], str]) -> dict:
    """The last round's result: rounds follow one another until one names no next grid."""
    for round_number in range(2 * settings["extend"] + 1):  # each round widens at least one side
        result = read_round(round_file(round_number))
        if result["next"] is None:
            return result
    raise TuneError(f"{round_file(round_number)}: more tune rounds than tune.extend allows; delete tune/round*.json")


def next_grid(settings: Mapping, grid: list[float], edges: Iterable[str]) -> list[float] | None:
    """The next round's η grid: one factor more on each side some cell's best η sits at, within the limit;
    None when no side needs one (or the limit is reached on it)."""
    base = lr_grid(settings)
    low_steps = sum(v < base[0] for v in grid)
    high_steps = sum(v > base[-1] for v in grid)
    edges = set(edges)
    grow_low = "low" in edges and low_steps < settings["extend"]
    grow_high = "high" in edges and high_steps < settings["extend"]
    if not (grow_low or grow_high):
        return None
    return lr_grid(settings, low_steps + grow_low, high_steps + grow_high)


def read_round(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def write_round(
    path: str, grid: list[float], edges: Iterable[str], following: list[float] | None, refine: Mapping | None = None
) -> None:
    """A round's result: its grid and edges, the next round's grid (None: the last round) and, in the last round
    of a config with `refine`, the points each cell runs around its choice before the choice is made."""
    result = {"grid": grid, "edges": sorted(set(edges)), "next": following}
    write_text(path, json.dumps({**result, **({"refine": dict(refine)} if refine else {})}) + "\n")


def protocol(runs: Mapping, config: Mapping) -> str:
    """The tune stage as the choice's report states it (JSON): the grid, its limit, seeds, the validation
    share, the trials' own settings and, per algorithm, the settings tuned and whose numerics it shares."""
    settings = config["tune"]
    algorithms = sorted({key.algorithm for key in runs if key.stage == TUNE_STAGE})
    return json.dumps(
        {
            "lr_grid": settings["lr_grid"],
            "extend": settings["extend"],
            "refine": bool(settings.get("refine")),
            "axes": settings.get("axes") or {},
            "seeds": sorted({seed for a in algorithms for seed in trial_seeds(settings, a)}),
            "confirm": {
                "seeds": sorted({seed for a in algorithms for seed in confirm_seeds(settings, a)}),
                "misses": (settings.get("confirm") or {}).get("misses", 0),
            },
            "validation_fraction": settings["validation_fraction"],
            "train": {name: v for name, v in settings["train"].items() if v is not None},
            "tuned": {algorithm: tuned_names(algorithm, config) for algorithm in algorithms},
            **({"tuned_on": aliases(config)} if aliases(config) else {}),
        },
        sort_keys=True,
    )
