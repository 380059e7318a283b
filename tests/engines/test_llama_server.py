"""The real llama-server, started on a generated tiny model."""

import time

import psutil
import pytest

from harness.engines.base import Setting
from harness.engines.llama_server import LlamaServerEngine
from harness.engines.binary import locate
from harness.errors import BadInput
from harness.models.resolve import resolve
from harness.probes.engine_log import parse_startup

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


def _log_after_requests(engine: LlamaServerEngine, log, n: int) -> str:
    """Start ``engine`` on tiny-q8, make ``n`` one-token requests, return its log once the n-th
    request's ``release`` line (an INFO line at every verbosity) is in it."""
    with engine.start(resolve("tiny-q8").path, Setting(), log) as server:
        for _ in range(n):
            assert server.complete_one_token().http_status == 200
        deadline = time.monotonic() + 120  # the log worker writes asynchronously: wait for the line, not a time
        while log.read_text().count("stop processing") < n:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
    return log.read_text()


def test_the_measured_start_has_its_facts_and_lv4_would_log_on_every_timed_request(engine_env, tmp_path):
    """Why a cell starts its model once at the default verbosity (probes/engine_log.py): the facts lbench
    reads from the measured start are there, the llama/ggml INFO lines are not (verbosity 4), and at
    -lv 4 the server writes trace lines for every request while it is timed, before the prompt is evaluated
    (sampler chain and params, new prompt, cached n_tokens: tools/server/server-context.cpp ``SLT_TRC``;
    the stream's conv_id: server-stream.cpp, in the pinned source)."""
    n = 3
    default = _log_after_requests(LlamaServerEngine(locate(), ctx_size=256), tmp_path / "default.log", n)
    verbose = _log_after_requests(LlamaServerEngine(locate(), ctx_size=256, extra_args=["-lv", "4"]),
                                  tmp_path / "lv4.log", n)
    assert "verbosity = 3" in default and "verbosity = 4" in verbose
    facts = parse_startup(default)
    assert {"n_threads", "n_slots", "n_ctx_slot", "server_load_ms"} <= set(facts)
    assert "llama_model_loader:" not in default and "llama_model_loader:" in verbose  # llama INFO: -lv 4 only
    assert "offloaded_layers" not in facts  # printed only at -lv 4 (and only by a build with a GPU backend)
    for trace in ("sampler chain", "sampler params", "new prompt", "cached n_tokens", "conv_id="):
        assert default.count(trace) == 0 and verbose.count(trace) >= n, trace  # once per request at -lv 4
    per_request = {name: (text.count("\n") - text[:text.index("listening on")].count("\n")) / n
                   for name, text in (("default", default), ("lv4", verbose))}
    assert per_request["lv4"] > per_request["default"], per_request
