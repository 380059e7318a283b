"""Named series over the archive: one function per series, each returning tidy rows.

Every row is one run's value of the series for one (model, setting) on one machine:
``series, run_id, machine_id, machine_label, build, started_at, model, setting, value, lo, hi, n``
(``lo``/``hi``: the value's 95% interval, null where the run cannot give one).  Only complete runs
count.  The series (``SERIES``; ``history:<name>`` elsewhere):

- ``idle_warm_p50`` (ms): the median client latency of an idle run's measured requests in the
  warm regime as the run's wake model bounds it (pauses up to its last warm pause; every pause
  when it found no step), with the order-statistic interval of the median: the report's warm median;
- ``idle_woken_p50`` (ms): the same from the first woken pause on (runs with a step only);
- ``wake_threshold_s`` (s), ``wake_penalty_ms`` (ms): the wake step's pause and woken - warm
  penalty from each run's analysis (``harness/analysis/regimes.py``), with their intervals;
- ``swap_load_ms`` (ms), ``swap_evict_ms`` (ms): per model, the median spawn -> loaded time of its
  loads and the median time to stop it as an eviction victim, over a swap run;
- ``peak_children``, ``peak_rss_mb``: a swap run's peak model children alive and tree RSS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from harness.errors import BadInput
from harness.history.query import MEDIAN_K_MAX

COLUMNS = ["series", "run_id", "machine_id", "machine_label", "build", "started_at", "model", "setting",
           "value", "lo", "hi", "n"]


@dataclass(frozen=True)
class Series:
    name: str
    title: str
    unit: str
    kind: str  # idle | swap
    rows: Callable[..., pd.DataFrame]
    claim: str | None = None  # swap: the claim `lbench bisect CLAIM` checks for this series


def _filters(machine: str | None, model: str | None, setting: str | None, alias: str = "r",
             model_col: str = "g.model", setting_col: str = "g.setting") -> tuple[str, list]:
    where, params = [f"{alias}.status = 'complete'"], []
    if machine:
        where.append(f"({alias}.machine_id = ? OR contains({alias}.machine_label, ?))")
        params += [machine, machine]
    if model:
        where.append(f"{model_col} = ?")
        params.append(model)
    if setting:
        where.append(f"{setting_col} = ?")
        params.append(setting)
    return " AND ".join(where), params


def selected_runs(con, kind: str, machine: str | None, model: str | None) -> list[str]:
    """The directories (``runs.dir``) of the complete runs of ``kind`` that match the filters."""
    where, params = ["r.kind = ?", "r.status = 'complete'"], [kind]
    if machine:
        where.append("(r.machine_id = ? OR contains(r.machine_label, ?))")
        params += [machine, machine]
    if model:
        where.append("list_contains(r.models, ?)")
        params.append(model)
    return [d for (d,) in con.execute(f"SELECT r.dir FROM runs r WHERE {' AND '.join(where)}", params).fetchall()]


def _idle_latency(con, name: str, woken: bool, machine=None, model=None, setting=None) -> pd.DataFrame:
    from harness.history.query import table_source

    source = table_source(con, "samples", selected_runs(con, "idle", machine, model))
    if source is None:
        return pd.DataFrame(columns=COLUMNS)
    # the run's wake model bounds the regimes (its report, terminal and evidence use the same bounds):
    # warm = pauses up to its last warm pause (every pause when it found no step), woken = from its
    # first woken pause on (runs with a step only)
    regime = ("fw.value IS NOT NULL AND s.pause >= fw.value" if woken
              else "lw.value IS NULL OR s.pause <= lw.value")
    where, params = _filters(machine, model, setting)
    sql = f"""
    WITH s AS (
        SELECT run_id, model, setting, pause_requested_s AS pause, latency_ms,
               min(pause_requested_s) OVER (PARTITION BY run_id, model, setting) AS shortest
        FROM {source} WHERE phase = 'measure' AND error IS NULL AND latency_ms > 0),
    lw AS (SELECT run_id, model, setting, value FROM metrics WHERE metric = 'wake_last_warm_s'),
    fw AS (SELECT run_id, model, setting, value FROM metrics WHERE metric = 'wake_first_woken_s'),
    w AS (
        SELECT s.run_id, s.model, s.setting, s.latency_ms,
               row_number() OVER (PARTITION BY s.run_id, s.model, s.setting ORDER BY s.latency_ms) AS rank,
               count(*) OVER (PARTITION BY s.run_id, s.model, s.setting) AS n
        FROM s LEFT JOIN lw ON lw.run_id = s.run_id AND lw.model = s.model AND lw.setting = s.setting
               LEFT JOIN fw ON fw.run_id = s.run_id AND fw.model = s.model AND fw.setting = s.setting
        WHERE {regime}),
    g AS (
        SELECT w.run_id, w.model, w.setting, w.n, quantile_cont(w.latency_ms, 0.5) AS value,
               max(w.latency_ms) FILTER (WHERE w.rank = m.k) AS lo,
               max(w.latency_ms) FILTER (WHERE w.rank = w.n - m.k + 1) AS hi
        FROM w LEFT JOIN (
            SELECT n, k FROM median_k
            UNION ALL SELECT n, floor(n / 2 - 0.98 * sqrt(n))::BIGINT AS k
            FROM (SELECT DISTINCT n FROM w WHERE n > {MEDIAN_K_MAX})) m ON m.n = w.n
        GROUP BY ALL)
    SELECT '{name}' AS series, r.run_id, r.machine_id, r.machine_label, r.engine_build AS build, r.started_at,
           g.model, g.setting, g.value, g.lo, g.hi, g.n
    FROM g JOIN runs r ON r.run_id = g.run_id
    WHERE r.kind = 'idle' AND {where}
    ORDER BY r.machine_id, g.model, g.setting, r.engine_build NULLS FIRST, r.started_at"""
    return con.execute(sql, params).df()[COLUMNS]


def _metric(con, name: str, metric: str, kind: str, machine=None, model=None, setting=None) -> pd.DataFrame:
    where, params = _filters(machine, model, setting, model_col="m.model", setting_col="m.setting")
    sql = f"""
    SELECT '{name}' AS series, r.run_id, r.machine_id, r.machine_label, r.engine_build AS build, r.started_at,
           m.model, m.setting, m.value, m.lo, m.hi, m.n
    FROM metrics m JOIN runs r ON r.run_id = m.run_id
    WHERE m.metric = ? AND m.value IS NOT NULL AND r.kind = ? AND {where}
    ORDER BY r.machine_id, m.model, m.setting, r.engine_build NULLS FIRST, r.started_at"""
    return con.execute(sql, [metric, kind, *params]).df()[COLUMNS]


def idle_warm_p50(con, **filters) -> pd.DataFrame:
    return _idle_latency(con, "idle_warm_p50", False, **filters)


def idle_woken_p50(con, **filters) -> pd.DataFrame:
    return _idle_latency(con, "idle_woken_p50", True, **filters)


def wake_threshold(con, **filters) -> pd.DataFrame:
    return _metric(con, "wake_threshold_s", "wake_threshold_s", "idle", **filters)


def wake_penalty(con, **filters) -> pd.DataFrame:
    return _metric(con, "wake_penalty_ms", "wake_penalty_ms", "idle", **filters)


def swap_load(con, **filters) -> pd.DataFrame:
    return _metric(con, "swap_load_ms", "swap_load_ms", "swap", **filters)


def swap_evict(con, **filters) -> pd.DataFrame:
    return _metric(con, "swap_evict_ms", "swap_evict_ms", "swap", **filters)


def peak_children(con, **filters) -> pd.DataFrame:
    return _metric(con, "peak_children", "peak_children", "swap", **filters)


def peak_rss(con, **filters) -> pd.DataFrame:
    return _metric(con, "peak_rss_mb", "peak_rss_mb", "swap", **filters)


SERIES: dict[str, Series] = {s.name: s for s in (
    Series("idle_warm_p50", "idle latency, warm regime (median)", "ms", "idle", idle_warm_p50),
    Series("idle_woken_p50", "idle latency, woken regime (median)", "ms", "idle", idle_woken_p50),
    Series("wake_threshold_s", "wake threshold (pause where latency steps up)", "s", "idle", wake_threshold),
    Series("wake_penalty_ms", "wake penalty (woken - warm median)", "ms", "idle", wake_penalty),
    Series("swap_load_ms", "swap load time (spawn -> loaded, median)", "ms", "swap", swap_load,
           claim="router-queue-shared-entry"),
    Series("swap_evict_ms", "eviction time (victim stop, median)", "ms", "swap", swap_evict,
           claim="router-stop-timeout"),
    Series("peak_children", "peak model children alive", "children", "swap", peak_children, claim="router-cap"),
    Series("peak_rss_mb", "peak process-tree RSS", "MB", "swap", peak_rss, claim="router-peak-memory"),
)}


def get_series(name: str) -> Series:
    series = SERIES.get(name)
    if series is None:
        raise BadInput(f"no history series {name!r}", where="series name",
                       hint=f"series: {', '.join(SERIES)}")
    return series


def series_rows(con, name: str, *, machine: str | None = None, model: str | None = None,
                setting: str | None = None) -> pd.DataFrame:
    return get_series(name).rows(con, machine=machine, model=model, setting=setting)


def all_series(con, *, machine: str | None = None, model: str | None = None) -> pd.DataFrame:
    """Every named series' rows, stacked (the trend site's input); read one machine at a time, so
    the memory a full scan takes grows with the largest machine's share, not the archive."""
    machines = [machine] if machine else [m for (m,) in con.execute(
        "SELECT DISTINCT machine_id FROM runs ORDER BY machine_id").fetchall()]
    frames = [s.rows(con, machine=m, model=model) for m in machines for s in SERIES.values()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
