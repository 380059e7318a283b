"""The swap timeline draws each request while they can be told apart, and counts per time bin
beyond that (a 200-request storm drawn one by one is a smear)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd

from harness.report import swap as swap_report


def _storm(n):
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 20, n))
    return pd.DataFrame({"index": range(n), "model": rng.choice(["a", "b"], n), "t_send_s": t,
                         "t_done_s": t + 0.05, "served_as": rng.choice(["resident", "own_load"], n),
                         "error": [None] * (n - 1) + ["boom"]})


def _draw(monkeypatch, n):
    drawn = {"bar": 0, "plot": 0}
    real_subplots = swap_report.plt.subplots

    def subplots(*args, **kwargs):
        fig, axes = real_subplots(*args, **kwargs)
        top = axes[0]
        for name in drawn:
            method = getattr(top, name)

            def counted(*a, _m=method, _n=name, **k):
                drawn[_n] += 1
                return _m(*a, **k)
            setattr(top, name, counted)
        return fig, axes

    monkeypatch.setattr(swap_report.plt, "subplots", subplots)
    from harness.record import parse_record

    record = parse_record({"kind": "swap", "models": [{"label": "a"}, {"label": "b"}]}, "manifest.json")
    run = SimpleNamespace(record=record, run_id="20260101T000000Z-swap-abcd")
    empty = pd.DataFrame(columns=["t_s", "kind", "model"])
    memory = pd.DataFrame({"t_s": [0.0, 20.0], "children_alive": [1, 1], "rss_total_bytes": [1e8, 1e8]})
    requests = _storm(n)
    png = swap_report.timeline_png(run, empty, memory, requests, 1, requests[["index", "served_as"]])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return drawn


def test_few_requests_are_drawn_one_by_one(monkeypatch):
    drawn = _draw(monkeypatch, 20)
    assert drawn["plot"] >= 40 and drawn["bar"] == 0  # a line and a start tick per request


def test_many_requests_are_counted_per_time_bin(monkeypatch):
    drawn = _draw(monkeypatch, 400)
    assert drawn["plot"] <= swap_report.HISTOGRAM_BINS  # only the failure marks, never one line per request
    assert 0 < drawn["bar"] <= 2 * len(swap_report.SERVED_COLOURS)  # one bar call per model and class
