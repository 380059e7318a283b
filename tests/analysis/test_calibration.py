"""Calibration checks: order-statistic intervals for quantiles, ok/over per target, the findings."""

import math

import numpy as np

from harness.analysis.calibration import TARGETS, _check, calibration_findings, quantile_interval
from harness.analysis.intervals import median_interval


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


def test_a_figure_the_run_did_not_measure_is_neither_ok_nor_over():
    """Runs recorded before lbench measured its own work (no client_ms) say so, not "over"."""
    checks = [_check("overhead_p50_ms", 0.4, 300, (0.35, 0.45)),
              _check("harness_p50_ms", math.nan, 0, (math.nan, math.nan))]
    assert checks[1]["ok"] is None and checks[1]["interval_vs_target"] == "not measured"
    lines = calibration_findings(checks, [])
    assert lines[0] == "1 of 1 targets met. harness_p50_ms was not measured in this run."
    assert len(lines) == 2  # no sentence for the unmeasured figure


def test_harness_is_the_measured_client_work_and_beyond_floor_the_old_bound():
    import pandas as pd

    from harness.analysis.calibration import STEADY_AFTER, calibration_figures

    n = STEADY_AFTER + 20
    rows = [{"run_id": "r", "cell": 0, "phase": "measure", "seq": i, "rep": 0, "pause_requested_s": 0.0,
             "pause_actual_s": 0.0, "latency_ms": 2.0, "server_ms": 1.0, "server_prompt_ms": 0.9,
             "overhead_ms": 1.0, "client_ms": 0.05, "error": None, "http_status": 200} for i in range(n)]
    rows += [{"run_id": "r", "cell": 0, "phase": "floor-http", "seq": -1, "rep": 0, "pause_requested_s": 0.0,
              "pause_actual_s": 0.0, "latency_ms": 0.1, "error": None, "http_status": 200}] * 5
    fig = calibration_figures(pd.DataFrame(rows), [{"sweep_wall_s": 1.0}])
    assert abs(fig["harness_p50_ms"] - 0.05) < 1e-9
    assert abs(fig["beyond_floor_p50_ms"] - 0.9) < 1e-9  # 2 ms - 1 ms server - 0.1 ms floor


def test_efficiency_parts_add_up_to_the_excess():
    import pandas as pd

    from harness.analysis.calibration import efficiency_parts

    good = pd.DataFrame({"pause_requested_s": [0.0, 0.1], "pause_actual_s": [0.0005, 0.1005],
                         "overhead_ms": [0.5, 1.5], "client_ms": [0.05, 0.05], "server_ms": [1.0, 1.0]})
    denominator = 0.1 + 0.002
    parts = efficiency_parts(good, denominator)
    wall = good["pause_actual_s"].sum() + (good["server_ms"] + good["overhead_ms"]).sum() / 1000
    assert abs(1 + sum(parts.values()) - wall / denominator) < 1e-9
    assert abs(parts["efficiency_client"] - 0.0001 / denominator) < 1e-12


def test_efficiency_finding_names_where_the_excess_went():
    check = {**_check("efficiency", 1.037, 1400, (math.nan, math.nan)),
             "parts": {"efficiency_server_untimed": 0.025, "efficiency_client": 0.006, "efficiency_between": 0.006}}
    (line,) = [x for x in calibration_findings([check], []) if x.startswith("Sweep efficiency")]
    assert line.endswith("Its excess over 1: the server's untimed work and HTTP +0.025, lbench inside requests "
                         "+0.006, between requests +0.006.")
