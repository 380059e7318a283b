"""Change points in a series across builds, found by Apache Otava (E-divisive, Hunter's split/merge).

``otava.analysis.compute_change_points`` (Matteson and James' E-divisive means in sliding windows,
then Fleming et al.'s merge step keeping points whose two-sided t-test p-value is at most
``MAX_PVALUE``) is run on one machine's series of one (model, setting, metric), one point per run,
ordered by engine build and then by start time.  Each change point is stated with:

- the builds (and run ids) either side: the last run before the change and the first after,
  the change placed by least squares between its neighbouring change points (``best_split``:
  Otava says whether there is a change, and its p-value; its position on runs of equal values is
  not to be trusted);
- its size: the ratio of the geometric means of the segments after and before it (up to the
  neighbouring change points), with a 95% interval (Welch's t on log values); for a series on a
  linear scale (``Series.scale``: a share of failed requests, which may be 0) the difference of the
  segments' means with Welch's interval on the values; a change whose interval holds 1 (0 for a
  difference: no change) is not reported, whatever Otava's p-value (on long series of few
  distinct values its t-test can call a 2% wobble significant), nor one with a single run on
  either side (an outlier, not a change: a new step is reported from its second run on);
- what to run to find the build: ``lbench bisect --gate -m MODEL --from A --to B`` for idle
  series, ``lbench bisect CLAIM --from A --to B`` for swap series with a claim that checks that
  behaviour (``Series.claim``); for a swap series without one (load time: ``lbench bisect`` decides
  claims and idle gates, not a storm's latency) the storm on both builds, ``lbench swap --build A
  --build B``, which is not a bisect; none when both sides ran the same build (the change is the
  machine's, not the engine's).

False change points on flat series (A/A, this machine's run-to-run noise) are measured by
``false_change_rate`` (docs/history.md states the figure and how it was obtained).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd
from harness.history.series import SERIES

MAX_PVALUE = 0.001  # Otava's default significance for the merge step
WINDOW = 50  # Otava's default sliding window (points)
MIN_MAGNITUDE = 0.0  # no size floor: significance alone decides
MIN_POINTS = 4  # fewer points than this: no change point is looked for
MIN_SEGMENT = 2  # runs on each side of a reported change (one run alone has no spread)


class OtavaParams(TypedDict, total=False):
    """What ``change_indices`` passes on to Otava (each defaults to the constant above)."""

    max_pvalue: float
    window: int
    min_magnitude: float


@dataclass(frozen=True)
class ChangePoint:
    series: str
    machine_id: str
    machine_label: str
    model: str
    setting: str
    index: int  # position of the first point after the change
    build_before: int | None
    build_after: int | None
    run_before: str
    run_after: str
    started_after: str | None
    mean_before: float
    mean_after: float
    ratio: float  # the size: after / before (geometric means); after - before on a linear scale
    ratio_lo: float
    ratio_hi: float
    pvalue: float
    n_before: int
    n_after: int
    command: str | None  # what to run to find the build; None when no build range lies between the sides
    scale: str = "log"  # linear: ratio, ratio_lo and ratio_hi are differences of means

    @property
    def direction(self) -> str:
        return "up" if self.ratio > (0 if self.scale == "linear" else 1) else "down"

    @property
    def is_bisect(self) -> bool:
        """Whether ``command`` is a bisect (``lbench trend --bisect`` runs only those)."""
        return bool(self.command) and (self.command or "").startswith("lbench bisect")

    def size_text(self, unit: str = "") -> str:
        """"x1.234 [1.100, 1.300]" for a ratio; "-75.0 pp [-88.2, -61.8]" for a difference (pp: percentage
        points, when the unit is %)."""
        if self.scale != "linear":
            return f"x{self.ratio:.3f} [{self.ratio_lo:.3f}, {self.ratio_hi:.3f}]"
        unit = "pp" if unit == "%" else unit
        unit = f" {unit}" if unit else ""
        return f"{self.ratio:+.3g}{unit} [{self.ratio_lo:+.3g}, {self.ratio_hi:+.3g}]"

    def short_size(self, unit: str = "") -> str:
        """The size alone, for a plot's label."""
        return f"x{self.ratio:.2f}" if self.scale != "linear" else f"{self.ratio:+.3g}{' pp' if unit == '%' else ''}"

    def sentence(self, unit: str = "") -> str:
        size = self.size_text(unit)
        unit = f" {unit}" if unit else ""
        where = (f"between build {self.build_before} (run {self.run_before}) and build {self.build_after} "
                 f"(run {self.run_after})" if self.build_before != self.build_after else
                 f"within build {self.build_after}, between runs {self.run_before} and {self.run_after} "
                 "(the machine changed, not the engine)")
        return (f"{self.series} of {self.model} [{self.setting}] on {self.machine_label} went {self.direction} "
                f"{where}: {self.mean_before:.4g}{unit} -> {self.mean_after:.4g}{unit}, {size} "
                f"({_p_text(self.pvalue)}, {self.n_before} runs before, "
                f"{self.n_after} after)")


