"""Idle-wake regimes: warm (short pauses), woken (after the unwire timer), cold
(after a reload).  Pooling them hides regressions, so every comparison is made
within a regime.

One model of the wake curve (``wake_model``): the shape of log latency against pause,
chosen among none / step / two steps / ramp by BIC (``fit_shape``).  A step counts only
when it is clear: a rise of at least ``MIN_STEP`` in median terms, and a penalty whose
bootstrap interval (samples resampled within each side) excludes 0.  Every surface reads
this one model: analysis.json's ``wake`` rows, the findings and the headline, the wake
table and the plot, the terminal, evidence, and compare/gate (``wake_thresholds``).
``cold`` is the known mechanism of ``--sleep-idle-seconds``: a pause at or beyond it
reloads the model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

MIN_STEP = 0.10  # a step smaller than 10% is not called a regime change
MIN_BIC_GAIN = 6.0  # a richer shape must lower BIC by this much (Kass & Raftery: "strong")


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


def wake_summary(samples: pd.DataFrame, models: list[dict]) -> tuple[list[dict], list[dict]]:
    """Per (model, setting): the wake model (``wake_model``, the BIC shape) as a plain row; per
    setting: penalty per GB across models.  ``samples`` are measured rows; ``models`` the
    manifest's model entries (label, bytes)."""
    size_gb = {m.get("label"): (m.get("bytes") or 0) / 1e9 for m in models}
    rows = [{"model": model, "setting": setting, "gb": size_gb.get(model), **fit.as_row()}
            for (model, setting), fit in wake_model(samples).items()]
    per_gb = []
    for setting in dict.fromkeys(r["setting"] for r in rows):
        fit = penalty_per_gb([(r["gb"], r["penalty_ms"]) for r in rows
                              if r["setting"] == setting and r["gb"] and r["penalty_ms"] is not None])
        if fit:
            per_gb.append({"setting": setting, **fit})
    return rows, per_gb


# --------------------------------------------------------------------------- shape model choice

SHAPES = ("none", "step", "two steps", "ramp")
_PARAMS = {"none": 2, "step": 4, "two steps": 6, "ramp": 5}  # levels + change points + sigma


@dataclass
class ShapeFit:
    """The latency-vs-pause curve's shape, chosen among none / step / two steps / ramp by BIC.

    BIC = n log(SSE / n) + k log n on log latency, one row per sample; k counts levels,
    change points and sigma.  A richer shape replaces a simpler one only when its BIC is lower
    by at least ``MIN_BIC_GAIN`` (6: "strong" evidence on Kass and Raftery's scale).  A step (or ramp) counts only if
    each rise is at least
    ``min_step`` (10%) in median terms; otherwise the next best shape is taken.
    ``last_warm_s`` / ``first_woken_s``: the wake threshold lies in (last_warm_s, first_woken_s],
    the only interval a grid can support.  For a ramp they are the ramp's start and end.
    """
    shape: str
    bic: dict[str, float]
    last_warm_s: float | None = None
    first_woken_s: float | None = None
    second_last_s: float | None = None  # two steps: the second threshold's interval
    second_first_s: float | None = None
    warm_median_ms: float = math.nan
    woken_median_ms: float | None = None
    penalty_ms: float | None = None
    penalty_ci: tuple[float, float] = (math.nan, math.nan)
    n_warm: int = 0
    n_woken: int = 0
    note: str = ""
    warm_ci: tuple[float, float] = (math.nan, math.nan)  # 95% bootstrap intervals of the two medians
    woken_ci: tuple[float, float] = (math.nan, math.nan)

    def as_row(self) -> dict:
        """The fit as analysis.json keeps it (``wake`` rows): one dict every surface reads."""
        return {"shape": self.shape, "text": self.threshold_text(), "has_step": self.has_step,
                "last_warm_s": self.last_warm_s, "first_woken_s": self.first_woken_s,
                "threshold_s": self.first_woken_s if self.has_step else None,
                "second_last_s": self.second_last_s, "second_first_s": self.second_first_s,
                "warm_median_ms": self.warm_median_ms, "warm_ci": self.warm_ci,
                "woken_median_ms": self.woken_median_ms, "woken_ci": self.woken_ci,
                "penalty_ms": self.penalty_ms, "penalty_ci": self.penalty_ci,
                "n_warm": self.n_warm, "n_woken": self.n_woken, "bic": self.bic, "note": self.note}

    @property
    def has_step(self) -> bool:
        return self.shape != "none"

    def threshold_text(self) -> str:
        if self.shape == "none":
            return "no clear wake step" + (f" ({self.note})" if self.note else "")
        if self.shape == "ramp":
            return f"a gradual ramp from {self.last_warm_s:g} s to {self.first_woken_s:g} s"
        text = f"a wake step between {self.last_warm_s:g} s and {self.first_woken_s:g} s"
        if self.shape == "two steps":
            text += f", and a second between {self.second_last_s:g} s and {self.second_first_s:g} s"
        return text


