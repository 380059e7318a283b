"""Plots for reports, rendered to PNG bytes (headless Agg backend)."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


DPI = 200  # about twice the CSS pixels the report shows them at (base.html.j2): sharp on Retina screens


def figure_png(fig, *, tight: bool = True) -> bytes:
    """The figure as PNG bytes (closed after); ``tight=False`` keeps the figure's own margins
    (one draw instead of the two a tight bounding box takes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return buf.getvalue()


def plain(text: str) -> str:
    """Text shown literally: matplotlib reads a pair of ``$`` as mathtext (and may crash on it)."""
    return str(text).replace("$", r"\$")


def latency_vs_pause(samples: pd.DataFrame, summary: pd.DataFrame, model: str, run_id: str,
                     value: str = "latency_ms", ylabel: str = "client latency (ms)",
                     wake: list[dict] | None = None) -> bytes:
    """Raw points (jittered) and medians with 95% bootstrap intervals, one colour per setting;
    with ``wake`` (analysis.json's wake model rows), each setting's step is shaded where the grid
    puts it (between the last warm and the first woken pause) and labelled with its penalty."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    s_model = samples[samples["model"] == model]
    sum_model = summary[summary["model"] == model]
    settings = list(dict.fromkeys(sum_model["setting"]))
    pauses = sorted(s_model["pause_requested_s"].unique()) if not s_model.empty else [0.0]
    step = min(np.diff(pauses)) if len(pauses) > 1 else 0.1
    rng = np.random.default_rng(0)
    for i, setting in enumerate(settings):
        colour = f"C{i}"
        raw = s_model[s_model["setting"] == setting]
        offset = (i - (len(settings) - 1) / 2) * step * 0.15
        jitter = rng.uniform(-step * 0.05, step * 0.05, len(raw))
        ax.scatter(raw["pause_requested_s"] + offset + jitter, raw[value], s=12, alpha=0.5, color=colour,
                   linewidths=0)
        med = sum_model[sum_model["setting"] == setting].sort_values("pause_requested_s")
        yerr = np.vstack([med["median"] - med["ci_low"], med["ci_high"] - med["median"]])
        ax.errorbar(med["pause_requested_s"] + offset, med["median"], yerr=np.clip(yerr, 0, None), fmt="-o",
                    ms=4, lw=1.2, capsize=2, color=colour, label=f"{plain(setting)} (median, 95% CI)")
    steps = [w for w in wake or [] if w.get("model") == model and w.get("has_step") and w.get("setting") in settings]
    for w in steps:
        colour = f"C{settings.index(w['setting'])}"
        ax.axvspan(w["last_warm_s"], w["first_woken_s"], color=colour, alpha=0.12, lw=0)
        ax.axvline(w["first_woken_s"], color=colour, ls="--", lw=0.9)
        pen = w.get("penalty_ms")
        label = (f"{plain(w['setting'])}: {w['shape']} {w['last_warm_s']:g}–{w['first_woken_s']:g} s"
                 + (f", +{pen:.3g} ms" if pen is not None else ""))
        left_half = w["last_warm_s"] < max(pauses) / 2  # the label goes where there is room for it
        ax.annotate(label, (w["first_woken_s"] if left_half else w["last_warm_s"], 0.97 - 0.06 * steps.index(w)),
                    xycoords=("data", "axes fraction"), xytext=(4 if left_half else -4, 0),
                    textcoords="offset points", fontsize=7, color=colour, va="top",
                    ha="left" if left_half else "right",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xlabel("pause before request (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{model}: {ylabel} vs pause", fontsize=11, parse_math=False)
    ax.grid(alpha=0.3)
    ymax = s_model[value].max() if not s_model.empty else 1
    ymin = s_model[value][s_model[value] > 0].min() if not s_model.empty else 1
    if ymin and ymax / max(ymin, 1e-9) > 50:
        ax.set_yscale("log")
    ax.legend(fontsize=8, loc="lower right" if steps else "upper left")
    fig.text(0.99, 0.01, f"run {plain(run_id)}", ha="right", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)
