"""Quorum rounds (quorum_diloco): a round closed by m of the P workers, the late ones joining the next.

m = P is the rooted DiLoCo round bit for bit (two workers: the Reduce's sum is one addition); m = 1 under a
straggler lets the fast worker run ahead, and the slow one's weights join rounds late (their staleness
recorded); a killed run resumes from its checkpoint, every held W^i with it.
"""

from __future__ import annotations

import pytest
import torch

from mpi_run import run_train
from scaledl.run_record import read_run_json
from scaledl.train import checkpoint

STEPS = 33  # 1 + 8τ at τ = 4: a round ends the run on both patterns


def args(data, out, algorithm, *extra):
    return ["--data", str(data), "--model", "lenet", "--algorithm", algorithm, "--out-dir", str(out),
            "--batch-size", "16", "--max-steps", str(STEPS), "--eval-every", "10", "--seed", "4", "--tau", "4",
            *extra]  # fmt: skip


def trained(ranks, data, out, algorithm, *extra, env=None):
    result = run_train(ranks, args(data, out, algorithm, *extra), timeout=120, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return torch.load(out / "model.pt")


@pytest.mark.mpi
def test_a_quorum_of_every_worker_is_rooted_diloco_bit_for_bit_resumed_too_and_a_quorum_of_one_is_not(
    digits_h5, tmp_path
):
    rooted = trained(2, digits_h5, tmp_path / "rooted", "diloco", "--exchange", "rooted")
    # checkpoints change no number: the same run, killed and resumed, ends bitwise like this one
    every = ("--quorum", "2", "--checkpoint-every", "10")
    everyone = trained(3, digits_h5, tmp_path / "m2", "quorum_diloco", *every)
    assert all(torch.equal(rooted[k], everyone[k]) for k in rooted)
    out = tmp_path / "killed"
    killed = run_train(3, args(digits_h5, out, "quorum_diloco", *every), timeout=120, env={"SCALEDL_KILL_AT": "1:25"})
    assert killed.returncode != 0 and [step for step, _, _ in checkpoint.complete(out)]
    resumed = trained(3, digits_h5, out, "quorum_diloco", *every)
    assert all(torch.equal(everyone[k], resumed[k]) for k in everyone)
    assert read_run_json(out / "run.json")["checkpoints"]["resumes"]
    # m = 1 with worker 0 (rank 1) three times slower: worker 1 closes rounds alone and runs ahead
    one = trained(3, digits_h5, tmp_path / "m1", "quorum_diloco", "--quorum", "1", "--straggler", "1:3")
    assert not all(torch.equal(rooted[k], one[k]) for k in rooted)
    run = read_run_json(tmp_path / "m1/run.json")
    master, slow, fast = run["algorithm_report"]
    assert master["quorum"] == 1 and fast["iteration"] > slow["iteration"]
    assert run["staleness"]["max"] >= 1  # the slow worker's weights joined rounds closed without it
    assert read_run_json(tmp_path / "m2/run.json")["staleness"]["max"] == 0  # every round waits for both
