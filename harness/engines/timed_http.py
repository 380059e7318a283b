"""The timed HTTP exchange: one request on a persistent loopback connection, with as little
Python between the clock readings as HTTP/1.1 allows.

Why not ``http.client`` (or h11, httpx) on the timed path: on this project's 2-vCPU machine,
against the same llama-server, ``GET /health`` took p50 0.09-0.20 ms through ``http.client``
and 0.024-0.030 ms through this module; a one-token completion's overhead (latency - server
time) dropped by 0.10-0.12 ms (``docs/instrument.md``). Parsing one llama-server response
costs h11 about 80 us and the code below about 2 us. Everything that is not timed (start-up
checks, tokenizing, streaming) keeps using httpx.

What it speaks: HTTP/1.1 requests built once as bytes; responses framed by Content-Length,
chunked transfer coding, or connection close (HTTP/1.0 servers such as Python's http.server).
A connection the server closed while idle (llama-server drops keep-alive connections after
5 s and after 100 requests) is noticed locally, without traffic, and reopened *before* the
clock starts.

Each exchange also reports the client's own work on the timed path: writing the request, and
reading and framing the response after its first byte arrived (``client_ms``). That is a lower
bound on what the harness adds; the time the kernel takes to wake the client is not in it.
"""

from __future__ import annotations

import gc
import select
import socket
import time
from dataclasses import dataclass

MAX_HEAD_BYTES = 64 * 1024
RECV_BYTES = 65536


class ProtocolError(Exception):
    """The peer's answer is not HTTP/1.x as this client reads it."""


class PeerClosed(ProtocolError):
    """The peer closed the connection before a complete response."""


@dataclass
class Exchange:
    """One timed request: perf_counter seconds, status, body, and the client's own work."""

    t_send: float
    t_done: float
    status: int | None
    body: bytes | None
    error: str | None
    client_ms: float | None = None  # request write + response handling after the first byte

    @property
    def latency_ms(self) -> float:
        return (self.t_done - self.t_send) * 1000.0


def build_request(method: str, path: str, host: str, port: int, body: bytes | None = None,
                  headers: dict[str, str] | None = None) -> bytes:
    """The request's bytes, built once and sent as they are for every timed exchange."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


class TimedConnection:
    """A persistent HTTP/1.1 connection whose exchanges are timed."""

    def __init__(self, host: str, port: int, timeout_s: float):
        self.host, self.port = host, port
        self.timeout_s = timeout_s
        self.sock: socket.socket | None = None
        self.reconnects = 0
        self.spin = False  # busy-poll for the response instead of sleeping in recv (opt-in)

    def set_timeout(self, timeout_s: float) -> None:
        """No socket operation (connect, send, each read) waits longer than this."""
        self.timeout_s = timeout_s
        if self.sock is not None:
            self.sock.settimeout(timeout_s)

    def ensure_open(self) -> None:
        """Reopen the connection when the peer closed it (readable while idle = EOF or junk)."""
        sock = self.sock
        if sock is not None:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return
            self.close()
            self.reconnects += 1
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def exchange(self, request: bytes) -> Exchange:
        """Send ``request`` and read the whole response; the clock covers exactly that."""
        try:
            self.ensure_open()
        except OSError as exc:
            now = time.perf_counter()
            return Exchange(now, now, None, None, f"connect failed: {type(exc).__name__}: {exc}")
        sock = self.sock
        assert sock is not None
        gc_was_enabled = gc.isenabled()
        gc.disable()
        t_send = time.perf_counter()
        try:
            sock.sendall(request)
            t_sent = time.perf_counter()
            if self.spin:
                give_up = t_send + self.timeout_s
                while not select.select([sock], [], [], 0)[0]:
                    if time.perf_counter() > give_up:
                        raise TimeoutError("timed out")
            first = sock.recv(RECV_BYTES)
            t_first = time.perf_counter()
            status, body, keep = self._read_response(sock, first)
            t_done = time.perf_counter()
        except (OSError, ProtocolError, ValueError) as exc:
            t_done = time.perf_counter()
            self.close()
            name = "TimeoutError" if isinstance(exc, socket.timeout) else type(exc).__name__
            return Exchange(t_send, t_done, None, None, f"{name}: {exc}")
        finally:
            if gc_was_enabled:
                gc.enable()
        if not keep:
            self.close()
        return Exchange(t_send, t_done, status, body, None,
                        ((t_sent - t_send) + (t_done - t_first)) * 1000.0)

    @staticmethod
    def _read_response(sock: socket.socket, buf: bytes) -> tuple[int, bytes, bool]:
        """(status, body, keep the connection) of the response that starts with ``buf``."""
        while True:
            if not buf:
                buf = sock.recv(RECV_BYTES)
                if not buf:
                    raise PeerClosed("the server closed the connection without a response")
            end = buf.find(b"\r\n\r\n")
            while end < 0:
                if len(buf) > MAX_HEAD_BYTES:
                    raise ProtocolError(f"no end of the response head in {len(buf)} bytes")
                more = sock.recv(RECV_BYTES)
                if not more:
                    raise PeerClosed("the server closed the connection inside the response head")
                buf += more
                end = buf.find(b"\r\n\r\n")
            head, buf = buf[:end], buf[end + 4:]
            if not head.startswith(b"HTTP/1."):
                raise ProtocolError(f"not an HTTP/1.x response: {head[:40]!r}")
            status = int(head[9:12])
            if 100 <= status < 200:  # an interim response: the real one follows
                continue
            break
        length = None
        chunked = False
        keep = head[5:8] == b"1.1"
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                token = value.strip().lower()
                keep = token == b"keep-alive" or (keep and token != b"close")
        if status in (204, 304):
            return status, b"", keep
        if chunked:
            return status, _read_chunked(sock, buf), keep
        if length is not None:
            while len(buf) < length:
                more = sock.recv(RECV_BYTES)
                if not more:
                    raise PeerClosed(f"the server closed the connection after {len(buf)} of {length} body bytes")
                buf += more
            return status, buf[:length], keep
        parts = [buf]  # framed by the connection's end
        while more := sock.recv(RECV_BYTES):
            parts.append(more)
        return status, b"".join(parts), False


def _read_chunked(sock: socket.socket, buf: bytes) -> bytes:
    """The body of a chunked response whose first bytes are ``buf``."""
    parts: list[bytes] = []
    while True:
        while (eol := buf.find(b"\r\n")) < 0:
            buf += _more(sock)
        size = int(buf[:eol].split(b";", 1)[0], 16)
        buf = buf[eol + 2:]
        if size == 0:
            while not (buf.startswith(b"\r\n") or b"\r\n\r\n" in buf):  # trailers, then the empty line
                buf += _more(sock)
            return b"".join(parts)
        while len(buf) < size + 2:
            buf += _more(sock)
        parts.append(buf[:size])
        buf = buf[size + 2:]


def _more(sock: socket.socket) -> bytes:
    more = sock.recv(RECV_BYTES)
    if not more:
        raise PeerClosed("the server closed the connection inside a chunked body")
    return more
