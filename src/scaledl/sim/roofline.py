"""What a simulated rank's work costs: each timed phase's operations, charged to the simulated clock.

The numerics are real (PyTorch on this machine's CPU); the time is the
platform's. When a rank leaves a phase that does work, its meter charges the
phase's cost to the simulated clock as an execution on the rank's host (or, for
host↔device copies, as a transfer over the node's PCIe link):

    compute, update, center_update, data, host_arithmetic
               per operation a roofline: overhead + max(FLOPs / (peak × efficiency),
               bytes / memory bandwidth), a matrix product's or convolution's efficiency by its
               shape where the platform states it (Device.gemm_efficiency); FLOPs of matrix products and convolutions
               as torch.utils.flop_counter counts them, bytes every tensor the operation
               reads and writes (views move nothing and cost nothing; an out= tensor is
               written, not read; an indexing operation reads the rows it picks, not the
               whole tensor it picks them from)
    h2d, param_copy
               on a device behind PCIe: the bytes the phase copies to the device
               (h2d: the batch) or between a host buffer and the device (param_copy,
               in the copy's direction) cross the link between the node's CPU host
               and the rank's device host; on a device without one (a CPU, a KNL):
               as above
    comm, wait, eval, checkpoint
               nothing here: the messages cost what the network says, waits last as
               long as the peers take, and evaluation and checkpoints are off the clock

A phase's operations are counted the first time a rank enters it from a given
line of code, and charged at that price every later time (the work at one call
site is the same every step: the same layers on the same batch shape), so the
counting costs one step per call site, not every step. Where the code marks a
point inside a phase (a gradient bucket leaving from a backward hook,
`Meter.mark`), the phase is charged in pieces, each at its mark. The price depends only
on shapes, so two simulations of one configuration charge alike: a simulated
run is repeatable to the bit.

Time-only (`--time-only`, for runs that want seconds per step, not accuracy):
the priced phases' operations are not computed at all (SkipMode gives each
output its shape, and leaves what an operation would write in place as it
was; the counter needs only shapes), ranks on the same device share their
prices (each call site is counted once per job), and an evaluation computes
nothing. The messages keep their sizes, so the simulated
seconds are a full simulation's; the losses and accuracies are not results.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.flop_counter import flop_registry

from scaledl.comm.buffers import is_host_buffer
from scaledl.sim.replicas import extent, to_meta

ROOFLINE = ("compute", "update", "center_update", "data", "host_arithmetic")
# on the node's CPU: the batch's preparation, and arithmetic on host buffers inside a comm phase (a window
# epoch's elastic difference or momentum: torch.from_numpy views of what MPI read), which no timer phase names
ON_HOST = ("data", "host_arithmetic")
COPIES = ("h2d", "param_copy")
REAL_WORK = (*ROOFLINE, *COPIES)  # phases whose real seconds are numerics (Meter.real_s; evaluations time themselves)
COPY_OPS = ("copy_", "_to_copy", "clone")
# Operations that read only the rows their indices pick: priced by their indices and twice their output (the
# rows read, then written), not by the whole source (a 64-row batch gathered from a 60,000-row set moves 64 rows).
INDEXING_OPS = ("index_select", "index", "gather", "take", "embedding")
# ... and their converse, which writes the rows its indices pick (a streamed batch assembled block by block)
SCATTER_OPS = ("index_put", "index_put_", "_index_put_impl_")


@dataclass(frozen=True)
class Device:
    """A simulated device: what the platform file says of a host (its properties, scaledl.sim.platform)."""

    name: str = field(compare=False)  # the host's: hosts of one model price alike (a time-only run shares prices)
    flops: float  # peak FLOP/s (float32)
    efficiency: float  # the fraction of peak that matrix products and convolutions reach
    memory_bw: float  # bytes/s of its memory
    op_overhead_s: float  # per operation: a kernel launch, or the framework's dispatch on a CPU
    pcie: bool  # a device behind the node's PCIe link (a GPU): copies to and from the host cross it
    # where a matrix product's or convolution's efficiency halves, per dimension of its product (rows: batch ×
    # output pixels; columns: output channels; depth: what each output sums over): `gemm_efficiency`. None: one
    # efficiency for every shape.
    gemm_halves: tuple[float, float, float] | None = None
    conv_overhead_s: float | None = None  # per convolution (a oneDNN primitive's set-up); None: op_overhead_s

    def gemm_efficiency(self, dims: tuple[int, int, int] | None) -> float:
        """The fraction of peak a matrix product or convolution of product dimensions `dims` reaches: the
        device's efficiency, times d / (d + half) per dimension where the device states its halves (a small
        product keeps the vector units and caches half idle: measured here, a 3×3 convolution of 256 channels
        on 1 × 1 pixels at batch 8 ran at a sixth of the rate of one on 8 × 8 pixels)."""
        if self.gemm_halves is None or dims is None:
            return self.efficiency
        fraction = self.efficiency
        for size, half in zip(dims, self.gemm_halves):
            fraction *= size / (size + half)
        return fraction


@dataclass
class Price:
    seconds: float  # on the device
    to_device: int = 0  # bytes across PCIe, host to device (copies, on a device behind it)
    to_host: int = 0  # bytes across PCIe, device to host


@dataclass
class _Open:
    """A phase a rank is in: counting its operations (first pass) or paying its recorded pieces."""

    name: str
    counter: OpCounter | None
    pieces: list[Price] | None  # recorded in the first pass: one per mark(), then the rest of the phase
    paid: int = 0
    taken: list[Price] = field(default_factory=list)  # first pass: the pieces so far
    _before: tuple = (0.0, 0, 0, 0)

    def take(self, meter: Meter) -> Price:
        """First pass: the price of what the counter saw since the last piece."""
        c = self.counter
        now = (c.seconds, c.copied, c.to_device, c.to_host)
        piece = meter._price(self.name, tuple(a - b for a, b in zip(now, self._before)))
        self._before = now
        self.taken.append(piece)
        return piece


class OpCounter(TorchDispatchMode):
    """Every operation's roofline seconds on `device`, the bytes copied (the source's) by copy operations, and of
    those the bytes between a host buffer and other memory (comm.buffers.is_host_buffer), by direction."""

    def __init__(self, device: Device):
        super().__init__()
        self.device = device
        self.seconds = 0.0
        self.flops = 0  # what torch.utils.flop_counter counts (matrix products, convolutions): a rate's numerator
        self.copied = 0
        self.to_device = 0
        self.to_host = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.is_view:
            return out
        packet = func._overloadpacket
        written_only = _out_arguments(func, args, kwargs)  # an out= tensor is written, not read: counted once
        inputs = [
            t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor) and id(t) not in written_only
        ]
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        written = sum(t.nbytes for t in outputs)
        name = packet.__name__
        if name in INDEXING_OPS:
            moved = sum(t.nbytes for t in inputs[1:]) + 2 * written  # the indices, the rows read, the output
        elif name in SCATTER_OPS:  # (self, indices..., values): the indices, the values read, the rows written
            moved = sum(t.nbytes for t in inputs[1:-1]) + 2 * inputs[-1].nbytes
        else:
            moved = sum(t.nbytes for t in inputs) + written
        if name in COPY_OPS:
            source, target = (inputs[-1], inputs[0]) if name == "copy_" else (inputs[0], outputs[0])
            self.copied += source.nbytes
            from_host, to_host = is_host_buffer(source), is_host_buffer(target)
            if from_host and not to_host:
                self.to_device += source.nbytes
            elif to_host and not from_host:
                self.to_host += source.nbytes
        flops = flop_registry[packet](*args, **kwargs, out_val=out) if packet in flop_registry else 0
        self.flops += flops
        d = self.device
        efficiency = d.gemm_efficiency(gemm_dims(name, args, outputs)) if flops else d.efficiency
        overhead = d.conv_overhead_s if name in CONVOLUTIONS and d.conv_overhead_s is not None else d.op_overhead_s
        self.seconds += overhead + max(flops / (d.flops * efficiency), moved / d.memory_bw)
        return out


CONVOLUTIONS = ("convolution", "convolution_backward")


def gemm_dims(name: str, args, outputs) -> tuple[int, int, int] | None:
    """A matrix product's or convolution's dimensions as one product (rows, columns, depth): for a convolution,
    batch × output pixels, output channels, input channels per group × kernel area; its backward pass is priced
    on the forward's dimensions. None for any other operation."""
    if name == "convolution" and not args[6]:  # not transposed
        out, weight = outputs[0], args[1]
        return out.shape[0] * math.prod(out.shape[2:]), weight.shape[0], weight.shape[1] * math.prod(weight.shape[2:])
    if name == "convolution_backward" and not args[7]:
        grad, weight = args[0], args[2]
        return grad.shape[0] * math.prod(grad.shape[2:]), weight.shape[0], weight.shape[1] * math.prod(weight.shape[2:])
    if name in ("mm", "addmm", "bmm"):
        a, b = args[-2:] if name == "addmm" else args[:2]
        return a.shape[:-1].numel(), b.shape[-1], a.shape[-1]
    return None


