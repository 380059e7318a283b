"""Victim-rule scenarios: the checks on constructed timelines of the rule and of its negation
(so each spec is shown able to say "contradicted"), and each scenario on the real router."""

from __future__ import annotations

import random

import pytest

from harness.engines.binary import locate
from harness.engines.router import TimelineEvent
from harness.models.resolve import resolve
from harness.repro.claims import CONTRADICTED, HOLDS, judge, load_claims
from harness.repro.registry import SCENARIOS, Context, Inconclusive
from harness.repro.lab import Reply
from harness.repro.victim_scenarios import (_touch_order, loading_lru_figures, lru_get_figures, lru_plan, lru_rounds,
                                            tick_figures, tick_timing, wanted_figures)
from timeline_lab import timeline_lab

SPECS = {c.id: c for c in load_claims()}


def ev(t: float, kind: str, model: str, source: str = "router") -> TimelineEvent:
    return TimelineEvent(t, source, kind, model, {}, f"{kind} {model}")


def values(figures, lab) -> dict:
    """The scenario's figure objects evaluated on ``lab``'s timeline: what lbench judges."""
    return {name: figure.value(lab) for name, figure in figures.items()}


# ---- the checks on constructed timelines, through the scenarios' own figure objects ------

def test_lru_get_rule_and_its_negation():
    """A GET is a use: B (used before A's GET) goes; if only POSTs stamp last_used, A goes."""
    spec = SPECS["router-victim-lru-get"]
    ok = [Reply("C", 4, 5, 200, "", sh_n=1)]
    use = [ev(1, "proxy", "A"), ev(2, "proxy", "B"), ev(3, "proxy", "A"), ev(4.1, "evict", "B"), ev(4.3, "spawn", "C")]
    f = values(lru_get_figures("A", "B", "C"), timeline_lab(use, replies=ok, log_marks={"c": 4}))
    assert f["victim"] == "B" and f["c_ok"] is True and judge(spec, f)[0] == HOLDS
    post_only = [ev(1, "proxy", "A"), ev(2, "proxy", "B"), ev(3, "proxy", "A"), ev(4.1, "evict", "A"),
                 ev(4.3, "spawn", "C")]
    verdict, reason = judge(spec, values(lru_get_figures("A", "B", "C"),
                                         timeline_lab(post_only, replies=ok, log_marks={"c": 4})))
    assert verdict == CONTRADICTED and "was tiny" not in reason and "expected B" in reason


def test_wanted_victim_rule_and_its_negation():
    spec = SPECS["router-victim-not-wanted"]
    ok = [Reply("C", 2, 7, 200, "", sh_n=1)]
    # as build 11434 logs it: A comes up, its request is proxied, then A is evicted for C
    rule = [ev(1, "spawn", "A"), ev(5, "status:loaded", "A", "sse"), ev(5.001, "proxy", "A"),
            ev(6, "evict", "A"), ev(6.1, "exited", "A"), ev(6.2, "spawn", "C"), ev(7, "proxy", "C")]
    f = values(wanted_figures("A", "C"), timeline_lab(rule, replies=ok, marks={"thaw": 2}, log_marks={"thaw": 2}))
    assert f["a_came_up"] and f["a_evicted_while_wanted"] is False and f["a_spawns_before_served"] == 1
    assert f["first_victim"] == "A" and f["c_spawned_after_a_evicted"] is True
    assert judge(spec, f)[0] == HOLDS
    # the negation: A evicted at the tick of its status change, then loaded again for its request
    negated = [ev(1, "spawn", "A"), ev(5, "status:loaded", "A", "sse"), ev(5.0001, "evict", "A"),
               ev(5.1, "exited", "A"), ev(5.2, "spawn", "C"), ev(6, "proxy", "C"), ev(6.5, "evict", "C"),
               ev(6.6, "spawn", "A"), ev(8, "proxy", "A")]
    f = values(wanted_figures("A", "C"), timeline_lab(negated, replies=ok, marks={"thaw": 2}, log_marks={"thaw": 2}))
    assert f["a_evicted_while_wanted"] is True and f["a_spawns_before_served"] == 2
    verdict, reason = judge(spec, f)
    assert verdict == CONTRADICTED
    assert "A was evicted before its own queued request was proxied (a_evicted_while_wanted) was yes" in reason


def test_lru_plan_tells_lru_from_the_wrong_rules():
    since = {"a": 0, "b": 1, "c": 2}
    assert lru_plan(["b", "c", "a"], since) == ("b", True)
    assert lru_plan(["a", "b", "c"], since) == ("a", False)  # first by name and longest resident too
    assert lru_plan(["c", "a", "b"], since) == ("c", True)
    rng = random.Random(0)
    for _ in range(50):  # the chosen orders always distinguish LRU from the wrong rules
        order = _touch_order(["a", "b", "c"], since, rng)
        assert sorted(order) == ["a", "b", "c"] and lru_plan(order, since)[1]


