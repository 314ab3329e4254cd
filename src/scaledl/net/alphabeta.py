"""The α-β(-γ) cost of every algorithm's communication, per iteration (pure functions, no MPI).

Notation (the paper's §2 and Table 2):

    α   latency per message (s)              β   inverse bandwidth (s/byte)
    γ   reduction arithmetic (s/byte)        n   message size = |W| in bytes
    P   workers                              L   messages per exchange (1 packed, #tensors per layer)
    T_c a worker's compute per iteration (data, forward/backward, local update), s
    lg  ⌈log2 P⌉ (0 for P = 1)

One message: t(n) = L·α + n·β (`message`). Packed (the paper's single-layer
communication) is L = 1, so per-layer costs (L − 1)·α more per message.

Collectives over P ranks, by algorithm (every α term is multiplied by L in
per-layer mode):

    Bcast   binomial            lg·(α + nβ)
            scatter_allgather   2·lg·α + 2(P−1)/P·nβ              (van de Geijn: binomial scatter +
                                                                    recursive-doubling allgather)
    Reduce  binomial            lg·(α + nβ + nγ)
            rabenseifner        2·lg·α + 2(P−1)/P·nβ + (P−1)/P·nγ  (reduce-scatter + gather)
    Allreduce
            tree                2·lg·(α + nβ) + lg·nγ             (binomial Reduce then Bcast)
            recursive_doubling  lg·(α + nβ + nγ)
            ring                2(P−1)·α + 2(P−1)/P·nβ + (P−1)/P·nγ
            rabenseifner        2·lg·α + 2(P−1)/P·nβ + (P−1)/P·nγ  (reduce-scatter + allgather)

Two named cost models (`COST_MODELS`) pick the collective algorithms:

    paper              the paper's analysis: every collective is a binomial tree over
                       the whole message, Bcast = Reduce = log P·(α + |W|β); Allreduce
                       = Reduce + Bcast ("tree").
    bandwidth_optimal  what MPI libraries select for large messages: Bcast =
                       scatter + allgather, Reduce = reduce-scatter + gather,
                       Allreduce = Rabenseifner. The bandwidth term no longer grows
                       with log P: 2(P−1)/P·nβ → 2nβ.

Which one a library really runs depends on the size and P. MPICH's documented
defaults (the CVARs of its classic selection): Bcast is binomial below 12 KiB
or when P < 8 (MPIR_CVAR_BCAST_MIN_PROCS), scatter + recursive-doubling
allgather up to 512 KiB with P a power of two, scatter + ring allgather
above; Reduce is binomial up to 2 KiB and reduce-scatter + gather above;
Allreduce is recursive doubling up to 2 KiB and Rabenseifner above. Recent
ch4 builds may substitute shared-memory algorithms inside a node. At P = 2
all of these move the whole message once per collective, so the two models
only part from P ≥ 4.

Per-iteration cost of each algorithm (`step_cost`), with S = 2(t(n)) the
exchange of one worker with the master (W^i or ΔW^i up, W down):

    sync_sgd       one Allreduce of ΔW:            comm = allreduce(n)
    sync_easgd     exchange rooted (the paper's, this model's default): Bcast of W + Reduce of ΣW^i:
                   comm = bcast(n) + reduce(n); paper: 2·lg·(α + nβ) (+ lg·nγ);
                   bandwidth_optimal: 4·lg·α + 4(P−1)/P·nβ + (P−1)/P·nγ, i.e.
                   twice sync_sgd's bandwidth term (two collectives of |W|).
                   exchange allreduce (the engine's default): one Allreduce of
                   W^i, every worker holding the center: comm = allreduce(n).
                   With a communication period τ: comm/τ per iteration.
                   The ladder presets (sync_easgd1/2/3) share this pattern;
                   sync_easgd3 overlaps it with data and fwd/bwd, so its step
                   is max(T_c, comm) (`overlap`). Where the center lives
                   (host or device) changes host↔device copies, which are not
                   network messages and are not modelled here.
    easgd          round-robin: the master serves the workers one at a time,
                   computation included (paper Algorithm 1), so one round is
                   P·(T_c + S) and every worker does one iteration per round:
                   step = P·(T_c + S); the master's communication per round is
                   P·S = P·2(α + nβ) (the paper counts P·(α + |W|β) each way).
    async_sgd, async_msgd, async_easgd, async_measgd
                   first come, first served under an exclusive lock: exchanges
                   are serialised at the master, which is a single server with
                   service time S (+ nγ: the master-side accumulate) visited by
                   P workers that each "think" for T_c. The deterministic
                   closed-system bound (operational analysis): a worker's cycle
                   is step = max(T_c + S, P·S). Below saturation (P·S ≤ T_c + S)
                   nobody queues; above it the master's link is busy all the
                   time and each worker waits P·S − T_c − S in the lock queue.
                   async_msgd with the momentum buffer at the master (its
                   default) moves V twice more per exchange: S = 4(α + nβ) + nγ.
    hogwild_sgd, hogwild_easgd
                   the same exchanges under a shared lock: latencies overlap,
                   only the bytes through the master's link serialise, so the
                   bound uses the link demand D = 2nβ: step = max(T_c + S, P·D).

Algorithms are classified by their registry description (`family`): the
message pattern, and for collectives what one exchange moves (gradients:
allreduce; weights: bcast_reduce), so a new registry entry is modelled
automatically. The extra momentum transfers belong to an algorithm whose V
may live at the master (`momentum_at` among its options) run with it there.

For every algorithm `exposed_s` = step − T_c: the seconds a worker spends per
iteration not computing, i.e. in its messages, its lock queue or waiting for
its turn (round-robin includes the other workers' serialised compute): what
a run measures as transfer + wait (docs/time.md's exposed share, in
seconds). No overlap of communication with computation is assumed except
where `overlap` says so.

`control=True` adds our implementation's small control messages (a worker's
comm timer includes them): sync algorithms Allreduce a 4-byte stop flag each
iteration (recursive doubling: lg·α); master-based workers report on the
master's board (one RMA epoch, ≈ 2α); the first-come-first-served family
also counts the center's version inside the lock (another 2α, serialised).

Scaling efficiency (`efficiency`, and `weak_scaling` over many P): with a
fixed per-worker batch (weak), throughput is P/step(P); efficiency is the
ratio to P single-worker runs, step(1)/step(P), the convention of Horovod,
DDP and the paper's weak-scaling claim (`PAPER_WEAK_SCALING`: 91.5 % on 4253
KNL cores, quoted as printed). From a base of P0 workers it is
step(P0)/step(P); strong scaling (a fixed global batch, so T_c ∝ 1/P)
divides that by P/P0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scaledl.algorithms import ALGORITHMS

# ----------------------------------------------------------------- networks


@dataclass(frozen=True)
class Network:
    """α (s per message), β (s per byte), γ (s per byte reduced)."""

    alpha: float
    beta: float
    gamma: float = 0.0
    name: str = ""

    def __post_init__(self):
        for field in ("alpha", "beta", "gamma"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")

    @property
    def bandwidth(self) -> float:
        """Bytes per second (1/β); inf for β = 0."""
        return 1.0 / self.beta if self.beta > 0 else math.inf


# The paper's Table 2 as we recall it (not verified against the paper; the 7.2 µs is
# corroborated by a third-party simulator that cites the paper). β per byte.
NETWORKS: dict[str, Network] = {
    "fdr_ib": Network(0.7e-6, 0.2e-9, name="Mellanox 56 Gb/s FDR IB (paper Table 2, recalled)"),
    "qdr_ib": Network(1.2e-6, 0.3e-9, name="Intel 40 Gb/s QDR IB (paper Table 2, recalled)"),
    "10gbe": Network(7.2e-6, 0.9e-9, name="Intel 10 GbE NetEffect NE020 (paper Table 2, recalled)"),
}

PAPER_WEAK_SCALING = {
    "cores": 4253,
    "efficiency": 0.915,
    "source": "abstract: 91.5% weak scaling efficiency on 4253 KNL cores (number as printed)",
}

COST_MODELS = ("paper", "bandwidth_optimal")

# Which collective algorithm each model uses.
_MODEL_ALGORITHMS = {
    "paper": {"bcast": "binomial", "reduce": "binomial", "allreduce": "tree"},
    "bandwidth_optimal": {"bcast": "scatter_allgather", "reduce": "rabenseifner", "allreduce": "rabenseifner"},
}

BCAST_ALGORITHMS = ("binomial", "scatter_allgather")
REDUCE_ALGORITHMS = ("binomial", "rabenseifner")
ALLREDUCE_ALGORITHMS = ("tree", "recursive_doubling", "ring", "rabenseifner")

# How each message pattern (scaledl.algorithms.PATTERNS) is modelled; collectives by what they move.
_PATTERN_FAMILIES = {
    "round_robin": "round_robin", "fcfs_window": "locked", "lock_free_window": "lock_free", "quorum_rounds": "quorum",
}  # fmt: skip
_COLLECTIVE_FAMILIES = {"gradients": "allreduce", "weights": "bcast_reduce"}
COLLECTIVE_FAMILIES = tuple(_COLLECTIVE_FAMILIES.values())


def family(key: str) -> str:
    """The communication family of algorithm `key`: allreduce, bcast_reduce, round_robin, locked, lock_free,
    quorum."""
    if key not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {key!r}; choose from {', '.join(ALGORITHMS)}")
    info = ALGORITHMS[key]
    if info.pattern == "collectives":
        return _COLLECTIVE_FAMILIES[info.payload]
    return _PATTERN_FAMILIES[info.pattern]


def is_collective(key: str) -> bool:
    return family(key) in COLLECTIVE_FAMILIES


# --------------------------------------------------------------- primitives


def ceil_log2(p: int) -> int:
    """⌈log2 p⌉: rounds of a binomial tree over p ranks (0 for p = 1)."""
    _check_workers(p)
    return (p - 1).bit_length()


def message(net: Network, n: float, layers: int = 1) -> float:
    """One point-to-point exchange of n bytes in `layers` messages: L·α + n·β."""
    _check_size(n, layers)
    return layers * net.alpha + n * net.beta


def bcast(net: Network, n: float, p: int, algorithm: str = "binomial", layers: int = 1) -> float:
    """Seconds of a Bcast of n bytes over p ranks (formulas in the module docstring)."""
    _check_size(n, layers)
    lg, a = ceil_log2(p), layers * net.alpha
    frac = (p - 1) / p
    if algorithm == "binomial":
        return lg * (a + n * net.beta)
    if algorithm == "scatter_allgather":
        return 2 * lg * a + 2 * frac * n * net.beta
    raise ValueError(f"unknown bcast algorithm {algorithm!r}; choose from {', '.join(BCAST_ALGORITHMS)}")


def reduce(net: Network, n: float, p: int, algorithm: str = "binomial", layers: int = 1) -> float:
    """Seconds of a sum-Reduce of n bytes over p ranks."""
    _check_size(n, layers)
    lg, a = ceil_log2(p), layers * net.alpha
    frac = (p - 1) / p
    if algorithm == "binomial":
        return lg * (a + n * net.beta + n * net.gamma)
    if algorithm == "rabenseifner":
        return 2 * lg * a + 2 * frac * n * net.beta + frac * n * net.gamma
    raise ValueError(f"unknown reduce algorithm {algorithm!r}; choose from {', '.join(REDUCE_ALGORITHMS)}")


def allreduce(net: Network, n: float, p: int, algorithm: str = "rabenseifner", layers: int = 1) -> float:
    """Seconds of a sum-Allreduce of n bytes over p ranks."""
    _check_size(n, layers)
    lg, a = ceil_log2(p), layers * net.alpha
    frac = (p - 1) / p
    if algorithm == "tree":
        return reduce(net, n, p, "binomial", layers) + bcast(net, n, p, "binomial", layers)
    if algorithm == "recursive_doubling":
        return lg * (a + n * net.beta + n * net.gamma)
    if algorithm == "ring":
        return 2 * (p - 1) * a + 2 * frac * n * net.beta + frac * n * net.gamma
    if algorithm == "rabenseifner":
        return 2 * lg * a + 2 * frac * n * net.beta + frac * n * net.gamma
    raise ValueError(f"unknown allreduce algorithm {algorithm!r}; choose from {', '.join(ALLREDUCE_ALGORITHMS)}")


def busbw_factor(op: str, p: int) -> float:
    """nccl-tests' bus-bandwidth factor: busbw = algbw × factor (allreduce 2(P−1)/P; bcast, reduce 1)."""
    _check_workers(p)
    if op == "allreduce":
        return 2 * (p - 1) / p
    if op in ("reduce_scatter", "allgather", "alltoall"):
        return (p - 1) / p
    if op in ("bcast", "reduce", "sendrecv"):
        return 1.0
    raise ValueError(f"no bus-bandwidth factor for {op!r}")


