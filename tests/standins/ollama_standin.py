"""A STAND-IN for Ollama's HTTP API, for adapter tests only.

It replays the documented response shapes (shared/reference/platform-probes.md and
tests/fixtures/ollama/): /api/version, /api/generate (non-streaming, durations in
ns, a load on first use of a model, ``keep_alive: 0`` unloads with
``done_reason: "unload"``) and /api/ps.  It runs no model.  The Ollama engine is
verified only against this stand-in until it runs against a live Ollama.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OllamaStandIn:
    def __init__(self) -> None:
        self.loaded: dict[str, float] = {}
        self.requests: list[dict] = []
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/api/version":
                    return self._send(200, {"version": "0.0.0-standin"})
                if self.path == "/api/ps":
                    return self._send(200, {"models": [
                        {"name": m, "model": m, "size": 5618579456, "digest": "0" * 64,
                         "details": {"format": "gguf", "family": "qwen2", "parameter_size": "7.6B",
                                     "quantization_level": "Q4_K_M"},
                         "expires_at": "2025-08-06T14:23:28.7482+02:00", "size_vram": 5618579456,
                         "context_length": 4096} for m in standin.loaded]})
                return self._send(404, {"error": "not found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.requests.append(body)
                if self.path != "/api/generate":
                    return self._send(404, {"error": "not found"})
                model = body["model"]
                if body.get("keep_alive") in (0, "0", "0s"):
                    standin.loaded.pop(model, None)
                    return self._send(200, {"model": model, "response": "", "done": True, "done_reason": "unload"})
                load_ns = 0 if model in standin.loaded else 250_000_000
                standin.loaded[model] = time.time()
                time.sleep(0.002 + load_ns / 1e9)
                return self._send(200, {"model": model, "created_at": "2026-11-30T00:00:00Z", "response": "x",
                                        "done": True, "done_reason": "length", "total_duration": load_ns + 3_000_000,
                                        "load_duration": load_ns, "prompt_eval_count": 12,
                                        "prompt_eval_duration": 1_500_000, "eval_count": 1, "eval_duration": 500_000})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "OllamaStandIn":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
