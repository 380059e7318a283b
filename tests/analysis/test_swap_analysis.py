"""Swap analysis on a hand-written timeline with known answers."""

import pytest

from harness.analysis.swap import summarize_swap, time_above_cap_s
from harness.store import RunWriter, open_run


def ev(t, kind, model, source="router"):
    return {"t_s": t, "source": source, "kind": kind, "model": model, "detail": "{}", "text": ""}


def req(i, model, t_send, t_fb, t_done, resident, error=None, kind=None):
    return {"index": i, "wave": i, "model": model, "status_at_send": "loaded" if resident else "unloaded",
            "resident_at_send": resident, "t_send_s": t_send, "t_first_byte_s": t_fb, "t_done_s": t_done,
            "latency_ms": (t_done - t_send) * 1000, "error": error, "error_kind": kind, "http_status": 200}


def make_run(tmp_path, *, memory_children, lru_ok=True):
    w = RunWriter(tmp_path, "swap", {"config": {"models_max": 1},
                                     "models": [{"label": "a", "bytes": 100}, {"label": "b", "bytes": 300}]})
    # a loads, serves; b queued -> a evicted -> a exits -> b spawns -> b loaded -> first byte
    victim = "a" if lru_ok else "c"
    events = [ev(0.001, "queued", "a"), ev(0.002, "wait", "a"), ev(0.003, "spawn", "a"),
              ev(0.10, "status:loaded", "a", "sse"), ev(0.101, "proxy", "a"),
              ev(1.00, "queued", "b"), ev(1.001, "wait", "b"), ev(1.01, "evict", victim),
              ev(1.049, "exited", victim), ev(1.05, "status:unloaded", victim, "sse"),
              ev(1.06, "spawn", "b"), ev(1.26, "status:loaded", "b", "sse"), ev(1.27, "proxy", "b"),
              ev(1.401, "proxy", "b")]
    if not lru_ok:  # c was used more recently than a, yet c was evicted
        events[3:3] = [ev(0.05, "spawn", "c"), ev(0.08, "status:loaded", "c", "sse"), ev(0.5, "proxy", "c")]
    for e in events:
        w.append(e, "events")
    w.append(req(0, "a", 0.0, 0.105, 0.11, False), "requests")
    w.append(req(1, "b", 0.995, 1.30, 1.31, False), "requests")
    w.append(req(2, "b", 1.40, 1.405, 1.41, True), "requests")
    for i, n in enumerate(memory_children):
        w.append({"t_s": i * 0.1, "children_alive": n, "rss_total_bytes": 1000 + 100 * n}, "memory")
    w.finish("complete")
    return open_run(w.dir, tmp_path)


def test_phases_cap_and_lru(tmp_path):
    s = summarize_swap(make_run(tmp_path, memory_children=[0, 1, 1, 1, 0, 1]))
    swap_b = s.swaps[s.swaps["model"] == "b"].iloc[0]
    assert swap_b["victim"] == "a" and swap_b["request_index"] == 1
    assert swap_b["queue_wait_ms"] == pytest.approx(15, abs=0.01)  # 0.995 -> 1.01
    assert swap_b["victim_stop_ms"] == pytest.approx(39, abs=0.01)  # 1.01 -> 1.049 (the router's exit line)
    assert swap_b["exit_to_spawn_ms"] == pytest.approx(11, abs=0.01)
    assert swap_b["waiters"] == 1 and s.swaps["victim"].notna().sum() == 1  # a's first load took a free slot
    assert swap_b["spawn_to_loaded_ms"] == pytest.approx(200, abs=0.01)
    assert swap_b["loaded_to_first_byte_ms"] == pytest.approx(40, abs=0.01)
    text = "\n".join(s.findings)
    assert "never exceeded models_max=1 (peak 1" in text
    assert "of the 1 evictions, 1 took the least recently used idle model" in text
    assert "2 model loads over 3 requests = 1 into a free slot (models_max=1 starts empty) + 1 into a slot " \
           "an eviction freed; the router evicted 1 time(s)" in text and "no request failed" in text
    assert list(s.served.sort_values("index")["served_as"]) == ["own_load", "own_load", "resident"]
    by_class = s.latency.set_index("class")["n"]
    assert by_class["all"] == 3 and by_class["own load"] == 2 and by_class["resident child"] == 1
    assert by_class["sent: not resident"] == 2 and by_class["sent: resident"] == 1


