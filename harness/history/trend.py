"""The trend site: static, self-contained HTML pages over the history archive (``lbench trend``).

``index.html`` opens with the newest change points (the headline, as every report's Findings),
then the machines side by side: for each (series, model, setting) the newest value on each
machine.  ``machine-<id>.html`` has one plot per (series, model, setting): x the engine build,
one point per run with its 95% interval, change points marked, and a table of its newest runs
(``points``, default ``POINTS``) with their run ids and the ``lbench history query`` command that
lists every run.  Plots are PNG data URIs (``harness/report/plots.py``'s Agg backend), so each
page is one file that opens anywhere.

Bounded by construction: the archive is read one machine at a time (its series, change points,
plots and page), a machine's page is written as soon as it is built and then dropped, the tables
list at most ``points`` runs each, and ``builds`` keeps only each machine's newest engine builds
(change points then see ``CONTEXT`` older runs of each series as well, below).  Change points
and the plots that are not in the cache (``harness/history/plot_cache.py``) are computed by a
small process pool (``jobs``) while this process reads the archive and writes the pages, each
worker reusing one figure.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import pandas as pd

from harness.history.changes import GROUP, WINDOW, ChangePoint, detect, scale_of, usable
from harness.history.series import SERIES, all_series
from harness.report.plots import DPI, plain, plt
from harness.shell import join
from harness.history.catalog import catalog_dir, load
from harness.history.plot_cache import PLOT_DIR, PlotCache, plot_key
from harness.history.query import connect
from harness.report.html import data_uri, environment, scrolling_tables, write_page
from harness.atomic import atomic_write_text

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor
    from multiprocessing.context import BaseContext

    from duckdb import DuckDBPyConnection
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from harness.history.plot_cache import PlotCache

T = TypeVar("T")

INDEX = "index.html"
POINTS = 50  # runs listed under each plot by default (the newest); the query command lists every run
# With a build window, change points are looked for in the window's runs and in this many runs of
# the same series just before it: as many as Otava's sliding window (changes.WINDOW) takes in, so a
# step at the window's oldest build is judged on as many runs before it as any step in a long series.
CONTEXT = WINDOW
MAX_JOBS = 4  # plot-drawing processes at most (the default: this many, or the CPUs if fewer)
ORDER = ["build", "started_at", "run_id"]  # a series' points, oldest first (as changes.detect orders them)


def machine_page(machine_id: str) -> str:
    return f"machine-{machine_id}.html"


def _fmt(v: float | None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)) or v is pd.NA:
        return "–"
    return f"{float(v):,.4g}"


def default_jobs() -> int:
    return max(1, min(MAX_JOBS, os.cpu_count() or 1))


_FIGURE: list = []  # one Figure, Axes and footer per process, emptied for each plot (a new one costs more)


def _figure() -> tuple[Figure, Axes, Text]:
    """This process' figure for the trend plots, emptied of the last plot's artists (not cleared:
    clearing the axes would make every tick again)."""
    if not _FIGURE:
        fig, ax = plt.subplots(figsize=(8, 3.4))
        ax.set_xlabel("engine build")
        ax.grid(alpha=0.3)
        _FIGURE.extend([fig, ax, fig.text(0.99, 0.01, "", ha="right", va="bottom", fontsize=7, color="0.4")])
    fig, ax, footer = _FIGURE
    for container in list(ax.containers):
        container.remove()
    for artist in [*ax.lines, *ax.collections, *ax.texts]:
        artist.remove()
    legend = ax.get_legend()
    if legend is not None:
        legend.remove()
    ax.set_yscale("linear")
    return fig, ax, footer


def x_positions(builds: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Each point's x (the runs of one build side by side around the build's position) and the
    builds' labels, for points sorted by build (column-wise: a series can hold thousands of runs)."""
    values = pd.to_numeric(pd.Series(builds), errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    codes, uniques = pd.factorize(values, use_na_sentinel=False)  # in order of appearance: sorted
    names = ["?" if np.isnan(u) else str(int(u)) for u in uniques]
    _, first, count = np.unique(codes, return_index=True, return_counts=True)  # each build's rows are contiguous
    k = np.arange(len(codes)) - first[codes]
    n = count[codes].astype(float)
    return codes + (k - (n - 1) / 2) * (0.6 / np.maximum(n, 1)), names


def plot_series(points: pd.DataFrame, changes: list[ChangePoint], title: str, unit: str, note: str = "") -> bytes:
    """One series' plot as PNG bytes: ``points`` sorted by build (``ORDER``), ``changes`` indexed
    into them (a change at index 0 is drawn half a build before the first point: its runs before
    are older than the plot); ``note`` is added to the plot's footer."""
    pts = points.sort_values(ORDER, na_position="first").reset_index(drop=True)
    xs, builds = x_positions(pts["build"])
    fig, ax, footer = _figure()
    y = pts["value"].to_numpy(dtype=float)
    lo = pts["lo"].to_numpy(dtype=float)
    hi = pts["hi"].to_numpy(dtype=float)
    has = ~np.isnan(lo) & ~np.isnan(hi)
    ax.plot(xs, y, "o", ms=4, color="C0", label="one run (with its 95% interval)" if has.any() else "one run")
    if has.any():
        ax.errorbar(xs[has], y[has], yerr=[np.clip(y[has] - lo[has], 0, None), np.clip(hi[has] - y[has], 0, None)],
                    fmt="none", ecolor="C0", alpha=0.6, capsize=2, lw=1)
    low = np.where(has, lo, y)
    if len(y) and float(np.nanmin(low)) > 0 and float(np.nanmax(np.where(has, hi, y))) / float(np.nanmin(low)) > 20:
        ax.set_yscale("log")  # intervals spanning decades (a woken tail) would flatten the medians
    ax.relim()  # the limits of this plot's points (and interval caps) only
    ax.autoscale_view()
    for c in changes:
        # a change into the first point (its runs before are older than the plot): half a build before it
        x = (xs[c.index - 1] + xs[c.index]) / 2 if 0 < c.index < len(xs) else -0.5
        ax.axvline(x, color="C3", ls="--", lw=1.2)
        ax.text(x, ax.get_ylim()[1], f" {c.short_size(unit)}", color="C3", fontsize=8, va="top")
    ax.set_xlim(-0.5, len(builds) - 0.5)  # a build's slot is one unit wide, however few builds are shown
    ax.set_xticks(range(len(builds)))
    ax.set_xticklabels(builds, rotation=45 if len(builds) > 8 else 0, fontsize=8)
    ax.set_ylabel(plain(unit))
    if len(title) > 95:  # the plot is 8 in wide: a long setting label would run off its edge
        title = title[:94] + "…"
    ax.set_title(plain(title), fontsize=10, parse_math=False, y=1.0)  # a set y: no search for room above the axes
    ax.legend(fontsize=7, loc="best")
    newest = pts["run_id"].iloc[-1] if len(pts) else ""
    footer.set_text(plain(f"{len(pts)} runs{note}, newest {newest}"))
    # fixed margins instead of a tight bounding box: one draw per plot instead of two
    fig.subplots_adjust(left=0.12, right=0.985, top=0.91, bottom=0.3 if len(builds) > 8 else 0.2)
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)  # the figure is kept for the next plot
    return buf.getvalue()


