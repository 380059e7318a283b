"""The gate's interleaved rounds (``lbench ab``): the order of the arms, the contrasts, one look.

Design (docs/statistics.md, "The gate job").  Every round runs each arm once, each on a fresh
server: ``a`` (the base build), ``b`` (the head build) and ``aa`` (a second copy of ``a``: the
A/A arm, the noise floor measured in the same job).  The order inside a round is a permutation of
the arms, drawn so that every block of ``k!`` rounds holds each permutation once, in a seeded
random order (``balanced_orders``): each arm sits in each position equally often, and no fixed
base-then-head order leaves a positional penalty in the contrast.

Each run gives one level per gated group: the log of its median latency at that pause (a group is
a model, a setting and a pause).  Per group, the levels of all rounds are fitted by least squares
with a round effect (what the machine did during that round, shared by its arms), an arm effect
and a position effect (first, second, third in the round):

    y[r, arm] = round[r] + arm[arm] + position[pos(r, arm)] + e,   e ~ N(0, s^2)

and two contrasts are read with their t intervals (df = runs - parameters):

- ``B vs A``: arm b against the mean of a and aa (both copies of the base: 1.5 s^2 / n instead of
  2 s^2 / n for b against a alone);
- ``A/A``: aa against a, whose true value is 0; it is the floor and the drift control.

One look (``judge_look``) classifies each contrast at a one-sided level (from the alpha spending
over the looks, ``harness.analysis.sequential``, split over the gated groups by Bonferroni):
slower (the interval above 0 under ``slower_rule = zero``, above the margin under ``margin``),
faster (mirror), no change (inside the band of +-margin), else inconclusive.  The job's outcome:

- ``unproven``: the A/A contrast of some gated group is slower or faster (the machine drifted or an
  arm's position mattered), or, at the final look, a decision was reached for B but the A/A
  interval is wider than the margin (the floor cannot vouch for it);
- ``fail``: a gated group's B is slower and its A/A interval lies inside the band;
- ``pass``: every gated group's B is no change or faster, each A/A inside the band;
- ``inconclusive``: the final look and no decision.

Without the A/A arm (``--arms a,b``) the A/A rules are skipped and the outcome says so.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from harness.analysis.sequential import spending_boundary
from harness.analysis.stats import measured
from harness.analysis.gate_config import ARMS, RoundsConfig


def balanced_orders(arms: Sequence[str], n_rounds: int, seed: int) -> list[tuple[str, ...]]:
    """The order of the arms in each of ``n_rounds`` rounds: blocks of every permutation once, each
    block shuffled by a seeded generator (randomised, and balanced over each block)."""
    perms = list(itertools.permutations(arms))
    rng = random.Random(seed)
    out: list[tuple[str, ...]] = []
    while len(out) < n_rounds:
        block = perms[:]
        rng.shuffle(block)
        out += block
    return out[:n_rounds]


def order_of_round(arms: Sequence[str], round_no: int, seed: int) -> tuple[str, ...]:
    """The order of round ``round_no`` (from 1), the same as ``balanced_orders(...)[round_no - 1]``."""
    return balanced_orders(arms, round_no, seed)[-1]


# ---- the contrasts ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fit:
    """The least-squares fit of one group's levels: both contrasts (log scale) with their standard
    errors, on ``df`` residual degrees of freedom."""

    b_vs_a: float
    b_se: float
    aa_vs_a: float  # nan without the aa arm
    aa_se: float
    df: int
    rounds: int
    residual_sd: float


def fit_levels(levels: Sequence[Mapping[str, float]], orders: Sequence[Sequence[str]], *,
               position: bool = True) -> Fit | None:
    """Fit ``levels[r][arm]`` (log levels of round r) with round, arm and (``position``) position
    effects; None when the arm effects cannot be told from the positions' (the orders so far do not
    separate them) or the residual df is below 1 (too few rounds to estimate the noise)."""
    arms = [a for a in ARMS if a in orders[0]] if orders else []
    n, k = len(levels), len(arms)
    if n == 0 or k < 2:
        return None
    cols = n + (k - 1) + ((k - 1) if position else 0)
    rows, y = [], []
    for r, (lv, order) in enumerate(zip(levels, orders)):
        for arm in arms:
            x = np.zeros(cols)
            x[r] = 1.0
            i = arms.index(arm)
            if i > 0:
                x[n + i - 1] = 1.0
            pos = list(order).index(arm)
            if position and pos > 0:
                x[n + (k - 1) + pos - 1] = 1.0
            rows.append(x)
            y.append(float(lv[arm]))
    X, Y = np.array(rows), np.array(y)
    rank = int(np.linalg.matrix_rank(X))
    df = len(Y) - rank
    if rank < cols or df < 1:  # an arm effect confounded with a position (too few rounds): not estimable
        return None
    beta, *_ = np.linalg.lstsq(X, Y, rcond=None)
    resid = Y - X @ beta
    s2 = float(resid @ resid) / df
    cov = np.linalg.pinv(X.T @ X) * s2

    def contrast(c: np.ndarray) -> tuple[float, float]:
        return float(c @ beta), math.sqrt(max(float(c @ cov @ c), 0.0))

    c_b = np.zeros(cols)
    c_b[n + arms.index("b") - 1] = 1.0
    if "aa" in arms:
        c_b[n + arms.index("aa") - 1] -= 0.5  # b - (a + aa)/2, with a's effect 0
        c_aa = np.zeros(cols)
        c_aa[n + arms.index("aa") - 1] = 1.0
        aa, aa_se = contrast(c_aa)
    else:
        aa, aa_se = math.nan, math.nan
    b, b_se = contrast(c_b)
    return Fit(b, b_se, aa, aa_se, df, n, math.sqrt(s2))


def _ratio(log_value: float) -> float:
    """A log contrast as a ratio; inf past what a float holds (an early look's interval at a level near 0)."""
    return math.exp(log_value) if log_value < 700 else math.inf


def classify(lo: float, hi: float, margin_log: float, slower_rule: str) -> str:
    """slower / faster / no change / inconclusive for a log-ratio interval [lo, hi]."""
    bound = margin_log if slower_rule == "margin" else 0.0
    if lo > bound:
        return "slower"
    if hi < -bound:
        return "faster"
    if -margin_log < lo and hi < margin_log:
        return "no change"
    return "inconclusive"


@dataclass(frozen=True)
class Contrast:
    """One contrast of one group at one look, as ratios."""

    group: str
    name: str  # "B vs A" or "A/A"
    ratio: float
    ratio_lo: float
    ratio_hi: float
    verdict: str
    margin: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Look:
    round: int
    final: bool
    level_one_sided: float  # per group (after Bonferroni)
    status: str  # pass | fail | inconclusive | unproven | continue
    reason: str
    contrasts: list[Contrast] = field(default_factory=list)
    fits: dict[str, Fit] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"round": self.round, "final": self.final, "level_one_sided": self.level_one_sided,
                "status": self.status, "reason": self.reason,
                "contrasts": [c.as_dict() for c in self.contrasts],
                "df": {g: f.df for g, f in self.fits.items()},
                "residual_sd": {g: f.residual_sd for g, f in self.fits.items()}}


