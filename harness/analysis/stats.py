"""Summary statistics for idle sweeps.

Per-pause medians with distribution-free 95% intervals from order statistics (exact binomial
coverage; no interval, shown as "–", when n < 6), plus llama-idle's mean +/- sd.
Only measured rows (``phase == "measure"``) without errors count.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.intervals import median_interval

CELL_KEYS = ["model", "setting"]


def measured(samples: pd.DataFrame) -> pd.DataFrame:
    if samples.empty:
        return samples
    ok = samples["phase"].eq("measure")
    if "error" in samples:
        ok &= samples["error"].isna()
    return samples[ok]


def summarize_by_pause(samples: pd.DataFrame, value: str = "latency_ms") -> pd.DataFrame:
    """One row per (model, setting, pause): n, median and its CI, mean, sd, min, max."""
    cols = CELL_KEYS + ["pause_requested_s", "n", "median", "ci_low", "ci_high", "mean", "sd", "min", "max",
                        "server_prompt_ms_median", "pause_actual_s_mean"]
    good = measured(samples)
    if good.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (model, setting, pause), g in good.groupby(CELL_KEYS + ["pause_requested_s"], sort=True):
        x = g[value].to_numpy(dtype=float)
        lo, hi, _ = median_interval(x)  # order statistics; nan (no interval) when n < 6
        rows.append({
            "model": model, "setting": setting, "pause_requested_s": pause, "n": int(x.size),
            "median": float(np.median(x)), "ci_low": lo, "ci_high": hi,
            "mean": float(np.mean(x)), "sd": float(np.std(x, ddof=1)) if x.size > 1 else 0.0,
            "min": float(np.min(x)), "max": float(np.max(x)),
            "server_prompt_ms_median": float(g["server_prompt_ms"].median()),
            "pause_actual_s_mean": float(g["pause_actual_s"].mean()),
        })
    return pd.DataFrame(rows, columns=cols)


def percentile(values: npt.ArrayLike, q: float) -> float:
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else math.nan
