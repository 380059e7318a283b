"""The one wake model (BIC shape) on synthetic data with known answers."""

import numpy as np
import pytest

from harness.analysis.regimes import fit_shape, penalty_per_gb, wake_model, wake_thresholds

PAUSES = [0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0, 3.0]


def synthetic(step_at, warm=20.0, woken=60.0, reps=8, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    p = np.repeat(PAUSES, reps)
    base = np.where(p >= step_at, woken, warm) if step_at is not None else np.full(p.shape, warm)
    return p, base * rng.lognormal(0, noise, p.size)


@pytest.mark.parametrize("step_at", [0.8, 1.1, 1.4])
def test_change_point_recovered(step_at):
    p, y = synthetic(step_at)
    f = fit_shape(p, y)
    assert f.shape == "step" and f.first_woken_s == pytest.approx(step_at)
    assert f.last_warm_s < step_at
    assert f.penalty_ci[0] <= 40.0 <= f.penalty_ci[1]
    assert f.warm_ci[0] <= f.warm_median_ms <= f.warm_ci[1] and f.woken_ci[0] <= f.woken_median_ms <= f.woken_ci[1]
    assert f.woken_median_ms / f.warm_median_ms == pytest.approx(3.0, rel=0.1)


def test_no_step_is_not_a_regime_change():
    p, y = synthetic(None)
    f = fit_shape(p, y)
    assert f.shape == "none" and f.penalty_ms is None and f.n_woken == 0
    assert f.warm_ci[0] <= f.warm_median_ms <= f.warm_ci[1]
    assert f.as_row()["threshold_s"] is None


def test_small_step_below_min_step_is_ignored():
    p, y = synthetic(1.0, warm=20.0, woken=20.6)  # +3%
    assert not fit_shape(p, y).has_step


def test_one_model_gives_compare_its_thresholds():
    import pandas as pd

    p, y = synthetic(1.1)
    frame = pd.DataFrame({"model": "m", "setting": "s", "pause_requested_s": p, "latency_ms": y})
    shapes = wake_model(frame)
    assert wake_thresholds(shapes) == {("m", "s"): pytest.approx(1.1)}
    assert shapes[("m", "s")].as_row()["threshold_s"] == pytest.approx(1.1)


def test_penalty_per_gb_slope():
    gb = [1.3, 3.4, 8.5, 16.0]
    pts = [(g, 50.0 + 25.0 * g + e) for g, e in zip(gb, [1.0, -2.0, 1.5, -0.5])]
    fit = penalty_per_gb(pts)
    assert fit["slope_ci"][0] <= 25.0 <= fit["slope_ci"][1] and fit["r2"] > 0.99
    assert penalty_per_gb(pts[:2]) is None


def test_wake_summary_fits_penalty_per_gb_across_models():
    import pandas as pd

    from harness.analysis.regimes import wake_summary

    rows, models = [], []
    for label, gb in (("s", 1.0), ("m", 3.0), ("l", 8.0)):
        p, y = synthetic(1.1, warm=20.0, woken=20.0 + 30.0 * gb, seed=int(gb))
        rows += [{"model": label, "setting": "x", "pause_requested_s": a, "latency_ms": b} for a, b in zip(p, y)]
        models.append({"label": label, "bytes": int(gb * 1e9)})
    wake, per_gb = wake_summary(pd.DataFrame(rows), models)
    assert {w["model"]: w["threshold_s"] for w in wake} == {"s": 1.1, "m": 1.1, "l": 1.1}
    (fit,) = per_gb
    assert fit["setting"] == "x" and fit["n_models"] == 3
    assert fit["slope_ci"][0] <= 30.0 <= fit["slope_ci"][1]


def test_a_richer_shape_must_beat_a_simpler_one_by_the_minimum_bic_gain():
    from harness.analysis import wake_fit
    from harness.analysis.regimes import MIN_BIC_GAIN, fit_shape

    def choose(bics: dict) -> str:  # the rule the fit applies (wake_fit._sequential), on one row of BICs
        row = np.array([[bics.get(s, np.inf) for s in wake_fit.SHAPES]])
        return wake_fit.SHAPES[int(wake_fit._sequential(row, MIN_BIC_GAIN, len(wake_fit.SHAPES))[0])]

    # a ramp whose BIC is 0.07 below the step's is a coin toss: the simpler step stays
    assert choose({"none": 10.0, "step": 0.0, "ramp": -0.07}) == "step"
    assert choose({"none": 10.0, "step": 0.0, "ramp": -6.5}) == "ramp"
    assert choose({"none": 0.0, "step": -5.9}) == "none"
    assert choose({"none": 0.0, "step": -5.9, "two steps": -12.0}) == "two steps"
    # end to end: a clear step is still found, and the chosen shape's BIC is recorded with the others
    rng = np.random.default_rng(3)
    pauses = np.repeat([0.0, 0.5, 1.0, 1.5, 2.0], 8)
    y = np.where(pauses >= 1.5, 200.0, 100.0) * np.exp(rng.normal(0, 0.02, pauses.size))
    fit = fit_shape(pauses, y)
    assert fit.shape == "step" and fit.first_woken_s == 1.5
    assert fit.bic["none"] - fit.bic["step"] >= MIN_BIC_GAIN


# ----------------------------------------------------------------------------- issue 33: stalls cannot move it

DEFAULT_GRID = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 2.0, 2.5, 3.0, 4.0]
# issue 33's default run (synthetic 1B Q8, 6 reps): 77 and 79 ms at 0 and 0.2 s, 84-109 ms from 0.4 s on, and
# three stalls at 2.5 and 3 s (346 ms, 1088 ms).  The per-pause medians from 0.4 s on are spread over 84-109 ms
# in no order, as the run's table had them.
ISSUE_MEDIANS = [77.0, 79.0, 92.0, 96.0, 88.0, 102.0, 94.0, 109.0, 90.0, 99.0, 86.0, 104.0, 97.0, 93.0, 101.0,
                 84.0, 95.0, 91.0]


