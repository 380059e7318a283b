"""The wake model's error rates (``lbench wake-bench``): simulation calibrated on a real run, and
the real run with its pause labels permuted.

**Calibration** (``calibrate``) from measured idle samples, per (model, setting), through the wake
model itself (``regimes.fit_shape``): the stall rate and the stall sizes (each stall over its
pause's median) are its stall flags; the within-pause spread is the sd of the bulk's log latency
around each pause's bulk mean (n/(n-1) corrected); the between-pause spread is what the bulk's
pause means scatter around the fitted shape beyond what the within-pause spread explains.

**Simulation** (``simulate``): a curve on the run's grid (pauses x reps, each rep a block that runs
every pause once, as ``lbench idle`` does): level x exp(pause effect N(0, pause_sd)) x
lognormal(0, within_sd) per sample; a step multiplies the pauses from
``place_s`` on by 1 + step; with stalls, each sample stalls with the measured rate and takes a
stall size drawn from the measured ones.  Per condition: the share of fits with each answer, the
step found at its true place (the point estimate), the step reported with its place interval
holding the true place, the coverage of the penalty interval among fits that report a step
(against the curve's own true penalty: woken minus warm median of the bulk's distributions at the
true place, given the curve's pause levels; and against the nominal level x step, which also
counts the pause levels' scatter), the share answering "no clear step", and the stall flags' rates.

**Permutation** (``permuted``): a recorded cell with its pause labels shuffled (within each
repetition, where the run has them) has no step; every step the model finds there is a false one.

Every figure is a count over seeded trials with an exact (Clopper-Pearson) 95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from harness.analysis.regimes import N_BOOT, ShapeFit, _clopper_pearson, design_blocks, fit_shape

STEPS = (0.0, 0.10, 0.25, 0.50, 1.00)  # flat, +10%, +25%, +50%, +100%


@dataclass(frozen=True)
class Calibration:
    """What one measured cell says about this machine's curve, as the simulation uses it."""
    source: str  # "<run id> <model> · <setting>", or "given"
    pauses_s: tuple[float, ...]
    reps: int
    level_ms: float
    within_sd: float
    pause_sd: float
    stall_p: float
    stall_sizes: tuple[float, ...] = field(default_factory=tuple)  # stall / its pause's median (x)
    n_samples: int = 0
    n_stalls: int = 0
    given: tuple[str, ...] = ()  # the fields set by hand (wake-bench options) instead of measured


def calibrate(samples: pd.DataFrame, source: str, *, value: str = "latency_ms") -> Calibration:
    """Calibration from one cell's measured samples (columns pause_requested_s and ``value``)."""
    p = samples["pause_requested_s"].to_numpy(dtype=float)
    y = samples[value].to_numpy(dtype=float)
    ok = np.isfinite(p) & np.isfinite(y) & (y > 0)
    p, y = p[ok], y[ok]
    blocks = design_blocks(samples)
    fit = fit_shape(p, y, blocks=None if blocks is None else blocks[ok])
    bounds = {s["pause_s"]: s["stall_above_ms"] for s in fit.stalls}
    stall = np.array([bounds.get(float(a)) is not None and v > bounds[float(a)] for a, v in zip(p, y)], dtype=bool)
    logy = np.log(y)
    levels, idx = np.unique(p, return_inverse=True)
    resid, means, counts = [], [], []
    for j in range(levels.size):
        b = logy[(idx == j) & ~stall]
        means.append(float(b.mean()))
        counts.append(b.size)
        if b.size > 1:
            resid.append((b - b.mean()) * math.sqrt(b.size / (b.size - 1)))
    r = np.concatenate(resid) if resid else np.zeros(0)
    within = float(np.sqrt(np.mean(r ** 2))) if r.size else 0.0
    shape_means = _shape_means(levels, np.array(means), fit)
    dev = np.array(means) - shape_means
    extra = float(np.mean(dev ** 2) - np.mean(within ** 2 / np.maximum(np.array(counts), 1)))
    meds = [s["median_ms"] for s in fit.stalls]
    sizes = [v / meds[int(np.searchsorted(levels, a))] for a, v in zip(p[stall], y[stall])]
    reps = int(np.median(np.bincount(idx)))
    return Calibration(source, tuple(float(x) for x in levels), reps, float(np.median(y[~stall])), within,
                       math.sqrt(max(extra, 0.0)), float(stall.mean()), tuple(float(s) for s in sizes),
                       int(y.size), int(stall.sum()))


