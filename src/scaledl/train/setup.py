"""Building the run on every rank: each rank's own parts, then the parts the ranks build together.

Two phases, each ending in an agreement (`agree_on_setup`): first what each
rank builds alone (every check, the settings, data, models, loader), then
what the ranks build together (the checkpoint to resume from, process groups,
RMA windows). A rank-local error (a missing GPU on one node, a shard smaller
than a batch) thus stops the whole job with one message before any rank
enters a collective its peers will never reach; and a refusal leaves no
window for MPI's teardown to complain about after its one line.
"""

from __future__ import annotations

import copy
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from scaledl.algorithms import ALGORITHMS, engine_class
from scaledl.algorithms.base import Algorithm, AlgorithmContext
from scaledl.algorithms.settings import Settings, resolve
from scaledl.comm import transport
from scaledl.comm.collectives import TORCH_DIST_BACKENDS, choose_backend, close_torch_dist, init_torch_dist
from scaledl.comm.flat import FlatParams
from scaledl.comm.roles import Roles, make_roles
from scaledl.comm.sentinel import Sentinel
from scaledl.comm.timing import PhaseTimer
from scaledl.comm.transport import MPI
from scaledl.comm.watchdog import set_job_token, set_rank_names
from scaledl.config import TrainConfig
from scaledl.data.hdf5 import DatasetInfo, read_info
from scaledl.data.loader import Normalizer, ShardLoader, held_out
from scaledl.errors import UserError
from scaledl.models import build_model, model_source
from scaledl.train import checkpoint
from scaledl.train.evaluation import CenterEvaluator
from scaledl.train.monitor import Monitor, StopRule, evaluation_pause
from scaledl.train.outputs import MetricsLog
from scaledl.train.pace import Pace
from scaledl.train.replica_memory import ReplicaBudget, check_replicas


@dataclass
class TrainingRun:
    """Everything the loop needs: the rank's own parts (`build_local`), then the shared ones (`connect`)."""

    cfg: TrainConfig
    roles: Roles
    device: torch.device
    info: DatasetInfo
    settings: Settings
    model: torch.nn.Module | None
    params: FlatParams | None
    center_model: torch.nn.Module | None
    center: FlatParams | None
    loader: ShardLoader | None
    normalize: Normalizer
    timer: PhaseTimer
    replica_budget: ReplicaBudget | None = None
    slowdown: float = 1.0  # --straggler: this rank's forward/backward is stretched by it
    algo: Algorithm | None = None  # set by `connect`
    monitor: Monitor | None = None  # set by `connect`, on the master
    steps: int = 0  # iterations this worker completed
    setup_s: float = 0.0
    sentinel: Sentinel | None = None
    stop_reason: str | None = None  # every rank's copy of the master's, when the run ends
    fingerprint: dict = field(default_factory=dict)  # the settings a checkpoint must share
    checkpoint_state: dict | None = None  # this rank's state to resume from (`connect`)
    resumes: list = field(default_factory=list)  # master: every resume of this run, oldest first
    checkpoints_written: list = field(default_factory=list)  # master: this attempt's checkpoints
    code: dict = field(default_factory=dict)  # master: this attempt's code (provenance.code_state)

    @property
    def validation_rows(self) -> int:
        """The train split's tail held out for validation (--validation-fraction), never trained on."""
        return held_out(self.info.n_train, self.cfg.validation_fraction)

    @property
    def n_train(self) -> int:
        """The images trained on."""
        return self.info.n_train - self.validation_rows


def agree_on_setup(world: MPI.Comm, cfg: TrainConfig) -> TrainingRun:
    """Build the run on every rank; if any rank hits a user error, all ranks stop with it."""
    run = agreed(world, build_local, world, cfg)
    try:
        return agreed(world, connect, run)
    except UserError:
        release(run)
        raise


def release(run: TrainingRun) -> None:
    """Free, on every rank alike, what `connect` built before a refusal (the master's unwritable --out-dir
    comes after the windows): a window left to MPI_Finalize makes UCX print a page of warnings after
    the refusal's one line. Every other refusal comes before any window or process group exists."""
    if run.algo is not None:
        run.algo.finish()  # nothing is in flight before the start: this only frees the MPI objects
        run.algo = None
    close_torch_dist()


