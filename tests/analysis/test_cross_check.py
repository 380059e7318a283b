"""The llama-idle cross-check: ratio of medians with an interval, judged against +/-5%."""

import numpy as np
import pandas as pd

from harness.analysis.idle import agreement, cross_check


def frame(run_id: str, server_ms: list[float], idle_ms: list[float], pause: float = 0.0) -> pd.DataFrame:
    rows = [{"run_id": run_id, "model": "m", "engine": "llama-server", "phase": "measure", "pause_requested_s": pause,
             "latency_ms": v + 0.5, "server_prompt_ms": v, "error": None, "http_status": 200} for v in server_ms]
    rows += [{"run_id": run_id, "model": "m", "engine": "llama-idle", "phase": "measure", "pause_requested_s": pause,
              "latency_ms": v, "server_prompt_ms": None, "error": None, "http_status": None} for v in idle_ms]
    return pd.DataFrame(rows)


def test_agreement_labels_follow_the_interval():
    assert agreement((0.97, 1.03)) == "agree"
    assert agreement((1.06, 1.2)) == "server slower"
    assert agreement((0.5, 0.9)) == "server faster"
    assert agreement((0.99, 1.08)) == "inconclusive"
    assert agreement((float("nan"), float("nan"))) == "inconclusive"


def test_tight_equal_samples_agree_and_a_10_percent_gap_does_not():
    rng = np.random.default_rng(0)
    same = frame("r1", list(10 + rng.normal(0, 0.05, 30)), list(10 + rng.normal(0, 0.05, 30)))
    (row,) = cross_check(same)
    assert row["agreement"] == "agree" and row["ratio_server_ci_low"] <= 1 <= row["ratio_server_ci_high"]
    assert (row["n_server"], row["n_llama_idle"], row["n_runs"]) == (30, 30, 1)
    slower = frame("r1", list(11 + rng.normal(0, 0.05, 30)), list(10 + rng.normal(0, 0.05, 30)))
    assert cross_check(slower)[0]["agreement"] == "server slower"


def test_pooled_runs_make_the_run_the_unit():
    """Two runs that each agree with themselves but disagree with each other: the pooled interval
    carries the between-run spread, so the pooled answer is not 'agree'."""
    rng = np.random.default_rng(1)
    a = frame("r1", list(10 + rng.normal(0, 0.02, 12)), list(10 + rng.normal(0, 0.02, 3)))
    b = frame("r2", list(12 + rng.normal(0, 0.02, 12)), list(10 + rng.normal(0, 0.02, 3)))
    (row,) = cross_check(pd.concat([a, b], ignore_index=True))
    assert row["n_runs"] == 2 and row["agreement"] != "agree"
    assert row["ratio_server_ci_high"] > 1.15  # reaches the slower run
    assert abs(row["ratio_server"] - np.sqrt(1.0 * 1.2)) < 0.02  # geometric mean of the per-run ratios


def test_too_few_samples_give_no_interval():
    (row,) = cross_check(frame("r1", [10.0, 10.1], [10.0, 10.2]))
    assert row["ratio_server_ci_low"] != row["ratio_server_ci_low"] and row["agreement"] == "inconclusive"