def _sse_levels(logy: np.ndarray, codes: np.ndarray) -> float:
    sse = 0.0
    for c in np.unique(codes):
        seg = logy[codes == c]
        sse += float(((seg - seg.mean()) ** 2).sum())
    return sse


def _ramp_sse(p: np.ndarray, logy: np.ndarray, p1: float, p2: float) -> tuple[float, tuple[float, float]]:
    w = np.clip((p - p1) / (p2 - p1), 0, 1)
    design = np.column_stack([1 - w, w])
    coef, *_ = np.linalg.lstsq(design, logy, rcond=None)
    resid = logy - design @ coef
    return float((resid ** 2).sum()), (float(coef[0]), float(coef[1]))


def _choose(candidates: dict[str, tuple[float, tuple]], min_gain: float) -> str:
    """The simplest shape no richer one beats by at least ``min_gain`` BIC units: a richer shape
    must earn its place (a difference of 0.07 is a coin toss, not evidence)."""
    best = "none"
    for shape in sorted(candidates, key=lambda s: _PARAMS[s]):
        if shape != best and candidates[shape][0] <= candidates[best][0] - min_gain:
            best = shape
    return best


def fit_shape(pauses, latency_ms, *, min_step: float = MIN_STEP, seed: int = 0, n_boot: int = 300,
              min_gain: float | None = None) -> ShapeFit:
    p = np.asarray(pauses, dtype=float)
    y = np.asarray(latency_ms, dtype=float)
    ok = np.isfinite(p) & np.isfinite(y) & (y > 0)
    p, y = p[ok], y[ok]
    n = y.size
    if n == 0:
        return ShapeFit("none", {})
    min_gain = MIN_BIC_GAIN if min_gain is None else min_gain
    logy = np.log(y)
    levels = np.unique(p)
    rise = math.log1p(min_step)
    sst = float(((logy - logy.mean()) ** 2).sum())
    floor = 1e-12 * max(sst, 1e-12) + 1e-300

    def bic(sse: float, shape: str) -> float:
        return n * math.log(max(sse, floor) / n) + _PARAMS[shape] * math.log(n)

    candidates: dict[str, tuple[float, tuple]] = {"none": (bic(sst, "none"), ())}
    best_step = None
    for cut in levels[1:]:
        hi = p >= cut
        if np.median(logy[hi]) - np.median(logy[~hi]) < rise:
            continue
        b = bic(_sse_levels(logy, hi.astype(int)), "step")
        if best_step is None or b < best_step[0]:
            best_step = (b, (float(cut),))
    if best_step:
        candidates["step"] = best_step
    best_two = None
    for i, c1 in enumerate(levels[1:], start=1):
        for c2 in levels[i + 1:]:
            codes = (p >= c1).astype(int) + (p >= c2).astype(int)
            meds = [np.median(logy[codes == c]) for c in (0, 1, 2)]
            if meds[1] - meds[0] < rise or meds[2] - meds[1] < rise:
                continue
            b = bic(_sse_levels(logy, codes), "two steps")
            if best_two is None or b < best_two[0]:
                best_two = (b, (float(c1), float(c2)))
    if best_two:
        candidates["two steps"] = best_two
    best_ramp = None
    for i, p1 in enumerate(levels):
        for p2 in levels[i + 2:]:  # at least one grid level strictly inside the ramp
            sse, (a, b_) = _ramp_sse(p, logy, p1, p2)
            if b_ - a < rise:
                continue
            b = bic(sse, "ramp")
            if best_ramp is None or b < best_ramp[0]:
                best_ramp = (b, (float(p1), float(p2)))
    if best_ramp:
        candidates["ramp"] = best_ramp
    shape = _choose(candidates, min_gain)
    bics = {s: round(v[0], 3) for s, v in candidates.items()}
    rng = np.random.default_rng(seed)

    def flat(note: str = "") -> ShapeFit:
        return ShapeFit("none", bics, warm_median_ms=float(np.median(y)), n_warm=int(n), note=note,
                        warm_ci=_median_ci(y, rng, n_boot))

    if shape == "none":
        return flat()
    params = candidates[shape][1]
    prev = lambda c: float(levels[levels < c].max())  # noqa: E731
    if shape == "ramp":
        warm_sel, woken_sel = p <= params[0], p >= params[1]
        fit = ShapeFit(shape, bics, last_warm_s=params[0], first_woken_s=params[1])
    else:
        warm_sel, woken_sel = p < params[0], (p >= params[0]) & (p < (params[1] if len(params) > 1 else math.inf))
        fit = ShapeFit(shape, bics, last_warm_s=prev(params[0]), first_woken_s=params[0])
        if shape == "two steps":
            fit.second_last_s, fit.second_first_s = prev(params[1]), params[1]
    warm, woken = y[warm_sel], y[woken_sel]
    fit.warm_median_ms, fit.woken_median_ms = float(np.median(warm)), float(np.median(woken))
    fit.penalty_ms = fit.woken_median_ms - fit.warm_median_ms
    fit.n_warm, fit.n_woken = int(warm.size), int(woken.size)
    woken_boot = np.median(woken[rng.integers(0, woken.size, (n_boot, woken.size))], axis=1)
    warm_boot = np.median(warm[rng.integers(0, warm.size, (n_boot, warm.size))], axis=1)
    pens = woken_boot - warm_boot
    fit.penalty_ci = _interval(pens)
    fit.warm_ci, fit.woken_ci = _interval(warm_boot), _interval(woken_boot)
    if fit.penalty_ci[0] <= 0:  # BIC liked a step, but its penalty's interval includes 0: not clear
        return flat(f"BIC chose {shape} ({fit.threshold_text()}), but its penalty's 95% interval "
                    f"[{fit.penalty_ci[0]:.1f}, {fit.penalty_ci[1]:.1f}] ms includes 0")
    return fit


