"""The timed HTTP exchange's framing, against a scripted loopback socket peer.

This peer tests the HTTP client's parsing only (fragments, chunked bodies, closes); the real
llama-server path is covered by the engine tests, which go through the same client.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.timed_http import TimedConnection, build_request

BODY = b'{"timings":{"prompt_ms":1.5,"predicted_ms":0.01},"tokens_cached":3}'


def ok_response(body: bytes = BODY, extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def chunked_response(parts: list[bytes]) -> bytes:
    out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for p in parts:
        out += f"{len(p):x}\r\n".encode() + p + b"\r\n"
    return out + b"0\r\n\r\n"


class ScriptedPeer:
    """Accepts connections; for each request read, sends the next scripted answer as fragments.

    An answer is (fragments, then): then "keep" keeps the connection, "close" closes it after,
    "hold" keeps it silent for a second."""

    def __init__(self, answers: list[tuple[list[bytes], str]]):
        self.answers = list(answers)
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_request(self, conn: socket.socket) -> bytes | None:
        buf = b""
        while b"\r\n\r\n" not in buf:
            more = conn.recv(65536)
            if not more:
                return None
            buf += more
        head, _, body = buf.partition(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                while len(body) < int(line.split(b":")[1]):
                    body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                while self.answers:
                    request = self._read_request(conn)
                    if request is None:
                        break
                    self.requests.append(request)
                    fragments, then = self.answers.pop(0)
                    for fragment in fragments:
                        conn.sendall(fragment)
                        time.sleep(0.001)
                    if then == "close":
                        break
                    if then == "hold":  # say nothing more for a while
                        time.sleep(1.0)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def peer_factory():
    peers = []

    def make(answers):
        peer = ScriptedPeer(answers)
        peers.append(peer)
        return peer

    yield make
    for p in peers:
        p.close()


def exchange(peer: ScriptedPeer, n: int = 1, timeout_s: float = 5.0):
    conn = TimedConnection("127.0.0.1", peer.port, timeout_s)
    request = build_request("POST", "/completion", "127.0.0.1", peer.port, b'{"n_predict": 1}',
                            {"Content-Type": "application/json"})
    try:
        return [conn.exchange(request) for _ in range(n)], conn
    finally:
        conn.close()


def test_request_bytes_are_http11_with_length() -> None:
    req = build_request("POST", "/completion", "127.0.0.1", 8080, b"{}", {"Content-Type": "application/json"})
    assert req == (b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 2\r\n\r\n{}")
    assert build_request("GET", "/health", "127.0.0.1", 1) == b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"


def test_content_length_keep_alive_reuses_one_connection(peer_factory) -> None:
    peer = peer_factory([([ok_response()], "keep")] * 3)
    results, conn = exchange(peer, 3)
    assert [(x.status, x.body, x.error) for x in results] == [(200, BODY, None)] * 3
    assert peer.connections == 1 and conn.reconnects == 0
    assert all(x.client_ms is not None and 0 <= x.client_ms <= x.latency_ms for x in results)
    assert peer.requests[0].endswith(b'{"n_predict": 1}')


def test_chunked_and_close_delimited_and_http10(peer_factory) -> None:
    peer = peer_factory([
        ([chunked_response([b'{"a":', b' 1}'])], "keep"),
        ([b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n", b'{"b": 2}'], "close"),
        ([ok_response(b"{}", b"Connection: close\r\n")], "close"),
        ([ok_response(b"[]")], "keep"),
    ])
    results, conn = exchange(peer, 4)
    assert [x.body for x in results] == [b'{"a": 1}', b'{"b": 2}', b"{}", b"[]"]
    assert all(x.error is None for x in results)
    assert peer.connections == 3  # the HTTP/1.0 answer and "Connection: close" each end one


def test_interim_response_is_skipped(peer_factory) -> None:
    peer = peer_factory([([b"HTTP/1.1 100 Continue\r\n\r\n", ok_response()], "keep")])
    (x,), _ = exchange(peer)
    assert (x.status, x.body) == (200, BODY)


def test_error_status_keeps_its_body(peer_factory) -> None:
    body = b'{"error": {"code": 500, "message": "boom"}}'
    peer = peer_factory([([ok_response(body).replace(b"200 OK", b"500 Internal Server Error")], "keep")])
    (x,), _ = exchange(peer)
    assert (x.status, x.body, x.error) == (500, body, None)


def test_idle_close_is_noticed_and_reopened_before_the_clock(peer_factory) -> None:
    # the peer answers, then closes while idle (llama-server after 5 s / 100 requests)
    peer = peer_factory([([ok_response()], "close"), ([ok_response()], "keep")])
    conn = TimedConnection("127.0.0.1", peer.port, 5.0)
    request = build_request("GET", "/health", "127.0.0.1", peer.port)
    first = conn.exchange(request)
    time.sleep(0.05)  # the close arrives
    second = conn.exchange(request)
    conn.close()
    assert first.error is None and second.error is None and second.body == BODY
    assert conn.reconnects == 1 and peer.connections == 2


@pytest.mark.parametrize("fragments, words", [
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"short\""], "after 8 of 50 body bytes"),
    ([b"HTTP/1.1 200 OK\r\nContent-Le"], "inside the response head"),
    ([], "without a response"),
    ([b"SSH-2.0-OpenSSH_9.2\r\n\r\n"], "not an HTTP/1.x response"),
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"], "inside a chunked body"),
])
def test_broken_answers_are_errors_not_samples(peer_factory, fragments, words) -> None:
    peer = peer_factory([(fragments, "close")])
    (x,), conn = exchange(peer)
    assert x.status is None and x.body is None and words in x.error
    assert conn.sock is None  # never reused


def test_silence_is_a_timeout(peer_factory) -> None:
    peer = peer_factory([([b"HTTP/1.1 200 OK\r\n"], "hold")])  # a head that never ends
    (x,), _ = exchange(peer, timeout_s=0.3)
    assert x.error.startswith("TimeoutError") and "timed out" in x.error
    assert 0.25 <= x.latency_ms / 1000 < 5


def test_connect_refused_is_an_error() -> None:
    s = socket.create_server(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    x = TimedConnection("127.0.0.1", port, 1.0).exchange(build_request("GET", "/health", "127.0.0.1", port))
    assert x.status is None and x.error.startswith("connect failed: ConnectionRefusedError")


@settings(max_examples=25, deadline=None)
@given(body=st.binary(max_size=3000), cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=8),
       chunked=st.booleans())
def test_any_fragmentation_gives_the_same_body(body, cuts, chunked) -> None:
    """However the peer's bytes are cut into TCP sends, the body read is the body sent."""
    raw = chunked_response([body[i:i + 700] for i in range(0, len(body), 700)]) if chunked else ok_response(body)
    fragments, at = [], 0
    for cut in cuts:
        if at + cut < len(raw):
            fragments.append(raw[at:at + cut])
            at += cut
    fragments.append(raw[at:])
    peer = ScriptedPeer([(fragments, "keep")])
    try:
        (x,), _ = exchange(peer)
    finally:
        peer.close()
    assert x.error is None and x.body == body
