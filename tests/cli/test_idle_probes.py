"""Cache state, memory probes and the llama-idle cross-check on the real engine."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from harness.probes import pagecache

pytestmark = pytest.mark.engine


def only_run(env):
    (run_dir,) = list(Path(env["LBENCH_RESULTS_DIR"]).iterdir())
    return run_dir


@pytest.mark.skipif(not pagecache.available(), reason="needs Linux page-cache control")
def test_cold_start_goes_from_zero_to_fully_resident(engine_env):
    r = run_cli("idle", "-m", "llama3.2-1b-q4", "--pauses", "0,0.6", "--reps", "2", "--warmup", "1",
                "--cache-state", "cold", "--device-probes", "pagecache", "--no-report", env=engine_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    run_dir = only_run(engine_env)
    (cell,) = json.loads((run_dir / "manifest.json").read_text())["cells"]
    assert cell["cache"]["state"] == "cold" and cell["cache"]["verified"] is True
    assert cell["cache"]["resident_pct_at_start"] < 5.0
    assert cell["cache"]["resident_pct_when_ready"] > 95.0
    assert cell["startup"]["n_threads"] >= 1 and cell["startup"]["server_load_ms"] > 0
    assert cell["device_sampling"]["sources"] == ["pagecache"]
    s = pd.read_parquet(run_dir / "samples.parquet")
    m = s[s["phase"] == "measure"]
    assert (m["cache_state"] == "cold").all()
    paused = m[m["pause_requested_s"] == 0.6]  # read in the pause, at least the guard before the request
    assert len(paused) and paused["file_resident_pct_before"].gt(95).all()
    assert paused["readings_before_send_s"].ge(0.25).all()
    # no reading is squeezed into a zero pause
    assert m[m["pause_requested_s"] == 0]["file_resident_pct_before"].isna().all()
    assert m["wired_bytes_before"].isna().all()  # a macOS reading: not available, not 0


def test_llama_idle_cross_check_on_tiny(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--engine", "llama-server,llama-idle", "--reps", "1",
                "--pauses", "0", env=engine_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    run_dir = only_run(engine_env)
    s = pd.read_parquet(run_dir / "samples.parquet")
    idle = s[s["engine"] == "llama-idle"]
    server = s[(s["engine"] == "llama-server") & (s["phase"] == "measure")]
    assert len(idle) == 18 and sorted(idle["pause_requested_s"].unique()) == [0.0, 0.8, 1.6, 2.4, 3.2, 4.0]
    assert set(server["pause_requested_s"]) == {0.0, 0.8, 1.6, 2.4, 3.2, 4.0}  # grid merged for the cross-check
    html = (run_dir / "report.html").read_text()
    assert "Cross-check: through HTTP vs llama-idle in-process" in html


def test_by_default_nothing_is_read_around_the_requests(engine_env):
    """docs/mac.md finding 15: no reading is taken on the request's thread; device probes (the only readings)
    are off by default, so a default run reads nothing at all: no reading column is filled."""
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.2", "--reps", "2", "--warmup", "1",
                "--no-report", env=engine_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    run_dir = only_run(engine_env)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["device_probes"] == "off" and "request_probes" not in manifest["config"]
    (cell,) = manifest["cells"]
    assert "device_sampling" not in cell
    m = pd.read_parquet(run_dir / "samples.parquet")
    m = m[m["phase"] == "measure"]
    readings = [c for c in m.columns if c.endswith("_before")]
    assert all(m[c].isna().all() for c in readings), readings
    assert not (run_dir / "device_samples.parquet").exists()
