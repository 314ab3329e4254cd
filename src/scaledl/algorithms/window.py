"""The window engine: the center W in an RMA window on the master, one lock epoch per exchange.

Six algorithms are this engine with a worker rule (the registry's `rule`) and
a lock (the registry's pattern): no master-side request loop; each worker
exchange is one passive-target epoch on the master's window
(`scaledl.comm.center_window`: an RMA window, or with --center-window shared a
shared-memory window the workers update directly).

    pattern            lock        algorithms
    fcfs_window        exclusive   async_easgd, async_measgd, async_sgd, async_msgd
    lock_free_window   shared      hogwild_easgd, hogwild_sgd

An exclusive lock applies updates one at a time, in lock order (first come,
first served); a shared lock lets them proceed concurrently, unordered
(Hogwild). The lock is the only difference between a locked algorithm and its
Hogwild variant. The worker rules, for worker i at its iteration t:

  elastic (Async/Hogwild EASGD, Eqs. 1-2), `--elastic-epoch`:
      split (default): shared lock · Get W_t · unlock ; α·(W^i_t − W_t) on this worker's host,
              outside every lock ; lock · Accumulate α·(W^i_t − W_t) · unlock
              The lock is held for the add alone, one pass over W at the master per exchange, the
              same work as Async SGD's (the paper's master applies W += α(W^i − W) in one pass);
              other workers' adds may land between the read and the add (Zhang et al.'s
              asynchronous EASGD, τ = 1, whose worker reads the center, computes the difference
              and sends it to be added). The read's shared lock excludes the exclusive adds, so
              it never sees one halfway.
      atomic: lock · Get W_t · Flush · α·(W^i_t − W_t) · Accumulate it · unlock: a read-modify-write
              in one epoch, the difference computed while the lock is held (and, at P = 8 on one
              node, the lock saturated by it); kept to measure what splitting buys
      worker: W^i_{t+1} = W^i_t − η·ΔW^i_t − η·ρ·(W^i_t − W_t)             (Eq. 1, with the W_t read)
  momentum_elastic (Async MEASGD, Eqs. 5-6): the elastic epoch, and
      worker: V^i ← μ·V^i − η·ΔW^i_t ;  W^i_{t+1} = W^i_t + V^i − η·ρ·(W^i_t − W_t)
      The paper does not say whether ΔW^i is taken at W^i or at the Nesterov
      look-ahead W^i + μ·V^i (Zhang et al.'s EAMSGD): at W^i by default, the
      equations as written; `--nesterov` takes it at the look-ahead, W^i_t kept
      aside before it (the exchange sends that copy) and restored exactly after.
  sgd (Async/Hogwild SGD, Downpour's parameter server)
      epoch:  lock · Accumulate −η·ΔW^i · Flush · Get W · unlock ;  worker: W^i ← W
  momentum (Async MSGD, Eqs. 3-4: V ← μ·V − η·ΔW^i ; W ← W + V ; then W^i ← W). Where V lives
      is not stated in the paper; `--momentum-at` offers both:
      master (default, Downpour-style): one V beside W in the window, updated by
          every worker's gradient in arrival order: inside the exclusive epoch
          Get V · Put V' · Accumulate V' · Get W
      worker: each worker keeps its own V^i and pushes it (W ← W + V^i), an
          epoch of the same size as Async SGD's

Overlap (the paper's §4 step 2, "worker i computes ΔW^i_t, overlapping with
receiving W_t"; on by default for the elastic rules, --no-overlap for the
ablation): the elastic epoch needs only W^i_t, known before the gradient. At
begin_iteration the worker snapshots W^i_t into its host stage and hands the
whole epoch to a helper thread; meanwhile the main thread fetches the batch
and computes ΔW^i_t. worker_step waits for the helper (the `wait` phase: the
exposed part; the helper's seconds go to overlapped_comm_s and its phases to
run.json's algorithm_report.helper_thread_phases), then applies the rule with
the W_t the helper read. The arithmetic is the same in both modes, operation
for operation. Only one thread calls MPI at a time (the main thread makes no
MPI call while the helper's epoch is in flight): MPI_THREAD_SERIALIZED suffices.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import torch

from scaledl.algorithms import rules
from scaledl.algorithms.base import require_helper_thread
from scaledl.algorithms.boundary import BoundaryRequest
from scaledl.algorithms.master import MasterBased
from scaledl.comm import transport
from scaledl.comm.buffers import host_array
from scaledl.comm.center_window import open_center_window
from scaledl.comm.timing import PhaseTimer
from scaledl.comm.watchdog import Heartbeats, Watchdog


class WindowEngine(MasterBased):
    def __init__(self, context):
        r, s = context.roles, context.settings
        # Every refusal before the first window (the center's, which refuses a shared window across nodes,
        # opens before the board's): a refused run has nothing to free, and ends quietly.
        if s.overlap:
            require_helper_thread(context.info.key)
        numel = (context.center if r.is_master else context.params).numel
        # Async MSGD's default: one momentum buffer V beside W in the master's window.
        self.master_momentum = s.momentum_at == "master"
        self.window = open_center_window(
            s.center_window, r.world, r.master, numel, locked=context.info.locked, with_momentum=self.master_momentum
        )
        super().__init__(context)
        self.overlap = bool(s.overlap) and r.is_worker
        if r.is_worker:
            self.center_host = host_array(numel)  # W_t as read from the window
            self.center_copy = torch.empty_like(self.params.data)  # W_t on this worker's device
            self.rule = RULES[self.info.rule](self)
        self.exposed_s = 0.0  # overlap: seconds the main thread waited for the helper
        self.critical_s, self.critical_epochs = 0.0, 0  # the window's count, kept when it is freed (finish)
        if self.overlap:
            self.helper_timer = PhaseTimer()  # the helper's own: two threads must not share a timer
            self.helper = transport.helper()
            self.pending = None

    def start(self) -> None:
        # W_0 goes into the window BEFORE the broadcast of W_0 (MasterBased.start): a worker can
        # leave that Bcast only after the master has entered it, so the window holds W_0 before
        # any worker's first epoch can read it. Written after the Bcast, a worker's first Get
        # could race the master's write and read the window's zeros.
        if self.roles.is_master:
            self.window.write(self.center.data)
        super().start()

    # ---- worker: one epoch per iteration, overlapped with data and fwd/bwd where the rule allows
    def begin_iteration(self) -> bool:
        self.rule.before_snapshot()
        if self.overlap:
            self.rule.snapshot()  # W^i_t, before ΔW^i_t
            # The handoff is exposed too: the woken helper may take this thread's core (and the GIL) first.
            t0 = transport.clock()
            with self.timer.phase("wait"):
                self.pending = self.helper.submit(self.timed_exchange, self.helper_timer)  # ∥ data, h2d, fwd/bwd
            self.exposed_s += transport.clock() - t0
        self.rule.before_gradient()
        return True

    def worker_step(self) -> None:
        self.rule.after_gradient()
        if self.overlap:
            t0 = transport.clock()
            with self.timer.phase("wait"):  # the exposed part
                self.timer.add_overlapped(self.pending.result())
            self.exposed_s += transport.clock() - t0
            self.pending = None
        else:
            self.rule.snapshot()
            self.rule.exchange(self.timer)
        with self.timer.phase("param_copy"):
            self.center_copy.copy_(torch.from_numpy(self.center_host))  # W into this worker's memory
        with self.timer.phase("update"):
            self.rule.update(self.center_copy)

    def timed_exchange(self, timer: PhaseTimer) -> float:
        """The rule's lock epoch (its lock's acquisition timed as wait, its operations as comm); wall seconds."""
        t0 = transport.clock()
        self.rule.exchange(timer)
        return transport.clock() - t0

    def count_update(self) -> int:
        """Version the center and note this worker's staleness (inside every epoch that updates W); returns it."""
        return self.staleness.note(self.board.next_version(self.roles.worker_index))

    def update_hooks(self, update: np.ndarray) -> dict:
        """How an epoch that adds `update` to W versions the center: after the add (the paper's), or, with an age
        weight, first, so that `update` is scaled by the weight of the staleness it records before it lands."""
        if self.settings.age_weight in (None, "none"):
            return {"on_update": self.count_update}
        return {"before_add": partial(self.weigh_update, update)}

    def weigh_update(self, update: np.ndarray) -> None:
        """Inside the epoch, before the add: version the center, then scale `update` by its staleness's weight."""
        rules.age_weighted_(torch.from_numpy(update), self.count_update(), self.settings.age_weight)

    def holding(self) -> None:
        """On the board: this worker holds the center's lock (inside an epoch that only reads W)."""
        self.board.holding(self.roles.worker_index)

    def released(self) -> None:
        """On the board: that epoch is over; the worker queues again (for its add)."""
        self.board.holding(self.roles.worker_index, held=False)

    # ---- master: spin on the board, watch every worker's heartbeat
    def watching(self):
        self.heartbeats = Heartbeats(self.roles.worker_ranks, self.worker_timeout)
        self.watchdog = Watchdog(self.heartbeats.most_patient_limit, self.heartbeats.blame)
        self._step_ended = None
        return _Watching(self.watchdog)

    def await_step(self) -> tuple[int, float]:
        """Spin until the center's version crosses the next step. With some MPI libraries the workers'
        one-sided operations progress only while the master calls into MPI. Timed as a whole: a context
        manager per spin would cost more than the spin."""
        now = transport.clock()
        if self._step_ended is not None:
            self.heartbeats.excuse(now - self._step_ended)  # the master was busy: workers may have stalled
        waiting_since = now
        while True:
            self.world.Iprobe()
            words = self.board.read()
            self.watchdog.beat()
            self.heartbeats.check(self.board.heartbeats(words), self.board.queued(words))
            if self.stats.advance(words, self.monitor):
                self._step_ended = transport.clock()
                self.timer.add("wait", self._step_ended - waiting_since)
                return self.stats.step, self.stats.epoch

    def announce(self, request: BoundaryRequest) -> BoundaryRequest:
        # One epoch: a worker that reads the stop has read the pauses too, so every worker joins this
        # checkpoint (a stop read alone would send it to finish()'s barrier), and no worker reads the
        # checkpoint's pause without the evaluation's before it.
        self.board.announce(
            evaluation=bool(request & BoundaryRequest.EVALUATE),
            pause=bool(request & BoundaryRequest.CHECKPOINT),
            stop=bool(request & BoundaryRequest.STOP),
        )
        return request

    def release(self) -> None:
        self.board.set_stop()

    # ---- both sides
    def refresh_center(self) -> None:
        if self.window is not None:  # after finish() the center holds the final snapshot
            self.window.snapshot(self.center.data)

    def finish(self) -> None:
        if self.overlap:
            self.helper.shutdown(wait=True)  # an exchange left in flight (an error mid-iteration) settles first
        super().finish()  # all exchanges settled, final snapshot taken
        self.critical_s, self.critical_epochs = self.window.critical_s, self.window.critical_epochs
        self.window.free()
        self.window = None

    def state_dict(self) -> dict:
        """The master adds its whole window (W, and V with the master's momentum); a worker, its rule's state."""
        state = super().state_dict()
        if self.roles.is_master:
            state["window"] = self.window.read_all()
        else:
            state.update(self.rule.state_dict())
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.roles.is_master:
            self.window.write_all(state["window"])
        else:
            self.rule.load_state_dict(state)

    def report(self) -> dict:
        report = super().report()
        if self.roles.is_worker:
            # the epochs that changed W under the algorithm's lock: what a saturated lock serialises
            report["critical_s"] = self.critical_s
            report["critical_epochs"] = self.critical_epochs
        if self.roles.is_worker and self.rule.overlappable:
            report["overlap"] = self.overlap
            if self.overlap:
                helper = self.helper_timer.snapshot()
                report["helper_thread_phases"] = helper
                # the helper's epochs: lock queue (wait), operations (comm), and Eq. 2's increment between them
                exchange = helper["comm_s"] + helper["wait_s"] + helper["center_update_s"]
                report["exchange_s"] = exchange
                report["exposed_wait_s"] = self.exposed_s  # of which the main thread waited
                report["hidden_s"] = max(exchange - self.exposed_s, 0.0)
        return report


