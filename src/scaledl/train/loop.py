"""The training loop, top to bottom: setup, data, model, algorithm, loop, results.

Run under MPI: `mpiexec -n N python -m mpi4py -m scaledl train ...`. Every rank
runs this file; `roles` says what each one does. Workers run the paper's
per-iteration loop (fetch a batch, forward/backward, exchange, update); the
master (worker 0 for collective algorithms, a dedicated rank 0 for the
master-based ones) also evaluates the center W and writes the results.

How a run ends: at its budget or target (exit 0); at a non-finite loss
(`diverged`, exit 0: the run's files are its evidence and must survive a
workflow manager, which deletes the outputs of a failed job); or at Ctrl-C,
SIGTERM or SIGUSR1 (Slurm's warning before a time limit or preemption:
`interrupted`): every rank stops at the next step boundary, writes a
checkpoint, the master writes what it has (metrics so far, the last
evaluated center, run.json), says so in one line, and every rank exits with
130. Rerunning the same command resumes from the newest checkpoint
(scaledl.train.checkpoint); checkpoints are also written on the schedule of
--checkpoint-every / --checkpoint-interval, so a killed job loses at most one
interval.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from mpi4py import MPI

from scaledl.train import checkpoint
from scaledl.algorithms import ALGORITHMS, check_options, load, rules
from scaledl.algorithms.base import Algorithm, AlgorithmContext, Codesign, Hyper, Request
from scaledl.comm.collectives import TORCH_DIST_BACKENDS, choose_backend, close_torch_dist, init_torch_dist
from scaledl.comm.flat import FlatParams
from scaledl.comm.roles import Roles, make_roles
from scaledl.comm.sentinel import Sentinel, claim
from scaledl.comm.watchdog import abort_job, set_job_token
from scaledl.config import TrainConfig
from scaledl.data.hdf5 import DatasetInfo, read_info
from scaledl.data.loader import Normalizer, ShardLoader
from scaledl.errors import Interrupted, UserError
from scaledl.train.evaluation import CenterEvaluator
from scaledl.models import build_model
from scaledl.train.monitor import DIVERGED, INTERRUPTED, Monitor, StopRule, StopSignals
from scaledl.train.replica_memory import ReplicaBudget, check_replicas
from scaledl.train.outputs import MetricsLog, host, save_model, versions, write_metrics, write_run_json, write_timeline
from scaledl.timing import PHASES, STEADY_KEYS, PhaseTimer


@dataclass
class TrainingRun:
    """Everything the loop needs: the rank's own parts (`build_local`), then the shared ones (`connect`)."""

    cfg: TrainConfig
    roles: Roles
    device: torch.device
    info: DatasetInfo
    model: torch.nn.Module | None
    params: FlatParams | None
    center_model: torch.nn.Module | None
    center: FlatParams | None
    loader: ShardLoader | None
    normalize: Normalizer
    timer: PhaseTimer
    codesign: Codesign
    algo: Algorithm | None = None     # set by `connect`
    monitor: Monitor | None = None    # set by `connect`, on the master
    steps: int = 0      # iterations this worker completed
    setup_s: float = 0.0
    replica_budget: ReplicaBudget | None = None
    sentinel: Sentinel | None = None
    slowdown: float = 1.0               # --straggler: this rank's forward/backward is stretched by it
    signals: StopSignals | None = None  # set by `train`: SIGINT/SIGTERM/SIGUSR1 received
    stop_reason: str | None = None      # every rank's copy of the master's, after `_finish`
    fingerprint: dict = field(default_factory=dict)         # the settings a checkpoint must share
    checkpoint_state: dict | None = None                    # this rank's state to resume from (`connect`)
    resumes: list = field(default_factory=list)             # master: every resume of this run, oldest first
    checkpoints_written: list = field(default_factory=list)  # master: this attempt's checkpoints

    def stop_requested(self) -> bool:
        """This rank was interrupted (its stop vote carries it to the others)."""
        return self.signals is not None and self.signals.requested

    @property
    def checkpoints_enabled(self) -> bool:
        return checkpoint_policy(self.cfg).enabled


