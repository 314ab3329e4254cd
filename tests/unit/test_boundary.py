"""The one step boundary: decide, agree, mark the step, then checkpoint, in that order, for every loop."""

import pytest

from scaledl.algorithms.boundary import BoundaryRequest, StepBoundary


class Monitor:
    """A stand-in for the master's monitor: stops at `stop_at`, checkpoints at `checkpoint_at`."""

    def __init__(self, stop_at=None, checkpoint_at=(), evaluate_at=(), log=None):
        self.stop_at, self.checkpoint_at, self.evaluate_at, self.log = (
            stop_at,
            set(checkpoint_at),
            set(evaluate_at),
            log,
        )
        self.stop_reason = None
        self.step = 0

    def after_step(self, step, epoch, interrupted=False):
        self.step = step
        self.log.append(("rule", step))
        if interrupted:
            self.stop_reason = "interrupted"
        elif step == self.stop_at:
            self.stop_reason = "max_steps"
        return self.stop_reason is not None

    def evaluation_due(self):
        return self.stop_reason is None and self.step in self.evaluate_at

    def wants_checkpoint(self, stopping):
        return self.stop_reason == "interrupted" if stopping else self.step in self.checkpoint_at

    def stopped_by_peer(self):
        if self.stop_reason is None:
            self.stop_reason = "interrupted"


class Timer:
    def __init__(self, log):
        self.log = log

    def mark_step(self, idle=None):
        self.log.append(("mark", idle))


def boundary(log, monitor=None, interrupted=False, checkpoints=True, evaluation_stops=False):
    def evaluate():
        log.append(("evaluation pause",))
        return evaluation_stops

    return StepBoundary(
        monitor,
        interrupted=lambda: interrupted,
        checkpoints_enabled=checkpoints,
        save_checkpoint=lambda: log.append(("checkpoint",)),
        evaluate=evaluate,
        timer=Timer(log),
    )


def agreeing(log, answer=None):
    def agree(request):
        log.append(("agree", request))
        return request if answer is None else answer

    return agree


def test_a_scheduled_checkpoint_comes_after_the_agreement_and_the_step_mark():
    log = []
    stop = boundary(log, Monitor(checkpoint_at={3}, log=log)).cross(3, 0.1, agreeing(log), idle="wait")
    assert not stop
    assert log == [("rule", 3), ("agree", BoundaryRequest.CHECKPOINT), ("mark", "wait"), ("checkpoint",)]


def test_a_budget_stops_without_a_checkpoint():
    log = []
    assert boundary(log, Monitor(stop_at=5, log=log)).cross(5, 0.2, agreeing(log))
    assert ("checkpoint",) not in log and log[1] == ("agree", BoundaryRequest.STOP)


@pytest.mark.parametrize("with_monitor", [True, False])
def test_an_interrupt_asks_for_a_checkpoint_and_the_stop_together(with_monitor):
    log = []
    monitor = Monitor(log=log) if with_monitor else None
    assert boundary(log, monitor, interrupted=True).cross(7, 0.3, agreeing(log))
    assert ("agree", BoundaryRequest.STOP | BoundaryRequest.CHECKPOINT) in log and log[-1] == ("checkpoint",)


def test_an_interrupt_without_checkpoints_only_stops():
    log = []
    assert boundary(log, interrupted=True, checkpoints=False).cross(1, 0.0, agreeing(log))
    assert log == [("agree", BoundaryRequest.STOP), ("mark", None)]


def test_a_peers_stop_is_the_agreed_one_and_the_monitor_calls_it_an_interrupt():
    log = []
    monitor = Monitor(log=log)
    assert boundary(log, monitor).cross(2, 0.0, agreeing(log, answer=BoundaryRequest.STOP))
    assert monitor.stop_reason == "interrupted"


def test_a_worker_without_a_monitor_checkpoints_when_the_master_asked():
    log = []
    assert not boundary(log).cross(4, 0.0, agreeing(log, answer=BoundaryRequest.CHECKPOINT))
    assert log == [("agree", BoundaryRequest.NONE), ("mark", None), ("checkpoint",)]


def test_an_evaluation_pause_comes_after_the_step_mark_and_before_the_checkpoint():
    log = []
    monitor = Monitor(checkpoint_at={4}, evaluate_at={4}, log=log)
    assert not boundary(log, monitor).cross(4, 0.1, agreeing(log))
    assert log == [
        ("rule", 4),
        ("agree", BoundaryRequest.EVALUATE | BoundaryRequest.CHECKPOINT),
        ("mark", None),
        ("evaluation pause",),
        ("checkpoint",),
    ]


def test_an_evaluation_that_reaches_the_target_stops_the_run_and_the_agreed_checkpoint_is_still_written():
    """Every rank agreed on the checkpoint before the evaluation: none may skip the collective."""
    log = []
    monitor = Monitor(checkpoint_at={4}, evaluate_at={4}, log=log)
    assert boundary(log, monitor, evaluation_stops=True).cross(4, 0.1, agreeing(log))
    assert log[-2:] == [("evaluation pause",), ("checkpoint",)]


def test_no_evaluation_at_a_stop_nor_on_an_interrupt():
    for kwargs, monitor_kwargs in (({}, {"stop_at": 4}), ({"interrupted": True}, {})):
        log = []
        monitor = Monitor(evaluate_at={4}, log=log, **monitor_kwargs)
        assert boundary(log, monitor, **kwargs).cross(4, 0.1, agreeing(log))
        assert ("evaluation pause",) not in log


def test_a_worker_joins_the_evaluation_pause_the_master_asked_for():
    log = []
    assert not boundary(log).cross(4, 0.0, agreeing(log, answer=BoundaryRequest.EVALUATE))
    assert log == [("agree", BoundaryRequest.NONE), ("mark", None), ("evaluation pause",)]