class _Watching:
    """The window master's service under its watchdog; the boundary's `paused` is the watchdog's."""

    def __init__(self, watchdog: Watchdog):
        self.watchdog = watchdog

    def __enter__(self):
        return self.watchdog.paused

    def __exit__(self, *exc) -> None:
        self.watchdog.stop()


# ---- the worker rules: what a worker sends in its epoch, and how it updates itself


class WorkerRule:
    """One worker's side of the window engine. Hooks around the gradient, then one epoch and an update."""

    overlappable = False  # the epoch needs only W^i_t, so it may run beside the gradient

    def __init__(self, engine: WindowEngine):
        self.engine = engine
        self.params = engine.params
        self.settings = engine.settings

    def before_snapshot(self) -> None:
        """Before W^i_t is snapshot for the epoch (begin_iteration)."""

    def snapshot(self) -> None:
        """W^i_t to the host stage, for an epoch that sends it."""

    def before_gradient(self) -> None:
        """After the snapshot, before the batch's ΔW^i is computed."""

    def after_gradient(self) -> None:
        """ΔW^i is in params.grad; before the epoch (or the wait for it)."""

    def exchange(self, timer: PhaseTimer) -> None:
        """One lock epoch; afterwards engine.center_host holds the W this worker updates with."""
        raise NotImplementedError

    def update(self, center: torch.Tensor) -> None:
        """This worker's own rule, with `center` on its device."""
        self.params.data.copy_(center)  # W^i ← W

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class Elastic(WorkerRule):
    """Async and Hogwild EASGD: the epoch reads W_t and adds α·(W^i_t − W_t); the worker applies Eq. 1."""

    overlappable = True

    def __init__(self, engine: WindowEngine):
        super().__init__(engine)
        self.delta_host = host_array(self.params.numel)  # what this worker adds to W
        self.delta = torch.from_numpy(self.delta_host)  # ... as a tensor, for the rules

    def exchanged_weights(self) -> torch.Tensor:
        """The tensor holding W^i_t when the epoch is prepared."""
        return self.params.data

    def snapshot(self) -> None:
        self.w_host = self.engine.stage.send_view(self.exchanged_weights())

    def exchange(self, timer: PhaseTimer) -> None:
        e = self.engine
        if self.settings.elastic_epoch == "atomic":  # read, difference and add in one epoch
            e.window.pull_then_push(e.center_host, self.elastic_difference, on_update=e.count_update, timer=timer)
            return
        e.window.pull(e.center_host, timer=timer, on_hold=e.holding, on_release=e.released)  # W_t
        with timer.phase("center_update", priced_as="host_arithmetic"):  # Eq. 2's increment, outside every lock
            delta = self.elastic_difference(e.center_host)
        e.window.push(delta, timer=timer, **e.update_hooks(delta))  # the lock held for the add alone

    def elastic_difference(self, center: np.ndarray) -> np.ndarray:
        """η·ρ·(W^i_t − W_t): what Eq. 2 adds to the center for this worker (on host buffers)."""
        rules.elastic_difference_(
            self.delta, torch.from_numpy(self.w_host), torch.from_numpy(center), self.settings.alpha
        )
        return self.delta_host

    def update(self, center: torch.Tensor) -> None:
        """Eq. 1."""
        rules.elastic_worker_(self.params.data, self.params.grad, center, self.settings.lr, self.settings.rho)


