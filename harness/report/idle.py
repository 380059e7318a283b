"""Context for an idle or calibrate run's report: figures from analysis.json, plots from the samples."""

from __future__ import annotations

from harness.analysis import stats
from harness.analysis.frames import json_frame
from harness.probes.host import virtual_mac_warning
from harness.report import plots
from harness.report.html import data_uri, run_context
from harness.store import Run
from harness.report.device import device_vs_pause_png, memory_timeline


def idle_context(run: Run, analysis: dict) -> dict:
    samples = run.table("samples")
    summary = json_frame(analysis["summary_latency"])
    server_summary = json_frame(analysis["summary_server"])
    good = stats.measured(samples)
    wake = analysis["wake"]  # the one wake model: headline, table and plot all read it
    figures = []
    dev = run.table("device_samples")
    timeline = memory_timeline(dev, run.run_id)  # beside the per-GB slope: a re-wire or a clock ramp
    if timeline["figure"] is not None:
        timeline["figure"] = data_uri(timeline["figure"])

    for model in dict.fromkeys(good["model"]) if not good.empty else []:
        device_png = device_vs_pause_png(good, dev, model, run.run_id)
        figures.append({
            "device": data_uri(device_png) if device_png is not None else None,
            "model": model,
            "latency": data_uri(plots.latency_vs_pause(good, summary, model, run.run_id, wake=wake)),
            "server": data_uri(plots.latency_vs_pause(good, server_summary, model, run.run_id,
                                                      value="server_prompt_ms",
                                                      ylabel="server prompt_ms (one token)")),
        })
    tables = []
    for (model, setting), g in summary.groupby(["model", "setting"], sort=False):
        tables.append({"model": model, "setting": setting, "rows": g.to_dict("records")})
    errors = samples[samples["error"].notna()] if not samples.empty else samples.iloc[0:0]
    return {
        **run_context(run),
        "figures": figures,
        "tables": tables,
        "errors": errors.head(50).to_dict("records"),
        "n_errors": int(analysis["n_errors"]),
        "n_measured": int(analysis["n_measured"]),
        "harness": analysis["harness"],
        "virtual_warning": virtual_mac_warning(run.record.host.facts),
        "wake": wake, "per_gb": analysis["per_gb"],
        "memory_timeline": timeline,
        "cross_check": analysis["cross_check"],
        "headline": [{"cell": f"{w['model']} · {w['setting']}", "shape": w["shape"], "text": text}
                     for w, text in zip(wake, analysis.get("headline", []))],
        "findings": list(analysis.get("findings", [])),  # how the shape was chosen
    }
