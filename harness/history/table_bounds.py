"""A run's tables checked from what they declare, before anything reads them.

A Parquet file states its rows, row groups, the decoded (uncompressed) size of each row group and
its columns' types in its footer: ``check_run_tables`` reads only the footers of a run's tables and
refuses a table that would decode past the archive's bounds (a 7.7 MB file can hold 50 million
rows) or whose known columns have another type than the store's schema (``harness/schema.py``:
a text ``latency_ms`` would break every query over the archive's ``samples`` view).  Journals
(``*.jsonl``, read when a table has no Parquet copy) are bounded by their size.  The bounds are far
above what lbench writes (docs/reliability.md) and apply to the history archive only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.schema import TABLES
from harness.untrusted import open_regular

MAX_PARQUET_BYTES = 512 * 1024 * 1024  # a file
MAX_ROWS = 2_000_000  # per table; a long idle sweep writes thousands, a swap storm tens of thousands
MAX_ROW_GROUPS = 10_000
MAX_DECODED_BYTES = 1024 * 1024 * 1024  # uncompressed, all row groups together
MAX_JOURNAL_BYTES = 512 * 1024 * 1024


def _type_ok(dtype: str, arrow_type: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_null(arrow_type):
        return True  # a column with no value yet
    if dtype in ("str", "string"):
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) \
            or pa.types.is_dictionary(arrow_type) and pa.types.is_string(arrow_type.value_type)
    if dtype in ("Int64", "int64"):
        return pa.types.is_integer(arrow_type)
    if dtype == "float64":
        return pa.types.is_floating(arrow_type) or pa.types.is_integer(arrow_type)
    if dtype in ("boolean", "bool"):
        return pa.types.is_boolean(arrow_type)
    return True


def _refuse(what: str, path: Path) -> BadInput:
    return BadInput(what, where=str(path), hint="this is not a table lbench wrote (docs/reliability.md, bounds of the "
                                                "history archive); the run is not added")


def check_parquet(path: Path, table: str | None) -> int:
    """The table's declared rows, after checking its footer against the bounds and the schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fd, _ = open_regular(path, max_bytes=MAX_PARQUET_BYTES, what=f"table {path.name}")
    with os.fdopen(fd, "rb") as fh:
        try:
            pf = pq.ParquetFile(fh)
            meta = pf.metadata
            arrow_schema = pf.schema_arrow
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise _refuse(f"the table is not a readable Parquet file ({type(exc).__name__})", path) from None
        if meta.num_rows > MAX_ROWS or meta.num_rows < 0:
            raise _refuse(f"the table declares {meta.num_rows:,} rows, over the archive's bound of {MAX_ROWS:,}", path)
        if meta.num_row_groups > MAX_ROW_GROUPS:
            raise _refuse(f"the table declares {meta.num_row_groups:,} row groups, over the bound of "
                          f"{MAX_ROW_GROUPS:,}", path)
        decoded = sum(max(0, meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
        if decoded > MAX_DECODED_BYTES:
            raise _refuse(f"the table declares {decoded:,} bytes once decoded, over the bound of "
                          f"{MAX_DECODED_BYTES:,}", path)
    schema = TABLES.get(table) if table else None
    if schema is not None:
        if "run_id" in schema.columns and arrow_schema.get_field_index("run_id") < 0:
            raise _refuse(f"table {table} has no run_id column (the store writes it on every row)", path)
        for name, (dtype, _) in schema.columns.items():
            idx = arrow_schema.get_field_index(name)
            if idx >= 0 and not _type_ok(dtype, arrow_schema.field(idx).type):
                raise _refuse(f"column {name} of table {table} is {arrow_schema.field(idx).type}, the schema says "
                              f"{dtype}", path)
    return int(meta.num_rows)


def check_run_tables(run_dir: Path) -> None:
    """Every table at the top of a run directory (``<table>.parquet``, ``<table>.jsonl``) within bounds."""
    for entry in sorted(Path(run_dir).iterdir()):
        if entry.is_symlink() or not entry.is_file():
            continue
        if entry.suffix == ".parquet":
            check_parquet(entry, entry.stem)
        elif entry.suffix == ".jsonl":
            size = entry.stat().st_size
            if size > MAX_JOURNAL_BYTES:
                raise _refuse(f"the journal is {size:,} bytes, over the archive's bound of {MAX_JOURNAL_BYTES:,}",
                              entry)
