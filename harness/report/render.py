"""Render a run into one self-contained HTML file (plots inline as PNG data URIs).

Templates live in ``reports/templates/`` (found through ``harness.resources``); each kind
of run has its own context module (``report/idle.py``, ``report/swap.py``, ``report/repro.py``).
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis.persisted import with_analysis
from harness.kinds import get_kind
from harness.report.html import write_page
from harness.store import Run


def render_report(run: Run, out: Path | None = None, *, reanalyze: bool = False, post=None) -> Path:
    """The run's report.html, from its analysis.json (recomputed only when missing, stale or asked);
    ``post`` rewrites the page before it is written (evidence's redacted copy)."""
    kind = get_kind(run.record.kind, where=str(run.dir))
    context = with_analysis(run, lambda analysis: {**kind.report_context(run, analysis), "read_notes": run.notes},
                            reanalyze=reanalyze)  # read_notes: e.g. a journal fallback
    return write_page(kind.template, context, out or run.dir / "report.html", post=post)
