"""The gate's campaign core: runs come from the injected executor, looks judge them at the look's level."""

from __future__ import annotations

import numpy as np

from harness.analysis.campaign import Campaign, interleaved_rounds
from harness.analysis.gate_config import RoundsConfig
from harness.analysis.rounds import balanced_orders
from harness.analysis.gate import GateConfig
from harness.analysis.verdicts import GroupData, decide_groups


class Quiet:
    def message(self, text):
        pass


def test_measure_passes_the_manifest_extra_only_when_there_is_one():
    calls = []
    c = Campaign(lambda prep, reporter, **kw: calls.append((prep, kw)) or prep, Quiet())
    assert c.measure("a") == "a" and c.measure("b", extra_manifest={"x": 1}) == "b"
    assert calls == [("a", {}), ("b", {"extra_manifest": {"x": 1}})]


def test_a_look_judges_at_its_own_level_and_leaves_the_config_alone():
    seen = []

    def judge(a, b, vcfg):
        seen.append(vcfg.alpha)
        return decide_groups([GroupData("m", "s", "warm", "latency_ms", a, b)], vcfg), {}

    rng = np.random.default_rng(0)
    a = [100 * rng.lognormal(0, 0.01, 20) for _ in range(3)]
    b = [150 * rng.lognormal(0, 0.01, 20) for _ in range(3)]
    cfg = GateConfig()
    c = Campaign(lambda prep, reporter: prep, Quiet(), judge)
    verdicts, _, outcome = c.look(a, b, cfg, alpha=0.01)
    assert seen == [0.01] and cfg.alpha == GateConfig().alpha  # the caller's config is not changed
    assert outcome.status == "fail" and verdicts[0].verdict == "slower"
    c.look(a, b, cfg)
    assert seen[-1] == cfg.alpha


class Rec(Quiet):
    def __init__(self):
        self.lines = []

    def message(self, text):
        self.lines.append(text)


def _job(levels, *, cfg, round_s=10.0, sd=0.0, seed=0):
    """A gate job on injected runs: each arm's log level from ``levels``, a clock that advances
    ``round_s / arms`` per run; returns (result, the runs made in order, the manifests they got)."""
    rng = np.random.default_rng(seed)
    clock = [0.0]
    made = []

    def execute(arm, reporter, extra_manifest=None):
        clock[0] += round_s / len(cfg.arms)
        made.append((arm, extra_manifest))
        return {"arm": arm, "level": levels[arm] + rng.normal(0.0, sd)}

    res = interleaved_rounds(Campaign(execute, Rec()), {a: a for a in cfg.arms}, cfg, clock=lambda: clock[0],
                             levels_of=lambda run: {"pause 0 s": run["level"]},
                             manifest=lambda rnd, arm: {"round": rnd, "arm": arm})
    return res, made


def test_rounds_run_every_arm_once_per_round_in_the_balanced_order_with_the_manifest():
    cfg = RoundsConfig(budget_s=None, max_rounds=6, min_rounds=4, seed=3)
    res, made = _job({"a": 0.0, "b": 0.5, "aa": 0.0}, cfg=cfg, sd=0.01)
    rounds = len(res.orders)
    assert len(made) == 3 * rounds and [m[1]["round"] for m in made] == [r for r in range(1, rounds + 1) for _ in range(3)]
    assert [tuple(m[0] for m in made[3 * i: 3 * i + 3]) for i in range(rounds)] == res.orders
    assert res.orders == balanced_orders(("a", "b", "aa"), rounds, 3)
    assert {len(r["levels"]) for r in res.rows} == {1} and len(res.runs["aa"]) == rounds


def test_a_clear_slowdown_fails_once_the_a_a_floor_is_inside_the_band():
    res, _ = _job({"a": 0.0, "b": 0.5, "aa": 0.0}, cfg=RoundsConfig(budget_s=None, max_rounds=20), sd=0.005)
    assert res.status == "fail" and res.final is not None and res.final.status == "fail"
    aa = [c for c in res.final.contrasts if c.name == "A/A"][0]
    assert aa.verdict == "inside the band" and len(res.orders) < 20


def test_the_budget_plans_the_rounds_and_ends_the_job():
    cfg = RoundsConfig(budget_s=95.0, max_rounds=60)
    res, _ = _job({"a": 0.0, "b": 0.0, "aa": 0.0}, cfg=cfg, round_s=10.0, sd=0.2)  # too noisy to decide in 9 rounds
    assert res.planned_rounds == 9 and len(res.orders) == 9
    assert res.final is not None and res.final.final and res.status in ("inconclusive", "unproven")


def test_a_moved_a_a_arm_makes_the_job_unproven():
    res, _ = _job({"a": 0.0, "b": 0.0, "aa": 0.3}, cfg=RoundsConfig(budget_s=None, max_rounds=20), sd=0.005)
    assert res.status == "unproven" and "A/A arm differs" in res.final.reason
