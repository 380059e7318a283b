"""harness/analysis/variance_sources.py: per-run levels and the spread of each factor, on
constructed samples tables with known answers (and a simulation for the interval's coverage)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.analysis.variance_sources import design_spreads, paired_halves_sd, run_level, spread, table


def samples(levels_ms: dict[float, list[float]], *, server_scale: float = 0.9, first_rep: int = 0) -> pd.DataFrame:
    rows = [{"phase": "warmup", "rep": None, "pause_requested_s": 0.0, "latency_ms": 999.0, "server_ms": 999.0,
             "server_prompt_ms": 999.0, "error": None}]
    for pause, values in levels_ms.items():
        for i, v in enumerate(values):
            rows.append({"phase": "measure", "rep": first_rep + i, "pause_requested_s": pause, "latency_ms": v,
                         "server_ms": v * server_scale, "server_prompt_ms": v * server_scale / 2, "error": None})
    rows.append({"phase": "measure", "rep": first_rep, "pause_requested_s": 0.0, "latency_ms": 1e6,
                 "server_ms": None, "server_prompt_ms": None, "error": "HTTP 500"})  # a failed request
    return pd.DataFrame(rows)


def test_run_level_is_the_log_median_of_measured_answered_requests():
    s = samples({0.0: [10.0, 20.0, 30.0, 40.0], 1.5: [100.0, 200.0, 300.0]})
    assert run_level(s, 0.0) == pytest.approx(math.log(25.0))  # warm-up and the failed request are left out
    assert run_level(s, 1.5) == pytest.approx(math.log(200.0))
    assert run_level(s, 0.0, "server_ms") == pytest.approx(math.log(22.5))
    assert run_level(s, 0.0, reps=(1, 2)) == pytest.approx(math.log(15.0))  # the first two reps
    assert run_level(s, 0.0, reps=(3, 4)) == pytest.approx(math.log(35.0))
    assert run_level(samples({0.0: [10.0, 30.0]}, first_rep=1), 0.0, reps=(1, 1)) == pytest.approx(math.log(10.0))
    assert math.isnan(run_level(s, 0.7))


def test_spread_and_its_interval():
    s = spread("d", "design", "x", 0.0, [0.0, 0.1, 0.2, math.nan])
    assert s.runs == 3 and s.sd == pytest.approx(0.1)
    assert s.ci[0] < 0.1 < s.ci[1] and s.ci[1] / s.ci[0] > 5  # 2 df: a wide interval
    assert math.isnan(spread("d", "design", "x", 0.0, [0.3]).sd)


def test_paired_halves_known_answer_and_coverage():
    sd, ci, n = paired_halves_sd([0.0, 0.2], [0.2, 0.0])
    assert n == 2 and sd == pytest.approx(math.sqrt(0.04 / 2))  # mean(d^2) / 2
    rng = np.random.default_rng(1)
    true_sd, hits, trials = 0.1, 0, 400
    for _ in range(trials):  # each run its own level, halves drawn around it: coverage of the 95% interval
        level = rng.normal(0, 1.0, 6)
        _, (lo, hi), _ = paired_halves_sd(level + rng.normal(0, true_sd, 6), level + rng.normal(0, true_sd, 6))
        hits += lo <= true_sd <= hi
    assert 0.92 <= hits / trials <= 0.98


def test_design_spreads_separate_between_process_from_within_process_spread():
    rng = np.random.default_rng(0)
    runs = []
    for _ in range(8):  # a large per-process offset, little noise within a process
        base = 50.0 * math.exp(rng.normal(0, 0.5))
        runs.append(samples({0.0: list(base * np.exp(rng.normal(0, 0.01, 8)))}))
    rows = pd.DataFrame([s.row() for s in design_spreads("d", runs, [0.0])])
    proc = rows[rows["factor"] == "process"].set_index("variant")["sd_log"]
    between = proc[proc.index.str.startswith("between")].iloc[0]
    within = proc[proc.index.str.startswith("within")].iloc[0]
    assert between > 0.2 and within < 0.02  # the process start, not the samples, holds the spread
    reps = rows[rows["factor"] == "reps"]
    assert list(reps["variant"]) == ["reps 1-2", "reps 1-4", "reps 1-8"]
    assert set(rows[rows["factor"] == "metric"]["variant"]) == {"latency_ms", "server_ms", "server_prompt_ms"}
    metric = rows[rows["factor"] == "metric"].set_index("variant")["sd_log"]
    assert metric["server_ms"] == pytest.approx(metric["latency_ms"])  # a constant scale leaves the log sd alone
    assert set(table({"d": runs, "e": runs[:3]}, [0.0])["design"]) == {"d", "e"}


def test_within_run_components_known_answer():
    from harness.analysis.variance_sources import within_run

    flat = samples({0.0: [10.0] * 9 + [20.0]})  # one stall in ten, no spread otherwise
    w = within_run("d", [flat, flat], 0.0)
    assert w.runs == 2 and w.within_sd == pytest.approx(0.0) and w.stall_p == pytest.approx(0.1)
    rng = np.random.default_rng(3)
    runs = [samples({0.0: list(100 * np.exp(rng.normal(0, 0.2, 400)))}) for _ in range(3)]
    assert within_run("d", runs, 0.0).within_sd == pytest.approx(0.2, rel=0.15)