def test_cap_exceeded_and_not_lru(tmp_path):
    s = summarize_swap(make_run(tmp_path, memory_children=[1, 2, 2, 1], lru_ok=False))
    text = "\n".join(s.findings)
    assert "EXCEEDED models_max=1: peak 2" in text and "200 ms above the cap" in text
    assert "of the 1 evictions, 0 took the least recently used idle model, 1 did not (first at t=1.010 s: " \
           "evicted c while a was idle and used longer ago)" in text
    (row,) = s.lru.to_dict("records")
    assert row["match"] is False and row["candidates"] == "a,c"
    assert row["explanation"] == ("c was last used at 0.500 s, but a was idle too and used longer ago (0.101 s): "
                                  "a least-recently-used rule would have evicted a")


def test_time_above_cap():
    import pandas as pd

    m = pd.DataFrame({"t_s": [0.0, 0.1, 0.2, 0.3], "children_alive": [1, 3, 3, 1]})
    assert time_above_cap_s(m, 2) == pytest.approx(0.2)
    assert time_above_cap_s(m, 0) == 0.0


def test_swap_summary_round_trips_through_analysis_json(tmp_path):
    from harness.analysis.persisted import load_analysis
    from harness.analysis.swap import summary_from_analysis

    run = make_run(tmp_path, memory_children=[0, 1, 1, 1, 0, 1])
    direct = summarize_swap(run)
    stored = summary_from_analysis(load_analysis(run))
    assert stored.findings == direct.findings and stored.figures == direct.figures
    import pandas as pd

    pd.testing.assert_frame_equal(stored.latency, direct.latency, check_dtype=False)  # NaN for empty classes
    pd.testing.assert_frame_equal(stored.served.reset_index(drop=True), direct.served.reset_index(drop=True),
                                  check_dtype=False)
    assert list(stored.swaps["model"]) == list(direct.swaps["model"])


def test_a_child_that_exits_untold_is_a_death_and_an_ordered_exit_is_not():
    import json

    import pandas as pd

    from harness.analysis.swap import child_deaths, death_findings, failure_reason

    def exited(t, model, status):
        return {**ev(t, "exited", model), "detail": json.dumps({"model": model, "status": str(status)})}

    events = pd.DataFrame([
        ev(0.0, "spawn", "a"), ev(0.1, "status:loaded", "a", "sse"),
        ev(1.0, "evict", "a"), exited(1.2, "a", 0),                      # told to go: not a death
        ev(1.3, "spawn", "b"), ev(1.4, "status:loaded", "b", "sse"),
        exited(2.0, "b", 1),                                              # died while loaded
        ev(2.1, "spawn", "b"), exited(2.2, "b", 1),                       # died while loading
        ev(3.0, "spawn", "a"), ev(3.1, "status:loaded", "a", "sse"),
        exited(9.0, "a", 0),                                              # after the storm: shutdown
    ])
    requests = pd.DataFrame([
        req(0, "b", 1.5, 1.6, 1.99, True, error="proxy error", kind="http_500"),
        req(1, "b", 2.05, None, 2.25, False, error="truncated", kind="truncated"),
        req(2, "b", 0.5, None, 0.9, False, error="limit", kind="limit_reached"),  # before the child: not its
        req(3, "a", 1.5, 1.6, 1.7, True),
    ])
    deaths = child_deaths(requests, events, until_s=5.0)
    assert deaths[["model", "t_s", "exit_status", "state"]].values.tolist() == [
        ["b", 2.0, 1, "loaded"], ["b", 2.2, 1, "loading"]]
    # each death counts the failed requests for its model from its spawn to 1 s after its exit
    assert deaths["failed_requests"].tolist() == [2, 1]
    text = death_findings(deaths)[0]
    assert text.startswith("CHILD DIED: the router child of model b died while loaded at t=2.000 s")
    assert "exit status 1" in text and "2 request(s) failed with it" in text
    assert failure_reason(requests, events, 5.0) == "2 router child death(s) (b; 3 request(s) failed with them)"
    assert len(child_deaths(requests, events, until_s=None)) == 3  # without the storm's end, the shutdown counts
    ok = pd.DataFrame([ev(0.0, "spawn", "a"), ev(1.0, "stop_sent", "a"), {**exited(1.1, "a", 0)}])
    assert child_deaths(requests.iloc[:0], ok).empty and failure_reason(requests.iloc[3:], ok, None) is None


