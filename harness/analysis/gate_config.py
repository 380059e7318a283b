"""The gate's settings (a plain dataclass, light to import: the CLI reads its defaults for help texts)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from harness.errors import BadInput
from harness.units import parse_duration

# which groups vote: "warm" (None: the same), "regimes", or pauses in seconds (parse_gate_on)
GateOn: TypeAlias = "str | Sequence[float] | None"


@dataclass
class GateConfig:
    alpha: float = 0.05
    min_n: int = 5
    threshold: float = 0.05  # equivalence margin
    per_metric: dict[str, float] = field(default_factory=dict)
    slower_rule: str = "margin"  # margin: the interval above 1+m; zero: above 1 (docs/statistics.md)
    target: float = 0.10  # the slowdown "runs needed" is sized for

def parse_gate_on(text: str | None) -> str | tuple[float, ...]:
    """``None``/``warm`` -> ``"warm"``, ``regimes`` -> ``"regimes"``, ``0,1.5`` -> ``(0.0, 1.5)``."""

    if text is None or text.strip() in ("", "warm"):
        return "warm"
    if text.strip() == "regimes":
        return "regimes"
    try:
        pauses = tuple(sorted({float(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise BadInput(f"--gate-on must be 'warm', 'regimes' or pauses in seconds, got {text!r}",
                       where="--gate-on", hint="e.g. --gate-on 0,1.5") from None
    if not pauses or any(p < 0 for p in pauses):
        raise BadInput(f"--gate-on pauses must be >= 0 seconds, got {text!r}", where="--gate-on")
    return pauses


# ---- lbench ab: the gate job's design (harness/analysis/rounds.py decides with it) ------------------

ARMS = ("a", "b", "aa")
ARM_TITLES = {"a": "A", "b": "B", "aa": "A/A"}  # aa: the second copy of A
DEFAULT_ARMS = ("a", "b", "aa")
STATUSES = ("pass", "fail", "inconclusive", "unproven")
EXIT_CODES = {"pass": 0, "fail": 1, "inconclusive": 3, "unproven": 4}


def parse_arms(text: str | None) -> tuple[str, ...]:
    """``"a,b,aa"`` -> ``("a", "b", "aa")``; a and b are required, aa optional, no repeats."""
    if text is None or not text.strip():
        return DEFAULT_ARMS
    arms = tuple(x.strip().lower() for x in text.split(",") if x.strip())
    unknown = [x for x in arms if x not in ARMS]
    if unknown:
        raise BadInput(f"unknown arm {unknown[0]!r} in --arms", where=f"--arms {text}",
                       hint="arms are a (base), b (head) and aa (a second copy of a: the A/A floor), e.g. --arms a,b,aa")
    if len(set(arms)) != len(arms) or "a" not in arms or "b" not in arms:
        raise BadInput("--arms must name a and b once each, and aa at most once", where=f"--arms {text}",
                       hint="e.g. --arms a,b,aa (default) or --arms a,b (no A/A floor)")
    return tuple(a for a in ARMS if a in arms)


@dataclass(frozen=True)
class RoundsConfig:
    """What the gate job decides with: the arms, the gated groups' margins (relative, e.g. 0.02),
    the overall two-sided alpha (the one-sided false-alarm rate is alpha / 2), the slower rule,
    the rounds (before the first look; most), the wall-clock budget and the order's seed."""

    arms: tuple[str, ...] = DEFAULT_ARMS
    margins: Mapping[str, float] = field(default_factory=dict)  # group -> margin; missing: below
    margin: float = 0.03  # the warm group's (pause 0), and every group's when woken_margin is None
    # a woken pause's (> 0): its run levels spread more (docs/statistics.md, "The gate job": 0.052 at 1 s
    # against 0.043 at 0 here), and a 3% band there is rarely reached within 15 minutes
    woken_margin: float | None = 0.10
    alpha: float = 0.02
    slower_rule: str = "zero"
    min_rounds: int = 4
    max_rounds: int = 200  # a cap only: the budget plans the rounds (15 min of 8.6-s rounds is 104)
    budget_s: float | None = 900.0
    seed: int = 0
    position: bool = True
    spending: str = "obf"

    def margin_of(self, group: str) -> float:
        if group in self.margins:
            return float(self.margins[group])
        woken = self.woken_margin is not None and not group.startswith("pause 0 s")
        return float(self.woken_margin if woken and self.woken_margin is not None else self.margin)

    def check(self) -> None:
        if not (math.isfinite(self.margin) and self.margin > 0) or any(
                not (math.isfinite(m) and m > 0) for m in [*self.margins.values(), *([self.woken_margin] if
                                                                                    self.woken_margin is not None else [])]):
            raise BadInput("the margin must be a number > 0", where="--margin",
                           hint="e.g. --margin 0.03 (3%), or per pause: --margin 0=0.02,1=0.10")
        if not 0 < self.alpha < 1:
            raise BadInput(f"alpha must be between 0 and 1, got {self.alpha}", where="--alpha")
        if self.slower_rule not in ("margin", "zero"):
            raise BadInput(f"the slower rule must be 'margin' or 'zero', got {self.slower_rule!r}",
                           where="--slower-rule")
        low = min_rounds_for(self.arms, self.position)
        if self.min_rounds < low or self.max_rounds < self.min_rounds:
            raise BadInput(f"need {low} <= --min-rounds <= --max-rounds", where=f"{self.min_rounds} / {self.max_rounds}",
                           hint=f"with arms {','.join(self.arms)} the fit needs {low} rounds to estimate its noise")
        if self.budget_s is not None and not (math.isfinite(self.budget_s) and self.budget_s > 0):
            raise BadInput("the budget must be a positive duration", where="--budget", hint="e.g. --budget 15m")


def min_rounds_for(arms: Sequence[str], position: bool = True) -> int:
    """Fewest rounds whose fit leaves at least 2 residual degrees of freedom."""
    k = len(arms)
    for n in range(2, 50):
        params = n + (k - 1) + ((k - 1) if position else 0)
        if n * k - params >= 2:
            return n
    return 50




def budget_seconds(text: str) -> float:
    """``--budget``: a duration (``15m``, ``900s``, ``1h``) in seconds; anything else is bad input."""
    try:
        return parse_duration(text)
    except ValueError:
        raise BadInput(f"--budget must be a duration such as 15m, 900s or 1h, got {text!r}", where="--budget") from None


def parse_margins(text: str | None) -> tuple[float, float | None, dict[float, float]]:
    """``--margin``: (the warm margin, the woken pauses' margin, per pause).  Not given: the defaults (3% at
    pause 0, 10% at the others); ``0.03``: that margin for every pause; ``0=0.03,1=0.1``: per pause (the
    pauses not named keep the defaults)."""
    if text is None or not text.strip():
        return RoundsConfig.margin, RoundsConfig.woken_margin, {}
    try:
        if "=" not in text:
            return float(text), None, {}
        per = {}
        for part in text.split(","):
            pause, _, value = part.partition("=")
            per[float(pause)] = float(value)
        return RoundsConfig.margin, RoundsConfig.woken_margin, per
    except ValueError:
        raise BadInput(f"--margin must be a number or pause=number pairs, got {text!r}", where="--margin",
                       hint="e.g. --margin 0.03, or --margin 0=0.03,1=0.10") from None
