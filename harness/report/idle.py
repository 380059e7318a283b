"""Context for an idle or calibrate run's report."""

from __future__ import annotations

from harness.analysis import stats
from harness.analysis.regimes import wake_summary
from harness.probes.host import virtual_mac_warning
from harness.report import plots
from harness.report.html import data_uri
from harness.store import Run


def idle_context(run: Run) -> dict:
    samples = run.table("samples")
    summary = stats.summarize_by_pause(samples, "latency_ms")
    good = stats.measured(samples)
    models = run.manifest.get("models", [])
    figures = []
    for model in dict.fromkeys(good["model"]) if not good.empty else []:
        figures.append({
            "model": model,
            "latency": data_uri(plots.latency_vs_pause(good, summary, model, run.run_id)),
            "server": data_uri(plots.latency_vs_pause(
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
