"""A run's checkpoints, from the training loop's side: what each rank saves, and how a run resumes.

`save(run)` is collective over every rank of the job and is called at a step
boundary the ranks agreed on (scaledl.algorithms.base.Request.CHECKPOINT, or
the pattern's `on_checkpoint`): a barrier (no exchange is in flight after
it), the checkpoint's name from the master, each rank's file, then the
master's manifest and the pruning of older checkpoints. Resuming is two
collective steps: `load(run)` during the setup (the master picks the
newest complete checkpoint, every rank reads and checks its file, so a bad
one stops the job in one line before training), and `restore(run, state)`
after the algorithm's start, ending in a barrier that makes the master's
restored window and notice board visible before any exchange.
Storage, naming and checks live in scaledl.checkpoint.
"""

from __future__ import annotations

import time
from pathlib import Path

from scaledl import checkpoint
from scaledl.errors import UserError
from scaledl.results import versions


def save(run) -> None:
    """Write this rank's part of a checkpoint of the run as it stands now; collective."""
    roles, timer = run.roles, run.timer
    if roles.is_master:
        run.monitor.settle()                               # every evaluation so far in the saved rows
    with timer.phase("checkpoint"):
        roles.world.Barrier()                              # every rank at the boundary: nothing in flight
        step = roles.world.bcast(run.monitor.step if roles.is_master else None, root=roles.master)
        path = checkpoint.step_folder(run.cfg.out_dir, step)
        if roles.is_master:
            (path / checkpoint.MANIFEST).unlink(missing_ok=True)   # rewritten below, after every rank's file
        roles.world.Barrier()
        t0 = time.perf_counter()
        entry = checkpoint.write_rank(path, roles.rank, rank_state(run))
        entries = roles.world.gather({**entry, "seconds": time.perf_counter() - t0}, root=roles.master)
        if roles.is_master:
            checkpoint.write_manifest(path, step, run.fingerprint, entries, versions()["scaledl"])
            checkpoint.prune(run.cfg.out_dir)
            run.checkpoints_written.append({"step": step, "bytes": sum(e["bytes"] for e in entries),
                                            "slowest_rank_s": max(e["seconds"] for e in entries)})


def rank_state(run) -> dict:
    """This rank's part: its weights, buffers, data position, randomness, counters, clock and algorithm."""
    roles = run.roles
    state = {"format": checkpoint.FORMAT, "rank": roles.rank, "steps": run.steps,
             "rng": checkpoint.rng_state(run.device), "timer": run.timer.state_dict(),
             "algorithm": run.algo.state_dict()}
    if roles.is_worker:
        state["weights"] = run.params.data.detach().cpu().clone()
        state["buffers"] = {n: b.detach().cpu().clone() for n, b in run.model.named_buffers()}
        state["loader"] = run.loader.state_dict()
    if roles.is_master:
        run.algo.refresh_center()
        state["center"] = run.center.data.detach().cpu().clone()
        state["center_buffers"] = {n: b.detach().cpu().clone() for n, b in run.center_model.named_buffers()}
        state["monitor"] = run.monitor.state_dict()
        state["resumes"] = run.resumes
    return state


def load(run) -> dict | None:
    """This rank's state in the newest complete checkpoint of the run folder, or None for a fresh start.

    Collective, and the setup's last collective (scaledl.train.connect, right after the
    algorithm is built and before metrics.csv is opened): the master picks the checkpoint
    (or deletes them all, with --restart); every rank reads and checks its own file. A
    checkpoint of other settings or a damaged file is a UserError, which the setup's
    agreement turns into one line on every rank, the run folder untouched.
    """
    roles, cfg = run.roles, run.cfg
    chosen, error = None, None
    if roles.is_master:
        if cfg.restart:
            checkpoint.remove_all(cfg.out_dir)
        try:
            found = checkpoint.newest(cfg.out_dir, run.fingerprint)
            chosen = None if found is None else (str(found[1]), found[2])
        except UserError as exc:
            error = str(exc)
    chosen, error = roles.world.bcast((chosen, error), root=roles.master)
    if error:
        raise UserError(error)
    if chosen is None:
        return None
    path, manifest = chosen
    state = checkpoint.read_rank(Path(path), roles.rank, manifest)
    state["resumed_from"] = {"step": manifest["step"], "checkpoint": path, "written_at": manifest["written_at"]}
    return state


def restore(run, state: dict) -> None:
    """Put this rank back where `rank_state` found it, after the algorithm's start; collective."""
    roles = run.roles
    if roles.is_worker:
        run.params.data.copy_(state["weights"])
        for name, buffer in run.model.named_buffers():
            buffer.copy_(state["buffers"][name])
        run.loader.load_state_dict(state["loader"])
    if roles.is_master:
        run.center.data.copy_(state["center"])
        for name, buffer in run.center_model.named_buffers():
            buffer.copy_(state["center_buffers"][name])
        run.monitor.load_state_dict(state["monitor"])
    run.algo.load_state_dict(state["algorithm"])
    run.timer.load_state_dict(state["timer"])
    checkpoint.restore_rng(state["rng"], run.device)
    run.steps = state["steps"]
    if roles.is_master:
        resumed = {**state["resumed_from"], "resumed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        run.resumes = [*state["resumes"], resumed]
        print(f"resuming from {resumed['checkpoint']} at step {resumed['step']} (written {resumed['written_at']}); "
              "--restart starts over\n", end="", flush=True)
    run.checkpoint_state = None    # free it
    roles.world.Barrier()          # the master's window and board hold the checkpoint before any exchange
