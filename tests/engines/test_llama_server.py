"""The real llama-server, started on a generated tiny model."""

import psutil
import pytest

from harness.engines.base import Setting
from harness.engines.llama_server import LlamaServerEngine
from harness.engines.binary import locate
from harness.errors import BadInput
from harness.models.resolve import resolve

pytestmark = pytest.mark.engine


def test_locate_reports_choice_and_build(engine_env, engine_binary):
    b = locate()
    assert b.source == "LBENCH_LLAMA_SERVER" and b.path == engine_binary.resolve()
    assert b.build_number == 11434 and len(b.sha256) == 64
    assert locate(str(engine_binary)).source == "--llama-server"


def test_locate_bad_path(engine_env):
    with pytest.raises(BadInput, match="not found or not executable"):
        locate("/nope/llama-server")


def test_one_token_with_cached_prompt_on_loopback(engine_env, tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "64")  # must not leak into the server
    monkeypatch.setenv("LLAMA_SERVER_DEBUG_FAKE_TIMING", "1")
    model = resolve("tiny-q8")
    engine = LlamaServerEngine(locate(), ctx_size=256)
    with engine.start(model.path, Setting(), tmp_path / "server.log") as server:
        proc = psutil.Process(server.pid)
        env = proc.environ()
        assert "LLAMA_ARG_CTX_SIZE" not in env and "LLAMA_SERVER_DEBUG_FAKE_TIMING" not in env
        listening = [c for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening and all(c.laddr.ip == "127.0.0.1" for c in listening)
        first = server.complete_one_token()
        second = server.complete_one_token()
        assert first.http_status == 200 and first.error is None
        assert second.timings["prompt_n"] == 1 and second.timings["cache_n"] >= 1
        assert second.latency_ms > second.timings["prompt_ms"]
        pid = server.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert "127.0.0.1" in (tmp_path / "server.log").read_text()


def test_metal_setting_notes_off_macos(engine_env):
    engine = LlamaServerEngine(locate())
    env, overrides = engine.environment(Setting("none"))
    assert overrides == {"GGML_METAL_NO_RESIDENCY": "1"} and env["GGML_METAL_NO_RESIDENCY"] == "1"
    _, overrides = engine.environment(Setting("30"))
    assert overrides == {"GGML_METAL_RESIDENCY_KEEP_ALIVE_S": "30"}
    if not engine.metal_available():
        assert engine.setting_notes(Setting("none")) and not engine.setting_notes(Setting("default"))


def test_server_that_fails_to_start_is_a_clear_error(engine_env, tmp_path):
    from harness.errors import EngineError

    model = resolve("tiny-q8")
    engine = LlamaServerEngine(locate(), unsafe_args=["--no-such-flag"])  # past the allow-list, knowingly
    with pytest.raises(EngineError, match="exited with status"):
        engine.start(model.path, Setting(), tmp_path / "bad.log")
