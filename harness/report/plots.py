"""Plots for reports, rendered to PNG bytes (headless Agg backend)."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure


DPI = 200  # about twice the CSS pixels the report shows them at (base.html.j2): sharp on Retina screens


def figure_png(fig: Figure, *, tight: bool = True) -> bytes:
    """The figure as PNG bytes (closed after); ``tight=False`` keeps the figure's own margins
    (one draw instead of the two a tight bounding box takes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return buf.getvalue()


def plain(text: str) -> str:
    """Text shown literally: matplotlib reads a pair of ``$`` as mathtext (and may crash on it)."""
    return str(text).replace("$", r"\$")


def stall_mask(raw: pd.DataFrame, value: str, wake_row: dict | None) -> pd.Series:
    """Which of one cell's samples the wake model called stalls: above its pause's stall bound
    (``stalls[].stall_above_ms`` of analysis.json's wake row).  All False without a wake row."""
    mask = pd.Series(False, index=raw.index)
    for s in (wake_row or {}).get("stalls") or []:
        bound = s.get("stall_above_ms")
        if bound is not None:
            at = np.isclose(raw["pause_requested_s"].to_numpy(dtype=float), float(s["pause_s"]))
            mask |= at & (raw[value].to_numpy(dtype=float) > float(bound))
    return mask


def bulk_limits(bulk: np.ndarray, medians: np.ndarray) -> tuple[float, float, bool]:
    """The y-axis the bulk sets (low, high, log scale?): stalls never stretch it.  Log scale when
    the bulk itself spans more than 50x."""
    vals = np.concatenate([np.asarray(bulk, dtype=float), np.asarray(medians, dtype=float)])
    vals = vals[np.isfinite(vals) & (vals > 0)]
    if vals.size == 0:
        return 0.0, 1.0, False
    lo, hi = float(vals.min()), float(vals.max())
    if hi / lo > 50:
        return lo / 1.3, hi * 1.3, True
    pad = (hi - lo) * 0.08 or hi * 0.05
    return max(lo - pad, 0.0), hi + pad * 1.5, False


def latency_vs_pause(samples: pd.DataFrame, summary: pd.DataFrame, model: str, run_id: str,
                     value: str = "latency_ms", ylabel: str = "client latency (ms)",
                     wake: list[dict] | None = None) -> bytes:
    """Raw points (jittered) and medians with 95% bootstrap intervals, one colour per setting;
    with ``wake`` (analysis.json's wake model rows), each setting's step is shaded where the grid
    puts it (between the last warm and the first woken pause) and labelled with its penalty, and
    the y-axis is set by the bulk: the stalls the model left out are drawn as open markers, those
    above the axis as triangles at its top edge with their value."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    s_model = samples[samples["model"] == model]
    sum_model = summary[summary["model"] == model]
    settings = list(dict.fromkeys(sum_model["setting"]))
    pauses = sorted(s_model["pause_requested_s"].unique()) if not s_model.empty else [0.0]
    step = min(np.diff(pauses)) if len(pauses) > 1 else 0.1
    rng = np.random.default_rng(0)
    rows = {w.get("setting"): w for w in wake or [] if w.get("model") == model}
    stalled = pd.Series(False, index=s_model.index)
    for setting in settings:
        raw = s_model[s_model["setting"] == setting]
        stalled.loc[raw.index] = stall_mask(raw, value, rows.get(setting)).to_numpy()
    ylo, yhi, log_scale = bulk_limits(s_model.loc[~stalled, value].to_numpy(dtype=float),
                                      sum_model["median"].to_numpy(dtype=float))
    clipped_any = False
    for i, setting in enumerate(settings):
        colour = f"C{i}"
        raw = s_model[s_model["setting"] == setting]
        offset = (i - (len(settings) - 1) / 2) * step * 0.15
        x = raw["pause_requested_s"] + offset + rng.uniform(-step * 0.05, step * 0.05, len(raw))
        st = stalled.loc[raw.index]
        ax.scatter(x[~st], raw.loc[~st, value], s=12, alpha=0.5, color=colour, linewidths=0)
        inside = st & (raw[value] <= yhi)
        ax.scatter(x[inside], raw.loc[inside, value], s=22, facecolors="none", edgecolors=colour, linewidths=0.9,
                   label="stall (left out of the fit)" if inside.any() and not clipped_any else None)
        over = raw[value] > yhi
        stacked: dict[float, int] = {}  # several at one pause: their values one under another
        for pause, xi, vi in zip(raw.loc[over, "pause_requested_s"], x[over], raw.loc[over, value]):
            k = stacked[pause] = stacked.get(pause, -1) + 1
            ax.annotate(f"{vi:.0f}" if vi >= 100 else f"{vi:.3g}", (xi, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(0, -9 - 8 * k), textcoords="offset points", ha="center", va="top", fontsize=6,
                        color=colour)
        if over.any():
            ax.scatter(x[over], np.full(int(over.sum()), 0.985), transform=ax.get_xaxis_transform(), marker="^",
                       s=22, color=colour, clip_on=False, zorder=3,
                       label="above the axis (value in ms)" if not clipped_any else None)
            clipped_any = True
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
        ax.annotate(label, (w["first_woken_s"] if left_half else w["last_warm_s"], 0.93 - 0.06 * steps.index(w)),
                    xycoords=("data", "axes fraction"), xytext=(4 if left_half else -4, 0),
                    textcoords="offset points", fontsize=7, color=colour, va="top",
                    ha="left" if left_half else "right",
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xlabel("pause before request (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{model}: {ylabel} vs pause", fontsize=11, parse_math=False)
    ax.grid(alpha=0.3)
    if log_scale:
        ax.set_yscale("log")
    ax.set_ylim(ylo, yhi)
    ax.legend(fontsize=8, loc="lower right" if steps else "upper left")
    fig.text(0.99, 0.01, f"run {plain(run_id)}", ha="right", va="bottom", fontsize=7, color="0.4")
    return figure_png(fig)
