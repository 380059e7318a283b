"""What the router did for each request, on constructed router-log sequences.

The line orders follow what build 11434 logs (seen in a real storm's router.stderr.log):
a request for a model that is not running logs ``queued``/``joined`` then ``wait``; one for
a model being evicted logs ``wait`` first and joins the queue in its wait loop; one for a
running child logs only ``proxy``.
"""

import pandas as pd
import pytest

from harness.analysis.swap import latency_table, served_findings
from harness.analysis.swap_served import accounting_sentence, classify_requests, load_accounting, with_served_as


def ev(t, kind, model, source="router"):
    return {"t_s": t, "source": source, "kind": kind, "model": model, "detail": "{}", "text": ""}


def req(i, model, t_send, t_done, *, resident=False, error=None, status=200):
    return {"index": i, "wave": i, "model": model, "t_send_s": t_send, "t_first_byte_s": t_done - 0.001,
            "t_done_s": t_done, "latency_ms": (t_done - t_send) * 1000, "resident_at_send": resident,
            "error": error, "error_kind": None if error is None else "http_500",
            "http_status": status if error is None else 500}


def classes(requests, events):
    out = classify_requests(pd.DataFrame(requests), pd.DataFrame(events))
    return dict(zip(out["index"], out["served_as"]))


LOAD_A = [ev(0.010, "queued", "a"), ev(0.011, "wait", "a"), ev(0.012, "claim", "a"), ev(0.013, "spawn", "a"),
          ev(0.200, "child_loaded", "a", "child"), ev(0.201, "status:loaded", "a", "sse"), ev(0.202, "proxy", "a")]


def test_own_load_and_resident():
    events = LOAD_A + [ev(0.501, "proxy", "a")]
    requests = [req(0, "a", 0.009, 0.25), req(1, "a", 0.500, 0.52, resident=True)]
    out = classify_requests(pd.DataFrame(requests), pd.DataFrame(events)).set_index("index")
    assert out.loc[0, "served_as"] == "own_load" and out.loc[0, "t_spawn_waited_s"] == 0.013
    assert out.loc[0, "t_router_s"] == 0.011
    assert out.loc[1, "served_as"] == "resident" and pd.isna(out.loc[1, "t_spawn_waited_s"])


def test_joined_the_queue_and_joined_a_load_under_way():
    events = [ev(0.010, "queued", "a"), ev(0.011, "joined", "a"), ev(0.012, "wait", "a"), ev(0.013, "wait", "a"),
              ev(0.014, "spawn", "a"), ev(0.100, "wait", "a"),  # the third arrives while the child loads
              ev(0.200, "status:loaded", "a", "sse"), ev(0.201, "proxy", "a"), ev(0.202, "proxy", "a"),
              ev(0.203, "proxy", "a")]
    requests = [req(0, "a", 0.008, 0.25), req(1, "a", 0.009, 0.25), req(2, "a", 0.099, 0.26)]
    assert classes(requests, events) == {0: "own_load", 1: "joined_load", 2: "joined_load"}
    out = classify_requests(pd.DataFrame(requests), pd.DataFrame(events))
    assert set(out["t_spawn_waited_s"]) == {0.014}  # all three waited for the same spawn


def test_sent_while_resident_then_evicted_before_the_router_served_it():
    """The case that made warm p99 exceed cold p99: /models/sse said loaded at send (and keeps saying
    so until the child exits), but the router had just evicted the model for a queued request."""
    events = LOAD_A + [
        ev(1.000, "queued", "b"), ev(1.001, "wait", "b"),
        ev(1.002, "evict", "a"),  # the scheduler frees a slot for b
        ev(1.003, "wait", "a"), ev(1.004, "queued", "a"),  # request 2 arrives: a is stopping -> waits, queues
        ev(1.050, "exited", "a"), ev(1.051, "status:unloaded", "a", "sse"),
        ev(1.052, "spawn", "b"), ev(1.200, "status:loaded", "b", "sse"), ev(1.201, "proxy", "b"),
        ev(1.300, "joined", "a"), ev(1.301, "wait", "a"),  # request 3 joins the entry request 2 made
        ev(1.302, "evict", "b"), ev(1.350, "exited", "b"), ev(1.351, "spawn", "a"),
        ev(1.500, "status:loaded", "a", "sse"), ev(1.501, "proxy", "a"), ev(1.502, "proxy", "a")]
    requests = [req(0, "a", 0.009, 0.25), req(1, "b", 0.999, 1.25),
                req(2, "a", 1.0015, 1.55, resident=True),  # sent before the evict line, served after a reload
                req(3, "a", 1.299, 1.56)]
    assert classes(requests, events) == {0: "own_load", 1: "own_load", 2: "behind_eviction", 3: "joined_load"}

    frame = with_served_as(pd.DataFrame(requests), pd.DataFrame(events))
    latency = latency_table(frame).set_index("class")
    assert latency.loc["behind an eviction", "n"] == 1 and latency.loc["resident child", "n"] == 0
    assert latency.loc["sent: resident", "n"] == 1  # the separate, send-time view keeps it
    text = "\n".join(served_findings(frame, latency.reset_index()))
    assert "1 of 1 request(s) sent while /models/sse said their model was loaded were not served by a " \
           "resident child (behind an eviction x1)" in text


