"""The claims on code paths no earlier claim reached (docs/claims.md, "Claims x code paths"),
on the real router with tiny models.  What build 11434 does is asserted: each is a finding
against a sentence of seed 000, with the source lines in the claim's `code`."""

import pytest

from harness.engines.binary import locate
from harness.models.resolve import resolve
from harness.repro.claims import CONTRADICTED, judge, load_claims
from harness.repro.registry import SCENARIOS, Context

pytestmark = pytest.mark.engine
SPECS = {c.id: c for c in load_claims()}


def _run(claim_id, engine_binary, tmp_path):
    spec = SPECS[claim_id]
    evidence = SCENARIOS[spec.scenario](Context(locate(str(engine_binary)), tmp_path, resolve), spec.params)
    return spec, evidence


def test_models_max_0_with_a_startup_model(engine_binary, tmp_path):
    spec, e = _run("router-no-cap-startup", engine_binary, tmp_path)
    assert e.figures["control_started"] and e.figures["control_loaded"] == 1  # the scenario works
    assert judge(spec, e.figures)[0] == CONTRADICTED and not e.figures["router_started"] and e.figures["refused"]
    assert "exceeds models_max (0)" in e.lines[1]


def test_a_session_request_is_not_cancelled_when_its_client_leaves(engine_binary, tmp_path):
    spec, e = _run("router-cancel-waiting-session", engine_binary, tmp_path)
    assert e.figures["b_client_gave_up"] and e.figures["c_ok"]
    assert judge(spec, e.figures)[0] == CONTRADICTED and e.figures["b_spawned"] and not e.figures["cancel_logged"]
    assert "X-Conversation-Id: lbench-session-b" in (tmp_path / "recipe.sh").read_text()


def test_a_proxied_get_is_not_a_use_for_lru(engine_binary, tmp_path):
    spec, e = _run("router-victim-lru-get", engine_binary, tmp_path)
    assert e.figures["get_status"] == 200 and e.figures["c_ok"]
    assert judge(spec, e.figures)[0] == CONTRADICTED and e.figures["victim"] == e.figures["lru_by_post_only"]


def test_a_waiting_get_is_cancelled_when_its_client_leaves(engine_binary, tmp_path):
    from harness.repro.claims import HOLDS

    spec, e = _run("router-cancel-waiting-get", engine_binary, tmp_path)
    assert e.figures["b_client_gave_up"] and judge(spec, e.figures)[0] == HOLDS, judge(spec, e.figures)[1]
    recipe = (tmp_path / "recipe.sh").read_text()  # GET /props?model=B, the name URL-encoded by curl
    assert "-G --data-urlencode model=tiny-q4" in recipe and "\"http://127.0.0.1:$PORT\"/props" in recipe
