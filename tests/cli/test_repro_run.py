"""`lbench repro` runs scenarios for real against the llama-server router."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli


pytestmark = pytest.mark.engine


def test_three_router_scenarios_for_real(engine_env):
    r = run_cli("repro", "router-cap", "router-stop-timeout", "router-startup-exceeds", "idle-metal-keepalive-180s",
                env=engine_env, timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    v = pd.read_parquet(run_dir / "verdicts.parquet").set_index("claim_id")
    assert v.loc["router-cap", "verdict"] == "holds"
    assert json.loads(v.loc["router-cap", "figures"])["peak_children"] <= 2
    stop = json.loads(v.loc["router-stop-timeout", "figures"])
    assert v.loc["router-stop-timeout", "verdict"] == "holds" and 1.0 <= stop["unload_to_exit_s"] <= 3.0
    assert v.loc["router-startup-exceeds", "verdict"] == "holds"
    assert stop["unload_to_exit_s_reps"] and len(stop["unload_to_exit_s_reps"]) == 3  # a timing claim repeats
    assert len(stop["unload_to_exit_s_ci"]) == 3  # mean, low, high
    assert "met in 3 of 3 repetitions" in v.loc["router-stop-timeout", "reason"]
    assert v.loc["idle-metal-keepalive-180s", "verdict"] == "not checkable here"
    assert v.loc["idle-metal-keepalive-180s", "cause"] == "platform"
    recipe = (run_dir / "claims" / "router-stop-timeout" / "rep-1" / "recipe.sh").read_text()
    assert "--models-preset" in recipe and "stop-timeout = 2" in recipe and "kill -STOP $(find_child" in recipe and "pgrep -P" in recipe
    assert "/models/unload" in recipe
    storm = (run_dir / "claims" / "router-cap" / "recipe.sh").read_text()
    assert storm.count("/completion") >= 30 and "--models-max 2" in storm
    assert (run_dir / "claims" / "router-cap" / "events.parquet").is_file()
    events = pd.read_parquet(run_dir / "claims" / "router-cap" / "events.parquet")
    assert (events["run_id"] == run_dir.name).all() and events["kind"].eq("spawn").any()
    # the storm's rows come from the swap storms' row function: residency at send is known, not assumed cold
    rows = pd.read_parquet(run_dir / "claims" / "router-cap" / "requests.parquet")
    # (round-robin over 3 models under a cap of 2: the model asked for is never the one resident; the
    # router's own log says each request waited for the load it caused)
    assert len(rows) == 30 and rows["resident_at_send"].notna().all()
    from harness.analysis.swap_served import with_served_as

    served = with_served_as(rows, events)
    assert served["served_as"].eq("own_load").all(), served[["index", "model", "served_as"]]
    # resident_at_send is what /models/sse had said by the send. Under load the answer can reach lbench
    # before the stream's news of the eviction made for it (seen: "unloaded" 8 ms after the answer), so
    # the next request to the evicted model reads "loaded"; such a row must be that lag, the "unloaded"
    # arriving after its send (and before the next request to that model)
    for row in rows[rows["resident_at_send"].eq(True)].to_dict("records"):
        later = rows.loc[(rows["model"] == row["model"]) & (rows["t_send_s"] > row["t_send_s"]), "t_send_s"]
        until = later.min() if len(later) else float("inf")
        unloaded = events[(events["model"] == row["model"]) & events["kind"].eq("status:unloaded")
                          & (events["t_s"] > row["t_send_s"]) & (events["t_s"] < until)]
        assert not unloaded.empty, row
    assert rows["status_at_send"].notna().all()
    assert (run_dir / "claims" / "router-stop-timeout" / "rep-3" / "logs" / "router.stderr.log").is_file()
    html = (run_dir / "report.html").read_text()
    assert "router-stop-timeout" in html and "not checkable here" in html and run_dir.name in html


def test_unknown_claim_is_bad_input(lbench_env):
    r = run_cli("repro", "no-such-claim", env=lbench_env)
    assert r.returncode == 2 and "unknown claim 'no-such-claim'" in r.stderr


def test_the_race_claims_hold_on_the_pinned_build_under_fake_timing(engine_env):
    """Upstream's two-waiters test and the cold timed sequence, on the real router with
    LLAMA_SERVER_DEBUG_FAKE_TIMING=1 set by the claims themselves (params.env)."""
    r = run_cli("repro", "router-two-waiters-share-eviction", "router-cold-sequence-clean", env=engine_env,
                timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = list(Path(engine_env["LBENCH_RESULTS_DIR"]).iterdir())
    v = pd.read_parquet(run_dir / "verdicts.parquet").set_index("claim_id")
    assert v.loc["router-two-waiters-share-eviction", "verdict"] == "holds", v.loc["router-two-waiters-share-eviction",
                                                                                    "reason"]
    assert v.loc["router-cold-sequence-clean", "verdict"] == "holds", v.loc["router-cold-sequence-clean", "reason"]
    figures = json.loads(v.loc["router-cold-sequence-clean", "figures"])
    assert figures["errors_proxy_error"] == 0 and figures["races_evicted_with_waiter"] == 0 and figures["requests"] == 3
    for claim in ("router-two-waiters-share-eviction", "router-cold-sequence-clean"):
        recipe = (run_dir / "claims" / claim / "recipe.sh").read_text()
        assert "LLAMA_SERVER_DEBUG_FAKE_TIMING" in recipe  # the script reruns it under the same switch
    events = pd.read_parquet(run_dir / "claims" / "router-cold-sequence-clean" / "events.parquet")
    assert events["kind"].eq("spawn").sum() >= 2