def _out_arguments(func, args, kwargs) -> set[int]:
    """The ids of the tensors an operation's out= arguments pass (its result's memory, not an operand)."""
    found = set()
    for i, argument in enumerate(func._schema.arguments):
        if argument.is_out:
            value = args[i] if i < len(args) else kwargs.get(argument.name)
            found.update(id(t) for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor))
    return found


class SkipMode(TorchDispatchMode):
    """Time-only: an operation is not computed. Its outputs get their shapes (from the operation's meta
    kernel, remembered per operation and input layout; _zeros_like); what it would write in place keeps its
    values; views, and an operation without a meta kernel (a data-dependent shape, `.item()`), run for real."""

    _shapes: dict = {}  # (operation, its inputs' layouts) -> its outputs on the meta device; shared by every rank

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.is_view:
            return func(*args, **kwargs)
        key = _layout_key(func, args, kwargs)
        shapes = self._shapes.get(key) if key is not None else None
        if shapes is None:
            try:
                shapes = _as_on_cpu(func, args, func(*tree_map(to_meta, args), **tree_map(to_meta, kwargs)))
            except (NotImplementedError, RuntimeError):
                return func(*args, **kwargs)
            if key is not None:
                self._shapes[key] = shapes
        written = _written_arguments(func, args, kwargs)
        returns = func._schema.returns
        if len(returns) == 1:
            return _returned(returns[0], shapes, written)
        return type(shapes)(_returned(r, value, written) for r, value in zip(returns, shapes))