def _p_text(pvalue: float) -> str:
    """Otava's p-value as text; its t-test gives exactly 0 between runs of equal values."""
    return "p<1e-15" if pvalue < 1e-15 else f"p={pvalue:.2g}"


def change_indices(values: Iterable[float], *, max_pvalue: float = MAX_PVALUE, window: int = WINDOW,
                   min_magnitude: float = MIN_MAGNITUDE) -> list[tuple[int, float]]:
    """(index of the first point after each change, its p-value), by Otava."""
    from otava.analysis import compute_change_points

    x = [float(v) for v in values]
    if len(x) < MIN_POINTS:
        return []
    points, _ = compute_change_points(x, window_len=window, max_pvalue=max_pvalue, min_magnitude=min_magnitude)
    return [(int(p.index), float(p.stats.pvalue)) for p in points if 0 < p.index < len(x)]


def reported_changes(values: npt.ArrayLike, scale: str = "log", trials: npt.ArrayLike | None = None,
                     **params: Unpack[OtavaParams]) -> list[tuple[int, float, float, float, float, int, int]]:
    """Otava's change points that lbench reports: (index, p-value, size, lo, hi, n before, n after).

    Each is placed by least squares between its neighbours (``best_split``) and must have
    ``MIN_SEGMENT`` runs on each side and a size interval that excludes no change (a ratio of 1; on
    a linear scale a difference of 0).  One that fails is dropped, the weakest first (the smallest
    difference for its standard error), and its neighbours are placed again, until every one left
    stands: a spurious cut of Otava's (one run off a level) must not split the real step's segment.

    ``trials``: for a share in percent (``swap_failed_pct``), each point's number of requests; a
    segment's variance is then at least the binomial variance of its pooled share, so runs of equal
    shares (0, 0, 0) are not taken as exact (3 of 60 failed against 0 of 60 is no change)."""
    values = np.asarray(values, dtype=float)
    trials = None if trials is None else np.asarray(trials, dtype=float)
    none = 0.0 if scale == "linear" else 1.0

    def interval(start: int, index: int, stop: int) -> tuple[float, float, float]:
        if scale != "linear":
            return _ratio_interval(values[start:index], values[index:stop])
        if trials is None:
            return _difference_interval(values[start:index], values[index:stop])
        return _share_interval(values[start:index], values[index:stop], trials[start:index], trials[index:stop])

    scaled = values if scale == "linear" else np.log(values)
    found = change_indices(values, **params)
    indices: list[int] = [i for i, _ in found]
    pvalues: list[float] = [p for _, p in found]  # Otava's, kept with its change as it is placed
    while True:
        cuts = [0] + indices + [len(values)]
        for j in range(1, len(indices) + 1):
            indices[j - 1] = cuts[j] = best_split(scaled, cuts[j - 1], cuts[j + 1], indices[j - 1])
        rows: list[tuple[int, float, float, float, float, int, int]] = []
        strength: dict[int, float] = {}  # the failing ones' strength, by position
        for j, (index, pvalue) in enumerate(zip(indices, pvalues), start=1):
            start, stop = cuts[j - 1], cuts[j + 1]
            if min(index - start, stop - index) < MIN_SEGMENT:  # one run apart is an outlier, not a change
                strength[j - 1] = 0.0
                continue
            size, lo, hi = interval(start, index, stop)
            if lo <= none <= hi and (lo < hi or size == none):  # its own interval says "no change"
                strength[j - 1] = _strength(scaled[start:index], scaled[index:stop])
                continue
            rows.append((index, pvalue, size, lo, hi, index - start, stop - index))
        if not strength:
            return rows
        weakest = min(strength, key=lambda j: strength[j])
        del indices[weakest], pvalues[weakest]


def _strength(a: np.ndarray, b: np.ndarray) -> float:
    """|mean(b) - mean(a)| over its standard error (infinite for a shift between two constant runs)."""
    d, va, vb = _mean_difference(a, b)
    se = math.sqrt(va + vb)
    return abs(d) / se if se > 0 else (math.inf if d != 0 else 0.0)


