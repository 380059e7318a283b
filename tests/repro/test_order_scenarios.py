"""Exit-before-spawn: the check on constructed kernel timelines (the rule and a spawn before
the victim's exit), and the scenario on the real router where process events are available."""

import pytest

from harness.engines.binary import locate
from harness.models.resolve import resolve
from harness.probes.proc_events import ProcEvent, available
from harness.repro.claims import CONTRADICTED, HOLDS, INCONCLUSIVE, judge, load_claims
from harness.repro.base import Context
from harness.repro.order_scenarios import fork_exit_order
from harness.repro.registry import SCENARIOS

SPEC = next(c for c in load_claims() if c.id == "router-exit-before-spawn")


def fork(t_ms: float, pid: int) -> ProcEvent:
    return ProcEvent("fork", int(t_ms * 1e6), pid, parent=1)


def gone(t_ms: float, pid: int) -> ProcEvent:
    return ProcEvent("exit", int(t_ms * 1e6), pid, exit_code=0)


def figures(events, **extra):
    return fork_exit_order(events, 2) | {"models_max": 2, "lost_messages": 0} | extra


def test_exit_before_spawn_holds_on_the_rule():
    swaps = [fork(0, 1), fork(10, 2)]
    for i in range(3, 14):  # each swap: the oldest child exits, 1 ms later the next one is forked
        swaps += [gone(10 * i, i - 2), fork(10 * i + 1, i)]
    f = figures(swaps)
    assert f["spawns_seen"] == 13 and f["spawns_while_full"] == 0 and f["peak_children_exact"] == 2
    assert f["min_exit_to_spawn_us"] == 1000.0 and f["swaps_timed"] == 11
    assert judge(SPEC, f)[0] == HOLDS


def test_a_spawn_before_the_victims_exit_is_contradicted():
    swaps = [fork(0, 1), fork(10, 2)]
    for i in range(3, 14):
        swaps += [gone(10 * i, i - 2), fork(10 * i + 1, i)]
    swaps += [fork(200, 99), gone(200.4, 12)]  # the replacement forked 0.4 ms before the victim exited
    f = figures(swaps)
    assert f["spawns_while_full"] == 1 and f["peak_children_exact"] == 3
    verdict, reason = judge(SPEC, f)
    assert verdict == CONTRADICTED
    assert "spawns made while models_max children were still alive (spawns_while_full) was 1" in reason
    # the kernel's order wins over the order the events were received in
    assert fork_exit_order(list(reversed(swaps)), 2) == fork_exit_order(swaps, 2)


def test_dropped_events_make_it_inconclusive_not_holds():
    swaps = [fork(0, 1), fork(10, 2)] + [e for i in range(3, 14) for e in (gone(10 * i, i - 2), fork(10 * i + 1, i))]
    assert judge(SPEC, figures(swaps, lost_messages=2))[0] == INCONCLUSIVE


def test_exit_before_spawn_on_the_real_router(engine_env, engine_binary, tmp_path):
    ok, why = available()
    if not ok:
        pytest.skip(why)
    models = {r: resolve(r) for r in SPEC.params["models"]}
    e = SCENARIOS["exit-before-spawn"](Context(locate(str(engine_binary)), tmp_path, models.__getitem__), SPEC.params)
    assert e.figures["spawns_seen"] == e.figures["router_spawn_lines"] >= 10
    assert e.figures["requests"] == 18
    # the claim is about fork/exit order, not answers: under load (the full suite on 2 cores) one of 18
    # answers once failed; each failure must be named in the notes, and nearly all must succeed
    failed = 18 - e.figures["ok"]
    assert failed <= 2 and sum("got" in n for n in e.notes) == min(failed, 3), e.notes
    assert judge(SPEC, e.figures)[0] == HOLDS, judge(SPEC, e.figures)[1]
