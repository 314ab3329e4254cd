"""Collective message patterns over the worker communicator, on flat tensors.

Packed mode moves a whole flat buffer in one call (the paper's single-layer
communication; tree or ring algorithms inside the library, cost about
log P·(α + |W|β)); per-layer mode makes one call per parameter tensor
(L·α + |W|β), for the ablation. `messages` counts the calls actually made.

Wait probe (`--wait-probe barrier`, the default): a Barrier before each
collective, timed as `wait`, so the collective's own time (`comm`) is the
transfer and a slower peer's lateness is `wait`. `none` drops the barrier (one
latency per collective) and folds the skew into `comm`, for head-to-head
throughput runs.

Backends (chosen by `choose_backend`, recorded in run.json, forcible with --backend):
    mpi             mpi4py buffer calls on host memory; device tensors are staged
                    through a pinned host mirror (timed as param_copy)
    cuda_aware_mpi  mpi4py buffer calls straight on device memory, when the MPI
                    library reports CUDA support (MPIX_Query_cuda_support); in a
                    simulation of GPUs, the simulated MPI's device-to-device route
                    (the node's PCIe fabric, peer to peer: scaledl.sim.cluster)
    nccl            torch.distributed's NCCL collectives, when every rank has a GPU
                    of its own
    gloo            torch.distributed's Gloo collectives on host tensors (DDP's CPU
                    backend): never picked automatically; it runs the nccl code
                    path on machines without GPUs, and compares MPI with Gloo
The reduction algorithm depends only on the message size and the communicator
size, so for a fixed world size the sums, and with them the synchronous
algorithms, are bitwise repeatable run to run.
"""

from __future__ import annotations

import ctypes
import socket

import numpy as np
import torch

from scaledl.comm.buffers import HostStage
from scaledl.comm.tags import Tag
from scaledl.comm.timing import PhaseTimer
from scaledl.comm.transport import MPI
from scaledl.config import BACKENDS  # noqa: F401  (re-exported: the backends this module implements)
from scaledl.errors import UserError

TORCH_DIST_BACKENDS = ("nccl", "gloo")  # collectives through a torch.distributed process group


