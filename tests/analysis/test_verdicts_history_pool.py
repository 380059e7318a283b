"""The pooled t of a history-window baseline (``VerdictConfig.pool_spread``,
``lbench gate --baseline history:<series>``): known answers, each run counted once, and its
coverage and A/A false-alarm rate in a simulation (test input, not a reported figure)."""

import math

import numpy as np

from harness.analysis.verdicts import GroupData, VerdictConfig, decide_groups, spread


def test_the_window_counted_once_known_answer():
    ya, yb = np.log([10.0, 11.0, 12.0, 10.5]), np.log([11.0, 13.0])
    s = spread(ya, yb, pool=True)
    ss = float(np.sum((ya - ya.mean()) ** 2) + np.sum((yb - yb.mean()) ** 2))
    assert s.df == 4 and math.isclose(s.sd_run, math.sqrt(ss / 4))  # 4 + 2 runs - 2: no run twice
    assert math.isclose(s.se, math.sqrt(ss / 4 * (1 / 4 + 1 / 2))) and "history window" in s.method
    assert spread(ya, yb).method.startswith("Welch")  # without pool: unchanged
    one = spread(ya, yb[:1], pool=True)  # one candidate run: the same pooled t the one-run branch uses
    plain = spread(ya, yb[:1])
    assert (one.se, one.df) == (plain.se, plain.df)
    with_history = spread(ya, yb, (0.01, 3.0), pool=True)  # a separate batch still adds its df
    assert with_history.df == 7


def test_history_window_coverage_and_aa_false_alarms():
    """A window of 10 baseline runs against 2 candidate runs, between-run log sd 0.10: the 95%
    interval covers the true ratio, and at a true ratio of 1 'slower' stays under the nominal rate."""
    rng = np.random.default_rng(3)
    cfg = VerdictConfig(pool_spread=True)
    trials, covered, slower = 300, 0, 0
    for _ in range(trials):
        def runs(k):
            return [20 * rng.lognormal(rng.normal(0, 0.10), 0.03, 12) for _ in range(k)]
        (v,) = decide_groups([GroupData("m", "s", "warm", "latency_ms", runs(10), runs(2))], cfg)
        lo, hi = v.ratio_ci
        covered += lo <= 1 <= hi
        slower += v.verdict == "slower"
        assert v.df == 10 and "history window" in v.unit
    assert covered / trials >= 0.92  # nominal 0.95; 300 trials' sampling slack
    assert slower / trials <= 0.025
