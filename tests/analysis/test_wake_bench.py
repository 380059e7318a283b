"""The wake model's benchmark: calibration recovers known components; simulation and permutation count
what they say (figures themselves come from `lbench wake-bench`, not from tests)."""

import numpy as np
import pandas as pd
import pytest

from harness.analysis.wake_bench import Calibration, _mixture_median, calibrate, permuted, simulate

GRID = (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 2.0, 2.5, 3.0, 4.0)


def _cell(seed=0, reps=12, within=0.08, stall_every=30):
    rng = np.random.default_rng(seed)
    p = np.repeat(GRID, reps)
    y = np.where(p >= 1.1, 130.0, 100.0) * rng.lognormal(0, within, p.size)
    y[::stall_every] *= 8.0  # stalls of 8x, 1 in 30
    return pd.DataFrame({"pause_requested_s": p, "latency_ms": y})


def test_calibration_recovers_the_components():
    cal = calibrate(_cell(), "test")
    assert cal.pauses_s == GRID and cal.reps == 12 and cal.n_samples == 216
    assert cal.within_sd == pytest.approx(0.08, rel=0.15)
    assert cal.pause_sd < 0.03  # the step is the shape's, not pause-to-pause scatter
    assert cal.n_stalls == 216 // 30 + 1 and cal.stall_p == pytest.approx(cal.n_stalls / 216)
    assert np.median(cal.stall_sizes) == pytest.approx(8.0, rel=0.2)


def test_mixture_median_of_equal_lognormals_is_their_median():
    assert _mixture_median(np.log([100.0, 100.0]), 0.1) == pytest.approx(100.0, rel=1e-6)
    assert 100.0 < _mixture_median(np.log([100.0, 120.0]), 0.05) < 120.0


def test_simulation_counts_every_trial_in_each_condition():
    cal = Calibration("given", GRID, 6, 100.0, 0.05, 0.0, 0.03, (4.0, 10.0))
    rows = simulate(cal, trials=10, seed=0, steps=(0.0, 1.0), n_boot=100)
    assert [(r["step"], r["stalls"]) for r in rows] == [(0.0, False), (1.0, False), (0.0, True), (1.0, True)]
    for r in rows:
        assert sum(r["shapes"].values()) == 10 and r["place_s"] == 1.2  # the grid's middle pause
        assert r["no_clear_step"]["k"] == r["shapes"].get("none", 0)
    doubled = rows[1]
    assert doubled["step_at_place"]["k"] >= 8  # a +100% step at sd 0.05 is found where it is
    assert rows[2]["stalls_flagged"]["n"] > 0 and rows[0]["stalls_flagged"]["n"] == 0


def test_permuted_labels_are_counted_as_false_shapes():
    res = permuted(_cell(reps=6), "test", permutations=5, seed=0, n_boot=100)
    assert sum(res["shapes"].values()) == 5
    assert res["false_shape"]["k"] == 5 - res["shapes"].get("none", 0)
    assert res["original"].startswith("a wake step between 1 s and 1.1 s")