class MomentumElastic(Elastic):
    """Async MEASGD: the elastic epoch, and momentum at the worker (Eqs. 5-6), optionally Nesterov."""

    def __init__(self, engine: WindowEngine):
        super().__init__(engine)
        self.velocity = torch.zeros_like(self.params.data)
        self.w_saved = torch.empty_like(self.params.data) if self.settings.nesterov else None

    def exchanged_weights(self) -> torch.Tensor:
        return self.params.data if self.w_saved is None else self.w_saved

    def before_snapshot(self) -> None:
        if self.w_saved is not None:
            with self.engine.timer.phase("update"):
                self.w_saved.copy_(self.params.data)  # W^i_t, kept aside

    def before_gradient(self) -> None:
        if self.w_saved is not None:
            with self.engine.timer.phase("update"):
                rules.look_ahead_(self.params.data, self.velocity, self.settings.momentum)  # ΔW^i at W^i + μV^i

    def after_gradient(self) -> None:
        if self.w_saved is not None:
            with self.engine.timer.phase("update"):
                self.params.data.copy_(self.w_saved)  # back to W^i_t, exactly

    def update(self, center: torch.Tensor) -> None:
        """Eqs. 5-6."""
        s = self.settings
        rules.momentum_elastic_worker_(
            self.params.data, self.velocity, self.params.grad, center, s.lr, s.rho, s.momentum
        )

    def state_dict(self) -> dict:
        return {"velocity": self.velocity.cpu()}  # V^i

    def load_state_dict(self, state: dict) -> None:
        self.velocity.copy_(state["velocity"])


