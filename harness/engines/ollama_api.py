"""What Ollama says, read: its API replies (``/api/ps``, ``/api/generate``, ``/api/show``) and its
server log.  Each parser is tested on recorded real output (tests/engines/test_ollama_api.py,
tests/fixtures/ollama/); the Ollama claim scenarios (harness/repro/ollama_scenarios.py) use them.
The durations of a reply are ``http_engines.ollama_timings``."""

from __future__ import annotations

import re
from datetime import datetime

QUEUE_FULL = "server busy, please try again. maximum pending requests exceeded"
RUNNER_STARTED = re.compile(r'^time=(?P<time>\S+) .*msg="llama runner started in (?P<s>[0-9.]+) seconds"', re.M)
SHOW_FROM = re.compile(r"^FROM (?P<path>\S+)", re.M)


def loaded_models(ps: dict) -> list[str]:
    """Model names in a ``GET /api/ps`` reply."""
    return [m.get("name") or m.get("model") for m in ps.get("models", [])]


def is_unload(reply: dict) -> bool:
    """An ``/api/generate`` reply to a request that unloaded the model (``keep_alive`` 0)."""
    return reply.get("done_reason") == "unload"


def is_queue_full(status: int | None, body: str) -> bool:
    """Ollama's answer when its queue (``OLLAMA_MAX_QUEUE``) is full."""
    return status == 503 and QUEUE_FULL in body


def _log_time(stamp: str) -> float:
    """``time=`` of an Ollama log line (RFC 3339 with ms, e.g. 2026-04-10T21:13:59.427+09:00) in Unix s."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def load_intervals(log_text: str) -> list[tuple[float, float]]:
    """(start, end) in Unix seconds of every runner load in an Ollama server log: each
    ``llama runner started in X seconds`` line ends a load that began X seconds before
    (``loadStart``, llm/server.go)."""
    out = []
    for m in RUNNER_STARTED.finditer(log_text):
        end = _log_time(m.group("time"))
        out.append((end - float(m.group("s")), end))
    return sorted(out)


def model_paths(show_replies: dict[str, dict]) -> dict[str, str]:
    """Model name -> its blob path, from ``POST /api/show`` replies (the modelfile's ``FROM`` line):
    Ollama's ``ByDurationAndName`` breaks keep-alive ties by this path."""
    out = {}
    for name, reply in show_replies.items():
        m = SHOW_FROM.search(reply.get("modelfile", ""))
        if m:
            out[name] = m.group("path")
    return out
