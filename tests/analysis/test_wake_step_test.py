"""Whether, then where, then how much (issue 44): the permutation test of a flat curve, the place's
interval and the penalty's, on known answers.  Samples are built around the issue's figures with fixed
seeds (named per test); the test's false-positive rate is a seeded simulation with a loose bound."""

import numpy as np
import pytest

from harness.analysis import wake_fit
from harness.analysis.regimes import fit_shape

GRID = [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 2.0, 2.5, 3.0, 4.0]
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
    assert fit.place_text() == "the step lies between 0.2 and 0.4 s in 97% of 300 resamples"
    wide = fit_shape(*issue_44_run(0), blocks=_blocks())  # a draw whose place is less sure: two runs of places
    assert wide.place_text() == "the step lies between 0 and 0.6 s in 92% of 300 resamples and between 2 and 2.5 s in 5%"
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
    assert "no clearer than with the pause labels shuffled within each repetition: p = " in fit.note
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
    assert fit.shape == "none" and "less than the 10% a wake step must be" in fit.note and "rises (p = 0.001" in fit.note


def test_the_false_positive_rate_on_shuffled_flat_data_is_at_the_stated_level():
    """Seeded simulation, not a timing: 300 flat curves (lognormal, sd 0.228, 18 pauses x 6 reps, blocked),
    each tested with 199 shuffles at alpha 0.05 (a level 300 trials can see).  Under a flat curve the
    permutation p-value is exact, so the rejections are Binomial(300, <= 0.05): at most 27 with
    probability > 0.999."""
    rng = np.random.default_rng(44)
    p = np.repeat(GRID, REPS)
    idx = np.repeat(np.arange(len(GRID)), REPS)
    rejected = 0
    pvals = []
    for _ in range(300):
        logy = rng.normal(0, WITHIN_SD, p.size)
        t = wake_fit.step_test(logy, idx, len(GRID), _blocks(), n_perm=199, rng=rng)
        pvals.append(t.p_value)
        rejected += t.p_value <= 0.05
    assert rejected <= 27
    assert 0.4 < np.median(pvals) < 0.6  # and the p-values are spread as a null's are, not piled at 1


def test_the_test_shuffles_within_repetition_blocks():
    """A drift between repetitions (each block 30% slower than the last) is not a step: shuffling within
    blocks keeps it out of the null, and a flat curve with drift stays flat."""
    rng = np.random.default_rng(6)
    p = np.repeat(GRID, REPS)
    idx = np.repeat(np.arange(len(GRID)), REPS)
    logy = rng.normal(0, 0.05, p.size) + np.log(1.3) * _blocks()
    t = wake_fit.step_test(logy, idx, len(GRID), _blocks(), n_perm=999, rng=rng)
    assert t.blocked and t.p_value > 0.01