def _layout_key(func, args, kwargs):
    """What an operation's output shapes depend on: its inputs' shapes, strides and dtypes and its other
    arguments; None where an argument cannot be a key. (By hand, not with a pytree: ATen's arguments are
    values or flat lists, and this runs for every skipped operation.)"""
    key = [func, len(args), *kwargs]
    try:
        for value in (*args, *kwargs.values()):
            if isinstance(value, (list, tuple)):
                key.append(("seq", len(value)))
                key.extend(_leaf_key(leaf) for leaf in value)
            else:
                key.append(_leaf_key(value))
    except _Unkeyable:
        return None
    return tuple(key)


class _Unkeyable(Exception):
    pass


_KEYED_AS_IS = (bool, int, float, str, torch.dtype, torch.device, torch.layout)


def _leaf_key(leaf):
    if isinstance(leaf, torch.Tensor):
        return (tuple(leaf.shape), leaf.stride(), leaf.dtype, leaf.device.type)
    if leaf is None or isinstance(leaf, _KEYED_AS_IS):
        return leaf
    if isinstance(leaf, torch.memory_format):
        return str(leaf)
    raise _Unkeyable


def _as_on_cpu(func, args, shapes):
    """The outputs' layout as the CPU computes them: oneDNN's convolution keeps a channels-last input's layout
    (the batches are channels-last on a CPU: scaledl.data.loader.Normalizer), where the meta kernel, knowing no
    backend, returns NCHW; left as they were, the operations after it would be priced on other layouts."""
    x = args[0] if args else None
    if func is torch.ops.aten.convolution.default and x.device.type == "cpu" and x.dim() == 4 and x.stride(1) == 1:
        return shapes.to(memory_format=torch.channels_last)
    return shapes


def _written_arguments(func, args, kwargs) -> dict:
    """The arguments an operation writes (in place, out=), by their alias set: what its aliasing outputs return."""
    written = {}
    writes = _WRITES.get(func)
    for i, name, alias in writes if writes is not None else _writes(func):
        written[alias] = args[i] if i < len(args) else kwargs.get(name)
    return written


_WRITES: dict = {}  # operation -> (position, name, alias set) of each argument it writes


