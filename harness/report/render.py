"""Render a run into one self-contained HTML file (plots inline as PNG data URIs).

Templates live in ``reports/templates/``; autoescaping is on, so every
user-controlled string (model names, paths, command lines, error bodies) is escaped.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import jinja2

from harness.analysis import stats
from harness.analysis.regimes import wake_summary
from harness.errors import BadInput
from harness.probes.host import virtual_mac_warning
from harness.report import plots
from harness.store import Run

TEMPLATES = Path(os.environ.get("LBENCH_TEMPLATES", Path(__file__).resolve().parents[2] / "reports" / "templates"))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined)
    env.filters["ms"] = lambda v: "–" if v is None or v != v else f"{v:,.2f}"
    env.filters["gb"] = lambda v: "–" if v is None else f"{v / 1e9:,.2f} GB"
    return env


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def idle_context(run: Run) -> dict:
    samples = run.table("samples")
    summary = stats.summarize_by_pause(samples, "latency_ms")
    good = stats.measured(samples)
    models = run.manifest.get("models", [])
    figures = []
    for model in dict.fromkeys(good["model"]) if not good.empty else []:
        figures.append({
            "model": model,
            "latency": _data_uri(plots.latency_vs_pause(good, summary, model, run.run_id)),
            "server": _data_uri(plots.latency_vs_pause(
                good, stats.summarize_by_pause(samples, "server_prompt_ms"), model, run.run_id,
                value="server_prompt_ms", ylabel="server prompt_ms (one token)")),
        })
    tables = []
    for (model, setting), g in summary.groupby(["model", "setting"], sort=False):
        tables.append({"model": model, "setting": setting, "rows": g.to_dict("records")})
    errors = samples[samples["error"].notna()] if not samples.empty and "error" in samples else samples.iloc[0:0]
    wake = wake_summary(good, models) if not good.empty else ([], [])
    overhead = good["overhead_ms"].dropna() if not good.empty else []
    pause_err = (good["pause_actual_s"] - good["pause_requested_s"]).abs() * 1000 if not good.empty else []
    return {
        "run": run.manifest,
        "run_id": run.run_id,
        "incomplete": not run.complete,
        "models": models,
        "synthetic": [m for m in models if m.get("synthetic")],
        "cells": run.manifest.get("cells", []),
        "figures": figures,
        "tables": tables,
        "errors": errors.head(50).to_dict("records"),
        "n_errors": int(len(errors)),
        "n_measured": int(len(good)),
        "harness": {
            "overhead_p50_ms": stats.percentile(overhead, 50),
            "overhead_p99_ms": stats.percentile(overhead, 99),
            "pause_error_p99_ms": stats.percentile(pause_err, 99),
        },
        "host": run.manifest.get("host", {}),
        "engine": run.manifest.get("engine", {}),
        "virtual_warning": virtual_mac_warning(run.manifest.get("host", {})),
        "wake": wake[0], "per_gb": wake[1],
        "cross_check": cross_check(samples),
    }


def cross_check(samples) -> list[dict]:
    """Per model and pause: lbench through HTTP vs llama-idle in-process, ratio of medians."""
    good = stats.measured(samples)
    if good.empty or "engine" not in good or good["engine"].nunique() < 2:
        return []
    rows = []
    for model, g in good.groupby("model"):
        server = g[g["engine"] == "llama-server"]
        idle = g[g["engine"] == "llama-idle"]
        for pause in sorted(set(idle["pause_requested_s"]) & set(server["pause_requested_s"])):
            s_lat = float(server[server["pause_requested_s"] == pause]["latency_ms"].median())
            s_srv = float(server[server["pause_requested_s"] == pause]["server_prompt_ms"].median())
            i_lat = float(idle[idle["pause_requested_s"] == pause]["latency_ms"].median())
            rows.append({"model": model, "pause_s": pause, "http_latency_ms": s_lat, "server_prompt_ms": s_srv,
                         "llama_idle_ms": i_lat, "ratio_http": s_lat / i_lat if i_lat else float("nan"),
                         "ratio_server": s_srv / i_lat if i_lat else float("nan")})
    return rows


def render_report(run: Run, out: Path | None = None) -> Path:
    kind = run.manifest.get("kind")
    if kind in ("idle", "calibrate"):
        html = environment().get_template("idle.html.j2").render(**idle_context(run), read_notes=run.notes)
    elif kind == "repro":
        from harness.report.repro import repro_context

        html = environment().get_template("repro.html.j2").render(**repro_context(run), read_notes=run.notes)
    elif kind == "swap":
        from harness.report.swap import swap_context

        html = environment().get_template("swap.html.j2").render(**swap_context(run), read_notes=run.notes)
    else:
        raise BadInput(f"no report template for run kind {kind!r}", where=str(run.dir))
    out = out or run.dir / "report.html"
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(html)
    os.replace(tmp, out)
    return out