class SGD(WorkerRule):
    """Async and Hogwild SGD: the epoch accumulates −η·ΔW^i and reads W back; the worker takes W."""

    def exchange(self, timer: PhaseTimer) -> None:
        e = self.engine
        with timer.phase("update"):
            rules.sgd_step_(e.center_copy, self.params.grad, self.settings.lr)  # −η·ΔW^i (W's buffer is free now)
        delta = e.stage.send_view(e.center_copy)
        e.window.push_then_pull(delta, e.center_host, timer=timer, **e.update_hooks(delta))


class WorkerMomentum(WorkerRule):
    """Async MSGD with V^i at each worker: V^i ← μ·V^i − η·ΔW^i pushed as the update, W read back."""

    def __init__(self, engine: WindowEngine):
        super().__init__(engine)
        self.velocity = torch.zeros_like(self.params.data)

    def exchange(self, timer: PhaseTimer) -> None:
        e, s = self.engine, self.settings
        with timer.phase("update"):
            rules.velocity_(self.velocity, self.params.grad, s.lr, s.momentum)  # Eq. 3 on worker i
        delta = e.stage.send_view(self.velocity)
        e.window.push_then_pull(delta, e.center_host, on_update=e.count_update, timer=timer)

    def state_dict(self) -> dict:
        return {"velocity": self.velocity.cpu()}  # V^i

    def load_state_dict(self, state: dict) -> None:
        self.velocity.copy_(state["velocity"])


