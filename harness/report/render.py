"""Render a run into one self-contained HTML file (plots inline as PNG data URIs).

Templates live in ``reports/templates/`` (found through ``harness.resources``); each kind
of run has its own context module (``report/idle.py``, ``report/swap.py``, ``report/repro.py``).
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import BadInput
from harness.report.html import write_page
from harness.store import Run


def render_report(run: Run, out: Path | None = None) -> Path:
    kind = run.manifest.get("kind")
    if kind in ("idle", "calibrate"):
        from harness.report.idle import idle_context

        template, context = "idle.html.j2", idle_context(run)
    elif kind == "repro":
        from harness.report.repro import repro_context

        template, context = "repro.html.j2", repro_context(run)
    elif kind == "swap":
        from harness.report.swap import swap_context

        template, context = "swap.html.j2", swap_context(run)
    else:
        raise BadInput(f"no report template for run kind {kind!r}", where=str(run.dir))
    return write_page(template, context, out or run.dir / "report.html")