# ------------------------------------------------------------- algorithms


@dataclass(frozen=True)
class StepCost:
    """Predicted per-iteration times of one worker (seconds).

    exchange_s: this worker's own messages, nobody else in the way.
    exposed_s:  step_s − compute_s: messages plus lock queue / waiting for its turn (measured: transfer + wait).
    step_s:     one iteration of one worker (one round for round-robin).
    """

    algorithm: str
    model: str
    workers: int
    compute_s: float
    exchange_s: float
    exposed_s: float
    step_s: float
    formula: str


def step_cost(
    key: str,
    net: Network,
    n: float,
    p: int,
    *,
    model: str = "paper",
    compute_s: float = 0.0,
    layers: int = 1,
    control: bool = False,
    master_momentum: bool = True,
    overlap: bool | None = None,
    tau: int = 1,
    exchange: str = "rooted",
) -> StepCost:
    """Per-iteration cost of algorithm `key` with P = p workers exchanging n bytes (see module docstring).

    master_momentum: the run's --momentum-at is master; for an algorithm with that option (async_msgd)
                     the momentum buffer V moves twice more per exchange.
    overlap: the Sync EASGD family's exchange on a helper thread beside data and fwd/bwd
             (None: the registry preset's, e.g. True for sync_easgd3): step = max(T_c, comm).
    tau:     the Sync EASGD family's communication period: one exchange every τ iterations.
    exchange: the Sync EASGD family's round: rooted (Bcast + Reduce, the paper's pattern and model) or
              allreduce (one Allreduce of W^i, the engine's default; a run passes what it recorded).
    """
    fam = family(key)
    if model not in COST_MODELS:
        raise ValueError(f"unknown model {model!r}; choose from {', '.join(COST_MODELS)}")
    _check_size(n, layers)
    _check_workers(p)
    if not (isinstance(compute_s, (int, float)) and math.isfinite(compute_s) and compute_s >= 0):
        raise ValueError(f"compute_s must be >= 0, got {compute_s!r}")
    if isinstance(tau, bool) or not isinstance(tau, int) or tau < 1:
        raise ValueError(f"tau must be an integer >= 1, got {tau!r}")
    inputs = _Step(
        key=key, net=net, n=n, p=p, algorithms=_MODEL_ALGORITHMS[model], layers=layers, compute_s=compute_s,
        control=control, master_momentum=master_momentum, overlap=overlap, tau=tau, exchange=exchange,
    )  # fmt: skip
    exchange_s, step_s, formula = _FAMILY_STEPS[fam](inputs)
    return StepCost(key, model, p, compute_s, exchange_s, step_s - compute_s, step_s, formula)


