"""`lbench swap --sequence` / `--repeat` and `--first-request` against the real llama-server router
on tiny generated models: what each request met, and the first request's phases from the router's
own timeline (no timing assertion: only the order of events and that the phases add up)."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli

pytestmark = pytest.mark.engine


def runs(env):
    return sorted(Path(env["LBENCH_RESULTS_DIR"]).iterdir())


def test_a_timed_sequence_on_a_cold_router_repeated(engine_env):
    r = run_cli("swap", "-m", "tiny-q8", "-m", "tiny-q4", "--models-max", "1", "--sequence", "A@0,B@0.1",
                "--repeat", "2", "--no-report", env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "repetitions: 2 of 2 clean" in r.stdout
    dirs = runs(engine_env)
    assert len(dirs) == 2  # a fresh router, and a run, per repetition
    for d in dirs:
        m = json.loads((d / "manifest.json").read_text())
        assert m["sequence"] == [{"model": "tiny-q8", "at_s": 0.0}, {"model": "tiny-q4", "at_s": 0.1}]
        req = pd.read_parquet(d / "requests.parquet").sort_values("index")
        assert list(req["model"]) == ["tiny-q8", "tiny-q4"] and list(req["t_planned_s"]) == [0.0, 0.1]
        assert (req["send_late_ms"] >= 0).all() and req["error"].isna().all()
        # B was sent on its own schedule, not after A's answer: the sequence is timed, not a pool
        events = pd.read_parquet(d / "events.parquet")
        assert (events["kind"] == "spawn").sum() == 2
        assert m["findings"] and not any("EVICTED WHILE WAITED FOR" in f for f in m["findings"])


def test_bad_sequences_exit_2_before_any_run(engine_env):
    for args in (["--sequence", "A@0,B@-1"], ["--sequence", "Z@0"], ["--sequence", "@/nonexistent/steps"],
                 ["--sequence", "A@0", "--stagger", "0.1"], ["--first-request", "lukewarm"]):
        r = run_cli("swap", "-m", "tiny-q8", "-m", "tiny-q4", *args, env=engine_env)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
    assert not list(Path(engine_env["LBENCH_RESULTS_DIR"]).glob("*/manifest.json"))


def test_the_first_request_by_phase_cold_evicted_slept(engine_env):
    r = run_cli("swap", "-m", "tiny-q8", "-m", "tiny-q4", "--first-request", "cold,evicted,slept", "--first-reps", "1",
                env=engine_env)
    assert r.returncode == 0, r.stderr + r.stdout
    (d,) = runs(engine_env)
    m = json.loads((d / "manifest.json").read_text())
    assert {row["model"] for row in m["read_floor"]["rows"]} == {"tiny-q8", "tiny-q4"}
    req = pd.read_parquet(d / "requests.parquet")
    measured = req[req["first_measured"].eq(True)]
    assert sorted(zip(measured["first_state"], measured["model"])) == sorted(
        (s, mdl) for s in ("cold", "evicted", "slept") for mdl in ("tiny-q8", "tiny-q4"))
    assert measured["error"].isna().all()
    events = pd.read_parquet(d / "events.parquet")
    for request in measured.to_dict("records"):  # its router closed only after this load's "loaded" arrived
        assert not _own_events(events, req, request, "status:loaded").empty, request
    analysis = json.loads((d / "analysis.json").read_text())
    from harness.analysis.frames import json_frame

    first = json_frame(analysis["first"])
    phases = ["queue_wait_ms", "victim_exit_ms", "spawn_ms", "child_start_ms", "weights_ms", "ready_ms",
              "first_token_ms"]
    for row in first.to_dict("records"):
        total = sum(v for p in phases if (v := row[p]) is not None and v == v)
        assert abs(total - row["ttfb_ms"]) < 1.0, row  # the phases add up to the time to first byte
        if row["weights_ms"] != row["weights_ms"]:  # /models/sse's text-model progress 1 was not seen in time
            _progress_came_after_the_request(events, req, measured, row)
        if row["state"] == "evicted":
            assert row["victim_exit_ms"] == row["victim_exit_ms"]  # the other model was told to go, and went
        if row["state"] == "slept":
            assert row["spawn_ms"] != row["spawn_ms"]  # a sleeping child wakes: no spawn
    html = (d / "report.html").read_text()
    assert "The first request, by phase" in html and any("first request, cold, tiny-q8" in f for f in m["findings"])


def _own_events(events: pd.DataFrame, req: pd.DataFrame, request: dict, kind: str) -> pd.DataFrame:
    """``kind`` events of the request's model from its send to the next request's (the run's routers
    run one after another on one clock)."""
    later = req.loc[req["t_send_s"] > request["t_send_s"], "t_send_s"]
    until = later.min() if len(later) else float("inf")
    return events[(events["model"] == request["model"]) & events["kind"].eq(kind)
                  & (events["t_s"] >= request["t_send_s"]) & (events["t_s"] < until)]


def _progress_came_after_the_request(events: pd.DataFrame, req: pd.DataFrame, measured: pd.DataFrame,
                                     row: dict) -> None:
    """A request's phases use the timeline events between its send and its end. The router sends the
    text model's last load progress (value 1) on every load (11434 server-context.cpp
    load_progress_callback: the final sample is never throttled), but the /models/sse stream can reach
    lbench after the answer on a loaded machine (seen under two CPU hogs). Then the phase is empty, its
    time is in the next phase (checked above), and the event must still be in the run's timeline, later
    (lbench waits for the load's "loaded", sent after it, before it closes the router)."""
    (request,) = measured[(measured["first_state"] == row["state"]) & (measured["model"] == row["model"])].to_dict(
        "records")
    loading = _own_events(events, req, request, "status:loading")
    details = [(t, json.loads(detail) if detail else {}) for t, detail in zip(loading["t_s"], loading["detail"])]
    done = [t for t, x in details if x.get("progress") is not None and float(x["progress"]) >= 1.0
            and x.get("stage") in (None, "text_model")]
    assert done and min(done) > request["t_done_s"], (row, request["t_done_s"], done[:3])
