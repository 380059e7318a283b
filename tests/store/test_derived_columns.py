"""Columns a kind derives from its tables when the run ends (a swap run's requests.served_as)."""

import pandas as pd

from harness.store import RunWriter, open_run, with_derived_columns


def test_a_swap_run_stores_served_as_from_its_events(tmp_path):
    w = RunWriter(tmp_path, "swap", {"config": {"models_max": 1}})
    for t, kind in ((0.01, "queued"), (0.011, "wait"), (0.012, "spawn"), (0.2, "proxy"), (0.5, "proxy")):
        w.append({"t_s": t, "source": "router", "kind": kind, "model": "a", "detail": "{}", "text": ""}, "events")
    for i, (t_send, t_done) in enumerate(((0.0, 0.25), (0.49, 0.52))):
        w.append({"index": i, "wave": i, "model": "a", "t_send_s": t_send, "t_done_s": t_done, "http_status": 200,
                  "latency_ms": (t_done - t_send) * 1000}, "requests")
    w.finish("complete")
    stored = pd.read_parquet(w.dir / "requests.parquet")
    assert list(stored["served_as"]) == ["own_load", "resident"]
    assert list(open_run(w.dir, tmp_path).table("requests")["served_as"]) == ["own_load", "resident"]
    assert "served_as" not in (w.dir / "requests.jsonl").read_text()  # the journal stays as measured


def test_kinds_without_derived_columns_and_failures_leave_the_tables_alone():
    frames = {"requests": pd.DataFrame({"index": [0], "model": ["a"]})}
    assert with_derived_columns("idle", frames) is frames
    broken = {"requests": pd.DataFrame({"nonsense": [1]})}  # deriving fails: the tables are written as they are
    assert with_derived_columns("swap", broken) is broken
