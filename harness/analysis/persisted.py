"""A run's analysis, computed once and kept with the run as ``analysis.json``.

``analysis.json`` holds what the CLI, the report and the evidence say about one run
(per-pause summaries and wake steps for idle runs, latency classes, swap phases and
findings for swap runs, verdict counts for repro runs), with its own
``schema_version`` (``ANALYSIS_VERSION``).  Executors write it when a run ends;
readers call ``load_analysis``, which recomputes only when the file is missing, older
than this lbench's version, written while the run had another status, or when asked
(``reanalyze=True``, the CLI's ``--reanalyze``).  Raw tables stay the source of truth:
deleting ``analysis.json`` loses nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TypeVar

from harness import __version__
from harness.analysis.frames import jsonable
from harness.atomic import atomic_write_text
from harness.errors import BadInput
from harness.runkind import find_kind
from harness.store import Run, utc_now
from harness.untrusted import read_json

T = TypeVar("T")

ANALYSIS_FILE = "analysis.json"
ANALYSIS_VERSION = 6  # 4: a storm's n_failed_requests; 5: the robust wake model (stalls out of the fit);
# 6: the wake step test, the place's interval (issue 44)
# bump ANALYSIS_VERSION when the content changes: older files are recomputed on read


def analyze(run: Run) -> dict:
    """Compute the run's analysis from its tables (no file is read but the run's own): its kind's
    ``summarize`` (harness/runkind.py); a kind lbench does not know has an empty summary."""
    kind = find_kind(run.record.kind)
    content = kind.summarize(run) if kind is not None else {}
    return {"schema_version": ANALYSIS_VERSION, "run_id": run.run_id, "kind": run.record.kind,
            "run_status": run.record.status, "rows": dict(run.record.rows),
            "lbench_version": __version__, "analyzed_at": utc_now(), **jsonable(content)}


def write_analysis(run: Run) -> dict:
    analysis = analyze(run)
    atomic_write_text(run.dir / ANALYSIS_FILE, json.dumps(analysis, indent=1, default=str, allow_nan=False))
    return analysis


def read_analysis(run: Run) -> dict | None:
    """The stored analysis if it is current for this run; None when it must be recomputed."""
    path = run.dir / ANALYSIS_FILE
    if not (path.exists() or path.is_symlink()):
        return None
    try:
        data = read_json(path, what="analysis.json")
    except BadInput:  # damaged, a FIFO, a link out of the run: recomputed from the tables
        return None
    if not isinstance(data, dict) or data.get("schema_version") != ANALYSIS_VERSION:
        return None  # older: recompute; newer: this lbench cannot read it, recompute without overwriting
    if data.get("run_id") != run.run_id or data.get("kind") != run.record.kind:
        return None  # copied from another run
    if data.get("run_status") != run.record.status or data.get("rows") != dict(run.record.rows):
        return None  # written before the run ended (or the run was touched since)
    return data


def load_analysis(run: Run, *, reanalyze: bool = False) -> dict:
    """The run's analysis: read from analysis.json, else computed (and saved unless the run is still running)."""
    if not reanalyze:
        stored = read_analysis(run)
        if stored is not None:
            return stored
    if run.record.unfinished or _newer_on_disk(run):
        return analyze(run)
    try:
        return write_analysis(run)
    except OSError:  # a read-only results folder still gets its report
        return analyze(run)


def _newer_on_disk(run: Run) -> bool:
    try:
        version = json.loads((run.dir / ANALYSIS_FILE).read_text()).get("schema_version")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(version, int) and version > ANALYSIS_VERSION


def analyze_finished(run: Run) -> str | None:
    """Write analysis.json for a run that just ended; the error text if the analysis failed (the data stays)."""
    try:
        write_analysis(run)
    except Exception as exc:  # analysis must never lose the data: readers recompute (and report) later
        return f"{type(exc).__name__}: {exc}"
    return None


# what a stored analysis.json with the right version but tampered content makes a reader raise
DAMAGED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def with_analysis(run: Run, use: Callable[[dict], T], *, reanalyze: bool = False) -> T:
    """``use(analysis)``; when a stored analysis.json makes it fail (a tampered or damaged file that
    still parses), the analysis is recomputed from the run's tables and ``use`` called once more."""
    analysis = load_analysis(run, reanalyze=reanalyze)
    try:
        return use(analysis)
    except DAMAGED as exc:
        if reanalyze or read_analysis(run) is None:
            raise  # computed just now: a real error
        print(f"note: analysis.json of run {run.run_id} could not be used ({type(exc).__name__}: {exc}); "
              "recomputed from the run's tables", file=sys.stderr)
        return use(load_analysis(run, reanalyze=True))
