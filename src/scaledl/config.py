"""What one training run is asked to do: the `scaledl train` settings, their defaults and their help.

`TrainConfig` is the single source of training defaults. Each field's
metadata holds its command-line help (and type, choices, group), so the
`scaledl train` parser (`scaledl.train.command`) is generated from it, and so
are the workflow schema's `train` and `train_override` blocks
(`python -m scaledl.grid.schema --write`): their keys are the `SETTINGS` below,
each defaulting to null, which means "this default".
Defaults that depend on the algorithm live in its registry entry
(`scaledl.algorithms.ALGORITHMS`), not here: None says "the algorithm's".

Kept free of torch and MPI imports, so that building the command line (for
`scaledl prepare`, `aggregate`, ... too) never initialises MPI: under a
Slurm job step that would start a PMI handshake an ordinary job cannot answer.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

BACKENDS = ("auto", "mpi", "cuda_aware_mpi", "nccl", "gloo")
MESSAGES = ("packed", "per_layer", "bucketed")
PLACES = ("host", "device")
MOMENTUM_PLACES = ("master", "worker")
DEVICES = ("auto", "cpu", "cuda")
WAIT_PROBES = ("barrier", "none")
DEVICE_SYNCS = ("phase", "none")
CENTER_WINDOWS = ("rma", "shared")
ELASTIC_EPOCHS = ("split", "atomic")  # the window engine's elastic exchange (algorithms/window.py)
AGE_WEIGHTS = ("none", "inverse")  # an asynchronous update's weight by its staleness (algorithms/rules.py)
INNER_OPTIMIZERS = ("sgd", "momentum")
WORKER_RULES = ("elastic", "reset")
OUTER_OPTIMIZERS = ("elastic", "average", "nesterov", "slowmo")
COMPRESSIONS = ("fp32", "fp16", "bf16", "int8")  # scaledl.comm.codecs
EXCHANGES = ("allreduce", "rooted")  # the averaging engine's round (algorithms/averaging.py)
GRAPHS = ("complete", "ring")  # whose weights a worker's round sums (algorithms/averaging.py)

# Argument groups of `scaledl train --help`, in order.
GROUPS = {
    "run": None,
    "budgets": "budgets (the first one reached ends the run; give at least one of the first three)",
    "hyperparameters": "hyperparameters",
    "codesign": "codesign (the paper's §3; presets sync_easgd1/2/3 fix center-on and overlap)",
    "averaging": "periodic averaging (sync_easgd, local_sgd, diloco, slowmo: one engine; None: the algorithm's "
    "default, listed in docs/algorithms.md)",
    "execution": "execution",
    "grid": "the run's place in the workflow's grid (set by the workflow)",
}


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def delay_rounds(text: str) -> int:
    """Rounds an outer step waits for the others' outer gradients (algorithms/averaging.py): 0 or 1."""
    value = int(text)
    if value not in (0, 1):
        raise argparse.ArgumentTypeError(f"must be 0 or 1, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def open_fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (both excluded), got {text}")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _setting(
    default,
    help: str,
    *,
    group: str,
    type=None,
    choices=None,
    metavar=None,
    switch: bool = False,
    required: bool = False,
    pattern: str | None = None,
):
    """A TrainConfig field with what its command-line option and its workflow schema key need.

    switch: a flag without a value that sets True (the default stays as given,
    False or None: None lets a preset decide).
    pattern: a regex the whole value must match, checked by the workflow schema
    before any job starts (the run parses the value itself).
    """
    meta = {
        "help": help,
        "group": group,
        "type": type,
        "choices": choices,
        "metavar": metavar,
        "switch": switch,
        "required": required,
        "pattern": pattern,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TrainConfig:
    # ---- what to run, where (set by the workflow from the grid, not from the config's `train`)
    data: Path = _setting(None, "prepared HDF5 file (scaledl prepare)", group="run", type=Path, required=True)
    model: str = _setting(
        None,
        "network to train: a name of scaledl's model registry or of an installed plug-in, or your own with "
        "--model-from",
        group="run",
        required=True,
    )
    model_from: str | None = _setting(
        None,
        "MODULE:FUNCTION: build the model with this function of your own module, (in_shape, classes) -> "
        "torch.nn.Module; --model names it in run.json and the tables",
        group="run",
        metavar="MODULE:FUNCTION",
    )
    algorithm: str = _setting(None, "distributed algorithm (docs/algorithms.md)", group="run", required=True)
    out_dir: Path = _setting(
        None, "run directory for metrics.csv, run.json, model.pt", group="run", type=Path, required=True
    )
    # ---- budgets
    max_steps: int | None = _setting(
        None,
        "iterations per worker, counted in steps (collectives: one iteration "
        "of every worker; window algorithms: P center updates; round-robin: one "
        "round)",
        group="budgets",
        type=positive_int,
    )
    epochs: float | None = _setting(None, "passes over each worker's shard", group="budgets", type=positive_float)
    time_budget: float | None = _setting(
        None, "training seconds (evaluation excluded)", group="budgets", type=positive_float, metavar="SECONDS"
    )
    target_accuracy: float | None = _setting(
        None, "stop once the center's test accuracy reaches this", group="budgets", type=fraction
    )
    later_target_accuracy: float | None = _setting(
        None,
        "a later target beside target_accuracy: the run goes on past the first to this one and stops there; "
        "run.json records the crossing of both (claims are judged at each)",
        group="budgets",
        type=fraction,
    )
    # ---- hyperparameters
    batch_size: int = _setting(64, "mini-batch per worker", group="hyperparameters", type=positive_int)
    lr: float = _setting(0.05, "learning rate η", group="hyperparameters", type=positive_float)
    momentum: float = _setting(0.9, "μ of the momentum variants", group="hyperparameters", type=fraction)
    rho: float | None = _setting(
        None,
        "elasticity ρ of the EASGD family (None: α = ηρ = BETA/P)",
        group="hyperparameters",
        type=nonnegative_float,
    )
    beta: float = _setting(
        0.9, "β in α = β/P when --rho is not given (Zhang et al.)", group="hyperparameters", type=positive_float
    )
    weight_decay: float = _setting(0.0, "L2 coefficient added to ΔW", group="hyperparameters", type=nonnegative_float)
    momentum_at: str = _setting(
        "master", "async_msgd: where the momentum buffer V lives", group="hyperparameters", choices=MOMENTUM_PLACES
    )
    nesterov: bool = _setting(
        False, "async_measgd: take ΔW^i at the look-ahead W^i + μV^i", group="hyperparameters", switch=True
    )
    age_weight: str | None = _setting(
        None,
        "async_sgd/hogwild_sgd/async_easgd/async_measgd/hogwild_easgd: scale each exchange's update by the "
        "staleness s its epoch records (the center's updates by other workers since this worker's last one): "
        "inverse: 1/(1+s); none: unweighted, the paper's (None: the algorithm's, none but for async_easgd_aged)",
        group="hyperparameters",
        choices=AGE_WEIGHTS,
    )
    seed: int = _setting(0, "base seed; data order uses seed and worker index", group="hyperparameters", type=int)
    # ---- codesign
    message: str | None = _setting(
        None,
        "collectives: one packed message per exchange, one per parameter tensor, or (sync_sgd) "
        "gradient buckets allreduced while backward runs, as DDP does (None: bucketed for sync_sgd "
        "and chip_partition, packed for the others)",
        group="codesign",
        choices=MESSAGES,
    )
    bucket_mb: float | None = _setting(
        None,
        "sync_sgd --message bucketed: a gradient bucket's size in MB; the first bucket is at most 1 MB, "
        "so the first message leaves early (None: the algorithm's default, DDP's size)",
        group="codesign",
        type=positive_float,
        metavar="MB",
    )
    center_on: str | None = _setting(
        None,
        "sync_easgd: where the center W lives (None: the preset's, else the algorithm's default)",
        group="codesign",
        choices=PLACES,
    )
    overlap: bool | None = _setting(
        None,
        "sync_easgd, async_easgd, async_measgd, hogwild_easgd: exchange weights on "
        "a helper thread during data fetch and fwd/bwd (None: the preset's, else the "
        "algorithm's default; --no-overlap turns it off)",
        group="codesign",
        switch=True,
    )
    tau: int | None = _setting(
        None,
        "averaging family: average every TAU iterations, local steps between (None: the algorithm's default)",
        group="averaging",
        type=positive_int,
    )
    inner: str | None = _setting(
        None,
        "averaging family: each worker's optimizer between averagings; momentum is "
        "heavy-ball with --momentum (None: the algorithm's default)",
        group="averaging",
        choices=INNER_OPTIMIZERS,
    )
    worker_rule: str | None = _setting(
        None,
        "averaging family: after a round each worker is pulled elastically "
        "towards the center (EASGD's Eq. 1) or reset to it (None: the algorithm's "
        "default)",
        group="averaging",
        choices=WORKER_RULES,
    )
    outer: str | None = _setting(
        None,
        "averaging family: the center's step towards the workers' mean: elastic "
        "(EASGD's Eq. 2, rate Pα), average (take the mean), nesterov (SGD with Nesterov "
        "momentum on W − mean, as in DiLoCo) or slowmo (slow momentum) (None: the "
        "algorithm's default)",
        group="averaging",
        choices=OUTER_OPTIMIZERS,
    )
    outer_lr: float | None = _setting(
        None,
        "averaging family: the outer step's learning rate (None: the algorithm's default)",
        group="averaging",
        type=positive_float,
    )
    outer_momentum: float | None = _setting(
        None,
        "averaging family: the outer step's momentum (None: the algorithm's default)",
        group="averaging",
        type=fraction,
    )
    graph: str | None = _setting(
        None,
        "averaging family with --exchange allreduce: whose W^j a worker's round sums; complete: every worker's "
        "(the published methods); ring: its own and its two neighbours' (gossip without a master; each worker "
        "then keeps a center of its own; beyond the paper) (None: the algorithm's, complete but for diloco_ring)",
        group="averaging",
        choices=GRAPHS,
    )
    quorum: int | None = _setting(
        None,
        "quorum_diloco: the workers whose weights close a round, m of P (the others' join the round open when "
        "they arrive; beyond the paper); None: every worker, P",
        group="averaging",
        type=positive_int,
    )
    outer_delay: int | None = _setting(
        None,
        "averaging family with --worker-rule reset: 1 takes each outer step one round late for the other "
        "workers' outer gradients (their Allreduce overlaps the next round's steps) and on time for this "
        "worker's own (the eager delayed outer step; beyond the paper); 0: every outer step waits for the round "
        "(None: the algorithm's, 0 but for diloco_eager)",
        group="averaging",
        type=delay_rounds,
    )
    exchange: str | None = _setting(
        None,
        "averaging family: allreduce: every worker holds the center, one Allreduce gives each Σ W^i and each "
        "takes the center's step itself; rooted: the master holds it (Bcast W + Reduce Σ W^i, the paper's "
        "pattern) (None: allreduce, rooted with --compress other than fp32)",
        group="averaging",
        choices=EXCHANGES,
    )
    compress: str = _setting(
        "fp32",
        "averaging family: what a round's messages carry; fp16/bf16/int8 send the "
        "difference from the center both sides hold in 2 or 1 byte per value (int8: a "
        "scale per 4096 values, error feedback on the workers' messages); the averaging stays in float32",
        group="averaging",
        choices=COMPRESSIONS,
    )
    backend: str = _setting(
        "auto",
        "collectives: auto picks nccl with a GPU per rank, else CUDA-aware MPI, else "
        "MPI on host buffers (always MPI with the center on the host: NCCL takes device tensors "
        "only); gloo (host tensors) is torch.distributed's CPU backend, by request only",
        group="codesign",
        choices=BACKENDS,
    )
    fast_memory_gb: float | None = _setting(
        None,
        "chip_partition: memory all replicas on a node must fit in, e.g. 16 for KNL's MCDRAM (None: MemAvailable)",
        group="codesign",
        type=positive_float,
        metavar="GB",
    )
    center_window: str = _setting(
        "rma",
        "async_*/hogwild_*: the master's center window; rma: Get/Accumulate on "
        "an MPI RMA window (any placement), shared: an MPI shared-memory window that the "
        "workers read and add to directly (every rank on one node, else refused)",
        group="codesign",
        choices=CENTER_WINDOWS,
    )
    elastic_epoch: str = _setting(
        "split",
        "async_easgd/async_measgd/hogwild_easgd: split reads W in one epoch, computes α(W^i − W) outside "
        "every lock and holds the lock only to add it (the paper's master: one pass over W per exchange, "
        "as Async SGD's); atomic reads, computes and adds inside one epoch (the read-modify-write, for "
        "measuring the difference)",
        group="codesign",
        choices=ELASTIC_EPOCHS,
    )
    wait_probe: str = _setting(
        "barrier",
        "collectives: a barrier before each collective, timed as wait, so that "
        "a slower peer's lateness is wait and the collective's time is transfer; none folds "
        "the skew into transfer (one latency less per collective, for head-to-head runs)",
        group="codesign",
        choices=WAIT_PROBES,
    )
    # ---- execution
    straggler: str | None = _setting(
        None,
        "RANK:FACTOR[,RANK:FACTOR...]: stretch those ranks' forward/backward by "
        "FACTOR (a sleep of FACTOR-1 times its duration), to study heterogeneous "
        "machines",
        group="execution",
        metavar="RANK:FACTOR",
        pattern=r"^[0-9]+:[0-9]*[.]?[0-9]+(,[0-9]+:[0-9]*[.]?[0-9]+)*$",
    )
    device_sync: str = _setting(
        "phase",
        "CUDA: synchronise the stream at every phase boundary so each phase holds "
        "its own device work; none for head-to-head throughput (device phases then "
        "hold launches only)",
        group="execution",
        choices=DEVICE_SYNCS,
    )
    eval_every: int = _setting(
        50,
        "evaluate the center every this many steps (steps as --max-steps counts them)",
        group="execution",
        type=positive_int,
    )
    eval_batch_size: int = _setting(1000, "images per evaluation batch", group="execution", type=positive_int)
    validation_fraction: float | None = _setting(
        None,
        "evaluate on this share of the training split, held out of "
        "training (the tune stage), instead of the test split",
        group="execution",
        type=open_fraction,
    )
    worker_timeout: float = _setting(
        30.0,
        "the floor of the no-progress limit: a worker silent longer than the "
        "larger of this and 10x its longest interval so far (3x this before its pace "
        "is known) ends the job, naming the rank",
        group="execution",
        type=positive_float,
        metavar="SECONDS",
    )
    checkpoint_every: int | None = _setting(
        None,
        "write a checkpoint every this many steps (with or without --checkpoint-interval)",
        group="execution",
        type=positive_int,
        metavar="STEPS",
    )
    checkpoint_interval: float | None = _setting(
        300.0,
        "write a checkpoint when this many seconds have passed "
        "since the last one; 0 with no --checkpoint-every: none, not "
        "even on a signal",
        group="execution",
        type=nonnegative_float,
        metavar="SECONDS",
    )
    restart: bool = _setting(
        False,
        "start over: delete the run folder's checkpoints instead of resuming from the newest",
        group="execution",
        switch=True,
    )
    resume_across_versions: bool = _setting(
        False,
        "resume a checkpoint written by other code (another scaledl version, or edited sources); "
        "run.json records both versions",
        group="execution",
        switch=True,
    )
    time_only: bool = _setting(
        False,
        "scaledl simulate only: once an operation's price is known, charge it without computing it (seconds "
        "per step at a model's full size, no accuracy; needs no --target-accuracy)",
        group="execution",
        switch=True,
    )
    platform: str = _setting("local", "name of the machine/partition, recorded in run.json", group="execution")
    expect_ranks: int | None = _setting(
        None,
        "fail unless MPI started exactly N ranks (catches a launcher that starts N singletons)",
        group="execution",
        type=positive_int,
        metavar="N",
    )
    device: str = _setting("auto", "auto: this rank's GPU if any, else CPU", group="execution", choices=DEVICES)
    threads: int | None = _setting(
        None,
        "torch threads per rank (None: SLURM_CPUS_PER_TASK, OMP_NUM_THREADS or 1)",
        group="execution",
        type=positive_int,
    )
    # ---- the run's place in the grid (set by the workflow, recorded in run.json)
    setting: str | None = _setting(
        None,
        "the run's setting in the workflow's grid (its folder component: swept values, a tune trial, or tuned)",
        group="grid",
    )
    sweep: str | None = _setting(
        None, "comma list of the settings the grid varies for this run (the tables' columns)", group="grid"
    )
    tuned_from: Path | None = _setting(
        None,
        "a tune stage's chosen.csv: this run's tuned settings are its row for "
        "the run's dataset, model, algorithm, platform and workers",
        group="grid",
        type=Path,
        metavar="CSV",
    )
    tuned_scale: str | None = _setting(
        None,
        "KEY=FACTOR[,KEY=FACTOR...]: multiply these tuned settings (a control, e.g. lr=0.1)",
        group="grid",
        metavar="KEY=FACTOR",
    )
    tuned_pick: str = _setting(
        "best",
        "which of the tune stage's choices: its best point, or the runner_up (the best at another η: "
        "whether a verdict survives the second-best η)",
        group="grid",
        choices=("best", "runner_up"),
    )
    tune_seeds: int | None = _setting(
        None,
        "this run is a tune trial whose grid point runs this many seeds: it stops at the first evaluation "
        "where it can no longer be its cell's best or runner-up point, judged from the finished trials "
        "of the cell beside its folder (exact: its crossing would come later than the runner-up's)",
        group="grid",
        type=positive_int,
        metavar="SEEDS",
    )


# Fields the workflow sets for each run from the grid and the platform; the
# rest are the training settings of the config's `train` block.
SET_BY_WORKFLOW = (
    "data",
    "model",
    "model_from",
    "algorithm",
    "out_dir",
    "seed",
    "platform",
    "expect_ranks",
    "device",
    "threads",
    "setting",
    "sweep",
    "tuned_from",
    "tuned_scale",
    "tuned_pick",
    "tune_seeds",
)
# Decisions about one run folder, never settings of a grid (in the workflow's config a changed flag would
# also rerun every finished run: Snakemake reruns a job whose command changed).
COMMAND_LINE_ONLY = ("restart", "resume_across_versions")
SETTINGS = tuple(f.name for f in fields(TrainConfig) if f.name not in SET_BY_WORKFLOW + COMMAND_LINE_ONLY)


def defaults() -> dict[str, object]:
    """Every field's default (None for the required ones)."""
    return {f.name: f.default for f in fields(TrainConfig)}


# ---- the command line, written where it is parsed ------------------------------------------------------------

# Switches whose default (None) lets the algorithm decide: `scaledl train` takes --KEY and --no-KEY for them.
NEGATABLE = frozenset(f.name for f in fields(TrainConfig) if f.metadata["switch"] and f.default is None)


def flag_of(name: str) -> str:
    """The command-line flag of a setting, as every scaledl parser spells it: batch_size is --batch-size."""
    return "--" + name.replace("_", "-")


def as_argv(values: Mapping[str, Any], negatable: frozenset[str] = frozenset()) -> list[str]:
    """The arguments asking a scaledl command for these values: --key value for each non-null one; a list
    as C,H,W; true as a bare switch; false left off, or --no-key for a key in `negatable`.

    Sorted by key, so a command (which Snakemake compares to decide reruns)
    does not depend on the order keys were written or merged in.
    """
    argv = []
    for key, value in sorted(values.items()):
        if value is False and key in negatable:
            argv.append(flag_of(f"no_{key}"))
        elif value is True:
            argv.append(flag_of(key))
        elif value is not None and value is not False:
            argv += [flag_of(key), ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return argv


def to_argv(settings: Mapping[str, Any]) -> list[str]:
    """The `scaledl train` arguments asking for these settings (TrainConfig fields; null ones left to the
    defaults): the command line the parser built from the same fields reads back (scaledl.train.command)."""
    unknown = sorted(set(settings) - {f.name for f in fields(TrainConfig)})
    if unknown:
        raise ValueError(f"not a scaledl train setting: {', '.join(unknown)}")
    return as_argv(settings, NEGATABLE)