def issue_default_run(seed: int, stalls: bool = True):
    rng = np.random.default_rng(seed)
    p = np.repeat(DEFAULT_GRID, 6)
    y = np.repeat(ISSUE_MEDIANS, 6) * rng.lognormal(0, 0.05, p.size)
    if stalls:
        at25, at3 = np.flatnonzero(p == 2.5), np.flatnonzero(p == 3.0)
        y[at25[0]], y[at3[0]], y[at3[1]] = 346.0, 1088.0, 346.0
    return p, y


@pytest.mark.parametrize("seed", range(4))
def test_a_small_step_with_huge_stalls_lands_at_its_place(seed):
    """The issue's first failure: stalls at 2.5-3 s pulled the step from 0.2-0.4 s to 2-2.5 s."""
    p, y = issue_default_run(seed)
    fit = fit_shape(p, y)
    assert fit.shape == "step" and (fit.last_warm_s, fit.first_woken_s) == (0.2, 0.4)
    assert fit.n_stalls == 3 and [s["pause_s"] for s in fit.stalls if s["n_stalls"]] == [2.5, 3.0]
    true_penalty = np.median(ISSUE_MEDIANS[2:]) - np.median(ISSUE_MEDIANS[:2])  # ~17 ms
    assert fit.penalty_ci[0] > 0 and fit.penalty_ci[0] <= true_penalty * 1.1 and fit.penalty_ci[1] < 40
    assert fit.woken_median_ms < 110  # no stall in the woken median
    clean = fit_shape(*issue_default_run(seed, stalls=False))
    assert (clean.shape, clean.first_woken_s) == (fit.shape, fit.first_woken_s)  # the stalls moved nothing
    assert "stalls (left out of the fit): 3 of 108 requests" in fit.stall_text() and "2.5 s (1 of 6)" in fit.stall_text()


def test_a_five_fold_step_with_two_slow_warm_samples_is_a_step():
    """The issue's second failure: back to back 1.2-1.6 ms with two of six at 10 and 35 ms, after every pause
    5-20 ms: two slow warm samples must not turn a five-fold slowdown into "no clear step"."""
    rng = np.random.default_rng(1)
    pauses = [0.0, 0.5, 1.0, 1.5, 2.5]
    p = np.repeat(pauses, 6)
    y = np.concatenate([[1.2, 1.3, 1.5, 1.6, 10.0, 35.0]]
                       + [np.exp(rng.uniform(np.log(5), np.log(20), 6)) for _ in pauses[1:]])
    fit = fit_shape(p, y)
    assert fit.shape == "step" and (fit.last_warm_s, fit.first_woken_s) == (0.0, 0.5)
    assert fit.warm_median_ms < 1.7 and fit.penalty_ci[0] > 3.0
    assert fit.n_stalls == 2 and fit.stalls[0]["n_stalls"] == 2


