"""Error rates of the gate from real runs (the figures ``lbench gate-bench`` prints).

Input: the decision rows of harness.runs.gate_bench (one row per gate decision; trials are
independent, so each condition's failures are a binomial count).  Output, per condition:
decisions, how many failed / passed / were inconclusive / refused, and the failure rate with
its exact (Clopper-Pearson) 95% interval: under A/A that rate is the false-alarm rate, under
the slowed condition it is the detection rate.  With 10 trials and no failure the false-alarm
interval is [0%, 31%]: a small benchmark cannot show a 1% rate, and the table says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pandas as pd

from harness.analysis.intervals import clopper_pearson

if TYPE_CHECKING:
    from harness.analysis.verdicts import Verdict

CONDITIONS = {"A/A": "false alarms", "slowed": "detected"}


def error_rates(decisions: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for condition, label in CONDITIONS.items():
        sub = decisions[decisions["condition"] == condition]
        n = len(sub)
        fails = int((sub["gate_status"] == "fail").sum())
        low, high = clopper_pearson(fails, n)
        rows.append({"condition": condition, "measures": label, "decisions": n, "failed": fails,
                     "passed": int((sub["gate_status"] == "pass").sum()),
                     "inconclusive": int((sub["gate_status"] == "inconclusive").sum()),
                     "refused": int((sub["gate_status"] == "refuse").sum()),
                     "rate": fails / n if n else float("nan"), "rate_ci_low": low, "rate_ci_high": high,
                     "minutes_per_decision": float(sub["trial_wall_s"].mean() / 60) if n else float("nan")})
    return pd.DataFrame(rows)


def slowdown_size(verdicts: Iterable[Verdict]) -> list[dict]:
    """The true size of the slowed condition: A (A and A2 pooled) vs B over every trial, per gating group."""
    return [{"group": v.key(), "ratio": v.ratio, "ratio_ci_low": v.ratio_ci[0], "ratio_ci_high": v.ratio_ci[1],
             "runs_a": v.n_runs_a, "runs_b": v.n_runs_b} for v in verdicts if v.primary]


def sentences(rates: pd.DataFrame, size: list[dict], *, goal_false_alarm: float = 0.01,
              goal_detection: float = 0.90) -> list[str]:
    """The findings in words, with the honest limits of the sample."""
    out = []
    by = rates.set_index("condition")
    if "A/A" in by.index and by.loc["A/A", "decisions"]:
        r = by.loc["A/A"]
        verdict = ("meets" if r.rate_ci_high <= goal_false_alarm else
                   "misses" if r.rate_ci_low > goal_false_alarm else "can neither show nor rule out")
        out.append(f"False alarms: {int(r.failed)} of {int(r.decisions)} A/A decisions ({r.rate:.0%}, 95% interval "
                   f"[{r.rate_ci_low:.0%}, {r.rate_ci_high:.0%}]); this {verdict} the goal of <= {goal_false_alarm:.0%}"
                   + (f" ({_trials_needed(goal_false_alarm)} failure-free decisions would be needed to show it)"
                      if verdict != "meets" and not r.failed else "") + ".")
    if "slowed" in by.index and by.loc["slowed", "decisions"]:
        r = by.loc["slowed"]
        verdict = ("meets" if r.rate_ci_low >= goal_detection else
                   "misses" if r.rate_ci_high < goal_detection else "can neither show nor rule out")
        out.append(f"Detection: {int(r.failed)} of {int(r.decisions)} slowed decisions failed the gate ({r.rate:.0%}, "
                   f"95% interval [{r.rate_ci_low:.0%}, {r.rate_ci_high:.0%}]); {int(r.inconclusive)} inconclusive; "
                   f"this {verdict} the goal of >= {goal_detection:.0%}.")
    for s in size:
        out.append(f"True size of the slowdown, {s['group']}: {s['ratio']:.3f}x [{s['ratio_ci_low']:.3f}, "
                   f"{s['ratio_ci_high']:.3f}] ({s['runs_a']} A runs vs {s['runs_b']} B runs pooled).")
    return out


def _trials_needed(rate: float) -> int:
    """Fewest failure-free decisions whose exact two-sided 95% upper bound, 1 - 0.025^(1/n), is <= rate."""
    import math

    return math.ceil(math.log(0.025) / math.log(1 - rate))
