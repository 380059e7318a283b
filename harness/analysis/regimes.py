"""Idle-wake regimes: warm (short pauses), woken (after the unwire timer), cold
(after a reload).  Pooling them hides regressions, so every comparison is made
within a regime.

One model of the wake curve (``wake_model``, ``fit_shape``): whether there is a step, by a
permutation test on every sample (``wake_fit.step_test``, a step called at p <= ``STEP_ALPHA``);
then where, the shape among step / two steps / ramp by BIC on the bulk with the place's interval
from bootstrap refits; then how much, the penalty at each refit's own place.  A step counts only
when it rises by at least ``MIN_STEP`` in median terms.  Every surface reads
this one model: analysis.json's ``wake`` rows, the findings and the headline, the wake
table and the plot, the terminal, evidence, and compare/gate (``wake_thresholds``).
``cold`` is the known mechanism of ``--sleep-idle-seconds``: a pause at or beyond it
reloads the model.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from harness.analysis import wake_fit
from harness.analysis.intervals import median_interval

MIN_STEP = 0.10  # a step smaller than 10% is not called a regime change
MIN_BIC_GAIN = 6.0  # a richer shape must lower BIC by this much (Kass & Raftery: "strong")
N_PERM = 999  # label shuffles of the step test (sequential: fewer when the p-value is clearly large)
STEP_ALPHA = 0.01  # the step test's level: at most 1% of flat curves are called a step
N_BOOT = 1000  # bootstrap resamples: the place's shares and the percentile intervals (>= 1000 for 2.5% tails)


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


@dataclass
class ShapeFit:
    """The latency-vs-pause curve's shape, chosen among none / step / two steps / ramp by BIC on the
    bulk (stalls left out: ``harness.analysis.wake_fit``).

    BIC = n log(SSE / n) + k log n on the bulk's log latency, one row per sample; k counts levels,
    change points and sigma.  A richer shape replaces a simpler one only when its BIC is lower by
    at least ``MIN_BIC_GAIN`` (6: "strong" evidence on Kass and Raftery's scale).  A step (or ramp)
    counts only if each rise is at least ``min_step`` (10%) in the bulk's geometric mean, and only
    if the step test rejects a flat curve (p <= ``STEP_ALPHA``); ``note`` says why where it does not.
    ``last_warm_s`` / ``first_woken_s``: the wake threshold lies in (last_warm_s, first_woken_s],
    the only interval a grid can support.  For a ramp they are the ramp's start and end.
    ``stalls``: per pause, the samples of the slow mode that the fit leaves out (rate, size).
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
    place_support: float | None = None  # share of bootstrap refits that put the step where this fit does
    threshold_ci: tuple[float, float] = (math.nan, math.nan)  # first woken pause, 2.5-97.5% of refits with a step
    n_boot: int = 0
    n_samples: int = 0
    n_stalls: int = 0
    stall_rate_ci: tuple[float, float] = (math.nan, math.nan)  # exact (Clopper-Pearson) 95%
    stall_size: float | None = None  # median of stall / its pause's median (x)
    stall_size_ci: tuple[float, float] = (math.nan, math.nan)  # order-statistic 95% interval (>= 6 stalls)
    stall_size_range: tuple[float, float] = (math.nan, math.nan)
    stalls: list[dict] = field(default_factory=list)  # per pause: n, n_stalls, rate, rate_ci, bounds, values
    p_value: float | None = None  # the step test's (wake_fit.step_test); None: not tested
    n_perm: int = 0  # label shuffles it drew
    test_statistic: float | None = None
    test_blocked: bool = False  # shuffled within repetitions
    alpha: float = math.nan  # the test's level
    place_shares: list[dict] = field(default_factory=list)  # per place chosen by a resample: its share
    place_share: float | None = None  # share of resamples whose place lies in place_interval_s
    place_set: list[dict] = field(default_factory=list)  # the runs of places holding >= 95% of resamples, most first
    place_interval_s: tuple[float, float] = (math.nan, math.nan)  # (last warm, first woken) bounds of that run
    n_boot_no_rise: int = 0  # resamples where the chosen shape had no rising place (left out of the intervals)

    def as_row(self) -> dict:
        """The fit as analysis.json keeps it (``wake`` rows): one dict every surface reads."""
        return {"shape": self.shape, "text": self.threshold_text(), "has_step": self.has_step,
                "last_warm_s": self.last_warm_s, "first_woken_s": self.first_woken_s,
                "threshold_s": self.first_woken_s if self.has_step else None,
                "threshold_ci": self.threshold_ci if self.has_step else (math.nan, math.nan),
                "second_last_s": self.second_last_s, "second_first_s": self.second_first_s,
                "warm_median_ms": self.warm_median_ms, "warm_ci": self.warm_ci,
                "woken_median_ms": self.woken_median_ms, "woken_ci": self.woken_ci,
                "penalty_ms": self.penalty_ms, "penalty_ci": self.penalty_ci,
                "place_support": self.place_support, "n_boot": self.n_boot,
                "n_warm": self.n_warm, "n_woken": self.n_woken, "bic": self.bic, "note": self.note,
                "n_samples": self.n_samples, "n_stalls": self.n_stalls,
                "stall_rate": self.n_stalls / self.n_samples if self.n_samples else math.nan,
                "stall_rate_ci": self.stall_rate_ci, "stall_size": self.stall_size,
                "stall_size_ci": self.stall_size_ci, "stall_size_range": self.stall_size_range,
                "stall_text": self.stall_text(), "stalls": self.stalls,
                "p_value": self.p_value, "n_perm": self.n_perm, "test_statistic": self.test_statistic,
                "test_blocked": self.test_blocked, "alpha": self.alpha, "place_shares": self.place_shares,
                "place_share": self.place_share, "place_interval_s": self.place_interval_s,
                "place_set": self.place_set,
                "place_text": self.place_text(), "n_boot_no_rise": self.n_boot_no_rise}

    @property
    def has_step(self) -> bool:
        return self.shape != "none"

    @property
    def rise(self) -> float:
        """Woken over warm median, minus 1 (nan without a step)."""
        if self.woken_median_ms is None or not self.warm_median_ms > 0:
            return math.nan
        return self.woken_median_ms / self.warm_median_ms - 1

    def place_text(self) -> str:
        """How sure the place is, in words: "" without a step or a bootstrap."""
        if not self.has_step or self.place_share is None:
            return ""
        lo, hi = self.place_interval_s
        what = "the ramp lies" if self.shape == "ramp" else "the step lies"
        others = "".join(f" and between {p['last_warm_s']:g} and {p['first_woken_s']:g} s in "
                         f"{100 * p['share']:.0f}%" for p in self.place_set[1:])
        return f"{what} between {lo:g} and {hi:g} s in {100 * self.place_share:.0f}% of {self.n_boot} resamples{others}"

    def threshold_text(self) -> str:
        if self.shape == "none":
            return "no clear wake step" + (f" ({self.note})" if self.note else "")
        if self.shape == "ramp":
            return f"a gradual ramp from {self.last_warm_s:g} s to {self.first_woken_s:g} s"
        text = f"a wake step between {self.last_warm_s:g} s and {self.first_woken_s:g} s"
        if self.shape == "two steps":
            text += f", and a second between {self.second_last_s:g} s and {self.second_first_s:g} s"
        return text

    def stall_text(self) -> str:
        """The stalls as their own figure: "" without any."""
        if not self.n_stalls:
            return ""
        lo, hi = self.stall_rate_ci
        at = [s for s in self.stalls if s["n_stalls"]]
        where = ", ".join(f"{s['pause_s']:g} s ({s['n_stalls']} of {s['n']})" for s in at)
        size_lo, size_hi = self.stall_size_ci
        size = (f"{self.stall_size:.3g}x [{size_lo:.3g}, {size_hi:.3g}]" if size_lo == size_lo
                else f"{self.stall_size:.3g}x (range {self.stall_size_range[0]:.3g}-{self.stall_size_range[1]:.3g}x; "
                     f"too few for an interval)")
        return (f"stalls (left out of the fit): {self.n_stalls} of {self.n_samples} requests, "
                f"{100 * self.n_stalls / self.n_samples:.2g}% [{100 * lo:.2g}, {100 * hi:.2g}], at {where}; "
                f"each took {size} its pause's median")


@functools.lru_cache(maxsize=4096)
def _clopper_pearson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    lo = float(stats.beta.ppf(0.025, k, n - k + 1)) if k > 0 else 0.0
    hi = float(stats.beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def _stall_rows(levels: np.ndarray, idx: np.ndarray, y: np.ndarray, fl: wake_fit.Stalls) -> list[dict]:
    rows = []
    for j, pause in enumerate(levels):
        at = idx == j
        k, n = int(fl.mask[at].sum()), int(at.sum())
        bound = float(np.exp(fl.above_log[j])) if np.isfinite(fl.above_log[j]) else None
        rows.append({"pause_s": float(pause), "n": n, "n_stalls": k, "rate": k / n if n else math.nan,
                     "rate_ci": _clopper_pearson(k, n), "median_ms": float(np.exp(fl.median_log[j])),
                     "stall_above_ms": bound, "stall_ms": [float(v) for v in np.sort(y[at & fl.mask])]})
    return rows


def fit_shape(pauses: npt.ArrayLike, latency_ms: npt.ArrayLike, *, min_step: float = MIN_STEP, seed: int = 0,
              n_boot: int = N_BOOT, min_gain: float | None = None, blocks: npt.ArrayLike | None = None,
              n_perm: int = N_PERM, alpha: float = STEP_ALPHA) -> ShapeFit:
    """The one wake model on one cell's samples (see ``ShapeFit`` and ``harness.analysis.wake_fit``).

    Whether: the permutation test on every sample (``blocks``: each sample's repetition, within which
    the pause labels are shuffled); a step needs p <= ``alpha``.  Where and how much: BIC's shape among
    the rising ones on the bulk, bootstrapped at each resample's own place.  ``n_perm=0`` and
    ``n_boot=0``: no test, no bootstrap, BIC's choice among all four shapes as it stands.
    """
    p = np.asarray(pauses, dtype=float)
    y = np.asarray(latency_ms, dtype=float)
    blk = None if blocks is None else pd.to_numeric(pd.Series(np.asarray(blocks, dtype=object)),
                                                    errors="coerce").to_numpy(dtype=float)
    if p.shape != y.shape or (blk is not None and blk.shape != y.shape):
        raise ValueError(f"pauses, latencies and blocks differ in length: {p.shape}, {y.shape}, "
                         f"{None if blk is None else blk.shape}")
    ok = np.isfinite(p) & np.isfinite(y) & (y > 0)
    p, y = p[ok], y[ok]
    blk = None if blk is None else blk[ok]
    n = y.size
    if n == 0:
        return ShapeFit("none", {})
    min_gain = MIN_BIC_GAIN if min_gain is None else min_gain
    order = np.argsort(p, kind="stable")
    p, y = p[order], y[order]
    if blk is not None:
        blk = blk[order]
        blk = None if np.isnan(blk).any() else blk  # a block is a repetition; without one for every sample, no blocks
    levels, idx = np.unique(p, return_inverse=True)
    logy = np.log(y)
    fl = wake_fit.flag_stalls(idx, logy, levels)
    bulk = ~fl.mask
    b_idx, b_logy = idx[bulk], logy[bulk]
    rng = np.random.default_rng(seed)
    tested = n_perm > 0
    test = wake_fit.step_test(logy, idx, levels.size, blk, n_perm=n_perm, rng=rng) if tested else None
    main = wake_fit.fit_batch(b_logy[None, :], b_idx, levels, min_step=min_step, min_gain=min_gain,
                              allow_none=not tested)
    names = wake_fit.SHAPES
    bics = {names[c]: round(float(main.bic[0, c]), 3) for c in range(4) if np.isfinite(main.bic[0, c])}
    n_stalls = int(fl.mask.sum())
    ratios = np.sort(y[fl.mask] / np.exp(fl.median_log[idx[fl.mask]]))
    size_ci = median_interval(ratios)[:2] if n_stalls else (math.nan, math.nan)
    common: dict[str, Any] = {"n_boot": int(n_boot), "n_samples": int(n), "n_stalls": n_stalls,
              "stall_rate_ci": _clopper_pearson(n_stalls, int(n)),
              "stall_size": float(np.median(ratios)) if n_stalls else None,
              "stall_size_ci": (float(size_ci[0]), float(size_ci[1])),
              "stall_size_range": (float(ratios[0]), float(ratios[-1])) if n_stalls else (math.nan, math.nan),
              "stalls": _stall_rows(levels, idx, y, fl), "alpha": alpha}
    if test is not None:
        common.update(p_value=test.p_value, n_perm=test.n_perm, test_statistic=test.statistic,
                      test_blocked=test.blocked)

    def flat(note: str = "") -> ShapeFit:
        boot = np.exp(wake_fit.resample_within_pauses(b_logy, b_idx, n_boot, rng)) if n_boot else None
        meds = np.median(boot, axis=1) if boot is not None else np.array([math.nan])
        return ShapeFit("none", bics, warm_median_ms=float(np.median(y[bulk])), n_warm=int(bulk.sum()),
                        note=note, warm_ci=_interval(meds), **common)

    code = int(main.shape[0])
    candidate = _place(ShapeFit(names[code], bics, **common), main, 0, levels) if code else None
    clearest = candidate
    if clearest is None and test is not None:  # no shape rises by min_step: the best rising step, for the note
        best = wake_fit.fit_batch(b_logy[None, :], b_idx, levels, min_step=min_step, min_gain=min_gain, force=1)
        clearest = _place(ShapeFit("step", bics), best, 0, levels) if best.shape[0] else None
    where = (f"at its clearest, between {clearest.last_warm_s:g} s and {clearest.first_woken_s:g} s, the curve "
             f"rises {100 * clearest.rise:.0f}%" if clearest else "the curve does not rise")
    if test is not None and test.n_perm == 0:
        return flat("no boundary between pauses to test: a step needs at least 2 pauses")
    if test is not None and not test.p_value <= alpha:
        return flat(f"{where}, no more clearly than with the pause labels shuffled{_within(test)}: "
                    f"p = {test.p_value:.2g} ({test.n_perm} shuffles; a step is called at p <= {alpha:g})")
    if candidate is None:
        if test is None:
            return flat()
        return flat(f"{where} (p = {test.p_value:.2g} against shuffled pause labels), less than the "
                    f"{100 * min_step:.0f}% a wake step must be")
    fit = candidate
    wh, wl, wu = (int(a[0]) for a in (main.warm_hi, main.woken_lo, main.woken_hi))
    fit.n_warm, fit.n_woken = int((b_idx < wh).sum()), int(((b_idx >= wl) & (b_idx < wu)).sum())
    if n_boot:
        reps = wake_fit.resample_within_pauses(b_logy, b_idx, n_boot, rng)
        boot = wake_fit.fit_batch(reps, b_idx, levels, min_step=min_step, min_gain=min_gain, force=code)
        boot_all = np.exp(reps)
        fit.warm_ci = _interval(np.median(boot_all[:, b_idx < wh], axis=1))
        fit.woken_ci = _interval(np.median(boot_all[:, (b_idx >= wl) & (b_idx < wu)], axis=1))
        fit.penalty_ci = _interval(boot.penalty_ms[boot.shape > 0])  # each at its resample's own place
        fit.n_boot_no_rise = int((boot.shape == 0).sum())
        fit.place_support = float(np.mean((boot.woken_lo == wl) & (boot.warm_hi == wh)))
        _place_shares(fit, boot, levels)
    return fit


def _within(test: wake_fit.StepTest) -> str:
    return " within each repetition" if test.blocked else ""


def _place(fit: ShapeFit, batch: wake_fit.BatchFit, row: int, levels: np.ndarray) -> ShapeFit:
    """Set ``fit``'s place and medians from row ``row`` of a batch fit."""
    wh, wl, s2 = (int(a[row]) for a in (batch.warm_hi, batch.woken_lo, batch.second_lo))
    fit.last_warm_s = float(levels[wh - 1])
    fit.first_woken_s = float(levels[wl])
    if fit.shape == "two steps":
        fit.second_last_s, fit.second_first_s = float(levels[s2 - 1]), float(levels[s2])
    fit.warm_median_ms, fit.woken_median_ms = float(batch.warm_median_ms[row]), float(batch.woken_median_ms[row])
    fit.penalty_ms = fit.woken_median_ms - fit.warm_median_ms
    return fit


def _place_shares(fit: ShapeFit, boot: wake_fit.BatchFit, levels: np.ndarray) -> None:
    """How often each place was chosen over the resamples; the fewest places that hold at least 95% of
    them (the most chosen first), as runs of neighbouring places: the place's interval is the run that
    holds the most, the others are reported beside it."""
    has = boot.shape > 0
    if not has.any():
        return
    total = int(boot.shape.size)
    pairs, counts = np.unique(np.column_stack([boot.warm_hi[has], boot.woken_lo[has]]), axis=0, return_counts=True)
    fit.place_shares = [{"last_warm_s": float(levels[a - 1]), "first_woken_s": float(levels[b]),
                         "share": float(c / total)} for (a, b), c in zip(pairs, counts)]
    woken, warm = boot.woken_lo[has], boot.warm_hi[has]
    per = np.bincount(woken, minlength=levels.size)
    chosen = np.zeros(levels.size, dtype=bool)
    for j in np.argsort(-per, kind="stable"):
        if per[chosen].sum() >= 0.95 * total or per[j] == 0:
            break
        chosen[j] = True
    runs: list[dict[str, int]] = []
    for j in np.flatnonzero(chosen):
        if runs and runs[-1]["hi"] == j - 1:
            runs[-1]["hi"] = int(j)
        else:
            runs.append({"lo": int(j), "hi": int(j)})
    pieces: list[dict[str, Any]] = []
    for r in runs:
        inside = (woken >= r["lo"]) & (woken <= r["hi"])
        pieces.append({"last_warm_s": float(levels[int(warm[inside].min()) - 1]),
                       "first_woken_s": float(levels[r["hi"]]), "share": float(inside.sum() / total),
                       "first_woken_range_s": (float(levels[r["lo"]]), float(levels[r["hi"]]))})
    pieces.sort(key=lambda x: -float(x["share"]))
    fit.place_set = pieces
    main = pieces[0]
    fit.place_share = float(main["share"])
    fit.place_interval_s = (float(main["last_warm_s"]), float(main["first_woken_s"]))
    lo, hi = main["first_woken_range_s"]
    fit.threshold_ci = (float(lo), float(hi))


def _interval(draws: np.ndarray) -> tuple[float, float]:
    draws = np.asarray(draws, dtype=float)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def wake_model(samples: pd.DataFrame, value: str = "latency_ms") -> dict[tuple[str, str], ShapeFit]:
    """The one model of the wake curve: ``fit_shape`` per (model, setting) of measured rows,
    cold rows (pause >= sleep-idle) left out.  analysis.json, compare and gate all call this."""
    out: dict[tuple[str, str], ShapeFit] = {}
    if samples.empty:
        return out
    for (model, setting), g in samples.groupby(["model", "setting"]):
        if "sleep_idle_s" in g:
            sleep = pd.to_numeric(g["sleep_idle_s"], errors="coerce")
            g = g[~(sleep.notna() & (g["pause_requested_s"] >= sleep))]
        out[(model, setting)] = fit_shape(g["pause_requested_s"], g[value], blocks=design_blocks(g))
    return out


def design_blocks(g: pd.DataFrame) -> np.ndarray | None:
    """Each sample's repetition block (run and rep: ``lbench idle`` runs every pause once per rep, in a
    shuffled order), within which the step test shuffles pause labels; None where a sample has no rep."""
    if "rep" not in g:
        return None
    rep = pd.to_numeric(g["rep"], errors="coerce")
    if rep.isna().any():
        return None
    keys = pd.Series(list(zip(g["run_id"], rep)) if "run_id" in g else rep.tolist(), index=g.index)
    return pd.factorize(keys)[0].astype(float)


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
            continue
        a_s, b_s = fa.first_woken_s, fb.first_woken_s
        assert a_s is not None and b_s is not None  # a fit with a step always has its first woken pause
        if b_s < a_s:
            changes.append({"model": key[0], "setting": key[1], "change": "earlier", "a": fa.threshold_text(),
                            "b": fb.threshold_text(), "from_s": b_s, "to_s": a_s})
        elif b_s > a_s:
            changes.append({"model": key[0], "setting": key[1], "change": "later", "a": fa.threshold_text(),
                            "b": fb.threshold_text(), "from_s": a_s, "to_s": b_s})
    return changes
