"""Device samples in reports: memory and clock across the pause beside latency (the picture users post),
the perturbation sentences and the before/after table of a setting axis (lbench evidence)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from harness.analysis.device import MEMORY_COLUMNS
from harness.report.plots import figure_png, plain

import matplotlib.pyplot as plt  # noqa: E402  (after plots: the Agg backend)


def _metric(dev: pd.DataFrame) -> str | None:
    """The memory column to draw: the first one the samples have."""
    for col in MEMORY_COLUMNS:
        if col in dev and dev[col].notna().any():
            return col
    return None


def device_vs_pause_png(samples: pd.DataFrame, dev: pd.DataFrame, model: str, run_id: str) -> bytes | None:
    """Left: device memory (and core clock, where read) against time into the pause, one line per request
    in the longer half of the grid, per setting; right: median client latency per pause, per setting.
    None when the model has no device sample with a memory reading."""
    d = dev[dev["model"] == model] if not dev.empty else dev
    metric = _metric(d) if not d.empty else None
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

