"""Error rates of the gate from real runs (the figures ``lbench gate-bench`` prints), and what a
``gate-bench`` run's ``analysis.json`` holds (``summarize_run``).

Input: the decision rows of harness.runs.gate_bench (one row per gate decision; trials are
independent, so each condition's failures are a binomial count).  Output, per condition:
decisions, how many failed / passed / were inconclusive / refused, and the failure rate with
its exact (Clopper-Pearson) 95% interval: under A/A that rate is the false-alarm rate, under
the slowed condition it is the detection rate.  With 10 trials and no failure the false-alarm
interval is [0%, 31%]: a small benchmark cannot show a 1% rate, and the table says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.intervals import clopper_pearson
from harness.schema import records
from harness.store import Run

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
                     "unproven": int((sub["gate_status"] == "unproven").sum()),
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
    if "A/A" in by.index and by.loc["A/A", "decisions"]:
        r = by.loc["A/A"]
        low, high = clopper_pearson(int(r.passed), int(r.decisions))
        out.append(f"Unchanged builds called no change: {int(r.passed)} of {int(r.decisions)} A/A decisions "
                   f"({r.passed / r.decisions:.0%}, 95% interval [{low:.0%}, {high:.0%}]); {int(r.inconclusive)} "
                   f"inconclusive, {int(r.get('unproven', 0))} unproven.")
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


# ---- a gate-bench run: its tables read back -----------------------------------------------------

CELL_KEYS = {"gate": ("spread", "run_sd", "rule", "runs_per_side", "history_runs", "trials"),
             "ab": ("spread", "run_sd", "spending", "min_rounds", "max_rounds", "trials")}


def simulated_rows(row: dict, campaign: str) -> list[dict]:
    """One simulated cell (a row of ``harness.analysis.gate_sim.simulate_gate``/``simulate_ab``) as
    tidy rows of the ``simulated`` table: one per figure, a rate with its count and interval."""
    cell = {k: row[k] for k in CELL_KEYS[campaign]}
    out = []
    for figure, value in row.items():
        if figure in cell:
            continue
        base = {"campaign": campaign, **cell, "figure": figure}
        if isinstance(value, dict):
            out.append({**base, "count": value["k"], "value": value["rate"], "value_ci_low": value["ci"][0],
                        "value_ci_high": value["ci"][1]})
        else:
            out.append({**base, "value": float(value)})
    return out


def cells(frame: pd.DataFrame, campaign: str) -> list[dict]:
    """The ``simulated`` table back as the cells ``simulated_rows`` took apart, in their order."""
    keys = CELL_KEYS[campaign]
    out: dict[tuple, dict] = {}
    for r in records(frame[frame["campaign"] == campaign]):
        cell_key = tuple(r.get(k) for k in keys)
        cell = out.setdefault(cell_key, {k: r.get(k) for k in keys})
        value = r.get("value")
        value = math.nan if value is None else float(value)
        if r.get("count") is None:
            cell[str(r.get("figure"))] = value
        else:
            cell[str(r.get("figure"))] = {"k": int(r["count"]), "n": cell["trials"], "rate": value,
                                          "ci": [r.get("value_ci_low"), r.get("value_ci_high")]}
    return list(out.values())


def _sizes(value: Any) -> list[dict]:
    """The pooled slowdown's size from the manifest (untrusted): the rows that have every figure."""
    keys = ("group", "ratio", "ratio_ci_low", "ratio_ci_high", "runs_a", "runs_b")
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, dict) and all(k in v for k in keys)
            and all(isinstance(v[k], (int, float)) for k in keys[1:])]


def summarize_run(run: Run) -> dict:
    """The gate-bench part of analysis.json: on real runs the rates per condition, the slowdown's
    pooled size and the findings; with ``--simulate`` the simulated cells of the gate and of ab."""
    section = run.record.section("gate_bench")
    if section.get("mode") == "simulated":
        frame = run.table("simulated")
        gate, ab = cells(frame, "gate"), cells(frame, "ab")
        return {"mode": "simulated", "gate": gate, "ab": ab,
                "findings": [f"{len(gate)} gate cells and {len(ab)} ab cells simulated (simulated runs, not "
                             f"timings; seed {section.get('seed')})."]}
    rates = error_rates(run.table("decisions"))
    size = _sizes(section.get("slowdown_size"))
    return {"mode": "measured", "rates": rates.to_dict("records"), "slowdown_size": size,
            "findings": sentences(rates, size)}
