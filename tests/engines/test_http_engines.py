"""Adapters for Ollama (against a named stand-in), OpenAI-compatible servers (against the
real llama-server's OpenAI endpoint) and the loopback rule."""

import json
from pathlib import Path

import pytest

from harness.engines.base import Setting
from harness.engines.http_engines import OllamaEngine, OpenAIEngine, check_loopback, find_ollama, ollama_timings
from harness.errors import BadInput

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "ollama"


@pytest.mark.parametrize("url", ["http://10.0.0.5:11434", "http://example.com", "https://127.0.0.1:1", "http://8.8.8.8"])
def test_only_loopback(url):
    with pytest.raises(BadInput, match="not a loopback"):
        check_loopback(url, "--url")


def test_loopback_forms():
    assert check_loopback("127.0.0.1:1234", "--url") == "http://127.0.0.1:1234"
    assert check_loopback("http://localhost:11434/", "--url") == "http://localhost:11434"
    assert check_loopback("http://[::1]:8080", "--url") == "http://[::1]:8080"


def test_ollama_durations_become_timings():
    t = ollama_timings({"load_duration": 250_000_000, "prompt_eval_duration": 1_500_000, "prompt_eval_count": 12,
                        "eval_duration": 500_000, "eval_count": 1})
    assert t == {"prompt_ms": 1.5, "prompt_n": 12, "predicted_ms": 0.5, "predicted_n": 1, "load_ms": 250.0}


def test_api_ps_fixture_shape():
    ps = json.loads((FIX / "api_ps.json").read_text())
    m = ps["models"][0]
    assert m["size_vram"] == 5618579456 and m["details"]["quantization_level"] == "Q4_K_M"


def test_ollama_adapter_against_the_standin(tmp_path):
    from standins.ollama_standin import OllamaStandIn

    with OllamaStandIn() as standin:
        assert find_ollama(standin.url)["live"] is True
        engine = OllamaEngine(standin.url, {"OLLAMA_MAX_LOADED_MODELS": "1", "UNRELATED": "x"})
        assert engine.env == {"OLLAMA_MAX_LOADED_MODELS": "1"}
        with pytest.raises(BadInput, match="already running"):  # a server lbench did not start keeps its own env
            engine.preflight()
        OllamaEngine(standin.url).preflight()  # without settings, a running server is fine
        with engine.start("qwen2.5-coder:7b", Setting("30"), tmp_path / "log") as server:
            cold = server.complete_one_token()
            warm = server.complete_one_token()
        assert cold.http_status == 200 and cold.timings["load_ms"] == 250.0 and warm.timings["load_ms"] == 0.0
        assert warm.timings["prompt_ms"] == 1.5 and cold.latency_ms > 250
        assert standin.requests[0]["keep_alive"] == "30s" and standin.requests[0]["options"] == {"num_predict": 1}
    assert engine.setting_notes(Setting("none"))


def test_no_ollama_is_a_clear_error(tmp_path, monkeypatch):
    from harness.errors import EngineError

    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EngineError, match="no Ollama answers"):
        OllamaEngine("http://127.0.0.1:9").start("m", Setting(), tmp_path / "log")


@pytest.mark.engine
def test_openai_adapter_against_real_llama_server(engine_env, tmp_path):
    from harness.engines.llama_server import LlamaServerEngine
    from harness.engines.binary import locate
    from harness.models.resolve import resolve

    model = resolve("tiny-q8")
    with LlamaServerEngine(locate()).start(model.path, Setting(), tmp_path / "srv.log") as real:
        engine = OpenAIEngine(real.base_url)
        with engine.start("tiny", Setting(), tmp_path / "log") as server:
            replies = [server.complete_one_token() for _ in range(3)]
    assert all(r.http_status == 200 and r.error is None for r in replies)
    assert replies[-1].latency_ms > 0 and engine.facts()["timing"] == "client-side only"
