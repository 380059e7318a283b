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