def _draw(args: tuple) -> bytes:
    return plot_series(*args)


def changes_to_run(changes: list[ChangePoint]) -> list[dict[str, Any]]:
    """One line per bisect to run (several series changing between the same builds share one), newest first."""
    seen: dict[tuple[str, str | None], dict[str, Any]] = {}
    for c in changes:
        key = (c.machine_id, c.command)
        entry = seen.setdefault(key, {"command": c.command, "page": machine_page(c.machine_id),
                                      "machine": c.machine_label, "series": []})
        entry["series"].append(f"{c.series} of {c.model}")
    return list(seen.values())


@dataclass
class TrendSite:
    index: dict[str, Any]
    machines: dict[str, dict[str, Any]]  # machine id -> its page's context (without ``out``: every page's)
    changes: list[ChangePoint]
    pages: list[Path] = dataclasses.field(default_factory=list)  # the machine pages written (with ``out``)
    plots_drawn: int = 0
    plots_cached: int = 0


def _points(g: pd.DataFrame) -> list[dict[str, Any]]:
    """The table rows of one series' points (each run with its id), formatted column by column."""
    build = ["?" if pd.isna(b) else int(b) for b in g["build"]]
    n = ["–" if pd.isna(v) else int(v) for v in g["n"]]
    value, lo, hi = ([_fmt(v) for v in g[c].tolist()] for c in ("value", "lo", "hi"))
    return [{"build": b, "run_id": r, "started_at": t, "value": v, "lo": lw, "hi": h, "n": k}
            for b, r, t, v, lw, h, k in zip(build, g["run_id"].tolist(), g["started_at"].tolist(), value, lo, hi, n)]


