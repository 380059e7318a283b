"""`lbench swap` against the real llama-server router on tiny generated models."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, run_cli, wait_gone

pytestmark = pytest.mark.engine

THREE = ["-m", "tiny-q8", "-m", "tiny-q4", "-m", "tiny-f16"]


def only_run(env):
    (run_dir,) = list(Path(env["LBENCH_RESULTS_DIR"]).iterdir())
    return run_dir


def test_round_robin_swaps_every_request_under_the_cap(engine_env):
    r = run_cli("swap", *THREE, "--models-max", "2", "--pattern", "round-robin", "-n", "18", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    run_dir = only_run(engine_env)
    requests = pd.read_parquet(run_dir / "requests.parquet")
    memory = pd.read_parquet(run_dir / "memory.parquet")
    events = pd.read_parquet(run_dir / "events.parquet")
    assert len(requests) == 18 and list(requests["model"][:4]) == ["tiny-q8", "tiny-q4", "tiny-f16", "tiny-q8"]
    assert len(memory) >= 10 and memory["children_alive"].max() == 2  # the cap holds at every sample
    spawns = events[events["kind"] == "spawn"]
    # round-robin over 3 models with room for 2: the one needed next was always evicted
    assert len(spawns) >= 0.6 * len(requests)
    assert set(spawns["model"]) == {"tiny-q8", "tiny-q4", "tiny-f16"}
    assert (events["source"] == "sse").any() and (events["kind"] == "evict").any()
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "complete" and "--models-max" in m["router"]["argv"]
    assert any("never exceeded models_max=2" in f for f in m["findings"])
    assert "LLAMA_CACHE" not in m["router"]["preset"]
    html = (run_dir / "report.html").read_text()
    assert m["run_id"] in html and "never exceeded models_max=2" in html and html.count("data:image/png") == 2
    assert "never exceeded models_max=2" in r.stdout


def test_burst_pattern_sends_concurrently(engine_env):
    r = run_cli("swap", *THREE, "--models-max", "3", "--pattern", "burst", "--burst-k", "3", "-c", "3", "-n", "9",
                "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    requests = pd.read_parquet(only_run(engine_env) / "requests.parquet")
    assert len(requests) == 9 and sorted(requests["wave"].unique()) == [0, 1, 2]
    for _, wave in requests.groupby("wave"):
        assert wave["model"].nunique() == 3
        # all three were in flight together
        assert wave["t_send_s"].max() < wave["t_done_s"].min()


def test_sigint_mid_storm_leaves_no_server_and_keeps_requests(engine_env):
    proc = subprocess.Popen([sys.executable, "-m", "harness", "swap", *THREE, "--models-max", "1", "-n", "100000",
                             "--duration", "120", "--no-report"], env={**os.environ, **engine_env}, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import psutil

    deadline = time.monotonic() + 120
    run_dir = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        journals = list(Path(engine_env["LBENCH_RESULTS_DIR"]).glob("*/requests.jsonl"))
        if journals and len(journals[0].read_text().splitlines()) >= 6:
            run_dir = journals[0].parent
            break
        time.sleep(0.1)
    assert run_dir is not None
    tree = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert tree
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not wait_gone(tree)
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    assert len(pd.read_parquet(run_dir / "requests.parquet")) >= 6


@pytest.mark.parametrize("args,fragment", [
    (["--models-max", "-1"], "models_max must be an integer >= 0"),
    (["--pattern", "storm"], "unknown pattern 'storm'"),
    (["-m", "", "-m", "tiny-q8"], "empty --model"),
    (["-m", "tiny-q8"], "at least two models, got 1"),
    (["-m", "/nope/x.gguf", "-m", "tiny-q8"], "model file not found"),
    (["--requests", "0"], "requests must be an integer >= 1"),
    (["--request-timeout", "0"], "request_timeout_s must be seconds in (0, 86400]"),
])
def test_bad_input(engine_env, args, fragment):
    r = run_cli("swap", *args, env=engine_env)
    assert r.returncode == 2, r.stderr
    assert fragment in r.stderr
    results = Path(engine_env["LBENCH_RESULTS_DIR"])
    assert not results.exists() or not any(results.iterdir())
