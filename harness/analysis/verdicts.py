"""Verdicts you can trust: baseline (A) vs candidate (B), group by group, with the run as the unit.

The rules (docs/statistics.md states them for users):

* **Statistic.** Per side and group, the *centre* is the geometric mean of the per-run medians
  (one run: that run's median).  The ratio is centre(B) / centre(A); > 1 means B is slower.
* **Interval.** Two-level percentile bootstrap of log(ratio): resample runs with replacement,
  then samples within each drawn run, independently per side.  With one run per side only the
  second level exists, so between-run variance is *not* in the interval; the verdict says so.
* **Margin.** An equivalence band [1/(1+m), 1+m] fixed before looking at data (default m = 5%).
  ``slower``: the interval lies above the band; ``faster``: below it; ``no change``: inside it;
  ``inconclusive``: it straddles a band edge.  ``refused``: a side has fewer than ``min_samples``
  samples in the group.
* **Multiplicity.** Groups of the primary metric (default ``latency_ms``) form one family.
  ``slower``/``faster`` are decided by Holm's step-down procedure on one-sided bootstrap p-values
  (P*(log ratio <= log(1+m)) for slower) at level alpha/2 each direction, so the chance of any
  false ``slower`` in the family is <= alpha/2 (2.5% at alpha 0.05) when the bootstrap is right.
  With one group this is exactly "the 95% interval lies above 1 + m".  Secondary metrics get
  the same per-group rule without correction and never vote.
* **Smallest detectable slowdown.** With h the half-width of the interval on log scale and
  z = the Holm first-step critical value, a true slowdown d is detected with ~90% power when
  log(1+d) >= log(1+m) + h * (z + 1.2816) / 1.96.  Reported per group as ``detectable``.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

MARGIN = 0.05
ALPHA = 0.05
MIN_SAMPLES = 5
PRIMARY = "latency_ms"
N_BOOT = 2000
Z90 = 1.2815515655446004  # one-sided 90% power


# --------------------------------------------------------------------------- per-pause medians

def median_interval(values, confidence: float = 0.95) -> tuple[float, float, float]:
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


def min_n_for_median_interval(confidence: float = 0.95) -> int:
    n = 1
    while math.isnan(median_interval(np.arange(n, dtype=float), confidence)[0]):
        n += 1
    return n


# --------------------------------------------------------------------------- two-level bootstrap

def _clean(runs) -> list[np.ndarray]:
    out = []
    for r in runs:
        x = np.asarray(r, dtype=float)
        x = x[np.isfinite(x) & (x > 0)]
        if x.size:
            out.append(x)
    return out


def centre(runs) -> float:
    runs = _clean(runs)
    if not runs:
        return math.nan
    return float(np.exp(np.mean([np.log(np.median(r)) for r in runs])))


def boot_log_centre(runs, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap draws of log(centre): runs, then samples within runs (one run: samples only)."""
    runs = _clean(runs)
    n_runs = len(runs)
    if n_runs == 1:
        x = runs[0]
        return np.log(np.median(x[rng.integers(0, x.size, (n_boot, x.size))], axis=1))
    chosen = rng.integers(0, n_runs, (n_boot, n_runs))
    logmed = np.empty((n_boot, n_runs))
    for r, x in enumerate(runs):
        slots = chosen == r
        count = int(slots.sum())
        if count:
            logmed[slots] = np.log(np.median(x[rng.integers(0, x.size, (count, x.size))], axis=1))
    return logmed.mean(axis=1)


