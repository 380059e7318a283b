"""Context and plots for a swap run's report."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from harness.analysis.swap import PHASES, SERVED_LABELS, child_deaths, stop_steps, summary_from_analysis
from harness.analysis.swap_served import SERVED_DOC, storm_events, with_served_as
from harness.report.html import data_uri
from harness.report.plots import figure_png, plain, plt
from harness.schema import records
from harness.store import Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes



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


SERVED_COLOURS = {"resident": "#2f6db5", "own_load": "#e07b00", "joined_load": "#9b59b6",
                  "behind_eviction": "#d62728", "unknown": "#888888"}
STATE_TINTS = {"loading": "#f6dcb4", "loaded": "#cfe0f3", "stopping": "#f1c4bf"}
CHILDREN_COLOUR = "#2a9d4b"
TIMELINE_WIDTH_IN = 11.0  # every swap timeline has the same width, axes and units, so two runs' plots compare


def served_frame(requests: pd.DataFrame, events: pd.DataFrame, served: pd.DataFrame | None) -> pd.DataFrame:
    """The requests with ``served_as``: the analysis's classification when given, else derived the same way."""
    if served is not None and not served.empty and "served_as" in served:
        return requests.drop(columns=[c for c in ("served_as",) if c in requests]).merge(
            served[["index", "served_as"]], on="index", how="left").fillna({"served_as": "unknown"})
    return with_served_as(requests, events)


def _lanes(starts: list[float], ends: list[float]) -> tuple[list[int], int]:
    """Interval partitioning: each request gets the lowest lane free at its send."""
    lane_end: list[float] = []
    lanes = []
    for s, e in zip(starts, ends):
        for i, end in enumerate(lane_end):
            if end <= s:
                lane_end[i] = e
                lanes.append(i)
                break
        else:
            lane_end.append(e)
            lanes.append(len(lane_end) - 1)
    return lanes, max(len(lane_end), 1)


DRAW_EACH_MAX = 120  # more requests than this: the timeline shows counts per time bin, not each request
HISTOGRAM_BINS = 100


def _request_histogram(ax: Axes, reqs: pd.DataFrame, row_of: dict, end: float) -> None:
    """Per model row: requests sent per time bin as stacked bars (height: count, the row's
    busiest bin fills it), coloured by what the router did; a bin with a failure gets an x."""
    width = max(end, 1e-3) / HISTOGRAM_BINS
    for model, group in reqs.groupby("model"):
        y0 = row_of.get(model)
        if y0 is None:
            continue
        bins = np.clip(np.floor(group["t_send_s"].to_numpy(dtype=float) / width), 0, HISTOGRAM_BINS - 1).astype(int)
        counts = pd.crosstab(bins, group["served_as"].fillna("unknown").to_numpy())
        peak = max(int(counts.sum(axis=1).max()), 1)
        base = np.full(len(counts), y0 + 0.4)  # the row's bottom (the y axis runs downwards)
        for cls in [*SERVED_COLOURS, *[c for c in counts.columns if c not in SERVED_COLOURS]]:
            if cls not in counts.columns:
                continue
            h = 0.8 * counts[cls].to_numpy() / peak
            ax.bar(counts.index * width, -h, bottom=base, width=width, align="edge", linewidth=0,
                   color=SERVED_COLOURS.get(cls, "#888888"), zorder=3)
            base = base - h
        failed = group["error"].map(lambda e: isinstance(e, str)).to_numpy()
        for b in sorted(set(bins[failed])):
            ax.plot([(b + 0.5) * width], [y0 - 0.42], marker="x", color="k", ms=4, mew=1, zorder=4)


