"""The trend site: static, self-contained HTML pages over the history archive (``lbench trend``).

``index.html`` opens with the newest change points (the headline, as every report's Findings),
then the machines side by side: for each (series, model, setting) the newest value on each
machine.  ``machine-<id>.html`` has one plot per (series, model, setting): x the engine build,
one point per run with its 95% interval, change points marked, and a table of every point with
its run id.  Plots are PNG data URIs (``harness/report/plots.py``'s Agg backend), so each page is
one file that opens anywhere.  Registered as the view ``trend`` (``harness/history/view.py``, by ``harness/kinds.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from harness.history.changes import GROUP, ChangePoint, detect_all
from harness.history.series import SERIES
from harness.history.view import TrendView  # noqa: F401 (the view, registered by harness/kinds.py)

INDEX = "index.html"


def machine_page(machine_id: str) -> str:
    return f"machine-{machine_id}.html"


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)) or v is pd.NA:
        return "–"
    return f"{float(v):,.4g}"


def plot_series(points: pd.DataFrame, changes: list[ChangePoint], title: str, unit: str) -> bytes:
    from harness.report.plots import figure_png, plain, plt

    pts = points.sort_values(["build", "started_at", "run_id"], na_position="first").reset_index(drop=True)
    labels = ["?" if pd.isna(b) else str(int(b)) for b in pts["build"]]
    builds = list(dict.fromkeys(labels))
    pos = {b: i for i, b in enumerate(builds)}
    counts: dict[str, int] = {}
    xs = []
    for b in labels:  # runs of one build side by side around the build's position
        counts[b] = counts.get(b, 0) + 1
    seen: dict[str, int] = {}
    for b in labels:
        k = seen.get(b, 0)
        seen[b] = k + 1
        n = counts[b]
        xs.append(pos[b] + (k - (n - 1) / 2) * (0.6 / max(n, 1)))
    fig, ax = plt.subplots(figsize=(8, 3.4))
    y = pts["value"].astype(float)
    lo = pts["lo"].astype(float)
    hi = pts["hi"].astype(float)
    has = lo.notna() & hi.notna()
    ax.plot(xs, y, "o", ms=4, color="C0", label="one run (with its 95% interval)" if has.any() else "one run")
    if has.any():
        xa = [x for x, h in zip(xs, has) if h]
        ax.errorbar(xa, y[has], yerr=[(y[has] - lo[has]).clip(lower=0), (hi[has] - y[has]).clip(lower=0)],
                    fmt="none", ecolor="C0", alpha=0.6, capsize=2, lw=1)
    for c in changes:
        x = (xs[c.index - 1] + xs[c.index]) / 2
        ax.axvline(x, color="C3", ls="--", lw=1.2)
        ax.text(x, ax.get_ylim()[1], f" {c.short_size(unit)}", color="C3", fontsize=8, va="top")
    low = lo.where(has, y)
    if len(y) and float(low.min()) > 0 and float(hi.where(has, y).max()) / float(low.min()) > 20:
        ax.set_yscale("log")  # intervals spanning decades (a woken tail) would flatten the medians
    ax.set_xticks(range(len(builds)))
    ax.set_xticklabels(builds, rotation=45 if len(builds) > 8 else 0, fontsize=8)
    ax.set_xlabel("engine build")
    ax.set_ylabel(plain(unit))
    ax.set_title(plain(title), fontsize=10, parse_math=False)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    newest = pts["run_id"].iloc[-1] if len(pts) else ""
    fig.text(0.99, 0.01, plain(f"{len(pts)} runs, newest {newest}"), ha="right", va="bottom", fontsize=7, color="0.4")
    # fixed margins instead of a tight bounding box: one draw per plot instead of two
    fig.subplots_adjust(left=0.12, right=0.985, top=0.91, bottom=0.3 if len(builds) > 8 else 0.2)
    return figure_png(fig, tight=False)


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
    machines: dict[str, dict[str, Any]]  # machine id -> its page's context
    changes: list[ChangePoint]


def _points(g: pd.DataFrame) -> list[dict[str, Any]]:
    """The table rows of one series' points (every run with its id), formatted column by column."""
    build = ["?" if pd.isna(b) else int(b) for b in g["build"]]
    n = ["–" if pd.isna(v) else int(v) for v in g["n"]]
    value, lo, hi = ([_fmt(v) for v in g[c].tolist()] for c in ("value", "lo", "hi"))
    return [{"build": b, "run_id": r, "started_at": t, "value": v, "lo": lw, "hi": h, "n": k}
            for b, r, t, v, lw, h, k in zip(build, g["run_id"].tolist(), g["started_at"].tolist(), value, lo, hi, n)]