def boot_log_ratio(a_runs, b_runs, *, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return boot_log_centre(b_runs, n_boot, rng) - boot_log_centre(a_runs, n_boot, rng)


# --------------------------------------------------------------------------- verdicts

def quantity(value: float, metric: str) -> str:
    """``12.1 ms``, ``1.65 s``, or ``none`` when there is no value: the unit comes from the column
    name (``latency_ms`` -> ms), a value of 1000 ms or more is shown in seconds."""
    if value is None or not math.isfinite(value):
        return "none"
    unit = metric.rsplit("_", 1)[-1] if "_" in metric else ""
    if unit == "ms" and abs(value) >= 1000:
        value, unit = value / 1000, "s"
    text = f"{value:#.3g}" if abs(value) < 100 else f"{value:.0f}"
    return f"{text} {unit}" if unit in ("ms", "s", "us") else text


def factor(x: float) -> str:
    """A ratio in 3 significant digits, never in e-notation (``1190`` not ``1.19e+03``)."""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def both_sides(a: float, b: float, metric: str) -> str:
    """``12.1 vs 20.0 ms`` when both sides have a value, ``A 1.0 s, B none`` when one lacks it."""
    qa, qb = quantity(a, metric), quantity(b, metric)
    ua, ub = qa.partition(" ")[2], qb.partition(" ")[2]
    if "none" not in (qa, qb) and ua == ub:
        return f"{qa.partition(' ')[0]} vs {qb}"
    return f"A {qa}, B {qb}"


class GroupRow:
    """What every per-group result row shares: its key and a JSON-ready dict."""

    def key(self) -> str:
        return f"{self.model} · {self.setting} · {self.regime} · {self.metric}"  # type: ignore[attr-defined]

    def as_dict(self) -> dict:
        d = asdict(self)  # type: ignore[call-overload]
        d["ratio_ci"] = list(self.ratio_ci)  # type: ignore[attr-defined]
        return d


@dataclass
class Verdict(GroupRow):
    model: str
    setting: str
    regime: str
    metric: str
    primary: bool
    n_runs_a: int
    n_runs_b: int
    n_a: int  # samples
    n_b: int
    median_a: float  # centre (geometric mean of per-run medians)
    median_b: float
    ratio: float
    ratio_ci: tuple[float, float]
    p_slower: float  # one-sided bootstrap p for "ratio <= 1 + margin"
    p_faster: float
    p_adjusted: float  # Holm-adjusted p of the direction the ratio points to (primary family)
    detectable: float  # smallest slowdown (fraction) detected with ~90% power at this precision
    margin: float
    verdict: str  # slower | faster | no change | inconclusive | refused
    unit: str  # "runs" | "samples (one run per side)"
    note: str = ""

    # compatibility with older consumers (report/compare.py) that read these fields
    @property
    def hl_shift(self) -> float:
        return self.median_b - self.median_a

    @property
    def p_value(self) -> float:
        return self.p_adjusted

    def line(self) -> str:
        """One hyperfine-style sentence."""
        where = f"{self.model} · {self.setting} · {self.regime} · {self.metric}"
        role = "" if self.primary else " [secondary: does not vote]"
        if self.verdict == "refused":
            return (f"{where}: refused, too few samples (n={self.n_a} vs {self.n_b} samples in "
                    f"{self.n_runs_a} vs {self.n_runs_b} runs){role}")
        lo, hi = self.ratio_ci
        if self.ratio >= 1:
            head = f"B is {self.ratio:.3g}x [{lo:.3g}, {hi:.3g}] slower than A"
        else:
            head = f"B is {1 / self.ratio:.3g}x [{1 / hi:.3g}, {1 / lo:.3g}] faster than A"
        det = "∞" if not math.isfinite(self.detectable) else f"+{self.detectable:.0%}"
        return (f"{where}: {head}: {self.verdict} (n={self.n_runs_a} vs {self.n_runs_b} runs, "
                f"{self.n_a} vs {self.n_b} samples; unit: {self.unit}; band ±{self.margin:.0%}; "
                f"detects >= {det}){role}" + (f"; {self.note}" if self.note else ""))


@dataclass
class VerdictConfig:
    margin: float = MARGIN
    alpha: float = ALPHA
    min_samples: int = MIN_SAMPLES
    primary: str = PRIMARY
    per_metric: dict[str, float] = field(default_factory=dict)
    n_boot: int = N_BOOT

    def margin_for(self, metric: str) -> float:
        return self.per_metric.get(metric, self.margin)


@dataclass
class GroupData:
    model: str
    setting: str
    regime: str
    metric: str
    a_runs: list  # list of arrays, one per run
    b_runs: list
    gates: bool = True  # part of the primary family when metric is primary


def _raw_verdict(g: GroupData, cfg: VerdictConfig, seed: int) -> Verdict:
    a, b = _clean(g.a_runs), _clean(g.b_runs)
    m = cfg.margin_for(g.metric)
    n_a, n_b = int(sum(x.size for x in a)), int(sum(x.size for x in b))
    primary = g.gates and g.metric == cfg.primary
    unit = "runs" if len(a) > 1 and len(b) > 1 else \
        "samples (one run per side: between-run variance is not in the interval)" if len(a) == 1 and len(b) == 1 \
        else "runs on one side, samples on the other (one run: its between-run variance is not in the interval)"
    ca, cb = centre(a), centre(b)
    ratio = cb / ca if ca > 0 else math.nan
    nan2 = (math.nan, math.nan)
    base = dict(model=g.model, setting=g.setting, regime=g.regime, metric=g.metric, primary=primary,
                n_runs_a=len(a), n_runs_b=len(b), n_a=n_a, n_b=n_b, median_a=ca, median_b=cb, ratio=ratio,
                margin=m, unit=unit)
    if n_a < cfg.min_samples or n_b < cfg.min_samples:
        return Verdict(**base, ratio_ci=nan2, p_slower=math.nan, p_faster=math.nan, p_adjusted=math.nan,
                       detectable=math.nan, verdict="refused",
                       note=f"need {cfg.min_samples} samples per side")
    seed_g = seed + zlib.crc32("|".join((g.model, g.setting, g.regime, g.metric)).encode()) % 65536
    draws = boot_log_ratio(a, b, n_boot=cfg.n_boot, seed=seed_g)
    lm = math.log1p(m)
    lo, hi = np.percentile(draws, [100 * cfg.alpha / 2, 100 * (1 - cfg.alpha / 2)])
    p_slower = (1 + int(np.sum(draws <= lm))) / (draws.size + 1)
    p_faster = (1 + int(np.sum(draws >= -lm))) / (draws.size + 1)
    v = "slower" if lo > lm else "faster" if hi < -lm else "no change" if (lo >= -lm and hi <= lm) \
        else "inconclusive"
    note = ""
    if min(len(a), len(b)) == 2:
        note = "2 runs on a side: between-run variance is poorly estimated"
    return Verdict(**base, ratio_ci=(float(math.exp(lo)), float(math.exp(hi))), p_slower=p_slower,
                   p_faster=p_faster, p_adjusted=min(p_slower, p_faster), detectable=math.nan,
                   verdict=v, note=note)


def holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    k = len(pvalues)
    order = sorted(range(k), key=lambda i: pvalues[i])
    adj = [1.0] * k
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * pvalues[i]))
        adj[i] = running
    return adj


