"""Named series over the archive: one function per series, each returning tidy rows.

Every row is one run's value of the series for one (model, setting) on one machine:
``series, run_id, machine_id, machine_label, build, started_at, model, setting, value, lo, hi, n``
(``lo``/``hi``: the value's 95% interval, null where the run cannot give one).  Only complete runs
count.  The series (``SERIES``; ``history:<name>`` elsewhere):

- ``idle_warm_p50`` (ms): the median client latency of an idle run's measured requests in the
  warm regime as the run's wake model bounds it (pauses up to its last warm pause; every pause
  when it found no step), with the order-statistic interval of the median: the report's warm median
  (computed once per run when the catalog adds it, ``harness/history/run_medians.py``, so a series
  reads the catalog, not every run's samples);
- ``idle_woken_p50`` (ms): the same from the first woken pause on (runs with a step only);
- ``wake_threshold_s`` (s), ``wake_penalty_ms`` (ms): the wake step's pause and woken - warm
  penalty from each run's analysis (``harness/analysis/regimes.py``), with their intervals;
- ``swap_load_ms`` (ms), ``swap_evict_ms`` (ms): per model, the median spawn -> loaded time of its
  loads and the median time to stop it as an eviction victim, over a swap run;
- ``peak_children``, ``peak_rss_mb``: a swap run's peak model children alive and tree RSS;
- ``swap_failed_pct`` (%): the share of a storm's requests that failed, with its Clopper-Pearson
  interval.  Unlike the others it counts *failed* runs too: a storm is judged failed when all its
  requests failed or one passed its deadline, which is what this series exists to show (a run
  whose router never answered has sent nothing and gives no point).  Its values are compared on
  a linear scale (``Series.scale``): a change point's size is a difference in percentage points,
  since a share of 0 has no ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from harness.errors import BadInput

if TYPE_CHECKING:
    from duckdb import DuckDBPyConnection

COLUMNS = ["series", "run_id", "machine_id", "machine_label", "build", "started_at", "model", "setting",
           "value", "lo", "hi", "n"]


@dataclass(frozen=True)
class Series:
    name: str
    title: str
    unit: str
    kind: str  # idle | swap
    claim: str | None = None  # swap: the claim `lbench bisect CLAIM` checks for this series
    scale: str = "log"  # log: sizes are ratios of geometric means; linear: differences (values may be 0)
    statuses: tuple[str, ...] = ("complete",)  # the run statuses whose values count
    # what to run for a step no `lbench bisect` decides (no claim checks it, and `bisect --gate`
    # gates idle sweeps): a command with {lo} and {hi} for the builds either side; not a bisect
    measure: str | None = None

    def rows(self, con: DuckDBPyConnection, *, machine: str | None = None, model: str | None = None,
             setting: str | None = None) -> pd.DataFrame:
        """This series' rows: its metric in the catalog, for the runs of its kind that match."""
        return _metric(con, self.name, self.kind, machine=machine, model=model, setting=setting,
                       statuses=self.statuses)


def _filters(machine: str | None, model: str | None, setting: str | None, alias: str = "r",
             model_col: str = "g.model", setting_col: str = "g.setting",
             statuses: tuple[str, ...] = ("complete",)) -> tuple[str, list]:
    where, params = [f"{alias}.status IN ({', '.join('?' for _ in statuses)})"], list(statuses)
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


def _metric(con: DuckDBPyConnection, name: str, kind: str, machine: str | None = None, model: str | None = None,
            setting: str | None = None,
            statuses: tuple[str, ...] = ("complete",)) -> pd.DataFrame:
    where, params = _filters(machine, model, setting, model_col="m.model", setting_col="m.setting",
                             statuses=statuses)
    sql = f"""
    SELECT '{name}' AS series, r.run_id, r.machine_id, r.machine_label, r.engine_build AS build, r.started_at,
           m.model, m.setting, m.value, m.lo, m.hi, m.n
    FROM metrics m JOIN runs r ON r.run_id = m.run_id
    WHERE m.metric = ? AND m.value IS NOT NULL AND r.kind = ? AND {where}
    ORDER BY r.machine_id, m.model, m.setting, r.engine_build NULLS FIRST, r.started_at"""
    return con.execute(sql, [name, kind, *params]).df()[COLUMNS]  # a series is the catalog metric of its name


SERIES: dict[str, Series] = {s.name: s for s in (
    Series("idle_warm_p50", "idle latency, warm regime (median)", "ms", "idle"),
    Series("idle_woken_p50", "idle latency, woken regime (median)", "ms", "idle"),
    Series("wake_threshold_s", "wake threshold (pause where latency steps up)", "s", "idle"),
    Series("wake_penalty_ms", "wake penalty (woken - warm median)", "ms", "idle"),
    Series("swap_load_ms", "swap load time (spawn -> loaded, median)", "ms", "swap",
           measure="lbench swap --build {lo} --build {hi}"),
    Series("swap_evict_ms", "eviction time (victim stop, median)", "ms", "swap",
           claim="router-stop-timeout"),
    Series("peak_children", "peak model children alive", "children", "swap", claim="router-cap"),
    Series("peak_rss_mb", "peak process-tree RSS", "MB", "swap", claim="router-peak-memory"),
    Series("swap_failed_pct", "requests failed in the storm", "%", "swap", claim="router-queue-shared-entry",
           scale="linear", statuses=("complete", "failed")),
)}


def get_series(name: str) -> Series:
    series = SERIES.get(name)
    if series is None:
        raise BadInput(f"no history series {name!r}", where="series name",
                       hint=f"series: {', '.join(SERIES)}")
    return series


def series_rows(con: DuckDBPyConnection, name: str, *, machine: str | None = None, model: str | None = None,
                setting: str | None = None) -> pd.DataFrame:
    return get_series(name).rows(con, machine=machine, model=model, setting=setting)


def all_series(con: DuckDBPyConnection, *, machine: str | None = None, model: str | None = None) -> pd.DataFrame:
    """Every named series' rows, stacked (the trend site's input); read one machine at a time, so
    the memory a full scan takes grows with the largest machine's share, not the archive."""
    machines = [machine] if machine else [m for (m,) in con.execute(
        "SELECT DISTINCT machine_id FROM runs ORDER BY machine_id").fetchall()]
    frames = [s.rows(con, machine=m, model=model) for m in machines for s in SERIES.values()]
    frames = [f for f in frames if not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
