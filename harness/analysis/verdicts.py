"""Verdicts you can trust: baseline (A) vs candidate (B), group by group, with the run as the unit.

The rules (docs/statistics.md states them for users, with their simulated error rates):

* **Statistic.** Per run and group, the run's *level* is the log of its median (a group that pools
  several pauses: the mean over those pauses of the log medians, so a change at any pause moves it).
  Per side the centre is exp(mean of the run levels); the ratio is centre(B) / centre(A), > 1 means
  B is slower.  Within-run noise is inside each run's level, so it is counted once.
* **Interval.** A t interval for the difference of mean run levels (log ratio):
  Welch's with Welch-Satterthwaite df when both sides have >= 2 runs; a pooled-variance t (equal
  between-run spread assumed) when one side has one run; a pooled t with the history's degrees of
  freedom added when earlier runs of the baseline (``history_runs``) give the between-run variance;
  the same pooled t with no separate history batch when the baseline is a window of the history
  archive (``VerdictConfig.pool_spread``, ``--baseline history:<series>``: each run counted once).
  With one run per side and no history there is no between-run variance: the group is
  ``inconclusive`` (never ``slower`` or ``no change``) and says how many runs would decide it.
* **Margin.** An equivalence band [1/(1+m), 1+m] fixed before looking at data (default m = 5%).
  ``no change``: the interval lies inside the band.  ``slower`` depends on the rule
  (``slower_rule``): ``margin`` (default): the interval lies above 1+m; ``zero``: the interval lies
  above 1 (and not inside the band).  ``faster`` mirrors it; else ``inconclusive``.
  ``refused``: a side has fewer than ``min_samples`` samples in the group.
* **Multiplicity.** The gating groups of the primary metric form one family; they do not overlap
  (harness.analysis.compare builds them so).  ``slower``/``faster`` use Holm's step-down procedure on
  the one-sided t p-values at level alpha/2 each direction; ``no change`` needs every group's interval
  inside the band (intersection-union: no correction needed).  Reported groups and secondary metrics
  get the per-group rule without correction and never vote.
* **Power.** ``detectable``: the smallest slowdown found with 90% power at this precision;
  ``runs_needed``: runs per side that would find a ``target`` slowdown (default +10%) with 90% power
  at the spread these runs show (``runs_per_side`` below, a t-based iteration).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from scipy import stats

MARGIN = 0.05
ALPHA = 0.05
MIN_SAMPLES = 5
PRIMARY = "latency_ms"
N_BOOT = 2000
TARGET = 0.10  # the slowdown the runs-needed figure is sized for
POWER = 0.90
SLOWER_RULES = ("margin", "zero")
DETECTABLE_CAP = 1.0  # above +100% a "detects >=" figure says nothing: worded instead
MAX_RUNS_SHOWN = 1000

# one run's samples of a group: an array of samples, or one array per pooled pause (strata)
RunSamples: TypeAlias = "np.ndarray | Sequence[float] | Sequence[np.ndarray] | Sequence[Sequence[float]]"


# --------------------------------------------------------------------------- per-pause medians

# --------------------------------------------------------------------------- runs and their levels

def _positive(x: npt.ArrayLike) -> np.ndarray:
    x = np.asarray(x, dtype=float).ravel()
    return x[np.isfinite(x) & (x > 0)]


def _is_strata(run: RunSamples) -> bool:
    """A run given as a list of arrays (one per pause) rather than one array of samples."""
    return isinstance(run, (list, tuple)) and len(run) > 0 and isinstance(run[0], (np.ndarray, list, tuple))


def run_level(run: RunSamples) -> tuple[float, int]:
    """(log level, samples) of one run: log median, or the mean of the strata's log medians."""
    strata = [_positive(s) for s in run] if _is_strata(run) else [_positive(run)]
    strata = [s for s in strata if s.size]
    if not strata:
        return math.nan, 0
    return float(np.mean([np.log(np.median(s)) for s in strata])), int(sum(s.size for s in strata))


def run_levels(runs: Sequence[RunSamples]) -> tuple[np.ndarray, int]:
    """Per-run log levels of the runs that have samples, and their total samples."""
    pairs = [run_level(r) for r in runs]
    pairs = [(y, n) for y, n in pairs if n]
    return np.array([y for y, _ in pairs], dtype=float), int(sum(n for _, n in pairs))


