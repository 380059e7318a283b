"""`lbench idle` end to end against the real llama-server on a tiny generated model."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from harness.schema import SAMPLE_COLUMNS

pytestmark = pytest.mark.engine


def test_short_sweep_writes_samples_manifest_and_report(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.05,0.2", "--reps", "2", "--warmup", "2",
                "--keep-alive", "default,none", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    results = Path(engine_env["LBENCH_RESULTS_DIR"])
    (run_dir,) = list(results.iterdir())
    assert "SYNTHETIC" in r.stderr and f"report: {run_dir / 'report.html'}" in r.stdout

    samples = pd.read_parquet(run_dir / "samples.parquet")
    assert list(samples.columns)[: len(SAMPLE_COLUMNS)] == list(SAMPLE_COLUMNS)
    measured = samples[samples["phase"] == "measure"]
    assert len(measured) == 3 * 2 * 2  # pauses x reps x settings
    assert (samples["phase"] == "warmup").sum() == 2 * 2
    assert measured["http_status"].eq(200).all() and measured["error"].isna().all()
    assert (measured["server_prompt_n"] == 1).all()  # prompt cached: one token re-evaluated
    assert (measured["pause_actual_s"] >= measured["pause_requested_s"]).all()
    assert set(measured["setting"]) == {"keep-alive=default", "keep-alive=none"}
    assert samples["run_id"].eq(run_dir.name).all()

    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["schema_version"] == 3 and m["status"] == "complete" and m["run_id"] == run_dir.name
    assert m["n_samples"] == len(samples)
    assert m["engine"]["build_number"] == 11434 and len(m["engine"]["sha256"]) == 64
    (model,) = m["models"]
    assert model["synthetic"] and model["arch"] == "llama" and len(model["sha256"]) == 64 and model["bytes"] > 0
    for key in ("os", "cpu_model", "ram_bytes", "python"):
        assert m["host"][key]
    assert m["command"].endswith("--keep-alive default,none")
    assert len(m["cells"]) == 2 and all(c["log"] and (run_dir / c["log"]).is_file() for c in m["cells"])
    assert all(isinstance(c["reconnects"], int) and c["reconnects"] >= 0 for c in m["cells"])  # the client's reopens
    # one model start per cell off Metal: the cell says so, and the run's logs agree (one log per cell, one
    # start in each, at the default verbosity; no -lv 4 facts start)
    assert [c["server_starts"] for c in m["cells"]] == [1, 1] and not any("startup_metal" in c for c in m["cells"])
    assert sorted(p.name for p in (run_dir / "logs").iterdir()) == sorted(Path(c["log"]).name for c in m["cells"])
    for c in m["cells"]:
        log = (run_dir / c["log"]).read_text()
        assert log.count("llama_server: initializing") == 1 and "verbosity = 3" in log
        assert {"n_threads", "n_slots", "n_ctx_slot", "server_load_ms"} <= set(c["startup"])
    none_cell = next(c for c in m["cells"] if c["keep_alive"] == "none")
    assert none_cell["env_overrides"] == {"GGML_METAL_NO_RESIDENCY": "1"}
    # --keep-alive is an env axis instance: its variable recorded as the env axes' are (harness/knob_axes.py)
    assert none_cell["axis_knobs"] == {"keep_alive": {"GGML_METAL_NO_RESIDENCY": "1"}}
    assert next(c for c in m["cells"] if c["keep_alive"] == "default")["axis_knobs"] == {}

    html = (run_dir / "report.html").read_text()
    assert run_dir.name in html and "Synthetic model" in html and "data:image/png;base64," in html
    assert "keep-alive=none" in html
    # the section that puts memory through each pause beside the per-GB slope says what is missing and why
    assert "beside memory through each pause" in html and "clock ramp" in html
    assert "<th>model starts</th>" in html  # the cells table shows each cell's server_starts
    assert "No per-GB slope in this run" in html and "--device-probes auto samples memory through each pause" in html

    listing = run_cli("runs", env=engine_env)
    assert run_dir.name in listing.stdout and "complete" in listing.stdout
    again = run_cli("report", run_dir.name[-4:], env=engine_env)
    assert again.returncode == 0 and "report.html" in again.stdout