def train(cfg: TrainConfig) -> TrainingRun:
    world = MPI.COMM_WORLD
    with StopSignals(on_second=_abort_now) as signals:   # Ctrl-C: stop at the next step boundary
        run = _agree_on_setup(world, cfg)
        run.signals = signals
        if run.monitor is not None:
            run.monitor.stop_requested = run.stop_requested
        token = _announce(run)
        run.setup_s = run.timer.restart()                # the clock covers training only
        run.algo.on_checkpoint = partial(checkpoint.save, run)
        try:
            run.algo.start()                             # W^i_0 = W_0 on every worker
            if run.checkpoint_state is not None:
                checkpoint.restore(run, run.checkpoint_state)   # or where the newest checkpoint left off
            elif run.roles.is_master:
                run.monitor.snapshot(step=0, epoch=0.0)  # W_0, evaluated off the clock
            if run.roles.is_worker:
                run_worker(run)
            else:
                run.algo.serve(run.monitor)
            with run.timer.phase("wait"):                # in-flight exchanges settle, MPI objects are freed
                run.algo.finish()
                close_torch_dist()
            _finish(run)
        except UserError as exc:
            if world.Get_size() == 1:
                raise
            # Raised by this rank alone, mid-run (a damaged block of data, say): the others wait in an
            # exchange, so the collective exit of a setup error would hang. One line, then the job ends.
            abort_job(str(exc), status=2)
        except BaseException:
            claim(token)  # this rank's traceback is the report; the sentinels of ranks killed next stay quiet
            raise
        if run.stop_reason == INTERRUPTED:
            MPI.Finalize()  # a clean, collective exit: on a non-zero status `-m mpi4py` would MPI_Abort
            raise Interrupted
    return run


def _abort_now() -> None:
    """A second Ctrl-C: the user will not wait for the step boundary."""
    abort_job("interrupted again: the job ends now, without writing results", status=Interrupted.status)


def run_worker(run: TrainingRun) -> None:
    """The paper's worker iteration, until the master says stop; counts steps in `run.steps`."""
    algo, loader, timer, monitor = run.algo, run.loader, run.timer, run.monitor
    step, stop = run.steps, False                    # a resumed run continues its count
    kill_at = _fault_step(run.roles.rank)
    while not stop and algo.begin_iteration():       # round-robin: wait for this worker's turn
        # fetch this worker's next mini-batch and copy it to the device
        with timer.phase("data"):
            images, labels = loader.next_batch()
        with timer.phase("h2d"):
            x, y = run.normalize(images, labels)
        # forward/backward at W^i: ΔW^i lands in params.grad
        with timer.phase("compute"):
            loss = forward_backward(run.model, run.params, x, y, run.cfg.weight_decay, run.slowdown)
        # exchange with the master or the other workers, then update (Eqs. 1-6)
        algo.worker_step()
        step += 1
        run.steps = step
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)     # fault injection (tests): this rank dies here
        # the master evaluates W on schedule and decides whether to stop or checkpoint
        request = Request.NONE
        if monitor is not None:
            monitor.record_loss(loss, len(labels))
            wants_stop = monitor.after_step(step, step * monitor.samples_per_step / run.info.n_train)
            request = (Request.STOP if wants_stop else Request.NONE) | \
                (Request.CHECKPOINT if monitor.wants_checkpoint(wants_stop) else Request.NONE)
        if run.stop_requested():                     # this rank's interrupt: checkpoint, then stop
            request |= Request.STOP | (Request.CHECKPOINT if run.checkpoints_enabled else Request.NONE)
        # The requests ride on the stop vote: collectives agree on them; a dedicated master decides alone.
        agreed = algo.end_iteration(loss, len(labels), request)
        timer.mark_step()
        if agreed & Request.CHECKPOINT:
            checkpoint.save(run)
        stop = bool(agreed & Request.STOP)
    if monitor is not None and stop:
        monitor.stopped_by_peer()


KILL_AT_VARIABLE = "SCALEDL_KILL_AT"


def _fault_step(rank: int) -> int | None:
    """The step at which this rank kills itself, from SCALEDL_KILL_AT=RANK:STEP (the checkpoint tests)."""
    who, _, at = os.environ.get(KILL_AT_VARIABLE, "").partition(":")
    return int(at) if who.isdigit() and int(who) == rank and at.isdigit() else None


