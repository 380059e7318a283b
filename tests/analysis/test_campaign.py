"""The gate's campaign core: runs come from the injected executor, looks judge them at the look's level."""

from __future__ import annotations

import numpy as np

from harness.analysis.campaign import Campaign, sequential_ab
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


def test_sequential_ab_runs_abba_rounds_with_the_injected_executor():
    order = []
    rng = np.random.default_rng(1)

    def execute(prep, reporter):
        order.append(prep)
        return 100 * (1.5 if prep == "B" else 1.0) * rng.lognormal(0, 0.01, 20)

    def judge(a, b, vcfg):
        return decide_groups([GroupData("m", "s", "warm", "latency_ms", a, b)], vcfg), {}

    res = sequential_ab(Campaign(execute, Quiet(), judge), "A", "B", GateConfig(), min_rounds=2, max_rounds=6)
    assert order[:4] == ["A", "B", "B", "A"]  # ABBA: a drift hits both sides alike
    assert res.outcome is not None and res.outcome.status == "fail" and len(res.a_runs) == len(res.looks) + 1
