"""The one-token client every idle engine uses: one persistent loopback connection, a request built
once as bytes, a response framed by ``timed_http``."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlsplit

from harness.engines.base import Completion
from harness.engines.loopback import HOST
from harness.engines.timed_http import TimedConnection, build_request
from harness.errors import EngineError


def http_error(status: int | None, body: bytes | None) -> str:
    """The error text of a non-200 answer: never empty, so that no reader takes it for a success."""
    text = (body or b"")[:300].decode(errors="replace").strip()
    return f"HTTP {status}" + (f": {text}" if text else " (no body)")


class OneTokenClient:
    """Decode one token with the prompt cached, as lean as the server allows.

    The request goes through ``timed_http`` (one persistent loopback connection, a request
    built once as bytes, a response framed without ``http.client``): on a 2-core box that
    client adds about 0.03 ms to ``GET /health`` where ``http.client`` added 0.09-0.2 ms.
    The body asks for ``response_fields`` so the server omits its large
    ``generation_settings`` object; JSON is parsed after the clock stops.
    """

    RESPONSE_FIELDS = ["timings", "tokens_cached"]

    def __init__(self, base_url: str, prompt: str, timeout_s: float = 600.0, *, path: str = "/completion",
                 body: dict | None = None, timings: Callable[[dict], dict] | None = None):
        """Defaults speak llama-server's native API; other engines pass their own path, body and
        a function that turns a response into server timings (``{}`` when the engine has none)."""
        parsed = urlsplit(base_url)
        self.host, self.port = parsed.hostname or HOST, parsed.port or 80
        self.connection = TimedConnection(self.host, self.port, timeout_s)
        self.path = path
        self.timings = timings or (lambda data: data.get("timings", {}))
        self._floor_requests: dict[str, bytes] = {}
        self.set_body(body if body is not None else {
            "prompt": prompt, "n_predict": 1, "cache_prompt": True, "response_fields": self.RESPONSE_FIELDS})

    @property
    def spin(self) -> bool:
        """Busy-poll the socket for the response (opt-in: burns the client's CPU while waiting)."""
        return self.connection.spin

    @spin.setter
    def spin(self, value: bool) -> None:
        self.connection.spin = value

    def set_timeout(self, timeout_s: float) -> None:
        """The per-request deadline: no socket operation (connect, send, each read) waits longer."""
        self.connection.set_timeout(timeout_s)

    def set_body(self, body: dict) -> None:
        self.body = json.dumps(body).encode()
        self.request = build_request("POST", self.path, self.host, self.port, self.body,
                                     {"Content-Type": "application/json"})

    def bos_token(self) -> int:
        """The model's BOS token id, from the server's tokenizer (not timed)."""
        body = json.dumps({"content": "", "add_special": True}).encode()
        x = self.connection.exchange(build_request("POST", "/tokenize", self.host, self.port, body,
                                                   {"Content-Type": "application/json"}))
        tokens = None
        if x.error is None and x.status == 200 and x.body:
            try:
                tokens = json.loads(x.body).get("tokens")
            except ValueError:
                tokens = None
        if not tokens:
            raise EngineError("the server's tokenizer gave no BOS token for an empty prompt",
                              where=f"POST /tokenize -> {x.status or x.error} {(x.body or b'')[:200]!r}",
                              hint="--match llama-idle needs a model with a BOS token")
        return int(tokens[0])

    def complete_one_token(self) -> Completion:
        x = self.connection.exchange(self.request)
        if x.error is not None or x.body is None:
            return Completion(x.t_send, x.t_done, x.status, x.error, client_ms=x.client_ms)
        if x.status != 200:  # any other answer (a redirect, an empty 204) is an error, never a measurement
            return Completion(x.t_send, x.t_done, x.status, http_error(x.status, x.body), client_ms=x.client_ms)
        try:
            timings = self.timings(json.loads(x.body))
        except (ValueError, AttributeError) as exc:
            return Completion(x.t_send, x.t_done, x.status, f"bad JSON: {exc}", client_ms=x.client_ms)
        return Completion(x.t_send, x.t_done, x.status, None, timings, client_ms=x.client_ms)

    def get(self, path: str) -> Completion:
        """A bodiless GET timed exactly like a completion (no server timings)."""
        request = self._floor_requests.get(path)
        if request is None:
            request = self._floor_requests[path] = build_request("GET", path, self.host, self.port)
        x = self.connection.exchange(request)
        error = x.error
        if error is None and x.status != 200:
            error = http_error(x.status, x.body)
        return Completion(x.t_send, x.t_done, x.status, error, client_ms=x.client_ms)

    def close(self) -> None:
        self.connection.close()
