"""The algorithm registry: one description per algorithm, read by everything else.

Names are the config enum, the CLI choices and the table keys. An algorithm
is its entry: the engine that runs its message pattern (one engine per
pattern: round-robin `easgd`, the `window` engine, the periodic-`averaging`
engine, `sync_sgd`), the pattern, what one exchange moves, the worker rule
of a window algorithm, the options it accepts, its defaults, and whether it
is a preset of another. Other code asks these fields, never compares names.
`refuse_unused_options(info, cfg)` refuses a run's setting the algorithm does not
use (the settings resolver, algorithms/settings.py, runs it first).

This module imports neither torch nor MPI, so Snakemake and the CLI can read
the registry without initialising MPI; `engine_class(key)` imports an
algorithm's engine on demand.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType

from scaledl.errors import UserError

# How the ranks talk (module docstrings give each one's message sequence).
PATTERNS = {
    "round_robin": "a dedicated master serves the workers one at a time, in rank order (two-sided messages)",
    "fcfs_window": "the center in an RMA window on a dedicated master; each exchange is one exclusive-lock "
    "epoch, so updates are applied one at a time, first come first served",
    "lock_free_window": "as fcfs_window, but each epoch takes a shared lock: concurrent, unordered updates (Hogwild)",
    "collectives": "no dedicated master: collectives over the workers (worker 0 keeps the center)",
    "quorum_rounds": "a dedicated master closes each averaging round once m of the P workers have sent their "
    "weights (two-sided messages); the late ones' join the next round",
}
# Backends whose reductions run in an order fixed by the message and communicator sizes
# (AlgorithmInfo.deterministic_in): MPI's; NCCL's order is not guaranteed, nor Gloo's.
FIXED_ORDER_BACKENDS = ("mpi", "cuda_aware_mpi")
# What one exchange moves: the workers' gradients ΔW^i or their weights W^i (and the center W back).
PAYLOADS = ("gradients", "weights")
# The engine of each pattern (scaledl.algorithms.<engine> defines ENGINE).
ENGINES = {"round_robin": "easgd", "fcfs_window": "window", "lock_free_window": "window", "quorum_rounds": "quorum"}
# A window algorithm's worker rule (algorithms/window.py RULES).
WINDOW_RULES = ("elastic", "momentum_elastic", "sgd", "momentum")

# Training settings (scaledl.config.TrainConfig fields) that only some algorithms use.
# A setting missing here applies to every algorithm.
OPTION_GROUPS = {
    "momentum": ("momentum",),  # μ of the momentum variants
    "elastic": ("rho", "beta"),  # ρ, or α = ηρ = β/P, of the EASGD family
    "collectives": ("message", "backend", "wait_probe"),  # how collectives travel and are timed
    "buckets": ("bucket_mb",),  # sync_sgd's gradient buckets, allreduced during backward
    "codesign": ("center_on", "overlap"),  # the Sync EASGD ladder's switches
    "averaging": (
        "tau",
        "inner",
        "worker_rule",
        "outer",
        "outer_lr",
        "outer_momentum",
        "outer_delay",
        "graph",
        "compress",
        "exchange",
    ),  # fmt: skip
    "overlap": ("overlap",),  # async EASGD family: exchange beside data and fwd/bwd
    "window": ("center_window",),  # the center window of the window algorithms (rma, shared)
    "age": ("age_weight",),  # an update weighed by its staleness (the window rules that push one update)
    "quorum": ("quorum", "tau", "outer", "outer_lr", "outer_momentum"),  # the quorum engine's round
}


def _options(*groups: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    return frozenset(name for group in groups for name in OPTION_GROUPS[group]) | frozenset(extra)


def algorithm_options() -> frozenset[str]:
    """Every setting that some algorithms use and others refuse."""
    return frozenset(name for info in ALGORITHMS.values() for name in info.options)


@dataclass(frozen=True, kw_only=True)
class AlgorithmInfo:
    """One algorithm's registry entry, written with keywords only: a bare True among seven arguments would not
    say that it is the determinism claim."""

    key: str
    paper_name: str
    engine: str  # scaledl.algorithms.<engine> defines ENGINE: easgd, window, averaging, sync_sgd
    pattern: str  # a key of PATTERNS
    payload: str  # what one exchange moves: one of PAYLOADS
    deterministic: bool  # claim: bitwise repeatable for a given seed and world size on CPU
    # with MPI (a run's own conditions: deterministic_in)
    options: frozenset[str] = frozenset()  # algorithm-specific settings it accepts (OPTION_GROUPS)
    preset_of: str | None = None  # a named setting of this base algorithm ...
    preset: Mapping = field(default_factory=dict)  # ... that fixes these settings (algorithms/settings.py;
    # "gradients": sum or mean, read by sync_sgd)
    defaults: Mapping = field(default_factory=dict)  # settings' values where the run leaves them unset and
    # no preset fixes them (algorithms/settings.py)
    rule: str | None = None  # the window engine's worker rule (WINDOW_RULES)
    numerics_of: str | None = None  # does exactly this algorithm's arithmetic (only where data moves differs):
    # the tune stage tunes them once and the reports expect them tied (an A/A check)
    tuned_apart: bool = False  # a replica of numerics_of that the tune stage tunes as a cell of its own, on
    # seeds of its own: the A/A of the tuning (the two choices, and their final runs, must come out tied)

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise ValueError(f"{self.key}: unknown pattern {self.pattern!r}; choose from {', '.join(PATTERNS)}")
        if self.payload not in PAYLOADS:
            raise ValueError(f"{self.key}: payload must be one of {', '.join(PAYLOADS)}")
        if self.pattern in ENGINES and self.engine != ENGINES[self.pattern]:
            raise ValueError(f"{self.key}: pattern {self.pattern} runs on the {ENGINES[self.pattern]} engine")
        if (self.engine == "window") != (self.rule in WINDOW_RULES):
            raise ValueError(
                f"{self.key}: a window algorithm names its worker rule ({', '.join(WINDOW_RULES)}), no other has one"
            )
        object.__setattr__(self, "preset", MappingProxyType(dict(self.preset)))
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))

    @property
    def needs_master(self) -> bool:
        """A dedicated master rank: the job has P + 1 ranks."""
        return self.pattern != "collectives"

    @property
    def is_preset(self) -> bool:
        return self.preset_of is not None

    @property
    def locked(self) -> bool:
        """Center updates are applied one at a time (False only for the Hogwild pattern)."""
        return self.pattern != "lock_free_window"

    def deterministic_in(self, devices, backend: str, deterministic_kernels: bool) -> tuple[bool, str]:
        """Whether a run of this algorithm is bitwise repeatable, and why (run.json's
        `algorithm.deterministic` and `deterministic_reason`).

        `deterministic` is the algorithm's claim: no arrival order enters its arithmetic.
        The run keeps that claim only if its conditions do too:
          devices                the ranks' devices ("cpu", "cuda:0", ...): CPU kernels are
                                 deterministic; CUDA ones (cuDNN backward-weight algorithms,
                                 pooling backward, atomics) only when
          deterministic_kernels  torch.use_deterministic_algorithms(True) was in force;
          backend                MPI (host or CUDA-aware) reduces in an order fixed by the
                                 message and communicator sizes; NCCL does not guarantee
                                 its order, nor does Gloo promise one.
        """
        on_cuda = any(str(d).startswith("cuda") for d in devices)
        if not self.deterministic:
            return False, f"{self.key}: updates are applied in arrival order, which varies run to run"
        if backend not in FIXED_ORDER_BACKENDS:
            return False, f"backend {backend}: the order of its reductions is not guaranteed"
        if on_cuda and not deterministic_kernels:
            return False, (
                "CUDA devices without torch.use_deterministic_algorithms(True): "
                "cuDNN and pooling backward kernels may differ run to run"
            )
        return True, (
            f"no arrival order in {self.key}, backend {backend} reduces in a fixed order, "
            + ("deterministic kernels enforced" if on_cuda else "CPU kernels")
        )


_EASGD_FAMILY = _options("elastic")
# The async EASGD family's exchange needs only W^i_t, known before the gradient: by default it
# runs beside data fetch and fwd/bwd, as the paper's §4 says (--no-overlap for the ablation).
_WINDOW_EASGD = _options("elastic", "window", "overlap", "age", extra=("elastic_epoch",))
_OVERLAPPED = {"overlap": True}
_ELASTIC = {"worker_rule": "elastic", "outer": "elastic", "tau": 1}  # Sync EASGD as the engine's setting
# The periodic-averaging engine (module averaging): Sync EASGD and the hard-averaging family are its settings.
_AVERAGING = _options("elastic", "collectives", "codesign", "averaging", "momentum")
_SYNC_EASGD = _AVERAGING
_SYNC_SGD = _options("collectives", "buckets")
# Synchronous SGD overlaps its allreduce with backward in DDP's buckets by default (--message packed: one message).
_BUCKETED = {"message": "bucketed", "bucket_mb": 25.0}

ALGORITHMS: dict[str, AlgorithmInfo] = {
    info.key: info
    for info in (
        AlgorithmInfo(
            key="easgd",
            paper_name="original EASGD (round-robin)",
            engine="easgd",
            pattern="round_robin",
            payload="weights",
            deterministic=True,
            options=_EASGD_FAMILY,
        ),
        AlgorithmInfo(
            key="async_easgd",
            paper_name="Async EASGD",
            engine="window",
            pattern="fcfs_window",
            payload="weights",
            deterministic=False,
            options=_WINDOW_EASGD,
            defaults=_OVERLAPPED,
            rule="elastic",
        ),
        AlgorithmInfo(
            key="async_measgd",
            paper_name="Async MEASGD",
            engine="window",
            pattern="fcfs_window",
            payload="weights",
            deterministic=False,
            options=_options("elastic", "momentum", "window", "overlap", "age", extra=("nesterov", "elastic_epoch")),
            defaults=_OVERLAPPED,
            rule="momentum_elastic",
        ),
        AlgorithmInfo(
            key="hogwild_easgd",
            paper_name="Hogwild EASGD",
            engine="window",
            pattern="lock_free_window",
            payload="weights",
            deterministic=False,
            options=_WINDOW_EASGD,
            defaults=_OVERLAPPED,
            rule="elastic",
        ),
        AlgorithmInfo(
            key="sync_easgd",
            paper_name="Sync EASGD",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_SYNC_EASGD,
            defaults=_ELASTIC,
        ),
        # The paper's engineering ladder (§3, Table 3): original EASGD → 1 → 2 → 3.
        AlgorithmInfo(
            key="sync_easgd1",
            paper_name="Sync EASGD1 (tree collectives, center on the host)",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_SYNC_EASGD,
            preset_of="sync_easgd",
            preset={"center_on": "host", "overlap": False},
            defaults=_ELASTIC,
            numerics_of="sync_easgd",
        ),
        AlgorithmInfo(
            key="sync_easgd2",
            paper_name="Sync EASGD2 (weights on the devices)",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_SYNC_EASGD,
            preset_of="sync_easgd",
            preset={"center_on": "device", "overlap": False},
            defaults=_ELASTIC,
            numerics_of="sync_easgd",
        ),
        AlgorithmInfo(
            key="sync_easgd3",
            paper_name="Sync EASGD3 (exchange overlapped with data and fwd/bwd)",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_SYNC_EASGD,
            preset_of="sync_easgd",
            preset={"center_on": "device", "overlap": True},
            defaults=_ELASTIC,
            numerics_of="sync_easgd",
        ),
        # Hard averaging with an outer step, the same engine (beyond the paper): the workers reset to the center.
        AlgorithmInfo(
            key="local_sgd",
            paper_name="local SGD (periodic model averaging)",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_AVERAGING,
            defaults={"worker_rule": "reset", "outer": "average", "tau": 8},
        ),
        AlgorithmInfo(
            key="diloco",
            paper_name="DiLoCo (outer Nesterov SGD on the averaged change)",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_AVERAGING,
            defaults={"worker_rule": "reset", "outer": "nesterov", "tau": 8, "outer_lr": 0.7, "outer_momentum": 0.9},
        ),
        AlgorithmInfo(
            key="slowmo",
            paper_name="SlowMo (slow momentum on the averaged change)",
            engine="averaging",
            pattern="collectives",
            payload="weights",
            deterministic=True,
            options=_AVERAGING,
            defaults={"worker_rule": "reset", "outer": "slowmo", "tau": 8, "outer_lr": 1.0, "outer_momentum": 0.5},
        ),
        AlgorithmInfo(
            key="async_sgd",
            paper_name="Async SGD",
            engine="window",
            pattern="fcfs_window",
            payload="gradients",
            deterministic=False,
            options=_options("window", "age"),
            rule="sgd",
        ),
        AlgorithmInfo(
            key="async_msgd",
            paper_name="Async MSGD",
            engine="window",
            pattern="fcfs_window",
            payload="gradients",
            deterministic=False,
            options=_options("momentum", "window", extra=("momentum_at",)),
            rule="momentum",
        ),
        AlgorithmInfo(
            key="hogwild_sgd",
            paper_name="Hogwild SGD",
            engine="window",
            pattern="lock_free_window",
            payload="gradients",
            deterministic=False,
            options=_options("window", "age"),
            rule="sgd",
        ),
        AlgorithmInfo(
            key="sync_sgd",
            paper_name="synchronous SGD (allreduce of gradients)",
            engine="sync_sgd",
            pattern="collectives",
            payload="gradients",
            deterministic=True,
            options=_SYNC_SGD,
            defaults=_BUCKETED,
        ),
        # The A/A of the tuning: synchronous SGD under a second name, tuned apart on disjoint seeds.
        AlgorithmInfo(
            key="sync_sgd_aa",
            paper_name="synchronous SGD, tuned apart (the A/A of the tuning)",
            engine="sync_sgd",
            pattern="collectives",
            payload="gradients",
            deterministic=True,
            options=_SYNC_SGD,
            preset_of="sync_sgd",
            defaults=_BUCKETED,
            numerics_of="sync_sgd",
            tuned_apart=True,
        ),
        # KNL chip partitioning (§3, Fig. 12): every partition holds all the data and its own weights,
        # and updates with the tree-summed gradients Σ_j ΔW^j (sync_sgd divides the sum by P).
        AlgorithmInfo(
            key="chip_partition",
            paper_name="KNL chip partitioning (replicated data and weights, tree-summed gradients)",
            engine="sync_sgd",
            pattern="collectives",
            payload="gradients",
            deterministic=True,
            options=_SYNC_SGD | {"fast_memory_gb"},
            preset_of="sync_sgd",
            preset={"data": "replicated", "gradients": "sum"},
            defaults=_BUCKETED,
        ),
    )
}


def _preset(base: str, key: str, paper_name: str, **fixing) -> AlgorithmInfo:
    """Algorithm `base` under a name of its own, with `fixing`'s settings fixed (its engine, options, defaults)."""
    return replace(ALGORITHMS[base], key=key, paper_name=paper_name, preset_of=base, preset=fixing)


