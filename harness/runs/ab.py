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

import copy
from dataclasses import dataclass, field

from harness.analysis.gate import GateConfig, GateOutcome, decide, verdict_config

MIN_LOOK_ROUNDS = 2
SPENDING_DEFAULT = "obf"


def look_alphas(alpha: float, min_rounds: int, max_rounds: int, spending: str = SPENDING_DEFAULT) -> list[float]:
    """Two-sided alpha per look (twice each look's nominal one-sided level)."""
    from harness.analysis.sequential import look_levels

    return [2 * a for a in look_levels(min_rounds, max_rounds, alpha / 2, spending)]


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


class SideReporter:
    """The run's reporter with each progress bar labelled by its side (A or B): both sides measure the
    same model and setting, so without it the two bars read the same."""

    def __init__(self, inner, side: str):
        self.inner, self.side = inner, side

    def message(self, text: str) -> None:
        self.inner.message(text)

    def model_progress(self, done: int, total: int) -> None:
        self.inner.model_progress(done, total)

    def cell(self, label: str, total: int) -> None:
        self.inner.cell(f"{self.side}: {label}", total)

    def advance(self) -> None:
        self.inner.advance()


def run_ab(prep_a, prep_b, cfg: GateConfig, *, min_rounds: int = 3, max_rounds: int = 10, reporter=None,
           execute=None, judge=None, spending: str = SPENDING_DEFAULT) -> ABResult:
    """``execute(prep, reporter) -> Run`` and ``judge(a_runs, b_runs, vcfg)`` are injectable for tests."""
    if min_rounds < MIN_LOOK_ROUNDS or max_rounds < min_rounds:
        raise ValueError(f"need {MIN_LOOK_ROUNDS} <= min_rounds <= max_rounds, got {min_rounds} / {max_rounds}")
    if judge is None:
        from harness.analysis.compare import judge_runs as judge
    if execute is None:
        from harness.kinds import get_kind

        execute = get_kind("idle").execute
    if reporter is None:
        from harness.runs.idle import QuietReporter

        reporter = QuietReporter()
    alphas = look_alphas(cfg.alpha, min_rounds, max_rounds, spending)
    res = ABResult()
    for round_no in range(1, max_rounds + 1):
        order = (("A", prep_a, res.a_runs), ("B", prep_b, res.b_runs))
        for side, prep, runs in (order if round_no % 2 else order[::-1]):
            reporter.message(f"round {round_no}/{max_rounds}: {side}")
            runs.append(execute(prep, SideReporter(reporter, side)))
        if round_no < min_rounds:
            continue
        look_cfg = copy.copy(cfg)
        look_cfg.alpha = alphas[round_no - min_rounds]
        res.verdicts, res.info = judge(res.a_runs, res.b_runs, verdict_config(look_cfg))
        res.outcome = decide(res.verdicts, look_cfg)
        res.looks.append({"round": round_no, "status": res.outcome.status, "alpha_per_look": look_cfg.alpha,
                          "spending": spending})
        reporter.message(f"look after round {round_no}: {res.outcome.status} (two-sided level at this look "
                         f"{look_cfg.alpha:.3g}, {spending} spending)")
        if decided(res.outcome):
            break
    return res