def forward_backward(model, params: FlatParams, x, y, weight_decay: float, slowdown: float = 1.0) -> torch.Tensor:
    """ΔW^i into params.grad; a straggler (slowdown > 1) then sleeps (slowdown − 1) × the time it took."""
    t0 = time.perf_counter()
    params.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    if weight_decay:
        rules.weight_decay_(params.grad, params.data, weight_decay)
    if slowdown != 1.0:
        if params.data.is_cuda:
            torch.cuda.current_stream(params.data.device).synchronize()
        time.sleep((slowdown - 1.0) * (time.perf_counter() - t0))
    return loss.detach()


def straggler_factor(spec: str | None, rank: int, size: int) -> float:
    """This rank's slowdown from --straggler RANK:FACTOR[,RANK:FACTOR...] (1.0: not slowed)."""
    factors = {}
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        try:
            who, factor = item.split(":")
            factors[int(who)] = float(factor)
        except ValueError:
            raise UserError(f"--straggler {spec}: expected RANK:FACTOR[,RANK:FACTOR...] such as 1:3") from None
    for who, factor in factors.items():
        if not 0 <= who < size:
            raise UserError(f"--straggler {spec}: rank {who} is not in this job of {size} ranks (0..{size - 1})")
        if not factor >= 1.0:
            raise UserError(f"--straggler {spec}: a factor must be >= 1 (a rank cannot be made faster), got {factor:g}")
    return factors.get(rank, 1.0)


# --------------------------------------------------------------------- setup


def _announce(run: TrainingRun) -> str:
    """One line per rank, and a sentinel that names this rank should it die without a word."""
    r = run.roles
    role = f"worker {r.worker_index}" if r.role == "worker" else r.role
    who = f"rank {r.rank}/{r.size} ({role}, pid {os.getpid()} on {host()})"
    print(f"{who}: device {run.device}\n", end="", flush=True)  # one write: ranks share the stream
    token = r.world.bcast(uuid.uuid4().hex if r.is_master else None, root=r.master)
    set_job_token(token)
    run.sentinel = Sentinel(token, who)
    return token


def _agree_on_setup(world: MPI.Comm, cfg: TrainConfig) -> TrainingRun:
    """Build the run on every rank; if any rank hits a user error, all ranks stop with it.

    Two phases, each ending in an agreement: first what each rank builds alone
    (every check, data, models, loader), then what the ranks build together
    (process groups, RMA windows). A rank-local error (a missing GPU on one
    node, a shard smaller than a batch) thus stops the whole job with one
    message before any rank enters a collective its peers will never reach.
    """
    run = _agreed(world, build_local, world, cfg)
    return _agreed(world, connect, run)


def _agreed(world: MPI.Comm, build, *args):
    """build(*args) on every rank, then one allgather: a UserError on any rank is raised on all."""
    try:
        result, error = build(*args), None
    except UserError as exc:
        result, error = None, str(exc)
    errors = world.allgather(error)
    failed = [(rank, msg) for rank, msg in enumerate(errors) if msg is not None]
    if failed:
        rank, msg = failed[0]
        if all(m == msg for _, m in failed) and len(failed) == world.Get_size():
            raise UserError(msg)
        raise UserError(f"rank {rank}: {msg}")
    return result


