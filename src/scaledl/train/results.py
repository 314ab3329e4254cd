"""What a run reports when it ends: every rank's facts gathered, run.json's record filled, the closing line.

The files themselves are written by scaledl.train.outputs, and run.json by
scaledl.run_record, which declares its blocks (`RunRecord`); run.json last,
so its presence means the run ended and the other files belong to it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from scaledl.algorithms.staleness import staleness_summary
from scaledl.comm import transport
from scaledl.comm.timing import PHASES, STEADY_KEYS
from scaledl.models import model_source
from scaledl.run_record import (
    OUTPACED,
    RUN_JSON,
    AlgorithmBlock,
    CheckpointsBlock,
    DataBlock,
    EvaluationBlock,
    FinalBlock,
    ModelBlock,
    PhasesBlock,
    RunRecord,
    StopBlock,
    TimeBlock,
    WorldBlock,
    write_run_json,
)
from scaledl.train import checkpoint, provenance
from scaledl.train.monitor import DIVERGED, INTERRUPTED
from scaledl.train.outputs import host, save_model, versions, write_metrics, write_timeline


def finish(run) -> None:
    """Final evaluation, then gather per-rank facts and write the outputs (master only)."""
    roles, timer = run.roles, run.timer
    if roles.is_master:
        run.monitor.finish()
    # This rank's clock stops at the end of its last phase: the wait for the master's final evaluation (the
    # bcast below) and the bookkeeping after it are not its time.
    timer.stop()
    breakdown = timer.breakdown()
    role = roles.role
    rank_facts = {
        "rank": roles.rank,
        "host": host(),
        "device": str(run.device),
        "role": role,
        "setup_s": run.setup_s,
        "slowdown": run.slowdown,
        **breakdown,
    }
    run.stop_reason = roles.world.bcast(run.monitor.stop_reason if roles.is_master else None, root=roles.master)
    gathered = roles.world.gather(rank_facts, root=roles.master)
    timelines = roles.world.gather({"rank": roles.rank, "role": role, **timer.timeline()}, root=roles.master)
    algo_reports = roles.world.gather(run.algo.report(), root=roles.master)
    if roles.is_master:
        write_outputs(run, gathered, timelines, algo_reports)


def write_outputs(run, per_rank: list[dict], timelines: list[dict], algo_reports: list[dict]) -> None:
    out, monitor = run.cfg.out_dir, run.monitor
    out.mkdir(parents=True, exist_ok=True)
    save_model(out / "model.pt", monitor.evaluated_state())  # the center of the final reported accuracy
    write_metrics(out / "metrics.csv", monitor.rows)
    write_timeline(out / "timeline.h5", timelines, PHASES)
    write_run_json(out / RUN_JSON, record_of(run, per_rank, algo_reports))
    if monitor.stop_reason == INTERRUPTED:
        saved = (
            f"checkpoint saved in {checkpoint.folder(out)}: rerun the same command to resume; "
            if run.checkpoints_written
            else ""
        )
        print(
            f"scaledl train: interrupted at step {monitor.step}; {saved}partial results in {out}",
            file=sys.stderr,
            flush=True,
        )
    else:
        checkpoint.remove_all(out)  # a finished run needs none (a forced rerun then starts over)
        print(closing_line(monitor, run.cfg, out), end="", flush=True)


def record_of(run, per_rank: list[dict], algo_reports: list[dict]) -> RunRecord:
    """run.json: what ran (arguments, algorithm, the settings it used, world, model, data) and what came out."""
    cfg, monitor = run.cfg, run.monitor
    workers_mean = _workers_mean(per_rank)
    settings = run.settings.record()
    return RunRecord(
        scaledl_version=versions()["scaledl"],
        arguments={k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items()},
        platform=cfg.platform,
        transport=transport.current().describe(),  # simulated runs: the platform, and every time is simulated
        algorithm=_algorithm_block(run, per_rank),
        hyper=settings["hyper"],
        codesign=settings["codesign"],
        replica_memory=run.replica_budget.as_dict() if run.replica_budget else None,
        world=_world_block(run, per_rank),
        devices=[r["device"] for r in per_rank],
        model=_model_block(run),
        data=_data_block(run),
        stop=_stop_block(monitor),
        phases=_phases_block(per_rank[run.roles.master], workers_mean, per_rank),
        # One vocabulary of time (docs/time.md, timing.steady_state): per-step means over each worker's
        # steps after the warm-up, averaged over the workers. comm_share = transfer / step, the paper's.
        time=TimeBlock(
            warmup_steps=min(r["warmup_steps"] for r in per_rank if "worker" in r["role"]),
            **{k: workers_mean.get(k) for k in STEADY_KEYS},
        ),
        seconds_per_step=workers_mean.get("seconds_per_step"),
        comm_share=workers_mean.get("comm_share"),
        exposed_share=workers_mean.get("exposed_share"),
        # a time-only simulation computed nothing: its losses are not results
        final=FinalBlock(test_accuracy=None, test_loss=None)
        if cfg.time_only
        else FinalBlock(test_accuracy=monitor.last_accuracy, test_loss=monitor.last_loss),
        target_accuracy=cfg.target_accuracy,
        # The crossing of the target, interpolated between the evaluations around it (monitor.crossing).
        time_to_target_s=monitor.time_to_target,
        steps_to_target=monitor.steps_to_target,
        later_target=_later_target_block(cfg, monitor),
        evaluation=EvaluationBlock(
            every_steps=cfg.eval_every, target_step=monitor.target_step, **monitor.evaluator.report()
        ),
        algorithm_report=[r for r in algo_reports if r],
        # how far behind the newest center each worker's reads were (the asynchronous patterns; else None)
        staleness=staleness_summary([r for r in algo_reports if r]),
        checkpoints=_checkpoints_block(run),
        versions=versions(),
        # The commit and its uncommitted edits, the Slurm job, the CPU/GPU models and the CUDA/cuDNN/NCCL/MPI
        # libraries: exactly what ran, where (scaledl.train.provenance).
        provenance=provenance.collect(run.device),
        finished_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    )


def _algorithm_block(run, per_rank: list[dict]) -> AlgorithmBlock:
    info = run.algo.info
    # The registry's claim holds for this run only on CPU, or on CUDA with deterministic
    # kernels enforced, and over a backend that reduces in a fixed order (MPI's).
    deterministic, reason = info.deterministic_in(
        [r["device"] for r in per_rank], run.settings.backend, torch.are_deterministic_algorithms_enabled()
    )
    return AlgorithmBlock(
        key=info.key,
        paper_name=info.paper_name,
        engine=info.engine,
        rule=info.rule,
        needs_master=info.needs_master,
        deterministic=deterministic,
        deterministic_reason=reason,
        preset=dict(info.preset),
    )


def _world_block(run, per_rank: list[dict]) -> WorldBlock:
    roles = run.roles
    hosts = sorted({r["host"] for r in per_rank})
    return WorldBlock(
        size=roles.size,
        workers=roles.num_workers,
        dedicated_master=roles.dedicated_master,
        ranks_per_node=roles.local_size,
        nodes=len(hosts),
        hosts=hosts,
        threads_per_rank=torch.get_num_threads(),
    )


def _model_block(run) -> ModelBlock:
    cfg, parameters = run.cfg, list(run.center_model.parameters())
    count = sum(p.numel() for p in parameters)
    return ModelBlock(
        name=cfg.model,
        source=model_source(cfg.model, cfg.model_from),
        parameters=count,
        tensors=len(parameters),
        bytes=count * parameters[0].element_size(),
    )


def _data_block(run) -> DataBlock:
    info = run.info
    return DataBlock(
        path=str(run.cfg.data),
        dataset=info.dataset,
        classes=info.classes,
        n_train=run.n_train,
        validation_rows=run.validation_rows,
        n_test=info.n_test,
        image_shape=list(info.image_shape),
        source_sha256=info.source_sha256,
        identity=run.fingerprint.get(checkpoint.DATA_KEY),  # what a checkpoint is tied to (data.hdf5.identity)
    )


def _stop_block(monitor) -> StopBlock:
    return StopBlock(
        reason=monitor.stop_reason,
        steps=monitor.step,
        epochs=monitor.epoch,
        wall_s=monitor.final_wall,
        train_s=monitor.stop_train_s,
        nonfinite_loss_step=monitor.diverged_at,
    )


def _later_target_block(cfg, monitor) -> dict | None:
    """The later target (--later-target-accuracy) and its crossing, interpolated as the first target's; None
    without one. Its time and steps are None where the run stopped before reaching it."""
    if cfg.later_target_accuracy is None:
        return None
    later = monitor.later
    return {
        "accuracy": cfg.later_target_accuracy,
        "time_to_target_s": later.train_s if later else None,
        "steps_to_target": later.steps if later else None,
        "target_step": later.step if later else None,
    }


def _phases_block(master: dict, workers_mean: dict, per_rank: list[dict]) -> PhasesBlock:
    """The master rank's seconds per phase at top level; every rank's, and the workers' mean, below."""
    own = {k: v for k, v in master.items() if k.endswith("_s") or k == "comm_share"}
    return PhasesBlock(master=own, workers_mean=workers_mean, per_rank=per_rank)