def decide_groups(groups: list[GroupData], cfg: VerdictConfig, *, seed: int = 0) -> list[Verdict]:
    """Verdict per group; Holm across the primary family for slower / faster."""
    out = [_raw_verdict(g, cfg, seed) for g in groups]
    family = [i for i, v in enumerate(out) if v.primary and v.verdict != "refused"]
    k = max(len(family), 1)
    side = cfg.alpha / 2
    adj_slow = holm([out[i].p_slower for i in family])
    adj_fast = holm([out[i].p_faster for i in family])
    z_first = stats.norm.ppf(1 - side / k)
    z_single = stats.norm.ppf(1 - side)
    for j, i in enumerate(family):
        v = out[i]
        v.p_adjusted = adj_slow[j] if v.ratio >= 1 else adj_fast[j]
        if v.verdict in ("slower", "faster"):
            adj = adj_slow[j] if v.verdict == "slower" else adj_fast[j]
            if adj >= side:
                v.note = "; ".join(x for x in (v.note, f"{v.verdict} before correction, not after Holm "
                                                        f"over {k} groups") if x)
                v.verdict = "inconclusive"
    for v in out:
        if v.verdict == "refused":
            continue
        half = (math.log(v.ratio_ci[1]) - math.log(v.ratio_ci[0])) / 2
        z = z_first if v.primary else z_single
        se = half / stats.norm.ppf(1 - cfg.alpha / 2)
        v.detectable = math.exp(math.log1p(v.margin) + se * (z + Z90)) - 1
    return out


def summary_counts(verdicts: list[Verdict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return counts