# Beyond the paper: newer asynchronous methods as named settings of these engines (docs/algorithms.md), each its
# base bit for bit at the setting's neutral value, named so that the tune stage tunes it apart and a claim
# compares it with its base like any two methods.
ALGORITHMS.update(
    (info.key, info)
    for info in (
        _preset("async_easgd", "async_easgd_aged", "Async EASGD, each exchange weighed by its age, 1/(1+s)",
                age_weight="inverse"),
        _preset("diloco", "diloco_eager", "DiLoCo, the outer step one round late for the others' changes (eager)",
                outer_delay=1),
        _preset("diloco", "diloco_ring", "DiLoCo gossiping on a ring (no master)", graph="ring"),
    )
)  # fmt: skip
ALGORITHMS["quorum_diloco"] = AlgorithmInfo(
    key="quorum_diloco",
    paper_name="DiLoCo with quorum rounds (m of P workers close a round; decoupled)",
    engine="quorum",
    pattern="quorum_rounds",
    payload="weights",
    deterministic=False,
    options=_options("quorum"),
    defaults={"tau": 8, "outer": "nesterov", "outer_lr": 0.7, "outer_momentum": 0.9},
)

BASE_ALGORITHMS = tuple(key for key, info in ALGORITHMS.items() if not info.is_preset)


