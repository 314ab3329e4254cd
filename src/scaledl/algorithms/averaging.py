"""The periodic-averaging engine: Sync EASGD, local SGD, DiLoCo and SlowMo as settings of one round.

P workers W^i, a center W on worker 0 (the master). Each iteration every
worker takes an inner step (`--inner`: sgd, W^i ← W^i − η·ΔW^i, or momentum,
V^i ← μ·V^i − η·ΔW^i ; W^i ← W^i + V^i); every τ-th iteration (t mod τ = 0,
the first one included, as Sync EASGD and PyTorch's PeriodicModelAverager
count) is a round of averaging, with x̄ = (1/P)·Σ_i W^i:

    center (`--outer`)        elastic   W ← W + Pα·(x̄ − W)                 (EASGD, Eq. 2; α = ηρ)
                              average   W ← x̄                               (local SGD)
                              nesterov  Δ = W − x̄ ; B ← μ_o·B + Δ ; W ← W − η_o·(Δ + μ_o·B)   (DiLoCo)
                              slowmo    U ← β·U + Δ/η ; W ← W − α_s·η·U     (SlowMo; α_s = η_o, β = μ_o)
    workers (`--worker-rule`) elastic   W^i ← W^i − η·ΔW^i − ηρ·(W^i − W_t)  (EASGD, Eq. 1: the pull uses the
                                        center before its step, and replaces that round's inner step)
                              reset     W^i ← W   (after the inner step and the center's step)

Message pattern of a round (the collectives of `scaledl.comm`), `--exchange`:
    allreduce  every worker holds the center: one Allreduce(sum) gives every rank Σ_i W^i, and every
               rank takes the center's step itself, with the same arithmetic on the same operands,
               so the centers stay bitwise equal (the default; one collective of |W| a round)
    rooted     the master holds the center (the paper's pattern):
               elastic  Bcast W_t from the master, then Reduce(sum) Σ_i W^i_t to it
               reset    Reduce(sum) Σ_i W^i to the master, its outer step, then Bcast W
Beyond the published methods, two settings of the allreduce exchange leave every worker a center of its own:
    --outer-delay 1  a reset round posts Σ_j Δ^j_t (Δ^j = W_j − W^j, the outer gradient) on the helper thread and
                     steps on (Δ^i_t + Σ_{j≠i} Δ^j_{t−1})/P: its own part on time, the others' one round late
    --graph ring     a round sums this worker's W^i and its two ring neighbours' (point to point), not all P
MPI libraries run Allreduce far faster than Bcast + Reduce of the same size
(MPICH's Reduce is several times slower than its Allreduce at 16 MiB), which
is why the allreduce exchange is the default; rooted stays for the ablation.
With `--compress fp16|bf16|int8` a message carries the difference from a
center both sides hold, encoded (scaledl.comm.codecs): the master broadcasts
enc(W − S) and every rank, itself too, sets S ← S + dec(…); the workers send
enc(W^i − S), gathered to the master (encoded values cannot be summed on the
way), which decodes and sums them in rank order: Σ_i W^i = P·S + Σ_i dec(…).
The averaging itself (S, W, the outer state) stays in float32.

int8's rounding error is counted once, where it would otherwise be lost. The
master's message needs no error feedback: S moves by exactly what was sent,
so the next difference W − S already holds what this one's rounding lost
(r = d − dec(enc(d))); adding a kept residual too would send it twice (the
message after d would carry ΔW + 2r − r_prev, and the center every worker
holds would stray from W by the difference of two rounding errors, r_prev − r,
instead of one). A worker's message has no such reference:
the master adds dec(enc(W^i − S)) to the sum and S moves by the center's
step, not by it, so each worker keeps its rounding error and adds it to its
next message (error feedback: no update is lost, only delayed).

Nothing depends on arrival order: bitwise repeatable for a seed and world
size. Sync EASGD (elastic, elastic, τ = 1, sgd, fp32) runs exactly the
arithmetic it always has, so its ladder (sync_easgd1/2/3: where the center
lives, and the exchange overlapped on a helper thread) is unchanged; overlap
needs the elastic rule (its round uses only W^i_t and W_t) and fp32.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from scaledl.algorithms import rules
from scaledl.algorithms.base import Algorithm
from scaledl.algorithms.boundary import BoundaryRequest
from scaledl.algorithms.settings import OUTER_WITH_STATE
from scaledl.comm import transport
from scaledl.comm.codecs import codec
from scaledl.comm.timing import PhaseTimer


class PeriodicAveraging(Algorithm):
    def __init__(self, context):
        super().__init__(context)
        s = self.settings
        w = self.params.data
        self.workers = self.roles.num_workers
        self.on_host = s.center_on == "host"
        place = torch.device("cpu") if self.on_host else w.device

        def buffer() -> torch.Tensor:
            return host_buffer(w) if self.on_host else torch.empty_like(w)

        # Where the center lives on this rank: the master's W, or (allreduce exchange) every worker's replica.
        self.replicated = s.exchange == "allreduce"
        holds_center = self.roles.is_master or self.replicated
        # What travels: W^i (`w_wire`), W from the master (rooted), Σ W^i into `sum_workers` (in the center's memory).
        self.w_wire = host_buffer(w) if self.on_host else w
        self.center_wire = self.center.data if self.roles.is_master else buffer()
        self.sum_workers = buffer() if holds_center else None
        self.codec = codec(s.compress)
        self.compressed = self.codec.compressed
        # W on this worker's device: W_t for Eq. 1, or the center a reset copies (compressed: S, on every rank).
        self.center_copy = self.center_wire if place == w.device and not self.compressed else torch.empty_like(w)
        self.control = self.collectives(self.center_wire)
        self.velocity = torch.zeros_like(w) if s.inner == "momentum" else None  # the inner V^i
        self.outer_buffer = (
            torch.zeros_like(self.center_wire) if holds_center and s.outer in OUTER_WITH_STATE else None
        )  # DiLoCo's B, SlowMo's U
        if self.compressed:
            self.wire = EncodedRound(self.codec, self.params.numel, self.workers, self.roles.is_master)
        # Whose W^j a round sums: every worker's (one Allreduce) or, on a ring, this worker's neighbourhood's.
        self.neighbours = ring_neighbours(self.roles.worker_index, self.workers) if s.graph == "ring" else None
        self.round_count = len(self.neighbours) + 1 if self.neighbours is not None else self.workers
        self.delayed = bool(s.outer_delay)
        self.own_centers = self.delayed or self.neighbours is not None  # the workers' centers differ
        if self.delayed:  # Δ^i_t, posted; the sum of the round before; this worker's own share of that sum
            self.delta_now, self.delta_sum, self.delta_before = buffer(), buffer(), buffer()
            self.delta_sum.zero_(), self.delta_before.zero_()
            self.delta_mixed = buffer()
        if self.settings.overlap or self.delayed:
            self.require_helper_thread()
            # A communicator and a timer of its own: two threads' collectives must share neither.
            self.helper_comm = self.roles.worker_comm.Dup()
            self.helper_timer = PhaseTimer(w.device, sync=self.timer.sync)
            self.coll = self.collectives(self.center_wire, comm=self.helper_comm, timer=self.helper_timer)
            self.helper = transport.helper()
            self.pending = None
            self.handoff_s = 0.0  # the main thread's seconds handing the current exchange to the helper
            # On a GPU the helper enqueues on a stream of its own, ordered after the
            # update that wrote W^i_t by an event: synchronising the main stream instead
            # would wait for the forward/backward queued meanwhile, and nothing would overlap.
            self.exchange_stream = torch.cuda.Stream(w.device) if w.is_cuda else None
            # Per exchange: the helper's seconds and the part the main thread waited for (the rest was
            # hidden behind data and fwd/bwd), so a steady-state window can be cut as from the timeline.
            self.overlap_log: dict[str, list[float]] = {"exchange_s": [], "waited_s": []}
        else:
            self.coll = self.control
        self.iteration = 0

    def start(self) -> None:
        if self.roles.is_master:
            self.center.data.copy_(self.params.data)
        self.control.bcast_(self.center_wire, root=0)
        self.params.data.copy_(self.center_wire)
        if self.compressed:
            self.wire.start(self.params.data)  # S = W_0 on every rank
        self.coll.messages = self.control.messages = 0  # count the exchanges' messages only
        self.exchanges = 0

    def exchanges_now(self) -> bool:
        return self.iteration % self.settings.tau == 0

    # ---- the elastic round (Sync EASGD), overlappable: it needs only W^i_t and W_t
    def begin_iteration(self) -> bool:
        if self.settings.overlap and self.exchanges_now():
            written = torch.cuda.Event() if self.exchange_stream else None
            if written:
                written.record()  # W^i_t is final once this fires
            # The handoff is exposed too: the woken helper may take this thread's core (and the GIL) first.
            t0 = transport.clock()
            with self.timer.phase("wait"):
                self.pending = self.helper.submit(self.exchange_on_helper, written)  # steps 2-3 ∥ step 1
            self.handoff_s = transport.clock() - t0
        return True

    def exchange_on_helper(self, written, exchange=None) -> float:
        """The exchange (default: the elastic round's) on the helper thread (and, on a GPU, on its own stream
        after `written`)."""
        exchange = exchange or (lambda: self.exchange(self.helper_timer))
        if self.exchange_stream is None:
            return exchange()
        with torch.cuda.stream(self.exchange_stream):
            self.exchange_stream.wait_event(written)
            return exchange()

    def exchange(self, timer: PhaseTimer) -> float:
        """Elastic round: Σ_i W^i_t where the center lives, W_t on every worker. Returns its wall seconds."""
        t0 = transport.clock()
        if self.compressed:
            self.wire.down(self.coll, self.center.data if self.roles.is_master else None, timer)
            self.wire.up(self.coll, self.params.data, self.sum_workers, timer)
            return transport.clock() - t0
        if self.on_host:
            with timer.phase("param_copy"):
                self.w_wire.copy_(self.params.data)  # W^i_t into host memory
        if self.replicated:
            self.sum_round(self.coll)  # Σ_i W^i_t on every rank (its neighbourhood's, on a ring), beside its W_t
        else:
            self.coll.bcast_(self.center_wire, root=0)  # W_t to every worker
            self.coll.reduce_sum(self.w_wire, self.sum_workers, root=0)  # Σ_i W^i_t to the master
        return transport.clock() - t0

    def worker_step(self) -> None:
        exchanging = self.exchanges_now()
        self.iteration += 1
        self.exchanges += exchanging
        if not exchanging:
            with self.timer.phase("update"):
                self.inner_step()  # local step between rounds
        elif self.settings.worker_rule == "elastic":
            self.elastic_round()
        else:
            self.reset_round()

    def inner_step(self) -> None:
        w, grad, lr = self.params.data, self.params.grad, self.settings.lr
        if self.velocity is None:
            rules.sgd_(w, grad, lr)
        else:
            rules.momentum_(w, self.velocity, grad, lr, self.settings.momentum)

    def elastic_round(self) -> None:
        w, grad, lr, rho = self.params.data, self.params.grad, self.settings.lr, self.settings.rho
        if self.settings.overlap:
            t0 = transport.clock()
            with self.timer.phase("wait"):  # the exposed part of the exchange
                seconds = self.pending.result()
            self.timer.add_overlapped(seconds)
            self.overlap_log["exchange_s"].append(round(seconds, 7))
            self.overlap_log["waited_s"].append(round(self.handoff_s + transport.clock() - t0, 7))
        else:
            self.exchange(self.timer)
        self.copy_center_in()
        with self.timer.phase("update"):  # Eq. 1 (Eqs. 5–6 with momentum)
            if self.velocity is None:
                rules.elastic_worker_(w, grad, self.center_copy, lr, rho)
            else:
                rules.momentum_elastic_worker_(
                    w, self.velocity, grad, self.center_copy, lr, rho, self.settings.momentum
                )
        if self.sum_workers is not None:
            with self.timer.phase("center_update"):  # Eq. 2, wherever the center lives
                rules.elastic_center_(self.center_wire, self.sum_workers, self.round_count, lr, rho)

    def reset_round(self) -> None:
        """Inner step, Σ_i W^i where the center lives, its outer step, W on every worker, which takes it."""
        with self.timer.phase("update"):
            self.inner_step()
        if self.delayed:
            self.delayed_round()
            return
        if self.compressed:
            self.wire.up(self.coll, self.params.data, self.sum_workers, self.timer)
        else:
            if self.on_host:
                with self.timer.phase("param_copy"):
                    self.w_wire.copy_(self.params.data)
            if self.replicated:
                self.sum_round(self.coll)
            else:
                self.coll.reduce_sum(self.w_wire, self.sum_workers, root=0)
        if self.sum_workers is not None:
            with self.timer.phase("center_update"):
                self.outer_step()
        if self.compressed:
            self.wire.down(self.coll, self.center.data if self.roles.is_master else None, self.timer)
        elif not self.replicated:
            self.coll.bcast_(self.center_wire, root=0)
        self.copy_center_in()
        with self.timer.phase("update"):
            self.params.data.copy_(self.center_copy)  # the reset
            # (an inner momentum V^i carries over, as DiLoCo's inner optimizer state does)

    def sum_round(self, coll) -> None:
        """`sum_workers` ← Σ W^j over every worker (Allreduce) or over this worker's ring neighbourhood."""
        if self.neighbours is None:
            coll.allreduce_sum(self.w_wire, self.sum_workers)
        else:
            coll.neighbourhood_sum(self.w_wire, self.sum_workers, self.neighbours)

    def delayed_round(self) -> None:
        """The eager delayed outer step (--outer-delay 1): this worker's outer gradient Δ^i_t = W^i_start − W^i
        (W^i_start = its center, since the last reset), the others' from the round before (whose Allreduce ran
        beside this round's steps), the outer step on their mix, and the reset; then Σ_j Δ^j_t is posted for
        the next round. The centers of the workers then differ by their own parts: the master's is evaluated."""
        self.await_delayed_sum()
        if self.on_host:
            with self.timer.phase("param_copy"):
                self.w_wire.copy_(self.params.data)
        with self.timer.phase("center_update"):
            torch.sub(self.center_wire, self.w_wire, out=self.delta_now)
            mixed = rules.eager_difference_(
                self.delta_mixed, self.delta_now, self.delta_sum, self.delta_before, self.workers
            )
            self.delta_before.copy_(self.delta_now)
        written = torch.cuda.Event() if self.exchange_stream else None
        if written:
            written.record()
        with self.timer.phase("wait"):  # the handoff: the helper sums Δ^j_t while the next round computes
            self.pending = self.helper.submit(
                self.exchange_on_helper, written, lambda: self.timed_sum(self.delta_now, self.delta_sum)
            )
        with self.timer.phase("center_update"):
            self.outer_step_on(mixed)
        self.copy_center_in()
        with self.timer.phase("update"):
            self.params.data.copy_(self.center_copy)

    def timed_sum(self, src: torch.Tensor, dst: torch.Tensor) -> float:
        t0 = transport.clock()
        self.coll.allreduce_sum(src, dst)
        return transport.clock() - t0

    def await_delayed_sum(self, phase: str | None = "wait") -> None:
        """The round before's Σ_j Δ^j in `delta_sum`, its exposed part timed as `phase` (None: inside a phase
        already, a checkpoint's)."""
        if self.pending is None:
            return
        t0 = transport.clock()
        with self.timer.phase(phase) if phase else contextlib.nullcontext():
            seconds = self.pending.result()
        self.pending = None
        self.timer.add_overlapped(seconds)
        self.overlap_log["exchange_s"].append(round(seconds, 7))
        self.overlap_log["waited_s"].append(round(transport.clock() - t0, 7))

    def outer_step_on(self, delta: torch.Tensor) -> None:
        """The outer step on a given outer gradient Δ (the delayed round's mix), on this worker's center."""
        s, center = self.settings, self.center_wire
        if s.outer == "average":
            rules.outer_average_step_(center, delta)
        elif s.outer == "nesterov":
            rules.outer_nesterov_step_(center, delta, self.outer_buffer, s.outer_lr, s.outer_momentum)
        else:
            rules.outer_slowmo_step_(center, delta, self.outer_buffer, s.lr, s.outer_lr, s.outer_momentum)

    def outer_step(self) -> None:
        s, center, total, p = self.settings, self.center_wire, self.sum_workers, self.round_count
        if s.outer == "elastic":
            rules.elastic_center_(center, total, p, s.lr, s.rho)
        elif s.outer == "average":
            rules.average_(center, total, p)
        elif s.outer == "nesterov":
            rules.outer_nesterov_(center, total, p, self.outer_buffer, s.outer_lr, s.outer_momentum)
        else:
            rules.outer_slowmo_(center, total, p, self.outer_buffer, s.lr, s.outer_lr, s.outer_momentum)

    def copy_center_in(self) -> None:
        """The center as this worker received it onto its device (compressed: S, alike on every rank)."""
        received = self.wire.shared if self.compressed else self.center_wire
        if self.center_copy is not received:
            with self.timer.phase("param_copy"):
                self.center_copy.copy_(received)

    def round_bytes(self) -> int:
        """Bytes a round moves per worker: one message up (W^i) and one down (W); on a ring, W^i to each
        neighbour and each neighbour's W^j back."""
        return 2 * self.codec.nbytes(self.params.numel) * (len(self.neighbours) if self.neighbours else 1)

    def end_iteration(self, loss, batch: int, request: BoundaryRequest) -> BoundaryRequest:
        return BoundaryRequest(self.control.agree_(request))

    def finish(self) -> None:
        if self.settings.overlap or self.delayed:
            self.helper.shutdown()
            self.helper_comm.Free()

    # ---- checkpoints: the τ phase, the counts, V^i, the outer state, the shared center and its residuals
    def state_dict(self) -> dict:
        state = {"iteration": self.iteration, "exchanges": self.exchanges, "messages": self.coll.messages}
        if self.velocity is not None:
            state["velocity"] = self.velocity.cpu()
        if self.outer_buffer is not None:
            state["outer_buffer"] = self.outer_buffer.cpu()
        if self.compressed:
            state["wire"] = self.wire.state_dict()
        if self.delayed:  # the round before's sum, received first: a resumed run takes it as this one would
            self.await_delayed_sum(phase=None)
            state["delta_sum"], state["delta_before"] = self.delta_sum.cpu(), self.delta_before.cpu()
        if self.own_centers:
            state["center"] = self.center_wire.cpu()  # this worker's own (delayed, or a ring's neighbourhood)
        return state

    def load_state_dict(self, state: dict) -> None:
        if self.replicated:  # the checkpoint holds the master's W: every replica takes it again (collective)
            self.control.bcast_(self.center_wire, root=0)
        if self.velocity is not None:
            self.velocity.copy_(state["velocity"])
        if self.outer_buffer is not None:
            if "outer_buffer" in state:
                self.outer_buffer.copy_(state["outer_buffer"])
            if self.replicated and not self.own_centers:  # one outer state, the master's, on every replica
                self.control.bcast_(self.outer_buffer, root=0)  # (else each worker's own, as its center)
        if self.compressed:
            self.wire.load_state_dict(state["wire"])
        if self.delayed:
            self.delta_sum.copy_(state["delta_sum"]), self.delta_before.copy_(state["delta_before"])
        if self.own_centers:
            self.center_wire.copy_(state["center"])
        # the counts last: the broadcasts above are not exchanges
        self.iteration, self.exchanges, self.coll.messages = state["iteration"], state["exchanges"], state["messages"]

    def report(self) -> dict:
        report = {
            "rank": self.roles.rank,
            "exchanges": self.exchanges,
            "messages": self.coll.messages,
            "messages_per_exchange": self.coll.messages / self.exchanges if self.exchanges else None,
            "averaging": self.settings.record()["averaging"],
            "bytes_per_exchange": self.round_bytes(),
            "bytes_exchanged": self.round_bytes() * self.exchanges,
        }
        if self.settings.overlap or self.delayed:
            report["helper_thread_phases"] = self.helper_timer.snapshot()
            report["overlap_per_exchange"] = self.overlap_log  # exchange k ran in iteration k·τ
        return report


