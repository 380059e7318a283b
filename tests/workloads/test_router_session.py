"""The router session (backend + sampler + timeline) over a toy swap backend, no engine needed.

Shows the swap driver posting the backend's own request path and body, the request rows
carrying a real ``resident_at_send`` (from the backend's states), and the session
closing its sampler and backend.
"""

from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.engines.router import TimelineEvent
from harness.workloads.router_session import RouterSession, request_row
from harness.workloads.swap import RequestRecord


class ToyBackend:
    """Holds one model at a time, like mlx_lm.server; answers POST /toy/generate with 200."""

    request_path = "/toy/generate"
    reports_states = False  # engines.base.SwapBackend: lbench infers them from answers

    def answer_complete(self, body: str) -> bool:  # engines.base.SwapBackend: a whole JSON answer here
        return True

    def __init__(self, names, on_event):
        self.names = names
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.closed = False
        backend = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                backend.bodies.append(json.loads(self.rfile.read(n)))
                backend.paths.append(self.path)
                payload = b'{"ok": true}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.pid = os.getpid()  # the sampler watches this test process's tree
        self.argv, self.t_start = ["toy"], time.perf_counter()
        on_event(TimelineEvent(time.perf_counter(), "sse", "status:loaded", names[0], {"status": "loaded"}, "x"))

    def request_body(self, model, prompt, n_predict):
        return {"toy_model": model, "text": prompt, "tokens": n_predict}

    def after_response(self, model):
        return {n: "loaded" if n == model else "unloaded" for n in self.names}

    def describe(self):
        return {"argv": self.argv, "pid": self.pid, "port": self.port}

    def alive(self):
        return not self.closed

    def close(self):
        self.closed = True
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_session_drives_the_backend_format_and_tracks_residency():
    rows, events = [], []
    holder = {}

    def start(on_event):
        holder["b"] = ToyBackend(["a", "b"], on_event)
        return holder["b"]

    with RouterSession(start, ["a", "b"], sample_hz=50, on_event=events.append) as session:
        sent = session.drive([["a"], ["a"], ["b"], ["a"]], concurrency=1, n_predict=3, prompt="hi", emit=rows.append)
        assert session.wait_for("status:loaded", "a", timeout=60) is not None
        assert (session.count("status:loaded", "a"), session.count("status:loaded", "b"),
                session.count("status:loaded")) == (1, 0, 1)
    backend = holder["b"]
    assert sent == 4 and backend.closed and session.sampler_summary["samples"] >= 1
    assert backend.paths == ["/toy/generate"] * 4
    assert backend.bodies[0] == {"toy_model": "a", "text": "hi", "tokens": 3}  # the backend's format, not the driver's
    # a: loaded by the (sse) event; a again: resident; b: not; a after b: evicted by b's response
    assert [r["resident_at_send"] for r in sorted(rows, key=lambda r: r["index"])] == [True, True, False, False]
    assert all(r["http_status"] == 200 and r["latency_ms"] > 0 for r in rows)
    assert events and events[0]["kind"] == "status:loaded" and json.loads(events[0]["detail"]) == {"status": "loaded"}
    frame = session.event_frame()
    assert list(frame["model"]) == ["a"] and session.memory_frame()["t_s"].notna().all()


def test_request_row_leaves_residency_unknown_without_a_state():
    row = request_row(RequestRecord(0, 0, "a", 10.0, t_first_byte=10.5, t_done=11.0, http_status=200), t0=9.0)
    assert row["resident_at_send"] is None and row["t_send_s"] == 1.0 and row["latency_ms"] == 1000.0
    assert row["ttfb_ms"] == 500.0
    loaded = request_row(RequestRecord(0, 0, "a", 10.0, status_at_send="loaded"), t0=9.0)
    assert loaded["resident_at_send"] is True and loaded["latency_ms"] is None
