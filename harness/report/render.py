"""Render a run into one self-contained HTML file (plots inline as PNG data URIs).

Templates live in ``reports/templates/`` (found through ``harness.resources``); each kind of run
names its template and its context function (``RunKind.template``, ``RunKind.context``,
harness/runkind.py; the contexts live in ``report/idle.py``, ``report/calibrate.py``,
``report/swap.py``, ``report/repro.py``, ``report/gate_bench.py``, ``report/ab.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.analysis.persisted import with_analysis
from harness.errors import BadInput
from harness.report.html import write_page
from harness.runkind import find_kind, unknown_kind
from harness.store import Run


def render_report(run: Run, out: Path | None = None, *, reanalyze: bool = False,
                  post: Callable[[str], str] | None = None) -> Path:
    """The run's report.html, from its analysis.json (recomputed only when missing, stale or asked);
    ``post`` rewrites the page before it is written (evidence's redacted copy)."""
    kind = find_kind(run.record.kind)
    if kind is None:
        what, hint = unknown_kind(run.record.kind)
        raise BadInput(what, where=str(run.dir), hint=hint)
    context_of = kind.context
    context = with_analysis(run, lambda analysis: {**context_of(run, analysis), "read_notes": run.notes,
                                                   "virtual_hosts": [run.record.host.facts]},
                            reanalyze=reanalyze)  # read_notes: e.g. a journal fallback
    return write_page(kind.template, context, out or run.dir / "report.html", post=post)
