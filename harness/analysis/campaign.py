"""The gate's campaigns: runs measured by an injected executor, judged as ``lbench gate`` judges.

One core serves ``lbench ab`` (interleaved A/B rounds with a sequential stop), ``lbench
gate-bench`` (trials of rotated rounds, ``harness/runs/gate_bench.py``) and ``lbench bisect
--gate`` (a reference build, then runs of each build, ``harness/runs/bisect_gate.py``):

- ``Campaign.measure(prep)`` is one run, made by the injected ``execute(prep, reporter, ...)``:
  real idle runs through ``RunSession`` and the store (``harness.runs.campaign.idle_campaign``,
  the one place the default executor is chosen), or simulated runs (``harness/analysis/gate_sim.py``);
- ``Campaign.look(a_runs, b_runs, cfg)`` is one gate decision: the verdicts with the runs as units
  (``judge``: ``harness.analysis.compare.judge_runs`` unless injected) at the look's level, and the
  gate's outcome of them.

``sequential_ab`` (the ``ab`` rounds) lives here because the simulation of ``ab`` runs it with
simulated runs; it measures nothing itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.compare import judge_runs
from harness.analysis.gate import GateConfig, GateOutcome, decide, verdict_config
from harness.analysis.sequential import look_levels

MIN_LOOK_ROUNDS = 2
SPENDING_DEFAULT = "obf"

Execute = Callable[..., Any]  # execute(prep, reporter[, extra_manifest=...]) -> a finished run
Judge = Callable[..., tuple[list, dict]]  # judge(a_runs, b_runs, verdict_config) -> (verdicts, info)


@dataclass
class Campaign:
    """Runs made by ``execute`` and decisions made by ``judge`` (see the module's docstring)."""

    execute: Execute
    reporter: Any  # message(text); executors of real runs also call model_progress, cell, advance
    judge: Judge = judge_runs

    def measure(self, prep: Any, *, reporter: Any = None, extra_manifest: dict | None = None) -> Any:
        reporter = self.reporter if reporter is None else reporter
        if extra_manifest is None:
            return self.execute(prep, reporter)
        return self.execute(prep, reporter, extra_manifest=extra_manifest)

    def look(self, a_runs: list, b_runs: list, cfg: GateConfig, *, alpha: float | None = None
             ) -> tuple[list, dict, GateOutcome]:
        """The verdicts of one look (at two-sided level ``alpha``, else ``cfg.alpha``), their info and the
        gate's outcome of them."""
        look_cfg = copy.copy(cfg)
        if alpha is not None:
            look_cfg.alpha = alpha
        verdicts, info = self.judge(a_runs, b_runs, verdict_config(look_cfg))
        return verdicts, info, decide(verdicts, look_cfg)


# ---- lbench ab: interleaved rounds, a sequential stop ------------------------------------------

def look_alphas(alpha: float, min_rounds: int, max_rounds: int, spending: str = SPENDING_DEFAULT) -> list[float]:
    """Two-sided alpha per look (twice each look's nominal one-sided level)."""
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

    def __init__(self, inner: Any, side: str):
        self.inner, self.side = inner, side

    def message(self, text: str) -> None:
        self.inner.message(text)

    def model_progress(self, done: int, total: int) -> None:
        self.inner.model_progress(done, total)

    def cell(self, label: str, total: int) -> None:
        self.inner.cell(f"{self.side}: {label}", total)

    def advance(self) -> None:
        self.inner.advance()


def sequential_ab(campaign: Campaign, prep_a: Any, prep_b: Any, cfg: GateConfig, *, min_rounds: int = 3,
                  max_rounds: int = 10, spending: str = SPENDING_DEFAULT) -> ABResult:
    """Rounds of one A and one B run in ABBA order until a look decides or ``max_rounds`` are spent
    (``harness/runs/ab.py`` says why)."""
    if min_rounds < MIN_LOOK_ROUNDS or max_rounds < min_rounds:
        raise ValueError(f"need {MIN_LOOK_ROUNDS} <= min_rounds <= max_rounds, got {min_rounds} / {max_rounds}")
    reporter = campaign.reporter
    alphas = look_alphas(cfg.alpha, min_rounds, max_rounds, spending)
    res = ABResult()
    for round_no in range(1, max_rounds + 1):
        order = (("A", prep_a, res.a_runs), ("B", prep_b, res.b_runs))
        for side, prep, runs in (order if round_no % 2 else order[::-1]):
            reporter.message(f"round {round_no}/{max_rounds}: {side}")
            runs.append(campaign.measure(prep, reporter=SideReporter(reporter, side)))
        if round_no < min_rounds:
            continue
        alpha = alphas[round_no - min_rounds]
        res.verdicts, res.info, res.outcome = campaign.look(res.a_runs, res.b_runs, cfg, alpha=alpha)
        res.looks.append({"round": round_no, "status": res.outcome.status, "alpha_per_look": alpha,
                          "spending": spending})
        reporter.message(f"look after round {round_no}: {res.outcome.status} (two-sided level at this look "
                         f"{alpha:.3g}, {spending} spending)")
        if decided(res.outcome):
            break
    return res