class MasterMomentum(WorkerRule):
    """Async MSGD with one V at the master: Eq. 3 on V inside this worker's exclusive epoch, then Eq. 4."""

    def __init__(self, engine: WindowEngine):
        super().__init__(engine)
        self.velocity_host = host_array(self.params.numel)  # V, read from the window

    def exchange(self, timer: PhaseTimer) -> None:
        e = self.engine
        self.grad_host = torch.from_numpy(e.stage.send_view(self.params.grad))
        e.window.momentum_step(
            self.velocity_host, e.center_host, self.master_velocity, on_update=e.count_update, timer=timer
        )  # (V stays in the master's window: checkpointed with it)

    def master_velocity(self, velocity: np.ndarray) -> None:
        """Eq. 3 on the master's V, read into `velocity` inside this worker's exclusive-lock epoch."""
        rules.velocity_(torch.from_numpy(velocity), self.grad_host, self.settings.lr, self.settings.momentum)


def momentum_rule(engine: WindowEngine) -> WorkerRule:
    return MasterMomentum(engine) if engine.master_momentum else WorkerMomentum(engine)


# The registry's `rule` of each window algorithm.
RULES = {"elastic": Elastic, "momentum_elastic": MomentumElastic, "sgd": SGD, "momentum": momentum_rule}

ENGINE = WindowEngine