def _interval(draws: np.ndarray) -> tuple[float, float]:
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def _median_ci(y: np.ndarray, rng: np.random.Generator, n_boot: int) -> tuple[float, float]:
    if y.size < 2:
        return math.nan, math.nan
    return _interval(np.median(y[rng.integers(0, y.size, (n_boot, y.size))], axis=1))


def wake_model(samples: pd.DataFrame, value: str = "latency_ms") -> dict[tuple[str, str], ShapeFit]:
    """The one model of the wake curve: ``fit_shape`` per (model, setting) of measured rows,
    cold rows (pause >= sleep-idle) left out.  analysis.json, compare and gate all call this."""
    out = {}
    if samples.empty:
        return out
    for (model, setting), g in samples.groupby(["model", "setting"]):
        if "sleep_idle_s" in g:
            sleep = pd.to_numeric(g["sleep_idle_s"], errors="coerce")
            g = g[~(sleep.notna() & (g["pause_requested_s"] >= sleep))]
        out[(model, setting)] = fit_shape(g["pause_requested_s"], g[value])
    return out


def wake_thresholds(shapes: dict[tuple[str, str], ShapeFit]) -> dict[tuple[str, str], float | None]:
    """First woken pause per (model, setting) of a wake model, None without a step (for ``classify``)."""
    return {k: (s.first_woken_s if s.has_step else None) for k, s in shapes.items()}


def step_changes(a: dict[tuple[str, str], ShapeFit], b: dict[tuple[str, str], ShapeFit]) -> list[dict]:
    """New or moved wake steps in B relative to A, per (model, setting).

    ``new``: A has no step, B has one; ``earlier``: B's first woken pause is shorter than A's
    (a regression: more pauses pay the penalty); ``later``: longer (reported, not a failure).
    Each change names the pauses where B is newly woken, for the caller to test there.
    """
    changes = []
    for key, fb in b.items():
        fa = a.get(key)
        if fa is None or not fb.has_step:
            continue
        if not fa.has_step:
            changes.append({"model": key[0], "setting": key[1], "change": "new", "a": fa.threshold_text(),
                            "b": fb.threshold_text(), "from_s": fb.first_woken_s, "to_s": None})
        elif fb.first_woken_s < fa.first_woken_s:
            changes.append({"model": key[0], "setting": key[1], "change": "earlier", "a": fa.threshold_text(),
                            "b": fb.threshold_text(), "from_s": fb.first_woken_s, "to_s": fa.first_woken_s})
        elif fb.first_woken_s > fa.first_woken_s:
            changes.append({"model": key[0], "setting": key[1], "change": "later", "a": fa.threshold_text(),
                            "b": fb.threshold_text(), "from_s": fa.first_woken_s, "to_s": fb.first_woken_s})
    return changes
