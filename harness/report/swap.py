"""Context and plots for a swap run's report."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis.swap import PHASES, child_deaths, stop_steps, summary_from_analysis, warm_mask
from harness.report.html import data_uri
from harness.report.plots import figure_png, plt
from harness.schema import records
from harness.store import Run

SPAN_COLOURS = {"loading": "#f0a030", "loaded": "#3a7dc9", "stopping": "#c94a3a"}


def model_spans(events: pd.DataFrame, end_s: float) -> list[dict]:
    """loading (spawn -> loaded), loaded (-> told to stop), stopping (-> exited), per model."""
    spans: list[dict] = []
    if events.empty:
        return spans
    stops = set(stop_steps(events).index)
    open_span: dict[str, tuple[str, float]] = {}

    def close(model: str, t: float) -> None:
        if model in open_span:
            state, start = open_span.pop(model)
            spans.append({"model": model, "state": state, "start": start, "end": t})

    for idx, e in events.sort_values("t_s").iterrows():
        model, t, kind = e["model"], e["t_s"], e["kind"]
        if not isinstance(model, str):
            continue
        if kind == "spawn":
            close(model, t)
            open_span[model] = ("loading", t)
        elif kind == "status:loaded" and open_span.get(model, ("",))[0] == "loading":
            close(model, t)
            open_span[model] = ("loaded", t)
        elif idx in stops and model in open_span:
            close(model, t)
            open_span[model] = ("stopping", t)
        elif kind == "status:unloaded":
            close(model, t)
    for model in list(open_span):
        close(model, end_s)
    return spans


def timeline_png(run: Run, events: pd.DataFrame, memory: pd.DataFrame, requests: pd.DataFrame,
                 models_max: int) -> bytes:
    names = [m["label"] for m in run.manifest.get("models", [])]
    end = max([0.0] + [x for x in (events["t_s"].max() if not events.empty else 0,
                                     memory["t_s"].max() if not memory.empty else 0) if pd.notna(x)])
    fig, (ax, ax_mem) = plt.subplots(2, 1, figsize=(10, 2 + 0.45 * len(names) + 2.2), sharex=True,
                                     gridspec_kw={"height_ratios": [max(len(names), 1) * 0.45 + 0.6, 2.0]})
    for span in model_spans(events, end):
        y = names.index(span["model"]) if span["model"] in names else -1
        ax.barh(y, span["end"] - span["start"], left=span["start"], height=0.6,
                color=SPAN_COLOURS[span["state"]], linewidth=0)
    if not requests.empty:
        ys = [names.index(m) if m in names else -1 for m in requests["model"]]
        colours = ["#c00" if isinstance(err, str) else "k" for err in requests["error"]]
        ax.scatter(requests["t_send_s"], ys, marker="|", s=60, c=colours, linewidths=0.8, zorder=3)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in SPAN_COLOURS.values()]
    ax.legend(handles, list(SPAN_COLOURS), fontsize=7, loc="upper right", ncol=3)
    ax.set_title("model states (bars) and requests sent (ticks; red = failed)", fontsize=10)
    if not memory.empty:
        m = memory.sort_values("t_s")
        ax_mem.plot(m["t_s"], m["rss_total_bytes"] / 1e6, lw=1, color="#444", label="tree RSS (MB)")
        ax_mem.set_ylabel("RSS (MB)", fontsize=8)
        ax2 = ax_mem.twinx()
        ax2.step(m["t_s"], m["children_alive"], where="post", color="#2a9d4b", lw=1, label="children alive")
        if models_max > 0:
            ax2.axhline(models_max, color="#2a9d4b", ls="--", lw=0.8)
        ax2.set_ylabel("children alive", fontsize=8, color="#2a9d4b")
        ax2.set_ylim(0, max(int(m["children_alive"].max()), models_max) + 1)
    ax_mem.set_xlabel("time since run start (s)")
    fig.text(0.99, 0.005, f"run {run.run_id}", ha="right", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)


def cdf_png(run: Run, requests: pd.DataFrame) -> bytes:
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ok = requests[requests["error"].isna()] if not requests.empty else requests
    for label, sel, colour in (("warm (resident)", ok[warm_mask(ok)], "#3a7dc9"),
                               ("cold (not resident)", ok[~warm_mask(ok)], "#c94a3a")):
        x = np.sort(sel["latency_ms"].dropna().to_numpy(dtype=float))
        if x.size:
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=f"{label}, n={x.size}", color=colour)
    ax.set_xlabel("request latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if not ok.empty and ok["latency_ms"].max() / max(ok["latency_ms"].min(), 1e-6) > 50:
        ax.set_xscale("log")
    fig.text(0.99, 0.005, f"run {run.run_id}", ha="right", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)


def swap_context(run: Run, analysis: dict) -> dict:
    summary = summary_from_analysis(analysis)
    requests, events, memory = run.table("requests"), run.table("events"), run.table("memory")
    models_max = int(run.manifest.get("config", {}).get("models_max", 0))
    phases = []
    if not summary.swaps.empty:
        for p in PHASES + ["total_ms"]:
            x = summary.swaps[p].dropna()
            phases.append({"phase": p, "n": int(len(x)), "p50": float(x.median()) if len(x) else math.nan,
                           "p90": float(x.quantile(0.9)) if len(x) else math.nan,
                           "max": float(x.max()) if len(x) else math.nan})
    errors = requests[requests["error"].notna()] if not requests.empty else requests
    return {
        "run": run.manifest, "run_id": run.run_id, "incomplete": not run.complete,
        "models": run.manifest.get("models", []),
        "synthetic": [m for m in run.manifest.get("models", []) if m.get("synthetic")],
        "findings": summary.findings, "figures": summary.figures,
        "latency": summary.latency.to_dict("records"), "phases": phases,
        "swaps": records(summary.swaps.head(200)),
        "lru_mismatches": summary.lru[summary.lru["match"] == False].to_dict("records")  # noqa: E712
        if not summary.lru.empty else [],
        "errors": records(errors.head(50)), "n_errors": int(len(errors)),
        "deaths": records(child_deaths(requests, events, (run.manifest.get("client") or {}).get("storm_end_t_s"))),
        "n_past_deadline": int((requests["error_kind"] == "deadline").sum()) if not requests.empty else 0,
        "deadlines": run.manifest.get("deadlines") or {},
        "cdf": data_uri(cdf_png(run, requests)),
        "timeline": data_uri(timeline_png(run, events, memory, requests, models_max)),
        "host": run.manifest.get("host", {}), "engine": run.manifest.get("engine", {}),
        "router": run.manifest.get("router", {}), "sampler": run.manifest.get("sampler", {}),
    }