INTEGER = ("tau",)  # a tuned value of these is a whole number


def tunable_settings(key: str) -> list[str]:
    """The settings the tune stage may vary for algorithm `key`: η for all, β for the elastic family, μ where
    momentum is the algorithm's own, τ and the outer step where it has them."""
    info = ALGORITHMS[key]
    names = ["lr"]
    if "beta" in info.options and info.defaults.get("outer", "elastic") == "elastic":
        names.append("beta")
    if "momentum" in info.options and info.engine != "averaging":  # the averaging engine's inner SGD has none
        names.append("momentum")
    if info.defaults.get("tau", 1) > 1:
        names.append("tau")
    if info.defaults.get("outer") in ("nesterov", "slowmo"):
        names += ["outer_lr", "outer_momentum"]
    return names


def engine_class(key: str):
    """The engine class that runs the algorithm registered under `key`."""
    return importlib.import_module(f"scaledl.algorithms.{ALGORITHMS[key].engine}").ENGINE


def tasks_for(key: str, workers: int) -> int:
    """MPI ranks a run of `key` with `workers` workers needs."""
    return workers + 1 if ALGORITHMS[key].needs_master else workers


def accepting(option: str) -> list[str]:
    """The algorithms that accept `option` (for error messages): base algorithms, and a preset
    only where its base does not (chip_partition's --fast-memory-gb)."""
    return [
        key
        for key, info in ALGORITHMS.items()
        if option in info.options and not (info.is_preset and option in ALGORITHMS[info.preset_of].options)
    ]


def flag(option: str) -> str:
    """The command-line flag of a TrainConfig field: momentum_at → --momentum-at."""
    return "--" + option.replace("_", "-")


def refuse_unused_options(info: AlgorithmInfo, cfg) -> None:
    """Refuse a setting `info`'s algorithm does not use, given a value other than its default.

    `cfg` is the run's scaledl.config.TrainConfig. A setting that some algorithms
    use (`algorithm_options()`) but this one does not (`info.options`) must keep
    its TrainConfig default; otherwise the run would silently ignore it. Raises
    UserError with one line naming the flag, the algorithm and those that accept it.
    """
    defaults = {f.name: f.default for f in fields(cfg)}
    for option in sorted(algorithm_options() - info.options):
        value = getattr(cfg, option)
        if value == defaults[option]:
            continue
        given = (
            (flag(option) if value else "--no-" + flag(option)[2:])
            if isinstance(value, bool)
            else f"{flag(option)} {value}"
        )
        users = accepting(option)
        who = f"{users[0]} uses" if len(users) == 1 else f"{', '.join(users[:-1])} and {users[-1]} use"
        raise UserError(f"{given} does not apply to {info.key}: only {who} it")
