"""Checkpoints: everything a run needs to continue, written so that a rerun of the same command resumes.

Layout, in the run folder (a filesystem every rank sees, like the run's other outputs)::

    checkpoints/step-00000120/rank-0000.pt    one file per rank, written atomically by that rank
    checkpoints/step-00000120/rank-0001.pt
    checkpoints/step-00000120/manifest.json   written last, by the master: the checkpoint is complete

A rank's file holds its part of the state: a worker's W^i, its model's
buffers, its loader position (epoch, step in epoch: the permutation is a
function of the seed, shard and epoch), its RNG states (torch, numpy,
python, CUDA), its step counter, its clock and phase totals, and its
algorithm's state (momentum and velocity buffers, staleness counters,
exchange counts, the τ phase, the master's window and notice board); the
master's file adds the center W and the monitor (metrics rows so far,
evaluation snapshots, the stop rule's progress). A checkpoint is taken at a
step boundary on which all ranks agreed (the pattern's own control message:
the collectives' stop vote, the master's notice board, the round-robin
turn), after a barrier, so no exchange is in flight.

Resuming: the newest complete checkpoint whose settings match the run's
(`fingerprint`: everything that changes the arithmetic, the data file's
identity and the code's version; budgets may change) is read before any
window exists and restored after the algorithm's start, so that each rank
continues exactly where it was. Synchronous algorithms then continue bitwise
as if never stopped. Other code is refused unless `--resume-across-versions`
(each resume records the code versions it joined). A run that ends (budget,
target, divergence) deletes its checkpoints; an interrupted one keeps them.
`--restart` deletes them instead of resuming.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from scaledl.atomic import write_text
from scaledl.data.hdf5 import identity
from scaledl.errors import UserError
from scaledl.train import provenance
from scaledl.train.outputs import save_tensors, versions

FORMAT = 1
KEEP = 2  # complete checkpoints kept; older ones are pruned
FOLDER = "checkpoints"
MANIFEST = "manifest.json"
# Settings that do not change the arithmetic of the steps already taken: a resumed run may differ in them.
# The data file's path is one: its identity (DATA_KEY) is what must match, so a staged copy resumes.
RESUMABLE_CHANGES = frozenset(
    {
        "data",
        "out_dir",
        "max_steps",
        "epochs",
        "time_budget",
        "target_accuracy",
        "later_target_accuracy",
        "checkpoint_every",
        "checkpoint_interval",
        "restart",
        "resume_across_versions",
        "worker_timeout",
        "expect_ranks",
        "threads",
        "eval_every",
        "eval_batch_size",
        "device_sync",
        "platform",
        "setting",
        "sweep",
        "tuned_from",
        "tuned_scale",
        "tuned_pick",
    }
)


@dataclass
class CheckpointPolicy:
    """When the master asks for a checkpoint: every `every` steps and/or every `interval` seconds."""

    every: int | None = None
    interval: float | None = None

    def __post_init__(self):
        self._last_at = time.monotonic()
        self._last_step: int | None = None  # the step of the previous call

    @property
    def enabled(self) -> bool:
        return bool(self.every) or bool(self.interval)

    def due(self, step: int) -> bool:
        """True at the first step at or past one the schedule names; the clock restarts then."""
        now = time.monotonic()
        # a multiple of `every` reached or passed since the previous call: a master pattern's step may move by
        # more than one (quorum rounds add each round's iterations over P)
        since = step - 1 if self._last_step is None else self._last_step
        self._last_step = step
        due = (
            bool(self.every)
            and step // self.every > since // self.every
            or bool(self.interval)
            and now - self._last_at >= self.interval
        )
        if due:
            self._last_at = now
        return due


def policy(cfg) -> CheckpointPolicy:
    """The run's checkpoint schedule (--checkpoint-every, --checkpoint-interval)."""
    return CheckpointPolicy(cfg.checkpoint_every, cfg.checkpoint_interval)


DATA_KEY, CODE_KEY = "data_identity", "code_version"


def fingerprint(cfg, world_size: int, data_identity: str, code_version: str) -> dict:
    """What a checkpoint must share with the run that resumes it: the settings that change the arithmetic,
    the world size, the data file's identity (scaledl.data.hdf5.identity) and the code's version
    (scaledl.train.provenance.code_version; only this one may differ, with --resume-across-versions)."""
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(cfg).items() if k not in RESUMABLE_CHANGES}
    return {**settings, "world_size": world_size, DATA_KEY: data_identity, CODE_KEY: code_version}


def folder(out_dir: Path) -> Path:
    return Path(out_dir) / FOLDER


def step_folder(out_dir: Path, step: int) -> Path:
    return folder(out_dir) / f"step-{step:08d}"


def complete(out_dir: Path) -> list[tuple[int, Path, dict]]:
    """(step, folder, manifest) of every complete checkpoint, oldest first; unreadable manifests are skipped."""
    found = []
    for path in sorted(folder(out_dir).glob("step-*")):
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except (OSError, ValueError):
            continue  # a checkpoint cut short: no manifest yet
        if manifest.get("format") == FORMAT:
            found.append((int(manifest["step"]), path, manifest))
    return sorted(found, key=lambda item: item[0])


