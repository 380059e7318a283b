"""Context for a gate-bench run's report: the error rates per condition with their exact
intervals, the slowdown's pooled size and each decision (real runs), or the simulated cells of
the gate and of ``ab`` (``--simulate``).  Everything comes from the run's ``analysis.json`` and
its own tables (harness/analysis/gate_bench.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.schema import records
from harness.store import Run

GATE_FIGURES = ("fail A/A (ratio 1)", "fail band edge (1+m)", "fail +10%", "fail +20%", "inconclusive at 1",
                "pass at 1", "passed with --inconclusive-ok at +10%")
AB_FIGURES = ("fail A/A (ratio 1)", "pass A/A (ratio 1)", "unproven A/A (ratio 1)", "fail +3%", "fail +10%",
              "mean minutes A/A (ratio 1)", "mean minutes +10%")


def rate_text(value: Any) -> str:
    """A simulated rate as the command prints it: ``3.0% [1.2%, 6.1%]``; other values as they are."""
    if isinstance(value, Mapping) and isinstance(value.get("rate"), (int, float)):
        ci = value.get("ci")
        if isinstance(ci, list) and len(ci) == 2 and all(isinstance(c, (int, float)) for c in ci):
            return f"{value['rate']:.1%} [{ci[0]:.1%}, {ci[1]:.1%}]"
        return f"{value['rate']:.1%}"
    return "–" if value is None else str(value)


def _cells(analysis: Mapping[str, Any], campaign: str, figures: tuple[str, ...]) -> list[dict]:
    rows = analysis.get(campaign)
    if not isinstance(rows, list):
        return []
    return [{**r, "rates": [rate_text(r.get(f)) for f in figures]} for r in rows if isinstance(r, Mapping)]


def gate_bench_context(run: Run, analysis: dict) -> dict:
    section = run.record.section("gate_bench")
    simulated = analysis.get("mode") == "simulated"
    return {"run": run.record, "run_id": run.run_id, "incomplete": not run.complete, "simulated": simulated,
            "design": {k: v for k, v in section.items() if not isinstance(v, (list, dict))},
            "findings": list(analysis.get("findings", [])), "rates": list(analysis.get("rates", [])),
            "decisions": [] if simulated else records(run.table("decisions")),
            "gate_figures": GATE_FIGURES, "gate_cells": _cells(analysis, "gate", GATE_FIGURES),
            "ab_figures": AB_FIGURES, "ab_cells": _cells(analysis, "ab", AB_FIGURES),
            "host": run.record.host.facts, "engine": {}}
