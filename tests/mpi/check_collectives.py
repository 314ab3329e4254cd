"""Run under mpiexec at any size: rank-valued tensors through each collective pattern."""

import torch
from mpi4py import MPI

from scaledl.comm.buckets import GradientBuckets
from scaledl.comm.collectives import Collectives
from scaledl.comm.flat import FlatParams
from scaledl.comm.roles import make_roles
from scaledl.comm.timing import PhaseTimer

world = MPI.COMM_WORLD
size, rank = world.Get_size(), world.Get_rank()

# Layout without a master: every rank is a worker, worker 0 is the master.
roles = make_roles(world, dedicated_master=False)
assert roles.is_worker and roles.num_workers == size and roles.worker_index == rank
assert roles.is_master == (rank == 0)

coll = Collectives(roles.worker_comm, torch.zeros(5), PhaseTimer())
t = torch.full((5,), float(rank + 1))
coll.allreduce_sum_(t)
assert torch.all(t == size * (size + 1) / 2), t

b = torch.full((5,), float(rank + 1))
coll.bcast_(b, root=0)
assert torch.all(b == 1.0), b

src = torch.arange(5, dtype=torch.float32) * (rank + 1)
dst = torch.zeros(5) if roles.is_master else None
coll.reduce_sum(src, dst, root=0)
assert torch.equal(src, torch.arange(5, dtype=torch.float32) * (rank + 1)), "reduce must not touch its source"
if roles.is_master:
    assert torch.equal(dst, torch.arange(5, dtype=torch.float32) * (size * (size + 1) / 2)), dst

# Allreduce into another tensor: the sum on every rank, the source untouched.
out = torch.zeros(5)
coll.allreduce_sum(src, out)
assert torch.equal(src, torch.arange(5, dtype=torch.float32) * (rank + 1)), "allreduce_sum must not touch its source"
assert torch.equal(out, torch.arange(5, dtype=torch.float32) * (size * (size + 1) / 2)), out

# Gradient buckets: the sums leave during backward, bucket by bucket, each with its weight decay.
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 3))
flat = FlatParams(model)
flat.data.fill_(1.0)
sent = []
buckets = GradientBuckets(
    flat, roles.worker_comm, bucket_mb=40 / 2**20, before_send=lambda lo, hi: sent.append((lo, hi))
)
assert len(buckets.buckets) > 1, buckets.buckets
for step in range(2):  # a second backward reuses the buckets
    flat.zero_grad()
    (sum(p.sum() for p in model.parameters()) * (rank + 1)).backward()  # ΔW = rank + 1 everywhere
    assert buckets.messages == (step + 1) * len(buckets.buckets), "every bucket must leave during backward"
    buckets.wait()
    assert torch.all(flat.grad == size * (size + 1) / 2), flat.grad
assert sorted(sent[: len(buckets.buckets)]) == sorted((b.lo, b.hi) for b in buckets.buckets)

# Per-layer mode: one call per piece, same sums.
layered = Collectives(roles.worker_comm, torch.zeros(5), PhaseTimer(), layers=[2, 3])
t = torch.full((5,), float(rank + 1))
layered.allreduce_sum_(t)
assert torch.all(t == size * (size + 1) / 2) and layered.messages == 2 and coll.messages == 4

# Control votes: the OR of every rank's flags (a stop on one rank, a checkpoint on another)
assert coll.agree_(1 if rank == size - 1 else 0) == 1
assert coll.agree_(0) == 0
assert coll.agree_(2 if rank == 0 else (1 if rank == size - 1 else 0)) == (3 if size > 1 else 2)

# Layout with a dedicated master: rank 0 serves, ranks 1..size-1 are the workers.
if size >= 2:
    roles = make_roles(world, dedicated_master=True)
    assert roles.num_workers == size - 1 and roles.worker_ranks == tuple(range(1, size))
    assert roles.is_master == (rank == 0) and roles.is_worker == (rank != 0)
    assert roles.worker_index == rank - 1

print(f"rank {rank}/{size} ok", flush=True)
