"""Intervals every layer shares: a leaf that imports nothing of lbench.

- ``median_interval``: a distribution-free interval for a median from order statistics (exact
  binomial coverage), the rule of every per-pause median; ``median_ranks`` is the same rule as a
  table of ranks (n, k) for SQL (the history's DuckDB queries), and ``tests/history/test_query.py``
  checks that the two agree;
- ``clopper_pearson``: the exact interval of a binomial proportion (the gate's error rates, a
  storm's failed requests).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

MEDIAN_K_MAX = 100_000  # exact ranks up to here; a normal approximation beyond


def median_interval(values: Any, confidence: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free interval for a median from order statistics (binomial, exact coverage).

    Returns (low, high, coverage) with coverage >= ``confidence`` (the exact value for
    continuous data), or (nan, nan, nan) when n is too small for any order-statistic interval
    to reach it (n < 6 at 95%).
    """
    x = np.sort(np.asarray(values, dtype=float))
    x = x[np.isfinite(x)]
    n = x.size
    nan = (math.nan, math.nan, math.nan)
    if n == 0:
        return nan
    # largest k (1-based) with P(Bin(n, .5) <= k-1) <= (1-confidence)/2 -> [x_(k), x_(n-k+1)]
    tail = (1 - confidence) / 2
    k = 0  # after the loop: the largest k with P(Bin(n, .5) <= k - 1) <= tail
    while k < n // 2 and stats.binom.cdf(k, n, 0.5) <= tail:
        k += 1
    if k < 1:
        return nan
    coverage = 1 - 2 * float(stats.binom.cdf(k - 1, n, 0.5))
    return float(x[k - 1]), float(x[n - k]), coverage


@functools.lru_cache(maxsize=4)
def median_ranks(n_max: int = MEDIAN_K_MAX, confidence: float = 0.95) -> pd.DataFrame:
    """(n, k): the largest k with P(Bin(n, 1/2) <= k - 1) <= (1 - confidence) / 2, as median_interval."""
    n = np.arange(1, n_max + 1)
    tail = (1 - confidence) / 2
    q = stats.binom.ppf(tail, n, 0.5)  # smallest q with cdf(q) >= tail
    k = np.where(stats.binom.cdf(q, n, 0.5) <= tail, q + 1, q)  # k - 1 = the largest with cdf <= tail
    k = np.minimum(k, n // 2)
    ranks = pd.Series(k.astype("int64"), dtype="Int64")
    return pd.DataFrame({"n": n.astype("int64"), "k": ranks.where(ranks >= 1)})


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)
