"""The first request split into phases, on hand-written timelines with known answers."""

import json
import math

import pandas as pd
import pytest

from harness.analysis.swap_first import first_findings, first_request_summary, first_request_table, markers, phases


def ev(t, kind, model, detail=None, source="router"):
    return {"t_s": t, "source": source, "kind": kind, "model": model, "detail": json.dumps(detail or {}), "text": ""}


def sse(t, status, model, **detail):
    return ev(t, f"status:{status}", model, {"status": status, **detail}, "sse")


def first(i, model, state, t_send, t_fb, rep=0, error_kind=None):
    return {"index": i, "model": model, "t_send_s": t_send, "t_first_byte_s": t_fb, "t_done_s": t_fb + 0.001,
            "ttfb_ms": (t_fb - t_send) * 1000, "latency_ms": (t_fb + 0.001 - t_send) * 1000,
            "error_kind": error_kind, "first_state": state, "first_rep": rep, "first_measured": True}


# after an eviction: b's request -> a told to stop -> a exits -> b spawns -> load progress -> loaded -> first byte
EVICTED = [ev(10.010, "evict", "a"), ev(10.050, "exited", "a"), ev(10.060, "spawn", "b"),
           sse(10.100, "loading", "b"), sse(10.120, "loading", "b", progress=0.0, stage="text_model"),
           sse(10.300, "loading", "b", progress=0.5, stage="text_model"),
           sse(10.520, "loading", "b", progress=1.0, stage="text_model"), sse(10.600, "loaded", "b")]


def test_phases_after_an_eviction_add_up_to_the_time_to_first_byte():
    r = first(0, "b", "evicted", 10.000, 10.650)
    m = markers(r, pd.DataFrame(EVICTED))
    p = phases(m)
    assert p["queue_wait_ms"] == pytest.approx(10)
    assert p["victim_exit_ms"] == pytest.approx(40)
    assert p["spawn_ms"] == pytest.approx(10)
    assert p["child_start_ms"] == pytest.approx(60)  # spawn -> the first event with progress
    assert p["weights_ms"] == pytest.approx(400)
    assert p["ready_ms"] == pytest.approx(80)
    assert p["first_token_ms"] == pytest.approx(50)
    assert sum(v for v in p.values() if math.isfinite(v)) == pytest.approx(650)


def test_a_cold_router_has_no_victim_and_the_ratio_to_the_floor():
    events = [ev(0.030, "spawn", "b"), sse(0.100, "loading", "b", progress=0.0, stage="text_model"),
              sse(0.600, "loading", "b", progress=1.0, stage="text_model"), sse(0.700, "loaded", "b")]
    floors = [{"rep": 0, "model": "b", "bytes": 100e6, "cold_bytes_per_s": 400e6, "warm_bytes_per_s": 4e9}]
    table = first_request_table(pd.DataFrame([first(0, "b", "cold", 0.0, 0.75)]), pd.DataFrame(events), floors)
    row = table.iloc[0]
    assert row["queue_wait_ms"] == pytest.approx(30) and math.isnan(row["victim_exit_ms"])
    assert row["load_bytes_per_s"] == pytest.approx(200e6)  # 100 MB over 0.5 s of weights
    assert row["ratio_to_floor"] == pytest.approx(0.5)  # against the cold read


def test_a_slept_model_wakes_without_a_spawn():
    events = [sse(5.2, "loading", "a", progress=0.0, stage="text_model"),
              sse(5.5, "loading", "a", progress=1.0, stage="text_model"), sse(5.6, "loaded", "a")]
    p = phases(markers(first(0, "a", "slept", 5.0, 5.7), pd.DataFrame(events)))
    assert p["queue_wait_ms"] == pytest.approx(200) and math.isnan(p["spawn_ms"])
    assert p["weights_ms"] == pytest.approx(300) and p["first_token_ms"] == pytest.approx(100)


def test_summary_medians_intervals_and_findings():
    reqs = pd.DataFrame([first(i, "b", "evicted", 10.0, 10.650, rep=i) for i in range(6)]
                        + [first(9, "b", "evicted", 20.0, 20.1, rep=6, error_kind="proxy_error")])
    table = first_request_table(reqs, pd.DataFrame(EVICTED), [])
    summary = first_request_summary(table)
    ttfb = summary[summary["phase"] == "ttfb_ms"].iloc[0]
    assert ttfb["n"] == 7 and math.isfinite(ttfb["ci_low"])
    text = "\n".join(first_findings(table, summary))
    assert "FIRST REQUEST FAILED: 1 of 7" in text and "first request, evicted, b: time to first byte median" in text
