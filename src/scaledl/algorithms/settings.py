"""One settings resolver: the values an algorithm uses in this run, worked out once.

A setting's value is, in order: the command line's (`TrainConfig`), the
preset's fixed switch (sync_easgd1/2/3, chip_partition), the algorithm's
registry default (`AlgorithmInfo.defaults`), else the engine's fallback.
`resolve` refuses first a setting the algorithm does not use
(`refuse_unused_options`), then a switch that contradicts its preset or another
setting, so a refused run has built nothing. Algorithms receive `Settings`,
never the raw TrainConfig; run.json records `Settings.record()`: only the
settings this algorithm actually uses (a sync_sgd run has no ρ or μ).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaledl.algorithms import AlgorithmInfo, refuse_unused_options
from scaledl.algorithms.rules import default_rho
from scaledl.errors import UserError

# run.json's blocks, in the order they are written.
HYPER = (
    "lr", "batch_size", "weight_decay", "rho", "alpha", "beta", "momentum", "nesterov", "momentum_at", "age_weight",
    "tau",
)  # fmt: skip
CODESIGN = ("message", "bucket_mb", "exchange", "center_on", "overlap", "elastic_epoch", "backend", "data")
AVERAGING = (
    "inner", "worker_rule", "outer", "outer_lr", "outer_momentum", "outer_delay", "graph", "tau", "compress", "quorum",
)  # fmt: skip
ENCODED_BACKENDS = ("mpi", "cuda_aware_mpi")  # compressed rounds send bytes: MPI only
OUTER_WITH_STATE = ("nesterov", "slowmo")  # outer steps with a learning rate and a momentum


@dataclass(frozen=True)
class Settings:
    """What the algorithm of this run uses; None where it uses no such setting."""

    lr: float  # η
    batch_size: int  # per worker
    weight_decay: float
    backend: str  # resolved: mpi, cuda_aware_mpi, nccl or gloo
    data: str = "sharded"  # "replicated": every worker holds all the data (chip partitioning)
    rho: float | None = None  # ρ, the elasticity; α = ηρ
    beta: float | None = None  # β of α = β/P, where ρ came from it
    momentum: float | None = None  # μ
    nesterov: bool | None = None  # async_measgd: ΔW^i at the look-ahead W^i + μV^i
    momentum_at: str | None = None  # async_msgd: where V lives
    age_weight: str | None = None  # the window rules' update weighed by its staleness: none or inverse
    tau: int | None = None  # the averaging engine's period
    inner: str | None = None  # the averaging engine's settings (module averaging)
    worker_rule: str | None = None
    outer: str | None = None
    outer_lr: float | None = None
    outer_momentum: float | None = None
    outer_delay: int | None = None  # rounds an outer step waits for the others' outer gradients (0 or 1)
    graph: str | None = None  # whose W^j a worker's round sums: complete (every worker's) or ring
    quorum: int | None = None  # the quorum engine: the workers whose W^i close a round (m of P)
    compress: str | None = None
    message: str | None = None  # collectives: packed, per_layer or (sync_sgd) bucketed
    bucket_mb: float | None = None  # sync_sgd's gradient buckets (message bucketed)
    center_on: str | None = None  # the averaging engine: where the center lives
    exchange: str | None = None  # the averaging engine's round: allreduce (every worker holds W) or rooted
    overlap: bool | None = None  # the exchange on a helper thread
    wait_probe: str | None = None  # collectives: a timed barrier before each one
    center_window: str | None = None  # the window engine: rma or shared
    elastic_epoch: str | None = None  # the window engine's elastic exchange: split or atomic
    gradients: str | None = None  # sync_sgd: the allreduced gradients' mean, or their sum (chip_partition)
    fast_memory_gb: float | None = None  # chip_partition: what every replica on a node must fit in

    @property
    def alpha(self) -> float | None:
        """α = ηρ, the moving rate."""
        return None if self.rho is None else self.lr * self.rho

    def record(self) -> dict:
        """run.json's `hyper`, `codesign` and `averaging` blocks: the values used, nothing else."""
        values = {**asdict(self), "alpha": self.alpha}

        def block(keys):
            return {key: values[key] for key in keys if values[key] is not None}

        return {
            "hyper": block(HYPER),
            "codesign": block(CODESIGN),
            "averaging": block(AVERAGING) if self.worker_rule is not None else None,
        }


