"""Ollama's API replies and server log, read (harness/engines/ollama_api.py) from recorded real
outputs (tests/fixtures/ollama/); the server-log parser's real lines are in
tests/repro/test_platform_scenarios.py, next to the judge they feed.  No Ollama runs here."""

import json
from pathlib import Path

from harness.engines.http_engines import ollama_timings
from harness.engines.ollama_api import QUEUE_FULL, is_queue_full, is_unload, loaded_models

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_ps_parser_on_a_recorded_reply():
    ps = json.loads((FIXTURES / "ollama" / "api_ps.json").read_text())
    assert loaded_models(ps) == ["qwen2.5-coder:7b"]
    assert loaded_models({"models": []}) == []


def test_generate_reply_fields():
    assert ollama_timings({"load_duration": 250_000_000})["load_ms"] == 250.0
    assert "load_ms" not in ollama_timings({})
    assert is_unload({"model": "x", "response": "", "done": True, "done_reason": "unload"})
    assert not is_unload({"done_reason": "length"})
    body = json.dumps({"error": QUEUE_FULL})
    assert is_queue_full(503, body) and not is_queue_full(500, body) and not is_queue_full(503, "{}")