def newest(out_dir: Path, expected: dict, across_versions: bool = False) -> tuple[int, Path, dict] | None:
    """The newest complete checkpoint; a UserError when it was written with other settings or data, or by
    other code (`across_versions`: the user accepts that one)."""
    found = complete(out_dir)
    if not found:
        return None
    step, path, manifest = found[-1]
    written = manifest.get("fingerprint", {})
    differ = sorted(k for k in set(written) | set(expected) if written.get(k) != expected.get(k))
    settings = [k for k in differ if k not in (DATA_KEY, CODE_KEY)]
    if settings:
        shown = ", ".join(f"{k} {written.get(k)!r} there, {expected.get(k)!r} now" for k in settings[:3])
        raise UserError(
            f"the checkpoint {path} was written with other settings ({shown}); rerun with --restart "
            "to start over, or use another --out-dir"
        )
    if DATA_KEY in differ:
        raise UserError(
            f"the checkpoint {path} was trained on other data: the --data file is not the one it was written "
            f"with (identity {_short(written.get(DATA_KEY))} there, {_short(expected.get(DATA_KEY))} now: "
            "prepared again, or another dataset); point --data at that file, or rerun with --restart to start "
            "over on this one"
        )
    if CODE_KEY in differ and not across_versions:
        raise UserError(
            f"the checkpoint {path} was written by other code (scaledl {written.get(CODE_KEY)} there, "
            f"{expected.get(CODE_KEY)} now); rerun with --resume-across-versions to continue it anyway "
            "(run.json records both versions), or with --restart to start over"
        )
    return step, path, manifest


def _short(identity) -> str:
    return "none" if identity is None else f"{identity[:12]}…"


def remove_all(out_dir: Path) -> None:
    shutil.rmtree(folder(out_dir), ignore_errors=True)


def prune(out_dir: Path, keep: int = KEEP) -> None:
    """Keep the newest `keep` complete checkpoints; drop older ones and any incomplete one before them."""
    found = complete(out_dir)
    if len(found) <= keep:
        return
    oldest_kept = found[-keep][0]
    for path in folder(out_dir).glob("step-*"):
        if int(path.name.split("-")[1]) < oldest_kept:
            shutil.rmtree(path, ignore_errors=True)


def rank_file(path: Path, rank: int) -> Path:
    return path / f"rank-{rank:04d}.pt"


def write_rank(path: Path, rank: int, state: dict) -> dict:
    """This rank's file, atomically; returns its manifest entry (name, bytes, sha256)."""
    target = rank_file(path, rank)
    save_tensors(target, plain(state))
    return {"rank": rank, "file": target.name, "bytes": target.stat().st_size, "sha256": sha256(target)}


def write_manifest(
    path: Path, step: int, fingerprint_: dict, entries: list[dict], version: str, code: dict | None = None
) -> None:
    """`code`: the writing attempt's code (scaledl.train.provenance.code_state), for the resumes' record."""
    manifest = {
        "format": FORMAT,
        "step": step,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "scaledl_version": version,
        "fingerprint": fingerprint_,
        "code": code,
        "ranks": entries,
    }
    write_text(path / MANIFEST, json.dumps(manifest, indent=1) + "\n")


def read_rank(path: Path, rank: int, manifest: dict) -> dict:
    """This rank's state from a complete checkpoint; a damaged or missing file is a one-line UserError."""
    target = rank_file(path, rank)
    entry = next((e for e in manifest["ranks"] if e["rank"] == rank), None)
    if entry is None or not target.exists():
        raise UserError(f"the checkpoint {path} has no file for rank {rank}; rerun with --restart to start over")
    if sha256(target) != entry["sha256"]:
        raise UserError(
            f"{target} does not match its manifest's checksum (damaged); delete {path} to resume "
            "from an older checkpoint, or rerun with --restart"
        )
    try:
        return torch.load(target, map_location="cpu", weights_only=True)
    except Exception as error:  # a file cut short or not a checkpoint: whatever torch's unpickler says
        raise UserError(
            f"{target} cannot be read as a checkpoint ({str(error).splitlines()[0]}); delete {path} "
            "to resume from an older one, or rerun with --restart"
        ) from None


