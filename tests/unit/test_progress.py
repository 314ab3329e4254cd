"""What a run prints: step of the budget and time left per evaluation, and one closing line."""

from pathlib import Path
from types import SimpleNamespace

from scaledl.progress import Progress, duration
from scaledl.train.evaluation import Evaluation, Snapshot
from scaledl.train.monitor import Monitor, StopRule
from scaledl.train.results import closing_line


def test_duration_reads_like_a_clock():
    assert [duration(s) for s in (0, 12.4, 185, 7440)] == ["0s", "12s", "3m05s", "2h04m"]


def test_progress_is_the_nearest_budget():
    rule = StopRule(max_steps=600, time_budget=100.0)
    assert rule.progress(60, 0.5, 50.0) == 0.5  # the time budget is nearer than the step budget
    assert rule.progress(600, 5, 1.0) == 1.0
    assert StopRule(target_accuracy=0.9).progress(10, 1, 1.0) is None


def line(rule: StopRule, step: int, train_s: float, reached=None, previous=None) -> str:
    monitor = Monitor.__new__(Monitor)
    monitor.stop_rule, monitor.time_to_target, monitor.samples_per_step = rule, reached, 128
    monitor.target_step, monitor.later = (None if reached is None else step), None
    snap = Snapshot(step=step, epoch=1.0, wall_s=train_s, train_s=train_s, train_loss=0.5, phases={})
    return monitor.progress_line(snap, Evaluation(snapshot=snap, test_loss=0.3, test_accuracy=0.8), previous)


def test_progress_line_shows_the_images_per_second_since_the_previous_evaluation():
    # 100 steps of 128 samples (2 workers × batch 64) in 20 s of training since the row before
    text = line(StopRule(max_steps=600), step=150, train_s=30.0, previous={"step": 50, "train_s": 10.0})
    assert "train    30.00s       640 img/s  loss" in text
    assert "img/s" not in line(StopRule(max_steps=600), step=0, train_s=0.0)  # the first evaluation: no rate yet
    assert "img/s" not in line(StopRule(max_steps=600), 50, 10.0, previous={"step": 50, "train_s": 10.0})


def test_progress_line_shows_step_of_budget_and_time_left():
    text = line(StopRule(max_steps=600, target_accuracy=0.9), step=150, train_s=30.0)
    assert text.startswith("step    150/600") and "25%" in text and "~1m30s left" in text
    assert "until test_acc ≥ 0.9" in text and text.endswith("\n") and text.count("\n") == 1
    assert "left" not in line(StopRule(target_accuracy=0.9), step=150, train_s=30.0)
    assert "target reached" in line(StopRule(max_steps=600, target_accuracy=0.9), 150, 30.0, reached=25.0)
    # a later target: the run goes on past the first, so the line names the later one until it is reached
    later = StopRule(max_steps=600, target_accuracy=0.9, later_target=0.97)
    assert "until test_acc ≥ 0.97" in line(later, 150, 30.0, reached=25.0)


def test_closing_line_names_the_stop_the_result_and_the_folder():
    monitor = SimpleNamespace(
        rows=[{"test_accuracy": 0.93}, {"test_accuracy": 0.91}],
        stop_reason="max_steps",
        step=600,
        stop_train_s=12.345,
        last_accuracy=0.91,
        time_to_target=None,
        target_step=None,
    )
    cfg = SimpleNamespace(target_accuracy=0.95, later_target_accuracy=None, time_only=False)
    text = closing_line(monitor, cfg, Path("results/runs/x"))
    assert text.startswith("done: stopped by max_steps after 600 steps, 12.35 s of training")
    assert "test accuracy 0.9100 (best 0.9300)" in text and "target 0.95 not reached" in text
    assert text.rstrip().endswith("in results/runs/x") and text.count("\n") == 1


def test_progress_prints_throttled_lines_and_a_final_one():
    import io

    now = [0.0]
    out = io.StringIO()
    bar = Progress("train", total=1000, every_s=10, stream=out, clock=lambda: now[0])
    for _ in range(10):
        now[0] += 2.0
        bar.advance(50)  # 100 images every 4 s... a line only every 10 s
    bar.finish()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[-1].startswith("train: 500/1,000 images (50%) in 20s, 25 images/s")
    assert lines[0] == "train: 250/1,000 images (25%), 25 images/s, ~30s left"
