"""lbench ab's sequential design (harness.runs.ab) with injected runs: order, looks, stopping."""

import numpy as np

from harness.analysis.gate import GateConfig
from harness.analysis.verdicts import GroupData, decide_groups
from harness.runs.ab import look_alpha, run_ab


def _make(levels, order):
    rng = np.random.default_rng(0)

    def execute(prep, reporter):
        order.append(prep)
        return rng.lognormal(np.log(levels[prep]), 0.01, 20)

    def judge(a_runs, b_runs, vcfg):
        return decide_groups([GroupData("m", "s", "warm", "latency_ms", a_runs, b_runs)], vcfg), {}
    return execute, judge


def test_abba_order_and_early_stop_on_a_clear_slowdown():
    order = []
    execute, judge = _make({"A": 20.0, "B": 30.0}, order)
    res = run_ab("A", "B", GateConfig(), min_rounds=3, max_rounds=8, execute=execute, judge=judge)
    assert order[:6] == ["A", "B", "B", "A", "A", "B"]
    assert res.outcome.status == "fail" and len(res.looks) == 1 and len(res.a_runs) == 3
    assert res.looks[0]["alpha_per_look"] == look_alpha(0.05, 3, 8) == 0.05 / 6


def test_budget_spent_leaves_the_last_verdict():
    order = []
    execute, judge = _make({"A": 20.0, "B": 20.0}, order)
    res = run_ab("A", "B", GateConfig(), min_rounds=2, max_rounds=4, execute=execute, judge=judge)
    assert res.outcome.status in ("pass", "inconclusive") and res.outcome.status != "fail"
    assert 1 <= len(res.looks) <= 3 and len(order) == 2 * len(res.a_runs)
