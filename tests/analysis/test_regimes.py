"""The one wake model (BIC shape) on synthetic data with known answers."""

import numpy as np
import pytest

from harness.analysis.regimes import fit_shape, penalty_per_gb, wake_model, wake_thresholds

PAUSES = [0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0, 3.0]


def synthetic(step_at, warm=20.0, woken=60.0, reps=8, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    p = np.repeat(PAUSES, reps)
    base = np.where(p >= step_at, woken, warm) if step_at is not None else np.full(p.shape, warm)
    return p, base * rng.lognormal(0, noise, p.size)


@pytest.mark.parametrize("step_at", [0.8, 1.1, 1.4])
def test_change_point_recovered(step_at):
    p, y = synthetic(step_at)
    f = fit_shape(p, y)
    assert f.shape == "step" and f.first_woken_s == pytest.approx(step_at)
    assert f.last_warm_s < step_at
    assert f.penalty_ci[0] <= 40.0 <= f.penalty_ci[1]
    assert f.warm_ci[0] <= f.warm_median_ms <= f.warm_ci[1] and f.woken_ci[0] <= f.woken_median_ms <= f.woken_ci[1]
    assert f.woken_median_ms / f.warm_median_ms == pytest.approx(3.0, rel=0.1)


def test_no_step_is_not_a_regime_change():
    p, y = synthetic(None)
    f = fit_shape(p, y)
    assert f.shape == "none" and f.penalty_ms is None and f.n_woken == 0
    assert f.warm_ci[0] <= f.warm_median_ms <= f.warm_ci[1]
    assert f.as_row()["threshold_s"] is None


def test_small_step_below_min_step_is_ignored():
    p, y = synthetic(1.0, warm=20.0, woken=20.6)  # +3%
    assert not fit_shape(p, y).has_step


def test_one_model_gives_compare_its_thresholds():
    import pandas as pd

    p, y = synthetic(1.1)
    frame = pd.DataFrame({"model": "m", "setting": "s", "pause_requested_s": p, "latency_ms": y})
    shapes = wake_model(frame)
    assert wake_thresholds(shapes) == {("m", "s"): pytest.approx(1.1)}
    assert shapes[("m", "s")].as_row()["threshold_s"] == pytest.approx(1.1)


def test_penalty_per_gb_slope():
    gb = [1.3, 3.4, 8.5, 16.0]
    pts = [(g, 50.0 + 25.0 * g + e) for g, e in zip(gb, [1.0, -2.0, 1.5, -0.5])]
    fit = penalty_per_gb(pts)
    assert fit["slope_ci"][0] <= 25.0 <= fit["slope_ci"][1] and fit["r2"] > 0.99
    assert penalty_per_gb(pts[:2]) is None


def test_wake_summary_fits_penalty_per_gb_across_models():
    import pandas as pd

    from harness.analysis.regimes import wake_summary

    rows, models = [], []
    for label, gb in (("s", 1.0), ("m", 3.0), ("l", 8.0)):
        p, y = synthetic(1.1, warm=20.0, woken=20.0 + 30.0 * gb, seed=int(gb))
        rows += [{"model": label, "setting": "x", "pause_requested_s": a, "latency_ms": b} for a, b in zip(p, y)]
        models.append({"label": label, "bytes": int(gb * 1e9)})
    wake, per_gb = wake_summary(pd.DataFrame(rows), models)
    assert {w["model"]: w["threshold_s"] for w in wake} == {"s": 1.1, "m": 1.1, "l": 1.1}
    (fit,) = per_gb
    assert fit["setting"] == "x" and fit["n_models"] == 3
    assert fit["slope_ci"][0] <= 30.0 <= fit["slope_ci"][1]


def test_a_richer_shape_must_beat_a_simpler_one_by_the_minimum_bic_gain():
    from harness.analysis.regimes import MIN_BIC_GAIN, _choose, fit_shape

    # a ramp whose BIC is 0.07 below the step's is a coin toss: the simpler step stays
    assert _choose({"none": (10.0, ()), "step": (0.0, (1.0,)), "ramp": (-0.07, (0.5, 2.0))}, MIN_BIC_GAIN) == "step"
    assert _choose({"none": (10.0, ()), "step": (0.0, (1.0,)), "ramp": (-6.5, (0.5, 2.0))}, MIN_BIC_GAIN) == "ramp"
    assert _choose({"none": (0.0, ()), "step": (-5.9, (1.0,))}, MIN_BIC_GAIN) == "none"
    assert _choose({"none": (0.0, ()), "step": (-5.9, (1.0,)), "two steps": (-12.0, (1.0, 2.0))},
                   MIN_BIC_GAIN) == "two steps"
    # end to end: a clear step is still found, and the chosen shape's BIC is recorded with the others
    rng = np.random.default_rng(3)
    pauses = np.repeat([0.0, 0.5, 1.0, 1.5, 2.0], 8)
    y = np.where(pauses >= 1.5, 200.0, 100.0) * np.exp(rng.normal(0, 0.02, pauses.size))
    fit = fit_shape(pauses, y)
    assert fit.shape == "step" and fit.first_woken_s == 1.5
    assert fit.bic["none"] - fit.bic["step"] >= MIN_BIC_GAIN
