"""Preflight for the gate (``lbench gate-plan``): from runs of one design (a baseline measured
several times, or its history), the between-run spread of each gating group and the runs per side
a gate needs to detect a given slowdown with a given power, before any candidate is measured
(as pyperf's and ``bencher noise``'s estimates do).

Per gating group: s = sd of the per-run log level (the statistic the gate uses), its 95% interval
from the chi-square distribution with n - 1 df, and n per side = runs_per_side(s, target) from
harness.analysis.verdicts for both ``slower`` rules, at the estimate and at the interval's upper
end (a spread estimated from few runs is itself uncertain).  With ``as_history`` the same runs
would be passed as ``--history``: their df are added to the interval's, so fewer new runs decide.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from harness.analysis.verdicts import POWER, GroupData, run_levels, runs_per_side


@dataclass
class GroupPlan:
    group: str
    runs: int
    sd_run: float
    sd_ci: tuple[float, float]
    runs_margin: int | None  # runs per side, slower rule "margin", at the estimate
    runs_margin_upper: int | None  # ... at the upper end of the sd interval
    runs_zero: int | None
    runs_zero_upper: int | None
    runs_margin_with_history: int | None  # with these runs given as --history


def sd_interval(sd: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n < 2 or not math.isfinite(sd):
        return math.nan, math.nan
    df = n - 1
    q_hi, q_lo = stats.chi2.ppf([(1 + confidence) / 2, (1 - confidence) / 2], df)
    return float(sd * math.sqrt(df / q_hi)), float(sd * math.sqrt(df / q_lo))


def plan_from_sd(group: str, sd: float, n: int, *, margin: float, alpha: float, target: float, power: float = POWER,
                 k: int = 1) -> GroupPlan:
    a1 = alpha / 2 / max(k, 1)
    lo, hi = sd_interval(sd, n) if n else (math.nan, math.nan)

    def need(s: float, rule: str, extra: float = 0.0) -> int | None:
        return runs_per_side(s, target, margin=margin, alpha_one_sided=a1, power=power, rule=rule, extra_df=extra)
    return GroupPlan(group, n, sd, (lo, hi), need(sd, "margin"), need(hi, "margin"), need(sd, "zero"),
                     need(hi, "zero"), need(sd, "margin", float(max(n - 1, 0))))


def plan_groups(groups: Iterable[GroupData], *, margin: float, alpha: float, target: float,
                power: float = POWER) -> list[GroupPlan]:
    """Plans for the gating groups of harness.analysis.compare.build_groups(runs, runs)."""
    gating = [g for g in groups if g.gates and g.metric == "latency_ms"]
    out = []
    for g in gating:
        levels, _ = run_levels(g.a_runs)
        sd = float(np.std(levels, ddof=1)) if levels.size >= 2 else math.nan
        out.append(plan_from_sd(f"{g.model} · {g.setting} · {g.regime} · {g.metric}", sd, int(levels.size),
                                margin=margin, alpha=alpha, target=target, power=power, k=len(gating)))
    return out


def run_minutes(records: list) -> float:
    """Mean wall time of a run in minutes (the records' start and end), nan when unknown."""
    spans = [r.duration_s / 60 for r in records if r.duration_s is not None]
    return float(np.mean(spans)) if spans else math.nan
