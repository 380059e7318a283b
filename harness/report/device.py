"""Device samples in reports: memory and clock across the pause beside latency (the picture users post),
memory through each pause beside the wake penalty's per-GB slope (``memory_timeline``), the
perturbation sentences and the before/after table of a setting axis (lbench evidence)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from harness.analysis.device import memory_metric, memory_through_pauses
from harness.report.plots import figure_png, plain
from harness.schema import DEVICE_SAMPLE_COLUMNS

import matplotlib.pyplot as plt  # noqa: E402  (after plots: the Agg backend)
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.colors import BoundaryNorm, ListedColormap  # noqa: E402


def device_vs_pause_png(samples: pd.DataFrame, dev: pd.DataFrame, model: str, run_id: str) -> bytes | None:
    """Left: device memory (and core clock, where read) against time into the pause, one line per request
    in the longer half of the grid, per setting; right: median client latency per pause, per setting.
    None when the model has no device sample with a memory reading."""
    d = dev[dev["model"] == model] if not dev.empty else dev
    metric = memory_metric(d) if not d.empty else None
    if metric is None:
        return None
    s = samples[samples["model"] == model]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    settings = list(dict.fromkeys(d["setting"]))
    pauses = sorted(d["pause_requested_s"].unique())
    long_min = pauses[len(pauses) // 2] if pauses else 0.0
    clock = d["sm_clock_mhz"].notna().any() if "sm_clock_mhz" in d else False
    twin = left.twinx() if clock else None
    for i, setting in enumerate(settings):
        colour = f"C{i}"
        g = d[(d["setting"] == setting) & (d["pause_requested_s"] >= long_min)]
        first = True
        for _, r in g.groupby(["seq", "probe", "device"]):
            r = r.sort_values("t_since_pause_start_s")
            left.plot(r["t_since_pause_start_s"], r[metric] / 2**20, "-", color=colour, alpha=0.5, lw=1,
                      label=plain(setting) if first else None)
            if twin is not None and r["sm_clock_mhz"].notna().any():
                twin.plot(r["t_since_pause_start_s"], r["sm_clock_mhz"], ":", color=colour, alpha=0.5, lw=1)
            first = False
        med = s[s["setting"] == setting].groupby("pause_requested_s")["latency_ms"].median()
        right.plot(med.index, med.to_numpy(), "-o", ms=4, color=colour, label=plain(setting))
    left.set_xlabel("seconds into the pause")
    left.set_ylabel(f"{metric.replace('_bytes', '')} (MiB)")
    left.set_title(f"device memory through pauses >= {long_min:g} s", fontsize=10)
    if twin is not None:
        twin.set_ylabel("core clock (MHz, dotted)")
    left.legend(fontsize=8, loc="best")
    right.set_xlabel("pause (s)")
    right.set_ylabel("median client latency (ms)")
    right.set_title("latency of the request after the pause", fontsize=10)
    fig.suptitle(plain(f"{model} · run {run_id}"), fontsize=10)
    return figure_png(fig)


# how to read the memory timeline beside the per-GB slope (wake-2026-12.md sections 1-2)
READ_TOGETHER = (
    "Read the two together. A GPU clock ramp (the GPU lowers its clock while idle and climbs back on the next "
    "request: 29-40% after an 8 s pause on an M1 Ultra, omlx PR 3451) costs about the same for every model size, "
    "so the per-GB slope stays near zero, and memory stays flat through the pause. A re-wire (macOS, or a driver, "
    "releasing the model's memory while idle, so the next request wires it back) grows with the model's bytes, so "
    "the slope is clearly above zero, and wired memory falls during the pauses that carry the penalty.")
LEGEND_PAUSES = 6  # more pauses than this: a colour bar instead of a legend in every panel
NO_SAMPLES = (
    "No device samples in this run, so no memory timeline. --device-probes auto samples memory through each "
    "pause: on a Mac wired memory (vm_stat) and the GPU's memory (ioreg); on Linux the GPU's memory (NVML, DRM, "
    "fdinfo) or, on a CPU or software-Vulkan build, the server's resident set. It is off by default (its effect "
    "on the wake is measured with --device-interleave) and stops 0.25 s before each request (docs/probes.md).")


def memory_timeline_png(dev: pd.DataFrame, metric: str, run_id: str) -> bytes | None:
    """One panel per (model, setting), up to three a row: ``metric`` against seconds into the pause, one line
    per request, coloured by the pause's length, so a fall in the long pauses (a re-wire) stands out from a
    flat line.  None when no reading of ``metric`` exists."""
    d = dev[dev[metric].notna()] if metric in dev else dev.iloc[0:0]
    if d.empty:
        return None
    cells = list(dict.fromkeys(zip(d["model"], d["setting"])))
    pauses = sorted(d["pause_requested_s"].unique())
    cmap = plt.get_cmap("viridis")
    colour = {p: cmap(i / max(len(pauses) - 1, 1) * 0.9) for i, p in enumerate(pauses)}
    ncols = min(3, len(cells))
    nrows = -(-len(cells) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.7 * nrows + 0.4), squeeze=False,
                             layout="constrained")
    for k, ax in enumerate(axes.flat):
        if k >= len(cells):
            ax.set_axis_off()
            continue
        model, setting = cells[k]
        g = d[(d["model"] == model) & (d["setting"] == setting)]
        shown: set[float] = set()
        for (pause, _seq, _probe, _device), r in g.groupby(["pause_requested_s", "seq", "probe", "device"]):
            r = r.sort_values("t_since_pause_start_s")
            ax.plot(r["t_since_pause_start_s"], r[metric] / 2**20, "-o", ms=2.5, lw=1, alpha=0.7,
                    color=colour[pause], label=f"{pause:g} s" if pause not in shown else None)
            shown.add(pause)
        ax.set_title(plain(f"{model} · {setting}"), fontsize=9)
        ax.set_xlabel("seconds into the pause", fontsize=8)
        if k % ncols == 0:
            ax.set_ylabel(f"{metric.replace('_bytes', '')} (MiB)", fontsize=8)
        ax.tick_params(labelsize=7)
        if shown and len(pauses) <= LEGEND_PAUSES:
            ax.legend(title="pause", fontsize=7, title_fontsize=7, loc="best")
    if len(pauses) > LEGEND_PAUSES:  # a long grid: one colour bar keyed by pause instead of a legend per panel
        bar = fig.colorbar(ScalarMappable(norm=BoundaryNorm(range(len(pauses) + 1), len(pauses)),
                                          cmap=ListedColormap([colour[p] for p in pauses])),
                           ax=axes, ticks=[i + 0.5 for i in range(len(pauses))], fraction=0.03)
        bar.ax.set_yticklabels([f"{p:g}" for p in pauses], fontsize=6)
        bar.set_label("pause (s)")
    fig.suptitle(plain(f"{metric.replace('_bytes', '')} through each pause · run {run_id}"), fontsize=10)
    return figure_png(fig)


def memory_timeline(dev: pd.DataFrame, run_id: str) -> dict:
    """The report's memory-through-each-pause section: the metric drawn (wired memory where a Mac read it),
    what it is, the figure and the per-pause change; ``figure`` None and ``absent`` set when the run has
    no device sample with a memory reading."""
    metric = memory_metric(dev, prefer_wired=True) if not dev.empty else None
    if metric is None:
        return {"metric": None, "figure": None, "rows": [], "read_together": READ_TOGETHER, "absent": NO_SAMPLES}
    rows = memory_through_pauses(dev, metric)
    for r in rows:
        lo, hi = (v / 2**20 for v in r["change_ci_bytes"])
        ci = f", 95% CI {lo:+,.1f} to {hi:+,.1f}" if math.isfinite(lo) and math.isfinite(hi) else ""
        r["text"] = (f"{_mib(r['first_median_bytes'])} → {_mib(r['last_median_bytes'])} "
                     f"(change {r['change_median_bytes'] / 2**20:+,.1f} MiB{ci})")
    what = DEVICE_SAMPLE_COLUMNS.get(metric, ("", metric))[1]
    return {"metric": metric, "what": what, "figure": memory_timeline_png(dev, metric, run_id), "rows": rows,
            "wired": metric == "wired_bytes", "read_together": READ_TOGETHER, "absent": None}


def _fmt(cell: dict | None, unit: str = "ms") -> str:
    if not cell or cell.get("n", 0) == 0 or not math.isfinite(cell["median"]):
        return "–"
    lo, hi = cell["ci"]
    ci = f" (95% CI {lo:.1f}–{hi:.1f})" if math.isfinite(lo) else " (too few for a CI)"
    return f"{cell['median']:.1f} {unit}{ci}, n={cell['n']}"


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def _mib_ci(ci: tuple[float, float] | None) -> str:
    if not ci or not all(math.isfinite(v) for v in ci):
        return ""
    return f" (95% CI {ci[0] / 2**20:,.1f}–{ci[1] / 2**20:,.1f})"


def setting_markdown(rows: list[dict], run_id: str, md: Callable[[object], str]) -> list[str]:
    """The before/after table: one row per setting (``md`` makes user strings inert in Markdown)."""
    if len(rows) < 2:
        return []
    lines = [f"**Per setting (run `{run_id}`), after the longest pause ({rows[0]['pause_s']:g} s):**", "",
             "| model | setting | device memory during the pause (last reading, median) | client latency | "
             "server prompt eval | prompt tokens/s |", "|---|---|---|---|---|---|"]
    for r in rows:
        memory = "; ".join(f"{md(m['probe'])} {md(m['device'])} {m['metric']}: {_mib(m['median_bytes'])}"
                           f"{_mib_ci(m.get('ci_bytes'))} (n={m['n']})" for m in r["memory"]) or "not sampled"
        lines.append(f"| {md(r['model'])} | {md(r['setting'])} | {memory} | {_fmt(r['latency_ms'])} | "
                     f"{_fmt(r['server_prompt_ms'])} | {_fmt(r.get('prompt_tokens_per_s'), 'tok/s')} |")
    return lines + [""]

