"""What an ``ab`` gate job's ``analysis.json`` holds (``summarize_run``), from its own tables.

The final look's contrasts per gated group (B against A, and the A/A floor), the per-round ratios
(each round's B level against the mean of its A and A/A levels, and A/A against A, as plain
ratios a reader can scan: the fit's contrasts also remove the round and position effects), the
outcome and its reason, and the findings in words.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from harness.schema import records
from harness.store import Run


def per_round_ratios(rounds: pd.DataFrame) -> list[dict]:
    """One row per round and group: each arm's median and the round's B/A and A/A ratios."""
    if rounds.empty:
        return []
    out = []
    for (group, rnd), sub in rounds.groupby(["group", "round"], sort=True):
        by = {str(r["arm"]): r for r in records(sub)}
        row: dict[str, Any] = {"group": group, "round": int(rnd),
                               "order": " ".join(str(r["arm"]) for r in sorted(by.values(), key=lambda r: r["position"]))}
        for arm in ("a", "b", "aa"):
            row[f"{arm}_ms"] = by[arm]["median_ms"] if arm in by else None
            row[f"{arm}_run_id"] = by[arm]["idle_run_id"] if arm in by else None
        base = [by[a]["level_log"] for a in ("a", "aa") if a in by]
        row["b_over_a"] = math.exp(by["b"]["level_log"] - sum(base) / len(base)) if "b" in by and base else None
        row["aa_over_a"] = math.exp(by["aa"]["level_log"] - by["a"]["level_log"]) if "aa" in by and "a" in by else None
        out.append(row)
    return out


def summarize_run(run: Run) -> dict:
    section = run.record.section("ab")
    found = section.get("outcome")
    outcome: dict[str, Any] = found if isinstance(found, dict) else {}
    looks = run.table("looks")
    final = looks[looks["round"] == looks["round"].max()] if not looks.empty else looks
    contrasts = records(final)
    status = str(outcome.get("status") or "inconclusive")
    findings = [f"{status}: {outcome.get('reason', '')} (after {outcome.get('rounds', 0)} rounds of "
                f"{outcome.get('planned_rounds', 0)} planned, {outcome.get('elapsed_s', 0)} s)"]
    for c in contrasts:
        findings.append(f"{c['group']}, {c['contrast']}: ratio {c['ratio']:.3f} [{c['ratio_ci_low']:.3f}, "
                        f"{c['ratio_ci_high']:.3f}] at a one-sided level of {c['level_one_sided']:.2g}, "
                        f"margin ±{c['margin']:.1%}: {c['verdict']}")
    return {"status": status, "outcome": outcome, "final_look": contrasts,
            "per_round": per_round_ratios(run.table("rounds")), "findings": findings,
            "looks": int(looks["round"].nunique()) if not looks.empty else 0}
