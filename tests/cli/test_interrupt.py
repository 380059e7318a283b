"""Ctrl-C and a hard kill in the middle of a sweep: no llama-server left, samples kept."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO, llama_server_processes, run_cli, wait_gone

pytestmark = pytest.mark.engine


def _start_sweep(env, extra=None):
    import os

    return subprocess.Popen([sys.executable, "-m", "harness", "idle", "-m", "tiny-q8", "--pauses", "0.3",
                             "--reps", "200", "--warmup", "1", "--no-report"],
                            env={**os.environ, **env, **(extra or {})}, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_for_samples(env, n, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        for journal in Path(env["LBENCH_RESULTS_DIR"]).glob("*/samples.jsonl"):
            rows = [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]
            if sum(r["phase"] == "measure" for r in rows) >= n:
                return journal.parent
        time.sleep(0.1)
    raise AssertionError("the sweep did not produce samples in time")


def _server_children(proc):
    return [c for c in psutil.Process(proc.pid).children(recursive=True) if c.name() == "llama-server"]


def test_sigint_keeps_samples_and_leaves_no_server(engine_env, engine_binary):
    # and a SIGTERM while the interrupted run ends (Ctrl-C pressed, then a kill): held until its manifest is final
    proc = _start_sweep(engine_env, {"LBENCH_TEST_SIGNAL_AT_END": "SIGTERM"})
    run_dir = _wait_for_samples(engine_env, 3, proc)
    servers = [p.pid for p in _server_children(proc)]
    assert servers, "expected a running llama-server under the harness"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert f"samples kept in {run_dir}" in err  # how many, and where
    assert not wait_gone(servers)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    import pandas as pd

    samples = pd.read_parquet(run_dir / "samples.parquet")
    assert (samples["phase"] == "measure").sum() >= 3
    # and the report still renders from what was kept
    r = run_cli("report", run_dir.name, env=engine_env)
    assert r.returncode == 0 and "Incomplete run" in (run_dir / "report.html").read_text()


def test_sigkill_of_the_harness_takes_the_server_down(engine_env, engine_binary):
    proc = _start_sweep(engine_env)
    run_dir = _wait_for_samples(engine_env, 2, proc)
    servers = [p.pid for p in _server_children(proc)]
    assert servers
    proc.kill()  # no chance to clean up: PR_SET_PDEATHSIG must do it
    proc.communicate(timeout=120)
    assert not wait_gone(servers)
    assert not [p for p in llama_server_processes(engine_binary) if p.pid in servers]
    rows = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines() if x.strip()]
    assert sum(r["phase"] == "measure" for r in rows) >= 2
    # its manifest says 'running' forever; its process is gone, so every reader says "abandoned"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "running" and manifest["process"]["pid"] == proc.pid
    r = run_cli("runs", env=engine_env)
    line = next(x for x in r.stdout.splitlines() if run_dir.name in x)
    assert "abandoned" in line and "running" not in line, r.stdout
    r = run_cli("report", run_dir.name, env=engine_env)
    assert r.returncode == 0 and "(status: abandoned)" in (run_dir / "report.html").read_text(), r.stderr
    r = run_cli("history", "add", str(run_dir), "--archive", str(run_dir.parent / "archive"), env=engine_env)
    assert r.returncode == 2 and "abandoned" in r.stderr and f"pid {proc.pid}" in r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_as_a_real_run_ends_leaves_it_complete(engine_env, engine_binary, sig):
    """The signal reaches lbench as the run's end phase starts and again just before its final manifest
    (LBENCH_TEST_SIGNAL_AT_END, so the moment is exact, not timed): the run ends complete with its
    Parquet copy, analysis and signature, then the command stops (exit 130) saying what was kept."""
    r = run_cli("idle", "-m", "tiny-q8", "--pauses", "0", "--reps", "3", "--warmup", "1", "--no-report",
                env={**engine_env, "LBENCH_TEST_SIGNAL_AT_END": sig})
    assert r.returncode == 130, r.stdout + r.stderr
    (run_dir,) = [d for d in Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["n_samples"] >= 3
    assert all((run_dir / name).is_file() for name in ("samples.parquet", "analysis.json", "signature.json"))
    assert "nothing was written" not in r.stderr
    assert f"kept in {run_dir} (the run had ended complete)" in " ".join(r.stderr.split()), r.stderr
    assert "Traceback" not in r.stderr
