"""Ollama and Metal claim scenarios: parsers on recorded outputs, driving logic on the stand-in.

No Ollama and no Metal GPU exist on this machine; the scenarios run for real where they do.
The Ollama driving logic is exercised here against tests/standins/ollama_standin.py only.
"""

import json
from pathlib import Path

from standins.ollama_standin import OllamaStandIn

from harness.repro.claims import HOLDS, judge, load_claims
from harness.repro.ollama_scenarios import (QUEUE_FULL, is_queue_full, is_unload, load_ms, loaded_models,
                                            metal_keep_alive_s, ollama_reuse)
from harness.repro.scenarios import Context

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_ps_parser_on_a_recorded_reply():
    ps = json.loads((FIXTURES / "ollama" / "api_ps.json").read_text())
    assert loaded_models(ps) == ["qwen2.5-coder:7b"]
    assert loaded_models({"models": []}) == []


def test_generate_reply_fields():
    assert load_ms({"load_duration": 250_000_000}) == 250.0
    assert load_ms({}) is None
    assert is_unload({"model": "x", "response": "", "done": True, "done_reason": "unload"})
    assert not is_unload({"done_reason": "length"})
    body = json.dumps({"error": QUEUE_FULL})
    assert is_queue_full(503, body) and not is_queue_full(500, body) and not is_queue_full(503, "{}")


def test_metal_keep_alive_line():
    # the line as shared/reference/llama-server.md quotes it (-lv 4 startup log)
    log = "ggml_metal_init: use residency sets = true\ncreating a residency set collection (keep_alive = 180 s)\n"
    assert metal_keep_alive_s(log) == 180
    assert metal_keep_alive_s("creating a residency set collection (keep_alive = 30 s)") == 30
    assert metal_keep_alive_s("no such line") is None


def test_reuse_scenario_drives_the_api(tmp_path):
    with OllamaStandIn() as standin:
        ev = ollama_reuse(Context(None, tmp_path, lambda r: None), {"model": "qwen2.5-coder:7b", "url": standin.url})
        bodies = standin.requests
    assert [b.get("keep_alive") for b in bodies] == [0, None, None]  # unload first, then two requests
    assert ev.figures["first_load_ms"] == 250.0 and ev.figures["second_load_ms"] == 0.0
    spec = next(c for c in load_claims() if c.id == "ollama-reuse-loaded")
    assert judge(spec, ev.figures)[0] == HOLDS


def test_platform_specs_have_real_scenarios_and_checks():
    specs = {c.id: c for c in load_claims()}
    for cid in ("ollama-reuse-loaded", "ollama-keep-alive-expiry", "ollama-bounded-queue",
                "idle-metal-keepalive-env-parse"):
        assert specs[cid].scenario != "none" and specs[cid].check, cid
