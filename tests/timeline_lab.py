"""A ``Lab`` holding a given timeline, replies and marks and nothing running, for the figure
objects of harness/repro/figures.py: their values on a constructed timeline (the negation tests)
or on verbatim router log lines (tests/repro/test_figures.py)."""

from __future__ import annotations

from types import SimpleNamespace

from harness.engines.router import TimelineEvent
from harness.repro.lab import Lab, Reply


def timeline_lab(events: list[TimelineEvent], *, replies: list[Reply] | None = None,
                 marks: dict[str, float] | None = None, log_marks: dict[str, float] | None = None,
                 t_stop: float | None = None) -> Lab:
    """A lab whose ``events`` are ``events`` (times since t0 = 0), with ``replies`` and marks."""
    lab = object.__new__(Lab)
    lab.replies, lab.shell_figures, lab.given, lab.unmeasured = list(replies or []), {}, {}, {}
    lab.t0, lab.marks, lab.log_marks, lab.t_stop = 0.0, dict(marks or {}), dict(log_marks or {}), t_stop
    lab.watches = {}
    lab.session = SimpleNamespace(events=events)
    return lab
