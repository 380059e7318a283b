"""docs/mac.md finding 18: OLLAMA_* settings reach only an `ollama serve` lbench starts itself; with a
server already answering (the macOS app keeps its own launchctl environment) they are refused, never
measured as if they applied.  The decision is a pure function; no server is involved."""

from harness.engines.http_engines import settings_cannot_apply


def test_settings_for_a_server_lbench_did_not_start_are_refused():
    why = settings_cannot_apply(True, {"OLLAMA_KEEP_ALIVE": "5s", "OLLAMA_MAX_LOADED_MODELS": "1"})
    assert why is not None and "OLLAMA_KEEP_ALIVE, OLLAMA_MAX_LOADED_MODELS" in why and "already running" in why


def test_settings_apply_when_lbench_starts_the_server():
    assert settings_cannot_apply(False, {"OLLAMA_KEEP_ALIVE": "5s"}) is None


def test_a_running_server_without_settings_is_fine():
    assert settings_cannot_apply(True, {}) is None
