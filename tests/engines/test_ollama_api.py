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


# ---- which llama.cpp Ollama runs (Ollama >= 0.30 runs llama-server; nothing here runs Ollama) ----

LOG_2026_06_28 = FIXTURES / "ollama" / "llama_server_under_ollama_2026-06-28.log"
DISCOVERY_16508 = FIXTURES / "ollama" / "llama_server_discovery_issue16508.log"


def test_the_llama_server_build_line_in_ollamas_log():
    from harness.engines.ollama_api import llama_cpp_build_line

    # an Ollama server log of 2026-06-28 (Linux, CUDA; tests/fixtures/ollama/README.md names it): the llama-server
    # Ollama started prints its build at -lv 4, which Ollama passes; Ollama's build says 1, the commit names it
    assert llama_cpp_build_line(LOG_2026_06_28.read_text()) == {
        "build_number": 1, "commit": "74ade5274", "compiler": "GNU 16.1.1", "target": "Linux x86_64"}
    # the same line with llama-server's prefix and timestamp, ollama/ollama#16508 (2026-08-04)
    assert llama_cpp_build_line(DISCOVERY_16508.read_text()) == {
        "build_number": 1, "commit": "b4d6c7d8f", "compiler": "GNU 13.3.1", "target": "Linux x86_64"}
    # llama-server's older INFO line, on a Mac (ggml-org/llama.cpp#11819) and on Windows (ggml-org/llama.cpp#18546)
    mac = "build: 4205 (c6bc7395) with Apple clang version 16.0.0 (clang-1600.0.26.3) for arm64-apple-darwin23.6.0"
    assert llama_cpp_build_line(mac) == {"build_number": 4205, "commit": "c6bc7395",
                                         "compiler": "Apple clang version 16.0.0 (clang-1600.0.26.3)",
                                         "target": "arm64-apple-darwin23.6.0"}
    windows = "build: 6945 (cc98f8d34) with MSVC 19.29.30154.0 for x64"
    assert llama_cpp_build_line(windows)["build_number"] == 6945
    # an Ollama log without a model load (or a server lbench did not start: no log) says nothing
    assert llama_cpp_build_line(LOG_2026_06_28.read_text().split("common_params_print_info")[0]) is None
    assert llama_cpp_build_line("") is None


def test_the_llama_cpp_tag_of_an_ollama_release():
    """The table is ollama/ollama's LLAMA_CPP_VERSION file at each release tag (git history, 2026-08-21):
    v0.30.0 is the first release with llama-server (9db4bdbad, ollama/ollama#16031), v0.32.15 the last read."""
    from harness.engines.ollama_api import OLLAMA_LLAMA_CPP, pinned_llama_cpp

    assert pinned_llama_cpp("0.30.0") == ("b9452", "ollama/ollama's LLAMA_CPP_VERSION file at the release tag "
                                                   "(git history read at fb3076099, 2026-08-21), v0.30.0")
    assert pinned_llama_cpp("0.32.15")[0] == "b10488"  # llama.cpp update, ollama/ollama#17851 (2026-08-18)
    assert pinned_llama_cpp("v0.31.1")[0] == "b9840"
    tags = [int(v[1:]) for v in OLLAMA_LLAMA_CPP.values()]
    assert tags == sorted(tags)  # later releases never run an older llama.cpp
    # what no source states is not guessed
    old, why = pinned_llama_cpp("0.12.11")
    assert old is None and "predates v0.30.0" in why and "not llama-server" in why
    new, why = pinned_llama_cpp("0.34.2")
    assert new is None and "not in the table" in why and "v0.32.15" in why
    for odd in ("0.33.0-rc2", "0.0.0-dev", ""):
        tag, why = pinned_llama_cpp(odd)
        assert tag is None and "not a release" in why, odd
    assert pinned_llama_cpp(None) == (None, "Ollama's version was not read (no Ollama answered /api/version when "
                                            "this was recorded)")


def test_llama_cpp_facts_for_the_manifest():
    from harness.engines.ollama_api import llama_cpp_facts

    # GET /api/version answers {"version": ...} (ollama/ollama docs/api.md, "Version")
    facts = llama_cpp_facts("0.32.14", DISCOVERY_16508.read_text())
    assert facts["ollama_version"] == "0.32.14" and facts["pinned"] == "b10434"
    assert facts["log_build"]["commit"] == "b4d6c7d8f"
    assert "log_build" not in llama_cpp_facts("0.32.14")  # no log read: not claimed either way


def test_served_facts_only_from_a_log_lbench_reads(tmp_path):
    """The Ollama handle's own log reading (http_engines._Handle.log_tail), on the quoted log as the file an
    `ollama serve` lbench started would have written; a handle without a log (an Ollama lbench did not start)
    gives nothing.  No server is contacted."""
    from harness.engines.http_engines import OllamaEngine, _Handle
    from harness.engines.one_token import OneTokenClient

    log = tmp_path / "ollama.log"
    log.write_text(LOG_2026_06_28.read_text())
    client = OneTokenClient("http://127.0.0.1:1", "x")
    engine = OllamaEngine("http://127.0.0.1:1")
    try:
        served = engine.served_facts(_Handle("http://127.0.0.1:1", client, ["ollama", "serve"], None, log))
        assert served["llama_cpp"]["log_build"] == {"build_number": 1, "commit": "74ade5274",
                                                    "compiler": "GNU 16.1.1", "target": "Linux x86_64"}
        # the quoted excerpt begins after Ollama's "Listening on ... (version ...)" line: no version, no tag
        assert served["llama_cpp"]["ollama_version"] is None and served["llama_cpp"]["pinned"] is None
        assert "not read" in served["llama_cpp"]["pinned_from"]
        assert engine.served_facts(_Handle("http://127.0.0.1:1", client, ["(external)"], None, None)) == {}
    finally:
        client.close()


def test_the_version_an_ollama_serve_logs():
    from harness.engines.ollama_api import served_version

    # Ollama's line once it listens, as ollama/ollama#6471 quotes a server log (2024-08-26, version 0.3.6)
    line = ('time=2024-08-26T10:31:14.762+08:00 level=INFO source=routes.go:1172 msg="Listening on 127.0.0.1:11434 '
            '(version 0.3.6)"')
    assert served_version(line) == "0.3.6"
    assert served_version(LOG_2026_06_28.read_text()) is None