def test_lru_spec_holds_for_lru_victims_and_is_contradicted_by_a_non_lru_victim():
    spec = SPECS["router-victim-lru"]
    plan = [(f"round{i}", "b", True) for i in range(1, 5)]
    marks = {f"round{i}": float(i) for i in range(1, 5)}
    rule = [ev(i + 0.5, "evict", "b") for i in range(1, 5)]
    f = values(lru_rounds(plan), timeline_lab(rule, log_marks=marks)) | {"rounds_wanted": 4}
    assert f == {"round_victims": "b,b,b,b", "rounds": 4, "non_lru_victims": 0, "distinguishing_rounds": 4,
                 "rounds_wanted": 4}
    assert judge(spec, f)[0] == HOLDS
    one_wrong = [ev(1.5, "evict", "b"), ev(2.5, "evict", "a"), ev(3.5, "evict", "b"), ev(4.5, "evict", "b")]
    f = values(lru_rounds(plan), timeline_lab(one_wrong, log_marks=marks)) | {"rounds_wanted": 4}
    verdict, reason = judge(spec, f)
    assert verdict == CONTRADICTED and "(non_lru_victims) was 1, expected 0: NOT met" in reason
    no_eviction = rule[:3]  # the last round evicted nobody
    f = values(lru_rounds(plan), timeline_lab(no_eviction, log_marks=marks)) | {"rounds_wanted": 4}
    assert f["rounds"] == 3 and judge(spec, f)[0] == CONTRADICTED


def test_loading_lru_rule_and_its_negation():
    spec = SPECS["router-victim-not-loading"]
    extra = {"expected_victim": "B", "c_ok": True}
    rule = [ev(1, "queued", "C"), ev(1.001, "evict", "B"), ev(1.1, "exited", "B"), ev(1.2, "spawn", "C")]
    f = values(loading_lru_figures("A", "C"), timeline_lab(rule, log_marks={"c": 0.5})) | extra
    assert f["victim"] == "B" and f["a_evicted_while_loading"] is False and judge(spec, f)[0] == HOLDS
    negated = [ev(1, "queued", "C"), ev(1.001, "evict", "A"), ev(1.002, "stop_sent", "A"),
               ev(1.003, "kill_loading", "A"), ev(1.1, "exited", "A"), ev(1.2, "spawn", "C")]
    f = values(loading_lru_figures("A", "C"), timeline_lab(negated, log_marks={"c": 0.5})) | extra
    assert f["a_killed_while_loading"] and f["victim"] == "A" and f["a_evicted_while_loading"]
    assert judge(spec, f)[0] == CONTRADICTED
    killed_only = [ev(1, "queued", "C"), ev(1.003, "kill_loading", "A"), ev(1.1, "exited", "A"), ev(1.2, "spawn", "C")]
    f = values(loading_lru_figures("A", "C"), timeline_lab(killed_only, log_marks={"c": 0.5})) | extra
    assert f["a_evicted_while_loading"] is True and f["victim"] is None and judge(spec, f)[0] != HOLDS


def line(t: float, stamp: str, kind: str, model: str, text: str) -> TimelineEvent:
    return TimelineEvent(t, "router", kind, model, {}, f"{stamp} I srv  {text}")


def test_tick_evictions_rule_and_its_negation():
    spec = SPECS["router-tick-evicts-several"]
    marks = {"y": 0.9, "thaw": 1.5}
    ok = [Reply(m, 0, 2, 200, "", sh_n=i) for i, m in enumerate("HXY", start=1)]
    y = "request for name=Y queued at position 3"
    rule = [line(1.0, "0.01.000.000", "queued", "Y", y),
            line(1.0001, "0.01.000.030", "evict", "A", "tick: evicting idle LRU name=A for a queued request"),
            line(1.0002, "0.01.000.080", "evict", "B", "tick: evicting idle LRU name=B for a queued request"),
            line(2.0, "0.02.000.000", "exited", "A", "run: instance name=A exited with status 0")]
    lab = timeline_lab(rule, replies=ok, log_marks=marks)
    f = values(tick_figures("H", "X", "Y"), lab) | {"expected_victims": "A,B"}
    assert f["tick_evictions"] == 2 and f["ok"] == 3 and tick_timing(lab) == {"exits_in_window": 0, "tick_span_ms": 0.05}
    assert judge(spec, f)[0] == HOLDS
    # the negation: one eviction per tick, the second in the tick of A's exit (after the thaw)
    negated = [rule[0], rule[1], line(2.0, "0.02.000.000", "evict", "B", rule[2].text.split("I srv  ")[1]),
               rule[3]]
    f = values(tick_figures("H", "X", "Y"), timeline_lab(negated, replies=ok, log_marks=marks))
    assert f["tick_evictions"] == 1
    assert judge(spec, f | {"expected_victims": "A,B"})[0] == CONTRADICTED
    # a line logged after an exit inside the window may come from that exit's tick: not counted
    racing = [rule[0], rule[1], line(1.05, "0.01.050.000", "exited", "A", "run: instance name=A exited"),
              line(1.06, "0.01.060.000", "evict", "B", "tick: evicting idle LRU name=B for a queued request")]
    lab = timeline_lab(racing, replies=ok, log_marks=marks)
    assert values(tick_figures("H", "X", "Y"), lab)["tick_evictions"] == 1
    assert tick_timing(lab)["exits_in_window"] == 1