@dataclass(frozen=True)
class _Step:
    """What every family's formula reads: step_cost's arguments, checked."""

    key: str
    net: Network
    n: float
    p: int
    algorithms: dict  # the cost model's collective algorithm of each collective (_MODEL_ALGORITHMS)
    layers: int
    compute_s: float
    control: bool
    master_momentum: bool
    overlap: bool | None  # the Sync EASGD family's three settings
    tau: int
    exchange: str

    @property
    def lg(self) -> int:
        return ceil_log2(self.p)

    @property
    def t(self) -> float:
        """One point-to-point message of the whole model: L·α + n·β."""
        return message(self.net, self.n, self.layers)

    @property
    def exchanges(self) -> int:
        """Point-to-point messages of one exchange with the master: W^i (or ΔW^i) up, W down; with V at the
        master (async_msgd's default), V is read and written back inside every exchange too."""
        return 4 if "momentum_at" in ALGORITHMS[self.key].options and self.master_momentum else 2

    @property
    def control_pair(self) -> float:
        """Two small control messages (≈ 2α) where `control` counts them, else nothing."""
        return 2 * self.net.alpha if self.control else 0.0


# Each family's (exchange_s, step_s, formula).


def _allreduce_step(s: _Step) -> tuple[float, float, str]:
    name = s.algorithms["allreduce"]
    comm = allreduce(s.net, s.n, s.p, name, s.layers)
    return _collective_step(s, comm, f"allreduce[{name}](n)", overlapped=False)