def list_command(archive: Path, series: str, machine_id: str, model: str, setting: str) -> str:
    """The command that lists every run of one series (the page's tables list the newest only)."""
    return join(["lbench", "history", "query", "-", "--series", series, "--machine", machine_id, "-m", model,
                 "--setting", setting, "--archive", str(archive)])


def build_window(builds: Iterable[float], n: int | None) -> int | None:
    """The oldest engine build of the newest ``n`` (None: no window, every build and unknown builds)."""
    if n is None:
        return None
    known = sorted({int(b) for b in builds if not pd.isna(b)})
    return known[-n] if len(known) >= n else (known[0] if known else None)


def windowed(g: pd.DataFrame, first_build: int | None, builds: int | None) -> tuple[pd.DataFrame, int]:
    """One series' sorted points from the window's first build on, and how many runs of context
    (``CONTEXT`` at most) before them change-point detection also sees; without a window, all."""
    if builds is None:
        return g, 0
    inside = ((g["build"] >= first_build).fillna(False).to_numpy(dtype=bool) if first_build is not None
              else np.zeros(len(g), bool))
    start = int(np.argmax(inside)) if inside.any() else len(g)  # sorted by build: the window is a tail
    known_before = g.iloc[:start]["build"].notna().to_numpy()
    context = min(CONTEXT, int(known_before.sum()))
    return g.iloc[start - context:], context


def in_window(found: list[ChangePoint], seen: pd.DataFrame, context: int) -> list[ChangePoint]:
    """The change points ``detect`` found in ``seen`` (a series' sorted points, ``context`` runs
    before the window first) whose first run after lies in the window, each ``index`` made the
    position of that run among the window's points (``detect`` counts ``changes.usable`` values only)."""
    rows = np.flatnonzero(usable(seen["value"].to_numpy(dtype=float), scale_of(seen)))
    out = []
    for c in found:
        row = int(rows[c.index])
        if row >= context:
            out.append(dataclasses.replace(c, index=row - context))
    return out


def _changes(seen: pd.DataFrame, context: int) -> list[ChangePoint]:
    """The change points of one series' window (``windowed``), indexed into its points shown."""
    return in_window(detect(seen), seen, context)


class _Done(Generic[T]):
    def __init__(self, value: T) -> None:
        self.value = value

    def result(self) -> T:
        return self.value


class _Pending(Generic[T]):
    """Work given to the pool; done here instead if the pool broke (a worker out of memory, killed)."""

    def __init__(self, future: Future[T], fn: Callable[..., T], args: tuple,
                 then: Callable[[T], object] | None = None) -> None:
        self.future, self.fn, self.args, self.then = future, fn, args, then
        self.done: _Done[T] | None = None  # the value, once there

    def result(self) -> T:
        if self.done is None:
            try:
                value = self.future.result()
            except BrokenProcessPool:
                value = self.fn(*self.args)
            if self.then is not None:
                self.then(value)
            self.done = _Done(value)
        return self.done.value


