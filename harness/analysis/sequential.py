"""Group-sequential boundaries for ``lbench ab``: alpha spending over looks (Lan and DeMets).

The run-level statistic of harness.analysis.verdicts (a t statistic on per-run log medians) is,
at every look, approximately a standardised Brownian motion in the information fraction
t = runs per side so far / the round budget.  A one-sided boundary c_1..c_K with
P(Z_k >= c_k for some k | no effect) = alpha is found look by look so that the probability first
spent at look k equals spend(t_k) - spend(t_{k-1}), by numerical integration of the density of
the score S_k = Z_k sqrt(t_k) over the continuation region (Armitage, McPherson and Rowe's
recursion, a grid of 1/25 sd).

* ``obf``: spend(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) (O'Brien-Fleming-like: little at early looks).
* ``pocock``: spend(t) = alpha log(1 + (e - 1) t) (Pocock-like: even).

tests/analysis/test_ab_sequential.py checks the recursion with a forward pass over a boundary (the
level it spends): the classical shapes (Pocock: c_k = C; O'Brien-Fleming: c_k = C sqrt(K/k)) for
equally spaced looks solved with it match the textbook constants (Jennison and Turnbull, Table 2.1),
and the spending boundaries spend alpha.  Each look's nominal one-sided level is
1 - Phi(c_k); ab decides at that level with the t statistic's own df.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

SPENDING = ("obf", "pocock")
_STEP = 0.04  # grid step in sd units of the score (the textbook constants to 3 decimals)


def spend(t: float, alpha: float, kind: str = "obf") -> float:
    t = min(max(t, 0.0), 1.0)
    if t == 0:
        return 0.0
    if kind == "obf":
        return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / math.sqrt(t)))
    if kind == "pocock":
        return float(alpha * math.log(1 + (math.e - 1) * t))
    raise ValueError(f"spending must be one of {SPENDING}, got {kind!r}")


def _first(t: float, drift: float) -> tuple[np.ndarray, np.ndarray]:
    """Grid and density of the score S at the first look (mean drift * t, variance t)."""
    sd = math.sqrt(t)
    x = np.linspace(drift * t - 10 * sd, drift * t + 10 * sd, int(20 / _STEP) + 1)
    return x, stats.norm.pdf(x, loc=drift * t, scale=sd)


def _truncate(x: np.ndarray, f: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray]:
    """The continuation part (S < b) of a density on a grid, re-gridded to end exactly at b."""
    lo = x[0]
    if b <= lo:
        return x[:1], np.zeros(1)
    grid = np.linspace(lo, min(b, x[-1]), max(int((min(b, x[-1]) - lo) / (x[1] - x[0])), 2) + 1)
    return grid, np.interp(grid, x, f)


def _exit_mass(x: np.ndarray, f: np.ndarray, b_next: float, dt: float, drift: float) -> float:
    """P(S_next >= b_next) from the continuation density (x, f) over an increment of variance dt."""
    return float(np.trapezoid(f * stats.norm.sf((b_next - x - drift * dt) / math.sqrt(dt)), x))


def _propagate(x: np.ndarray, f: np.ndarray, dt: float, drift: float) -> tuple[np.ndarray, np.ndarray]:
    """The density after an increment of variance ``dt``: a discrete convolution with the Gaussian
    kernel on a uniform grid (step at most 1/25 sd of the increment), O(n k) instead of a dense matrix."""
    d = math.sqrt(dt)
    h = min(float(x[1] - x[0]) if x.size > 1 else _STEP * d, _STEP * d)
    fine = np.arange(x[0], x[-1] + h / 2, h) if x.size > 1 else x
    g = np.interp(fine, x, f) if x.size > 1 else f
    w = np.full(fine.size, h if fine.size > 1 else 0.0)
    w[0] = w[-1] = w[0] / 2  # trapezoid weights
    m = int(math.ceil(8 * d / h))
    kernel = stats.norm.pdf(np.arange(-m, m + 1) * h / d) / d
    values = np.convolve(g * w, kernel, mode="full")  # grid point j: fine[0] - m h + j h, shifted by the drift
    grid = fine[0] - m * h + drift * dt + h * np.arange(values.size)
    return grid, values


def spending_boundary(fractions: Iterable[float], alpha: float, kind: str = "obf") -> list[float]:
    """One-sided z boundaries c_1..c_K at information fractions ``fractions`` (increasing, last <= 1)."""
    fr = [float(t) for t in fractions]
    if not fr or any(b <= a for a, b in zip(fr, fr[1:])) or fr[0] <= 0 or fr[-1] > 1 + 1e-12:
        raise ValueError(f"information fractions must increase in (0, 1], got {fr}")
    spend(fr[0], alpha, kind)  # an unknown spending kind is refused before any work
    return list(_boundary(tuple(fr), float(alpha), kind)[0])


@lru_cache(maxsize=512)
def _boundary(fr: tuple[float, ...], alpha: float, kind: str) -> tuple[tuple[float, ...], np.ndarray, np.ndarray]:
    """The boundary at looks ``fr`` and the score's density (grid, values) at the last look, before
    truncation; built from the boundary of ``fr[:-1]`` (cached), so a sequence of looks made one by one
    (``lbench ab``'s looks as its rounds come in) costs one step per look."""
    if len(fr) == 1:
        x, f = _first(fr[0], 0.0)
        return (float(stats.norm.isf(spend(fr[0], alpha, kind))),), x, f
    before, x, f = _boundary(fr[:-1], alpha, kind)
    x, f = _truncate(x, f, before[-1] * math.sqrt(fr[-2]))
    dt = fr[-1] - fr[-2]
    target = spend(fr[-1], alpha, kind) - spend(fr[-2], alpha, kind)
    t = fr[-1]

    def excess(c: float) -> float:
        return _exit_mass(x, f, c * math.sqrt(t), dt, 0.0) - target
    lo, hi = -3.0, 15.0
    if excess(hi) >= 0:  # the look's share is below what the grid resolves (~1e-17): no stop at this look
        c = hi
    elif excess(lo) <= 0:
        c = lo
    else:
        c = float(optimize.brentq(excess, lo, hi, xtol=1e-7))
    x_next, f_next = _propagate(x, f, dt, 0.0)
    return (*before, c), x_next, f_next
