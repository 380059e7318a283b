"""What a repro run showed: verdict counts and each claim's verdict and figures."""

from __future__ import annotations

import json

from harness.schema import records
from harness.store import Run


def summarize_run(run: Run) -> dict:
    """The repro part of analysis.json (see harness/analysis/persisted.py)."""
    claims: list[dict] = []
    counts: dict[str, int] = {}
    for r in records(run.table("verdicts")):
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        try:
            figures = json.loads(r.get("figures") or "{}")
        except ValueError:
            figures = {}
        claims.append({"claim_id": r["claim_id"], "verdict": r["verdict"], "cause": r.get("cause"),
                       "reason": r.get("reason"), "figures": figures})
    return {"counts": counts, "claims": claims, "findings": findings(claims, counts)}


def findings(claims: list[dict], counts: dict[str, int]) -> list[str]:
    """The headline in sentences: verdicts counted, then each claim's verdict and why."""
    if not claims:
        return ["No claim was checked."]
    lines = [f"{len(claims)} claim{'s' if len(claims) != 1 else ''} checked: "
             + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()) + "."]
    for c in claims:
        cause = f" ({c['cause']})" if c.get("cause") else ""
        lines.append(f"{c['claim_id']}: {c['verdict']}{cause}" + (f": {c['reason']}" if c.get("reason") else "."))
    return lines