def test_failed_without_a_router_line_is_unknown_and_older_runs_say_unknown():
    requests = [req(0, "a", 0.009, 0.25), req(1, "a", 0.6, 0.61, error="Server disconnected")]
    assert classes(requests, LOAD_A) == {0: "own_load", 1: "unknown"}
    no_waits = [e for e in LOAD_A if e["kind"] != "wait"]  # a run recorded before wait lines were parsed
    assert classes(requests, no_waits) == {0: "unknown", 1: "unknown"}


def test_a_wait_line_belongs_to_a_request_in_flight_at_that_time():
    """Per model, a request takes the first free wait line between its send and its end: a request
    served at once never takes the wait line of a later one."""
    events = LOAD_A + [ev(0.300, "proxy", "a"), ev(2.0, "evict", "a"), ev(2.001, "exited", "a"),
                       ev(3.000, "queued", "a"), ev(3.001, "wait", "a"), ev(3.002, "spawn", "a"),
                       ev(3.2, "status:loaded", "a", "sse"), ev(3.201, "proxy", "a")]
    requests = [req(0, "a", 0.009, 0.25), req(1, "a", 0.299, 0.31, resident=True), req(2, "a", 2.999, 3.25)]
    assert classes(requests, events) == {0: "own_load", 1: "resident", 2: "own_load"}


def test_load_accounting_adds_up_even_when_the_exit_line_follows_the_spawn():
    events = [ev(0.0, "spawn", "a"), ev(0.1, "spawn", "b"),  # two free slots under models_max=2
              ev(1.0, "evict", "a"), ev(1.05, "exited", "a"), ev(1.06, "spawn", "c"),
              ev(2.0, "evict", "b"), ev(2.01, "spawn", "a"), ev(2.02, "exited", "b"),  # exit logged after spawn
              ev(3.0, "stop_sent", "c"), ev(3.0, "stop_sent", "a"), ev(3.1, "exited", "c"), ev(3.1, "exited", "a")]
    acc = load_accounting(pd.DataFrame(events), models_max=2)
    assert acc["loads"] == 4 == acc["loads_free_slot"] + acc["loads_after_eviction"]
    assert (acc["loads_free_slot"], acc["loads_after_eviction"], acc["evictions"]) == (2, 2, 2)
    assert acc["exits"] == 4 == acc["exits_evicted"] + acc["exits_stopped"] and acc["alive_at_end"] == 0
    assert acc["evicted_not_reused"] == 0
    assert accounting_sentence(acc, 2, 10) == (
        "4 model loads over 10 requests = 2 into a free slot (models_max=2 starts empty) + 2 into a slot an "
        "eviction freed; the router evicted 2 time(s); 2 child(ren) stopped outside the scheduler (e.g. at the "
        "end of the run)")


@pytest.mark.parametrize("cap", [0, 3])
def test_load_accounting_without_a_full_cap_counts_free_slots(cap):
    events = [ev(0.0, "spawn", "a"), ev(0.1, "spawn", "b"), ev(0.2, "spawn", "c")]
    acc = load_accounting(pd.DataFrame(events), models_max=cap)
    assert acc["loads"] == acc["loads_free_slot"] == 3 and acc["alive_at_end"] == 3


def test_router_lines_are_put_on_the_router_clock():
    """A burst of lines read late (harness stamps 40-60 ms after the router wrote them) goes back to
    the router's own times, shifted by the smallest lag; other sources keep their stamps."""
    from harness.analysis.swap_served import aligned_events

    def line(t_read, own, kind, model):
        m, s = divmod(own, 60)
        text = f"{int(m)}.{int(s):02d}.{int(own * 1000) % 1000:03d}.{int(round(own * 1e6)) % 1000:03d} I srv  x"
        return {"t_s": t_read, "source": "router", "kind": kind, "model": model, "detail": "{}", "text": text}

    events = pd.DataFrame([line(0.110, 0.100, "queued", "a"), line(0.111, 0.1005, "wait", "a"),
                           line(0.560, 0.500, "spawn", "a"),  # read in a burst with the next one, 60 ms late
                           line(0.5601, 0.520, "proxy", "a"),
                           {"t_s": 0.525, "source": "sse", "kind": "status:loaded", "model": "a", "detail": "{}",
                            "text": "{}"}])
    out = aligned_events(events)
    assert list(out["kind"]) == ["queued", "wait", "spawn", "status:loaded", "proxy"]
    assert out["t_s"].tolist() == pytest.approx([0.110, 0.1105, 0.510, 0.525, 0.530])
    assert out["t_read_s"].tolist() == pytest.approx([0.110, 0.111, 0.560, 0.525, 0.5601])


