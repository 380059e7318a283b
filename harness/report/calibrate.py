"""Context for a calibrate run's report: the ok/over table against the targets, per pause, and a plot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter

from harness.analysis.calibration import STEADY_AFTER, TARGETS, pause_groups
from harness.probes.host import virtual_mac_warning
from harness.report.html import data_uri, run_context
from harness.report.plots import figure_png, plain, plt
from harness.store import Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes

INFO_FIGURES = {  # shown for information, no target
    "overhead_p99_undisturbed_ms": "overhead p99 where the server's own time was undisturbed",
    "overhead_after_pause_p50_ms": "overhead p50 after a pause (server threads still waking)",
    "overhead_after_pause_p99_ms": "overhead p99 after a pause",
    "floor_p50_ms": "HTTP floor (GET /health) p50, back to back",
    "floor_p99_ms": "HTTP floor p99, back to back",
    "floor_after_pause_p50_ms": "HTTP floor p50 after a pause",
    "harness_p99_ms": "harness p99 (lbench's own work on the timed path)",
    "harness_after_pause_p50_ms": "harness p50 after a pause",
    "beyond_floor_p50_ms": "overhead - HTTP floor median, p50 (server's untimed work + harness)",
    "beyond_floor_p99_ms": "overhead - HTTP floor median, p99",
    "server_ms_p50": "server time p50 (for scale)",
    "efficiency_server_untimed": "efficiency excess from the server's untimed handling, HTTP and wake-ups "
                                 "(share of pauses + server time)",
    "efficiency_client": "efficiency excess from lbench's own work inside requests",
    "efficiency_between": "efficiency excess between requests (lbench's bookkeeping, sleep overshoot)",
}


def short(label: str) -> str:
    """A pause group's label for a tick: "back to back, steady" -> "b2b\nsteady",
    "settling: first 10 after a pause" -> "settling\nfirst 10"."""
    return plain(label.replace("back to back, ", "b2b\n").replace("settling: ", "settling\n")
                 .replace(" after a pause", ""))


def target_line(ax: Axes, value: float, label: str, colour: str) -> None:
    """A dashed target line labelled at its left end (a legend box could hide points)."""
    ax.axhline(value, color=colour, ls="--", lw=0.9)
    ax.annotate(f"{label} {value:g} ms", (0, value), xycoords=("axes fraction", "data"), xytext=(3, 2),
                textcoords="offset points", fontsize=7, color=colour, va="bottom")


def calibration_png(run: Run, samples: pd.DataFrame) -> bytes:
    """Left: overhead per request by group with the overhead targets; right: pause error per pause."""
    fig, (ax, ax_err) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    rng = np.random.default_rng(0)
    parts = pause_groups(samples)
    for i, (_label, g) in enumerate(parts):
        y = g["overhead_ms"].to_numpy(dtype=float)
        ax.scatter(i + rng.uniform(-0.18, 0.18, y.size), y, s=9, alpha=0.55, color="#3a7dc9", linewidths=0, zorder=3)
        ax.plot([i - 0.3, i + 0.3], [np.median(y)] * 2, color="k", lw=1.6)
    target_line(ax, TARGETS["overhead_p50_ms"], "target p50", "#2a9d4b")
    target_line(ax, TARGETS["overhead_p99_ms"], "target p99", "#c94a3a")
    ax.set_xticks(range(len(parts)), [short(label) for label, _ in parts], fontsize=8)
    ax.set_ylabel("client latency - server time (ms)")
    ax.set_title("overhead per request (bar: median)", fontsize=10)
    ax.set_yscale("log")
    values = np.concatenate([g["overhead_ms"].to_numpy(dtype=float) for _, g in parts] or [np.array([1.0])])
    values = values[np.isfinite(values) & (values > 0)]
    low = min([TARGETS["overhead_p50_ms"], *values]) * 0.8
    ax.set_ylim(low, max([TARGETS["overhead_p99_ms"], *values]) * 1.25)  # every point and both targets
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
    ax.grid(alpha=0.3, axis="y")
    paused = [(label, g) for label, g in parts if g["pause_requested_s"].iloc[0] > 0]
    for i, (_label, g) in enumerate(paused):
        err = ((g["pause_actual_s"] - g["pause_requested_s"]).abs() * 1e3).to_numpy(dtype=float)
        ax_err.scatter(i + rng.uniform(-0.18, 0.18, err.size), err, s=9, alpha=0.6, color="#7a4fc9", linewidths=0)
    target_line(ax_err, TARGETS["pause_error_p99_ms"], "target p99", "#c94a3a")
    ax_err.set_xticks(range(len(paused)), [plain(label) for label, _ in paused], fontsize=8)
    ax_err.set_ylabel("|actual - requested pause| (ms)")
    ax_err.set_title("pause error per pause", fontsize=10)
    ax_err.set_ylim(bottom=0)
    ax_err.grid(alpha=0.3, axis="y")
    fig.text(0.99, 0.005, f"run {plain(run.run_id)}", ha="right", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)


def calibrate_context(run: Run, analysis: dict) -> dict:
    samples = run.table("samples")
    figures = analysis.get("calibration", {})
    return {
        **run_context(run),
        "virtual_warning": virtual_mac_warning(run.record.host.facts),
        "findings": list(analysis.get("findings", [])),
        "checks": analysis.get("calibration_checks", []),
        "pauses": analysis.get("calibration_pauses", []),
        "targets": TARGETS,
        "info": [{"what": text, "value": figures.get(key), "unit": "ms" if key.endswith("_ms") else ""}
                 for key, text in INFO_FIGURES.items()],
        "n_measured": int(analysis.get("n_measured", 0)),
        "n_errors": int(analysis.get("n_errors", 0)),
        "steady_after": STEADY_AFTER,
        "plot": data_uri(calibration_png(run, samples)) if analysis.get("n_measured") else None,
    }
