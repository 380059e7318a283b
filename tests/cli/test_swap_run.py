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
    assert m["router"]["port_attempts"] >= 1  # how many ports the router's start took
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


def test_zipf_storm_counts_add_up_and_every_request_has_a_class(engine_env):
    """One accounting for loads, evictions, phases and latency classes, on the router's own log."""
    from harness.analysis.persisted import load_analysis
    from harness.analysis.swap import summary_from_analysis
    from harness.analysis.swap_served import SERVED_AS
    from harness.store import open_run

    r = run_cli("swap", *THREE, "--models-max", "2", "--pattern", "zipf", "-n", "30", "-c", "4", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    run_dir = only_run(engine_env)
    from harness.analysis.derived import analysis_table

    stored = pd.read_parquet(run_dir / "requests.parquet")
    assert "served_as" not in stored or stored["served_as"].isna().all()  # the store keeps what was measured
    requests = analysis_table(open_run(run_dir, run_dir.parent), "requests")  # the analysis derives served_as
    events = pd.read_parquet(run_dir / "events.parquet")
    kinds = events["kind"].value_counts()
    answered = requests[requests["error"].isna()]
    # every request is classed; every answered one by what the router did: it either waited (the router
    # logs one wait line per waiting request) or was served at once
    assert requests["served_as"].isin(SERVED_AS).all() and not answered["served_as"].eq("unknown").any()
    waited = requests[~requests["served_as"].isin(["resident", "unknown"])]
    assert len(waited) == kinds.get("wait", 0) and len(waited) >= 1  # the first request always waits

    s = summary_from_analysis(load_analysis(open_run(run_dir, run_dir.parent)))
    assert s.served.set_index("index")["served_as"].to_dict() == requests.set_index("index")["served_as"].to_dict()
    acc = s.figures["accounting"]
    assert acc["loads"] == kinds["spawn"] == len(s.swaps) == s.figures["swaps"]
    assert acc["loads"] == acc["loads_free_slot"] + acc["loads_after_eviction"] + acc["loads_after_other_exit"]
    assert 1 <= acc["loads_free_slot"] <= 2  # models_max=2 starts empty
    assert acc["evictions"] == kinds.get("evict", 0) == len(s.lru) == s.figures.get("evictions", 0)
    assert acc["exits"] == kinds["exited"] and acc["alive_at_end"] == 0  # lbench stopped the rest at the end
    assert s.figures.get("lru_judged", 0) + s.figures.get("lru_not_judged", 0) == acc["evictions"]
    # each load's waiters: every request that waited waited for exactly one load
    waited_for_a_spawn = int(s.served["t_spawn_waited_s"].notna().sum())
    assert int(s.swaps["waiters"].sum()) == waited_for_a_spawn >= int(waited["error"].isna().sum())
    for phase in ("queue_wait_ms", "spawn_to_loaded_ms", "total_ms"):
        assert s.swaps[phase].notna().sum() <= acc["loads"]
    assert s.swaps["victim_stop_ms"].notna().sum() <= acc["loads_after_eviction"]
    # both groupings of the latency table add up to all answered requests
    lat = s.latency
    n_all = int(lat.loc[lat["group"] == "all", "n"].iloc[0])
    assert n_all == len(answered)
    assert int(lat.loc[lat["group"] == "served as", "n"].sum()) == n_all
    assert int(lat.loc[lat["group"] == "resident at send", "n"].sum()) == n_all
    text = "\n".join(s.findings)
    assert f"{acc['loads']} model loads over 30 requests = {acc['loads_free_slot']} into a free slot" in text
    assert f"the router evicted {acc['evictions']} time(s)" in text
    html = (run_dir / "report.html").read_text()
    assert "what the router did for it" in html and "counted over" in html and html.count("data:image/png") == 2