def _shape_means(levels: np.ndarray, means: np.ndarray, fit: ShapeFit) -> np.ndarray:
    """Each pause's mean log latency as the fitted shape's level puts it (segment means)."""
    if fit.shape == "ramp":
        return _ramp_means(levels, means, fit)
    if not fit.has_step:
        return np.full(levels.size, means.mean())
    cuts = [fit.first_woken_s] + ([fit.second_first_s] if fit.second_first_s is not None else [])
    seg = np.searchsorted(np.array(cuts), levels, side="right")
    return np.array([means[seg == s].mean() for s in seg])


def _ramp_means(levels: np.ndarray, means: np.ndarray, fit: ShapeFit) -> np.ndarray:
    start, end = float(fit.last_warm_s or 0.0), float(fit.first_woken_s or 0.0)
    w = np.clip((levels - start) / (end - start), 0, 1)
    design = np.column_stack([1 - w, w])
    coef, *_ = np.linalg.lstsq(design, means, rcond=None)
    return design @ coef


def _curve(cal: Calibration, rng: np.random.Generator, step: float, place_s: float, stalls: bool
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]:
    """One simulated cell: pauses, latencies, which samples stalled, the curve's true penalty (woken
    minus warm median of the bulk's distributions at the true place, given its pause levels) and each
    sample's repetition block."""
    levels = np.asarray(cal.pauses_s)
    effect = np.exp(rng.normal(0.0, cal.pause_sd, levels.size)) * np.where(levels >= place_s, 1.0 + step, 1.0)
    p = np.repeat(levels, cal.reps)
    blocks = np.tile(np.arange(cal.reps), levels.size)
    y = cal.level_ms * np.repeat(effect, cal.reps) * rng.lognormal(0.0, cal.within_sd, p.size)
    stalled: np.ndarray = np.zeros(p.size, dtype=bool)
    if stalls and cal.stall_p > 0 and cal.stall_sizes:
        stalled = rng.random(p.size) < cal.stall_p
        y[stalled] *= rng.choice(np.asarray(cal.stall_sizes), int(stalled.sum()))
    mu = np.log(cal.level_ms * effect)
    truth = _mixture_median(mu[levels >= place_s], cal.within_sd) - _mixture_median(mu[levels < place_s], cal.within_sd)
    return p, y, stalled, truth, blocks


def _mixture_median(mu: np.ndarray, sd: float) -> float:
    """Median of an equal mixture of lognormals (log means ``mu``, log sd ``sd``), by bisection."""
    from scipy.stats import norm

    if sd <= 0:
        return float(np.exp(np.median(mu)))
    lo, hi = float(mu.min()) - 10 * sd, float(mu.max()) + 10 * sd
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if norm.cdf((mid - mu) / sd).mean() < 0.5 else (lo, mid)
    return float(np.exp((lo + hi) / 2))


def _cp(k: int, n: int) -> dict:
    lo, hi = _clopper_pearson(k, n)
    return {"k": int(k), "n": int(n), "rate": k / n if n else math.nan, "ci": [lo, hi]}


