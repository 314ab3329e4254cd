"""The simulated meter (scaledl.sim.roofline): which copies cross PCIe, in which direction, and what they cost."""

from __future__ import annotations

import pytest
import torch

from scaledl.comm import buffers
from scaledl.comm.buffers import HostStage, host_array, is_host_buffer
from scaledl.comm.timing import PhaseTimer
from scaledl.sim.roofline import Device, Meter, OpCounter, SkipMode

GPU = Device("gpu", flops=4e12, efficiency=0.35, memory_bw=240e9, op_overhead_s=1e-5, pcie=True)
CPU = Device("cpu", flops=2e12, efficiency=0.3, memory_bw=120e9, op_overhead_s=5e-6, pcie=False)
N = 100_000  # float32 words: 400 kB


class Ledger:
    """What a meter paid: PCIe transfers (bytes, direction) and executions (seconds)."""

    def __init__(self, device: Device = GPU):
        self.pcie: list[tuple[int, bool]] = []
        self.seconds: list[float] = []
        self.on_cpu: list[bool] = []
        self.meter = Meter(device, CPU, self.charge, lambda n, to_device: self.pcie.append((n, to_device)))

    def charge(self, seconds: float, on_cpu: bool = False) -> None:
        self.seconds.append(seconds)
        self.on_cpu.append(on_cpu)


def test_a_center_copied_from_its_host_buffer_crosses_pcie_once_to_the_device():
    ledger, center_host, center_copy = Ledger(), host_array(N), torch.empty(N)
    for _ in range(3):  # priced once per call site, paid every time
        with ledger.meter.phase("param_copy"):
            center_copy.copy_(torch.from_numpy(center_host))
    assert ledger.pcie == [(4 * N, True)] * 3 and ledger.seconds == []


def test_a_staged_send_crosses_to_the_host_and_a_staged_receive_back():
    ledger, weights = Ledger(), torch.randn(N)
    stage = HostStage(weights, PhaseTimer())  # a real run's staging: here (a CPU tensor) it stays on the host
    assert stage.on_host
    host = torch.empty(N)
    buffers._register_host(host)  # what HostStage does with its mirror where the device needs staging
    with ledger.meter.phase("param_copy"):
        host.copy_(weights)
    with ledger.meter.phase("param_copy"):
        weights.copy_(host)
    assert ledger.pcie == [(4 * N, False), (4 * N, True)]


def test_a_copy_within_one_memory_is_memory_traffic_and_a_cpu_has_no_pcie():
    ledger, a, b = Ledger(), torch.randn(N), torch.empty(N)
    with ledger.meter.phase("param_copy"):
        b.copy_(a)  # device to device: neither side is a host buffer (read both, write one)
    assert ledger.pcie == [] and ledger.seconds == [pytest.approx(GPU.op_overhead_s + 3 * 4 * N / GPU.memory_bw)]
    assert ledger.on_cpu == [False]  # the device's own memory
    cpu = Ledger(CPU)
    with cpu.meter.phase("param_copy"):
        b.copy_(torch.from_numpy(host_array(N)))
    assert cpu.pcie == [] and len(cpu.seconds) == 1


