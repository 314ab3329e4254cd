"""Two trainings side by side in one MPI world, each on its own communicator (train's `world`).

Usage: mpiexec -n 3 python -m mpi4py tests/mpi/check_world.py DATA OUT_DIR
Ranks 0 and 1 train sync_sgd on two workers (OUT_DIR/pair), rank 2 alone on one (OUT_DIR/single); each rank
prints the world size its run recorded.
"""

import sys
from pathlib import Path

from mpi4py import MPI

from scaledl.run_record import read_run_json
from scaledl.train.loop import TrainConfig, train

data, out = Path(sys.argv[1]), Path(sys.argv[2])
rank = MPI.COMM_WORLD.Get_rank()
pair = rank < 2
world = MPI.COMM_WORLD.Split(0 if pair else 1, rank)
folder = out / ("pair" if pair else "single")
cfg = TrainConfig(
    data=data, model="lenet", algorithm="sync_sgd", out_dir=folder, max_steps=6, eval_every=3, lr=0.05, seed=7
)
train(cfg, world=world)
world.Barrier()
print(f"rank {rank}: world size {read_run_json(folder)['world']['size']}", flush=True)