def test_stalls_alone_give_none():
    rng = np.random.default_rng(2)
    p = np.repeat(DEFAULT_GRID, 6)
    y = 95.0 * rng.lognormal(0, 0.05, p.size)
    late = np.flatnonzero(p >= 2.5)
    y[late[[0, 7, 8, 13]]] = [346.0, 1088.0, 500.0, 700.0]
    fit = fit_shape(p, y)
    assert fit.shape == "none" and fit.n_stalls == 4
    assert fit.stall_rate_ci[0] < 4 / 108 < fit.stall_rate_ci[1]
    assert fit.as_row()["stall_text"].startswith("stalls (left out of the fit): 4 of 108")


def test_the_penalty_interval_is_at_each_resamples_own_place_with_no_mass_at_zero():
    """An 11% step at sd 0.10 (z ~ 5.7 between the two halves): the test calls it, and its penalty's
    interval comes from each resample's own place, so no resample counts as a penalty of 0 (the rule
    issue 44 replaced turned "where" into "whether")."""
    rng = np.random.default_rng(1)
    p = np.repeat(DEFAULT_GRID, 6)
    y = np.where(p >= 1.1, 106.0, 95.0) * rng.lognormal(0, 0.10, p.size)
    fit = fit_shape(p, y)
    assert fit.shape == "step" and fit.p_value <= 0.01
    assert fit.penalty_ci[0] > 0 and fit.penalty_ci[0] < 11.0 < fit.penalty_ci[1]
    assert fit.threshold_ci[0] <= 1.1 <= fit.threshold_ci[1] and fit.place_share >= 0.95


def test_compare_and_the_gate_read_the_robust_model():
    import pandas as pd

    p, y = issue_default_run(0)
    frame = pd.DataFrame({"model": "m", "setting": "s", "pause_requested_s": p, "latency_ms": y})
    assert wake_thresholds(wake_model(frame)) == {("m", "s"): pytest.approx(0.4)}


# ----------------------------------------------------------------------------- issue 44: whether, then where, then how much
# Samples are built around the issue's figures with fixed seeds (named per test).

GRID = DEFAULT_GRID
REPS = 6
# issue 44's default run (18 pauses x 6 reps, synthetic 1B Q8 on a fresh VM): per-pause medians 77 and 79 ms
# at 0 and 0.2 s, then 84-125 ms at every pause from 0.4 s to 4 s, spread over that range in no order (the issue
# gives the range, not the order; the run's BIC put the step at 0.2-0.4 s, so its lowest woken medians were not
# the first ones after the step, and here they are at 2 and 4 s)
ISSUE_44_MEDIANS = [77.0, 79.0, 96.0, 110.0, 92.0, 125.0, 101.0, 88.0, 117.0, 95.0, 104.0, 90.0, 113.0, 99.0,
                    84.0, 121.0, 107.0, 86.0]
WITHIN_SD = 0.228  # this VM's quiet within-pause log sd (docs/statistics.md, run 20261203T134639Z-idle-b7f3)


def _blocks():
    return np.tile(np.arange(REPS), len(GRID))


def issue_44_run(seed: int):
    """Six samples per pause with log sd ``WITHIN_SD`` (seeded), each pause scaled so its median is exactly
    the issue's per-pause median."""
    rng = np.random.default_rng(seed)
    p = np.repeat(GRID, REPS)
    z = rng.lognormal(0, WITHIN_SD, (len(GRID), REPS))
    y = (z / np.median(z, axis=1, keepdims=True) * np.array(ISSUE_44_MEDIANS)[:, None]).ravel()
    return p, y


@pytest.mark.parametrize("seed", [1, 2])
def test_the_issue_44_curve_gives_a_step_between_0_2_and_0_4_s(seed):
    """12 warm samples against 96 woken ones, about 3 standard errors apart: the plot shows a step and so must
    the answer, with the place's interval and a penalty interval that does not reach 0.  Seeds 1 and 2 are two
    draws of the generator; how often a draw at this spread gives this answer is the next test."""
    p, y = issue_44_run(seed)
    fit = fit_shape(p, y, blocks=_blocks())
    assert fit.shape == "step" and (fit.last_warm_s, fit.first_woken_s) == (0.2, 0.4)
    assert fit.p_value <= 0.01 and fit.test_blocked
    assert fit.penalty_ci[0] > 0 and fit.penalty_ci[0] < fit.penalty_ms < fit.penalty_ci[1]
    lo, hi = fit.place_interval_s
    assert lo <= 0.2 and 0.4 <= hi <= 0.6 and fit.place_share >= 0.9
    shares = {(s["last_warm_s"], s["first_woken_s"]): s["share"] for s in fit.place_shares}
    assert max(shares, key=shares.get) == (0.2, 0.4) and sum(shares.values()) == pytest.approx(1.0)