def build_local(world: MPI.Comm, cfg: TrainConfig) -> TrainingRun:
    """This rank's parts of the run, and every check.

    Its only collective calls (make_roles' communicator splits) come after the
    checks that every rank answers alike; what may fail on one rank alone
    (device, data, shard, memory) comes after them.
    """
    info_alg = ALGORITHMS[cfg.algorithm]
    _check_budgets(cfg)
    _check_world(world, cfg.expect_ranks)
    # What Algorithm.__init__ checks first, here before anything is built: a setting this algorithm
    # does not use, set away from its default, stops the run before data, models or process groups.
    check_options(info_alg, cfg)
    roles = make_roles(world, dedicated_master=info_alg.needs_master, algorithm=cfg.algorithm)
    # The paper's master is a CPU: a dedicated master keeps W in host memory.
    device = torch.device("cpu") if roles.is_master and not roles.is_worker else pick_device(cfg.device, roles.local_rank)
    torch.set_num_threads(cfg.threads or default_threads())
    timer = PhaseTimer(device, sync=cfg.device_sync == "phase")
    slowdown = straggler_factor(cfg.straggler, roles.rank, world.Get_size())
    codesign = resolve_codesign(cfg, info_alg, device, roles)
    center_device = torch.device("cpu") if codesign.center_on == "host" else device
    info = read_info(cfg.data)

    # model: one seed for all ranks, so every replica starts from the same W_0
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, info.image_shape, info.classes).to(device) if roles.is_worker else None
    torch.manual_seed(cfg.seed)
    center_model = build_model(cfg.model, info.image_shape, info.classes).to(center_device) if roles.is_master else None
    params = FlatParams(model) if model is not None else None
    # A host center fed from GPU workers is page-locked, so host↔device copies of it run at full speed
    # (Sync EASGD1 vs 2 then differs only in where the weights live, not in pageable vs pinned memory).
    pin_center = center_device.type == "cpu" and device.type == "cuda" and torch.cuda.is_available()
    center = FlatParams(center_model, pin_memory=pin_center) if center_model is not None else None
    # per-rank randomness (dropout) differs across workers, repeatably
    torch.manual_seed(cfg.seed + 1 + roles.rank)

    loader, replica_budget = None, None
    if codesign.data == "replicated":
        # Chip partitioning: check that this node holds its replicas before anyone allocates them.
        parameters = sum(p.numel() for p in (model or center_model).parameters())
        replica_budget = check_replicas(roles.local_size, parameters, info.n_train * info.image_nbytes, cfg.fast_memory_gb)
    normalize = Normalizer(info.mean, info.std, device)

    if roles.is_worker:
        replicated = codesign.data == "replicated"
        loader = ShardLoader(
            cfg.data, shard=0 if replicated else roles.worker_index, num_shards=1 if replicated else roles.num_workers,
            batch_size=cfg.batch_size, seed=cfg.seed + (roles.worker_index if replicated else 0),
            pin_memory=device.type == "cuda",
        )

    return TrainingRun(cfg, roles, device, info, model, params, center_model, center, loader, normalize, timer,
                       codesign, replica_budget=replica_budget, slowdown=slowdown)


def connect(run: TrainingRun) -> TrainingRun:
    """The parts the ranks build together: the process group, the algorithm (RMA windows), the monitor."""
    cfg, roles, info = run.cfg, run.roles, run.info
    dist_group = None
    if run.codesign.backend in TORCH_DIST_BACKENDS:
        dist_group = init_torch_dist(run.codesign.backend, roles.world, roles.worker_ranks, run.device)
    info_alg = ALGORITHMS[cfg.algorithm]
    context = AlgorithmContext(info=info_alg, cfg=cfg, roles=roles, params=run.params, center=run.center,
                               hyper=Hyper.from_config(cfg, roles.num_workers, info_alg), timer=run.timer,
                               n_train=info.n_train, codesign=run.codesign, dist_group=dist_group)
    run.algo = load(cfg.algorithm)(context)
    # After the setup's last collective, before anything is written: a checkpoint that cannot be used
    # (other settings, a damaged file) stops the job here, its run folder untouched.
    run.fingerprint = checkpoint.fingerprint(cfg, roles.size)
    run.checkpoint_state = checkpoint.load(run)
    if roles.is_master:
        stop_rule = StopRule(cfg.max_steps, cfg.epochs, cfg.time_budget, cfg.target_accuracy)
        # Evaluated where the center lives (host memory for sync_easgd1 and dedicated masters).
        center_device = next(run.center_model.parameters()).device
        evaluator = CenterEvaluator(cfg.data, run.center_model, run.model,
                                    Normalizer(info.mean, info.std, center_device),
                                    eval_batch_size=cfg.eval_batch_size, bn_batch_size=cfg.batch_size)
        run.monitor = Monitor(stop_rule, cfg.eval_every, run.timer, evaluator,
                              samples_per_step=cfg.batch_size * roles.num_workers,
                              refresh_center=run.algo.refresh_center, metrics_log=_metrics_log(cfg.out_dir),
                              checkpoints=checkpoint_policy(cfg))
    return run


