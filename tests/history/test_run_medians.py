"""Each idle run's warm / woken median, computed once by the catalog, against numpy's answer."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.analysis.intervals import median_interval
from harness.history.run_medians import idle_medians


def _samples(run_dir, pauses_latencies, setting="keep-alive=default"):
    run_dir.mkdir(parents=True)
    rows = [{"run_id": "another-id", "model": "m", "setting": setting, "phase": "measure", "error": None,
             "pause_requested_s": p, "latency_ms": v} for p, v in pauses_latencies]
    rows += [{"run_id": "x", "model": "m", "setting": setting, "phase": "warmup", "error": None,
              "pause_requested_s": 0.01, "latency_ms": 1e6},  # not measured: left out
             {"run_id": "x", "model": "m", "setting": setting, "phase": "measure", "error": "timeout",
              "pause_requested_s": 0.01, "latency_ms": 1e6}]  # an error: left out
    pd.DataFrame(rows).to_parquet(run_dir / "samples.parquet", index=False)
    return run_dir


def _bounds(run_id, last_warm, first_woken):
    return pd.DataFrame([
        {"run_id": run_id, "model": "m", "setting": "keep-alive=default", "metric": "wake_last_warm_s",
         "value": last_warm},
        {"run_id": run_id, "model": "m", "setting": "keep-alive=default", "metric": "wake_first_woken_s",
         "value": first_woken}])


def test_warm_and_woken_medians_follow_the_runs_wake_model(tmp_path):
    rng = np.random.default_rng(3)
    warm = rng.lognormal(1.0, 0.2, 40)
    woken = rng.lognormal(3.0, 0.2, 30)
    data = [(0.1, v) for v in warm[:20]] + [(1.0, v) for v in warm[20:]] + [(5.0, v) for v in woken]
    run = _samples(tmp_path / "mach" / "20260101T000000Z-idle-0001", data)
    rows, failed = idle_medians([run], _bounds(run.name, 1.0, 5.0))
    assert failed == []
    got = {r["metric"]: r for r in rows}
    assert set(got) == {"idle_warm_p50", "idle_woken_p50"}
    for metric, values in (("idle_warm_p50", warm), ("idle_woken_p50", woken)):
        lo, hi, _ = median_interval(values)
        row = got[metric]
        assert row["run_id"] == run.name  # named by its directory, not the table's run_id column
        assert row["value"] == pytest.approx(float(np.median(values)))
        assert (row["lo"], row["hi"]) == pytest.approx((lo, hi))
        assert row["n"] == len(values)


def test_without_a_step_every_pause_is_warm_and_no_woken_median(tmp_path):
    values = [float(v) for v in range(1, 12)]
    run = _samples(tmp_path / "mach" / "20260101T000000Z-idle-0002", [(0.1 * i, v) for i, v in enumerate(values)])
    rows, failed = idle_medians([run], _bounds(run.name, None, None))
    assert failed == [] and [r["metric"] for r in rows] == ["idle_warm_p50"]
    assert rows[0]["value"] == 6.0 and rows[0]["n"] == 11
    lo, hi, _ = median_interval(values)
    assert (rows[0]["lo"], rows[0]["hi"]) == (lo, hi)


def test_a_damaged_table_costs_only_its_own_run(tmp_path):
    good = _samples(tmp_path / "mach" / "20260101T000000Z-idle-0003", [(0.1, float(v)) for v in range(1, 8)])
    bad = tmp_path / "mach" / "20260101T000001Z-idle-0004"
    bad.mkdir()
    (bad / "samples.parquet").write_bytes(b"PAR1 not really parquet")
    rows, failed = idle_medians([good, bad], pd.DataFrame())
    assert [r["run_id"] for r in rows] == [good.name]
    assert len(failed) == 1 and bad.name in failed[0]


def test_runs_without_samples_give_no_rows(tmp_path):
    empty = tmp_path / "mach" / "20260101T000000Z-idle-0005"
    empty.mkdir(parents=True)
    assert idle_medians([empty], pd.DataFrame()) == ([], [])
