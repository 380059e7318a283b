"""Interleaved A/B rounds with a group-sequential stop (``lbench ab``).

Each round measures A and B once, each on a fresh server (``prepare_idle`` + ``execute_idle``),
in ABBA order (round 1: A then B, round 2: B then A, ...) so a slow drift hits both sides
alike.  From round ``min_rounds`` on (>= 2: the run-level t statistic needs two runs per side),
after every round, the verdicts are computed with the runs as units (harness.analysis.verdicts)
at that look's nominal level from an **alpha-spending boundary** (harness.analysis.sequential:
Lan-DeMets O'Brien-Fleming-like by default, Pocock-like on request) over the planned looks, with
information fraction rounds / max_rounds.  The overall chance of a false ``slower`` (and of a
false ``pass`` at the band edge) is then about alpha/2 whatever the stopping round; the
simulation in ``lbench gate-bench --simulate`` measures it.  The run stops at the first look
where a gating group is ``slower`` or every gating group is decided (``no change`` or
``faster``), or when the round budget is spent (then the last look's verdict stands).
"""

from __future__ import annotations

from harness.analysis.campaign import SPENDING_DEFAULT, ABResult, Execute, Judge, sequential_ab
from harness.analysis.gate import GateConfig
from harness.runs.campaign import idle_campaign
from harness.runs.idle import PreparedIdle, QuietReporter, Reporter


def run_ab(prep_a: PreparedIdle, prep_b: PreparedIdle, cfg: GateConfig, *, min_rounds: int = 3, max_rounds: int = 10,
           reporter: Reporter | None = None, execute: Execute | None = None, judge: Judge | None = None,
           spending: str = SPENDING_DEFAULT) -> ABResult:
    """The ``ab`` rounds on real idle runs (``harness.analysis.campaign.sequential_ab``);
    ``execute(prep, reporter) -> Run`` and ``judge(a_runs, b_runs, vcfg)`` are injectable for tests."""
    return sequential_ab(idle_campaign(reporter or QuietReporter(), execute=execute, judge=judge), prep_a, prep_b, cfg,
                         min_rounds=min_rounds, max_rounds=max_rounds, spending=spending)
