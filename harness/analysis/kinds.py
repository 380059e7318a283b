"""What the analysis does for each kind of run: the analysis layer's table of kinds.

``SUMMARIZERS[kind](run)`` is the content of the run's ``analysis.json``
(``harness/analysis/persisted.py``); ``DERIVED[kind](tables)`` the raw tables with the columns
the analysis adds to them (a swap run's ``requests.served_as``, from its ``events``), read with
``analysis_table``.  The kinds' facts are in ``harness/kinds.py``; kinds without an entry have
an empty summary and no derived column.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from harness.analysis import ab, calibration, gate_bench, idle, repro, swap, swap_served
from harness.schema import apply_schema
from harness.store import Run

SUMMARIZERS: dict[str, Callable[[Run], dict]] = {
    "idle": idle.summarize_run,
    "calibrate": calibration.summarize_run,
    "swap": swap.summarize_run,
    "repro": repro.summarize_run,
    "gate-bench": gate_bench.summarize_run,
    "ab": ab.summarize_run,
}

DERIVED: dict[str, Callable[[dict[str, pd.DataFrame]], dict[str, pd.DataFrame]]] = {
    "swap": swap_served.derive_tables,
}


def analysis_table(run: Run, name: str) -> pd.DataFrame:
    """A run's table as the analysis reads it: the raw table plus the columns its kind derives
    (a swap run's ``requests.served_as`` from its ``events``).  The store keeps only what was
    measured; a failed derivation leaves the raw table."""
    derive = DERIVED.get(run.record.kind)
    table = run.table(name)
    if derive is None:
        return table
    tables = {name: table, **{t: run.table(t) for t in ("events",) if t != name}}
    try:
        return apply_schema(derive(dict(tables))[name], name)
    except Exception:  # never lose the table to a bug in a derived column
        return table
