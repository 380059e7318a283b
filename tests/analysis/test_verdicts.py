"""Known-answer tests for the run-as-unit verdicts, order-statistic intervals and shape choice."""

import math

import numpy as np

from harness.analysis.regimes import fit_shape, step_changes
from harness.analysis.verdicts import (GroupData, VerdictConfig, boot_log_ratio, decide_groups, holm,
                                       median_interval, min_n_for_median_interval)


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
    assert min_n_for_median_interval() == 6
    assert all(math.isnan(v) for v in median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))


def _runs(rng, n_runs, n, level=20.0, run_sd=0.0, sd=0.05):
    return [level * rng.lognormal(rng.normal(0, run_sd), sd, n) for _ in range(n_runs)]


def test_three_way_verdicts_against_the_band():
    rng = np.random.default_rng(1)
    cfg = VerdictConfig(margin=0.05)
    a = _runs(rng, 4, 30, sd=0.02)
    groups = [GroupData("m", "s", "same", "latency_ms", a, _runs(rng, 4, 30, sd=0.02)),
              GroupData("m", "s", "slow", "latency_ms", a, _runs(rng, 4, 30, level=26.0, sd=0.02)),
              GroupData("m", "s", "fast", "latency_ms", a, _runs(rng, 4, 30, level=14.0, sd=0.02)),
              GroupData("m", "s", "noisy", "latency_ms", a, _runs(rng, 4, 6, sd=0.6)),
              GroupData("m", "s", "few", "latency_ms", a, [np.array([20.0, 21.0])])]
    v = {g.regime: g for g in decide_groups(groups, cfg)}
    assert v["same"].verdict == "no change" and v["same"].unit == "runs"
    assert v["slow"].verdict == "slower" and v["slow"].ratio_ci[0] > 1.05
    assert v["fast"].verdict == "faster"
    assert v["noisy"].verdict == "inconclusive" and v["noisy"].detectable > v["same"].detectable
    assert v["few"].verdict == "refused"
    assert "slower than A: slower" in v["slow"].line() and "n=4 vs 4 runs" in v["slow"].line()


def test_between_run_variance_enters_the_interval():
    rng = np.random.default_rng(3)
    a = _runs(rng, 5, 20, run_sd=0.15, sd=0.02)
    b = _runs(rng, 5, 20, run_sd=0.15, sd=0.02)
    two_level = np.ptp(np.percentile(boot_log_ratio(a, b), [2.5, 97.5]))
    pooled = np.ptp(np.percentile(boot_log_ratio([np.concatenate(a)], [np.concatenate(b)]), [2.5, 97.5]))
    assert two_level > 2 * pooled  # pooling runs as one bag of samples hides run-to-run spread


def test_holm_adjustment_and_secondary_metrics_do_not_vote():
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    rng = np.random.default_rng(5)
    a = _runs(rng, 3, 30, sd=0.02)
    groups = [GroupData("m", "s", f"g{i}", "latency_ms", a, _runs(rng, 3, 30, sd=0.02)) for i in range(5)]
    groups.append(GroupData("m", "s", "g0", "server_prompt_ms", a, _runs(rng, 3, 30, level=30.0, sd=0.02)))
    out = decide_groups(groups, VerdictConfig())
    assert [v.primary for v in out] == [True] * 5 + [False]
    assert out[-1].verdict == "slower" and "secondary" in out[-1].line()


def test_aa_false_alarms_rare_with_run_level_noise():
    """Simulated A/A pairs with a per-run level shift (sd 5%): 'slower' at most a few percent."""
    rng = np.random.default_rng(11)
    cfg = VerdictConfig(margin=0.05, n_boot=400)
    slower = 0
    trials = 100
    for t in range(trials):
        a = _runs(rng, 3, 10, run_sd=0.05, sd=0.1)
        b = _runs(rng, 3, 10, run_sd=0.05, sd=0.1)
        slower += decide_groups([GroupData("m", "s", "r", "latency_ms", a, b)], cfg, seed=t)[0].verdict == "slower"
    assert slower <= 6


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
