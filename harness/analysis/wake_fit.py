"""The wake model's robust core: stalls flagged per pause (issue 33); whether there is a step, by a
permutation test on every sample; then where and how much, by the shape's least squares on the bulk
and a bootstrap of it (issue 44).

**Stalls.**  A stall is a sample of the sparse slow mode: at a pause with at least
``STALL_MIN_N`` samples, a sample whose log latency exceeds the pause's median log latency by more
than ``max(log STALL_MIN_RATIO, STALL_K * s_j)``, where ``s_j`` is the pause's robust scale (1.4826
x the median absolute deviation about its median), floored at half the scale pooled over all
pauses (a pause of 6 samples can have a tiny MAD by chance).  So a request that takes at least 3x
its pause's median, and more than 4 robust sd above it where the pause is wide, is a stall.
Stalls leave the fit; they are reported per pause (rate and size).  The rule's false-flag rate on
curves without stalls is measured by ``lbench wake-bench`` (docs/statistics.md).

**Shape.**  On the bulk's log latency, one row per sample: none (1 level), step (2 levels), ramp
(flat, linear rise between two grid pauses with one inside, flat), two steps (3 levels); least
squares from per-pause sums, BIC = n log(SSE/n) + k log n (k = 2, 4, 5, 6); a richer shape
replaces a simpler one only when its BIC is lower by ``min_gain``; every rise must be at least
``min_step`` in the bulk's geometric mean.

**Whether** (``step_test``).  On every sample: the stall rule is applied, then for each boundary
between two grid pauses the bulk's mean log latency after it minus before it, over the bulk's sd x
sqrt(1/n_before + 1/n_after); the statistic is the largest such z over the boundaries (one-sided: a
wake step is a rise).  Its null distribution is that of the same statistic, stall rule included,
with the pause labels shuffled within each repetition block (each block of ``lbench idle`` runs every pause once, in a
shuffled order, so this is the design's own randomisation): under a flat curve the p-value is exact,
P(p <= a) <= a.  The p-value is Besag and Clifford's sequential one: shuffles stop once ``stop_after``
of them reach the statistic (p = stop_after / shuffles drawn), else (1 + k) / (1 + n_perm).

**Where and how much** (``fit_batch`` with ``force``).  Once the test says there is a step, the
shape (step, ramp, two steps) is chosen by BIC among rising curves, and the bootstrap (each pause's
bulk samples drawn with replacement) refits *that shape* on every resample at the resample's own
best place: the places chosen give the place's interval, and the penalty (woken minus warm bulk
median at each resample's own place) gives the penalty's, with no resample counted as "no step".
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

STALL_MIN_RATIO = 3.0  # a stall takes at least 3x its pause's median
STALL_K = 4.0  # ... and more than 4 robust sd above it where the pause is wide
STALL_MIN_N = 3  # pauses with fewer samples have no median to stand on: nothing is flagged there
MAD_TO_SD = 1.4826

SHAPES = ("none", "step", "ramp", "two steps")  # in order of parameters (codes 0..3)
N_PARAMS = (2, 4, 5, 6)  # levels + change points + sigma


@dataclass(frozen=True)
class Stalls:
    """Stall flags of one sample set (in the caller's order) and the per-pause bounds."""
    mask: np.ndarray  # (n,) bool: True = stall
    levels: np.ndarray  # (L,) distinct pauses, sorted
    median_log: np.ndarray  # (L,) median log latency per pause (all samples)
    above_log: np.ndarray  # (L,) log latency above which a sample is a stall (inf: nothing flagged there)


def _pad(level_idx: np.ndarray, n_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """(L, m) positions of each pause's samples (m: the most any pause has), and which are real."""
    counts = np.bincount(level_idx, minlength=n_levels)
    m = max(int(counts.max()) if counts.size else 0, 1)
    order = np.argsort(level_idx, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(m)[None, :]
    valid = slot < counts[:, None]
    pos = order[np.minimum(starts[:, None] + slot, max(level_idx.size - 1, 0))]
    return np.where(valid, pos, 0), valid


def _stall_bounds(logy: np.ndarray, level_idx: np.ndarray, pad: tuple[np.ndarray, np.ndarray], *, k: float,
                  min_ratio: float, min_n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``logy`` (B, n): each pause's median log latency and the bound above which a sample is a
    stall (B, L each; inf where the pause has fewer than ``min_n`` samples)."""
    pos, valid = pad
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a pause without samples has no median: nan
        vals = np.where(valid[None], logy[:, pos], np.nan)
        med = np.nanmedian(vals, axis=2)
        mad = np.nanmedian(np.abs(vals - med[:, :, None]), axis=2)
    resid = np.abs(logy - med[:, level_idx])
    pooled = MAD_TO_SD * np.median(resid, axis=1) if logy.shape[1] else np.zeros(logy.shape[0])
    scale = np.maximum(MAD_TO_SD * np.nan_to_num(mad), pooled[:, None] / 2)
    above = med + np.maximum(math.log(min_ratio), k * scale)
    above[:, valid.sum(axis=1) < min_n] = np.inf
    return med, above


def flag_stalls(level_idx: np.ndarray, logy: np.ndarray, levels: np.ndarray, *, k: float = STALL_K,
                min_ratio: float = STALL_MIN_RATIO, min_n: int = STALL_MIN_N) -> Stalls:
    """The stall rule of the module doc on samples ``logy`` at pause index ``level_idx``."""
    med, above = _stall_bounds(logy[None, :], level_idx, _pad(level_idx, levels.size), k=k,
                               min_ratio=min_ratio, min_n=min_n)
    return Stalls(logy > above[0, level_idx], levels, med[0], above[0])


@dataclass
class BatchFit:
    """Per row of a batch: the chosen shape and where its regimes lie, as pause-index bounds
    (warm = indices < ``warm_hi``, woken = ``woken_lo`` <= index < ``woken_hi``)."""
    shape: np.ndarray  # (B,) code into SHAPES
    warm_hi: np.ndarray
    woken_lo: np.ndarray
    woken_hi: np.ndarray
    second_lo: np.ndarray  # two steps: the second step's first pause index, else -1
    bic: np.ndarray  # (B, 4): the best BIC per shape, inf where no candidate qualified
    warm_median_ms: np.ndarray  # (B,) bulk medians of the chosen regimes; nan without a step
    woken_median_ms: np.ndarray

    @property
    def penalty_ms(self) -> np.ndarray:
        """Woken minus warm median; 0 where no step was chosen (what the selection answers)."""
        return np.where(self.shape > 0, self.woken_median_ms - self.warm_median_ms, 0.0)


def fit_batch(logy: np.ndarray, level_idx: np.ndarray, levels: np.ndarray, *, min_step: float,
              min_gain: float, allow_none: bool = True, force: int | None = None) -> BatchFit:
    """Fit every row of ``logy`` (B, n): samples at pause indices ``level_idx`` (n,), sorted so that
    each pause's samples are contiguous and every pause has at least one sample.

    ``allow_none=False``: the flat curve is not a candidate (a test has already rejected it), so BIC
    chooses among the rising shapes only; a row whose chosen shape rises by less than ``min_step``
    still answers none.  ``force`` (a code of ``SHAPES``): every row takes that shape at its own best
    rising place, with no ``min_step`` or BIC rule (a bootstrap of a shape already chosen); a row where
    no candidate of that shape rises answers none."""
    n_rows, n = logy.shape
    n_levels = levels.size
    starts = np.searchsorted(level_idx, np.arange(n_levels))
    centre = np.median(logy, axis=1, keepdims=True)
    yc = logy - centre
    cnt = np.broadcast_to(np.diff(np.append(starts, n)).astype(float), (n_rows, n_levels))
    s = np.add.reduceat(yc, starts, axis=1)
    q = np.add.reduceat(yc * yc, starts, axis=1)
    zero = np.zeros((n_rows, 1))
    cn, cs, cq = (np.concatenate([zero, np.cumsum(x, axis=1)], axis=1) for x in (cnt, s, q))

    # every segment [a, b) of pauses at once: (B, L+1, L+1) sums, so each shape is a lookup
    dn, ds, dq = (c[:, None, :] - c[:, :, None] for c in (cn, cs, cq))
    with np.errstate(invalid="ignore", divide="ignore"):
        seg_sse = np.where(dn > 0, dq - ds * ds / dn, 0.0)
        seg_mean = np.where(dn > 0, ds / dn, np.nan)

    def sse(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        ia, ib = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
        return seg_sse[:, ia, ib]

    def mean(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
        ia, ib = np.broadcast_arrays(np.atleast_1d(a), np.atleast_1d(b))
        return seg_mean[:, ia, ib]

    rise = math.log1p(min_step)
    total_n = float(n)
    sst = sse(0, n_levels)[:, 0]
    floor = 1e-12 * np.maximum(sst, 1e-12) + 1e-300

    def bic(err: np.ndarray, k: int) -> np.ndarray:
        return total_n * np.log(np.maximum(err, floor[:, None] if err.ndim == 2 else floor) / total_n) \
            + k * math.log(total_n)

    rows = np.arange(n_rows)
    inf = np.full(n_rows, np.inf)
    # per shape: the best candidate by BIC among those that rise (raw), whether it rises by min_step,
    # and the best candidate that does (valid)
    raw_best = np.column_stack([bic(sst, N_PARAMS[0]), inf, inf, inf])
    valid_best = raw_best.copy()
    raw_ok = np.ones((n_rows, 4), dtype=bool)
    raw_arg = np.zeros((n_rows, 4), dtype=int)
    valid_arg = np.zeros((n_rows, 4), dtype=int)

    def pick(code: int, b: np.ndarray, up: np.ndarray, ok: np.ndarray) -> None:
        raw = np.where(up, b, np.inf)
        raw_arg[:, code] = np.argmin(raw, axis=1)
        raw_best[:, code] = raw[rows, raw_arg[:, code]]
        raw_ok[:, code] = ok[rows, raw_arg[:, code]]
        valid = np.where(ok, b, np.inf)
        valid_arg[:, code] = np.argmin(valid, axis=1)
        valid_best[:, code] = valid[rows, valid_arg[:, code]]

    # step: warm = [0, c), woken = [c, L)
    cuts = np.arange(1, n_levels)
    if cuts.size:
        d = mean(cuts, n_levels) - mean(0, cuts)
        pick(1, bic(sse(0, cuts) + sse(cuts, n_levels), N_PARAMS[1]), d > 0, d >= rise)
    # ramp: flat to levels[i], linear to levels[k] (k >= i + 2), flat after
    ii, kk = (np.array(x, dtype=int) for x in zip(*[(i, k) for i in range(n_levels) for k in range(i + 2, n_levels)])) \
        if n_levels >= 3 else (np.zeros(0, dtype=int), np.zeros(0, dtype=int))
    if ii.size and force in (None, 2):  # a forced shape needs only its own candidates
        w = np.clip((levels[None, :] - levels[ii, None]) / (levels[kk, None] - levels[ii, None]), 0.0, 1.0)
        a_, b_, c_ = cnt @ ((1 - w) ** 2).T, cnt @ ((1 - w) * w).T, cnt @ (w ** 2).T
        u, v = s @ (1 - w).T, s @ w.T
        det = a_ * c_ - b_ * b_
        good = det > 1e-12
        det = np.where(good, det, 1.0)
        beta1, beta2 = (c_ * u - b_ * v) / det, (a_ * v - b_ * u) / det
        d = beta2 - beta1
        pick(2, bic(cq[:, -1:] - (beta1 * u + beta2 * v), N_PARAMS[2]), good & (d > 0), good & (d >= rise))
    # two steps: warm = [0, c1), woken = [c1, c2), second = [c2, L)
    pairs = [(c1, c2) for c1 in range(1, n_levels) for c2 in range(c1 + 1, n_levels)]
    c1s, c2s = (np.array(x, dtype=int) for x in zip(*pairs)) if pairs else (np.zeros(0, int), np.zeros(0, int))
    if c1s.size and force in (None, 3):
        m0, m1, m2 = mean(0, c1s), mean(c1s, c2s), mean(c2s, n_levels)
        pick(3, bic(sse(0, c1s) + sse(c1s, c2s) + sse(c2s, n_levels), N_PARAMS[3]), (m1 > m0) & (m2 > m1),
             ((m1 - m0) >= rise) & ((m2 - m1) >= rise))
    # the shape is chosen by BIC among curves that rise; if the chosen one rises by less than min_step, the
    # answer falls back to the simpler shapes that do (so a rise under min_step never makes a richer shape)
    if force is not None:
        shape = np.where(np.isfinite(raw_best[:, force]), force, 0)
        use_raw = np.ones(n_rows, dtype=bool)
    else:
        cand, cand_valid = raw_best.copy(), valid_best.copy()
        if not allow_none:
            cand[:, 0] = cand_valid[:, 0] = np.inf
        chosen = _sequential(cand, min_gain, 4)
        fallback = ~raw_ok[rows, chosen]
        shape = chosen.copy()
        for code in (1, 2, 3):
            limited = np.where(np.arange(4)[None, :] < code, cand_valid, np.inf)
            sel = fallback & (chosen == code)
            shape[sel] = _sequential(limited[sel], min_gain, code)
        use_raw = ~fallback
    step_arg = np.where(use_raw, raw_arg[:, 1], valid_arg[:, 1])
    ramp_arg = np.where(use_raw, raw_arg[:, 2], valid_arg[:, 2])
    two_arg = np.where(use_raw, raw_arg[:, 3], valid_arg[:, 3])
    bics = raw_best
    warm_hi = np.full(n_rows, n_levels)
    woken_lo = np.full(n_rows, n_levels)
    woken_hi = np.full(n_rows, n_levels)
    second_lo = np.full(n_rows, -1)
    sel = shape == 1
    if cuts.size:
        warm_hi[sel] = woken_lo[sel] = cuts[step_arg[sel]]
    sel = shape == 2
    if ii.size:
        warm_hi[sel], woken_lo[sel] = ii[ramp_arg[sel]] + 1, kk[ramp_arg[sel]]
    sel = shape == 3
    if c1s.size:
        warm_hi[sel] = woken_lo[sel] = c1s[two_arg[sel]]
        woken_hi[sel] = second_lo[sel] = c2s[two_arg[sel]]
    warm_med = _masked_median_ms(logy, level_idx[None, :] < warm_hi[:, None])
    woken_med = _masked_median_ms(logy, (level_idx[None, :] >= woken_lo[:, None])
                                  & (level_idx[None, :] < woken_hi[:, None]))
    has = shape > 0
    return BatchFit(shape, warm_hi, woken_lo, woken_hi, second_lo, bics,
                    np.where(has, warm_med, np.nan), np.where(has, woken_med, np.nan))


def _sequential(bics: np.ndarray, min_gain: float, n_shapes: int) -> np.ndarray:
    """Per row, the simplest shape (code) no richer one among the first ``n_shapes`` beats by ``min_gain``."""
    shape = np.zeros(bics.shape[0], dtype=int)
    best = bics[:, 0].copy()
    for code in range(1, n_shapes):  # simplest first: a richer shape must beat the current choice by min_gain
        better = (bics[:, code] <= best - min_gain) & np.isfinite(bics[:, code])  # inf - gain is inf: no candidate
        shape = np.where(better, code, shape)
        best = np.where(better, bics[:, code], best)
    return shape


def _masked_median_ms(logy: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the median latency (ms) of the samples in ``mask`` (nan where none)."""
    ranked = np.sort(np.where(mask, logy, np.inf), axis=1)
    m = mask.sum(axis=1)
    rows = np.arange(logy.shape[0])
    lo, hi = ranked[rows, np.maximum(m - 1, 0) // 2], ranked[rows, np.minimum(m // 2, logy.shape[1] - 1)]
    with np.errstate(invalid="ignore"):
        mid = (np.exp(lo) + np.exp(hi)) / 2
    return np.where(m > 0, mid, np.nan)


def resample_within_pauses(logy: np.ndarray, level_idx: np.ndarray, n_boot: int,
                           rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n): each pause's samples drawn with replacement from that pause's (contiguous) samples."""
    n = logy.size
    n_levels = int(level_idx.max()) + 1 if n else 0
    starts = np.searchsorted(level_idx, np.arange(n_levels))
    counts = np.diff(np.append(starts, n))
    pick = starts[level_idx] + (rng.random((n_boot, n)) * counts[level_idx]).astype(int)
    return logy[pick]


@dataclass(frozen=True)
class StepTest:
    """The permutation test of a flat curve against a rise at some boundary (module doc)."""
    statistic: float  # the largest standardised rise of the bulk over the boundaries (nan: fewer than 2 pauses)
    p_value: float
    n_perm: int  # shuffles drawn (fewer than asked once the p-value was clearly large)
    blocked: bool  # shuffled within repetition blocks (else across all samples)


def _max_step_z(logy: np.ndarray, level_idx: np.ndarray, pad: tuple[np.ndarray, np.ndarray],
                starts: np.ndarray) -> np.ndarray:
    """Per row of ``logy`` (B, n; samples sorted by pause): the stall rule applied under these labels,
    then the largest z over the boundaries of the bulk's mean log latency after it minus before it,
    over the bulk's sd x sqrt(1/n_before + 1/n_after) (-inf where no boundary has bulk on both sides)."""
    _, above = _stall_bounds(logy, level_idx, pad, k=STALL_K, min_ratio=STALL_MIN_RATIO, min_n=STALL_MIN_N)
    bulk = logy <= above[:, level_idx]
    centred = logy - np.median(logy, axis=1, keepdims=True)
    x = np.where(bulk, centred, 0.0)
    cnt = np.cumsum(np.add.reduceat(bulk.astype(float), starts, axis=1), axis=1)
    sm = np.cumsum(np.add.reduceat(x, starts, axis=1), axis=1)
    total_n, total_s = cnt[:, -1:], sm[:, -1:]
    sq = (x * x).sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.maximum(sq - total_s ** 2 / total_n, 0.0) / np.maximum(total_n - 1, 1))
        n_lo, s_lo = cnt[:, :-1], sm[:, :-1]
        n_hi, s_hi = total_n - n_lo, total_s - s_lo
        z = (s_hi / n_hi - s_lo / n_lo) / (np.maximum(sd, 1e-12) * np.sqrt(1 / n_lo + 1 / n_hi))
    z = np.where((n_lo > 0) & (n_hi > 0) & np.isfinite(z), z, -np.inf)
    return np.asarray(z.max(axis=1))


def step_test(logy: np.ndarray, level_idx: np.ndarray, n_levels: int, blocks: np.ndarray | None = None, *,
              n_perm: int = 999, rng: np.random.Generator, stop_after: int = 10, batch: int = 100) -> StepTest:
    """Test a flat curve on every sample (``logy``, log latency; ``level_idx`` sorted, the pause index of
    each) against a rise at some boundary; ``blocks`` (n,) labels the repetition each sample belongs to,
    within which the pause labels are shuffled (None: one block).  The statistic re-applies the stall
    rule under each labelling, so it is the same function of labels and values on every shuffle."""
    n = logy.size
    if n_levels < 2 or n < 2:
        return StepTest(math.nan, 1.0, 0, False)
    starts = np.searchsorted(level_idx, np.arange(n_levels))
    pad = _pad(level_idx, n_levels)
    stat = float(_max_step_z(logy[None, :], level_idx, pad, starts)[0])
    if not np.isfinite(stat):
        return StepTest(math.nan, 1.0, 0, False)
    groups = [np.flatnonzero(blocks == b) for b in np.unique(blocks)] if blocks is not None else [np.arange(n)]
    blocked = len(groups) > 1
    drawn = exceed = 0
    while drawn < n_perm:
        size = min(batch, n_perm - drawn)
        shuffled = np.empty((size, n))
        for pos in groups:
            shuffled[:, pos] = rng.permuted(np.broadcast_to(logy[pos], (size, pos.size)), axis=1)
        hits = _max_step_z(shuffled, level_idx, pad, starts) >= stat - 1e-9
        if exceed + int(hits.sum()) >= stop_after:  # Besag-Clifford: stop at the stop_after-th exceedance
            at = int(np.flatnonzero(hits)[stop_after - exceed - 1]) + 1
            return StepTest(stat, stop_after / (drawn + at), drawn + at, blocked)
        exceed += int(hits.sum())
        drawn += size
    return StepTest(stat, (1 + exceed) / (1 + n_perm), n_perm, blocked)