class _Workers:
    """Change points and plots computed by a pool of ``jobs`` processes (the plots that are not in
    the cache only), while this process reads the next machine; here, with ``jobs`` 1 or where
    no process can be started."""

    def __init__(self, cache: PlotCache, jobs: int) -> None:
        self.cache, self.jobs = cache, jobs
        self.pool: ProcessPoolExecutor | None = None

    def _run(self, fn: Callable[..., T], args: tuple, then: Callable[[T], object] | None = None
             ) -> _Done[T] | _Pending[T]:
        if self.jobs > 1:
            try:
                if self.pool is None:
                    self.pool = _pool(self.jobs)
                return _Pending(self.pool.submit(fn, *args), fn, args, then)
            except (OSError, NotImplementedError, BrokenProcessPool):  # no processes to be had here
                self.jobs = 1
        value = fn(*args)
        if then is not None:
            then(value)
        return _Done(value)

    def changes(self, seen: pd.DataFrame, context: int) -> _Done[list[ChangePoint]] | _Pending[list[ChangePoint]]:
        """A future-like: ``.result()`` is ``_changes(seen, context)``."""
        return self._run(_changes, (seen, context))

    def plot(self, key: str, args: tuple) -> _Done[bytes] | _Pending[bytes]:
        """A future-like: ``.result()`` is the PNG (from the cache, else drawn and kept there)."""
        data = self.cache.lookup(key)
        if data is not None:
            return _Done(data)
        return self._run(_draw, (args,), then=lambda png: self.cache.store(key, png))

    def start(self) -> None:
        """Get the processes going while this one reads the archive (on Linux the fork server,
        whose imports of matplotlib and pandas every worker shares)."""
        if self.jobs <= 1:
            return
        try:
            if _START_METHOD == "forkserver":
                from multiprocessing import forkserver

                _context()
                forkserver.ensure_running()  # its imports go on while the archive is read
            else:
                self.pool = _pool(self.jobs)
                self.pool.submit(int)  # fresh interpreters start importing now
        except (OSError, NotImplementedError, BrokenProcessPool):
            self.jobs = 1

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


# never fork a process that holds DuckDB's threads: a fork server (one import of matplotlib and
# pandas for every worker) where there is one, else fresh interpreters
_START_METHOD = "forkserver" if sys.platform.startswith("linux") else "spawn"


def _context() -> BaseContext:
    import multiprocessing

    ctx = multiprocessing.get_context(_START_METHOD)
    if _START_METHOD == "forkserver":
        ctx.set_forkserver_preload(["matplotlib.pyplot", "pandas"])  # third-party only: lbench's own
    return ctx


def _pool(jobs: int) -> ProcessPoolExecutor:
    from concurrent.futures import ProcessPoolExecutor

    # lbench's own modules are imported by each worker once its sys.path is this process' (a fork
    # server started by Python 3.11 does not take it over), so the workers draw with this lbench
    return ProcessPoolExecutor(max_workers=jobs, mp_context=_context(), initializer=exec,
                               initargs=(f"import sys; sys.path[:] = {sys.path!r}",))


def _machine_ids(con: DuckDBPyConnection, machine: str | None) -> list[str]:
    if machine:
        sql, params = ("SELECT DISTINCT machine_id FROM runs WHERE machine_id = ? OR contains(machine_label, ?) "
                       "ORDER BY machine_id", [machine, machine])
    else:
        sql, params = "SELECT DISTINCT machine_id FROM runs ORDER BY machine_id", []
    return [m for (m,) in con.execute(sql, params).fetchall()]