def build_site(archive: Path, *, machine: str | None = None, model: str | None = None,
               plots: bool = True) -> TrendSite:
    """Everything the pages show, from the archive (the catalog's runs and metrics, named series,
    change points); plots whose points did not change since the last build come from the cache
    (``harness/history/plot_cache.py``)."""
    from harness.history.catalog import catalog_dir, load
    from harness.history.plot_cache import PLOT_DIR, PlotCache, plot_key
    from harness.history.query import connect
    from harness.history.series import all_series
    from harness.report.html import data_uri

    catalog = load(archive)
    con = connect(archive, refresh_catalog=False, tables=False)
    try:
        rows = all_series(con, machine=machine, model=model)
    finally:
        con.close()
    changes = detect_all(rows)
    cache = PlotCache(catalog_dir(archive) / PLOT_DIR if plots else None)
    runs = catalog.runs
    labels = dict(zip(runs["machine_id"], runs["machine_label"])) if not runs.empty else {}
    by_group: dict[tuple[str, str, str, str], list[ChangePoint]] = {}
    for c in changes:
        by_group.setdefault((c.series, c.machine_id, c.model, c.setting), []).append(c)
    machines: dict[str, dict[str, Any]] = {}
    side: dict[tuple[str, str, str], dict[str, str]] = {}
    for machine_id in sorted(set(rows["machine_id"])) if not rows.empty else []:
        mrows = rows[rows["machine_id"] == machine_id]
        mruns = runs[runs["machine_id"] == machine_id]
        groups: list[dict[str, Any]] = []
        order = list(SERIES)
        keyed = sorted(mrows.groupby(GROUP, sort=True), key=lambda kv: (order.index(kv[0][0]), kv[0][2:]))
        for (series, _, model_name, setting), g in keyed:
            spec = SERIES[series]
            gchanges = by_group.get((series, machine_id, model_name, setting), [])
            gchanges.sort(key=lambda c: c.index)
            g = g.sort_values(["build", "started_at", "run_id"], na_position="first")
            title = f"{spec.title}: {model_name} [{setting}]"
            newest = g.iloc[-1]
            side.setdefault((spec.title + f" ({spec.unit})", str(model_name), str(setting)), {})[machine_id] = (
                f"{_fmt(newest['value'])} [{_fmt(newest['lo'])}, {_fmt(newest['hi'])}] at build "
                f"{'?' if pd.isna(newest['build']) else int(newest['build'])} ({newest['run_id']})")
            groups.append({
                "series": series, "title": title, "unit": spec.unit, "anchor": f"{series}-{len(groups)}",
                "png": data_uri(cache.get(plot_key(g, gchanges, title, spec.unit),
                                          partial(plot_series, g, gchanges, title, spec.unit))) if plots else None,
                "points": _points(g),
                "changes": [c.sentence(spec.unit) for c in gchanges],
                "commands": [c.command for c in gchanges if c.command],
            })
        machines[machine_id] = {
            "machine_id": machine_id, "label": labels.get(machine_id, machine_id), "n_runs": len(mruns),
            "builds": sorted({int(b) for b in mruns["engine_build"].dropna()}), "groups": groups,
            "changes": [{"sentence": c.sentence(SERIES[c.series].unit), "command": c.command}
                        for c in changes if c.machine_id == machine_id], "index": INDEX,
        }
    if machine is None and model is None:
        cache.prune()  # a full build: the plots it did not use are stale
    machine_ids = sorted(machines)
    matrix = [{"what": k[0], "model": k[1], "setting": k[2], "cells": [v.get(m, "–") for m in machine_ids]}
              for k, v in sorted(side.items())]
    n_groups = sum(len(m["groups"]) for m in machines.values())
    if changes:
        findings = [f"{len(changes)} change point{'s' if len(changes) != 1 else ''} in {n_groups} series "
                    f"(newest first):"] + [c.sentence(SERIES[c.series].unit) for c in changes]
    else:
        findings = [f"No change point in {n_groups} series over {len(runs)} archived runs on "
                    f"{len(machine_ids)} machine{'s' if len(machine_ids) != 1 else ''} (Otava, p <= 0.001)."]
    index = {
        "title": "lbench history", "findings": findings,
        "changes": changes_to_run(changes),
        "machines": [{"id": m, "label": machines[m]["label"], "n_runs": machines[m]["n_runs"],
                      "builds": machines[m]["builds"], "page": machine_page(m),
                      "n_changes": len(machines[m]["changes"])} for m in machine_ids],
        "matrix": matrix, "n_runs": len(runs), "archive": str(archive),
        "run_ids": (runs["run_id"].min(), runs["run_id"].max()) if len(runs) else ("", ""),
    }
    return TrendSite(index, machines, changes)


def write_site(site: TrendSite, out: Path) -> Path:
    from harness.report.html import write_page

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for machine_id, context in site.machines.items():
        write_page("trend_machine.html.j2", context, out / machine_page(machine_id))
    return write_page("trend_index.html.j2", site.index, out / INDEX)
