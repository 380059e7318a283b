"""`lbench idle` crossing CPU wake knobs, with the per-cell self-check, on the real llama-server."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

pytestmark = pytest.mark.engine


def test_cpu_knob_axes_self_check_and_samples(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.05", "--reps", "2", "--warmup", "1",
                "--threads", "1,2", "--omp-wait-policy", "active", "--self-check", "3", "--no-report",
                env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    m = json.loads((run_dir / "manifest.json").read_text())
    assert [c["setting"] for c in m["cells"]] == ["keep-alive=default,threads=1,omp-wait=active",
                                                  "keep-alive=default,threads=2,omp-wait=active"]
    for cell, n in zip(m["cells"], (1, 2)):
        assert cell["argv"][cell["argv"].index("-t") + 1] == str(n) and cell["cpu_knobs"]["threads"] == n
        assert cell["env_overrides"] == {"OMP_WAIT_POLICY": "ACTIVE"}
        assert cell["self_check"]["n"] == 3 and cell["self_check"]["floor_http_p50_ms"] > 0
        assert isinstance(cell["self_check"]["warnings"], list)
        assert cell["n_samples"] == 4  # self-check rows are not counted as measurements
    assert m["like_for_like"]["match"] is None and m["client"] == {"cpus": None, "nice": None, "spin": False}
    samples = pd.read_parquet(run_dir / "samples.parquet")
    measured = samples[samples["phase"] == "measure"]
    assert len(measured) == 2 * 2 * 2 and set(measured["knob_threads"]) == {1, 2}
    assert set(measured["knob_omp_wait"]) == {"active"}
    assert (samples["phase"] == "selfcheck").sum() == 6 and (samples["phase"] == "floor-queue").sum() == 6
    assert set(samples.loc[samples["phase"] == "floor-http", "floor_path"]) == {"/health"}
    assert "self-check tiny-q8 / keep-alive=default,threads=1,omp-wait=active" in r.stdout.replace("\n", " ")


def test_bad_knob_is_exit_2_and_leaves_nothing(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--threads", "zero", env=engine_env)
    assert r.returncode == 2 and "bad threads value" in r.stderr
    results = Path(engine_env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())


def test_calibrate_reports_the_decomposition(engine_env):
    r = run_cli("calibrate", "--reps", "1", "--client-spin", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    figures = json.loads((run_dir / "calibration.json").read_text())
    for key in ("floor_p50_ms", "floor_after_pause_p50_ms", "harness_p50_ms", "harness_after_pause_p99_ms",
                "beyond_floor_p50_ms"):
        assert figures[key] == figures[key], key  # measured, not NaN
    # the client's part of a request is inside it; it is not bounded by the overhead, because a client
    # preempted inside its send can still be "sending" while the server already computes
    assert 0 < figures["harness_p50_ms"]
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["client"]["spin"] is True
    samples = pd.read_parquet(run_dir / "samples.parquet")
    after = samples[(samples["phase"] == "floor-http") & (samples["pause_requested_s"] > 0)]
    assert set(after["pause_requested_s"]) == {0.02, 0.05, 0.1, 0.2, 0.3}
    measured = samples[samples["phase"] == "measure"]
    # the client's own work is measured on every request and is part of what the client saw
    assert measured["client_ms"].notna().all() and (measured["client_ms"] < measured["latency_ms"]).all()