def build_site(archive: Path, *, machine: str | None = None, model: str | None = None, plots: bool = True,
               points: int = POINTS, builds: int | None = None, jobs: int | None = None,
               out: Path | None = None) -> TrendSite:
    """Everything the pages show, from the archive (the catalog's runs and metrics, named series,
    change points), one machine at a time; plots whose points did not change since the last build
    come from the cache (``harness/history/plot_cache.py``), the others are drawn by ``jobs``
    processes.  ``points``: runs listed under each plot (the newest); ``builds``: only each
    machine's newest ``builds`` engine builds (None: all).  With ``out``, each machine's page is
    written there as soon as it is built and not kept (memory bounded by one machine's page);
    without, every page's context is kept in ``machines`` (``write_site`` writes them)."""
    if points < 0:
        raise ValueError("points must be >= 0")
    if builds is not None and builds < 1:
        raise ValueError("builds must be >= 1")
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
    cache = PlotCache(catalog_dir(archive) / PLOT_DIR if plots else None)
    drawer = _Workers(cache, jobs or default_jobs())
    if plots:
        drawer.start()
    catalog = load(archive)
    runs = catalog.runs
    del catalog  # the metrics are read through DuckDB, a machine at a time
    labels = dict(zip(runs["machine_id"], runs["machine_label"])) if not runs.empty else {}
    machines: dict[str, dict[str, Any]] = {}
    side: dict[tuple[str, str, str], dict[str, str]] = {}
    changes: list[ChangePoint] = []
    pages: list[Path] = []
    pending: list[dict[str, Any]] = []  # pages whose plots are being drawn
    write = page_writer("trend_machine.html.j2")
    n_groups = 0
    order = list(SERIES)

    def finish(context: dict[str, Any]) -> None:
        for g in context["groups"]:
            future = g.pop("future", None)
            g["png"] = data_uri(future.result()) if future is not None else None
        if out is not None:
            pages.append(write(context, Path(out) / machine_page(context["machine_id"])))
            machines[context["machine_id"]] = {k: v for k, v in context.items() if k != "groups"}
        else:
            machines[context["machine_id"]] = context

    con = connect(archive, refresh_catalog=False, tables=False)
    try:
        for machine_id in _machine_ids(con, machine):
            rows = all_series(con, machine=machine_id, model=model)
            rows = rows[rows["machine_id"] == machine_id]  # a label holding this id names another machine
            if rows.empty:
                continue
            mruns = runs[runs["machine_id"] == machine_id]
            first = build_window(mruns["engine_build"], builds)
            all_builds = sorted({int(b) for b in mruns["engine_build"].dropna()})
            shown_builds = [b for b in all_builds if first is None or b >= first] if builds else all_builds
            groups: list[dict[str, Any]] = []
            mchanges: list[ChangePoint] = []
            keyed = sorted(rows.groupby(GROUP, sort=False), key=lambda kv: (order.index(kv[0][0]), kv[0][2:]))
            found_by: list[tuple] = []  # each series' window and its change points being found
            for (series, _, model_name, setting), g in keyed:
                g = g.sort_values(ORDER, na_position="first")
                seen, n_context = windowed(g, first, builds)
                if len(seen) > n_context:  # else no run of this series in the window
                    found_by.append((series, model_name, setting, len(g), seen.iloc[n_context:],
                                     drawer.changes(seen, n_context)))
            del rows, keyed
            while pending:  # the last machine's page, its plots drawn while these change points were found
                finish(pending.pop(0))
            for series, model_name, setting, n_all, pts, future in found_by:
                spec = SERIES[series]
                found = future.result()
                mchanges += found
                title = f"{spec.title}: {model_name} [{setting}]"
                newest = pts.iloc[-1]
                side.setdefault((spec.title + f" ({spec.unit})", str(model_name), str(setting)), {})[machine_id] = (
                    f"{_fmt(newest['value'])} [{_fmt(newest['lo'])}, {_fmt(newest['hi'])}] at build "
                    f"{'?' if pd.isna(newest['build']) else int(newest['build'])} ({newest['run_id']})")
                note = f" of the newest {len(shown_builds)} builds" if builds else ""
                listed = pts.iloc[max(0, len(pts) - points):] if points else pts.iloc[:0]
                group = {
                    "series": series, "title": title, "unit": spec.unit, "anchor": f"{series}-{len(groups)}",
                    "png": None, "points": _points(listed), "n_points": len(pts), "n_all": n_all,
                    "n_older": n_all - len(listed),
                    "list_command": list_command(archive, series, machine_id, str(model_name), str(setting)),
                    "changes": [c.sentence(spec.unit) for c in found],
                    "commands": [c.command for c in found if c.command],
                }
                if plots:
                    key = plot_key(pts, found, title, spec.unit, note)
                    group["future"] = drawer.plot(key, (pts[ORDER + ["value", "lo", "hi"]], found, title,
                                                        spec.unit, note))
                groups.append(group)
            del found_by
            if not groups:
                continue
            n_groups += len(groups)
            mchanges.sort(key=lambda c: (c.started_after or "", c.run_after), reverse=True)
            changes += mchanges
            window = None
            if builds:
                inside = (mruns["engine_build"] >= first).fillna(False) if first is not None else mruns["engine_build"].isna()
                window = {"builds": builds, "first": first, "context": CONTEXT, "n_builds": len(shown_builds),
                          "older_builds": len(all_builds) - len(shown_builds), "n_runs": int(inside.sum())}
            context = {
                "machine_id": machine_id, "label": labels.get(machine_id, machine_id), "n_runs": len(mruns),
                "builds": shown_builds, "window": window, "groups": groups, "points": points,
                "changes": [{"sentence": c.sentence(SERIES[c.series].unit), "command": c.command}
                            for c in mchanges], "index": INDEX,
            }
            pending.append(context)  # written once the next machine's change points are under way
        while pending:
            finish(pending.pop(0))
    finally:
        con.close()
        drawer.close()
    if machine is None and model is None:
        cache.prune()  # a full build: the plots it did not use are stale
    changes.sort(key=lambda c: (c.started_after or "", c.run_after), reverse=True)
    machine_ids = sorted(machines)
    matrix = [{"what": k[0], "model": k[1], "setting": k[2], "cells": [v.get(m, "–") for m in machine_ids]}
              for k, v in sorted(side.items())]
    scope = f" (each machine's newest {builds} builds)" if builds else ""
    if changes:
        findings = [f"{len(changes)} change point{'s' if len(changes) != 1 else ''} in {n_groups} series{scope} "
                    f"(newest first):"] + [c.sentence(SERIES[c.series].unit) for c in changes]
    else:
        findings = [f"No change point in {n_groups} series{scope} over {len(runs)} archived runs on "
                    f"{len(machine_ids)} machine{'s' if len(machine_ids) != 1 else ''} (Otava, p <= 0.001)."]
    index = {
        "title": "lbench history", "findings": findings,
        "changes": changes_to_run(changes),
        "machines": [{"id": m, "label": machines[m]["label"], "n_runs": machines[m]["n_runs"],
                      "builds": machines[m]["builds"], "page": machine_page(m),
                      "n_changes": len(machines[m]["changes"])} for m in machine_ids],
        "matrix": matrix, "n_runs": len(runs), "archive": str(archive), "builds": builds,
        "run_ids": (runs["run_id"].min(), runs["run_id"].max()) if len(runs) else ("", ""),
    }
    return TrendSite(index, machines, changes, pages, cache.drawn, cache.hits)


def page_writer(template: str) -> Callable[[dict[str, Any], Path], Path]:
    """``write(context, path)``: ``harness.report.html.write_page`` with the template compiled once
    (not once per page)."""
    compiled = environment().get_template(template)
    return lambda context, path: atomic_write_text(path, scrolling_tables(compiled.render(**context)))


def write_site(site: TrendSite, out: Path) -> Path:
    """The index page, and the machine pages ``build_site`` kept (those it wrote are there already)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kept = {m: c for m, c in site.machines.items() if "groups" in c}
    if kept:
        write = page_writer("trend_machine.html.j2")
        for machine_id, context in kept.items():
            write(context, out / machine_page(machine_id))
    return write_page("trend_index.html.j2", site.index, out / INDEX)
