"""Known-answer tests for the run-as-unit verdicts, order-statistic intervals and shape choice."""

import math

import numpy as np
import pytest

from harness.analysis.gate_config import GateConfig
from harness.analysis.gate_sim import RunModel, gate_trials
from harness.analysis.regimes import fit_shape, step_changes
from harness.analysis.intervals import median_interval
from harness.analysis.verdicts import (GroupData, VerdictConfig, decide_groups, factor, holm, ratio_words, run_level,
                                       runs_per_side, spread)


def test_order_statistic_median_interval_coverage_measured():
    rng = np.random.default_rng(7)
    for n in (6, 9, 15):
        hits = 0
        trials = 400
        for _ in range(trials):
            x = rng.lognormal(np.log(10), 0.8, n)  # true median 10
            lo, hi, cov = median_interval(x)
            hits += lo <= 10 <= hi
            assert cov >= 0.95
        assert hits / trials >= 0.93  # nominal >= 0.95; 400 draws, sampling slack
    assert next(n for n in range(1, 20) if not math.isnan(median_interval(np.arange(n, dtype=float))[0])) == 6
    assert all(math.isnan(v) for v in median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))


def _runs(rng, n_runs, n, level=20.0, run_sd=0.0, sd=0.05):
    return [level * rng.lognormal(rng.normal(0, run_sd), sd, n) for _ in range(n_runs)]


def test_three_way_verdicts_against_the_band():
    rng = np.random.default_rng(1)
    cfg = VerdictConfig(margin=0.05)
    a = _runs(rng, 4, 30, sd=0.02)
    groups = [GroupData("m", "s", "same", "latency_ms", a, _runs(rng, 4, 30, sd=0.02)),
              GroupData("m", "s", "slow", "latency_ms", a, _runs(rng, 4, 30, level=26.0, sd=0.02), gates=False),
              GroupData("m", "s", "fast", "latency_ms", a, _runs(rng, 4, 30, level=14.0, sd=0.02), gates=False),
              GroupData("m", "s", "noisy", "latency_ms", a, _runs(rng, 4, 6, sd=0.6), gates=False),
              GroupData("m", "s", "few", "latency_ms", a, [np.array([20.0, 21.0])], gates=False)]
    v = {g.regime: g for g in decide_groups(groups, cfg)}
    assert v["same"].verdict == "no change" and v["same"].unit.startswith("Welch t on per-run log medians")
    assert v["slow"].verdict == "slower" and v["slow"].ratio_ci[0] > 1.05
    assert v["fast"].verdict == "faster" and "B faster by 30%" in v["fast"].line()
    assert v["noisy"].verdict == "inconclusive" and v["noisy"].detectable > v["same"].detectable
    assert v["noisy"].runs_needed > 100  # at its spread (sd ~0.25): hundreds of runs per side for +10%
    assert v["few"].verdict == "refused"
    assert "B/A 1.30 [" in v["slow"].line() and ": slower (n=4 vs 4 runs" in v["slow"].line()
    assert v["slow"].role == "reported" and "[reported: does not vote]" in v["slow"].line()


def test_one_run_per_side_is_never_decided_and_says_what_would_decide_it():
    """No between-run variance: inconclusive even for a huge, precise difference, never slower/no change."""
    rng = np.random.default_rng(2)
    a, b, same = _runs(rng, 1, 50, sd=0.01), _runs(rng, 1, 50, level=40.0, sd=0.01), _runs(rng, 1, 50, sd=0.01)
    for other in (b, same):
        (v,) = decide_groups([GroupData("m", "s", "warm", "latency_ms", a, other)], VerdictConfig())
        assert v.verdict == "inconclusive" and v.runs_needed is None
        assert "needs >= 2 runs per side" in v.line() and "no slowdown below 2x detectable" in v.line()
    # earlier baseline runs (a history) give the between-run variance: then one run per side decides
    hist = _runs(rng, 6, 50, run_sd=0.01, sd=0.01)
    (v,) = decide_groups([GroupData("m", "s", "warm", "latency_ms", a, b, history_runs=hist)], VerdictConfig())
    assert v.verdict == "slower" and "history" in v.unit and v.df == 5 and "drifted" not in v.note
    moved = [x * 1.5 for x in hist]  # the history ran 1.5x slower than today's baseline: said, spread still used
    (d,) = decide_groups([GroupData("m", "s", "warm", "latency_ms", a, b, history_runs=moved)], VerdictConfig())
    assert d.verdict == "slower" and "drifted" in d.note


def test_welch_and_pooled_spread_known_answers():
    ya, yb = np.array([0.0, 0.2]), np.array([0.1, 0.5, 0.3])
    s = spread(ya, yb)
    va, vb = 0.02 / 2, 0.04 / 3  # sample variances over n
    assert s.se == pytest.approx(math.sqrt(va + vb))
    assert s.df == pytest.approx((va + vb) ** 2 / (va ** 2 / 1 + vb ** 2 / 2))
    one = spread(np.array([0.0]), yb)  # one run on a side: equal spread assumed, df = 1 + 3 - 2
    assert one.df == 2 and one.se == pytest.approx(math.sqrt(0.08 / 2 * (1 + 1 / 3)))
    h = spread(ya, yb, (0.01, 8.0))
    assert h.df == 11 and h.sd_run == pytest.approx(math.sqrt((0.02 + 0.08 + 0.08) / 11))
    assert math.isinf(spread(np.array([0.0]), np.array([1.0])).se)


def test_pooled_pauses_level_is_the_mean_of_log_medians():
    run = [np.array([10.0, 10.0, 10.0]), np.array([40.0, 40.0])]
    assert run_level(run) == (pytest.approx(math.log(20.0)), 5)
    assert run_level(np.array([1.0, 2.0, 3.0])) == (pytest.approx(math.log(2.0)), 3)


