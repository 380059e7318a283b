"""A run's tables as the analysis reads them: the raw tables plus the columns its kind derives.

The store keeps only what was measured; a kind that adds columns to its tables (a swap run's
``requests.served_as``, from its ``events``) says how in its ``derive`` (harness/runkind.py; the
kinds' list is harness/kinds/).  A kind without one reads its raw tables.
"""

from __future__ import annotations

import pandas as pd

from harness.runkind import find_kind
from harness.schema import apply_schema
from harness.store import Run


def analysis_table(run: Run, name: str) -> pd.DataFrame:
    """A run's table as the analysis reads it: the raw table plus the columns its kind derives
    (a swap run's ``requests.served_as`` from its ``events``).  The store keeps only what was
    measured; a failed derivation leaves the raw table."""
    kind = find_kind(run.record.kind)
    derive = kind.derive if kind is not None else None
    table = run.table(name)
    if derive is None:
        return table
    tables = {name: table, **{t: run.table(t) for t in ("events",) if t != name}}
    try:
        return apply_schema(derive(dict(tables))[name], name)
    except Exception:  # never lose the table to a bug in a derived column
        return table