def _mean_difference(a: np.ndarray, b: np.ndarray, floor_a: float = 0.0,
                     floor_b: float = 0.0) -> tuple[float, float, float]:
    """mean(b) - mean(a) and each mean's variance (at least its ``floor``)."""
    va = max(a.var(ddof=1) / a.size if a.size > 1 else 0.0, floor_a)
    vb = max(b.var(ddof=1) / b.size if b.size > 1 else 0.0, floor_b)
    return float(b.mean() - a.mean()), va, vb


def best_split(x: np.ndarray, start: int, stop: int, found: int) -> int:
    """Where between its neighbouring change points (``x[start:stop]``) a change Otava found is
    placed: the split with the least squared error around the two segments' means (the position of
    one mean shift by least squares), each side at least ``MIN_SEGMENT`` long; the nearest to
    Otava's own index on a tie.  Otava decides whether there is a change; its position is this,
    because Otava's t-test takes a stretch of equal values (a share of failed requests of 0, a
    count of children) as infinitely precise and can cut one run off a level (95, 95 | 100, 25, 5)
    ahead of the real step."""
    seg = np.asarray(x[start:stop], dtype=float)
    n = seg.size
    if n < 2 * MIN_SEGMENT:
        return found
    c1, c2 = np.cumsum(seg), np.cumsum(seg ** 2)
    k = np.arange(MIN_SEGMENT, n - MIN_SEGMENT + 1)  # the left part's length
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (n - k)
    sse = left + right
    best = np.flatnonzero(sse <= sse.min() + 1e-9 * max(1.0, abs(float(sse.min()))))
    return int(start + k[best[np.argmin(np.abs(start + k[best] - found))]])


