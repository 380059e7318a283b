"""Interleaved A/B rounds with a sequential stop (``lbench ab``).

Each round measures A and B once, each on a fresh server (``prepare_idle`` + ``execute_idle``),
in ABBA order (round 1: A then B, round 2: B then A, ...) so a slow drift hits both sides
alike.  From round ``min_rounds`` on, after every round, the verdicts are computed with the
runs as units (harness.analysis.verdicts).  Error control across looks: a **Bonferroni split**
of alpha over the planned looks (each look uses alpha / n_looks), so the chance of any false
``slower`` over all looks stays <= alpha/2, whatever the stopping time.  The run stops at the
first look where a gating group is ``slower`` or every gating group is decided (``no change``
or ``faster``), or when the round budget is spent (then the last look's verdict stands).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from harness.analysis.gate import GateConfig, GateOutcome, decide, verdict_config


def look_alpha(alpha: float, min_rounds: int, max_rounds: int) -> float:
    return alpha / max(1, max_rounds - min_rounds + 1)


def decided(outcome: GateOutcome) -> bool:
    return outcome.status in ("fail", "pass")


@dataclass
class ABResult:
    a_runs: list = field(default_factory=list)
    b_runs: list = field(default_factory=list)
    looks: list[dict] = field(default_factory=list)
    outcome: GateOutcome | None = None
    verdicts: list = field(default_factory=list)
    info: dict = field(default_factory=dict)


def run_ab(prep_a, prep_b, cfg: GateConfig, *, min_rounds: int = 3, max_rounds: int = 10, reporter=None,
           execute=None, judge=None) -> ABResult:
    """``execute(prep, reporter) -> Run`` and ``judge(a_runs, b_runs, vcfg)`` are injectable for tests."""
    from harness.analysis.compare import judge_runs
    from harness.kinds import get_kind
    from harness.runs.idle import QuietReporter

    execute = execute or get_kind("idle").execute
    judge = judge or judge_runs
    reporter = reporter or QuietReporter()
    look_cfg = copy.copy(cfg)
    look_cfg.alpha = look_alpha(cfg.alpha, min_rounds, max_rounds)
    res = ABResult()
    for round_no in range(1, max_rounds + 1):
        order = (("A", prep_a, res.a_runs), ("B", prep_b, res.b_runs))
        for side, prep, runs in (order if round_no % 2 else order[::-1]):
            reporter.message(f"round {round_no}/{max_rounds}: {side}")
            runs.append(execute(prep, reporter))
        if round_no < min_rounds:
            continue
        res.verdicts, res.info = judge(res.a_runs, res.b_runs, verdict_config(look_cfg))
        res.outcome = decide(res.verdicts, look_cfg)
        res.looks.append({"round": round_no, "status": res.outcome.status, "alpha_per_look": look_cfg.alpha})
        reporter.message(f"look after round {round_no}: {res.outcome.status} (alpha per look {look_cfg.alpha:.4g})")
        if decided(res.outcome):
            break
    return res
