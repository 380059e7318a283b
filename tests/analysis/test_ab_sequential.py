"""lbench ab's alpha-spending boundaries (harness.analysis.sequential) against the textbook constants;
the rounds, order and looks are tested in test_rounds.py and test_campaign.py."""

import math
from collections.abc import Iterable, Sequence

import pytest
from scipy import optimize, stats

from harness.analysis.sequential import _exit_mass, _first, _propagate, _truncate, spending_boundary


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
    levels = [float(stats.norm.sf(c)) for c in spending_boundary([n / 10 for n in range(3, 11)], 0.025, "obf")]
    assert len(levels) == 8 and all(a < b for a, b in zip(levels, levels[1:])) and levels[-1] < 0.025


def test_many_early_looks_with_shares_below_the_grid_resolution_get_a_boundary():
    """A 15-minute budget of short rounds plans 60 looks: O'Brien-Fleming-like spending gives the early
    looks shares of ~1e-20, below what the grid resolves; they get the top of the search range (no stop
    there) instead of an error, and the boundary still spends its level by the end."""
    fr = [n / 60 for n in range(4, 61)]
    b = spending_boundary(fr, 0.01, "obf")
    assert len(b) == len(fr) and b[0] >= 9 and 2.0 < b[-1] < 2.7
    assert crossing_probability(b, fr) == pytest.approx(0.01, abs=5e-4)
