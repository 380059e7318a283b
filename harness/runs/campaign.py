"""The gate's campaigns on real runs: the one place that chooses the default executor.

``idle_campaign(reporter)`` is a ``harness.analysis.campaign.Campaign`` whose runs are real idle
sweeps, each made by ``execute_idle`` (the idle kind's ``execute``, harness/kinds/idle.py; imported
directly: the kinds' package sits above this layer): its own ``RunSession``, a run directory in the
store, its manifest and ``analysis.json``.  ``lbench ab`` (``runs/ab.py``), ``lbench gate-bench``
(``runs/gate_bench.py``) and ``lbench bisect --gate`` (``runs/bisect_gate.py``) use it; tests inject
their own ``execute`` or ``judge``.
"""

from __future__ import annotations

from typing import Any

from harness.analysis.campaign import Campaign, Execute, Judge
from harness.analysis.compare import judge_runs
from harness.runs.idle import execute_idle


def idle_campaign(reporter: Any, *, execute: Execute | None = None, judge: Judge | None = None) -> Campaign:
    """Real idle runs (unless ``execute`` is given) judged by ``judge_runs`` (unless ``judge`` is given)."""
    return Campaign(execute=execute if execute is not None else execute_idle, reporter=reporter,
                    judge=judge if judge is not None else judge_runs)