def resolve(cfg, info: AlgorithmInfo, *, workers: int, choose_backend=None) -> Settings:
    """The settings `info`'s algorithm runs with, for `workers` workers; a UserError names what to change.

    `choose_backend(requested, host_buffers)` picks the collectives' transport for this
    rank's device (scaledl.comm.collectives.choose_backend, bound by the setup); without
    one (or for an algorithm without collectives) the transport is MPI.
    """
    refuse_unused_options(info, cfg)
    _check_preset(cfg, info)

    def value(key: str, fallback=None):
        given = getattr(cfg, key) if key in info.options else None
        if given is not None:
            return given
        return info.preset.get(key, info.defaults.get(key, fallback))

    options = info.options
    averaging = "worker_rule" in options
    values = {}
    if averaging:
        values.update(
            tau=value("tau", 1),
            inner=value("inner", "sgd"),
            worker_rule=value("worker_rule", "elastic"),
            outer=value("outer", "elastic"),
            outer_delay=value("outer_delay", 0),
            graph=value("graph", "complete"),
            compress=value("compress"),
        )
        values["exchange"] = value("exchange", "allreduce" if values["compress"] == "fp32" else "rooted")
        if values["outer"] in OUTER_WITH_STATE:
            values.update(outer_lr=value("outer_lr"), outer_momentum=value("outer_momentum"))
            if None in (values["outer_lr"], values["outer_momentum"]):
                raise UserError(
                    f"--outer {values['outer']} needs --outer-lr and --outer-momentum (diloco and slowmo have defaults)"
                )
    if "quorum" in options:  # the quorum engine's round: a reset to the center after its outer step
        values.update(tau=value("tau"), inner="sgd", worker_rule="reset", outer=value("outer"))
        values.update(outer_lr=value("outer_lr"), outer_momentum=value("outer_momentum"), quorum=value("quorum"))
        if values["outer"] not in ("average", "nesterov"):
            raise UserError(f"--outer {values['outer']}: {info.key} takes the average or the nesterov outer step")
        if values["quorum"] is not None and values["quorum"] > workers:
            raise UserError(f"--quorum {values['quorum']}: a round cannot wait for more than the {workers} workers")
    elastic = "rho" in options and (not averaging or "elastic" in (values["worker_rule"], values["outer"]))
    if elastic:
        values["rho"] = cfg.rho if cfg.rho is not None else default_rho(cfg.lr, workers, cfg.beta)
        values["beta"] = cfg.beta if cfg.rho is None else None
    if "momentum" in options and (not averaging or values["inner"] == "momentum"):
        values["momentum"] = cfg.momentum
    for key in (
        "nesterov",
        "momentum_at",
        "center_window",
        "elastic_epoch",
        "wait_probe",
        "fast_memory_gb",
    ):
        if key in options:
            values[key] = value(key)
    if "age_weight" in options:
        values["age_weight"] = value("age_weight", "none")
    if "message" in options:
        values["message"] = value("message", "packed")
    if values.get("message") == "bucketed" or cfg.bucket_mb is not None:
        values["bucket_mb"] = value("bucket_mb")
    if "center_on" in options:
        values["center_on"] = value("center_on", "device")
    if "overlap" in options:
        values["overlap"] = value("overlap", False)
    if "gradients" in info.preset or info.engine == "sync_sgd":
        values["gradients"] = info.preset.get("gradients", "mean")
    backend = "mpi"
    if "backend" in options and choose_backend is not None:
        backend = choose_backend(cfg.backend, host_buffers=values.get("center_on") == "host")
    settings = Settings(
        lr=cfg.lr,
        batch_size=cfg.batch_size,
        weight_decay=cfg.weight_decay,
        backend=backend,
        data=info.preset.get("data", "sharded"),
        **values,
    )
    _check_combination(settings, info)
    return settings


def _check_preset(cfg, info: AlgorithmInfo) -> None:
    """A preset fixes its switches: the command line may repeat them, never contradict them."""
    for key in sorted(info.preset.keys() & info.options):  # (data and gradients are a preset's own, no setting's)
        given, fixed = getattr(cfg, key), info.preset[key]
        if given is None or given == fixed:
            continue
        flag = "--" + key.replace("_", "-")
        switch = (flag if given else f"--no-{flag[2:]}") if isinstance(given, bool) else f"{flag} {given}"
        raise UserError(
            f"{switch} contradicts {info.key}, which fixes {key} = {fixed}; "
            f"use --algorithm {info.preset_of} to choose it freely"
        )


def _check_combination(s: Settings, info: AlgorithmInfo) -> None:
    """Settings each fine alone that cannot run together."""
    if s.message == "bucketed" and info.engine != "sync_sgd":
        raise UserError(
            f"--message bucketed allreduces gradients while backward runs; {info.key} exchanges weights "
            "after its step: use --message packed or per_layer"
        )
    if s.bucket_mb is not None and s.message != "bucketed":
        raise UserError(f"--bucket-mb sizes the gradient buckets of --message bucketed, not --message {s.message}")
    if s.age_weight not in (None, "none") and s.elastic_epoch == "atomic":
        raise UserError(
            f"--age-weight {s.age_weight} weighs the add of the split elastic epoch by the staleness it records "
            "first; --elastic-epoch atomic adds inside its read: use --elastic-epoch split"
        )
    if s.worker_rule is None:
        return
    if s.overlap and (s.worker_rule != "elastic" or s.compress != "fp32"):
        raise UserError(
            f"--overlap needs --worker-rule elastic and --compress fp32: {info.key} with "
            f"{s.worker_rule} and {s.compress} sends a round's messages only after its inner step"
        )
    if s.outer_delay and (s.worker_rule != "reset" or s.exchange != "allreduce" or s.outer == "elastic" or s.overlap):
        raise UserError(
            f"--outer-delay {s.outer_delay} delays the outer step of a reset round whose every worker takes it "
            f"(--worker-rule reset, --exchange allreduce, --outer average, nesterov or slowmo, no --overlap): "
            f"{info.key} runs --worker-rule {s.worker_rule}, --exchange {s.exchange}, --outer {s.outer}"
        )
    if s.graph not in (None, "complete") and (
        s.exchange != "allreduce" or s.outer_delay or s.backend not in ENCODED_BACKENDS
    ):
        raise UserError(
            f"--graph {s.graph} sums each worker's neighbourhood point to point, every worker its own center: it "
            f"needs --exchange allreduce, --outer-delay 0 and an MPI backend; {info.key} runs --exchange "
            f"{s.exchange}, --outer-delay {s.outer_delay}, --backend {s.backend}"
        )
    if s.compress != "fp32" and s.exchange == "allreduce":
        raise UserError(
            f"--exchange allreduce sums W^i on the way; --compress {s.compress} sends encoded bytes, which the "
            "master must decode before it sums them: use --exchange rooted (the default with compression)"
        )
    if s.compress != "fp32" and s.backend not in ENCODED_BACKENDS:
        raise UserError(
            f"--compress {s.compress} sends encoded bytes over MPI; backend {s.backend} "
            "cannot carry them: use --backend mpi"
        )
