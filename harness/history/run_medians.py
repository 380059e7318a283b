"""Each idle run's warm and woken median latency, computed once, when the catalog adds the run.

A run's medians never change once it is archived, so the catalog keeps them as metric rows
(``idle_warm_p50``, ``idle_woken_p50``: value, the order-statistic 95% interval lo/hi, n) and the
named series read those rows instead of every run's samples: a series or the trend site costs a
read of the catalog, whatever the archive's size.  The regimes are those of the run's own wake
model (its ``wake_last_warm_s`` / ``wake_first_woken_s`` metric rows): warm = pauses up to its
last warm pause (every pause when it found no step), woken = from its first woken pause on (runs
with a step only); measured requests only, errors and non-positive latencies left out.  The
interval is [x_(k), x_(n-k+1)] with k from ``median_k`` (``harness/history/query.py``), as
``harness.analysis.intervals.median_interval`` gives it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from harness.analysis.intervals import MEDIAN_K_MAX, median_ranks

MEMORY_LIMIT = "1GB"  # DuckDB's own memory for one query here and in query.py (sorts and windows spill to its temp files past it)
BATCH = 500  # runs per DuckDB query: the memory one query takes is bounded by the batch, not the archive
METRICS = ("idle_warm_p50", "idle_woken_p50")


def _sql_list(paths: list[Path]) -> str:
    return ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)


def _query(files: list[Path]) -> str:

    return f"""
    WITH s AS (
        SELECT regexp_extract(filename, '([^/]+)/[^/]+$', 1) AS run_id, model, setting,
               pause_requested_s AS pause, latency_ms
        FROM read_parquet([{_sql_list(files)}], filename = true, union_by_name = true)
        WHERE phase = 'measure' AND error IS NULL AND latency_ms > 0),
    lw AS (SELECT run_id, model, setting, value FROM bounds WHERE metric = 'wake_last_warm_s'),
    fw AS (SELECT run_id, model, setting, value FROM bounds WHERE metric = 'wake_first_woken_s'),
    r AS (
        SELECT s.run_id, s.model, s.setting, s.latency_ms, 'idle_warm_p50' AS metric
        FROM s LEFT JOIN lw USING (run_id, model, setting)
        WHERE lw.value IS NULL OR s.pause <= lw.value
        UNION ALL
        SELECT s.run_id, s.model, s.setting, s.latency_ms, 'idle_woken_p50' AS metric
        FROM s JOIN fw USING (run_id, model, setting)
        WHERE fw.value IS NOT NULL AND s.pause >= fw.value),
    w AS (
        SELECT *, row_number() OVER (PARTITION BY run_id, model, setting, metric ORDER BY latency_ms) AS rank,
               count(*) OVER (PARTITION BY run_id, model, setting, metric) AS n
        FROM r)
    SELECT w.run_id, w.model, w.setting, w.metric, quantile_cont(w.latency_ms, 0.5) AS value,
           max(w.latency_ms) FILTER (WHERE w.rank = m.k) AS lo,
           max(w.latency_ms) FILTER (WHERE w.rank = w.n - m.k + 1) AS hi, w.n
    FROM w LEFT JOIN (
        SELECT n, k FROM median_k
        UNION ALL SELECT n, floor(n / 2 - 0.98 * sqrt(n))::BIGINT AS k
        FROM (SELECT DISTINCT n FROM w WHERE n > {MEDIAN_K_MAX})) m ON m.n = w.n
    GROUP BY w.run_id, w.model, w.setting, w.metric, w.n
    ORDER BY w.run_id, w.model, w.setting, w.metric"""


def idle_medians(run_dirs: list[Path], bounds: pd.DataFrame) -> tuple[list[dict], list[str]]:
    """Metric rows (catalog columns) of the idle runs in ``run_dirs`` (archive run directories,
    each named by its run id), with ``bounds`` holding their wake-model metric rows; and the
    runs whose samples could not be read (a damaged table: that run gets no median, the others do)."""
    import duckdb


    files = [d / "samples.parquet" for d in run_dirs]
    files = [f for f in files if f.is_file() and not f.is_symlink()]
    if not files:
        return [], []
    if bounds.empty:
        bounds = pd.DataFrame({"run_id": pd.Series(dtype="string"), "model": pd.Series(dtype="string"),
                               "setting": pd.Series(dtype="string"), "metric": pd.Series(dtype="string"),
                               "value": pd.Series(dtype="float64")})
    else:
        bounds = bounds[bounds["metric"].isin(["wake_last_warm_s", "wake_first_woken_s"])][
            ["run_id", "model", "setting", "metric", "value"]]
    con = duckdb.connect(":memory:", config={"memory_limit": MEMORY_LIMIT, "temp_directory": "",
                                             "autoinstall_known_extensions": False,
                                             "autoload_known_extensions": False})
    try:
        con.register("bounds", bounds)
        con.register("median_k", median_ranks())
        rows: list[dict] = []
        failed: list[str] = []
        for i in range(0, len(files), BATCH):
            batch = files[i:i + BATCH]
            try:
                rows += con.execute(_query(batch)).df().to_dict("records")
            except duckdb.Error:  # one damaged table fails its batch: read that batch one run at a time
                for f in batch:
                    try:
                        rows += con.execute(_query([f])).df().to_dict("records")
                    except duckdb.Error as exc:
                        failed.append(f"{f.parent.parent.name}/{f.parent.name}: {str(exc).splitlines()[0]}")
    finally:
        con.close()
    clean = [{k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()} for row in rows]
    return clean, failed