def timeline_png(run: Run, events: pd.DataFrame, memory: pd.DataFrame, requests: pd.DataFrame,
                 models_max: int, served: pd.DataFrame | None = None) -> bytes:
    """One row per model: its child's state (tinted band) and each request as a line from send to done,
    coloured by what the router did for it; below, children alive (integer axis, labelled cap line) and
    the tree's RSS.  Time is seconds since the run's start; both y axes start at 0; the legend sits
    outside the plot, on the right."""
    names = [m["label"] for m in run.record.models]
    ends = [x for x in (events["t_s"].max() if not events.empty else 0, memory["t_s"].max() if not memory.empty
                        else 0, requests["t_done_s"].max() if not requests.empty else 0) if pd.notna(x)]
    end = max([0.0] + ends)
    rows_h = max(len(names), 1) * 0.7 + 0.4
    fig, (ax, ax_kids, ax_rss) = plt.subplots(
        3, 1, figsize=(TIMELINE_WIDTH_IN, rows_h + 4.2), sharex=True,
        gridspec_kw={"height_ratios": [rows_h, 1.3, 1.3], "hspace": 0.15})
    row_of = {n: i for i, n in enumerate(names)}
    for span in model_spans(events, end):
        y = row_of.get(span["model"])
        if y is not None:
            ax.barh(y, span["end"] - span["start"], left=span["start"], height=0.9,
                    color=STATE_TINTS[span["state"]], linewidth=0, zorder=1)
    reqs = served_frame(requests, events, served) if not requests.empty else requests
    aggregated = len(reqs) > DRAW_EACH_MAX
    if aggregated:
        _request_histogram(ax, reqs, row_of, end)
    for model, group in (reqs.sort_values("t_send_s").groupby("model") if not reqs.empty and not aggregated
                         else []):
        y0 = row_of.get(model)
        if y0 is None:
            continue
        t_end = group["t_done_s"].fillna(end).tolist()
        lanes, n_lanes = _lanes(group["t_send_s"].tolist(), t_end)
        step = 0.8 / n_lanes
        for (r, lane, t1) in zip(group.itertuples(index=False), lanes, t_end):
            lane_y = y0 - 0.4 + step * (lane + 0.5)
            colour = SERVED_COLOURS.get(r.served_as, "#888888")
            ax.plot([r.t_send_s, t1], [lane_y, lane_y], color=colour, lw=max(1.0, min(2.5, 10 * step)),
                    solid_capstyle="butt", zorder=3)
            ax.plot([r.t_send_s], [lane_y], marker="|", color=colour, ms=5, mew=1, zorder=3)  # where it starts
            if isinstance(r.error, str):
                ax.plot([t1], [lane_y], marker="x", color="k", ms=4, mew=1, zorder=4)
    ax.set_yticks(range(len(names)), [plain(n) for n in names], fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xlim(0, max(end, 1e-3) * 1.01)
    ax.set_title(f"{len(reqs)} requests (too many to draw each): sent per {max(end, 1e-3) / HISTOGRAM_BINS:.3g} s, "
                 "by what the router did"
                 if aggregated else
                 "requests (a line from send to done, coloured by what the router did) over each model's state",
                 fontsize=10, loc="left")

    peak = int(memory["children_alive"].max()) if not memory.empty else 0
    if not memory.empty:
        m = memory.sort_values("t_s")
        ax_kids.step(m["t_s"], m["children_alive"], where="post", color=CHILDREN_COLOUR, lw=1.2)
        ax_rss.plot(m["t_s"], m["rss_total_bytes"] / 1e6, lw=1.0, color="#444")
        ax_rss.set_ylim(0, max(float(m["rss_total_bytes"].max()) / 1e6, 1.0) * 1.15)
    if models_max > 0:
        ax_kids.axhline(models_max, color="#b03060", ls="--", lw=1.0)
        ax_kids.annotate(f"models_max = {models_max}", xy=(1.0, models_max), xycoords=("axes fraction", "data"),
                         xytext=(-4, 3), textcoords="offset points", ha="right", va="bottom", fontsize=7.5,
                         color="#b03060")
    ax_kids.set_ylim(0, max(peak, models_max, 1) + 1)
    ax_kids.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_kids.set_ylabel("children\nalive", fontsize=8)
    ax_rss.set_ylabel("tree RSS\n(MB)", fontsize=8)
    for a in (ax_kids, ax_rss):
        a.grid(alpha=0.3)
    ax_rss.set_xlabel("time since run start (s)")

    handles: list[Any] = [Line2D([], [], color=c, lw=2.5) for c in SERVED_COLOURS.values()]
    labels = [f"request: {SERVED_DOC[k]}" for k in SERVED_COLOURS]
    handles += [Line2D([], [], marker="x", color="k", lw=0, ms=5)]
    labels += ["request failed (at its end)"]
    handles += [plt.Rectangle((0, 0), 1, 1, color=c) for c in STATE_TINTS.values()]
    labels += [f"model {state}" for state in STATE_TINTS]
    handles += [Line2D([], [], color=CHILDREN_COLOUR, lw=1.2), Line2D([], [], color="#b03060", ls="--", lw=1.0),
                Line2D([], [], color="#444", lw=1.0)]
    labels += ["children alive (process count)", "the cap (models_max)", "RSS of router + children"]
    fig.legend(handles, labels, fontsize=7.5, loc="upper left", bbox_to_anchor=(0.06, 0.0), ncol=3,
               frameon=False)
    ax.set_title(f"run {plain(run.run_id)}", fontsize=7, color="0.4", loc="right")
    return figure_png(fig)


def cdf_png(run: Run, requests: pd.DataFrame, events: pd.DataFrame | None = None,
            served: pd.DataFrame | None = None) -> bytes:
    """Latency CDF of answered requests, one line per class of what the router did."""
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ok = requests[requests["error"].isna()] if not requests.empty else requests
    if not ok.empty:
        ok = served_frame(ok, events if events is not None else pd.DataFrame(columns=["t_s", "kind", "model"]),
                          served)
    for cls, colour in SERVED_COLOURS.items():
        sel = ok[ok["served_as"] == cls] if not ok.empty else ok
        x = np.sort(sel["latency_ms"].dropna().to_numpy(dtype=float)) if not sel.empty else np.array([])
        if x.size:
            ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", color=colour,
                    label=f"{SERVED_LABELS[cls]}, n={x.size}")
    ax.set_xlabel("request latency (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if not ok.empty and ok["latency_ms"].max() / max(ok["latency_ms"].min(), 1e-6) > 50:
        ax.set_xscale("log")
    fig.text(0.01, 0.005, f"run {plain(run.run_id)}", ha="left", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)


FIRST_COLOURS = {"queue_wait_ms": "#888888", "victim_exit_ms": "#d62728", "spawn_ms": "#f1a340",
                 "child_start_ms": "#9b59b6", "weights_ms": "#2f6db5", "ready_ms": "#2a9d4b", "first_token_ms": "#e07b00"}


def first_phases_png(run: Run, summary: pd.DataFrame) -> bytes:
    """The first request by phase: one stacked bar per (state, model), each segment a phase's median;
    the whisker is the 95% interval of the median time to first byte (none below 6 repetitions)."""
    bars = list(dict.fromkeys(zip(summary["state"], summary["model"])))
    seen: set[str] = set()
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(bars) + 1.4))
    for i, (state, model) in enumerate(bars):
        grp = summary[(summary["state"] == state) & (summary["model"] == model)].set_index("phase")
        left = 0.0
        for phase, colour in FIRST_COLOURS.items():
            width = float(grp.loc[phase, "median"]) if phase in grp.index else math.nan
            if math.isfinite(width) and width > 0:
                ax.barh(i, width, left=left, color=colour)
                seen.add(phase)
                left += width
        if "ttfb_ms" in grp.index and math.isfinite(float(grp.loc["ttfb_ms", "ci_low"])):
            low, high = float(grp.loc["ttfb_ms", "ci_low"]), float(grp.loc["ttfb_ms", "ci_high"])
            ax.plot([low, high], [i, i], color="black", lw=1)
    ax.set_yticks(range(len(bars)), [f"{s} · {m}" for s, m in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("first request: time to first byte by phase, median (ms)")
    ax.grid(axis="x", alpha=0.3)
    phases = [p for p in FIRST_COLOURS if p in seen]  # one legend entry per phase drawn
    ax.legend(handles=[Patch(color=FIRST_COLOURS[p], label=p[:-3].replace("_", " ")) for p in phases], fontsize=8,
              loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.text(0.01, 0.005, f"run {plain(run.run_id)}", ha="left", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)


PHASE_COUNTED = {
    "queue_wait_ms": "loads a request of the run waited for (its send to the victim's stop, or to the spawn)",
    "victim_stop_ms": "loads into a slot a child's exit freed (the victim told to go -> its exit line)",
    "exit_to_spawn_ms": "the same loads: the victim's exit line -> this spawn (< 0: the exit line came later)",
    "spawn_to_loaded_ms": "loads whose child reported loaded",
    "loaded_to_first_byte_ms": "loads whose waiting request got a first byte",
    "total_ms": "loads whose waiting request was answered: its whole latency",
}


def swap_context(run: Run, analysis: dict) -> dict:
    summary = summary_from_analysis(analysis)
    first = {}
    if not summary.first_summary.empty:  # a first-request run: its stacked bars and table
        first = {"first_bars": data_uri(first_phases_png(run, summary.first_summary)),
                 "first_rows": records(summary.first_summary), "first_phases": list(FIRST_COLOURS),
                 "read_floor": list(run.record.section("read_floor").get("rows") or [])[:200]}
    requests, events, memory = run.table("requests"), storm_events(run.table("events")), run.table("memory")
    models_max = int(run.record.config.get("models_max", 0))
    phases = []
    if not summary.swaps.empty:
        for p in PHASES + ["total_ms"]:
            x = pd.to_numeric(summary.swaps[p], errors="coerce").dropna()
            phases.append({"phase": p, "n": int(len(x)), "counted": PHASE_COUNTED[p],
                           "p50": float(x.median()) if len(x) else math.nan,
                           "p90": float(x.quantile(0.9)) if len(x) else math.nan,
                           "max": float(x.max()) if len(x) else math.nan})
    lru = summary.lru
    flagged = lru[lru["match"].isna() | (lru["match"] == False)] if not lru.empty else lru  # noqa: E712
    errors = requests[requests["error"].notna()] if not requests.empty else requests
    return {
        "run": run.record, "run_id": run.run_id, "incomplete": not run.complete,
        "models": run.record.models,
        "synthetic": [m for m in run.record.models if m.get("synthetic")],
        "findings": summary.findings, "figures": summary.figures,
        "latency": summary.latency.to_dict("records"), "phases": phases,
        "swaps": records(summary.swaps.head(200)),
        "n_loads": int(len(summary.swaps)), "accounting": summary.figures.get("accounting", {}),
        "lru_flagged": records(flagged), "n_evictions": int(len(lru)),
        "lru_matches": int(summary.figures.get("lru_matches", 0)),
        "served_doc": [{"label": SERVED_LABELS[k], "meaning": SERVED_DOC[k], "colour": c}
                       for k, c in SERVED_COLOURS.items()],
        "errors": records(errors.head(50)), "n_errors": int(len(errors)),
        "deaths": records(child_deaths(requests, events, run.record.section("client").get("storm_end_t_s"))),
        "n_past_deadline": int((requests["error_kind"] == "deadline").sum()) if not requests.empty else 0,
        "deadlines": run.record.section("deadlines"),
        "cdf": data_uri(cdf_png(run, requests, events, summary.served)),
        "timeline": data_uri(timeline_png(run, events, memory, requests, models_max, summary.served)),
        "host": run.record.host.facts, "engine": run.record.engine.facts,
        "router": run.record.section("router"), "sampler": run.record.section("sampler"), **first,
    }