def simulate(cal: Calibration, *, trials: int = 200, seed: int = 0, place_s: float | None = None,
             steps: tuple[float, ...] = STEPS, n_boot: int = N_BOOT,
             on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (step, stalls or not): the figures of the module doc (each passed to ``on_row``
    as soon as it is counted)."""
    levels = np.asarray(cal.pauses_s)
    place = float(levels[levels.size // 2]) if place_s is None else float(place_s)
    last_warm = float(levels[levels < place].max())
    rows = []
    for stalls in (False, True):
        if stalls and not (cal.stall_p > 0 and cal.stall_sizes):
            continue
        for step in steps:
            rng = np.random.default_rng([seed, int(step * 1000), int(stalls)])
            shapes: dict[str, int] = {}
            at_place = in_interval = covered = covered_nominal = reported = flagged = injected = caught = 0
            n_samples = 0
            for _ in range(trials):
                p, y, stalled, truth, blocks = _curve(cal, rng, step, place, stalls)
                fit = fit_shape(p, y, seed=int(rng.integers(2 ** 31)), n_boot=n_boot, blocks=blocks)
                shapes[fit.shape] = shapes.get(fit.shape, 0) + 1
                at_place += fit.shape == "step" and fit.first_woken_s == place and fit.last_warm_s == last_warm
                lo_s, hi_s = fit.place_interval_s
                in_interval += fit.has_step and lo_s <= last_warm and place <= hi_s
                if fit.has_step:
                    reported += 1
                    lo, hi = fit.penalty_ci
                    covered += lo <= truth <= hi
                    covered_nominal += lo <= cal.level_ms * step <= hi
                bounds = {s["pause_s"]: s["stall_above_ms"] for s in fit.stalls}
                flags = np.array([bounds.get(float(a)) is not None and v > bounds[float(a)] for a, v in zip(p, y)])
                flagged += int((flags & ~stalled).sum())
                n_samples += int((~stalled).sum())
                injected += int(stalled.sum())
                caught += int((flags & stalled).sum())
            rows.append({"step": step, "stalls": stalls, "place_s": place, "trials": trials,
                         "shapes": shapes, "no_clear_step": _cp(shapes.get("none", 0), trials),
                         "any_shape": _cp(trials - shapes.get("none", 0), trials),
                         "step_at_place": _cp(at_place, trials),
                         "place_interval_holds_place": _cp(in_interval, trials),
                         "coverage_when_reported": _cp(covered, reported),
                         "coverage_nominal_when_reported": _cp(covered_nominal, reported),
                         "false_flag_per_sample": _cp(flagged, n_samples),
                         "stalls_flagged": _cp(caught, injected)})
            if on_row is not None:
                on_row(rows[-1])
    return rows


def permuted(samples: pd.DataFrame, source: str, *, permutations: int = 100, seed: int = 0,
             value: str = "latency_ms", n_boot: int = N_BOOT) -> dict:
    """A recorded cell with its pause labels shuffled ``permutations`` times: shapes found (all false)."""
    p = samples["pause_requested_s"].to_numpy(dtype=float)
    y = samples[value].to_numpy(dtype=float)
    blocks = design_blocks(samples)
    groups = [np.flatnonzero(blocks == b) for b in np.unique(blocks)] if blocks is not None else [np.arange(p.size)]
    rng = np.random.default_rng(seed)
    shapes: dict[str, int] = {}
    for _ in range(permutations):
        shuffled = p.copy()
        for pos in groups:  # within each repetition, as the test itself shuffles
            shuffled[pos] = rng.permutation(p[pos])
        fit = fit_shape(shuffled, y, seed=int(rng.integers(2 ** 31)), n_boot=n_boot, blocks=blocks)
        shapes[fit.shape] = shapes.get(fit.shape, 0) + 1
    original = fit_shape(p, y, blocks=blocks)
    return {"source": source, "permutations": permutations, "shapes": shapes,
            "false_shape": _cp(permutations - shapes.get("none", 0), permutations),
            "original": original.threshold_text(), "original_stalls": original.stall_text()}


def calibration_row(cal: Calibration) -> dict:
    return asdict(cal)
