"""Two rounds of the averaging engine on a two-parameter model, against numbers worked out by hand.

Usage: mpiexec -n 2 python -m mpi4py tests/mpi/check_averaging_rounds.py ALGORITHM [COMPRESS]

W_0 = (1, 1); worker 0's gradient is always (1, 0), worker 1's (0, 1); η = 0.1, τ = 2, so
iterations 0 and 2 are rounds and iteration 1 is a local step. By hand (docstring of each case):
    iteration 0  inner steps: W^0 = (0.9, 1), W^1 = (1, 0.9); x̄ = (0.95, 0.95); Δ = W − x̄ = 0.05
    local_sgd    W = 0.95;   iteration 1: W^0 = (0.85, 0.95); iteration 2: W^0 = (0.75, 0.95), x̄ = 0.85; W = 0.85
    diloco       η_o 0.7, μ_o 0.9: B = 0.05, W = 1 − 0.7·(0.05 + 0.045) = 0.9335; after iteration 2
                 x̄ = 0.8335, Δ = 0.1, B = 0.9·0.05 + 0.1 = 0.145, W = 0.9335 − 0.7·(0.1 + 0.1305) = 0.77215
    slowmo       α 1, β 0.5, γ = η = 0.1: U = 0.05/0.1 = 0.5, W = 1 − 0.1·0.5 = 0.95; then x̄ = 0.85, Δ = 0.1,
                 U = 0.25 + 1 = 1.25, W = 0.95 − 0.1·1.25 = 0.825
After a round every worker holds W. With COMPRESS (fp16, bf16, int8) the same numbers hold to the
codec's precision: the messages carry differences of a few hundredths.

With a third argument 1 (--outer-delay 1, fp32), each worker's outer step takes its own Δ^i on time and the
other's one round late (none before the first round): Δ^0 = (0.1, 0), Δ^1 = (0, 0.1) at iteration 0, so
    round 0      worker 0's Δ̃ = (0.1, 0)/2 = (0.05, 0); worker 1's (0, 0.05)
    local_sgd    W_0 = (0.95, 1); iterations 1-2: W^0 = (0.75, 1), Δ^0 = (0.2, 0),
                 Δ̃ = ((0.1, 0.1) − (0.1, 0) + (0.2, 0))/2 = (0.1, 0.05), W_0 = (0.85, 0.95)
    diloco       B = (0.05, 0), W_0 = (1 − 0.7·0.095, 1) = (0.9335, 1); then Δ^0 = (0.2, 0), Δ̃ = (0.1, 0.05),
                 B = (0.045 + 0.1, 0.05) = (0.145, 0.05), W_0 = (0.9335 − 0.7·0.2305, 1 − 0.7·0.095)
                 = (0.77215, 0.9335)
and worker 1 holds the same with its coordinates swapped: the workers' centers differ by their own parts.
"""

import sys
from pathlib import Path

import torch
from mpi4py import MPI

from scaledl.algorithms import ALGORITHMS, engine_class
from scaledl.algorithms.base import AlgorithmContext
from scaledl.algorithms.settings import resolve
from scaledl.comm.flat import FlatParams
from scaledl.comm.roles import make_roles
from scaledl.comm.timing import PhaseTimer
from scaledl.config import TrainConfig

algorithm = sys.argv[1]
compress = sys.argv[2] if len(sys.argv) > 2 else "fp32"
outer_delay = int(sys.argv[3]) if len(sys.argv) > 3 else 0
DELAYED = {"local_sgd": ((0.85, 0.95), None), "diloco": ((0.77215, 0.9335), (0.145, 0.05))}  # worker 0's
EXPECTED = {  # W after the rounds at iterations 0 and 2, and the outer buffer then
    "local_sgd": (0.85, None),
    "diloco": (0.77215, 0.145),
    "slowmo": (0.825, 1.25),
}
TOLERANCE = {"fp32": 1e-6, "fp16": 1e-3, "bf16": 2e-3, "int8": 1e-3}[compress]

world = MPI.COMM_WORLD
roles = make_roles(world, dedicated_master=False)
assert roles.num_workers == 2, "run with 2 ranks"


def two_parameter_model() -> torch.nn.Module:
    model = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    return model


params = FlatParams(two_parameter_model())
center = FlatParams(two_parameter_model()) if roles.is_master else None
cfg = TrainConfig(
    data=Path("unused.h5"),
    model="lenet",
    algorithm=algorithm,
    out_dir=Path("unused"),
    max_steps=3,
    lr=0.1,
    tau=2,
    compress=compress,
    outer_delay=outer_delay,
)
info = ALGORITHMS[algorithm]
context = AlgorithmContext(
    info=info, settings=resolve(cfg, info, workers=2), roles=roles, params=params, center=center, timer=PhaseTimer()
)
engine = engine_class(algorithm)(context)
engine.start()
for _ in range(3):
    params.grad.copy_(torch.tensor([1.0, 0.0]) if roles.worker_index == 0 else torch.tensor([0.0, 1.0]))
    engine.worker_step()

engine.finish()

if outer_delay:
    w_mine, buffer_mine = DELAYED[algorithm]
    if roles.worker_index == 1:  # its coordinates swapped
        w_mine, buffer_mine = w_mine[::-1], buffer_mine and buffer_mine[::-1]
    assert torch.allclose(params.data, torch.tensor(w_mine), atol=TOLERANCE, rtol=0), (algorithm, params.data)
    if buffer_mine is not None:
        assert torch.allclose(engine.outer_buffer, torch.tensor(buffer_mine), atol=10 * TOLERANCE, rtol=0)
    print(f"{algorithm} delayed: worker {roles.worker_index}'s W = {params.data.tolist()}, as worked out by hand")
    sys.exit(0)

w_expected, buffer_expected = EXPECTED[algorithm]
assert torch.allclose(params.data, torch.full((2,), w_expected), atol=TOLERANCE, rtol=0), (algorithm, params.data)
if roles.is_master:
    assert torch.allclose(center.data, torch.full((2,), w_expected), atol=TOLERANCE, rtol=0), center.data
    if buffer_expected is not None:
        assert torch.allclose(engine.outer_buffer, torch.full((2,), buffer_expected), atol=10 * TOLERANCE, rtol=0), (
            engine.outer_buffer
        )
    print(f"{algorithm} ({compress}): W = {center.data.tolist()} after two rounds, as worked out by hand", flush=True)
