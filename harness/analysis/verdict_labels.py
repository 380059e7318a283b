"""Group labels for people (no numeric imports: the CLI imports this at start-up)."""

from __future__ import annotations

from typing import Protocol


class Labelled(Protocol):
    """A verdict row's key (``harness.analysis.verdicts.Verdict`` and the rows like it)."""

    @property
    def model(self) -> str: ...
    @property
    def setting(self) -> str: ...
    @property
    def regime(self) -> str: ...
    @property
    def metric(self) -> str: ...


def regime_label(regime: str) -> str:
    """``pause=0.5s`` -> ``pause 0.5 s``; regimes (warm, woken, new step ...) as they are."""
    if regime.startswith("pause=") and regime.endswith("s"):
        return f"pause {regime[len('pause='):-1]} s"
    return regime


def group_label(v: Labelled) -> str:
    """``model · setting · pause 0.5 s · metric`` for a verdict row."""
    return f"{v.model} · {v.setting} · {regime_label(v.regime)} · {v.metric}"