def _checkpoints_block(run) -> CheckpointsBlock:
    """Checkpoints of this attempt, and every resume of the run (clocks continue across them: the steps lost
    between a checkpoint and a kill are redone, not counted), each with the code of the attempt that wrote
    its checkpoint; `code_versions`: every attempt's, in order."""
    cfg, resumes = run.cfg, run.resumes
    return CheckpointsBlock(
        every_steps=cfg.checkpoint_every,
        interval_s=cfg.checkpoint_interval,
        written=run.checkpoints_written,
        resumes=resumes,
        kept=run.monitor.stop_reason == INTERRUPTED and bool(run.checkpoints_written),
        code_versions=list(dict.fromkeys([*(r["code"]["version"] for r in resumes), run.code["version"]])),
        across_versions=any(r["across_versions"] for r in resumes),
    )


def _workers_mean(per_rank: list[dict]) -> dict[str, float]:
    """Each timing field averaged over the ranks that compute gradients."""
    workers = [r for r in per_rank if "worker" in r["role"]]
    keys = [k for k, v in workers[0].items() if isinstance(v, float)]
    return {k: sum(r[k] for r in workers) / len(workers) for k in keys if all(r[k] is not None for r in workers)}


def closing_line(monitor, cfg, out: Path) -> str:
    """What a user wants to know when a run ends: why it stopped, how well and how fast, where its files are."""
    best = max((row["test_accuracy"] for row in monitor.rows), default=None)
    target = ""
    if cfg.target_accuracy is not None:
        target = (
            f"; target {cfg.target_accuracy:g} crossed at {monitor.time_to_target:.2f} s of training "
            f"(step {monitor.steps_to_target:.1f}, seen at the evaluation of step {monitor.target_step})"
            if monitor.time_to_target is not None
            else f"; target {cfg.target_accuracy:g} not reached"
        )
    if cfg.later_target_accuracy is not None:
        later = monitor.later
        target += (
            f"; later target {cfg.later_target_accuracy:g} at {later.train_s:.2f} s (step {later.steps:.1f})"
            if later
            else f"; later target {cfg.later_target_accuracy:g} not reached"
        )
    accuracy = "" if best is None else f"; test accuracy {monitor.last_accuracy:.4f} (best {best:.4f})"
    if cfg.time_only:
        accuracy = "; time-only: seconds per step, no accuracy (nothing was computed)"
    if monitor.stop_reason == DIVERGED:
        target += f"; the loss was not finite at step {monitor.diverged_at}: try a smaller --lr"
    if monitor.stop_reason == OUTPACED:
        target += "; a tune trial that could no longer be its cell's best or runner-up point (--tune-seeds)"
    return (
        f"done: stopped by {monitor.stop_reason} after {monitor.step} steps, {monitor.stop_train_s:.2f} s of "
        f"training{accuracy}{target}; run.json, metrics.csv, timeline.h5 and model.pt in {out}\n"
    )
