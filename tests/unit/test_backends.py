"""Which collective backend a run gets, and the one-line refusals of impossible choices."""

import mpi4py
import pytest
import torch

mpi4py.rc.initialize = False  # choose_backend needs the library loaded, not an MPI world in pytest's process

from scaledl.comm.collectives import choose_backend  # noqa: E402
from scaledl.errors import UserError  # noqa: E402

CPU, GPU = torch.device("cpu"), torch.device("cuda", 0)  # a device object needs no GPU


def test_auto_on_cpu_is_mpi_on_host_buffers():
    assert choose_backend("auto", CPU, gpu_per_rank=False) == "mpi"


@pytest.mark.skipif(not torch.distributed.is_nccl_available(), reason="this torch build has no NCCL")
def test_auto_with_a_gpu_per_rank_is_nccl():
    assert choose_backend("auto", GPU, gpu_per_rank=True) == "nccl"


def test_forced_backends_that_fit_are_kept():
    assert choose_backend("mpi", CPU, gpu_per_rank=False) == "mpi"
    assert choose_backend("gloo", CPU, gpu_per_rank=False) == "gloo"
    assert choose_backend("nccl", GPU, gpu_per_rank=True) == "nccl"


@pytest.mark.parametrize(
    "requested, device, gpu_per_rank, named",
    [
        ("nccl", CPU, False, "needs CUDA devices"),
        ("cuda_aware_mpi", CPU, False, "needs CUDA devices"),
        ("nccl", GPU, False, "one GPU per rank"),
        ("gloo", GPU, True, "host tensors"),
    ],
)
def test_impossible_backend_is_refused_naming_the_alternative(requested, device, gpu_per_rank, named):
    with pytest.raises(UserError, match=named) as error:
        choose_backend(requested, device, gpu_per_rank)
    assert "use --backend" in str(error.value)


# A simulated GPU (its tensors in this machine's memory): the simulated MPI is CUDA-aware, and there is no NCCL.
def test_a_simulated_gpu_moves_device_weights_device_to_device_and_stages_a_host_center():
    assert choose_backend("auto", CPU, gpu_per_rank=False, simulated_gpu=True) == "cuda_aware_mpi"
    assert choose_backend("auto", CPU, gpu_per_rank=False, host_buffers=True, simulated_gpu=True) == "mpi"
    assert choose_backend("mpi", CPU, gpu_per_rank=False, simulated_gpu=True) == "mpi"  # staging, when forced
    assert choose_backend("cuda_aware_mpi", CPU, gpu_per_rank=False, simulated_gpu=True) == "cuda_aware_mpi"


@pytest.mark.parametrize(
    "requested, host_buffers, named",
    [("nccl", False, "not simulated"), ("gloo", False, "not simulated"), ("cuda_aware_mpi", True, "host memory")],
)
def test_a_simulated_gpu_refuses_what_it_cannot_simulate(requested, host_buffers, named):
    with pytest.raises(UserError, match=named) as error:
        choose_backend(requested, CPU, gpu_per_rank=False, host_buffers=host_buffers, simulated_gpu=True)
    assert "use --backend" in str(error.value)
