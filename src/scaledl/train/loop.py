"""The training run, top to bottom: setup, the paper's loop, results.

Run under MPI: `mpiexec -n N python -m mpi4py -m scaledl train ...`. Every rank
runs this file; `roles` says what each one does. Workers run the paper's
per-iteration loop (fetch a batch, forward/backward, exchange, update); the
master (worker 0 for collective algorithms, a dedicated rank 0 for the
master-based ones) also evaluates the center W and writes the results. Every
loop crosses the one step boundary (scaledl.algorithms.boundary) once a step.

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

from functools import partial

import torch
import torch.nn.functional as F

from scaledl.algorithms import rules
from scaledl.algorithms.boundary import StepBoundary, fault_step
from scaledl.comm import transport
from scaledl.comm.collectives import close_torch_dist
from scaledl.comm.flat import FlatParams
from scaledl.comm.sentinel import claim
from scaledl.comm.transport import MPI
from scaledl.comm.watchdog import abort_job
from scaledl.config import TrainConfig
from scaledl.errors import Interrupted, UserError
from scaledl.train import checkpoint, results
from scaledl.train.monitor import INTERRUPTED, StopSignals, evaluation_pause
from scaledl.train.setup import TrainingRun, agree_on_setup, announce


def train(cfg: TrainConfig, world: MPI.Comm | None = None) -> TrainingRun:
    """Train on `world` (MPI.COMM_WORLD by default: the job's ranks; a sub-communicator runs a job on some
    of them, e.g. several small jobs side by side in one MPI world)."""
    world = world if world is not None else MPI.COMM_WORLD
    with StopSignals(on_second=_abort_now) as signals:  # Ctrl-C: stop at the next step boundary
        run = agree_on_setup(world, cfg)
        token = announce(run)
        boundary = StepBoundary(
            run.monitor,
            interrupted=lambda: signals.requested,
            checkpoints_enabled=checkpoint.policy(cfg).enabled,
            save_checkpoint=partial(checkpoint.save, run),
            evaluate=partial(evaluation_pause, run),
            timer=run.timer,
            kill_at=fault_step(run.roles.rank),
        )
        run.setup_s = run.timer.restart()  # the clock covers training only
        try:
            run.algo.start()  # W^i_0 = W_0 on every worker
            if run.checkpoint_state is not None:
                checkpoint.restore(run, run.checkpoint_state)  # or where the newest checkpoint left off
            else:
                evaluation_pause(run)  # W_0, evaluated off every clock
            if run.roles.is_worker:
                run_worker(run, boundary)
            else:
                run.algo.serve(boundary)
            with run.timer.phase("wait"):  # in-flight exchanges settle, MPI objects are freed
                run.algo.finish()
                close_torch_dist()
            results.finish(run)
        except UserError as exc:
            if world.Get_size() == 1:
                raise
            # Raised by this rank alone, mid-run (a damaged block of data, say): the others wait in an
            # exchange, so the collective exit of a setup error would hang. One line, then the job ends.
            abort_job(str(exc), status=2)
        except BaseException:
            if transport.current().guards_processes:
                claim(token)  # this rank's traceback is the report; the sentinels of ranks killed next stay quiet
            raise
        if run.stop_reason == INTERRUPTED:
            MPI.Finalize()  # a clean, collective exit: on a non-zero status `-m mpi4py` would MPI_Abort
            raise Interrupted
    return run


def _abort_now() -> None:
    """A second Ctrl-C: the user will not wait for the step boundary."""
    abort_job("interrupted again: the job ends now, without writing results", status=Interrupted.status)


def run_worker(run: TrainingRun, boundary: StepBoundary) -> None:
    """The paper's worker iteration, until the ranks agree to stop; counts steps in `run.steps`."""
    algo, loader, timer, monitor = run.algo, run.loader, run.timer, run.monitor
    samples_per_step = run.cfg.batch_size * run.roles.num_workers
    step, stop = run.steps, False  # a resumed run continues its count
    weight_decay = 0.0 if algo.decays_gradient else run.cfg.weight_decay
    while not stop and algo.begin_iteration():  # round-robin: wait for this worker's turn
        # fetch this worker's next mini-batch and copy it to the device
        with timer.phase("data"):
            images, labels = loader.next_batch()
        with timer.phase("h2d"):
            x, y = run.normalize(images, labels)
        # forward/backward at W^i: ΔW^i lands in params.grad
        with timer.phase("compute") as priced_before:
            if priced_before:  # (a time-only simulation: paid as priced, nothing to compute)
                loss = torch.zeros(())
            else:
                loss = forward_backward(run.model, run.params, x, y, weight_decay, run.slowdown)
        # exchange with the master or the other workers, then update (Eqs. 1-6)
        algo.worker_step()
        step += 1
        run.steps = step
        # the master evaluates W on schedule; the ranks agree whether to checkpoint or stop
        if monitor is not None:
            monitor.record_loss(loss, len(labels))
        stop = boundary.cross(
            step, step * samples_per_step / run.n_train, agree=partial(algo.end_iteration, loss, len(labels))
        )


def forward_backward(model, params: FlatParams, x, y, weight_decay: float, slowdown: float = 1.0) -> torch.Tensor:
    """ΔW^i into params.grad; a straggler (slowdown > 1) then sleeps (slowdown − 1) × the time it took."""
    t0 = transport.clock()
    params.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    if weight_decay:
        for w, grad in params.pairs():
            rules.weight_decay_(grad, w, weight_decay)
    if slowdown != 1.0:
        if params.data.is_cuda:
            torch.cuda.current_stream(params.data.device).synchronize()
        transport.sleep((slowdown - 1.0) * (transport.clock() - t0))
    return loss.detach()
