"""The gate job's statistics (harness.analysis.rounds): the balanced order, the fit's contrasts, the
verdicts of one look and the A/A rules, on constructed levels with known answers."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from harness.analysis.gate_config import RoundsConfig, min_rounds_for, parse_arms
from harness.analysis.rounds import balanced_orders, classify, fit_levels, judge_look, look_level, order_of_round
from harness.errors import BadInput


def test_orders_hold_every_permutation_once_per_block_and_are_seeded():
    orders = balanced_orders(("a", "b", "aa"), 12, seed=7)
    for block in (orders[:6], orders[6:]):
        assert sorted(block) == sorted(itertools.permutations(("a", "b", "aa")))
    positions = Counter((arm, o.index(arm)) for o in orders for arm in o)
    assert set(positions.values()) == {4}  # each arm in each place equally often
    assert orders == balanced_orders(("a", "b", "aa"), 12, seed=7) != balanced_orders(("a", "b", "aa"), 12, seed=8)
    assert all(order_of_round(("a", "b", "aa"), r + 1, 7) == orders[r] for r in range(12))


def test_arms_are_parsed_and_bad_ones_refused():
    assert parse_arms(None) == ("a", "b", "aa") and parse_arms("b, a") == ("a", "b")
    for bad in ("a,c", "a,a,b", "b,aa"):
        with pytest.raises(BadInput):
            parse_arms(bad)


def _levels(n, effects, *, sd=0.0, position=(0.0, 0.0, 0.0), seed=0, arms=("a", "b", "aa")):
    rng = np.random.default_rng(seed)
    orders = balanced_orders(arms, n, seed)
    rounds = rng.normal(0.0, 0.3, n)  # a large shared round effect: the fit removes it
    levels = [{arm: rounds[r] + effects.get(arm, 0.0) + position[o.index(arm)] + rng.normal(0.0, sd) for arm in arms}
              for r, o in enumerate(orders)]
    return levels, orders


def test_the_fit_recovers_known_contrasts_through_round_and_position_effects():
    levels, orders = _levels(12, {"b": math.log(1.2)}, position=(0.0, 0.1, 0.25))
    fit = fit_levels(levels, orders)
    assert fit is not None and fit.b_vs_a == pytest.approx(math.log(1.2), abs=1e-9)
    assert fit.aa_vs_a == pytest.approx(0.0, abs=1e-9) and fit.residual_sd < 1e-9
    assert fit.df == 36 - (12 + 2 + 2)
    two = fit_levels(*_levels(6, {"b": 0.1}, arms=("a", "b")))
    assert two is not None and two.b_vs_a == pytest.approx(0.1) and math.isnan(two.aa_vs_a)


def test_too_few_rounds_give_no_fit_and_the_minimum_is_stated():
    assert min_rounds_for(("a", "b", "aa")) == 3 and min_rounds_for(("a", "b"), position=False) == 3
    levels, orders = _levels(2, {})
    assert fit_levels(levels, orders) is None


@pytest.mark.parametrize("lo,hi,rule,want", [(0.01, 0.05, "zero", "slower"), (0.01, 0.05, "margin", "inconclusive"),
                                             (-0.01, 0.01, "zero", "no change"), (-0.08, -0.04, "zero", "faster"),
                                             (-0.01, 0.06, "zero", "inconclusive")])
def test_classify(lo, hi, rule, want):
    assert classify(lo, hi, math.log1p(0.03), rule) == want


def _look(effects, *, n=12, sd=0.01, final=False, cfg=None, seed=0):
    cfg = cfg or RoundsConfig()
    levels, orders = _levels(n, effects, sd=sd, seed=seed, arms=cfg.arms)
    return judge_look({"pause 0 s": levels}, orders, cfg, round_no=n, level_one_sided=0.005, final=final)


def test_a_look_fails_passes_or_waits_as_the_rules_say():
    assert _look({"b": math.log(1.10)}).status == "fail"
    assert _look({}).status == "pass"
    assert _look({}, sd=0.05).status == "continue"  # the A/A interval is wider than the 3% margin
    assert _look({}, sd=0.05, final=True).status in ("unproven", "inconclusive")


def test_an_a_a_difference_makes_the_look_unproven_whatever_b_shows():
    look = _look({"b": math.log(1.10), "aa": math.log(1.05)})
    assert look.status == "unproven" and "A/A arm differs" in look.reason
    aa = [c for c in look.contrasts if c.name == "A/A"][0]
    assert aa.verdict == "differs" and aa.ratio == pytest.approx(1.05, rel=0.01)


def test_a_decided_b_with_a_wide_floor_at_the_final_look_is_unproven_not_a_verdict():
    cfg = RoundsConfig(margin=0.01)
    look = _look({"b": math.log(1.5)}, sd=0.02, n=6, final=True, cfg=cfg)
    assert look.status == "unproven" and "wider than the margin" in look.reason


def test_without_the_a_a_arm_the_floor_rules_are_skipped():
    cfg = RoundsConfig(arms=("a", "b"))
    look = _look({"b": math.log(1.10)}, cfg=cfg)
    assert look.status == "fail" and {c.name for c in look.contrasts} == {"B vs A"}


def test_look_levels_spend_little_early_and_reach_alpha_at_the_end():
    early = look_level([4 / 40], 0.01, "obf")
    last = look_level([4 / 40, 8 / 40, 1.0], 0.01, "obf")
    assert early < 1e-4 < last < 0.01


@pytest.mark.parametrize("kw", [{"margin": 0.0}, {"margin": -0.1}, {"alpha": 1.5}, {"min_rounds": 2},
                                {"budget_s": 0.0}, {"slower_rule": "x"}, {"max_rounds": 3}])
def test_bad_designs_are_refused(kw):
    with pytest.raises(BadInput):
        RoundsConfig(**kw).check()


def test_the_simulated_job_keeps_its_false_alarm_rate_and_catches_a_large_slowdown():
    """harness.analysis.gate_sim.rounds_trials: lbench's own rounds and looks on drawn runs (a loose
    seeded check of the rates the simulation prints, not a timing)."""
    from harness.analysis.gate_sim import RoundsNoise, rounds_trials

    rng = np.random.default_rng(0)
    noise = RoundsNoise(0.02, round_sd=0.2, position=(0.0, 0.05, 0.1), round_s=10.0)
    cfg = RoundsConfig(budget_s=300.0)
    same = [s for s, _ in rounds_trials(noise, 1.0, cfg, 40, rng)]
    slow = [s for s, _ in rounds_trials(noise, 1.15, cfg, 20, rng)]
    assert same.count("fail") <= 2 and same.count("pass") >= 30  # round and position effects removed by the fit
    assert slow.count("fail") >= 18


def test_a_simulated_job_with_a_woken_group_decides_both_groups_with_their_own_margins():
    """gate_sim.rounds_trials with ``woken_sd``: every run has a warm and a woken level, the job fits and
    judges both (warm at 3%, woken at 10%); a woken spread far beyond its margin keeps an A/A job from
    passing within a short budget, and a +30% slowdown of both is still caught."""
    from harness.analysis.gate_sim import RoundsNoise, rounds_trials

    cfg = RoundsConfig(budget_s=200.0)
    quiet = RoundsNoise(0.01, round_s=10.0, woken_sd=0.02)
    loud = RoundsNoise(0.01, round_s=10.0, woken_sd=0.5)
    same_quiet = [s for s, _ in rounds_trials(quiet, 1.0, cfg, 20, np.random.default_rng(1))]
    same_loud = [s for s, _ in rounds_trials(loud, 1.0, cfg, 20, np.random.default_rng(1))]
    slow = [s for s, _ in rounds_trials(quiet, 1.3, cfg, 10, np.random.default_rng(2))]
    assert same_quiet.count("pass") >= 17
    assert same_loud.count("pass") <= 2  # the woken group's interval stays wider than its 10% band
    assert slow.count("fail") == 10


def test_margins_default_to_three_percent_warm_and_ten_woken_and_can_be_set():
    from harness.analysis.gate_config import parse_margins

    cfg = RoundsConfig()
    assert cfg.margin_of("pause 0 s") == 0.03 and cfg.margin_of("pause 1 s") == 0.10
    assert cfg.margin_of("pause 0 s · keep-alive=none") == 0.03
    m, woken, per = parse_margins("0.05")
    assert RoundsConfig(margin=m, woken_margin=woken).margin_of("pause 1.5 s") == 0.05
    m, woken, per = parse_margins("0=0.02,1.5=0.2")
    cfg = RoundsConfig(margin=m, woken_margin=woken, margins={f"pause {p:g} s": v for p, v in per.items()})
    assert (cfg.margin_of("pause 0 s"), cfg.margin_of("pause 1.5 s"), cfg.margin_of("pause 3 s")) == (0.02, 0.2, 0.10)
    with pytest.raises(BadInput):
        parse_margins("0=x")
    with pytest.raises(BadInput):
        RoundsConfig(woken_margin=0.0).check()


def test_an_early_look_at_a_level_near_zero_gives_an_unbounded_interval_not_an_error():
    levels, orders = _levels(4, {}, sd=0.3)
    look = judge_look({"pause 0 s": levels}, orders, RoundsConfig(), round_no=4, level_one_sided=1e-51, final=False)
    assert look.status == "continue" and any(c.ratio_hi == math.inf or c.ratio_hi > 1e6 for c in look.contrasts)