def look_level(fractions: Sequence[float], alpha_one_sided: float, spending: str) -> float:
    """The nominal one-sided level of the last look, for looks at information ``fractions``."""
    c = spending_boundary(fractions, alpha_one_sided, spending)[-1]
    return float(stats.norm.sf(c))


def judge_look(levels: Mapping[str, Sequence[Mapping[str, float]]], orders: Sequence[Sequence[str]],
               cfg: RoundsConfig, *, round_no: int, level_one_sided: float, final: bool) -> Look:
    """One look over every gated group (``levels[group][r][arm]``, log levels), as the module says."""
    look = Look(round_no, final, level_one_sided, "continue", "")
    has_aa = "aa" in cfg.arms
    b_verdicts, aa_verdicts, aa_inside = {}, {}, {}
    for group, lv in levels.items():
        fit = fit_levels(lv, orders, position=cfg.position)
        if fit is None:
            look.status = "inconclusive" if final else "continue"
            look.reason = "too few rounds to estimate the noise"
            return look
        look.fits[group] = fit
        m = cfg.margin_of(group)
        ml = math.log1p(m)
        q = float(stats.t.isf(level_one_sided, fit.df))
        lo, hi = fit.b_vs_a - q * fit.b_se, fit.b_vs_a + q * fit.b_se
        b_verdicts[group] = classify(lo, hi, ml, cfg.slower_rule)
        look.contrasts.append(Contrast(group, "B vs A", _ratio(fit.b_vs_a), _ratio(lo), _ratio(hi),
                                       b_verdicts[group], m))
        if has_aa:
            alo, ahi = fit.aa_vs_a - q * fit.aa_se, fit.aa_vs_a + q * fit.aa_se
            aa_verdicts[group] = ("differs" if alo > 0 or ahi < 0 else
                                  "inside the band" if -ml < alo and ahi < ml else "wider than the margin")
            aa_inside[group] = aa_verdicts[group] == "inside the band"
            look.contrasts.append(Contrast(group, "A/A", _ratio(fit.aa_vs_a), _ratio(alo), _ratio(ahi),
                                           aa_verdicts[group], m))
    moved = [g for g, v in aa_verdicts.items() if v == "differs"]
    slower = [g for g, v in b_verdicts.items() if v == "slower"]
    decided_all = all(v in ("no change", "faster") for v in b_verdicts.values())
    if moved:
        look.status = "unproven"
        look.reason = (f"the A/A arm differs from A ({', '.join(moved)}): the machine drifted or an arm's place in "
                       "the round mattered, so no verdict on B is made on this machine")
    elif slower and (not has_aa or all(aa_inside[g] for g in slower)):
        look.status, look.reason = "fail", f"B is slower ({', '.join(slower)})"
    elif decided_all and (not has_aa or all(aa_inside.values())):
        look.status, look.reason = "pass", "B is no slower than A in every gated group"
    elif final:
        if slower or decided_all:
            wide = [g for g, ok in aa_inside.items() if not ok]
            look.status = "unproven"
            look.reason = (f"B reached a verdict but the A/A interval is wider than the margin ({', '.join(wide)}): "
                           "this machine's noise floor cannot vouch for it")
        else:
            look.status = "inconclusive"
            look.reason = "the budget ran out before the intervals left the band's edges"
    else:
        look.reason = "undecided: more rounds"
    return look


def group_name(setting: str, pause: float, settings: int) -> str:
    """A gated group's name: its pause, and its setting when the spec has several."""
    return f"pause {pause:g} s" + (f" · {setting}" if settings > 1 else "")


def idle_levels(run: Any, pauses: Sequence[float], metric: str = "latency_ms") -> dict[str, float]:
    """An idle run's level in each gated group: the log of its median ``metric`` at that pause (a group
    per setting and pause; the model is the arm's own, so a side may run another model)."""
    frame = measured(run.table("samples"))
    out: dict[str, float] = {}
    if frame.empty or metric not in frame:
        return out
    settings = sorted(frame["setting"].astype(str).unique())
    for setting in settings:
        cell = frame[frame["setting"].astype(str) == setting]
        for p in pauses:
            values = cell.loc[np.isclose(cell["pause_requested_s"].astype(float), p), metric].to_numpy(dtype=float)
            values = values[np.isfinite(values) & (values > 0)]
            if len(values):
                out[group_name(setting, p, len(settings))] = float(np.log(np.median(values)))
    return out