def plain(value):
    """`value` with numpy scalars as Python numbers and arrays as tensors: what weights_only loads."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    return value


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---- random number generators, as tensors and lists (torch.load with weights_only accepts them)


def rng_state(device: torch.device) -> dict:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {
        "torch": torch.get_rng_state(),
        "python": _listed(random.getstate()),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(_tupled(state["python"]))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


def _listed(value):
    return [_listed(v) for v in value] if isinstance(value, tuple) else value


def _tupled(value):
    return tuple(_tupled(v) for v in value) if isinstance(value, list) else value


# ---- the run's side: what each rank saves, and how a run resumes
#
# `save(run)` is collective over every rank of the job and is called at a step
# boundary the ranks agreed on (scaledl.algorithms.boundary): a barrier (no
# exchange is in flight after it), the checkpoint's name from the master, each
# rank's file, then the master's manifest and the pruning of older checkpoints.
# Resuming is two collective steps: `load(run)` during the setup (the master
# picks the newest complete checkpoint, every rank reads and checks its file, so
# a bad one stops the job in one line before training), and `restore(run, state)`
# after the algorithm's start, ending in a barrier that makes the master's
# restored window and notice board visible before any exchange.


def save(run) -> None:
    """Write this rank's part of a checkpoint of the run as it stands now; collective."""
    roles, timer = run.roles, run.timer
    with timer.phase("checkpoint"):
        roles.world.Barrier()  # every rank at the boundary: nothing in flight
        step = roles.world.bcast(run.monitor.step if roles.is_master else None, root=roles.master)
        path = step_folder(run.cfg.out_dir, step)
        if roles.is_master:
            (path / MANIFEST).unlink(missing_ok=True)  # rewritten below, after every rank's file
        roles.world.Barrier()
        t0 = time.perf_counter()
        entry = write_rank(path, roles.rank, rank_state(run))
        entries = roles.world.gather({**entry, "seconds": time.perf_counter() - t0}, root=roles.master)
        if roles.is_master:
            write_manifest(path, step, run.fingerprint, entries, versions()["scaledl"], run.code)
            prune(run.cfg.out_dir)
            run.checkpoints_written.append(
                {
                    "step": step,
                    "bytes": sum(e["bytes"] for e in entries),
                    "slowest_rank_s": max(e["seconds"] for e in entries),
                }
            )


def rank_state(run) -> dict:
    """This rank's part: its weights, buffers, data position, randomness, counters, clock and algorithm."""
    roles = run.roles
    state = {
        "format": FORMAT,
        "rank": roles.rank,
        "steps": run.steps,
        "rng": rng_state(run.device),
        "timer": run.timer.state_dict(),
        "algorithm": run.algo.state_dict(),
    }
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

    Collective, and the first collective of the shared setup (scaledl.train.setup.connect, before
    any process group or window exists, so a refusal leaves nothing to free): the master takes the
    run's fingerprint (its data file's identity and its code's version too) and picks the checkpoint
    (none with --restart, whose checkpoints the setup deletes once nothing can refuse the run);
    every rank reads and checks its own file. A checkpoint of other settings, data or code, or a
    damaged file, is a UserError, which the setup's agreement turns into one line on every rank,
    the run folder untouched.
    """
    roles, cfg = run.roles, run.cfg
    chosen, error = None, None
    if roles.is_master:
        run.code = provenance.code_state()
        try:
            run.fingerprint = fingerprint(cfg, roles.size, identity(cfg.data), run.code["version"])
            found = None if cfg.restart else newest(cfg.out_dir, run.fingerprint, cfg.resume_across_versions)
            chosen = None if found is None else (str(found[1]), found[2], resumed_from(found, run.fingerprint))
        except UserError as exc:
            error = str(exc)
    chosen, error = roles.world.bcast((chosen, error), root=roles.master)
    if error:
        raise UserError(error)
    if chosen is None:
        return None
    path, manifest, resumed = chosen
    try:
        state, error = read_rank(Path(path), roles.rank, manifest), None
    except UserError as exc:
        state, error = None, str(exc)
    # Agreed here, not by the setup's agreement after `connect`: the ranks whose file is good would
    # otherwise go on to create windows while the others wait in that agreement.
    failed = [message for message in roles.world.allgather(error) if message is not None]
    if failed:
        raise UserError(failed[0])
    state["resumed_from"] = resumed
    return state


def resumed_from(found: tuple[int, Path, dict], expected: dict) -> dict:
    """The record of a resume from the checkpoint `found` (`newest`'s), by a run of fingerprint `expected`."""
    step, path, manifest = found
    then = manifest["fingerprint"].get(CODE_KEY)
    return {
        "step": step,
        "checkpoint": str(path),
        "written_at": manifest["written_at"],
        "code": {**(manifest.get("code") or {}), "version": then},  # the code of the attempt that wrote it
        "across_versions": then != expected.get(CODE_KEY),
    }


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
    restore_rng(state["rng"], run.device)
    run.steps = state["steps"]
    if roles.is_master:
        resumed = {**state["resumed_from"], "resumed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        run.resumes = [*state["resumes"], resumed]
        across = (
            f"; across code versions ({resumed['code']['version']} there, {run.code['version']} now)"
            if resumed["across_versions"]
            else ""
        )
        print(
            f"resuming from {resumed['checkpoint']} at step {resumed['step']} (written {resumed['written_at']})"
            f"{across}; --restart starts over\n",
            end="",
            flush=True,
        )
    run.checkpoint_state = None  # free it
    roles.world.Barrier()  # the master's window and board hold the checkpoint before any exchange
