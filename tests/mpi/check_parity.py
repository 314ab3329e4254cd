"""With one worker and ρ = 0, an elastic algorithm must be plain local SGD (momentum SGD for MEASGD), bit for bit.

Usage (1 rank for sync algorithms, 2 for master-based):
    mpiexec -n R python -m mpi4py tests/mpi/check_parity.py DATA ALGORITHM OUT_DIR [overlap|no-overlap] [rma|shared]
The optional arguments set --overlap / --no-overlap (default: the algorithm's own) and, for the
window algorithms, --center-window (default rma).
The worker compares its final W^i with an independent single-process loop
(per-parameter torch updates, no flat buffer, no MPI) run for as many steps.
"""

import hashlib
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from scaledl.data.hdf5 import read_info
from scaledl.data.loader import Normalizer, ShardLoader
from scaledl.models import build_model
from scaledl.train.loop import TrainConfig, train

data, algorithm, out_dir = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
extra = sys.argv[4:]
overlap = next(({"overlap": True, "no-overlap": False}[a] for a in extra if a in ("overlap", "no-overlap")), None)
window = next(({"center_window": a} for a in extra if a in ("rma", "shared")), {})
momentum = algorithm == "async_measgd"
cfg = TrainConfig(
    data=data,
    model="lenet",
    algorithm=algorithm,
    out_dir=out_dir,
    max_steps=12,
    eval_every=1000,
    lr=0.05,
    rho=0.0,
    momentum=0.9,
    batch_size=32,
    seed=3,
    overlap=overlap,
    **window,
)
run = train(cfg)

if run.roles.is_worker:
    info = read_info(data)
    torch.manual_seed(cfg.seed)
    model = build_model("lenet", info.image_shape, info.classes)
    loader = ShardLoader(data, shard=0, num_shards=1, batch_size=cfg.batch_size, seed=cfg.seed)
    normalize = Normalizer(info.mean, info.std, "cpu")
    velocity = [torch.zeros_like(p) for p in model.parameters()]
    initial = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    for _ in range(run.steps):
        x, y = normalize(*loader.next_batch())
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        with torch.no_grad():
            for p, v in zip(model.parameters(), velocity):
                if momentum:
                    v.mul_(cfg.momentum).add_(p.grad, alpha=-cfg.lr)
                    p.add_(v)
                else:
                    p.add_(p.grad, alpha=-cfg.lr)
    reference = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert run.steps >= cfg.max_steps, run.steps
    assert not torch.equal(reference, initial), "the reference did not move: the comparison would prove nothing"
    diff = (reference - run.params.data).abs().max().item()
    assert torch.equal(reference, run.params.data), f"{algorithm}: max |W^1 - W_sgd| = {diff} after {run.steps} steps"
    print(
        f"{algorithm}: identical to local {'momentum ' if momentum else ''}SGD after {run.steps} steps "
        f"(overlap {bool(run.settings.overlap)})",
        flush=True,
    )
    print(f"center window: {cfg.center_window}", flush=True)
    digest = hashlib.sha256(run.params.data.numpy().tobytes()).hexdigest()
    print(f"final W^1 after {run.steps} steps: sha256 {digest}", flush=True)