def checkpoint_policy(cfg: TrainConfig) -> checkpoint.CheckpointPolicy:
    return checkpoint.CheckpointPolicy(cfg.checkpoint_every, cfg.checkpoint_interval)


def _metrics_log(out_dir: Path) -> MetricsLog:
    """metrics.csv, grown as the run goes on; an unwritable --out-dir stops the run before it trains."""
    try:
        return MetricsLog(out_dir / "metrics.csv")
    except OSError as error:
        raise UserError(f"--out-dir {out_dir}: cannot write there ({error.strerror or error}); "
                        "choose a writable directory") from None


def _check_budgets(cfg: TrainConfig) -> None:
    if cfg.max_steps is None and cfg.epochs is None and cfg.time_budget is None:
        raise UserError("give at least one budget: --max-steps, --epochs or --time-budget (a target accuracy alone may never be reached)")
    if cfg.out_dir.exists() and not cfg.out_dir.is_dir():
        raise UserError(f"--out-dir {cfg.out_dir} exists and is not a directory")


def _check_world(world: MPI.Comm, expected: int | None) -> None:
    size = world.Get_size()
    if expected is not None and size != expected:
        raise UserError(
            f"MPI started this process in a world of {size} rank(s), but {expected} were requested: "
            "the launcher did not wire the ranks together (with srun, pick the PMI your MPI library "
            "speaks: --mpi=pmi2 for MPICH, --mpi=pmix for Open MPI)"
        )


def resolve_codesign(cfg: TrainConfig, info_alg, device: torch.device, roles: Roles) -> Codesign:
    """The codesign switches of this run: the preset's, the command line's, or the defaults.

    A preset (sync_easgd1/2/3) fixes its switches; contradicting one is an error
    (`info_alg.preset_of` names the base algorithm that chooses them freely).
    Only the switches the algorithm accepts (`info_alg.options`) are taken from
    `cfg`; any other one set away from its default has been refused already
    (`scaledl.algorithms.check_options`, run by build_local and Algorithm.__init__).
    """
    preset, options = info_alg.preset, info_alg.options
    for key in ("center_on", "overlap"):
        given = getattr(cfg, key)
        if given is not None and key in preset and given != preset[key]:
            flag = f"--{key.replace('_', '-')}"
            switch = (flag if given else f"--no-{flag[2:]}") if isinstance(given, bool) else f"{flag} {given}"
            raise UserError(f"{switch} contradicts {cfg.algorithm}, which fixes "
                            f"{key} = {preset[key]}; use --algorithm {info_alg.preset_of} to choose it freely")
    center_on = (cfg.center_on if "center_on" in options else None) or preset.get("center_on", "device")
    # overlap: the command line's, else the preset's (sync_easgd3), else the algorithm's default
    # (`info_alg.defaults`: on for the async EASGD family, whose exchange needs only W^i_t), else off
    # (sync_easgd unless asked, as the ladder's level 2 is).
    overlap = cfg.overlap if "overlap" in options and cfg.overlap is not None else \
        preset.get("overlap", info_alg.defaults.get("overlap", False))
    message = cfg.message if "message" in options else "packed"   # master-based exchanges: one message each
    if "backend" in options:   # collectives: the backend that carries them
        gpu_per_rank = device.type == "cuda" and roles.local_size <= torch.cuda.device_count()
        # A center in host memory means host tensors on the wire, which NCCL refuses.
        backend = choose_backend(cfg.backend, device, gpu_per_rank, host_buffers=center_on == "host")
    else:                      # a dedicated master: MPI point-to-point and one-sided on host buffers
        backend = "mpi"
    return Codesign(message=message, center_on=center_on, overlap=overlap, backend=backend,
                    data=preset.get("data", "sharded"))


