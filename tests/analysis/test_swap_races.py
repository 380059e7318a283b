"""The races a storm can provoke, and every request's fate by kind, on hand-written timelines
(the negations: what each race looks like on the router's timeline; the clean run finds none)."""

import json

import pandas as pd

from harness.analysis.swap import summarize_frames
from harness.analysis.swap_races import errors_by_kind, races


def ev(t, kind, model, source="router", detail=None):
    return {"t_s": t, "source": source, "kind": kind, "model": model, "detail": json.dumps(detail or {}), "text": ""}


def req(i, model, t_send, t_done, error=None, kind=None, status=200):
    return {"index": i, "wave": i, "model": model, "status_at_send": "unloaded", "resident_at_send": False,
            "t_send_s": t_send, "t_first_byte_s": None if error else t_done - 0.001, "t_done_s": t_done,
            "latency_ms": (t_done - t_send) * 1000, "error": error, "error_kind": kind, "http_status": status}


def frames(events, requests):
    return pd.DataFrame(requests), pd.DataFrame(events), pd.DataFrame(columns=["t_s", "children_alive",
                                                                               "rss_total_bytes"])


CLEAN = [ev(0.001, "queued", "a"), ev(0.002, "wait", "a"), ev(0.003, "spawn", "a"),
         ev(0.10, "status:loaded", "a", "sse"), ev(0.101, "proxy", "a"),
         ev(0.2, "queued", "b"), ev(0.201, "wait", "b"), ev(0.21, "evict", "a"), ev(0.25, "exited", "a"),
         ev(0.26, "spawn", "b"), ev(0.40, "status:loaded", "b", "sse"), ev(0.41, "proxy", "b")]


def test_a_clean_sequence_has_no_race():
    r, e, m = frames(CLEAN, [req(0, "a", 0.0, 0.11), req(1, "b", 0.195, 0.42)])
    s = summarize_frames(r, e, m, models_max=1, model_sizes=[100, 100])
    assert s.figures["races"] == {"evicted_with_waiter": 0, "proxied_to_stopping": 0}
    assert s.figures["errors_by_kind"] == {}


def test_a_model_evicted_while_its_request_waited_at_the_router():
    """A loaded for request 0; request 1 for A waits (its wait line) but B's queue entry evicts A
    before A's request is proxied: the reported race (a model evicted right after it loaded)."""
    events = [ev(0.001, "queued", "a"), ev(0.002, "wait", "a"), ev(0.003, "spawn", "a"),
              ev(0.050, "queued", "b"), ev(0.051, "wait", "b"),
              ev(0.10, "status:loaded", "a", "sse"), ev(0.101, "evict", "a"), ev(0.15, "exited", "a"),
              ev(0.16, "spawn", "b"), ev(0.30, "status:loaded", "b", "sse"), ev(0.31, "proxy", "b"),
              ev(0.311, "proxy_error", None)]
    requests = [req(0, "a", 0.0, 0.312, error="proxy error: Could not establish connection", kind="proxy_error",
                    status=500), req(1, "b", 0.049, 0.32)]
    r, e, m = frames(events, requests)
    found = races(r.assign(served_as=["own_load", "own_load"], t_router_s=[0.002, 0.051]), e)
    assert list(found["race"]) == ["evicted_with_waiter"] and found.iloc[0]["model"] == "a"
    s = summarize_frames(r, e, m, models_max=1, model_sizes=[100, 100])
    assert s.figures["races"]["evicted_with_waiter"] == 1
    assert s.figures["errors_by_kind"] == {"proxy_error": 1} and s.figures["router_proxy_error_lines"] == 1
    text = "\n".join(s.findings)
    assert "EVICTED WHILE WAITED FOR: 1 time(s)" in text
    assert "error proxy_error x1: the router's own HTTP 500 'proxy error'" in text and "'http client error' 1" in text


def test_a_request_proxied_to_a_model_already_told_to_stop():
    events = [*CLEAN[:5], ev(0.2, "queued", "b"), ev(0.201, "wait", "b"), ev(0.21, "evict", "a"),
              ev(0.215, "proxy", "a"), ev(0.25, "exited", "a"), ev(0.26, "spawn", "b"),
              ev(0.40, "status:loaded", "b", "sse"), ev(0.41, "proxy", "b")]
    requests = [req(0, "a", 0.0, 0.11), req(1, "b", 0.195, 0.42),
                req(2, "a", 0.212, 0.25, error="truncated: the answer stopped", kind="truncated")]
    r, e, m = frames(events, requests)
    s = summarize_frames(r, e, m, models_max=1, model_sizes=[100, 100])
    assert s.figures["races"]["proxied_to_stopping"] == 1
    assert "PROXIED TO A STOPPING CHILD: 1 time(s); the first at t=0.215 s: proxied 5 ms after" in "\n".join(s.findings)
    assert errors_by_kind(r) == {"truncated": 1}
