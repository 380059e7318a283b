"""Calibration checks: order-statistic intervals for quantiles, ok/over per target, the findings."""

import math

import numpy as np

from harness.analysis.calibration import TARGETS, _check, calibration_findings, quantile_interval
from harness.analysis.verdicts import median_interval


def test_quantile_interval_for_the_median_matches_the_median_interval():
    rng = np.random.default_rng(1)
    for n in (5, 6, 7, 20, 51):
        x = rng.normal(size=n)
        lo, hi = quantile_interval(x, 0.5)
        ref = median_interval(x)[:2]
        assert (math.isnan(lo) and math.isnan(ref[0])) or (lo, hi) == ref


def test_p99_needs_hundreds_of_samples_and_then_covers_the_true_quantile():
    assert all(math.isnan(v) for v in quantile_interval(np.arange(100.0), 0.99))
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(200):
        lo, hi = quantile_interval(rng.uniform(size=2000), 0.99)
        assert lo <= hi
        hits += lo <= 0.99 <= hi
    assert hits >= 180  # nominal 95% (exact coverage is at least that); 200 trials


def test_findings_say_which_targets_hold_with_n_and_intervals():
    checks = [_check("overhead_p50_ms", 0.4, 300, (0.35, 0.45)),
              _check("overhead_p99_ms", 3.0, 300, (math.nan, math.nan)),
              _check("harness_p50_ms", 0.21, 300, (0.15, 0.25)),
              _check("pause_error_p99_ms", 0.5, 500, (0.4, 0.6)),
              _check("efficiency", 1.01, 500, (math.nan, math.nan))]
    assert [c["ok"] for c in checks] == [True, False, False, True, True]
    assert [c["interval_vs_target"] for c in checks] == ["below", "no interval", "straddles", "below", "no interval"]
    pauses = [{"pause": "0.02 s", "pause_error_ok": True}, {"pause": "0.3 s", "pause_error_ok": False}]
    lines = calibration_findings(checks, pauses)
    assert lines[0] == "3 of 5 targets met; over: overhead_p99_ms, harness_p50_ms."
    assert "0.400 ms (95% CI 0.350 ms – 0.450 ms, n=300), within the target of 0.500 ms" in lines[1]
    assert "(n=300, too few for a 95% interval), OVER the target of 2.000 ms" in lines[2]
    assert "straddles the target" in lines[3]
    assert "one ratio over the run" in lines[5] and f"{TARGETS['efficiency']:.3f}" in lines[5]
    assert lines[-1] == "Pause error p99 is over 1 ms at: 0.3 s."
    assert calibration_findings([], []) == ["No measured samples: nothing to check against the targets."]