def _welch(a: np.ndarray, b: np.ndarray, floor_a: float = 0.0,
           floor_b: float = 0.0) -> tuple[float, float, float]:
    """Welch's 95% interval of mean(b) - mean(a): (difference, lo, hi); each mean's variance at least
    its ``floor``."""
    from scipy import stats

    d, va, vb = _mean_difference(a, b, floor_a, floor_b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    dof_num = (va + vb) ** 2
    dof_den = (va ** 2 / (a.size - 1) if a.size > 1 else 0) + (vb ** 2 / (b.size - 1) if b.size > 1 else 0)
    dof = dof_num / dof_den if dof_den > 0 else 1.0
    t = float(stats.t.ppf(0.975, max(dof, 1.0)))
    return d, d - t * se, d + t * se


def _ratio_interval(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    """The ratio of geometric means after / before with its interval (Welch on log values)."""
    d, lo, hi = _welch(np.log(before), np.log(after))
    return float(np.exp(d)), float(np.exp(lo)), float(np.exp(hi))


def _difference_interval(before: np.ndarray, after: np.ndarray) -> tuple[float, float, float]:
    """mean(after) - mean(before) with Welch's interval (a linear-scale series)."""
    return _welch(np.asarray(before, dtype=float), np.asarray(after, dtype=float))


def _share_interval(before: np.ndarray, after: np.ndarray, n_before: np.ndarray,
                    n_after: np.ndarray) -> tuple[float, float, float]:
    """The difference of two segments' mean shares (percent), Welch's interval with each mean's
    variance at least the binomial variance of the segment's pooled share over its requests
    (Agresti and Caffo's adjusted share, so that a segment of 0 % still has a spread)."""
    def floor(pct: np.ndarray, n: np.ndarray) -> float:  # Agresti-Caffo: one failure and one success added
        total = float(np.nansum(n))
        share = (float(np.nansum(pct / 100.0 * n)) + 1) / (total + 2)
        return 100.0 ** 2 * share * (1 - share) / (total + 2)
    d, lo, hi = _welch(np.asarray(before, dtype=float), np.asarray(after, dtype=float),
                       floor(before, n_before), floor(after, n_after))
    return d, max(lo, -100.0), min(hi, 100.0)  # a difference of two shares lies within 100 points


def bisect_command(series: str, model: str, before: int | None, after: int | None) -> str | None:
    if before is None or after is None or before == after:
        return None
    lo, hi = sorted((before, after))
    spec = SERIES.get(series)
    if spec is not None and spec.claim:  # a swap series: the claim that checks that behaviour
        return f"lbench bisect {spec.claim} --from {lo} --to {hi}"
    if spec is not None and spec.measure:  # nothing bisects it: measure both builds side by side
        return spec.measure.format(lo=lo, hi=hi)
    return f"lbench bisect --gate -m {shlex.quote(model)} --from {lo} --to {hi}"


def scale_of(points: pd.DataFrame) -> str:
    """The scale of the series these rows belong to (``Series.scale``; log when unknown)."""
    spec = SERIES.get(str(points["series"].iloc[0])) if len(points) else None
    return spec.scale if spec is not None else "log"


def usable(values: np.ndarray, scale: str) -> np.ndarray:
    """Which values a change point is looked for among: known, and positive on a log scale (>= 0 on
    a linear one, where a share of 0 is a value)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return ~np.isnan(values) & ((values >= 0) if scale == "linear" else (values > 0))


def detect(points: pd.DataFrame, **params: Unpack[OtavaParams]) -> list[ChangePoint]:
    """Change points of one series' rows (``harness/history/series.py`` columns) for one machine,
    model and setting, ordered by build then start time."""
    scale = scale_of(points)
    pts = points[usable(points["value"].to_numpy(dtype=float), scale)]
    pts = pts.sort_values(["build", "started_at", "run_id"], na_position="first").reset_index(drop=True)
    values = pts["value"].to_numpy(dtype=float)
    out = []
    trials = pts["n"].to_numpy(dtype=float) if scale == "linear" and pts["n"].notna().all() else None
    for index, pvalue, ratio, lo, hi, n_before, n_after in reported_changes(values, scale=scale, trials=trials,
                                                                            **params):
        before, after = values[index - n_before:index], values[index:index + n_after]
        rb, ra = pts.iloc[index - 1], pts.iloc[index]
        bb = None if pd.isna(rb["build"]) else int(rb["build"])
        ba = None if pd.isna(ra["build"]) else int(ra["build"])
        out.append(ChangePoint(
            series=str(ra["series"]), machine_id=str(ra["machine_id"]), machine_label=str(ra["machine_label"]),
            model=str(ra["model"]), setting=str(ra["setting"]), index=index, build_before=bb, build_after=ba,
            run_before=str(rb["run_id"]), run_after=str(ra["run_id"]),
            started_after=None if pd.isna(ra["started_at"]) else str(ra["started_at"]),
            mean_before=_mean(before, scale), mean_after=_mean(after, scale),
            ratio=ratio, ratio_lo=lo, ratio_hi=hi, pvalue=pvalue, n_before=n_before, n_after=n_after,
            command=bisect_command(str(ra["series"]), str(ra["model"]), bb, ba), scale=scale))
    return out


def _mean(values: np.ndarray, scale: str) -> float:
    """A segment's level: its geometric mean (its arithmetic mean on a linear scale)."""
    return float(values.mean()) if scale == "linear" else float(np.exp(np.log(values).mean()))


GROUP = ["series", "machine_id", "model", "setting"]


def detect_all(rows: pd.DataFrame, **params: Unpack[OtavaParams]) -> list[ChangePoint]:
    """Change points of every (series, machine, model, setting) group, newest first."""
    found: list[ChangePoint] = []
    if rows.empty:
        return found
    for _, group in rows.groupby(GROUP, sort=True):
        found += detect(group, **params)
    return sorted(found, key=lambda c: (c.started_after or "", c.run_after), reverse=True)


def false_change_rate(n_series: int = 200, n_points: int = 20, log_sd: float = 0.1, seed: int = 0,
                      **params: Unpack[OtavaParams]) -> tuple[int, int]:
    """(series with at least one change point, change points in all) over ``n_series`` simulated
    flat series of ``n_points`` lognormal points (log sd ``log_sd``): the false-alarm count."""
    rng = np.random.default_rng(seed)
    with_any, total = 0, 0
    for _ in range(n_series):
        found = reported_changes(np.exp(rng.normal(0.0, log_sd, n_points)), **params)
        with_any += bool(found)
        total += len(found)
    return with_any, total


def detection_rate(step: float, n_series: int = 50, n_points: int = 20, log_sd: float = 0.1, seed: int = 1,
                   **params: Unpack[OtavaParams]) -> tuple[int, int]:
    """(series whose step was found at its exact place, series with a change point anywhere) over
    ``n_series`` simulated series of ``n_points`` lognormal points stepping by ``step`` halfway."""
    rng = np.random.default_rng(seed)
    half = n_points // 2
    exact, anywhere = 0, 0
    for _ in range(n_series):
        values = np.exp(np.r_[rng.normal(0.0, log_sd, half), rng.normal(math.log(step), log_sd, n_points - half)])
        found = reported_changes(values, **params)
        exact += any(c[0] == half for c in found)
        anywhere += bool(found)
    return exact, anywhere