def test_lru_replay_does_not_judge_an_eviction_it_cannot_tell_apart():
    """b was used longer ago than a, but b's last request ended 10 ms after the eviction as the client
    saw it: the router may still have counted b busy, so the eviction of a is not judged either way."""
    from harness.analysis.swap import lru_check

    events = [ev(0.0, "spawn", "a"), ev(0.1, "status:loaded", "a", "sse"), ev(0.2, "spawn", "b"),
              ev(0.3, "status:loaded", "b", "sse"), ev(0.31, "proxy", "b"), ev(0.5, "proxy", "a"),
              ev(1.0, "evict", "a")]
    for b_done, match in ((1.01, None), (0.9, False)):
        requests = pd.DataFrame([req(0, "b", 0.305, b_done), req(1, "a", 0.45, 0.6)])
        (row,) = lru_check(requests, pd.DataFrame(events)).to_dict("records")
        assert row["victim"] == "a" and row["expected"] == "b" and row["match"] is match
        assert row["explanation"].startswith("not judged: b was used longer ago" if match is None
                                             else "a was last used at 0.500 s, but b was idle too")


def line(t, kind, model, text):
    return {**ev(t, kind, model), "text": text}


@pytest.mark.parametrize("build, lines, evictions", [
    # 10327: a scheduler eviction is only "unload: stopping model instance"
    ("10327", [line(1.0, "stop_sent", "a", "srv        unload: stopping model instance name=a"),
               line(2.0, "stop_sent", "b", "srv        unload: stopping model instance name=b")], 2),
    # 9093: "removing LRU" then "unload: stopping" for the same eviction: counted once
    ("9093", [line(1.0, "evict", "a", "srv    unload_lru: models_max limit reached, removing LRU name=a"),
              line(1.001, "stop_sent", "a", "srv        unload: stopping model instance name=a")], 1),
    # 11434: the eviction line only; the shutdown's unload_all is not an eviction
    ("11434", [line(1.0, "evict", "a", "srv          tick: evicting idle LRU name=a for a queued request"),
               line(1.0002, "stop_sent", "a", "srv          tick: stopping model instance name=a"),
               line(9.0, "stop_sent", "b", "srv    unload_all: stopping model instance name=b")], 1),
])
def test_evictions_of_every_build_are_counted_once(build, lines, evictions):
    from harness.analysis.swap_served import storm_events

    out = storm_events(pd.DataFrame(lines))
    assert int(out["kind"].eq("evict").sum()) == evictions, build
    inferred = out[out["detail"].str.contains("inferred_from")]
    assert len(inferred) == (2 if build == "10327" else 0)


def test_an_inferred_eviction_enters_the_accounting():
    """10327's storm: b's load evicts a; without the eviction line the load was 'after other exit'."""
    events = LOAD_A + [
        ev(1.000, "queued", "b"), ev(1.001, "wait", "b"),
        line(1.002, "stop_sent", "a", "srv        unload: stopping model instance name=a"),
        ev(1.050, "exited", "a"), ev(1.051, "claim", "b"), ev(1.052, "spawn", "b"),
        ev(1.200, "child_loaded", "b", "child"), ev(1.201, "proxy", "b")]
    from harness.analysis.swap_served import storm_events

    acc = load_accounting(storm_events(pd.DataFrame(events)), models_max=1)
    assert acc["evictions"] == 1 and acc["loads_after_eviction"] == 1 and acc["loads_after_other_exit"] == 0


def test_one_child_evicted_by_several_lines_is_one_eviction():
    """Build 10327 logs "went idle, giving up its slot" and then "evicting idle LRU ... to make room"
    for the same child, once per queued request: one child, one eviction (text from a real 10327 log)."""
    from harness.analysis.swap_served import storm_events
    from harness.engines.router import parse_router_line

    texts = ["0.00.437.042 I srv  on_model_idl: model name=b went idle, giving up its slot to a queued request",
             "0.00.437.043 I srv        unload: stopping model instance name=b",
             "0.00.438.755 I srv  ensure_model: evicting idle LRU name=b to make room for name=a",
             "0.00.443.264 I srv  ensure_model: evicting idle LRU name=b to make room for name=a"]
    rows = []
    for i, text in enumerate(texts):
        kind, detail = parse_router_line(text)
        rows.append({**ev(1.0 + i * 0.001, kind, detail["model"]), "text": text})
    events = LOAD_A + [ev(0.9, "spawn", "b")] + rows + [ev(1.01, "exited", "b"), ev(1.02, "spawn", "a")]
    out = storm_events(pd.DataFrame(events))
    assert list(out["kind"]).count("evict") == 1 and list(out["kind"]).count("evict_repeat") == 2
    acc = load_accounting(out, models_max=2)
    assert acc["evictions"] == 1 and acc["eviction_lines_repeated"] == 2
    assert "2 more eviction line(s)" in accounting_sentence(acc, 2, 5)