def _bcast_reduce_step(s: _Step) -> tuple[float, float, str]:
    algs, overlap = s.algorithms, s.overlap
    if s.exchange == "allreduce":
        comm = allreduce(s.net, s.n, s.p, algs["allreduce"], s.layers) / s.tau
        formula = f"allreduce[{algs['allreduce']}](n)"
    elif s.exchange == "rooted":
        comm = (
            bcast(s.net, s.n, s.p, algs["bcast"], s.layers) + reduce(s.net, s.n, s.p, algs["reduce"], s.layers)
        ) / s.tau
        formula = f"bcast[{algs['bcast']}](n) + reduce[{algs['reduce']}](n)"
    else:
        raise ValueError(f"unknown exchange {s.exchange!r}; choose allreduce or rooted")
    formula += f", every {s.tau} steps" if s.tau > 1 else ""
    if overlap is None:
        overlap = bool(ALGORITHMS[s.key].preset.get("overlap", False))
    return _collective_step(s, comm, formula, overlapped=overlap)


def _collective_step(s: _Step, comm: float, formula: str, *, overlapped: bool) -> tuple[float, float, str]:
    """A collective round: after the compute, or beside it when overlapped; sync algorithms Allreduce a
    4-byte stop flag each iteration (recursive doubling: lg·α) as control."""
    if overlapped:
        step, formula = max(s.compute_s, comm), f"max(T_c, {formula})"
    else:
        step = s.compute_s + comm
    if s.control:
        step += s.lg * s.net.alpha
        formula += " + lg·α"
    return comm, step, formula


