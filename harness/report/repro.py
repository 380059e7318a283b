"""Context for a repro run's report: one row per claim with its verdict and evidence."""

from __future__ import annotations

import json

from harness.schema import records
from harness.store import Run


def repro_context(run: Run, analysis: dict) -> dict:
    verdicts = run.table("verdicts")
    rows = []
    for r in records(verdicts):
        base = run.dir / r["evidence_dir"]
        files = sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())
        rows.append({**r, "figures": json.loads(r["figures"] or "{}"), "evidence": json.loads(r["evidence"] or "[]"),
                     "notes": json.loads(r["notes"] or "[]"), "files": files})
    counts = analysis["counts"]
    return {"run": run.record, "run_id": run.run_id, "incomplete": not run.complete, "rows": rows,
            "counts": counts, "findings": list(analysis.get("findings", [])),
            "host": run.record.host.facts, "engine": run.record.engine.facts}