def agreed(world: MPI.Comm, build, *args):
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
    check_budgets(cfg)
    check_world(world, cfg.expect_ranks)
    model_source(cfg.model, cfg.model_from)  # an unknown name, or a plug-in not written module:function
    roles = make_roles(world, dedicated_master=info_alg.needs_master, algorithm=cfg.algorithm)
    # The paper's master is a CPU: a dedicated master keeps W in host memory.
    device = (
        torch.device("cpu") if roles.is_master and not roles.is_worker else pick_device(cfg.device, roles.local_rank)
    )
    gpu_per_rank = device.type == "cuda" and roles.local_size <= torch.cuda.device_count()

    simulated_gpu = transport.current().device_behind_pcie()  # a simulated rank on a GPU behind PCIe

    def backend_for(requested: str, host_buffers: bool) -> str:
        return choose_backend(requested, device, gpu_per_rank, host_buffers=host_buffers, simulated_gpu=simulated_gpu)

    # First, before anything is built: a setting this algorithm does not use, or one that
    # contradicts its preset, stops the run here (every rank alike).
    settings = resolve(cfg, info_alg, workers=roles.num_workers, choose_backend=backend_for)
    torch.set_num_threads(cfg.threads or default_threads())
    timer = PhaseTimer(device, sync=cfg.device_sync == "phase", contiguous=True)  # every second in a phase
    slowdown = straggler_factor(cfg.straggler, roles.rank, world.Get_size())
    center_device = torch.device("cpu") if settings.center_on == "host" else device
    info = read_info(cfg.data)

    # model: one seed for all ranks, so every replica starts from the same W_0
    shape, classes = info.image_shape, info.classes
    model = initial_model(cfg, shape, classes).to(device) if roles.is_worker else None
    center_model = initial_model(cfg, shape, classes).to(center_device) if roles.is_master else None
    params = FlatParams(model) if model is not None else None
    # A host center fed from GPU workers is page-locked, so host↔device copies of it run at full speed
    # (Sync EASGD1 vs 2 then differs only in where the weights live, not in pageable vs pinned memory).
    pin_center = center_device.type == "cpu" and device.type == "cuda" and torch.cuda.is_available()
    center = FlatParams(center_model, pin_memory=pin_center) if center_model is not None else None
    # per-rank randomness (dropout) differs across workers, repeatably
    torch.manual_seed(cfg.seed + 1 + roles.rank)

    replicated = settings.data == "replicated"
    replica_budget = None
    if replicated:
        # Chip partitioning: check that this node holds its replicas before anyone allocates them.
        parameters = sum(p.numel() for p in (model or center_model).parameters())
        replica_budget = check_replicas(
            roles.local_size, parameters, info.n_train * info.image_nbytes, settings.fast_memory_gb
        )
    loader = None
    if roles.is_worker:
        loader = ShardLoader(
            cfg.data,
            shard=0 if replicated else roles.worker_index,
            num_shards=1 if replicated else roles.num_workers,
            batch_size=cfg.batch_size,
            seed=cfg.seed + (roles.worker_index if replicated else 0),
            held_out_rows=held_out(info.n_train, cfg.validation_fraction),
            pin_memory=device.type == "cuda",
            read_images=not cfg.time_only,  # time-only prices the batches' shapes; their pixels are never read
        )
    return TrainingRun(
        cfg,
        roles,
        device,
        info,
        settings,
        model,
        params,
        center_model,
        center,
        loader,
        Normalizer(info.mean, info.std, device),
        timer,
        replica_budget=replica_budget,
        slowdown=slowdown,
    )


def connect(run: TrainingRun) -> TrainingRun:
    """The parts the ranks build together: the checkpoint to resume from, the process group, the algorithm
    (RMA windows), the monitor."""
    cfg, roles, info = run.cfg, run.roles, run.info
    # First, before any process group or window exists: a checkpoint that cannot be used (other settings,
    # data or code, a damaged file) stops the job here in one line, with nothing to free and its run
    # folder untouched.
    run.checkpoint_state = checkpoint.load(run)
    dist_group = None
    if run.settings.backend in TORCH_DIST_BACKENDS:
        dist_group = init_torch_dist(run.settings.backend, roles.world, roles.worker_ranks, run.device)
    context = AlgorithmContext(
        info=ALGORITHMS[cfg.algorithm],
        settings=run.settings,
        roles=roles,
        params=run.params,
        center=run.center,
        timer=run.timer,
        n_train=run.n_train,
        dist_group=dist_group,
        worker_timeout=cfg.worker_timeout,
        save_checkpoint=lambda: checkpoint.save(run),
        pause_for_evaluation=lambda: evaluation_pause(run),
    )
    run.algo = engine_class(cfg.algorithm)(context)
    if roles.is_master:
        if cfg.restart:
            checkpoint.remove_all(cfg.out_dir)  # once nothing can refuse the run: it starts over
        stop_rule = StopRule(cfg.max_steps, cfg.epochs, cfg.time_budget, cfg.target_accuracy, cfg.later_target_accuracy)
        # Evaluated where the center lives (host memory for sync_easgd1 and dedicated masters).
        center_device = next(run.center_model.parameters()).device
        # The test split, or with --validation-fraction the train split's held-out tail (the test split unread).
        held = run.validation_rows
        evaluator = CenterEvaluator(
            cfg.data,
            run.center_model,
            run.model,
            Normalizer(info.mean, info.std, center_device),
            eval_batch_size=cfg.eval_batch_size,
            bn_batch_size=cfg.batch_size,
            split="train" if held else "test",
            first=info.n_train - held if held else 0,
        )
        run.monitor = Monitor(
            stop_rule,
            cfg.eval_every,
            run.timer,
            evaluator,
            samples_per_step=cfg.batch_size * roles.num_workers,
            refresh_center=run.algo.refresh_center,
            metrics_log=metrics_log(cfg.out_dir),
            checkpoints=checkpoint.policy(cfg),
            outpaced=Pace(cfg.out_dir, cfg.tune_seeds, asdict(cfg)).passed if cfg.tune_seeds else None,
        )
    return run


