"""The sweep's progress bar is redrawn on the main thread between samples, but not after every one:
a redraw between two back-to-back requests is time the sweep neither pauses nor measures."""

from harness.cli.ui import RichReporter


def test_back_to_back_samples_share_redraws_and_the_last_one_is_drawn(monkeypatch):
    reporter = RichReporter()
    redraws = []
    monkeypatch.setattr(reporter.progress, "refresh", lambda: redraws.append(1))
    clock = iter(range(10_000))
    monkeypatch.setattr("harness.cli.ui.monotonic", lambda: next(clock) * 0.001)  # 1 ms per sample
    reporter.cell("tiny-q8 · keep-alive=default", 200)
    redraws.clear()
    for _ in range(200):
        reporter.advance()
    # 200 samples within 0.2 s of the cell's first draw: none until the last
    assert len(redraws) == 1
    assert reporter.progress.tasks[-1].completed == 200


def test_slow_samples_are_each_drawn(monkeypatch):
    reporter = RichReporter()
    redraws = []
    monkeypatch.setattr(reporter.progress, "refresh", lambda: redraws.append(1))
    clock = iter(range(100))
    monkeypatch.setattr("harness.cli.ui.monotonic", lambda: next(clock) * 1.0)  # 1 s pauses
    reporter.cell("cell", 5)
    redraws.clear()
    for _ in range(5):
        reporter.advance()
    assert len(redraws) == 5