def mpi_is_cuda_aware() -> bool:
    """Ask the loaded MPI library (MPICH and Open MPI export MPIX_Query_cuda_support)."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "/libmpi" in line})
    for path in paths:
        query = getattr(ctypes.CDLL(path), "MPIX_Query_cuda_support", None)
        if query is not None:
            return bool(query())
    return False


def choose_backend(
    requested: str, device: torch.device, gpu_per_rank: bool, *, host_buffers: bool = False, simulated_gpu: bool = False
) -> str:
    """The backend for this job; raises UserError when a forced one cannot work here.

    `host_buffers`: the collectives carry host tensors even on a GPU run (the center
    in host memory: sync_easgd1, --center-on host, the paper's CPU master). NCCL
    takes device tensors only, so `auto` picks MPI on the host buffers then, and a
    forced nccl is refused.

    `simulated_gpu`: a simulated rank on a GPU behind PCIe (its tensors are in this
    machine's memory): see `simulated_backend`.
    """
    if simulated_gpu:
        return simulated_backend(requested, host_buffers)
    if requested == "auto":
        if device.type != "cuda" or host_buffers:
            return "mpi"
        if gpu_per_rank and torch.distributed.is_nccl_available():
            return "nccl"
        return "cuda_aware_mpi" if mpi_is_cuda_aware() else "mpi"
    if requested == "gloo" and device.type != "cpu":
        raise UserError("--backend gloo works on host tensors, but this run is on a GPU; use --backend nccl or auto")
    if requested in ("cuda_aware_mpi", "nccl") and device.type != "cuda":
        raise UserError(
            f"--backend {requested} needs CUDA devices, but this run is on {device.type}; use --backend mpi or auto"
        )
    if requested == "cuda_aware_mpi" and not mpi_is_cuda_aware():
        raise UserError(
            "--backend cuda_aware_mpi: the MPI library reports no CUDA support; "
            "use --backend mpi (host staging) or nccl"
        )
    if requested == "nccl" and host_buffers:
        raise UserError(
            "--backend nccl takes device tensors only, but this run keeps the center in host memory "
            "(--center-on host, sync_easgd1); use --backend mpi or auto, or --center-on device"
        )
    if requested == "nccl" and not gpu_per_rank:
        raise UserError("--backend nccl needs one GPU per rank; this node has more ranks than GPUs, use --backend mpi")
    return requested


def simulated_backend(requested: str, host_buffers: bool) -> str:
    """A simulated GPU's backend. The simulated MPI is CUDA-aware: a device tensor handed to it moves GPU to GPU
    over the node's PCIe fabric (cuda_aware_mpi); `mpi` stages it through host memory; there is no NCCL or Gloo
    to simulate. `auto` picks the device-to-device route where a real GPU run's would (NCCL or a CUDA-aware MPI:
    the weights or gradients live on the devices) and host staging where the center is in host memory."""
    if requested in TORCH_DIST_BACKENDS:
        raise UserError(
            f"--backend {requested} is not simulated: a simulated GPU's collectives go through the simulated MPI; "
            "use --backend auto, cuda_aware_mpi (device to device) or mpi (staged through host memory)"
        )
    if requested == "cuda_aware_mpi" and host_buffers:
        raise UserError(
            "--backend cuda_aware_mpi: this run keeps the center in host memory (--center-on host, sync_easgd1), "
            "whose messages a simulation stages through the host; use --backend mpi or auto"
        )
    if requested == "auto":
        return "mpi" if host_buffers else "cuda_aware_mpi"
    return requested


class Collectives:
    """Sum-allreduce (in place or into another tensor), broadcast and sum-reduce of tensors laid out like `like`.

    `layers`: the parameter sizes, for per-layer messages; None sends one packed message.
    """

    def __init__(
        self,
        comm: MPI.Comm,
        like: torch.Tensor,
        timer: PhaseTimer,
        *,
        layers: list[int] | None = None,
        backend: str = "mpi",
        dist_group=None,
        wait_probe: bool = False,
    ):
        self.comm = comm
        self.wait_probe = wait_probe
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.timer = timer
        self.backend = backend
        self.bounds = np.cumsum([0, *(layers or [like.numel()])])
        self.messages = 0
        self._dist_group = dist_group
        self._torch_dist = backend in TORCH_DIST_BACKENDS
        self._device_direct = backend == "cuda_aware_mpi" or self._torch_dist
        if not self._device_direct:
            self._a = HostStage(like, timer)
            self._b = HostStage(like, timer)
        self._flag = np.zeros(1, dtype=np.int32)
        self._piece_cache: dict[tuple, list] = {}  # (address, length) -> pieces (views that keep it alive)
        self._neighbour_buffers: dict[int, np.ndarray] | None = None

    def _pieces(self, buf):
        """The message pieces of `buf` (one, or one per layer), sliced once per buffer."""
        key = (buf.ctypes.data, buf.size) if isinstance(buf, np.ndarray) else (buf.data_ptr(), buf.numel())
        pieces = self._piece_cache.get(key)
        if pieces is None:
            pieces = self._piece_cache[key] = [buf[lo:hi] for lo, hi in zip(self.bounds[:-1], self.bounds[1:])]
        return pieces

    def arrive(self) -> None:
        """With the wait probe on: a Barrier timed as `wait`, so a slower peer's lateness is not
        counted in the collective that follows (which is then `comm`, the transfer alone)."""
        if self.wait_probe:
            with self.timer.phase("wait"):
                self.comm.Barrier()

    def _ready(self, t: torch.Tensor) -> torch.Tensor:
        if t.is_cuda:
            torch.cuda.current_stream(t.device).synchronize()  # MPI must not read before the kernels wrote
        return t

    # ---- the three patterns
    def allreduce_sum_(self, t: torch.Tensor) -> None:
        self.arrive()
        if self._torch_dist:
            return self._dist(lambda piece: torch.distributed.all_reduce(piece, group=self._dist_group), t)
        buf = self._ready(t) if self._device_direct else self._a.send_view(t)
        with self.timer.phase("comm"):
            for piece in self._pieces(buf):
                self.comm.Allreduce(MPI.IN_PLACE, piece, op=MPI.SUM)
                self.messages += 1
        if not self._device_direct:
            self._a.finish_recv(t)

    def allreduce_sum(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        """dst = Σ over ranks of src, on every rank; src is left untouched."""
        self.arrive()
        if self._torch_dist:
            dst.copy_(src)
            return self._dist(lambda piece: torch.distributed.all_reduce(piece, group=self._dist_group), dst)
        if self._device_direct:
            send, recv = self._ready(src), dst
        else:
            send, recv = self._a.send_view(src), self._b.recv_view(dst)
        with self.timer.phase("comm"):
            for piece, out in zip(self._pieces(send), self._pieces(recv)):
                self.comm.Allreduce(piece, out, op=MPI.SUM)
                self.messages += 1
        if not self._device_direct:
            self._b.finish_recv(dst)

    def neighbourhood_sum(self, src: torch.Tensor, dst: torch.Tensor, neighbours: tuple[int, ...]) -> None:
        """dst = Σ of src over this rank and its `neighbours` (ranks of this communicator), added in rank order:
        point to point, each neighbour's values in a buffer of its own (`_inboxes`)."""
        self.arrive()
        send = self._a.send_view(src) if not self._device_direct else self._ready(src)
        inboxes = self._inboxes(src, neighbours)
        with self.timer.phase("comm"):
            requests = [self.comm.Isend(send, dest=n, tag=Tag.NEIGHBOUR) for n in neighbours]
            for n in neighbours:
                self.comm.Recv(inboxes[n], source=n, tag=Tag.NEIGHBOUR)
            for request in requests:
                request.Wait()
            self.messages += len(neighbours)
        values = {self.rank: src, **{n: torch.from_numpy(inboxes[n]).to(dst.device) for n in neighbours}}
        ordered = [values[r] for r in sorted(values)]
        dst.copy_(ordered[0])
        for t in ordered[1:]:
            dst.add_(t)

    def _inboxes(self, like: torch.Tensor, neighbours: tuple[int, ...]) -> dict[int, np.ndarray]:
        """A host buffer per neighbour, made at the first exchange (the neighbours never change)."""
        if self._neighbour_buffers is None:
            self._neighbour_buffers = {n: np.empty(like.numel(), dtype=np.float32) for n in neighbours}
        return self._neighbour_buffers

    def bcast_(self, t: torch.Tensor, root: int) -> None:
        self.arrive()
        if self._torch_dist:
            src = self._global_rank(root)
            return self._dist(lambda piece: torch.distributed.broadcast(piece, src, group=self._dist_group), t)
        if self._device_direct:
            buf = self._ready(t)
        else:
            buf = self._a.send_view(t) if self.rank == root else self._a.recv_view(t)
        with self.timer.phase("comm"):
            for piece in self._pieces(buf):
                self.comm.Bcast(piece, root=root)
                self.messages += 1
        if self.rank != root and not self._device_direct:
            self._a.finish_recv(t)

    def reduce_sum(self, src: torch.Tensor, dst: torch.Tensor | None, root: int) -> None:
        """dst (on root only) = Σ over ranks of src; src is left untouched."""
        self.arrive()
        if self._torch_dist:
            scratch = dst if self.rank == root else self._scratch(src)
            scratch.copy_(src)
            dst_rank = self._global_rank(root)
            return self._dist(lambda piece: torch.distributed.reduce(piece, dst_rank, group=self._dist_group), scratch)
        if self._device_direct:
            send, recv = self._ready(src), (dst if self.rank == root else None)
        else:
            send = self._a.send_view(src)
            recv = self._b.recv_view(dst) if self.rank == root else None
        with self.timer.phase("comm"):
            recv_pieces = self._pieces(recv) if recv is not None else [None] * (len(self.bounds) - 1)
            for piece, out in zip(self._pieces(send), recv_pieces):
                self.comm.Reduce(piece, out, op=MPI.SUM, root=root)
                self.messages += 1
        if self.rank == root and not self._device_direct:
            self._b.finish_recv(dst)

    # ---- encoded messages (scaledl.comm.codecs): host bytes, MPI only
    def gather_bytes(self, send: np.ndarray, recv: np.ndarray | None, root: int) -> None:
        """recv (root only, ranks × len(send) bytes) ← every rank's `send`, in rank order: encoded messages
        cannot be summed on the way, so the root decodes and sums them itself."""
        self.arrive()
        with self.timer.phase("comm"):
            self.comm.Gather(send, recv, root=root)
            self.messages += 1

    def bcast_bytes(self, buf: np.ndarray, root: int) -> None:
        self.arrive()
        with self.timer.phase("comm"):
            self.comm.Bcast(buf, root=root)
            self.messages += 1

    def agree_(self, flags: int) -> int:
        """Control: the bitwise OR of every rank's flags, on every rank (a 4-byte message, not counted)."""
        self._flag[0] = int(flags)
        self.arrive()
        with self.timer.phase("comm"):
            self.comm.Allreduce(MPI.IN_PLACE, self._flag, op=MPI.BOR)
        return int(self._flag[0])

    # ---- torch.distributed (NCCL, Gloo)
    def _dist(self, op, t: torch.Tensor) -> None:
        self._ready(t)  # one clock: the queued forward/backward finishes outside the comm phase
        with self.timer.phase("comm"):
            for piece in self._pieces(t):
                op(piece)
                self.messages += 1
            if t.is_cuda:
                torch.cuda.current_stream(t.device).synchronize()

    def _global_rank(self, rank_in_group: int) -> int:
        if self._dist_group is None:
            return rank_in_group
        return torch.distributed.get_global_rank(self._dist_group, rank_in_group)

    def _scratch(self, like: torch.Tensor) -> torch.Tensor:
        if getattr(self, "_scratch_t", None) is None:
            self._scratch_t = torch.empty_like(like)
        return self._scratch_t


def init_torch_dist(backend: str, world: MPI.Comm, worker_ranks: tuple[int, ...], device: torch.device):
    """A torch.distributed process group (NCCL or Gloo) for the workers, rendezvous through MPI.

    Returns the workers' group, or None when the workers are the whole world.
    """
    import torch.distributed as dist  # lazy: only the nccl and gloo backends load it

    address = None
    if world.Get_rank() == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            address = (socket.gethostbyname(socket.gethostname()), s.getsockname()[1])
    host, port = world.bcast(address, root=0)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{host}:{port}",
        rank=world.Get_rank(),
        world_size=world.Get_size(),
        device_id=device if backend == "nccl" else None,
    )
    if len(worker_ranks) == world.Get_size():
        return None
    return dist.new_group(ranks=list(worker_ranks))


def close_torch_dist() -> None:
    """Destroy the process group, if this run made one (torch warns about, and may hang on, a leaked one)."""
    import torch.distributed as dist  # lazy: only the nccl and gloo backends load it

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