def test_the_batch_moves_to_the_device_and_host_buffers_are_forgotten_when_freed():
    ledger, batch = Ledger(), torch.randn(64, 1, 28, 28)
    with ledger.meter.phase("h2d"):
        batch.clone()  # what .to(device) copies on a real GPU
    assert ledger.pcie == [(batch.nbytes, True)]
    buffer = host_array(N)
    view = torch.from_numpy(buffer)
    assert is_host_buffer(view) and is_host_buffer(view[N // 2 :])
    del buffer, view
    assert not is_host_buffer(torch.empty(N))  # (a new tensor may reuse the freed address: it must not count)


def test_collective_arithmetic_is_the_hosts_memory_traffic():
    ledger = Ledger()
    ledger.meter.reduction(4 * N)
    assert ledger.seconds == [pytest.approx(3 * 4 * N / CPU.memory_bw)] and ledger.on_cpu == [True]


def test_arithmetic_on_host_buffers_inside_an_epoch_is_the_cpus():
    """A window epoch's elastic difference runs on what MPI read into host memory: the node's CPU prices it."""
    ledger, center, weights = Ledger(), torch.randn(N), torch.randn(N)
    with ledger.meter.phase("host_arithmetic"):
        weights - center  # read two, write one
    assert ledger.pcie == [] and ledger.seconds == [pytest.approx(CPU.op_overhead_s + 3 * 4 * N / CPU.memory_bw)]
    assert ledger.on_cpu == [True]  # host work


def gather_price(rows: int) -> float:
    """The data phase's price of gathering a 64-row uint8 batch of 28×28 images from a shard of `rows` rows,
    as the loader does it (index_select into a batch buffer)."""
    ledger, shard = Ledger(CPU), torch.zeros(rows, 1, 28, 28, dtype=torch.uint8)
    index, out = torch.randint(0, rows, (64,)), torch.empty(64, 1, 28, 28, dtype=torch.uint8)
    with ledger.meter.phase("data"):
        torch.index_select(shard, 0, index, out=out)
    (seconds,) = ledger.seconds
    return seconds


def test_a_gather_costs_what_it_reads_not_the_shard_it_reads_from():
    batch = 64 * 28 * 28  # uint8 bytes
    assert gather_price(180) == gather_price(60_000)  # the whole shard was priced as read: 9 µs against 105 µs
    assert gather_price(180) == pytest.approx(CPU.op_overhead_s + (64 * 8 + 2 * batch) / CPU.memory_bw)


def test_a_scatter_into_a_batch_costs_the_rows_it_writes():
    """The streamed loader assembles a batch block by block: out[rows] = block[picked]."""
    prices = []
    for rows in (180, 60_000):
        ledger, block, out = (
            Ledger(CPU),
            torch.zeros(rows, 784, dtype=torch.uint8),
            torch.empty(rows, 784, dtype=torch.uint8),
        )
        picked, where = torch.randint(0, rows, (64,)), torch.arange(64)
        with ledger.meter.phase("data"):
            out[where] = block[picked]
        prices.append(ledger.seconds)
    assert (
        prices[0] == prices[1] == [pytest.approx(2 * CPU.op_overhead_s + 2 * (64 * 8 + 2 * 64 * 784) / CPU.memory_bw)]
    )


def test_an_out_tensor_is_written_once_not_read():
    ledger, a, b, out = Ledger(CPU), torch.randn(N), torch.randn(N), torch.empty(N)
    with ledger.meter.phase("host_arithmetic"):
        torch.sub(a, b, out=out)  # read two, write one: 3 words an element, not 4
    assert ledger.seconds == [pytest.approx(CPU.op_overhead_s + 3 * 4 * N / CPU.memory_bw)]


def test_a_mark_pays_the_phase_so_far_and_every_later_pass_pays_at_its_marks():
    """A gradient bucket leaves from a backward hook: the backward pass up to it is charged before it starts."""
    ledger, a = Ledger(CPU), torch.randn(N)
    ledger.meter.mark()  # outside any phase: nothing to charge
    for _ in range(2):  # one call site: counted in the first pass, paid from the record in the second
        with ledger.meter.phase("compute"):
            a * 2
            ledger.meter.mark()
            a * 2
            a * 2
    one = CPU.op_overhead_s + 2 * 4 * N / CPU.memory_bw
    assert ledger.seconds == [pytest.approx(s) for s in (one, 2 * one, one, 2 * one)]


def a_training_step(model: torch.nn.Module, meter: Meter, batch: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)  # every step's backward the same (a first one would assign, not add)
    with meter.phase("compute"):
        loss = torch.nn.functional.cross_entropy(model(batch), torch.zeros(len(batch), dtype=torch.long))
        loss.backward()
    with meter.phase("update"):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.1)


def test_time_only_charges_what_computing_charges_and_computes_nothing():
    """The price needs only shapes, so a time-only meter charges each phase as a computing one does, while the
    weights keep their values and every rank but the first reuses the prices (counted once per job)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(10))
    batch = torch.randn(4, 3, 12, 12)
    model(batch)  # the lazy layer takes its shape
    full, shared = Ledger(), {}
    for _ in range(2):
        a_training_step(model, full.meter, batch)
    before = [p.detach().clone() for p in model.parameters()]
    ranks = [Ledger() for _ in range(2)]
    for ledger in ranks:
        ledger.meter = Meter(GPU, CPU, ledger.charge, lambda n, to_device: None, prices=shared, time_only=True)
        for _ in range(2):
            a_training_step(model, ledger.meter, batch)
    assert all(ledger.seconds == pytest.approx(full.seconds, rel=1e-12) for ledger in ranks)
    assert len(shared) == 2  # two call sites, counted once for both ranks
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_time_only_phase_priced_before_as_one_piece_may_be_left_out_on_any_host_of_its_model():
    """The loop leaves a step's forward and backward out where the meter says so: only in a time-only run, only
    once that phase at that call site was priced (by any rank, on any host whose device has the same constants),
    and never where a mark inside must fire at its moment (a gradient bucket's message)."""

    def entered(meter: Meter, marked: bool = False) -> list[bool]:
        said = []
        for _ in range(2):
            with meter.phase("compute") as priced_before:
                said.append(priced_before)
                torch.randn(N) * 2
                if marked:
                    meter.mark()
        return said

    shared, marked_prices = {}, {}
    twin = Device("cpu7", CPU.flops, CPU.efficiency, CPU.memory_bw, CPU.op_overhead_s, CPU.pcie)
    assert twin == CPU and hash(twin) == hash(CPU)  # another host of the same model prices alike
    meters = [Meter(device, CPU, lambda s, on_cpu=False: None, lambda n, d: None, prices=shared, time_only=True)
              for device in (CPU, twin)]  # fmt: skip
    assert entered(meters[0]) == [False, True] and entered(meters[1]) == [True, True]
    assert entered(Ledger(CPU).meter) == [False, False]  # a full simulation computes every step
    marking = Meter(CPU, CPU, lambda s, on_cpu=False: None, lambda n, d: None, prices=marked_prices, time_only=True)
    assert entered(marking, marked=True) == [False, False]


def test_a_skipped_copy_to_a_named_device_is_not_made():
    """The batch's copy to channels-last names its device (`_to_copy(..., device=cpu)`): its shape comes from the
    meta kernel like any other operation's, not from running the copy (30 ms a step for an ImageNet batch)."""
    batch = torch.empty(8, 3, 224, 224, dtype=torch.uint8)  # 1.2 MB: a large output, over the shared storage
    with SkipMode():
        first = batch.to(memory_format=torch.channels_last)
        second = batch.to(memory_format=torch.channels_last)
    assert first.shape == batch.shape and first.is_contiguous(memory_format=torch.channels_last)
    assert first.untyped_storage().data_ptr() == second.untyped_storage().data_ptr()  # neither was allocated


def test_a_skipped_operation_has_its_outputs_shapes_and_leaves_what_it_writes_as_it_was():
    x, out = torch.randn(5, 7), torch.full((5, 3), 2.0)
    with SkipMode():
        product = x @ torch.randn(7, 3)
        values, indices = x.max(dim=1)
        written = torch.mm(x, torch.randn(7, 3), out=out)
        loss = x.sum().item()  # small outputs are zeros: a value read back is finite
    assert product.shape == (5, 3) and values.shape == indices.shape == (5,) and indices.dtype == torch.long
    assert written is out and torch.equal(out, torch.full((5, 3), 2.0))
    assert loss == 0.0


def test_skipped_large_outputs_share_one_untouched_storage_and_stay_apart_for_autograd():
    x = torch.empty(512, 1024, requires_grad=True)  # 2 MB: above the zeroed size
    with SkipMode():
        a = torch.relu(x @ torch.empty(1024, 1024))
        b = torch.tanh(a)
        b.sum().backward()  # autograd sees each output as a tensor of its own: no in-place conflict
    assert a.shape == b.shape == (512, 1024) and a.is_contiguous() and x.grad.shape == x.shape
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # no allocation per operation
    assert a._version == b._version == 0


def test_a_products_dimensions_are_its_rows_columns_and_depth():
    from scaledl.sim.roofline import gemm_dims

    x, w = torch.randn(8, 64, 4, 4), torch.randn(128, 64, 3, 3)
    out = torch.nn.functional.conv2d(x, w, padding=1)
    conv_args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert gemm_dims("convolution", conv_args, [out]) == (8 * 16, 128, 64 * 9)
    backward_args = (out, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    assert gemm_dims("convolution_backward", backward_args, []) == (8 * 16, 128, 64 * 9)  # the forward's
    a, b = torch.randn(16, 800), torch.randn(800, 500)
    assert gemm_dims("addmm", (torch.randn(500), a, b), []) == gemm_dims("mm", (a, b), []) == (16, 500, 800)
    assert gemm_dims("add", (a, a), []) is None


def test_a_small_product_runs_at_a_fraction_of_a_large_ones_rate_where_the_platform_says_so():
    from dataclasses import replace

    shaped = replace(CPU, gemm_halves=(64.0, 8.0, 64.0), conv_overhead_s=4e-5)
    assert shaped.gemm_efficiency(None) == CPU.gemm_efficiency((8, 8, 8)) == CPU.efficiency  # no curve: one rate
    assert shaped.gemm_efficiency((64, 8, 64)) == pytest.approx(CPU.efficiency / 8)  # each dimension at its half
    x, w = torch.randn(8, 256, 1, 1), torch.randn(256, 256, 3, 3)
    prices = []
    for device in (CPU, shaped):
        with OpCounter(device) as counter:
            torch.nn.functional.conv2d(x, w, padding=1)
        prices.append(counter.seconds)
    assert prices[1] > 5 * prices[0]  # rows 8 of half 64: the flops at a ninth of the rate, and 40 µs a call