def _writes(func) -> list:
    found = [
        (i, argument.name, frozenset(argument.alias_info.before_set))
        for i, argument in enumerate(func._schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
    ]
    _WRITES[func] = found
    return found


def _returned(schema_return, shape, written: dict):
    info = schema_return.alias_info
    if info is not None and frozenset(info.before_set) in written:
        return written[frozenset(info.before_set)]
    return _zeros_like(shape) if isinstance(shape, torch.Tensor) else tree_map(_zeros_like, shape)


ZEROED_BYTES = 1 << 20  # outputs up to this size read as zeros: the small ones are those read back (a loss)


def _zeros_like(value):
    """A real tensor shaped like `value` (a meta tensor), over memory shared with every other skipped output of
    its dtype, so it costs neither an allocation nor memory traffic: up to ZEROED_BYTES a view of one zero-filled
    storage (a loss read back reads 0), larger ones (an activation, a gradient) a view of one storage left
    unwritten, whose reads are skipped too. No skipped operation writes either (what it would write in place
    keeps its values). Zeroing a fresh small output per operation was four fifths of a time-only GoogLeNet step,
    and allocating a fresh activation per operation a quarter of a run."""
    if not isinstance(value, torch.Tensor):
        return value
    zeroed = value.nbytes <= ZEROED_BYTES
    return _shared_view(_ZEROED if zeroed else _UNWRITTEN, value.shape, value.stride(), value.dtype, zeroed)


_ZEROED: dict[torch.dtype, torch.UntypedStorage] = {}  # per dtype: zero-filled once, written by no skipped operation
_UNWRITTEN: dict[torch.dtype, torch.UntypedStorage] = {}  # per dtype: never written by a skipped operation


def _shared_view(table: dict, shape, stride, dtype: torch.dtype, zeroed: bool) -> torch.Tensor:
    """A tensor of `shape` and `stride` over the dtype's storage in `table` (grown when too small; an unwritten
    one is never paged in). A tensor of its own: its own version counter, so autograd sees no aliasing."""
    nbytes = extent(shape, stride) * dtype.itemsize
    storage = table.get(dtype)
    if storage is None or storage.nbytes() < nbytes:
        # a storage made directly, not by an operation: a time-only rank's pool (scaledl.sim.replicas) never sees it
        storage = table[dtype] = torch.UntypedStorage(max(nbytes, 1 << 12))
        if zeroed:
            storage.fill_(0)
    with torch._C._DisableTorchDispatch():  # made here, not an operation any mode (a rank's pool) needs to see
        return torch.empty(0, dtype=dtype).set_(storage, 0, shape, stride)


_HERE = (__file__, contextlib.__file__)


def call_site(skip: tuple[str, ...]) -> tuple:
    """The code location that opened the phase: the first frame outside the timer and contextlib."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename in skip:
        frame = frame.f_back
    return (frame.f_code, frame.f_lineno) if frame is not None else None


class Meter:
    """One simulated rank's prices (shared by its helper actors) and how they are charged.

    `charge(seconds, on_cpu)` runs an execution of that length on the rank's host, or (`on_cpu`: host work
    priced at the node's CPU: the batch, host arithmetic, MPI's reductions) on the node's CPU host, shared
    with the node's other ranks; `pcie(nbytes, to_device)` moves bytes over the node's PCIe link; `slowdown`
    stretches the rank's compute (a straggler).
    """

    def __init__(
        self,
        device: Device,
        host_device: Device,
        charge,
        pcie,
        slowdown: float = 1.0,
        skip=(),
        prices: dict | None = None,
        time_only: bool = False,
        apply_here=None,
    ):
        self.device = device
        self.host_device = host_device  # the node's CPU: where `data` runs
        self.charge = charge
        self.pcie = pcie
        self.slowdown = slowdown
        self.skip = (*_HERE, *skip)
        # (phase, call site, device) -> its pieces (one without marks); shared by the ranks in time-only mode
        self.prices: dict[tuple, list[Price]] = {} if prices is None else prices
        self.time_only = time_only  # a priced phase's operations are skipped (SkipMode), only its price charged
        # seconds of another rank's accumulate applied to this rank's memory, executed on this rank's memory host
        # (whoever calls); without one (a test's meter), as host work of the caller
        self.apply_here = apply_here or (lambda seconds: charge(seconds, on_cpu=True))
        self._open: dict[int, _Open] = {}  # per actor thread: the innermost phase it is in
        self.real_s = 0.0  # this machine's CPU seconds in the rank's numerics (what a simulation cannot avoid)

    @contextlib.contextmanager
    def phase(self, name: str):
        """Price the block as phase `name`'s work. Yields whether the block may be left out: in a time-only run,
        once this phase at this call site has been priced (by any rank) as one piece (no mark inside: nothing in
        it must happen at a given moment), its price alone is paid and running it would only compute nothing."""
        if name not in REAL_WORK:
            with SkipMode() if self.time_only and name == "eval" else contextlib.nullcontext():
                yield False
            return
        device = self.host_device if name in ON_HOST else self.device
        key = (name, call_site(self.skip), device)
        pieces = self.prices.get(key)
        current = _Open(name, OpCounter(device) if pieces is None else None, pieces)
        me = threading.get_ident()  # each actor is a thread of its own; a rank's helpers share its meter
        outer = self._open.get(me)
        self._open[me] = current
        t0 = time.thread_time()  # this actor's own CPU seconds: a simcall inside the phase lets other actors run
        try:
            # time-only: nothing is computed, not even while counting (the counter reads shapes only)
            with (
                SkipMode() if self.time_only else contextlib.nullcontext(),
                current.counter or contextlib.nullcontext(),
            ):
                yield self.time_only and pieces is not None and len(pieces) == 1
        finally:
            self._open[me] = outer
        self.real_s += time.thread_time() - t0
        if current.counter is not None:
            current.take(self)
            self.prices[key] = current.taken  # before paying: paying lets the other ranks run, and they may skip
            self._pay(name, current.taken[-1])
        else:
            for piece in pieces[current.paid :]:
                self._pay(name, piece)

    def mark(self) -> None:
        """Charge the innermost open phase's work up to here (a gradient bucket is about to leave from a backward
        hook: its message must start when the backward pass got there, not when the phase began). The pieces
        are counted in the first pass and paid at the same marks afterwards."""
        current = self._open.get(threading.get_ident())
        if current is None:
            return
        if current.counter is not None:
            self._pay(current.name, current.take(self))
        elif current.paid < len(current.pieces) - 1:  # the last piece is paid when the phase ends
            self._pay(current.name, current.pieces[current.paid])
            current.paid += 1

    def _price(self, name: str, counted: tuple) -> Price:
        """On a device behind PCIe, `h2d` moves the batch to the device (every byte it copies), and any phase
        moves what it copies between a host buffer and the device (param_copy's weights; a gradient bucket
        staged from a backward hook, inside compute), each copy in its own direction; a copy within one
        memory is the roofline's. `counted`: an OpCounter's (seconds, copied, to_device, to_host)."""
        seconds, copied, to_device, to_host = counted
        if not self.device.pcie:
            return Price(seconds)
        if name == "h2d":
            return Price(seconds, to_device=copied)
        return Price(seconds, to_device=to_device, to_host=to_host)

    def _pay(self, name: str, price: Price) -> None:
        seconds = price.seconds * (self.slowdown if name == "compute" else 1.0)
        if price.to_host:
            self.pcie(price.to_host, to_device=False)
        if price.to_device:
            self.pcie(price.to_device, to_device=True)
        if name in COPIES and (price.to_host or price.to_device):
            seconds = 0.0  # the copies' own roofline seconds are the PCIe transfer, already paid
        if seconds > 0:
            self.charge(seconds, on_cpu=name in ON_HOST)

    def accumulate_here(self, nbytes: int) -> None:
        """An accumulate of `nbytes` of operands into this rank's memory (a window it exposes): read two, write
        one, at its memory host's speed, executed there, not on the host of the rank that issued it."""
        self.apply_here(3 * nbytes / self.host_device.memory_bw)

    def reduction(self, nbytes: int, on_device: bool = False) -> None:
        """A collective's arithmetic on `nbytes` of this rank's data: read two operands, write one, by the MPI
        library on the host buffers it was given (comm.buffers stages a GPU's), so at the host's memory speed
        and without a framework's per-operation overhead; on a device buffer (a CUDA-aware call), one kernel
        on the device at its memory speed."""
        if on_device:
            self.charge(self.device.op_overhead_s + 3 * nbytes / self.device.memory_bw, on_cpu=False)
        else:
            self.charge(3 * nbytes / self.host_device.memory_bw, on_cpu=True)
