"""Our local_sgd against PyTorch's own periodic model averaging, on the same data in the same order.

Usage: mpiexec -n 2 python -m mpi4py tests/mpi/check_local_sgd_parity.py DATA OUT_DIR TAU STEPS

First `scaledl train --algorithm local_sgd` runs in-process (train(cfg)); then, in the same MPI
world, the reference: torch.distributed with Gloo, the same LeNet from the same seed, each rank
reading the same shard in the same order (ShardLoader, Normalizer), torch.optim.SGD wrapped in
torch.distributed.optim.PostLocalSGDOptimizer with a PeriodicModelAverager(period=TAU,
warmup_steps=0), which averages after the optimizer step at steps 0, TAU, 2·TAU, ... as ours
does. STEPS − 1 must be a multiple of TAU, so both end on a round and every rank holds the
mean. The two differ only in how the mean is rounded (PyTorch allreduces W^i/P, ours reduces
Σ W^i and divides): within TOLERANCE, stated below and printed with the measured difference.
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from mpi4py import MPI
from torch.distributed.algorithms.model_averaging.averagers import PeriodicModelAverager
from torch.distributed.optim import PostLocalSGDOptimizer

from scaledl.comm.collectives import init_torch_dist
from scaledl.data.hdf5 import read_info
from scaledl.data.loader import Normalizer, ShardLoader
from scaledl.models import build_model
from scaledl.train.loop import TrainConfig, train

TOLERANCE = 1e-5  # absolute, per weight: float32 rounding of the mean, compounded over a few rounds

data, out_dir, tau, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert (steps - 1) % tau == 0, "end on a round"
lr, batch, seed = 0.05, 32, 5
cfg = TrainConfig(
    data=data,
    model="lenet",
    algorithm="local_sgd",
    out_dir=out_dir,
    max_steps=steps,
    eval_every=1000,
    lr=lr,
    batch_size=batch,
    seed=seed,
    tau=tau,
)
ours = train(cfg)
assert ours.steps == steps
center = ours.params.data.clone()  # after the last round, every worker holds the center

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
init_torch_dist("gloo", world, tuple(range(size)), torch.device("cpu"))
info = read_info(data)
torch.manual_seed(seed)
model = build_model("lenet", info.image_shape, info.classes)
initial = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
loader = ShardLoader(data, shard=rank, num_shards=size, batch_size=batch, seed=seed)
normalize = Normalizer(info.mean, info.std, "cpu")
optimizer = PostLocalSGDOptimizer(
    optim=torch.optim.SGD(model.parameters(), lr=lr), averager=PeriodicModelAverager(period=tau, warmup_steps=0)
)
for _ in range(steps):
    x, y = normalize(*loader.next_batch())
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
reference = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
dist.destroy_process_group()

assert not torch.equal(reference, initial), "the reference did not move: the comparison would prove nothing"
difference = (reference - center).abs().max().item()
spread = (reference - initial).abs().max().item()
assert difference <= TOLERANCE, f"rank {rank}: max |ours − PyTorch| = {difference:.3g} > {TOLERANCE}"
if rank == 0:
    print(
        f"local_sgd τ={tau}, {steps} steps, P={size}: max |ours − PyTorch's PeriodicModelAverager| = "
        f"{difference:.3g} (tolerance {TOLERANCE}; the weights moved by up to {spread:.3g})",
        flush=True,
    )
