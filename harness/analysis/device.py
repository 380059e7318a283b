"""Device samples read back: the perturbation check and the before/after table of a setting axis.

**Perturbation** (``perturbation``): in a run with ``--device-interleave`` each repetition is
``on`` (device probes sampled through its pauses) or ``off``.  Per cell, the wake penalty is
the median latency after the long pauses (the upper half of the grid) minus the median after
the shortest pause; the figure is the difference on - off, in ms and in percent of the
latency after long pauses with sampling off, with a 95% percentile-bootstrap interval that
resamples whole repetitions within each arm (the repetition is the unit that was randomized).
The verdict: ``within 2%`` when the interval of the percent difference lies inside +-2%,
``moves it`` when it lies outside, ``inconclusive`` otherwise.

**Setting table** (``setting_table``): per setting of a knob axis (any ``setting``), the device
memory during the longest pause (the last reading before each such request, median over them,
per probe and device) and the request after the longest pause (client latency and server prompt
time, medians with order-statistic intervals, and prompt tokens/s where the server evaluated more
than one token): what llama.cpp PR #29267 asks testers for.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from harness.analysis.stats import measured
from harness.analysis.intervals import median_interval

TOLERANCE_PCT = 2.0
N_BOOT = 2000
MEMORY_COLUMNS = ("mem_used_bytes", "process_mem_bytes", "gtt_used_bytes", "process_gtt_bytes",
                  "process_evicted_bytes", "budget_bytes", "wired_bytes", "gpu_alloc_bytes")  # the last two: a Mac's


def _penalty(short: np.ndarray, long: np.ndarray) -> tuple[float, float]:
    """(penalty ms, latency after long pauses ms); nan when a side is empty."""
    if short.size == 0 or long.size == 0:
        return math.nan, math.nan
    return float(np.median(long) - np.median(short)), float(np.median(long))


def _split(rows: pd.DataFrame, short: float, long_min: float) -> tuple[np.ndarray, np.ndarray]:
    return (rows.loc[rows["pause_requested_s"] == short, "latency_ms"].to_numpy(dtype=float),
            rows.loc[rows["pause_requested_s"] >= long_min, "latency_ms"].to_numpy(dtype=float))


def perturbation(samples: pd.DataFrame, seed: int = 0) -> list[dict]:
    """One dict per (model, setting) of an interleaved run (empty when the run has no on/off arms)."""
    good = measured(samples)
    if good.empty or "device_sampling" not in good or good["device_sampling"].isna().all():
        return []
    out = []
    for (model, setting), g in good.groupby(["model", "setting"], sort=False):
        arms = {a: g[g["device_sampling"] == a] for a in ("on", "off")}
        if any(a.empty for a in arms.values()):
            continue
        pauses = sorted(g["pause_requested_s"].unique())
        if len(pauses) < 2:
            continue
        short, long_min = pauses[0], pauses[len(pauses) // 2]
        on_pen, on_long = _penalty(*_split(arms["on"], short, long_min))
        off_pen, off_long = _penalty(*_split(arms["off"], short, long_min))
        reps = {a: [_split(r, short, long_min) for _, r in arms[a].groupby("rep")] for a in arms}
        rng = np.random.default_rng(seed)
        diffs, pcts = [], []
        for _ in range(N_BOOT):
            drawn = {}
            for a, blocks in reps.items():
                pick = rng.integers(0, len(blocks), len(blocks))
                drawn[a] = _penalty(np.concatenate([blocks[i][0] for i in pick]),
                                    np.concatenate([blocks[i][1] for i in pick]))
            d = drawn["on"][0] - drawn["off"][0]
            if math.isfinite(d) and drawn["off"][1] > 0:
                diffs.append(d)
                pcts.append(100.0 * (drawn["on"][1] - drawn["off"][1]) / drawn["off"][1])
        diff = on_pen - off_pen
        pct = 100.0 * (on_long - off_long) / off_long if off_long > 0 else math.nan
        ci = (float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))) if diffs else (math.nan, math.nan)
        pci = (float(np.percentile(pcts, 2.5)), float(np.percentile(pcts, 97.5))) if pcts else (math.nan, math.nan)
        if pci[0] >= -TOLERANCE_PCT and pci[1] <= TOLERANCE_PCT:
            verdict = f"within {TOLERANCE_PCT:g}%"
        elif pci[0] > TOLERANCE_PCT or pci[1] < -TOLERANCE_PCT:
            verdict = "moves it"
        else:
            verdict = "inconclusive"
        out.append({"model": model, "setting": setting, "short_pause_s": float(short),
                    "long_pauses_from_s": float(long_min), "n_reps_on": len(reps["on"]), "n_reps_off": len(reps["off"]),
                    "n_on": len(arms["on"]), "n_off": len(arms["off"]),
                    "penalty_on_ms": on_pen, "penalty_off_ms": off_pen, "penalty_diff_ms": diff,
                    "penalty_diff_ci_ms": ci, "long_latency_on_ms": on_long, "long_latency_off_ms": off_long,
                    "long_latency_diff_pct": pct, "long_latency_diff_ci_pct": pci, "verdict": verdict})
    return out


def perturbation_sentence(p: dict) -> str:
    lo, hi = p["penalty_diff_ci_ms"]
    plo, phi = p["long_latency_diff_ci_pct"]
    return (f"{p['model']} / {p['setting']}: device sampling on - off: wake penalty {p['penalty_diff_ms']:+.2f} ms "
            f"(95% CI {lo:+.2f} to {hi:+.2f}; on {p['penalty_on_ms']:.2f}, off {p['penalty_off_ms']:.2f} ms), "
            f"latency after pauses >= {p['long_pauses_from_s']:g} s {p['long_latency_diff_pct']:+.2f}% "
            f"(95% CI {plo:+.2f} to {phi:+.2f}%): {p['verdict']} (repetitions on/off {p['n_reps_on']}/"
            f"{p['n_reps_off']}, bootstrap over repetitions)")


def _interval(values: np.ndarray) -> dict:
    lo, hi, _ = median_interval(values)
    return {"median": float(np.median(values)) if values.size else math.nan, "ci": (lo, hi), "n": int(values.size)}


def setting_table(samples: pd.DataFrame, device_samples: pd.DataFrame) -> list[dict]:
    """One dict per (model, setting): memory during the longest pause, the request after it."""
    good = measured(samples)
    if good.empty:
        return []
    longest = float(good["pause_requested_s"].max())
    out = []
    for (model, setting), g in good.groupby(["model", "setting"], sort=False):
        after = g[g["pause_requested_s"] == longest]
        row: dict = {"model": model, "setting": setting, "pause_s": longest,
                     "latency_ms": _interval(after["latency_ms"].to_numpy(dtype=float)),
                     "server_prompt_ms": _interval(after["server_prompt_ms"].dropna().to_numpy(dtype=float))}
        n_tok = after["server_prompt_n"].dropna()
        if not n_tok.empty and float(n_tok.median()) > 1:
            rate = (after["server_prompt_n"] / after["server_prompt_ms"] * 1000.0).dropna()
            row["prompt_tokens_per_s"] = _interval(rate.to_numpy(dtype=float))
        row["memory"] = _memory_in_pause(device_samples, model, setting, longest)
        out.append(row)
    return out


def _memory_in_pause(dev: pd.DataFrame, model: str, setting: str, pause: float) -> list[dict]:
    """Per probe, device and memory column: the last reading before each request after ``pause``, median."""
    if dev.empty:
        return []
    d = dev[(dev["model"] == model) & (dev["setting"] == setting) & (dev["pause_requested_s"] == pause)
            & ~dev["left_alone"].fillna(False).astype(bool)]
    out = []
    for (probe, device), g in d.groupby(["probe", "device"], sort=True):
        last = g.sort_values("t_since_pause_start_s").groupby("seq").tail(1)
        for col in MEMORY_COLUMNS:
            values = last[col].dropna().to_numpy(dtype=float) if col in last else np.array([])
            if values.size:
                lo, hi, _ = median_interval(values)
                out.append({"probe": probe, "device": device, "metric": col, "median_bytes": float(np.median(values)),
                            "ci_bytes": (lo, hi), "n": int(values.size)})
    return out


def memory_metric(dev: pd.DataFrame, *, prefer_wired: bool = False) -> str | None:
    """The memory column to draw from device samples: the first of ``MEMORY_COLUMNS`` with a reading;
    with ``prefer_wired``, a Mac's wired memory (vm_stat) first, where the run read it."""
    order = ("wired_bytes", *MEMORY_COLUMNS) if prefer_wired else MEMORY_COLUMNS
    for col in order:
        if col in dev and dev[col].notna().any():
            return col
    return None


