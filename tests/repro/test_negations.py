"""Specs whose scenarios report plain figures: the figures the negated rule would produce
make each spec say "contradicted" (the checks can fail), and the rule's own figures "holds"."""

import pytest

from harness.repro.claims import CONTRADICTED, HOLDS, judge, load_claims

SPECS = {c.id: c for c in load_claims()}

CASES = {
    # the default cap is 4: five models loaded one after the other keep 4 children, evicting once
    "router-default-cap-4": (
        {"peak_children": 4, "evictions": 1, "ok": 5, "n_models": 5},
        [{"peak_children": 5, "evictions": 0, "ok": 5, "n_models": 5},  # no default cap
         {"peak_children": 3, "evictions": 2, "ok": 5, "n_models": 5}]),  # a default of 3
    # LLAMA_ARG_MODELS_MAX=0 means unlimited, not "no model" nor "the default"
    "router-env-zero-unlimited": (
        {"peak_children": 5, "evictions": 0, "n_models": 5},
        [{"peak_children": 4, "evictions": 1, "n_models": 5}]),  # 0 read as "unset": the default 4
    # a LOADING model counts as running and is no victim
    "router-loading-counts": (
        {"b_spawned_while_a_loading": False, "a_evicted_while_loading": False, "b_spawned_after_thaw": True,
         "b_ok": True},
        [{"b_spawned_while_a_loading": True, "a_evicted_while_loading": False, "b_spawned_after_thaw": False,
          "b_ok": True},  # LOADING not counted: B spawned next to it
         {"b_spawned_while_a_loading": True, "a_evicted_while_loading": True, "b_spawned_after_thaw": False,
          "b_ok": True}]),  # a loading model taken as victim
    # --models-max 0 is no cap: the startup model loads (the control under a cap of 1 loads too)
    "router-no-cap-startup": (
        {"control_started": True, "control_loaded": 1, "n_startup": 1, "router_started": True, "startup_loaded": 1},
        [{"control_started": True, "control_loaded": 1, "n_startup": 1, "router_started": False,
          "startup_loaded": 0}]),  # 0 compared as a cap: "exceeds models_max (0)" (build 11434)
    # a session request whose client left is cancelled like any other
    "router-cancel-waiting-session": (
        {"b_spawned": False, "cancel_logged": True, "c_ok": True},
        [{"b_spawned": True, "cancel_logged": False, "c_ok": True}]),  # no should_stop: B waits and loads
    # a waiting GET is cancelled too, and its slot goes to the next waiter
    "router-cancel-waiting-get": (
        {"b_spawned": False, "cancel_logged": True, "c_took_a_slot": True, "c_ok": True},
        [{"b_spawned": True, "cancel_logged": False, "c_took_a_slot": True, "c_ok": True},  # GET not cancelled
         {"b_spawned": False, "cancel_logged": True, "c_took_a_slot": False, "c_ok": True}]),  # slot not passed on
    # upstream's test_router_queue_two_waiters_share_one_eviction: both waiters served, A evicted once
    "router-two-waiters-share-eviction": (
        {"b_ok": True, "c_ok": True, "a_stops": 1, "spawns_a": 1},
        [{"b_ok": True, "c_ok": False, "a_stops": 1, "spawns_a": 1},  # the second waiter lost the race
         {"b_ok": True, "c_ok": True, "a_stops": 2, "spawns_a": 2}]),  # A reloaded and evicted again
    # the cold sequence: every error kind and each race judged apart
    "router-cold-sequence-clean": (
        {**{f"errors_{k}": 0 for k in ("proxy_error", "limit_reached", "deadline", "truncated", "other")},
         "races_evicted_with_waiter": 0, "races_proxied_to_stopping": 0},
        [{**{f"errors_{k}": 0 for k in ("proxy_error", "limit_reached", "deadline", "truncated", "other")},
          "races_evicted_with_waiter": 0, "races_proxied_to_stopping": 0, f"errors_{kind}": 1}
         for kind in ("proxy_error", "limit_reached", "deadline", "truncated")]
        + [{**{f"errors_{k}": 0 for k in ("proxy_error", "limit_reached", "deadline", "truncated", "other")},
            "races_evicted_with_waiter": 0, "races_proxied_to_stopping": 0, race: 1}
           for race in ("races_evicted_with_waiter", "races_proxied_to_stopping")]),
    # the busy model is no victim, and its reply is never cut
    "router-busy-not-evicted": (
        {"victim": "tiny-q4", "expected": "tiny-q4", "a_reply_cut": False},
        [{"victim": "tiny-q8", "expected": "tiny-q4", "a_reply_cut": False},  # the busy A evicted
         {"victim": "tiny-q4", "expected": "tiny-q4", "a_reply_cut": True}]),  # A's reply cut all the same
}


@pytest.mark.parametrize("claim_id", sorted(CASES))
def test_rule_holds_and_negation_is_contradicted(claim_id):
    rule, negations = CASES[claim_id]
    spec = SPECS[claim_id]
    assert judge(spec, rule)[0] == HOLDS, judge(spec, rule)[1]
    for figures in negations:
        assert judge(spec, figures)[0] == CONTRADICTED, figures


def test_stopping_counts_negation_over_repetitions():
    """A stopping model not counted: B spawns at once, before the hung A is killed (3 repetitions)."""
    from harness.repro.claims import judge_repeats

    spec = SPECS["router-stopping-counts"]
    rule = {"b_spawn_after_a_exit": True, "b_wait_s": 3.05, "kill_timeout_logged": True, "b_ok": True}
    negation = {"b_spawn_after_a_exit": False, "b_wait_s": 0.02, "kill_timeout_logged": True, "b_ok": True}
    assert judge_repeats(spec, [rule] * 3)[0] == HOLDS
    verdict, reason = judge_repeats(spec, [negation] * 3)
    assert verdict == CONTRADICTED and "met in 0 of 3 repetitions" in reason
