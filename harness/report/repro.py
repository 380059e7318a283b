"""Context for a repro run's report: one row per claim with its verdict and evidence.

Everything here comes from the run's own tables, which are untrusted (a run directory from
elsewhere): a claim's ``evidence_dir`` is listed only when it is a relative path of plain names
inside the run directory (no ``..``, no absolute path, no link out), the listing is bounded, and
each link is a relative, percent-encoded path (never a scheme such as ``javascript:``); the JSON
columns that do not parse are shown as empty.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path, PurePosixPath
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from harness.schema import records
from harness.store import Run
from harness.untrusted import inside

MAX_LISTED = 200  # files linked per claim
MAX_DEPTH = 4
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")


def _json(value: Any, default: Any) -> Any:
    if not isinstance(value, str) or not value:
        return default
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return default
    return parsed if isinstance(parsed, type(default)) else default


def evidence_links(run_dir: Path, value: Any) -> list[tuple[str, str]]:
    """(href, name) of the files under a claim's evidence folder, or none when the value is not a
    relative folder of plain names inside the run directory."""
    if not isinstance(value, str) or not value or len(value) > 512:
        return []
    rel = PurePosixPath(value)
    if rel.is_absolute() or not rel.parts or not all(NAME.match(p) for p in rel.parts):
        return []
    base = Path(run_dir) / Path(*rel.parts)
    if not inside(run_dir, base):
        return []
    try:
        if not stat.S_ISDIR(os.lstat(base).st_mode):
            return []
    except OSError:
        return []
    found: list[str] = []
    stack: list[tuple[Path, str, int]] = [(base, "", 0)]
    while stack and len(found) < MAX_LISTED:
        d, prefix, depth = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if not NAME.match(e.name):
                continue
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                stack.append((Path(e.path), f"{prefix}{e.name}/", depth + 1))
            elif stat.S_ISREG(st.st_mode) and len(found) < MAX_LISTED:
                found.append(f"{prefix}{e.name}")
    return [(quote(f"{rel.as_posix()}/{f}", safe="/"), f) for f in sorted(found)]


def repro_context(run: Run, analysis: dict) -> dict:
    verdicts = run.table("verdicts")
    rows = []
    for r in records(verdicts):
        rows.append({**r, "figures": _json(r.get("figures"), {}), "evidence": _json(r.get("evidence"), []),
                     "notes": _json(r.get("notes"), []), "links": evidence_links(run.dir, r.get("evidence_dir"))})
    counts = analysis["counts"]
    facts = run.record.engine.facts
    engine = dict(facts) if isinstance(facts, Mapping) else {}
    return {"run": run.record, "run_id": run.run_id, "incomplete": not run.complete, "rows": rows,
            "counts": counts, "findings": list(analysis.get("findings", [])),
            "host": run.record.host.facts,
            "engine": {**engine, "backend": engine.get("backend") or "unknown",
                       "build_number": engine.get("build_number")}}
