"""What a repro run showed: verdict counts and each claim's verdict and figures."""

from __future__ import annotations

import json

from harness.schema import records
from harness.store import Run


def summarize_run(run: Run) -> dict:
    """The repro part of analysis.json (see harness/analysis/persisted.py)."""
    claims, counts = [], {}
    for r in records(run.table("verdicts")):
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        try:
            figures = json.loads(r.get("figures") or "{}")
        except ValueError:
            figures = {}
        claims.append({"claim_id": r["claim_id"], "verdict": r["verdict"], "cause": r.get("cause"),
                       "reason": r.get("reason"), "figures": figures})
    return {"counts": counts, "claims": claims}