def test_requests_past_their_deadline_fail_the_run():
    import pandas as pd

    from harness.analysis.swap import deadline_findings, failure_reason

    requests = pd.DataFrame([req(0, "a", 0.0, None, 3.0, False, error="deadline: no first byte within the 3 s "
                                 "request deadline", kind="deadline"), req(1, "b", 0.0, 0.1, 0.2, True)])
    assert failure_reason(requests, pd.DataFrame(columns=["t_s", "kind", "model", "detail"]), None) == \
        "1 request(s) past the request deadline"
    assert deadline_findings(requests)[0].startswith("DEADLINE: 1 request(s) got no full answer within the "
                                                     "request deadline (a x1); the first, #0, sent at t=0.000 s")


def test_the_request_deadline_is_derived_from_sizes_and_concurrency_unless_given():
    from harness.runs.swap import request_deadline
    from harness.spec import SwapSpec

    tiny = request_deadline(SwapSpec(), [66_000] * 3)
    assert tiny["request_s"] == pytest.approx(121.0, abs=0.1)  # 60 + 1 load x 60 + 1 token
    big = request_deadline(SwapSpec(concurrency=8, n_predict=10), [16e9, 2e9, 1e9])
    assert big["request_s"] == pytest.approx(60 + 3 * (60 + 20 * 16) + 10)  # 3 models can queue ahead
    assert "3 load(s)" in big["derived_from"] and "16.00 GB" in big["derived_from"]
    assert request_deadline(SwapSpec(request_timeout_s=5.0), [1]) == {"request_s": 5.0,
                                                                       "derived_from": "--request-timeout"}


def test_a_slow_resident_class_under_concurrency_is_explained_not_left_as_a_puzzle():
    import pandas as pd

    from harness.analysis.swap import SERVED_LABELS, served_findings

    latency = pd.DataFrame([{"class": SERVED_LABELS["resident"], "n": 16, "p50_ms": 850.0, "p99_ms": 1300.0},
                            {"class": SERVED_LABELS["own_load"], "n": 11, "p50_ms": 390.0, "p99_ms": 2000.0}])
    requests = pd.DataFrame({"served_as": ["resident", "own_load"], "resident_at_send": [True, False]})
    why = [f for f in served_findings(requests, latency, concurrency=4) if "not the fastest" in f]
    assert len(why) == 1 and "4 requests in flight" in why[0] and "np = 1" in why[0]
    assert not [f for f in served_findings(requests, latency, concurrency=1) if "not the fastest" in f]


def test_swap_servers_without_a_router_log_are_summarised_by_what_they_declare(monkeypatch):
    """No mlx wording for other engines: the loads follow the engine's declared models_held."""
    import dataclasses

    import pandas as pd

    from harness.analysis.swap import summarize_frames
    from harness.engines import registry

    requests = pd.DataFrame({"index": range(4), "model": ["a", "b", "b", "a"], "t_send_s": [0.0, 1.0, 2.0, 3.0],
                             "t_done_s": [0.5, 1.5, 2.5, 3.5], "latency_ms": [500.0, 500.0, 20.0, 500.0],
                             "error": [None] * 4})
    mlx = summarize_frames(requests, pd.DataFrame(), pd.DataFrame(), models_max=1, model_sizes=[1], engine="mlx")
    assert mlx.figures["swaps"] == 3 and "mlx_lm.server keeps one model: 3 loads over 4 requests" in mlx.findings[0]
    other = dataclasses.replace(registry.get("mlx"), name="other", server_name="", models_held=None)
    monkeypatch.setattr(registry, "get", lambda name: other)
    s = summarize_frames(requests, pd.DataFrame(), pd.DataFrame(), models_max=1, model_sizes=[1], engine="other")
    assert s.figures["swaps"] is None and "other logs no loads" in s.findings[0]
    assert not any("mlx" in f for f in s.findings)


def test_a_storm_where_every_request_failed_is_a_failed_run():
    """HTTP 400 for every request (or empty answers): nothing was measured, so the run fails."""
    import pandas as pd

    from harness.analysis.swap import failure_reason

    requests = pd.DataFrame({"index": [0, 1, 2], "model": ["a", "b", "a"], "t_send_s": [0.0, 0.1, 0.2],
                             "t_done_s": [0.05, 0.15, 0.25], "error": ["bad n_predict"] * 2 + ["truncated: 0 bytes"],
                             "error_kind": ["http_400", "http_400", "truncated"]})
    events = pd.DataFrame(columns=["t_s", "source", "kind", "model", "detail", "text"])
    reason = failure_reason(requests, events, 1.0)
    assert reason is not None and "all 3 requests failed (2 http_400, 1 truncated)" in reason
    ok = requests.assign(error=[None, "bad", "bad"], error_kind=[None, "http_400", "http_400"])
    assert failure_reason(ok, events, 1.0) is None  # some errors are findings, not a failed run