def memory_through_pauses(dev: pd.DataFrame, metric: str) -> list[dict]:
    """Per (model, setting, probe, device, pause): how ``metric`` moved through the pause, from its first
    reading to its last before the request (device samples of the pause; rows left alone skipped).
    ``change_median_bytes`` is the median over the requests after that pause of (last - first), with a
    95% order-statistic interval; a re-wire shows as memory falling in the long pauses, a clock ramp
    leaves it flat (docs/probes.md)."""
    if dev.empty or metric not in dev:
        return []
    d = dev[dev[metric].notna() & ~dev["left_alone"].fillna(False).astype(bool)]
    out = []
    keys = ["model", "setting", "probe", "device", "pause_requested_s"]
    for (model, setting, probe, device, pause), g in d.groupby(keys, sort=False):
        firsts, lasts, t_last = [], [], []
        for _, r in g.sort_values("t_since_pause_start_s").groupby("seq"):
            firsts.append(float(r[metric].iloc[0]))
            lasts.append(float(r[metric].iloc[-1]))
            t_last.append(float(r["t_since_pause_start_s"].iloc[-1]))
        change = np.array(lasts) - np.array(firsts)
        lo, hi, _ = median_interval(change)
        out.append({"model": model, "setting": setting, "probe": probe, "device": device, "metric": metric,
                    "pause_s": float(pause), "n": len(firsts), "first_median_bytes": float(np.median(firsts)),
                    "last_median_bytes": float(np.median(lasts)), "last_reading_s": float(np.median(t_last)),
                    "change_median_bytes": float(np.median(change)), "change_ci_bytes": (lo, hi)})
    cells = list(dict.fromkeys(zip(d["model"], d["setting"])))  # the run's own order of cells
    return sorted(out, key=lambda r: (cells.index((r["model"], r["setting"])), r["probe"], r["device"],
                                      r["pause_s"]))