def pick_device(choice: str, local_rank: int) -> torch.device:
    """`auto`: this rank's GPU (local rank modulo GPUs, so ranks may share one) or the CPU."""
    has_cuda = torch.cuda.is_available()
    if choice == "cuda" and not has_cuda:
        raise UserError("--device cuda was asked for but no CUDA device is visible on this node; use --device cpu or auto")
    if choice == "cpu" or (choice == "auto" and not has_cuda):
        return torch.device("cpu")
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def default_threads() -> int:
    """Threads per rank from the allocation: Slurm's cpus-per-task, else OMP_NUM_THREADS, else 1."""
    for var in ("SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


# ------------------------------------------------------------------- results


def _finish(run: TrainingRun) -> None:
    """Final evaluation, then gather per-rank facts and write the outputs (master only)."""
    roles, timer = run.roles, run.timer
    if roles.is_master:
        run.monitor.finish()
    role = roles.role
    # This rank's clock stops here: the wait for the master's final evaluation (the bcast below) is not its time.
    rank_facts = {"rank": roles.rank, "host": host(), "device": str(run.device), "role": role,
                  "setup_s": run.setup_s, "slowdown": run.slowdown, **timer.breakdown()}
    run.stop_reason = roles.world.bcast(run.monitor.stop_reason if roles.is_master else None, root=roles.master)
    gathered = roles.world.gather(rank_facts, root=roles.master)
    timelines = roles.world.gather({"rank": roles.rank, "role": role, **timer.timeline()}, root=roles.master)
    algo_report = roles.world.gather(run.algo.report(), root=roles.master)
    if roles.is_master:
        _write_outputs(run, gathered, timelines, algo_report)


def _workers_mean(per_rank: list[dict]) -> dict[str, float]:
    """Each timing field averaged over the ranks that compute gradients."""
    workers = [r for r in per_rank if "worker" in r["role"]]
    keys = [k for k, v in workers[0].items() if isinstance(v, float)]
    return {k: sum(r[k] for r in workers) / len(workers) for k in keys if all(r[k] is not None for r in workers)}


def _write_outputs(run: TrainingRun, per_rank: list[dict], timelines: list[dict], algo_reports: list[dict]) -> None:
    cfg, roles, monitor = run.cfg, run.roles, run.monitor
    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
    save_model(out / "model.pt", monitor.evaluated_state())   # the center of the final reported accuracy
    write_metrics(out / "metrics.csv", monitor.rows)
    write_timeline(out / "timeline.h5", timelines, PHASES)
    info_alg = ALGORITHMS[cfg.algorithm]
    hosts = sorted({r["host"] for r in per_rank})
    params = sum(p.numel() for p in run.center_model.parameters())
    master = per_rank[roles.master]
    workers_mean = _workers_mean(per_rank)
    wall = monitor.final_wall
    # The registry's claim holds for this run only on CPU, or on CUDA with deterministic
    # kernels enforced, and over a backend that reduces in a fixed order (MPI's).
    deterministic, deterministic_reason = info_alg.deterministic_in(
        [r["device"] for r in per_rank], run.codesign.backend, torch.are_deterministic_algorithms_enabled())
    record = {
        "scaledl_version": versions()["scaledl"],
        "arguments": {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        "platform": cfg.platform,
        "algorithm": {
            "key": info_alg.key, "paper_name": info_alg.paper_name, "module": info_alg.module,
            "needs_master": info_alg.needs_master, "deterministic": deterministic,
            "deterministic_reason": deterministic_reason, "preset": dict(info_alg.preset),
        },
        "hyper": {
            "lr": run.algo.hyper.lr, "rho": run.algo.hyper.rho, "alpha": run.algo.hyper.alpha,
            "beta": cfg.beta if cfg.rho is None else None, "momentum": run.algo.hyper.momentum,
            "weight_decay": cfg.weight_decay, "batch_size": cfg.batch_size, "tau": run.algo.hyper.tau,
            "momentum_at": cfg.momentum_at, "nesterov": cfg.nesterov,
        },
        "codesign": asdict(run.codesign),
        "replica_memory": run.replica_budget.as_dict() if run.replica_budget else None,
        "world": {
            "size": roles.size, "workers": roles.num_workers, "dedicated_master": roles.dedicated_master,
            "ranks_per_node": roles.local_size, "nodes": len(hosts), "hosts": hosts,
            "threads_per_rank": torch.get_num_threads(),
        },
        "devices": [r["device"] for r in per_rank],
        "model": {"name": cfg.model, "parameters": params, "bytes": params * next(run.center_model.parameters()).element_size()},
        "data": {
            "path": str(cfg.data), "dataset": run.info.dataset, "classes": run.info.classes,
            "n_train": run.info.n_train, "n_test": run.info.n_test, "image_shape": list(run.info.image_shape),
            "source_sha256": run.info.source_sha256,
        },
        "stop": {"reason": monitor.stop_reason, "steps": monitor.step, "epochs": monitor.epoch, "wall_s": wall,
                 "train_s": monitor.stop_train_s, "nonfinite_loss_step": monitor.diverged_at},
        # The master rank's seconds per phase at top level; every rank's, and the workers' mean, below.
        "phases": {**{k: v for k, v in master.items() if k.endswith("_s") or k == "comm_share"},
                   "workers_mean": workers_mean, "per_rank": per_rank},
        # One vocabulary of time (docs/time.md, timing.steady_state): per-step means over each worker's
        # steps after the warm-up, averaged over the workers. comm_share = transfer / step, the paper's.
        "time": {"warmup_steps": min(r["warmup_steps"] for r in per_rank if "worker" in r["role"]),
                 **{k: workers_mean.get(k) for k in STEADY_KEYS}},
        "seconds_per_step": workers_mean.get("seconds_per_step"),
        "comm_share": workers_mean.get("comm_share"),
        "exposed_share": workers_mean.get("exposed_share"),
        "final": {"test_accuracy": monitor.last_accuracy, "test_loss": monitor.last_loss},
        "target_accuracy": cfg.target_accuracy,
        # The training clock of the first snapshot at or above the target; snapshots every eval_every steps.
        "time_to_target_s": monitor.time_to_target,
        "evaluation": {"every_steps": cfg.eval_every, "target_step": monitor.target_step,
                       **monitor.evaluator.report()},
        "algorithm_report": [r for r in algo_reports if r],
        # Checkpoints of this attempt, and every resume of the run (clocks continue across them:
        # the steps lost between a checkpoint and a kill are redone, not counted).
        "checkpoints": {"every_steps": cfg.checkpoint_every, "interval_s": cfg.checkpoint_interval,
                        "written": run.checkpoints_written, "resumes": run.resumes,
                        "kept": monitor.stop_reason == INTERRUPTED and bool(run.checkpoints_written)},
        "versions": versions(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_run_json(out / "run.json", record)
    if monitor.stop_reason == INTERRUPTED:
        saved = (f"checkpoint saved in {checkpoint.folder(out)}: rerun the same command to resume; "
                 if run.checkpoints_written else "")
        print(f"scaledl train: interrupted at step {monitor.step}; {saved}partial results in {out}",
              file=sys.stderr, flush=True)
    else:
        checkpoint.remove_all(out)   # a finished run needs none (a forced rerun then starts over)
        print(closing_line(monitor, cfg, out), end="", flush=True)


def closing_line(monitor, cfg: TrainConfig, out: Path) -> str:
    """What a user wants to know when a run ends: why it stopped, how well and how fast, where its files are."""
    best = max((row["test_accuracy"] for row in monitor.rows), default=None)
    target = ""
    if cfg.target_accuracy is not None:
        target = (f"; target {cfg.target_accuracy:g} reached at {monitor.time_to_target:.2f} s of training "
                  f"(step {monitor.target_step})" if monitor.time_to_target is not None
                  else f"; target {cfg.target_accuracy:g} not reached")
    accuracy = "" if best is None else f"; test accuracy {monitor.last_accuracy:.4f} (best {best:.4f})"
    if monitor.stop_reason == DIVERGED:
        target += f"; the loss was not finite at step {monitor.diverged_at}: try a smaller --lr"
    return (f"done: stopped by {monitor.stop_reason} after {monitor.step} steps, {monitor.stop_train_s:.2f} s of "
            f"training{accuracy}{target}; run.json, metrics.csv, timeline.h5 and model.pt in {out}\n")