def _round_robin_step(s: _Step) -> tuple[float, float, str]:
    exchange_s = s.exchanges * s.t
    step = s.p * (s.compute_s + exchange_s) + s.control_pair  # the board report
    return exchange_s, step, "P·(T_c + 2(Lα + nβ))" + (" + control" if s.control else "")


def _locked_step(s: _Step) -> tuple[float, float, str]:
    exchange_s = s.exchanges * s.t
    service = exchange_s + s.n * s.net.gamma + s.control_pair  # the center's version count, inside the lock
    step = max(s.compute_s + service, s.p * service) + s.control_pair  # the board report, outside it
    formula = f"max(T_c + S, P·S), S = {s.exchanges}(Lα + nβ) + nγ"
    return exchange_s, step, formula + (" + control" if s.control else "")


def _lock_free_step(s: _Step) -> tuple[float, float, str]:
    exchange_s = s.exchanges * s.t
    service = exchange_s + s.n * s.net.gamma + s.control_pair
    demand = s.exchanges * s.n * s.net.beta  # only the bytes through the master's link serialise
    step = max(s.compute_s + service, s.p * demand) + s.control_pair
    formula = f"max(T_c + S, P·{s.exchanges}nβ), S = {s.exchanges}(Lα + nβ) + nγ"
    return exchange_s, step, formula + (" + control" if s.control else "")