def test_how_often_the_issue_44_curve_is_called_a_step_at_this_spread():
    """40 seeded draws of the issue's curve at sd 0.228 (not a timing): the test calls a step in most of them,
    at 0.2-0.4 s in most of those; a draw that is called flat is the test holding its 1% level at a step of
    ~3 standard errors at the grid's edge (measured over 60 draws: 80% called a step, 68% at 0.2-0.4 s)."""
    found = at_place = 0
    for seed in range(40):
        p, y = issue_44_run(seed)
        fit = fit_shape(p, y, blocks=_blocks(), n_boot=20)
        found += fit.has_step
        at_place += fit.has_step and (fit.last_warm_s, fit.first_woken_s) == (0.2, 0.4)
    assert found >= 26 and at_place >= 20


def test_the_report_says_how_sure_the_place_is_in_words():
    p, y = issue_44_run(1)
    fit = fit_shape(p, y, blocks=_blocks())
    assert fit.place_text() == "the step lies between 0.2 and 0.4 s in 98% of 1000 resamples"
    wide = fit_shape(*issue_44_run(0), blocks=_blocks())  # a draw whose place is less sure: two runs of places
    assert wide.place_text() == "the step lies between 0 and 0.6 s in 94% of 1000 resamples and between 2 and 2.5 s in 3%"
    row = fit.as_row()
    assert row["place_text"] == fit.place_text() and row["p_value"] == fit.p_value and row["n_perm"] == 999


def test_a_flat_curve_with_two_stalls_gives_none_and_says_why():
    rng = np.random.default_rng(4)
    p = np.repeat(GRID, REPS)
    y = 95.0 * rng.lognormal(0, WITHIN_SD, p.size)
    late = np.flatnonzero(p >= 2.5)
    y[late[[0, 7]]] = [760.0, 1088.0]  # 8x and 11x: two stalls late in the grid
    fit = fit_shape(p, y, blocks=_blocks())
    assert fit.shape == "none" and fit.n_stalls == 2 and fit.p_value > 0.01
    assert "no more clearly than with the pause labels shuffled within each repetition: p = " in fit.note
    assert fit.place_text() == "" and fit.penalty_ms is None


def test_a_five_fold_step_with_slow_warm_samples_is_found():
    """Back to back 1.2-1.6 ms with two of six at 10 and 35 ms (stalls), after every pause 5-20 ms (issue 33's
    second case, seed 1): the test re-applies the stall rule on every shuffle, so the two slow warm samples
    neither hide the step nor make the test invalid."""
    rng = np.random.default_rng(1)
    pauses = [0.0, 0.5, 1.0, 1.5, 2.5]
    p = np.repeat(pauses, 6)
    y = np.concatenate([[1.2, 1.3, 1.5, 1.6, 10.0, 35.0]]
                       + [np.exp(rng.uniform(np.log(5), np.log(20), 6)) for _ in pauses[1:]])
    fit = fit_shape(p, y, blocks=np.tile(np.arange(6), 5))
    assert fit.shape == "step" and (fit.last_warm_s, fit.first_woken_s) == (0.0, 0.5) and fit.p_value <= 0.01
    assert fit.n_stalls == 2 and fit.penalty_ci[0] > 3.0


def test_a_significant_rise_under_min_step_is_not_a_wake_step():
    rng = np.random.default_rng(5)
    p = np.repeat(GRID, REPS)
    y = np.where(p >= 1.2, 103.0, 100.0) * rng.lognormal(0, 0.01, p.size)  # +3% at sd 0.01: clear, but small
    fit = fit_shape(p, y, blocks=_blocks())
    assert fit.shape == "none" and fit.note.endswith("(p = 0.001 against shuffled pause labels), less than the 10% a wake step must be")
    assert "the curve rises 3%" in fit.note
