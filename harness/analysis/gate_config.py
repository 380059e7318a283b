"""The gate's settings (a plain dataclass, light to import: the CLI reads its defaults for help texts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from harness.errors import BadInput

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