# ---- the scenarios on the real router ---------------------------------------------------

@pytest.fixture(scope="module")
def victim_models(tmp_path_factory):
    """The models these scenarios use, generated once for the module (the 1B one takes seconds)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("victim-cache")))
        mp.setenv("LBENCH_CATALOG", str(tmp_path_factory.mktemp("victim-catalog") / "catalog.toml"))
        refs = {r for c in ("router-victim-not-wanted", "router-victim-lru", "router-victim-not-loading",
                            "router-tick-evicts-several")
                for r in SPECS[c].params["models"]}
        return {r: resolve(r) for r in refs}


def _run(claim_id: str, engine_binary, victim_models, tmp_path):
    spec = SPECS[claim_id]
    ctx = Context(locate(str(engine_binary)), tmp_path, lambda r: victim_models[r])
    try:
        evidence = SCENARIOS[spec.scenario](ctx, spec.params)
    except Inconclusive as exc:  # the machine was too slow to set the situation up: say so, do not pass
        pytest.fail(f"setup failed on this machine: {exc}")
    return spec, evidence


def test_wanted_victim_on_the_real_router(engine_binary, victim_models, tmp_path):
    spec, e = _run("router-victim-not-wanted", engine_binary, victim_models, tmp_path)
    assert e.figures["a_came_up"] and e.figures["b_busy_throughout"]
    assert e.figures["first_victim"] == e.figures["expected_victim"]
    assert judge(spec, e.figures)[0] == HOLDS, judge(spec, e.figures)[1]
    assert (tmp_path / "recipe.sh").read_text().count("kill -STOP") == 2


def test_lru_order_on_the_real_router(engine_binary, victim_models, tmp_path):
    spec, e = _run("router-victim-lru", engine_binary, victim_models, tmp_path)
    assert e.figures["rounds"] == 4 and len(e.figures["round_victims"].split(",")) == 4
    assert judge(spec, e.figures)[0] == HOLDS, judge(spec, e.figures)[1]
    assert any(line.startswith("round 1: least recently used") for line in e.lines)


def test_loading_lru_on_the_real_router(engine_binary, victim_models, tmp_path):
    spec, e = _run("router-victim-not-loading", engine_binary, victim_models, tmp_path)
    assert e.figures["victim"] == e.figures["expected_victim"]
    assert judge(spec, e.figures)[0] == HOLDS, judge(spec, e.figures)[1]


def test_multi_evict_on_the_real_router(engine_binary, victim_models, tmp_path):
    spec, e = _run("router-tick-evicts-several", engine_binary, victim_models, tmp_path)
    assert e.figures["exits_in_window"] == 0 and e.figures["tick_span_ms"] is not None
    assert judge(spec, e.figures)[0] == HOLDS, judge(spec, e.figures)[1]
    assert e.lines[0].endswith("queued at position 3") and "tick: evicting idle LRU" in e.lines[1]
    # H and Z were held by FIFOs (issue 47: no race with their first status message); none is left behind
    assert e.figures["attempts"] == 1 and not list(tmp_path.rglob("*.fifo"))
    recipe = (tmp_path / "recipe.sh").read_text().splitlines()
    assert sum("mkfifo" in line for line in recipe) == 2 and sum("exec 3<>" in line for line in recipe) == 2
    # the background POST's line comes before the wait for the spawn it causes (recorded by the caller)
    post = next(i for i, line in enumerate(recipe) if "/models/load" in line and line.startswith("{ curl"))
    spawn = next(i for i, line in enumerate(recipe) if line.startswith("wait_log 'spawning server instance")
                 and "-2 on port" in line)
    assert post < spawn


@pytest.mark.parametrize("claim_id", ["router-victim-lru-load", "router-victim-not-loading-load"])
def test_victim_rules_on_the_load_path(claim_id, engine_binary, victim_models, tmp_path):
    """The same rules when POST /models/load at the cap picks the victim (unload_lru)."""
    spec, e = _run(claim_id, engine_binary, victim_models, tmp_path)
    assert judge(spec, e.figures)[0] == HOLDS, judge(spec, e.figures)[1]
    assert "models_max limit reached, removing LRU" in (tmp_path / "logs" / "router.stderr.log").read_text()


def test_via_must_be_request_or_load():
    from harness.repro.victim_scenarios import _via_load

    assert _via_load("request") is False and _via_load("load") is True
    with pytest.raises(ValueError, match="via must be 'request' or 'load'"):
        _via_load("post")