def initial_model(cfg: TrainConfig, shape, classes: int) -> torch.nn.Module:
    """W_0: the model built from the run's seed. In a simulation every rank lives in this process: the first
    build is kept and each later rank gets a copy of it (the same tensors, bit for bit) instead of paying the
    initialisation again, which at hundreds of simulated ranks is most of their setup."""
    torch.manual_seed(cfg.seed)
    models = transport.current().models()
    if models is None:
        return build_model(cfg.model, shape, classes, cfg.model_from)
    key = (cfg.model, cfg.model_from, tuple(shape), classes, cfg.seed)
    if key not in models:
        models[key] = build_model(cfg.model, shape, classes, cfg.model_from)
    return copy.deepcopy(models[key])


def metrics_log(out_dir: Path) -> MetricsLog:
    """metrics.csv, grown as the run goes on; an unwritable --out-dir stops the run before it trains."""
    try:
        return MetricsLog(out_dir / "metrics.csv")
    except OSError as error:
        raise UserError(
            f"--out-dir {out_dir}: cannot write there ({error.strerror or error}); choose a writable directory"
        ) from None


def check_budgets(cfg: TrainConfig) -> None:
    if cfg.max_steps is None and cfg.epochs is None and cfg.time_budget is None:
        raise UserError(
            "give at least one budget: --max-steps, --epochs or --time-budget "
            "(a target accuracy alone may never be reached)"
        )
    if cfg.out_dir.exists() and not cfg.out_dir.is_dir():
        raise UserError(f"--out-dir {cfg.out_dir} exists and is not a directory")
    later, first = cfg.later_target_accuracy, cfg.target_accuracy
    if later is not None and (first is None or later <= first):
        raise UserError(
            f"--later-target-accuracy {later:g}: a later target needs --target-accuracy below it "
            f"(got {'none' if first is None else f'{first:g}'})"
        )


def check_world(world: MPI.Comm, expected: int | None) -> None:
    size = world.Get_size()
    if expected is not None and size != expected:
        raise UserError(
            f"MPI started this process in a world of {size} rank(s), but {expected} were requested: "
            "the launcher did not wire the ranks together (with srun, pick the PMI your MPI library "
            "speaks: --mpi=pmi2 for MPICH, --mpi=pmix for Open MPI)"
        )


def pick_device(choice: str, local_rank: int) -> torch.device:
    """`auto`: this rank's GPU (local rank modulo GPUs, so ranks may share one) or the CPU."""
    has_cuda = torch.cuda.is_available()
    if choice == "cuda" and not has_cuda:
        raise UserError(
            "--device cuda was asked for but no CUDA device is visible on this node; use --device cpu or auto"
        )
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


def announce(run: TrainingRun) -> str:
    """One line per rank, and a sentinel that names this rank should it die without a word; the job's token."""
    r = run.roles
    role = f"worker {r.worker_index}" if r.role == "worker" else r.role
    # a simulated rank is an actor of one process: no pid of its own, and none in what the ranks exchange (the
    # allgather below is priced by its bytes, so a pid's digits would move the simulated clock between runs)
    pid = f", pid {os.getpid()}" if transport.current().guards_processes else ""
    who = f"rank {r.rank}/{r.size} ({role}{pid} on {transport.current().host_name()})"
    print(f"{who}: device {run.device}\n", end="", flush=True)  # one write: ranks share the stream
    token = r.world.bcast(uuid.uuid4().hex if r.is_master else None, root=r.master)
    set_rank_names(r.world.allgather(who))
    if transport.current().guards_processes:  # a simulated rank is an actor, not a process that can die unseen
        set_job_token(token)
        run.sentinel = Sentinel(token, who)
    return token