def _clean(runs: Sequence[RunSamples]) -> list[np.ndarray]:
    out = []
    for r in runs:
        x = np.concatenate([_positive(s) for s in r]) if _is_strata(r) else _positive(r)
        if x.size:
            out.append(x)
    return out


def centre(runs: Sequence[RunSamples]) -> float:
    levels, _ = run_levels(runs)
    return float(np.exp(np.mean(levels))) if levels.size else math.nan


# --------------------------------------------------------------------------- two-level bootstrap
# (kept for the idle report's within-run ratios, harness.analysis.idle; the gate no longer uses it:
# with 2 runs per side its run level has three atoms and its 95% interval covers ~67%)

def boot_log_centre(runs: Sequence[RunSamples], n_boot: int, rng: np.random.Generator) -> np.ndarray:
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


def boot_log_ratio(a_runs: Sequence[RunSamples], b_runs: Sequence[RunSamples], *, n_boot: int = N_BOOT,
                   seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return boot_log_centre(b_runs, n_boot, rng) - boot_log_centre(a_runs, n_boot, rng)


# --------------------------------------------------------------------------- the run-level t interval

@dataclass
class Spread:
    """The between-run spread behind an interval: standard error of the log ratio, its df, the
    pooled sd of one run's level, and the method's name."""
    diff: float  # mean level B - mean level A (log ratio)
    se: float  # inf when no between-run variance is known
    df: float
    sd_run: float  # nan when unknown
    method: str


def _ss(y: np.ndarray) -> float:
    return float(np.sum((y - y.mean()) ** 2)) if y.size else 0.0


def history_variance(history_levels: list[np.ndarray]) -> tuple[float, float]:
    """Pooled between-run variance of earlier baseline runs (each batch around its own mean): (var, df)."""
    batches = [y for y in history_levels if y.size >= 2]
    df = float(sum(y.size - 1 for y in batches))
    return (sum(_ss(y) for y in batches) / df, df) if df else (math.nan, 0.0)


def spread(ya: np.ndarray, yb: np.ndarray, history: tuple[float, float] = (math.nan, 0.0), *,
           pool: bool = False) -> Spread:
    """Standard error of mean(yb) - mean(ya) with the run as the unit (see the module doc).
    ``pool``: the baseline's runs are themselves its history (``--baseline history:<series>``): the
    pooled t of the history path with no separate history batch, each run counted once."""
    na, nb = ya.size, yb.size
    diff = float(yb.mean() - ya.mean())
    var_h, df_h = history
    if df_h > 0 or (pool and na >= 2 and nb >= 1):
        df = (na - 1) + (nb - 1) + df_h
        s2 = (_ss(ya) + _ss(yb) + (var_h * df_h if df_h > 0 else 0.0)) / df
        return Spread(diff, math.sqrt(s2 * (1 / na + 1 / nb)), df, math.sqrt(s2),
                      f"pooled t with the baseline history (df {df:g})" if df_h > 0 else
                      f"pooled t over the history window and the candidate runs (df {df:g})")
    if na >= 2 and nb >= 2:
        va, vb = ya.var(ddof=1) / na, yb.var(ddof=1) / nb
        se2 = va + vb
        df = se2 ** 2 / (va ** 2 / (na - 1) + vb ** 2 / (nb - 1)) if se2 > 0 else float(na + nb - 2)
        sd = math.sqrt((_ss(ya) + _ss(yb)) / (na + nb - 2))
        return Spread(diff, math.sqrt(se2), df, sd, f"Welch t on per-run log medians (df {df:.1f})")
    if na + nb >= 3:
        df = float(na + nb - 2)
        sd = math.sqrt((_ss(ya) + _ss(yb)) / df)
        return Spread(diff, sd * math.sqrt(1 / na + 1 / nb), df, sd,
                      f"t with one run on a side, equal between-run spread assumed (df {df:g})")
    return Spread(diff, math.inf, 0.0, math.nan, "one run per side: no between-run variance")


def t_quantile(p: float, df: float) -> float:
    return float(stats.norm.ppf(p)) if not math.isfinite(df) else float(stats.t.ppf(p, df))


def runs_per_side(sd_run: float, change: float, *, margin: float = MARGIN, alpha_one_sided: float = ALPHA / 2,
                  power: float = POWER, rule: str = "margin", extra_df: float = 0.0, limit: int = 100000) -> int | None:
    """Fewest runs per side for which a true slowdown ``change`` (0.10 = +10%) is called ``slower``
    with probability >= ``power``: n = 2 sd^2 (t(1-a, df) + t(power, df))^2 / delta^2 with
    df = 2n - 2 + extra_df, delta = log(1+change) - log(1+margin) (rule margin) or log(1+change)
    (rule zero).  None when the change cannot be detected under the rule (at or inside the band)."""
    delta = math.log1p(change) - (math.log1p(margin) if rule == "margin" else 0.0)
    if delta <= 0 or not math.isfinite(sd_run):
        return None
    if sd_run == 0:
        return 2
    z = stats.norm.ppf(1 - alpha_one_sided) + stats.norm.ppf(power)
    start = max(2, math.floor(2 * sd_run ** 2 * z ** 2 / delta ** 2))  # the normal answer; t needs >= it
    for n in range(start, limit + 1):
        df = 2 * n - 2 + extra_df
        need = 2 * sd_run ** 2 * (t_quantile(1 - alpha_one_sided, df) + t_quantile(power, df)) ** 2 / delta ** 2
        if n >= need:
            return n
    return None


# --------------------------------------------------------------------------- wording

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
    """A ratio in 3 significant digits with its trailing zeros (``1.00``, never ``1``), never in
    e-notation (``1190`` not ``1.19e+03``)."""
    if not math.isfinite(x):
        return "∞" if x > 0 else "–"
    return f"{x:#.3g}".rstrip(".") if abs(x) < 1000 else f"{x:.0f}"


def ratio_words(ratio: float, lo: float, hi: float) -> str:
    """The one convention everywhere: ``B/A 0.871 [0.384, 4.97], B faster by 13%`` (B/A < 1 is
    faster), ``B/A 3.80 [...], B slower: 3.80 times A``; an unknown interval is ``[–]``."""
    ci = f" [{factor(lo)}, {factor(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else " [no interval]"
    head = f"B/A {factor(ratio)}{ci}"
    if not math.isfinite(ratio):
        return head
    if ratio >= 2:
        return f"{head}, B slower: {factor(ratio)} times A"
    if ratio > 1 and f"{ratio - 1:.0%}" != "0%":
        return f"{head}, B slower by {ratio - 1:.0%}"
    if ratio < 1 and f"{1 - ratio:.0%}" != "0%":
        return f"{head}, B faster by {1 - ratio:.0%}"
    return f"{head}, B as fast as A"


def detectable_words(d: float) -> str:
    if not math.isfinite(d) or d > DETECTABLE_CAP:
        return "no slowdown below 2x detectable with this data"
    return f"detects >= +{d:.0%}"


def runs_needed_words(v: Verdict) -> str:
    """What would decide an undecided group: the runs per side, or what is missing to size them."""
    if v.runs_needed is None:
        if not math.isfinite(getattr(v, "sd_run", math.nan)):
            return "needs >= 2 runs per side (or --history runs) for a between-run spread; lbench gate-plan sizes it"
        return f"+{v.target:.0%} is inside the band: not a slowdown to size runs for"
    if v.runs_needed > MAX_RUNS_SHOWN:
        return f"more than {MAX_RUNS_SHOWN} runs per side would be needed for +{v.target:.0%} at this spread"
    return (f"{v.runs_needed} runs per side would detect +{v.target:.0%} with {POWER:.0%} power "
            f"at this spread (sd {v.sd_run:.3g})")


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
    primary: bool  # votes: a gating group of the primary metric
    n_runs_a: int
    n_runs_b: int
    n_a: int  # samples
    n_b: int
    median_a: float  # centre: exp(mean of per-run log levels)
    median_b: float
    ratio: float
    ratio_ci: tuple[float, float]
    p_slower: float  # one-sided t p for "ratio <= the slower rule's bound"
    p_faster: float
    p_adjusted: float  # Holm-adjusted p of the direction the ratio points to (gating family)
    detectable: float  # smallest slowdown (fraction) detected with ~90% power at this precision
    margin: float
    verdict: str  # slower | faster | no change | inconclusive | refused
    unit: str  # how the interval was made (the run is the unit)
    note: str = ""
    role: str = "gating"  # gating | reported | secondary metric
    sd_run: float = math.nan  # between-run sd of one run's log level (pooled)
    df: float = math.nan
    se_log: float = math.nan  # standard error of the log ratio (inf: unknown)
    runs_needed: int | None = None  # runs per side to detect `target` with 90% power at sd_run
    target: float = TARGET
    rule: str = "margin"
    confidence: float = 1 - ALPHA  # of ratio_ci (ab's looks use their own level)

    @property
    def p_value(self) -> float:
        return self.p_adjusted

    def role_words(self) -> str:
        return "" if self.role == "gating" else f" [{self.role}: does not vote]"

    def line(self) -> str:
        """One sentence: where, B/A with its interval, the verdict, the evidence behind it."""
        where = f"{self.model} · {self.setting} · {self.regime} · {self.metric}"
        if self.verdict == "refused":
            return (f"{where}: refused, too few samples (n={self.n_a} vs {self.n_b} samples in "
                    f"{self.n_runs_a} vs {self.n_runs_b} runs){self.role_words()}")
        lo, hi = self.ratio_ci
        tail = f"; {runs_needed_words(self)}" if self.verdict == "inconclusive" and self.primary else ""
        return (f"{where}: {ratio_words(self.ratio, lo, hi)}: {self.verdict} (n={self.n_runs_a} vs "
                f"{self.n_runs_b} runs, {self.n_a} vs {self.n_b} samples; {self.unit}; band ±{self.margin:.0%}; "
                f"{detectable_words(self.detectable)}{tail}){self.role_words()}"
                + (f"; {self.note}" if self.note else ""))


@dataclass
class VerdictConfig:
    margin: float = MARGIN
    alpha: float = ALPHA
    min_samples: int = MIN_SAMPLES
    primary: str = PRIMARY
    per_metric: dict[str, float] = field(default_factory=dict)
    n_boot: int = N_BOOT  # unused by the t rule; kept for callers that set it
    slower_rule: str = "margin"  # margin | zero (docs/statistics.md: both rules' error rates)
    target: float = TARGET
    pool_spread: bool = False  # the baseline is a history window: pooled t over both sides (spread(pool=True))

    def margin_for(self, metric: str) -> float:
        return self.per_metric.get(metric, self.margin)


@dataclass
class GroupData:
    model: str
    setting: str
    regime: str
    metric: str
    a_runs: Sequence[RunSamples]  # one entry per run: an array of samples, or a list of arrays (one per pooled pause)
    b_runs: Sequence[RunSamples]
    gates: bool = True  # votes when the metric is primary; False: reported only
    history_runs: Sequence[RunSamples] = field(default_factory=list)  # earlier baseline runs: the between-run variance
    note: str = ""


def _role(g: GroupData, cfg: VerdictConfig) -> str:
    if g.metric != cfg.primary:
        return "secondary metric"
    return "gating" if g.gates else "reported"


def _raw_verdict(g: GroupData, cfg: VerdictConfig) -> Verdict:
    ya, n_a = run_levels(g.a_runs)
    yb, n_b = run_levels(g.b_runs)
    m = cfg.margin_for(g.metric)
    role = _role(g, cfg)
    ca = float(np.exp(ya.mean())) if ya.size else math.nan
    cb = float(np.exp(yb.mean())) if yb.size else math.nan
    ratio = cb / ca if ca > 0 else math.nan
    nan2 = (math.nan, math.nan)
    base: dict[str, Any] = dict(model=g.model, setting=g.setting, regime=g.regime, metric=g.metric, primary=role == "gating",
                n_runs_a=int(ya.size), n_runs_b=int(yb.size), n_a=n_a, n_b=n_b, median_a=ca, median_b=cb,
                ratio=ratio, margin=m, role=role, target=cfg.target, rule=cfg.slower_rule, confidence=1 - cfg.alpha)
    if n_a < cfg.min_samples or n_b < cfg.min_samples:
        return Verdict(**base, ratio_ci=nan2, p_slower=math.nan, p_faster=math.nan, p_adjusted=math.nan,
                       detectable=math.nan, verdict="refused", unit="refused",
                       note="; ".join(x for x in (f"need {cfg.min_samples} samples per side", g.note) if x))
    yh = run_levels(g.history_runs)[0] if g.history_runs else np.array([])
    hist = history_variance([yh]) if yh.size else (math.nan, 0.0)
    s = spread(ya, yb, hist, pool=cfg.pool_spread)
    lm = math.log1p(m)
    bound = lm if cfg.slower_rule == "margin" else 0.0
    notes = [g.note] if g.note else []
    if not math.isfinite(s.se):
        lo, hi, p_slow, p_fast, v = -math.inf, math.inf, 1.0, 1.0, "inconclusive"
    elif s.se == 0:
        lo = hi = s.diff
        p_slow = 0.0 if s.diff > bound else 1.0
        p_fast = 0.0 if s.diff < -bound else 1.0
        v = _classify(lo, hi, lm, bound)
    else:
        t = t_quantile(1 - cfg.alpha / 2, s.df)
        lo, hi = s.diff - t * s.se, s.diff + t * s.se
        p_slow = float(stats.t.sf((s.diff - bound) / s.se, s.df))
        p_fast = float(stats.t.cdf((s.diff + bound) / s.se, s.df))
        v = _classify(lo, hi, lm, bound)
    drift = history_drift(yh, ya)
    if drift:
        notes.append(drift)
    if min(ya.size, yb.size) == 2 and not hist[1] and not cfg.pool_spread:
        notes.append("2 runs on a side: the interval is wide (few df)")
    return Verdict(**base, ratio_ci=(_exp(lo), _exp(hi)), p_slower=p_slow, p_faster=p_fast,
                   p_adjusted=min(p_slow, p_fast), detectable=math.nan, verdict=v, unit=s.method,
                   note="; ".join(notes), sd_run=float(s.sd_run), df=float(s.df), se_log=float(s.se))


def history_drift(yh: np.ndarray, ya: np.ndarray, alpha: float = 0.01) -> str:
    """A note when the baseline's level has moved away from its history's (Welch, two-sided at
    ``alpha``): only the history's spread is used, but a moved level says the machine changed."""
    if yh.size < 2 or ya.size < 1:
        return ""
    s = spread(yh, ya)
    if not math.isfinite(s.se) or s.se == 0:
        return ""
    p = 2 * float(stats.t.sf(abs(s.diff) / s.se, s.df))
    if p >= alpha:
        return ""
    return (f"the baseline's level differs from its history's by a factor {factor(math.exp(s.diff))} "
            f"(p={p:.2g}): the machine or build drifted; the history's spread is still used")


def _exp(x: float) -> float:
    """exp that says infinity instead of overflowing (a look at a tiny level has a huge t quantile)."""
    return math.exp(x) if x < 700 else math.inf


def _classify(lo: float, hi: float, lm: float, bound: float) -> str:
    if lo >= -lm and hi <= lm:
        return "no change"
    if lo > bound:
        return "slower"
    if hi < -bound:
        return "faster"
    return "inconclusive"


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
    """Verdict per group; Holm across the gating family for slower / faster.  (``seed`` is kept for
    callers: the t rule draws nothing.)"""
    if cfg.slower_rule not in SLOWER_RULES:
        raise ValueError(f"slower_rule must be one of {SLOWER_RULES}, got {cfg.slower_rule!r}")
    out = [_raw_verdict(g, cfg) for g in groups]
    family = [i for i, v in enumerate(out) if v.primary and v.verdict != "refused"]
    k = max(len(family), 1)
    side = cfg.alpha / 2
    adj_slow = holm([out[i].p_slower for i in family])
    adj_fast = holm([out[i].p_faster for i in family])
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
        a1 = side / k if v.primary else side
        bound = math.log1p(v.margin) if v.rule == "margin" else 0.0
        se = v.se_log
        if math.isfinite(se):
            v.detectable = _exp(bound + se * (t_quantile(1 - a1, v.df) + t_quantile(POWER, v.df))) - 1
        else:
            v.detectable = math.inf
        extra = max(0.0, v.df - (v.n_runs_a + v.n_runs_b - 2)) if "history" in v.unit else 0.0
        v.runs_needed = runs_per_side(v.sd_run, v.target, margin=v.margin, alpha_one_sided=a1, rule=v.rule,
                                      extra_df=extra)
    return out


def summary_counts(verdicts: list[Verdict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return counts
