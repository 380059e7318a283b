"""The archive as DuckDB views (in-process; nothing is served, nothing is written).

``connect(archive)`` opens an in-memory DuckDB database with these views:

- ``runs``: one row per archived run, from the catalog, with ``trusted`` (its ``signer`` is on the
  archive's allow-list, ``harness/history/trust.py``) (``harness/history/catalog.py``):
  run_id, machine_id, machine_label, kind, status, engine, engine_build, engine_version,
  engine_sha256, model (the first model), models (a list), settings (a list), started_at, ...;
- ``metrics``: one row per (run, model, setting, metric) the runs' analyses state, with value,
  lo, hi (the 95% interval) and n;
- ``samples``, ``requests``, ``events``, ``memory``: ``read_parquet`` over every cataloged run's
  table of that name (a run whose tables are past the archive's bounds is not cataloged,
  ``harness/history/table_bounds.py``) (``<archive>/<machine id>/<run id>/<table>.parquet``), with ``run_id`` and
  ``machine_id`` taken from the file's path (a copied run's rows may carry another id);
- ``median_k(n, k)``: for a sample of n values, the rank k (1-based) of the lower end of the
  distribution-free 95% interval of the median, [x_(k), x_(n-k+1)], as
  ``harness.analysis.intervals.median_interval`` computes it (null where n < 6).

The same Parquet files are readable by any engine (DuckDB over object storage, Spark, Trino).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from harness.errors import BadInput
from harness.analysis.intervals import median_ranks
from harness.history.catalog import METRIC_COLUMNS, RUN_COLUMNS, _arrow, _read_table, catalog_dir, refresh
from harness.history.run_medians import MEMORY_LIMIT
from harness.history.trust import trusted_keys
from harness.schema import table_schema
from harness.history.archive import MACHINE_ID, RUN_ID

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

    from harness.history.catalog import Catalog

TABLES = ("samples", "requests", "events", "memory")


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def connect(archive: Path, *, refresh_catalog: bool = True, tables: bool = True) -> DuckDBPyConnection:
    """A DuckDB connection with the archive's views (see the module's docstring); with
    ``tables=False`` only ``runs`` and ``metrics`` (what the named series read: no listing of
    every run's Parquet files)."""
    import duckdb

    archive = Path(archive)
    if not archive.is_dir():
        raise BadInput("no history archive there", where=str(archive),
                       hint="add runs first: lbench history add RESULTS_DIR (or give --archive)")
    catalog = refresh(archive) if refresh_catalog else None

    keys = pd.DataFrame({"key": pd.Series(sorted(trusted_keys(archive)), dtype="string")})
    con = duckdb.connect(":memory:", config={"memory_limit": MEMORY_LIMIT, "autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False, "temp_directory": ""})
    con.register("_trusted_keys", keys)
    con.execute("CREATE TABLE trusted_keys AS SELECT * FROM _trusted_keys")
    con.unregister("_trusted_keys")
    cdir = catalog_dir(archive)
    for name, schema in (("runs", RUN_COLUMNS), ("metrics", METRIC_COLUMNS)):
        path = cdir / f"{name}.parquet"
        if path.is_file() and not path.is_symlink():
            con.execute(f"CREATE VIEW {name} AS SELECT *{_TRUSTED if name == 'runs' else ''} "
                        f"FROM read_parquet('{_sql_path(path)}')")
        else:  # an empty archive, or a read-only one whose catalog could not be saved: held in memory

            catalog = catalog or refresh(archive)
            con.register(f"_{name}_catalog", _arrow(getattr(catalog, name), schema))
            con.execute(f"CREATE VIEW {name} AS SELECT *{_TRUSTED if name == 'runs' else ''} FROM _{name}_catalog")
    cataloged = _cataloged_dirs(archive, catalog) if tables else []
    for table in TABLES if tables else ():
        # the runs the catalog holds (their tables checked against the archive's bounds), nothing else
        files = [d / f"{table}.parquet" for d in cataloged]
        files = [f for f in files if f.is_file() and not f.is_symlink()]
        if files:
            listed = ", ".join(f"'{_sql_path(f)}'" for f in files)
            con.execute(
                f"CREATE VIEW {table} AS SELECT * EXCLUDE (run_id, filename), "
                f"regexp_extract(filename, '([^/]+)/[^/]+$', 1) AS run_id, "
                f"regexp_extract(filename, '([^/]+)/[^/]+/[^/]+$', 1) AS machine_id "
                f"FROM read_parquet([{listed}], filename = true, union_by_name = true)")
        else:
            schema = table_schema(table)
            empty = schema.empty() if schema is not None else pd.DataFrame({"run_id": pd.Series(dtype="string")})
            if "run_id" not in empty:
                empty["run_id"] = pd.Series(dtype="string")
            empty["machine_id"] = pd.Series(dtype="string")
            con.register(f"_{table}_empty", empty)
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM _{table}_empty")
    if tables:
        ranks = median_ranks()  # noqa: F841 (read by DuckDB by name)
        con.execute("CREATE TABLE median_k AS SELECT * FROM ranks")
    con.execute("CREATE TABLE lbench_archive AS SELECT ? AS root", [str(archive.resolve())])
    return con


def _cataloged_dirs(archive: Path, catalog: Catalog | None) -> list[Path]:
    """The run directories the catalog lists, each ``<machine id>/<run id>`` inside the archive."""
    runs = catalog.runs if catalog is not None else _read_table(catalog_dir(archive) / "runs.parquet", RUN_COLUMNS)
    out = []
    for rel in sorted(str(r) for r in runs["dir"].dropna()):
        parts = rel.split("/")
        if len(parts) == 2 and MACHINE_ID.match(parts[0]) and RUN_ID.match(parts[1]):
            out.append(archive / parts[0] / parts[1])
    return out


_TRUSTED = ", coalesce(signer IN (SELECT key FROM trusted_keys), false) AS trusted"
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)


def check_read_only(sql: str, con: DuckDBPyConnection) -> None:
    """One SELECT (or WITH ... SELECT) statement, nothing else (no writes, no settings)."""
    text = _COMMENT.sub(" ", sql).strip()
    if not re.match(r"(?is)^\(*\s*(select|with|from)\b", text):
        raise BadInput("history query runs only SELECT (or WITH ... SELECT) statements", where=sql[:80],
                       hint="the archive is read-only here; e.g. lbench history query \"SELECT * FROM runs\"")
    import duckdb

    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise BadInput(f"the query does not parse: {exc}", where=sql[:80],
                       hint="views: runs, metrics, samples, requests, events, memory (docs/history.md)") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise BadInput("history query runs exactly one SELECT statement", where=sql[:80],
                       hint="split several queries into several commands")
