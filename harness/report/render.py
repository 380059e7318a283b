"""Render a run into one self-contained HTML file (plots inline as PNG data URIs).

Templates live in ``reports/templates/`` (found through ``harness.resources``; each kind's is
``harness.kinds.KINDS[kind].template``); each kind of run has its own context function
(``CONTEXTS``: ``report/idle.py``, ``report/calibrate.py``, ``report/swap.py``, ``report/repro.py``,
``report/gate_bench.py``, ``report/ab.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.analysis.persisted import with_analysis
from harness.errors import BadInput
from harness.kinds import find_kind, unknown_kind
from harness.report.calibrate import calibrate_context
from harness.report.html import write_page
from harness.report.idle import idle_context
from harness.report.ab import ab_context
from harness.report.gate_bench import gate_bench_context
from harness.report.repro import repro_context
from harness.report.swap import swap_context
from harness.store import Run

# what each kind's template shows: context(run, analysis)
CONTEXTS: dict[str, Callable[[Run, dict], dict]] = {
    "idle": idle_context,
    "calibrate": calibrate_context,
    "swap": swap_context,
    "repro": repro_context,
    "gate-bench": gate_bench_context,
    "ab": ab_context,
}


def render_report(run: Run, out: Path | None = None, *, reanalyze: bool = False,
                  post: Callable[[str], str] | None = None) -> Path:
    """The run's report.html, from its analysis.json (recomputed only when missing, stale or asked);
    ``post`` rewrites the page before it is written (evidence's redacted copy)."""
    kind = find_kind(run.record.kind)
    if kind is None or kind.name not in CONTEXTS:
        what, hint = unknown_kind(run.record.kind)
        raise BadInput(what, where=str(run.dir), hint=hint)
    context_of = CONTEXTS[kind.name]
    context = with_analysis(run, lambda analysis: {**context_of(run, analysis), "read_notes": run.notes,
                                                   "virtual_hosts": [run.record.host.facts]},
                            reanalyze=reanalyze)  # read_notes: e.g. a journal fallback
    return write_page(kind.template, context, out or run.dir / "report.html", post=post)
