"""Idle-wake regimes: warm (short pauses), woken (after the unwire timer), cold
(after a reload).  Pooling them hides regressions, so every comparison is made
within a regime.

The wake threshold is found from the data, not assumed: a two-segment step fit of
log latency against pause (exhaustive over the grid's pauses, least squares).  The
step counts only when it is clear: the woken/warm median ratio's bootstrap
interval lies above 1 + ``min_step``.  Intervals come from resampling samples
within each pause (seeded).  ``cold`` is the known mechanism of
``--sleep-idle-seconds``: a pause at or beyond it reloads the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

MIN_STEP = 0.10  # a step smaller than 10% is not called a regime change
N_BOOT = 1000


@dataclass
class StepFit:
    threshold_s: float | None  # first pause of the upper segment; None: no clear step
    threshold_ci: tuple[float, float]
    warm_median_ms: float
    woken_median_ms: float | None
    penalty_ms: float | None  # woken - warm median
    penalty_ci: tuple[float, float]
    ratio: float | None
    n_warm: int
    n_woken: int


def _best_split(pauses: np.ndarray, logy: np.ndarray) -> float | None:
    levels = np.unique(pauses)
    if levels.size < 2:
        return None
    best, best_sse = None, math.inf
    for cut in levels[1:]:
        lo, hi = logy[pauses < cut], logy[pauses >= cut]
        sse = ((lo - lo.mean()) ** 2).sum() + ((hi - hi.mean()) ** 2).sum()
        if sse < best_sse:
            best, best_sse = float(cut), sse
    return best


def fit_step(pauses, latency_ms, *, seed: int = 0, n_boot: int = N_BOOT, min_step: float = MIN_STEP) -> StepFit:
    p = np.asarray(pauses, dtype=float)
    y = np.asarray(latency_ms, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y) & (y > 0)
    p, y = p[ok], y[ok]
    if y.size == 0:
        return StepFit(None, (math.nan, math.nan), math.nan, None, None, (math.nan, math.nan), None, 0, 0)
    cut = _best_split(p, np.log(y))
    none = StepFit(None, (math.nan, math.nan), float(np.median(y)), None, None, (math.nan, math.nan), None,
                   int(y.size), 0)
    if cut is None:
        return none
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(p == level) for level in np.unique(p)]
    cuts, penalties, ratios = [], [], []
    for _ in range(n_boot):
        idx = np.concatenate([rng.choice(g, g.size) for g in groups])
        bp, by = p[idx], y[idx]
        c = _best_split(bp, np.log(by))
        if c is None:
            continue
        warm, woken = by[bp < c], by[bp >= c]
        cuts.append(c)
        penalties.append(np.median(woken) - np.median(warm))
        ratios.append(np.median(woken) / np.median(warm))
    warm, woken = y[p < cut], y[p >= cut]
    ratio_lo = float(np.percentile(ratios, 2.5)) if ratios else math.nan
    if not ratios or ratio_lo <= 1 + min_step:
        return none
    return StepFit(cut, (float(np.percentile(cuts, 2.5)), float(np.percentile(cuts, 97.5))),
                   float(np.median(warm)), float(np.median(woken)), float(np.median(woken) - np.median(warm)),
                   (float(np.percentile(penalties, 2.5)), float(np.percentile(penalties, 97.5))),
                   float(np.median(woken) / np.median(warm)), int(warm.size), int(woken.size))


def classify(samples: pd.DataFrame, thresholds: dict[tuple[str, str], float | None]) -> pd.Series:
    """Regime per row: cold (pause >= sleep-idle), woken (pause >= fitted threshold), else warm."""
    regime = pd.Series("warm", index=samples.index, dtype="object")
    for (model, setting), g in samples.groupby(["model", "setting"]):
        t = thresholds.get((model, setting))
        if t is not None:
            regime[g.index[g["pause_requested_s"] >= t]] = "woken"
    if "sleep_idle_s" in samples:
        sleep = pd.to_numeric(samples["sleep_idle_s"], errors="coerce")
        regime[(sleep.notna()) & (samples["pause_requested_s"] >= sleep)] = "cold"
    return regime


def fit_all(samples: pd.DataFrame, value: str = "latency_ms", n_boot: int = N_BOOT) -> dict[tuple[str, str], StepFit]:
    out = {}
    for (model, setting), g in samples.groupby(["model", "setting"]):
        if "sleep_idle_s" in g:
            sleep = pd.to_numeric(g["sleep_idle_s"], errors="coerce")
            g = g[~(sleep.notna() & (g["pause_requested_s"] >= sleep))]  # cold rows are not part of the fit
        out[(model, setting)] = fit_step(g["pause_requested_s"], g[value], n_boot=n_boot)
    return out


def penalty_per_gb(points: list[tuple[float, float]]) -> dict | None:
    """Least-squares line penalty_ms = a + b * GB over models, with b's 95% interval."""
    pts = [(gb, pen) for gb, pen in points if pen is not None and math.isfinite(pen)]
    if len(pts) < 3:
        return None
    x, y = np.array(pts).T
    fit = stats.linregress(x, y)
    t = stats.t.ppf(0.975, len(pts) - 2)
    return {"slope_ms_per_gb": float(fit.slope), "slope_ci": (float(fit.slope - t * fit.stderr),
                                                              float(fit.slope + t * fit.stderr)),
            "intercept_ms": float(fit.intercept), "r2": float(fit.rvalue ** 2), "n_models": len(pts)}


def wake_summary(samples: pd.DataFrame, models: list[dict], n_boot: int = 300) -> tuple[list[dict], list[dict]]:
    """Per (model, setting): the fitted wake step; per setting: penalty per GB across models.

    ``samples`` are measured rows; ``models`` the manifest's model entries (label, bytes).
    """
    size_gb = {m.get("label"): (m.get("bytes") or 0) / 1e9 for m in models}
    rows = []
    for (model, setting), f in fit_all(samples, n_boot=n_boot).items():
        rows.append({"model": model, "setting": setting, "gb": size_gb.get(model), "threshold_s": f.threshold_s,
                     "threshold_ci": f.threshold_ci, "penalty_ms": f.penalty_ms, "penalty_ci": f.penalty_ci,
                     "warm_median_ms": f.warm_median_ms, "woken_median_ms": f.woken_median_ms})
    per_gb = []
    for setting in dict.fromkeys(r["setting"] for r in rows):
        fit = penalty_per_gb([(r["gb"], r["penalty_ms"]) for r in rows
                              if r["setting"] == setting and r["gb"] and r["penalty_ms"] is not None])
        if fit:
            per_gb.append({"setting": setting, **fit})
    return rows, per_gb