def _quorum_step(s: _Step) -> tuple[float, float, str]:
    """Equal workers: every round's W^i arrive together, so the master's link moves all P each way and the
    round (every τ steps) waits for them; its outer step is one pass over W."""
    exchange_s = s.exchanges * s.t
    round_s = s.p * exchange_s + s.n * s.net.gamma
    step = s.compute_s + round_s / s.tau + s.control_pair  # the board report
    return exchange_s, step, f"T_c + (P·2(Lα + nβ) + nγ)/{s.tau}" + (" + control" if s.control else "")


_FAMILY_STEPS = {
    "allreduce": _allreduce_step,
    "bcast_reduce": _bcast_reduce_step,
    "round_robin": _round_robin_step,
    "locked": _locked_step,
    "lock_free": _lock_free_step,
    "quorum": _quorum_step,
}


SCALINGS = ("weak", "strong")


def efficiency(
    key: str,
    net: Network,
    n: float,
    p: int,
    compute_s: float,
    *,
    reference: str = "one_worker",
    base_workers: int = 1,
    scaling: str = "weak",
    **kwargs,
) -> float:
    """Scaling efficiency at p workers; compute_s is a worker's T_c at the base.

    reference="one_worker": step(P0)/step(P) with P0 = base_workers (1: throughput(P) / (P · throughput(1)),
                            as peers report it); strong scaling: T_c(P) = T_c · P0/P, divided by P/P0.
    reference="compute":    T_c/step(P) = T_c / (T_c + T_comm(P)), against communication-free compute (weak).
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {', '.join(SCALINGS)}, got {scaling!r}")
    strong = scaling == "strong"

    def step(workers: int) -> float:
        compute = compute_s * (base_workers / workers if strong else 1)
        return step_cost(key, net, n, workers, compute_s=compute, **kwargs).step_s

    at_p = step(p)
    if reference == "one_worker":
        base = step(base_workers)
    elif reference == "compute" and not strong and base_workers == 1:
        base = compute_s
    else:
        raise ValueError(f"reference must be 'one_worker' or (weak, from one worker) 'compute', got {reference!r}")
    if at_p <= 0:
        return 1.0
    return base / at_p / (p / base_workers if strong else 1)


DEFAULT_WORKERS = tuple(2**k for k in range(13)) + (PAPER_WEAK_SCALING["cores"],)  # 1 … 4096, and 4253


def weak_scaling(key: str, net: Network, n: float, compute_s: float, workers=DEFAULT_WORKERS, **kwargs) -> list[dict]:
    """One row per worker count: predicted exposed and step seconds and the efficiency (relative to P = 1)."""
    rows = []
    for p in workers:
        cost = step_cost(key, net, n, p, compute_s=compute_s, **kwargs)
        rows.append(
            {
                "workers": p,
                "exposed_s": cost.exposed_s,
                "step_s": cost.step_s,
                "efficiency": efficiency(key, net, n, p, compute_s, **kwargs),
            }
        )
    return rows


# ------------------------------------------------------------------ checks


def _check_workers(p) -> None:
    if isinstance(p, bool) or not isinstance(p, int) or p < 1:
        raise ValueError(f"number of workers must be an integer >= 1, got {p!r}")


def _check_size(n, layers) -> None:
    if not (isinstance(n, (int, float)) and math.isfinite(n) and n >= 0):
        raise ValueError(f"message size must be a number of bytes >= 0, got {n!r}")
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"layers must be an integer >= 1, got {layers!r}")
