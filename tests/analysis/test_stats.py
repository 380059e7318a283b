import math
import numpy as np
import pandas as pd

from harness.analysis.stats import measured, summarize_by_pause


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
