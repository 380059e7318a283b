"""Device sampling in a real idle run (the process probe is what samples on a machine without a GPU),
the on/off plan, and a probe asked for where it is absent (exit 2, nothing written)."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

from harness.probes.devices import registry
from harness.runs.device_sampling import interleave_plan


def test_interleave_plan_is_balanced_seeded_and_shuffled():
    plan = interleave_plan(6, seed=0)
    assert sorted(plan) == [False] * 3 + [True] * 3
    assert interleave_plan(6, seed=0) == plan
    assert interleave_plan(7, seed=0).count(True) == 4
    assert len({tuple(interleave_plan(10, seed=s)) for s in range(5)}) > 1  # the order depends on the seed


def test_absent_probe_exits_2_naming_what_is_available(lbench_env):
    env = lbench_env
    status = registry.describe()
    absent = next(s for s in registry.SOURCES if not status[s].startswith("available"))
    r = run_cli("idle", "-m", "tiny-q8", "--device-probes", absent, "--no-report", env=env, timeout=120)
    assert r.returncode == 2, r.stderr + r.stdout
    assert f"device probe {absent!r} is not available here" in r.stderr + r.stdout
    assert "available here:" in r.stderr + r.stdout
    results = Path(env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())


@pytest.mark.engine
@pytest.mark.skipif(not registry.describe()["process"].startswith("available"), reason="needs Linux /proc")
def test_interleaved_run_samples_the_server_process_in_on_repetitions_only(engine_env):
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0,0.8", "--reps", "4", "--warmup", "1",
                "--device-probes", "process", "--device-interval", "0.1", "--device-interleave",
                "--self-check", "0", env=engine_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["device_probes"]["sampled"] == ["process"]
    (cell,) = manifest["cells"]
    plan = cell["device_sampling"]["interleave"]
    assert sorted(plan) == ["off", "off", "on", "on"]
    assert cell["device_sampling"]["cost"]["n_readings"] > 0
    s = pd.read_parquet(run_dir / "samples.parquet")
    m = s[s["phase"] == "measure"]
    assert set(m["device_sampling"]) == {"on", "off"}
    assert all(m[m["rep"] == rep]["device_sampling"].eq(arm).all() for rep, arm in enumerate(plan))
    d = pd.read_parquet(run_dir / "device_samples.parquet")
    on_reps = {rep for rep, arm in enumerate(plan) if arm == "on"}
    assert set(d["rep"]) <= on_reps  # nothing read in an off repetition
    assert set(d["pause_requested_s"]) == {0.8}  # a zero pause has no room before the guard
    assert (d["t_before_send_s"] >= 0.25).all() and (d["process_mem_bytes"] > 0).all()
    assert (d["device"] == "cpu").all() and (d["probe"] == "process").all()
    html = (run_dir / "report.html").read_text()
    assert "device memory and clock through the pause" in html  # the figure beside latency
    # memory through each pause beside the per-GB slope: here the server's resident set (no wired memory off a Mac)
    assert 'alt="process_mem_bytes through each pause"' in html and "This run has no wired-memory reading" in html
    assert "Change through each pause (1 row)" in html  # one model, one setting, one sampled pause (0.8 s)
    assert "device sampling on - off: wake penalty" in r.stdout  # the perturbation sentence
