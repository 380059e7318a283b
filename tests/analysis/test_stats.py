import math
import numpy as np
import pandas as pd

from harness.analysis.stats import bootstrap_median_ci, measured, summarize_by_pause


def test_bootstrap_ci_brackets_the_median_and_is_deterministic():
    x = np.random.default_rng(3).normal(100, 5, 60)
    lo, hi = bootstrap_median_ci(x)
    assert lo < np.median(x) < hi
    assert (lo, hi) == bootstrap_median_ci(x)
    assert hi - lo < 6  # ~ 2 * 1.96 * 1.25 * 5 / sqrt(60) ≈ 3.2


def test_bootstrap_degenerate_inputs():
    assert np.isnan(bootstrap_median_ci([])[0])
    assert bootstrap_median_ci([4.0]) == (4.0, 4.0)
    assert bootstrap_median_ci([2.0, 2.0, 2.0]) == (2.0, 2.0)


def _frame():
    rows = []
    for rep in range(5):
        for pause, base in ((0.0, 10.0), (1.5, 200.0)):
            rows.append({"model": "m", "setting": "s", "phase": "measure", "pause_requested_s": pause,
                         "pause_actual_s": pause, "latency_ms": base + rep, "server_prompt_ms": base - 1,
                         "error": None})
    rows.append({"model": "m", "setting": "s", "phase": "warmup", "pause_requested_s": 0.0, "pause_actual_s": None,
                 "latency_ms": 9999.0, "server_prompt_ms": 1.0, "error": None})
    rows.append({"model": "m", "setting": "s", "phase": "measure", "pause_requested_s": 0.0, "pause_actual_s": 0.0,
                 "latency_ms": 5000.0, "server_prompt_ms": None, "error": "HTTP 500"})
    return pd.DataFrame(rows)


def test_summary_excludes_warmup_and_errors():
    frame = _frame()
    assert len(measured(frame)) == 10
    s = summarize_by_pause(frame)
    assert list(s["pause_requested_s"]) == [0.0, 1.5]
    row0 = s.iloc[0]
    assert row0["n"] == 5 and row0["median"] == 12.0 and row0["max"] == 14.0
    assert math.isnan(row0["ci_low"]) and math.isnan(row0["ci_high"])  # n=5: no honest 95% interval
    assert s.iloc[1]["median"] == 202.0


def test_summary_of_nothing():
    assert summarize_by_pause(pd.DataFrame()).empty