def ring_neighbours(index: int, workers: int) -> tuple[int, ...]:
    """Worker `index`'s neighbours on a ring of `workers`: the one before and the one after (one at two workers,
    none alone)."""
    return tuple(sorted({(index - 1) % workers, (index + 1) % workers} - {index}))


class EncodedRound:
    """A round's two messages as encoded differences from S, the center every rank holds alike.

    `down`: the master sends enc(W − S); every rank sets S ← S + dec(…), so the next W − S
    carries this message's rounding error itself. `up`: each worker sends enc(W^i − S [+ e_i]),
    keeping its rounding error e_i for the next message (int8), gathered to the master, which
    returns Σ_i W^i = P·S + Σ_i dec(…) (summed in rank order: deterministic). Host float32
    throughout.
    """

    def __init__(self, codec_, numel: int, workers: int, is_master: bool):
        self.codec, self.workers, self.is_master = codec_, workers, is_master
        self.shared = torch.zeros(numel)  # S
        self.scratch = torch.zeros(numel)
        self.decoded = torch.zeros(numel)
        nbytes = codec_.nbytes(numel)
        self.payload = np.zeros(nbytes, dtype=np.uint8)
        self.gathered = np.zeros((workers, nbytes), dtype=np.uint8) if is_master else None
        self.residual_up = torch.zeros(numel) if codec_.error_feedback else None  # e_i

    def start(self, w0: torch.Tensor) -> None:
        self.shared.copy_(w0)

    def down(self, coll, center: torch.Tensor | None, timer: PhaseTimer) -> None:
        """S ← S + dec(enc(W − S)) on every rank (`center`: the master's W)."""
        if self.is_master:
            with timer.phase("param_copy"):
                self._encode(torch.sub(center.cpu(), self.shared, out=self.scratch), None)
        coll.bcast_bytes(self.payload, root=0)
        with timer.phase("param_copy"):
            self.shared.add_(self.codec.decode(self.payload, self.decoded))

    def up(self, coll, w: torch.Tensor, sum_out: torch.Tensor | None, timer: PhaseTimer) -> None:
        """Σ_i W^i on the master (into sum_out), from each worker's enc(W^i − S)."""
        with timer.phase("param_copy"):
            self._encode(torch.sub(w.cpu(), self.shared, out=self.scratch), self.residual_up)
        coll.gather_bytes(self.payload, self.gathered, root=0)
        if self.is_master:
            with timer.phase("center_update"):
                total = torch.mul(self.shared, self.workers, out=self.scratch)
                for message in self.gathered:
                    total.add_(self.codec.decode(message, self.decoded))
                sum_out.copy_(total)

    def _encode(self, difference: torch.Tensor, residual: torch.Tensor | None) -> None:
        if residual is not None:
            difference.add_(residual)  # what earlier messages lost
        self.codec.encode(difference, self.payload)
        if residual is not None:
            torch.sub(difference, self.codec.decode(self.payload, self.decoded), out=residual)

    def state_dict(self) -> dict:
        state = {"shared": self.shared.clone()}
        if self.residual_up is not None:
            state["residual_up"] = self.residual_up.clone()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.shared.copy_(state["shared"])
        if self.residual_up is not None:
            self.residual_up.copy_(state["residual_up"])


def host_buffer(like: torch.Tensor) -> torch.Tensor:
    """A host tensor shaped like `like`, page-locked when `like` is on a GPU: the host↔device copies of
    Sync EASGD1 then run at the same DMA rate as the pinned staging of the device-resident levels, so
    level 1 → 2 measures where the center lives, not pageable against pinned memory."""
    pinned = like.device.type == "cuda" and torch.cuda.is_available()
    return torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=pinned)


ENGINE = PeriodicAveraging