def test_runs_per_side_formula_known_answers():
    """The issue's check of the docs' formula: sd 0.096 and 0.22, k = 3 (z: 115 and 604); t needs a little more."""
    assert runs_per_side(0.096, 0.10, alpha_one_sided=0.025 / 3) == 117
    assert runs_per_side(0.22, 0.10, alpha_one_sided=0.025 / 3) == 606
    assert runs_per_side(0.05, 0.05) is None  # a change at the band edge is never "slower" under the margin rule
    z_answer = 2 * 0.043 ** 2 * (1.959964 + 1.281552) ** 2 / math.log(1.10) ** 2
    assert math.ceil(z_answer) <= runs_per_side(0.043, 0.10, rule="zero") <= math.ceil(z_answer) + 2


def test_interval_coverage_at_two_three_and_five_runs():
    """The 95% interval of the true ratio covers it at small designs (the bootstrap it replaced covered
    ~67% at 2 runs).  200 seeded A/A trials per design, spread 0.095; tolerance for 200 draws."""
    rng = np.random.default_rng(3)
    cov = {n: gate_trials(RunModel(0.095), n, 1.0, GateConfig(), 200, rng)[1] for n in (2, 3, 5)}
    assert all(0.91 <= c <= 0.995 for c in cov.values()), cov


def test_wording_one_convention():
    assert ratio_words(0.871, 0.384, 4.971) == "B/A 0.871 [0.384, 4.97], B faster by 13%"
    assert ratio_words(1.0004, 0.9, 1.1) == "B/A 1.00 [0.900, 1.10], B as fast as A"
    assert ratio_words(3.8, 2.0, 7.0) == "B/A 3.80 [2.00, 7.00], B slower: 3.80 times A"
    assert factor(1.0) == "1.00" and factor(12345.0) == "12345"


def test_holm_adjustment_and_secondary_metrics_do_not_vote():
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    rng = np.random.default_rng(5)
    a = _runs(rng, 3, 30, sd=0.02)
    groups = [GroupData("m", "s", f"g{i}", "latency_ms", a, _runs(rng, 3, 30, sd=0.02)) for i in range(5)]
    groups.append(GroupData("m", "s", "g0", "server_prompt_ms", a, _runs(rng, 3, 30, level=30.0, sd=0.02)))
    out = decide_groups(groups, VerdictConfig())
    assert [v.primary for v in out] == [True] * 5 + [False]
    assert out[-1].verdict == "slower" and "[secondary metric: does not vote]" in out[-1].line()


def test_slower_rules_differ_at_the_band_edge():
    """A precise +5% (the band edge): the margin rule does not call it slower, the zero rule does."""
    rng = np.random.default_rng(8)
    a, b = _runs(rng, 6, 40, run_sd=0.005, sd=0.01), _runs(rng, 6, 40, level=21.0, run_sd=0.005, sd=0.01)
    (m,) = decide_groups([GroupData("m", "s", "w", "latency_ms", a, b)], VerdictConfig())
    (z,) = decide_groups([GroupData("m", "s", "w", "latency_ms", a, b)], VerdictConfig(slower_rule="zero"))
    assert m.verdict == "inconclusive" and z.verdict == "slower"


def _curve(f, pauses=(0, 0.3, 0.6, 1, 1.5, 2, 3, 4), reps=8, seed=0):
    rng = np.random.default_rng(seed)
    p = np.repeat(pauses, reps).astype(float)
    return p, np.array([f(x) for x in p]) * rng.lognormal(0, 0.05, p.size)


def test_shape_choice_none_step_two_steps_ramp():
    assert fit_shape(*_curve(lambda x: 20.0)).shape == "none"
    step = fit_shape(*_curve(lambda x: 20.0 if x < 1.2 else 60.0))
    assert step.shape == "step" and (step.last_warm_s, step.first_woken_s) == (1.0, 1.5)
    assert 35 < step.penalty_ms < 45 and step.penalty_ci[0] < step.penalty_ms < step.penalty_ci[1]
    two = fit_shape(*_curve(lambda x: 20.0 if x < 1 else (40.0 if x < 3 else 90.0)))
    assert two.shape == "two steps" and (two.first_woken_s, two.second_first_s) == (1.0, 3.0)
    ramp = fit_shape(*_curve(lambda x: 20.0 * np.exp(np.log(4) * np.clip((x - 0.5) / 3, 0, 1))))
    assert ramp.shape == "ramp"
    assert "between 1 s and 1.5 s" in step.threshold_text()  # an interval, never one grid point
    p, y = _curve(lambda x: 20.0, reps=3)
    y[p >= 3] *= np.array([1.0, 8.0, 1.0] * 2)  # one outlier per long pause: no clear step
    assert not fit_shape(p, y).has_step


def test_new_and_moved_steps_detected():
    flat = fit_shape(*_curve(lambda x: 20.0))
    new = fit_shape(*_curve(lambda x: 20.0 if x < 2 else 60.0, seed=1))
    early = fit_shape(*_curve(lambda x: 20.0 if x < 0.5 else 60.0, seed=2))
    late = fit_shape(*_curve(lambda x: 20.0 if x < 1.2 else 60.0, seed=3))
    key = ("m", "s")
    assert step_changes({key: flat}, {key: new})[0]["change"] == "new"
    assert step_changes({key: late}, {key: early})[0]["change"] == "earlier"
    assert step_changes({key: early}, {key: late})[0]["change"] == "later"
    assert step_changes({key: late}, {key: late}) == []
