"""lbench ab's group-sequential design (harness.runs.ab, harness.analysis.sequential): order, looks,
stopping, and the boundaries against the textbook constants."""

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pytest
from scipy import optimize, stats

from harness.analysis.gate import GateConfig
from harness.analysis.sequential import _exit_mass, _first, _propagate, _truncate, look_levels, spending_boundary
from harness.analysis.verdicts import GroupData, decide_groups
from harness.analysis.campaign import look_alphas
from harness.runs.ab import run_ab


def _make(levels, order, run_sd=0.0, seed=0):
    rng = np.random.default_rng(seed)

    def execute(prep, reporter):
        order.append(prep)
        return rng.lognormal(np.log(levels[prep]) + rng.normal(0, run_sd), 0.01, 20)

    def judge(a_runs, b_runs, vcfg):
        return decide_groups([GroupData("m", "s", "warm", "latency_ms", a_runs, b_runs)], vcfg), {}
    return execute, judge


def test_abba_order_and_early_stop_on_a_clear_slowdown():
    order = []
    execute, judge = _make({"A": 20.0, "B": 30.0}, order)
    res = run_ab("A", "B", GateConfig(), min_rounds=3, max_rounds=8, execute=execute, judge=judge)
    assert order[:6] == ["A", "B", "B", "A", "A", "B"]
    assert res.outcome.status == "fail" and len(res.looks) == 1 and len(res.a_runs) == 3
    assert res.looks[0]["alpha_per_look"] == pytest.approx(look_alphas(0.05, 3, 8)[0])


def test_pass_is_reachable_when_a_and_b_are_the_same():
    order = []
    execute, judge = _make({"A": 20.0, "B": 20.0}, order, run_sd=0.01)
    res = run_ab("A", "B", GateConfig(), min_rounds=2, max_rounds=6, execute=execute, judge=judge)
    assert res.outcome.status == "pass" and len(order) == 2 * len(res.a_runs)


def test_first_look_needs_two_runs_per_side():
    with pytest.raises(ValueError, match="min_rounds"):
        run_ab("A", "B", GateConfig(), min_rounds=1, max_rounds=4, execute=None, judge=None)


def crossing_probabilities(boundary: Sequence[float], fractions: Iterable[float], drift: float = 0.0) -> list[float]:
    """P(first crossing at look k) for Z_k = S_k / sqrt(t_k), S a Brownian motion with drift."""
    fr = [float(t) for t in fractions]
    out = [float(stats.norm.sf(boundary[0] - drift * math.sqrt(fr[0])))]
    x, f = _first(fr[0], drift)
    for k in range(1, len(fr)):
        x, f = _truncate(x, f, boundary[k - 1] * math.sqrt(fr[k - 1]))
        dt = fr[k] - fr[k - 1]
        out.append(_exit_mass(x, f, boundary[k] * math.sqrt(fr[k]), dt, drift))
        if k + 1 < len(fr):
            x, f = _propagate(x, f, dt, drift)
    return out


def crossing_probability(boundary: Sequence[float], fractions: Iterable[float], drift: float = 0.0) -> float:
    """P(Z_k >= c_k at some look): the level a boundary spends (drift 0), by the module's recursion."""
    return float(sum(crossing_probabilities(boundary, fractions, drift)))


def constant_boundary(looks: int, alpha: float, shape: str = "pocock") -> list[float]:
    """The classical boundary for ``looks`` equally spaced looks: Pocock c_k = C, or O'Brien-Fleming
    c_k = C sqrt(K/k), with C solved so that crossing_probability gives the one-sided level ``alpha``."""
    fr = [(k + 1) / looks for k in range(looks)]

    def bounds(C: float) -> list[float]:
        return [C] * looks if shape == "pocock" else [C * math.sqrt(looks / (k + 1)) for k in range(looks)]
    C = optimize.brentq(lambda C: crossing_probability(bounds(C), fr) - alpha, 1.5, 3.5, xtol=2e-4)
    return bounds(C)


def test_classical_boundaries_match_the_textbook_constants():
    """Jennison and Turnbull, Table 2.1 (two-sided 0.05 = one-sided 0.025 to 3 decimals):
    Pocock C_P(5) = 2.413, C_P(2) = 2.178; O'Brien-Fleming C_B(5) = 2.040."""
    assert constant_boundary(5, 0.025, "pocock")[0] == pytest.approx(2.413, abs=0.002)
    assert constant_boundary(2, 0.025, "pocock")[0] == pytest.approx(2.178, abs=0.002)
    obf = constant_boundary(5, 0.025, "obf")
    assert obf[-1] == pytest.approx(2.040, abs=0.002) and obf[0] == pytest.approx(2.040 * math.sqrt(5), abs=0.005)


def test_lan_demets_spending_boundaries_and_their_level():
    """Lan-DeMets O'Brien-Fleming-type spending, 5 equal looks, one-sided 0.025: 4.877, 3.357,
    2.680, 2.290, 2.031 (as in the R package ldbounds); the level spent is alpha."""
    fr = [0.2, 0.4, 0.6, 0.8, 1.0]
    b = spending_boundary(fr, 0.025, "obf")
    assert b == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=0.003)
    assert crossing_probability(b, fr) == pytest.approx(0.025, abs=2e-4)
    pocock = spending_boundary(fr, 0.025, "pocock")
    assert max(pocock) - min(pocock) < 0.06 and crossing_probability(pocock, fr) == pytest.approx(0.025, abs=2e-4)
    levels = look_levels(3, 10, 0.025, "obf")
    assert len(levels) == 8 and all(a < b for a, b in zip(levels, levels[1:])) and levels[-1] < 0.025
